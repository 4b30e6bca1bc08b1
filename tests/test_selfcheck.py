"""The "check my answers" cell: a per-exercise table of the visible tests."""
from __future__ import annotations

import nbformat

from autograder.selfcheck import check_my_answers
from conftest import ASSIGNMENTS, released_notebook


def test_table_reports_pass_and_feedback():
    ns = {"double": lambda x: 2 * x}
    tests = {"double": "import autograder as ag\nag.check_equal(double(2), 4)",
             "triple": "import autograder as ag\nag.call(triple, 1)"}
    report = check_my_answers(tests, ns)
    assert [r["passed"] for r in report] == [True, False]
    assert "NameError" in report[1]["feedback"] or "triple" in report[1]["feedback"]
    assert "1/2 exercises pass" in str(report)
    assert "<table>" in report._repr_html_()


def test_every_released_notebook_ends_with_the_self_check():
    for a in ASSIGNMENTS:
        nb = nbformat.read(str(released_notebook(a)), as_version=4)
        last = nb.cells[-1]
        assert "check_my_answers(VISIBLE_TESTS)" in last.source
        ns = {}
        exec(last.source.replace("check_my_answers(VISIBLE_TESTS)", ""), ns)  # noqa: S102
        tests = {c.metadata["nbgrader"]["grade_id"].removeprefix("test_") for c in nb.cells
                 if c.metadata.get("nbgrader", {}).get("grade")}
        assert set(ns["VISIBLE_TESTS"]) == tests
