"""nbgrader configuration: source is solutions/, release is exercises/, course state in .course/."""
import os
import re

c = get_config()  # noqa: F821 - provided by nbgrader

ROOT = os.path.dirname(os.path.abspath(__file__))
STATE = os.environ.get("COURSE_STATE", os.path.join(ROOT, ".course"))

c.CourseDirectory.root = ROOT
c.CourseDirectory.course_id = "jax-mental-model"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = os.path.relpath(os.path.join(STATE, "submitted"), ROOT)
c.CourseDirectory.autograded_directory = os.path.relpath(os.path.join(STATE, "autograded"), ROOT)
c.CourseDirectory.feedback_directory = os.path.relpath(os.path.join(STATE, "feedback"), ROOT)
# Any SQLAlchemy URL works here (e.g. postgresql://...) for a shared gradebook.
# The trusted judge files (solutions/<a>/judge.py, judge_<exercise>.py) are never released to learners.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "judge.py", "judge_*.py"]
# A bare postgresql:// gradebook URL means psycopg 3 (requirements.txt), as in `python -m autograder`.
c.CourseDirectory.db_url = re.sub(r"^postgres(ql)?://", "postgresql+psycopg://",
                                  os.environ.get("COURSE_DB_URL", "sqlite:///" + os.path.join(STATE, "gradebook.db")))
c.Exchange.root = os.path.join(STATE, "exchange")
c.Exchange.path_includes_course = True

# A submission is shown sanitized wherever nbgrader renders it as HTML (the formgrader, feedback):
# no scripts, event handlers or unsafe tags from a learner's outputs or Markdown. The formgrader
# runs in the instructor's browser session, where a learner's script could change grades.
c.HTMLExporter.sanitize_html = True

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.OverwriteCells.add_missing_cells = True
c.Execute.timeout = 120

# nbgrader's own autograde (the formgrader's Autograde button, `nbgrader autograde`) grades with
# the course's grader (`python -m autograder autograde` for that submission): the same grades,
# graded notebook and feedback, never scores from the visible test cells alone.
c.Autograde.sanitize_preprocessors = []  # the course's grader reads the submission itself
c.Autograde.autograde_preprocessors = ["autograder.instructor.formgrader.CourseAutograde"]
# Releasing (the formgrader's Release button, `nbgrader release_assignment`) refuses an
# exercises/<assignment>/ that is not exactly what `make release` generates from solutions/.
c.ExchangeFactory.release_assignment = "autograder.instructor.formgrader.CheckedReleaseAssignment"
# Collecting (the formgrader's Collect button, `nbgrader collect`) takes only submissions made by
# the learner they name: the exchange's inbound is writable by every learner (nbgrader issue
# 1225); each entry is copied once without following links, then the copy is checked: a folder in
# another's name, a forged or truncated one is refused, named and set aside.
c.ExchangeFactory.collect = "autograder.instructor.exchange.OwnedCollect"
# Submitting leaves the learner's inbound entry theirs alone (mode 755; nbgrader's submit makes it 777).
c.ExchangeFactory.submit = "autograder.instructor.exchange.PrivateSubmit"
