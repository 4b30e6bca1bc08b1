"""``collect``: an LMS export's ``<student>_<anything>.ipynb`` files or zips into nbgrader's
``submitted/`` (``nbgrader collect`` is :mod:`.exchange`'s), and the submissions collected."""
from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

from .course import Course
from .files import copy_atomic

_STUDENT_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9.\-]*)_")


def student_of(filename: str) -> str | None:
    """The student id of an LMS export's file name ``<student>_<anything>``."""
    m = _STUDENT_RE.match(Path(filename).name)
    return m.group(1) if m else None


def collect(folder, assignment: str, course: Course, refused: list | None = None) -> list[tuple[str, Path]]:
    """Copy ``<student>_*.ipynb`` files and ``<student>_*.zip`` archives from ``folder`` into
    nbgrader's submitted layout. Returns ``[(student, destination)]``. A notebook or zip whose
    name has no student id, and a zip that holds no notebook, are refused: named on stderr,
    appended to ``refused`` as ``(file name, why)``, and nothing of them is written (a
    submission collected before stays as it was); any other file is skipped, named."""
    if assignment not in course.assignments():
        raise SystemExit(f"unknown assignment {assignment!r}; known: {', '.join(course.assignments())}")
    limit = course.settings.max_notebook_bytes  # more is not read by the grader: never copied whole here
    refused = [] if refused is None else refused
    collected = []
    for item in sorted(Path(folder).iterdir()):
        student = student_of(item.name)
        if item.suffix not in (".ipynb", ".zip"):
            print(f"collect: skipped {item.name} (expected <student>_<anything>.ipynb or .zip)",
                  file=sys.stderr)
            continue
        if student is None:
            refused.append((item.name, "its name has no student id (expected <student>_<anything>"
                                       f"{item.suffix})"))
            continue
        dest = course.submitted / student / assignment / f"{assignment}.ipynb"
        size = None
        if item.suffix == ".zip":
            try:
                with zipfile.ZipFile(item) as zf:
                    names = [n for n in zf.namelist() if n.endswith(".ipynb") and "__MACOSX" not in n]
                    best = next((n for n in names if Path(n).stem == assignment), names[0] if names else None)
                    if best is None:
                        refused.append((item.name, "it holds no notebook (.ipynb); nothing of it was "
                                                   f"collected for {student}"))
                        continue
                    with zf.open(best) as src:
                        size = copy_atomic(dest, src, limit)
            except Exception as exc:  # noqa: BLE001 - a bad zip (corrupt, encrypted, truncated...)
                print(f"collect: {item.name} cannot be unzipped ({type(exc).__name__}: {exc}); kept as "
                      "is for grading", file=sys.stderr)
        if size is None:  # a notebook, or a zip that cannot be unzipped: copied whole, the grader says its size
            with open(item, "rb") as src:
                size = copy_atomic(dest, src, max(limit, item.stat().st_size))
        elif size > limit:
            print(f"collect: {item.name} holds a notebook over {limit / 2**20:.0f} MB uncompressed "
                  "(AUTOGRADER_MAX_NOTEBOOK_MB): only its beginning was unzipped, and grading will "
                  "say it is too large", file=sys.stderr)
        collected.append((student, dest))
    for name, why in refused:
        print(f"collect: refused {name}: {why}", file=sys.stderr)
    return collected


def submissions(course: Course, assignments=None):
    """``[(student, assignment, notebook path or None)]`` found in the submitted folder."""
    wanted = set(assignments or course.assignments())
    found = []
    if not course.submitted.is_dir():
        return found
    for student_dir in sorted(p for p in course.submitted.iterdir() if p.is_dir()):
        for a_dir in sorted(p for p in student_dir.iterdir() if p.is_dir() and p.name in wanted):
            nbs = sorted(a_dir.glob("*.ipynb"))
            pick = next((n for n in nbs if n.stem == a_dir.name), nbs[0] if nbs else None)
            found.append((student_dir.name, a_dir.name, pick))
    return found
