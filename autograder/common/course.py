"""The course: its root, its assignments and their source notebooks, found in one place.

A course root is a folder holding ``solutions/<assignment>/<assignment>.ipynb`` (nbgrader's
source notebooks, with solutions and hidden tests) and, once released, ``exercises/``.
Everything that needs an assignment or its source notebook (grading, the instructor's
commands, ``make release``, the benchmarks) asks this module.
"""
from __future__ import annotations

import os
from pathlib import Path

from .errors import GradingError

SOURCE = "solutions"     # nbgrader's source folder (instructor-only)
RELEASE = "exercises"    # what learners get
JUDGE = "judge.py"       # an assignment's trusted tests (never copied where a kernel can read it)
CHECK_TAG = "check-my-answers"  # the tag of a released notebook's "Check my answers" cells (make
                                # release adds them; the grader never runs them)


def package_root() -> Path:
    """The directory that contains the ``autograder`` package."""
    return Path(__file__).resolve().parent.parent.parent


def find_course_root(start: Path | None = None, course_root: str = "") -> Path:
    """The course root (the folder holding ``solutions/``).

    Looked up in ``course_root`` (the setting ``AUTOGRADER_COURSE_ROOT``), then upwards from
    ``start`` and the current directory, then beside the package (a checkout).
    """
    candidates = [Path(course_root)] if course_root else []
    for base in (start, Path.cwd()):
        if base is not None:
            base = Path(base).resolve()
            candidates += [base, *base.parents]
    candidates.append(package_root())
    for c in candidates:
        if (c / SOURCE).is_dir():
            return c
    raise GradingError("cannot find the course's solutions/ folder: run from the course checkout "
                       "or set AUTOGRADER_COURSE_ROOT")


def assignments(root: Path) -> list[str]:
    """The assignments of the course at ``root``: the folders of ``solutions/``, sorted."""
    return sorted(p.name for p in (Path(root) / SOURCE).iterdir()
                  if p.is_dir() and not p.name.startswith("."))


def source_notebook(assignment: str, root: Path) -> Path:
    """The nbgrader source notebook of ``assignment``."""
    folder = Path(root) / SOURCE / assignment
    if not folder.is_dir():
        raise GradingError(f"unknown assignment {assignment!r} (the notebook's folder name); "
                           f"known assignments: {', '.join(assignments(root))}")
    preferred = folder / f"{assignment}.ipynb"
    if preferred.exists():
        return preferred
    notebooks = sorted(folder.glob("*.ipynb"))
    if len(notebooks) != 1:
        raise GradingError(f"assignment {assignment!r} has no single source notebook in {folder}")
    return notebooks[0]


def source_notebooks(root: Path) -> list[Path]:
    """Every assignment's source notebook, in assignment order."""
    return [source_notebook(a, root) for a in assignments(root)]


def released_notebook(assignment: str, root: Path) -> Path:
    """The released (learner's) notebook of ``assignment``."""
    return Path(root) / RELEASE / assignment / f"{assignment}.ipynb"


_SOURCES: dict = {}


def read_source(source: Path):
    """The source notebook, parsed once per process and version (callers must not modify it)."""
    import nbformat

    st = os.stat(source)
    key = (str(source), st.st_mtime_ns, st.st_size)
    if key not in _SOURCES:
        _SOURCES[key] = nbformat.read(str(source), as_version=4)
    return _SOURCES[key]


def test_cells(source_path: Path):
    """``[(grade_id, points)]`` of the autograded test cells of a source notebook, in order.

    Read as nbgrader's ``is_grade`` and ``is_solution`` do, without importing nbgrader: the list
    is also what a result reports when grading itself failed (nbgrader unusable included)."""
    return [(c["metadata"]["nbgrader"]["grade_id"], float(c["metadata"]["nbgrader"].get("points", 0)))
            for c in read_source(Path(source_path)).cells if is_test_cell(c)]


def is_test_cell(cell) -> bool:
    """An autograded test cell: a code cell nbgrader grades that is not also a solution."""
    meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def data_files(source: Path):
    """The files an assignment ships beside its notebook for the learner's kernel: data, not
    notebooks, hidden files, the judge or its byte code."""
    return [item for item in Path(source).parent.iterdir()
            if item.suffix not in (".ipynb", ".pyc") and not item.name.startswith(".")
            and item.name != "__pycache__" and not is_judge_file(item.name)]


def is_judge_file(name: str) -> bool:
    """``judge.py`` or ``judge_<exercise>.py``: trusted tests, never where a kernel can read them."""
    return name == JUDGE or (name.startswith("judge_") and name.endswith(".py"))


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "jax-course-autograder"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)  # template gradebooks hold hidden tests
    return path
