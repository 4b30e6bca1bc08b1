"""Quiet exercise notebooks (issue 21, item 4): a failure shows the learner's line and the message
(``%xmode Minimal``), a passing visible test prints one line (``ag.passed``) and never the value of
its last expression (no learner array shown, nothing nbgrader's Validate reads as partial credit)."""
from __future__ import annotations

import ast
import contextlib
import io

import nbformat
import pytest

import autograder as ag
from autograder.selfcheck import run_visible_tests
from conftest import released_notebook

# The chapters that follow these rules (the others join as their notebooks are converted).
QUIET = ["01_phases", "02_static_dynamic", "03_purity", "04_control_flow", "05_shapes",
         "06_async_dispatch", "07_pytrees", "08_prng", "09_sharding", "10_review"]


def test_passed_prints_one_line_and_returns_nothing():
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        result = ag.passed("masked_update", "a frozen subtree stays as it was")
    assert result is None
    lines = buf.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("passed: masked_update (a frozen subtree"), lines


def test_check_my_answers_does_not_repeat_the_cells_lines():
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rows = run_visible_tests({"double": "import autograder as ag\nassert double(2) == 4\nag.passed('double')",
                                  "half": "assert half(2) == 3"},
                                 {"double": lambda x: 2 * x, "half": lambda x: x / 2})
    assert buf.getvalue() == ""
    assert [r["passed"] for r in rows] == [True, False]


def _cells(assignment):
    return nbformat.read(str(released_notebook(assignment)), as_version=4).cells


def _is_test(cell):
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and meta.get("grade") and not meta.get("solution")


@pytest.mark.parametrize("assignment", QUIET)
def test_every_visible_test_ends_with_one_passed_line(assignment):
    tests = [c for c in _cells(assignment) if _is_test(c)]
    assert tests
    for cell in tests:
        gid = cell.metadata["nbgrader"]["grade_id"]
        body = ast.parse(cell.source).body
        last = body[-1]
        ok = (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
              and ast.unparse(last.value.func) == "ag.passed"
              and last.value.args and isinstance(last.value.args[0], ast.Constant)
              and last.value.args[0].value == gid.removeprefix("test_"))
        assert ok, f"{assignment}: {gid} must end with ag.passed({gid.removeprefix('test_')!r}, ...)"
        assert sum("ag.passed(" in ast.unparse(s) for s in body) == 1, f"{gid}: one passed line only"


@pytest.mark.parametrize("assignment", QUIET)
def test_exercise_notebook_sets_minimal_tracebacks_before_any_answer(assignment):
    for cell in _cells(assignment):
        if cell.cell_type != "code":
            continue
        if cell.metadata.get("nbgrader", {}).get("solution") or _is_test(cell):
            pytest.fail(f"{assignment}: no `%xmode Minimal` before the first exercise")
        if any(line.strip() == "%xmode Minimal" for line in cell.source.splitlines()):
            return
    pytest.fail(f"{assignment}: no `%xmode Minimal`")
