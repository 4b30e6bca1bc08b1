"""The "check my answers" cell: a per-exercise table of the visible tests.

Behavioural: released notebooks are filled the way a learner fills them and executed in a fresh
kernel; what the last cell shows is what the learner reads.
"""
from __future__ import annotations

import asyncio
import html as html_module
import re

import nbformat
import pytest

from autograder.selfcheck import check_my_answers
from conftest import ASSIGNMENTS, fill_answers, ipc_manager, released_notebook, solution_notebook, wrong_answers

pytestmark = pytest.mark.xdist_group("selfcheck")

# Assignments whose notebooks execute in seconds, each with a known-wrong answer that its
# *visible* tests catch (the self-check runs no hidden test): (grade_id, a phrase of its feedback).
CASES = {
    "01_phases": ("matmul_flops", "matmul_flops(16) is 3072.0"),
    "03_purity": ("step", "`step` changed the `state` dict it was given in place"),
}


def test_table_reports_pass_and_feedback():
    ns = {"double": lambda x: 2 * x}
    tests = {"double": "import autograder as ag\nag.check_equal(double(2), 4)",
             "triple": "import autograder as ag\nag.call(triple, 1)"}
    report = check_my_answers(tests, ns)
    assert [r["passed"] for r in report] == [True, False]
    assert "NameError" in report[1]["feedback"] or "triple" in report[1]["feedback"]
    assert "1/2 exercises pass" in str(report)
    assert "<table>" in report._repr_html_()


def test_every_released_notebook_ends_with_a_short_self_check():
    """A few lines that name the assignment; the tests they run are the notebook's own visible
    test cells, shipped with the package by `make release`."""
    from autograder.selfcheck import visible_tests

    for a in ASSIGNMENTS:
        nb = nbformat.read(str(released_notebook(a)), as_version=4)
        last = nb.cells[-1]
        code = [line for line in last.source.splitlines() if line.strip() and not line.startswith("#")]
        assert code == ["import autograder as ag", f"ag.check_my_answers({a!r})"], last.source
        cells = {c.metadata["nbgrader"]["grade_id"].removeprefix("test_"): c.source for c in nb.cells
                 if c.metadata.get("nbgrader", {}).get("grade")}
        assert visible_tests(a) == cells, f"{a}: the shipped visible tests are not the notebook's test cells"


def test_unknown_assignment_is_a_clear_error():
    with pytest.raises(ValueError, match="no visible tests for '99_nothing'"):
        check_my_answers("99_nothing")
    with pytest.raises(ValueError, match="not an assignment name"):
        check_my_answers("../solutions")


def _solutions(assignment):
    """``{grade_id: source}`` of the answer cells of the assignment's solution notebook."""
    nb = nbformat.read(str(solution_notebook(assignment)), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution")}


def _known_wrong(assignment, grade_id, phrase):
    for item in wrong_answers(assignment).get(grade_id, []):
        if item[1] == phrase:
            return item[0]
    pytest.fail(f"the judge files of {assignment} have no WRONG {grade_id} with feedback {phrase!r}")


async def _execute(path):
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    client = NotebookClient(nb, km=ipc_manager(asynchronous=True), timeout=300, allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    await client.async_execute()
    return nb


def _self_check_output(nb):
    """(text, html) of what the last cell (the self-check) displayed."""
    last = nb.cells[-1]
    assert "check-my-answers" in last.metadata.get("tags", [])
    errors = [o for o in last.outputs if o.output_type == "error"]
    assert not errors, f"the self-check cell raised: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    data = next(o.data for o in last.outputs if o.output_type == "execute_result")
    return data["text/plain"], data.get("text/html", "")


@pytest.fixture(scope="module", params=[pytest.param(a, marks=pytest.mark.notebook) for a in CASES])
def executed(request, tmp_path_factory):
    """The released notebook filled with every solution, and again with one known-wrong answer,
    both executed (concurrently) in fresh kernels."""
    a = request.param
    grade_id, phrase = CASES[a]
    tmp = tmp_path_factory.mktemp(f"selfcheck-{a}")
    answers = _solutions(a)
    solved = fill_answers(released_notebook(a), answers, tmp / "solved" / a / f"{a}.ipynb")
    wrong = fill_answers(released_notebook(a), {**answers, grade_id: _known_wrong(a, grade_id, phrase)},
                         tmp / "wrong" / a / f"{a}.ipynb")

    async def both():
        return await asyncio.gather(_execute(solved), _execute(wrong))

    solved_nb, wrong_nb = asyncio.run(both())
    return a, len(answers), grade_id, phrase, solved_nb, wrong_nb


def test_solved_notebook_reports_every_exercise_passing(executed):
    a, n, _, _, solved_nb, _ = executed
    text, html = _self_check_output(solved_nb)
    assert f"{n}/{n} exercises pass their visible tests" in text, text
    rows = text.splitlines()[:-1]
    assert len(rows) == n and all(re.search(r"\s+passed\s*$", r) for r in rows), text
    assert "FAILED" not in text and "crimson" not in html


def test_known_wrong_answer_shows_failed_with_its_feedback(executed):
    a, n, grade_id, phrase, _, wrong_nb = executed
    text, html = _self_check_output(wrong_nb)
    assert f"{n - 1}/{n} exercises pass their visible tests" in text, text
    row = next((r for r in text.splitlines() if r.split() and r.split()[0] == grade_id), None)
    assert row is not None, f"no row for {grade_id}:\n{text}"
    assert re.match(rf"{re.escape(grade_id)}\s+FAILED\s+", row), row
    assert phrase.lower() in row.lower(), row
    others = [r for r in text.splitlines()[:-1] if r is not row and r.split()[0] != grade_id]
    assert len(others) == n - 1 and all(re.search(r"\s+passed\s*$", r) for r in others), text
    shown = html_module.unescape(html)
    assert re.search(rf"<code>{re.escape(grade_id)}</code></td><td[^>]*>failed</td>", shown), html
    assert phrase.lower() in shown.lower(), html
