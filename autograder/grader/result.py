"""The result of grading one notebook: the JSON contract of ``python -m autograder grade``
(:meth:`Result.as_dict`), the zero results of notebooks that could not be graded, and the
human-readable forms."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ..common.course import find_course_root, source_notebook, test_cells


@dataclass
class Result:
    notebook: str
    assignment: str | None
    score: float = 0.0
    max_score: float = 0.0
    tests: list = field(default_factory=list)
    error: str | None = None
    containment: str | None = None  # how the kernel was contained; None when nothing ran
    containment_reason: str = ""    # why a kernel ran without (part of) the sandbox

    def as_dict(self) -> dict:
        """The JSON contract: every field, but ``error`` and ``containment(_reason)`` only when set."""
        return {k: v for k, v in asdict(self).items() if v or k not in _OPTIONAL}

    @classmethod
    def from_dict(cls, d: dict) -> Result:
        """The result of :meth:`as_dict`'s ``d`` (other keys ignored)."""
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


_OPTIONAL = ("error", "containment", "containment_reason")


def zero_result(given: str, assignment, source, error) -> Result:
    """A result with every test of the source notebook (its points as ``max_points``) at zero.

    For a submission that could not be graded: ``error`` says why, and each test's feedback
    repeats it. Without a source notebook (an unknown assignment) there are no tests to list.
    """
    res = Result(given, assignment, error=error)
    if source is not None:
        for grade_id, points in test_cells(source):
            res.tests.append({"grade_id": grade_id, "exercise": grade_id.removeprefix("test_"),
                              "points": 0.0, "max_points": points, "passed": False,
                              "feedback": f"Not graded: {error}"})
        res.max_score = sum(t["max_points"] for t in res.tests)
    return res


def failed_result(path, error: str, root: Path | None = None) -> Result:
    """The result of a notebook whose grading itself failed (an internal error, a dead worker):
    every test of its assignment at zero, when the assignment's source can still be found."""
    given = str(path)
    assignment = assignment_of(path)
    try:
        source = source_notebook(assignment, Path(root) if root else find_course_root(Path(path).parent))
        return zero_result(given, assignment, source, error)
    except Exception:  # noqa: BLE001 - the error is reported either way
        return Result(given, assignment, error=error)


def assignment_of(path) -> str:
    """A notebook's assignment: the name of the folder the path gives it in (made absolute, ``..``
    resolved, links not followed: a notebook linked into ``exercises/03_purity/`` is 03_purity's,
    wherever its file lies)."""
    return Path(os.path.abspath(path)).parent.name


def format_human(result: Result) -> str:
    lines = [f"{result.notebook} ({result.assignment}): {result.score:g}/{result.max_score:g}"]
    if result.error:
        lines.append(f"  could not be graded: {result.error}")
    for t in result.tests:
        mark = "PASS" if t["passed"] else "FAIL"
        lines.append(f"  [{mark}] {t['exercise']} ({t['points']:g}/{t['max_points']:g})")
        if not t["passed"] and t["feedback"]:
            lines.append(f"         {t['feedback']}")
    return "\n".join(lines)


def format_progress(results) -> str:
    """Progress across chapters, for a person: one row per notebook (its assignment, exercises
    passed of all, points) and a total line."""
    assignments = [r.assignment or "?" for r in results]
    labels = [a if assignments.count(a) == 1 else f"{a} ({r.notebook})"
              for a, r in zip(assignments, results)]
    rows = []
    for label, r in zip(labels, results):
        passed = sum(bool(t["passed"]) for t in r.tests)
        rows.append((label, f"{passed}/{len(r.tests)}", f"{r.score:g}/{r.max_score:g}",
                     "not graded" if r.error else ""))
    passed = sum(bool(t["passed"]) for r in results for t in r.tests)
    total = sum(len(r.tests) for r in results)
    rows.append(("total", f"{passed}/{total}",
                 f"{sum(r.score for r in results):g}/{sum(r.max_score for r in results):g}", ""))
    rows.insert(0, ("assignment", "exercises passed", "points", ""))
    wl, we, wp = (max(len(r[i]) for r in rows) for i in range(3))
    lines = ["Progress by chapter"]
    for label, ex, pts, note in rows:
        if label == "total":
            lines.append("  " + "-" * (wl + we + wp + 4))
        lines.append(f"  {label:<{wl}}  {ex:>{we}}  {pts:>{wp}}  {note}".rstrip())
    return "\n".join(lines)
