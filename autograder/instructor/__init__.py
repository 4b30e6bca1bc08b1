"""The instructor's workflow on top of nbgrader: collect -> autograde -> feedback -> export.

Course state lives in a course-state folder (default ``.course/`` beside ``nbgrader_config.py``,
git-ignored): nbgrader's ``submitted/``, ``autograded/`` and ``feedback/`` layouts and the
gradebook (SQLite by default; any SQLAlchemy URL through ``--db-url`` or ``$COURSE_DB_URL``).

The verbs are ``collect`` (an LMS export's ``<student>_<anything>.ipynb`` files or zips into
``submitted/``; ``nbgrader collect`` is :mod:`.exchange`'s), ``autograde`` (into the gradebook
and ``autograded/``), ``feedback`` (HTML pages), ``export`` (CSVs) and ``report``
(:mod:`.report`): the functions of those names, the subcommands of
:func:`.cli.add_parsers`.

A shared gradebook (``COURSE_DB_URL=postgresql+psycopg://user:password@host/db``) may be used
by any number of ``autograde``/``collect``/``export`` runs at once, on one machine or several:
every run that touches it (nbgrader's schema creation, an assignment's cells, one submission's
grades, an export) holds a PostgreSQL advisory lock meanwhile (a file lock beside a SQLite
gradebook), and one submission's grades are written in one transaction. Grading itself, the
slow part, runs outside the lock. A rerun rewrites the same rows (nothing is duplicated) and
reuses a result whose submission, assignment, grader and limits are unchanged
(``--regrade`` grades everything again).
"""
from .cli import add_parsers, run
from .collecting import collect, student_of
from .course import Course
from .export import class_report, export
from .feedback_pages import feedback
from .gradebook import GradebookError, check_gradebook, course_gradebook, gradebook_lock
from .grading import autograde

__all__ = ["Course", "collect", "autograde", "feedback", "export", "class_report", "student_of",
           "GradebookError", "check_gradebook", "course_gradebook", "gradebook_lock", "add_parsers", "run"]
