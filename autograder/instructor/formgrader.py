"""nbgrader's own autograde (the formgrader's Autograde button, ``nbgrader autograde``) runs the
course's grader: ``nbgrader_config.py`` names :class:`CourseAutograde` as nbgrader's only
autograde step.

nbgrader's autograde would execute the learner's notebook in the instructor's own kernel and
score its visible test cells (the hidden tests live in the judge, which nbgrader never runs),
overwriting the course's grades with those. Instead, for each submission it is asked to grade,
:class:`CourseAutograde` runs ``python -m autograder autograde``'s own code for that one
submission (the same result, gradebook rows, graded notebook and ``result.json``) and hands
nbgrader the notebook the course's grader saved, for the formgrader to show. When the course's
grader could not grade it, nbgrader is told so (the formgrader says "error" with the reason) and
the gradebook marks its tests not graded (:func:`~autograder.instructor.grading.autograde`).

The grading runs in a process of its own (``python -m autograder autograde A --student S``), not
in the process that pressed the button (the instructor's Jupyter server, whose threads would keep
the grading process from a mount namespace of its own: the box would be a folder on disk).
"""
from __future__ import annotations

import os
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment
from traitlets import Bool


class CourseAutograde(Preprocessor):
    """nbgrader's autograde step that grades with the course's grader instead."""

    enabled = Bool(True)  # nbconvert's preprocessors are off unless enabled

    def preprocess(self, nb, resources):
        import json
        import subprocess
        import sys

        import nbformat

        from . import Course

        info = resources["nbgrader"]
        student, assignment = info["student"], info["assignment"]
        coursedir = self.config.CourseDirectory
        root = Path(coursedir.get("root") or os.getcwd())
        submitted = Path(coursedir.get("submitted_directory") or "submitted")
        state = (root / submitted).parent  # nbgrader_config.py puts every folder in the course state
        course = Course(root=root, state=state, db_url=info.get("db_url"))
        env = dict(os.environ, COURSE_DB_URL=course.db_url)  # never on a command line (its password)
        ran = subprocess.run([sys.executable, "-m", "autograder", "autograde", assignment, "--student", student,
                              "--root", str(root), "--state", str(state)], capture_output=True, text=True,
                             cwd=root, env=env, stdin=subprocess.DEVNULL)
        # one submission: "autograded 1 submission(s)" when it was graded (or recorded as zero: no
        # notebook the grader can read), else it is named NOT graded with the reason on stderr
        if ran.returncode not in (0, 1) or not ran.stdout.startswith("autograded 1 submission(s)"):
            reasons = [line.strip() for line in ran.stderr.splitlines()
                       if line.strip().startswith(f"{student}/{assignment}: ")]
            reason = "; ".join(reasons) or (ran.stderr.strip().splitlines() or [f"exit status {ran.returncode}"])[-1]
            raise RuntimeError(f"the course's grader could not grade {student}/{assignment} (marked not "
                               f"graded in the gradebook where it could be): {reason}")
        result = course.autograded / student / assignment / "result.json"
        graded = course.autograded / student / assignment / f"{assignment}.ipynb"
        if graded.exists():
            nb = nbformat.read(str(graded), as_version=4)
        row = json.loads(result.read_text())
        self.log.info("%s/%s graded by the course's grader: %g / %g", student, assignment,
                      row["score"], row["max_score"])
        return nb, resources


def release_differences(root, assignment: str) -> list[str]:
    """What differs between ``root``'s exercises/<assignment>/ and what `make release` generates
    from its solutions/ now (scripts/release.py's check)."""
    import importlib.util

    script = Path(__file__).resolve().parents[2] / "scripts" / "release.py"  # the checkout's
    spec = importlib.util.spec_from_file_location("_course_release", script)
    release = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(release)
    return release.check(Path(root), [assignment])


class CheckedReleaseAssignment(ExchangeReleaseAssignment):
    """nbgrader's release_assignment (the formgrader's Release button), which first checks that
    exercises/<assignment>/ is exactly what `make release` generates from solutions/: a
    notebook solved or edited in exercises/ is never handed to the room. The course's inbound
    is made sticky (:mod:`.exchange`)."""

    def init_dest(self):
        from .exchange import make_sticky

        super().init_dest()
        make_sticky(self.inbound_path, self.log)

    def init_src(self):
        super().init_src()
        assignment = self.coursedir.assignment_id
        # The check generates the assignment afresh with an nbgrader of its own, whose log is
        # this one: its lines (a temporary folder's conversions, and a "[CRITICAL] Unwritable
        # directory" about nbgrader's default exchange, which it never uses) are not the release's.
        was, self.log.disabled = self.log.disabled, True
        try:
            diffs = release_differences(self.coursedir.root, assignment)
        finally:
            self.log.disabled = was
        if diffs:
            self.fail(f"not releasing {assignment}: exercises/{assignment} is not what `make release` "
                      "generates from solutions/ (run `make release`, never edit exercises/ by hand): "
                      + "; ".join(diffs))
