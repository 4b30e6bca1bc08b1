"""One course: its root, its state folder, its gradebook's URL, the command's settings."""
from __future__ import annotations

from pathlib import Path

from ..common.course import assignments, find_course_root
from ..common.settings import Settings
from .gradebook import gradebook_url

class Course:
    """One course and the command's settings: its root (holding solutions/), its state folder,
    its gradebook. ``state``, ``db_url`` and ``reports`` (a command's flags) go over
    ``settings`` (default: :meth:`Settings.load`, the environment's)."""

    def __init__(self, root=None, state=None, db_url=None, reports=None, settings: Settings | None = None):
        self.settings = settings = settings or Settings.load()
        self.root = Path(root).resolve() if root else find_course_root(course_root=settings.course_root)
        self.state = Path(state or settings.course_state or self.root / ".course").resolve()
        self.db_url = gradebook_url(db_url or settings.course_db_url or f"sqlite:///{self.state / 'gradebook.db'}")
        self.submitted = self.state / "submitted"
        self.autograded = self.state / "autograded"
        self.feedback = self.state / "feedback"
        # what the instructor opens (grade CSVs, the class report): a folder their JupyterLab shows
        self.reports = Path(reports or settings.course_reports or self.state).resolve()

    def assignments(self):
        return assignments(self.root)
