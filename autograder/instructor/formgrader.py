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
the gradebook keeps the grade it had.
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
        import nbformat

        from . import Course, autograde

        info = resources["nbgrader"]
        student, assignment = info["student"], info["assignment"]
        coursedir = self.config.CourseDirectory
        root = Path(coursedir.get("root") or os.getcwd())
        submitted = Path(coursedir.get("submitted_directory") or "submitted")
        state = (root / submitted).parent  # nbgrader_config.py puts every folder in the course state
        course = Course(root=root, state=state, db_url=info.get("db_url"))
        rows, missed, _ = autograde(course, [assignment], students=[student], progress=False)
        if missed or not rows:
            reason = "; ".join(n["reason"] for n in missed) or "no submission found"
            raise RuntimeError(f"the course's grader could not grade {student}/{assignment} (its "
                               f"grade, if it had one, is kept): {reason}")
        graded = course.autograded / student / assignment / f"{assignment}.ipynb"
        if graded.exists():
            nb = nbformat.read(str(graded), as_version=4)
        self.log.info("%s/%s graded by the course's grader: %g / %g", student, assignment,
                      rows[0]["score"], rows[0]["max_score"])
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
