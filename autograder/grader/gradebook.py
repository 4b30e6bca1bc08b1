"""nbgrader's gradebook, as grading uses it.

- :func:`template_gradebook`: the source notebook's cells recorded once per source version
  (``generate_assignment``'s ``SaveCells``), cached, and copied for each submission:
  :func:`scratch_gradebook` (nothing is written into the checkout);
- :func:`save_autogrades`: nbgrader's ``SaveAutoGrades`` on the executed notebook, read back
  as the per-test rows of a result.
"""
from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ..common.course import cache_dir, test_cells

STUDENT = "learner"


def nbgrader_resources(assignment, notebook_id, db_url, workdir=None) -> dict:
    """The ``resources`` nbgrader's preprocessors expect for one notebook of ``assignment``."""
    res = {"nbgrader": {"assignment": assignment, "notebook": notebook_id, "student": STUDENT,
                        "db_url": db_url}, "unique_key": notebook_id}
    if workdir is not None:
        res["metadata"] = {"path": str(workdir)}
    return res


def ensure_tools_on_path():
    """nbgrader's gradebook runs the ``alembic`` command: make this Python's scripts findable."""
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def alembic_version_once() -> None:
    """nbgrader asks the ``alembic`` command (a subprocess, seconds) for its schema version each
    time it creates a gradebook: make it findable (:func:`ensure_tools_on_path`) and ask it at
    most once per process, and only when a new gradebook is actually created."""
    import nbgrader.api as api

    ensure_tools_on_path()
    if not hasattr(api.get_alembic_version, "cache_info"):  # not cached yet
        api.get_alembic_version = functools.cache(api.get_alembic_version)


def build_gradebook(source_path: Path, assignment: str, db_url: str) -> None:
    """Record the source notebook's cells in a gradebook, as ``generate_assignment`` does (its
    preprocessors up to ``SaveCells``)."""
    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import (CheckCellMetadata, ClearOutput, ClearSolutions, ComputeChecksums,
                                        LockCells, SaveCells)

    nb = nbformat.read(str(source_path), as_version=4)
    with Gradebook(db_url) as gb:
        gb.update_or_create_assignment(assignment)
    res = nbgrader_resources(assignment, source_path.stem, db_url)
    for pp in (LockCells, ClearSolutions, ClearOutput, CheckCellMetadata, ComputeChecksums, SaveCells):
        nb, res = pp().preprocess(nb, res)


def template_gradebook(source: Path, assignment: str) -> Path:
    """A gradebook holding the source notebook's cells, built once per source version and copied
    for every submission (nbgrader's gradebook is slow to create)."""
    import hashlib

    import nbgrader

    digest = hashlib.sha256(source.read_bytes() + assignment.encode() + nbgrader.__version__.encode()).hexdigest()[:20]
    path = cache_dir() / f"{assignment}-{digest}.db"
    if not path.exists():
        from nbgrader.api import Gradebook

        alembic_version_once()
        fd, tmp = tempfile.mkstemp(suffix=".db", dir=path.parent)
        os.close(fd)
        os.unlink(tmp)
        build_gradebook(source, assignment, f"sqlite:///{tmp}")
        with Gradebook(f"sqlite:///{tmp}") as gb:
            gb.update_or_create_student(STUDENT)
            gb.update_or_create_submission(assignment, STUDENT)
        os.replace(tmp, path)
    return path


def scratch_gradebook(source: Path, assignment: str, folder: Path) -> str:
    """A gradebook of one submission in ``folder`` (a copy of the template, readable by the
    grader only); returns its URL."""
    db_path = Path(folder) / "gradebook.db"
    shutil.copy(template_gradebook(source, assignment), db_path)
    os.chmod(db_path, 0o600)
    return f"sqlite:///{db_path}"


def save_autogrades(nb, res, source: Path, feedback: dict) -> list[dict]:
    """nbgrader's ``SaveAutoGrades`` on the executed notebook, then one row per test of the
    source: its points (zero for a test absent from ``feedback``, i.e. never scored) and, when it
    lost points, the learner-facing ``feedback`` for it."""
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import SaveAutoGrades

    SaveAutoGrades().preprocess(nb, res)
    info = res["nbgrader"]
    rows = []
    with Gradebook(info["db_url"]) as gb:
        submission = gb.find_submission_notebook(info["notebook"], info["assignment"], STUDENT)
        grades = {g.name: g for g in submission.grades}
        for grade_id, points in test_cells(source):
            g = grades.get(grade_id)
            scored = grade_id in feedback and g is not None and g.auto_score is not None
            got = float(g.auto_score) if scored else 0.0
            rows.append({
                "grade_id": grade_id, "exercise": grade_id.removeprefix("test_"),
                "points": got, "max_points": points, "passed": got == points,
                "feedback": "" if got == points else (feedback.get(grade_id) or "This test did not run."),
            })
    return rows
