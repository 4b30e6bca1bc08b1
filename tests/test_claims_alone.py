"""A claim never passes a test alone (issue 20, part 6): with the kernel-side agent forged (every
claim holds, every call runs eagerly, every kernel-side observation says what a right answer would
show: tests/attacks.py's CLAIM_ATTACKS), wrong answers earn exactly the tests that
docs/security.md's table "Mistakes that only a kernel-side claim catches" lists, chapter by
chapter, and nothing else. The table is read here, so the doc and what the grader does cannot
drift apart: a forged row that earns an unlisted test is a hole in a judge, a listed test that no
row earns is a claim the doc makes without proof."""
from __future__ import annotations

import os
import re
import shutil
import time

import nbformat
import pytest

from conftest import ASSIGNMENTS, ROOT, fill_answers, released_notebook, run_grader, solution_notebook, wrong_answers

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0 and bool(shutil.which("bwrap"))
DOC = ROOT / "docs" / "security.md"
HEADER = re.compile(r"^\|\s*Assignment\s*\|\s*Test\s*\|")


def claim_only_table() -> dict:
    """``{assignment: {test grade_id, ...}}`` from docs/security.md's table of the mistakes that
    only a kernel-side claim catches (every chapter present, an empty set where none is listed)."""
    lines = DOC.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if HEADER.match(line)), None)
    assert start is not None, "docs/security.md has no table headed | Assignment | Test | ..."
    table = {a: set() for a in ASSIGNMENTS}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        assert cells[0] in table, f"docs/security.md lists an unknown assignment: {line}"
        table[cells[0]].add(f"test_{cells[1]}")
    return table


def _answers(notebook) -> dict:
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nbformat.read(str(notebook), as_version=4).cells
            if c.metadata.get("nbgrader", {}).get("solution")}


def test_the_table_names_real_tests_and_every_chapter_has_a_forged_row():
    from attacks import CLAIM_ATTACKS

    table = claim_only_table()
    assert any(table.values())
    for a, tests in table.items():
        known = {f"test_{g}" for g in _answers(solution_notebook(a))}
        assert tests <= known, f"docs/security.md lists {sorted(tests - known)} for {a}, which has no such test"
    forged = {r.assignment for r in CLAIM_ATTACKS.values() if r.forged}
    released = {r.assignment for r in CLAIM_ATTACKS.values() if r.forged and not r.answers}
    assert forged == released == set(ASSIGNMENTS)
    for name, row in CLAIM_ATTACKS.items():  # every answer names a real cell, every Known one exactly one wrong answer
        cells = _answers(released_notebook(row.assignment))
        sources = row.sources(wrong_answers(row.assignment))  # raises LookupError for a Known not found
        assert set(sources) == set(row.answers) and set(sources) <= set(cells), (name, sorted(sources))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every row of CLAIM_ATTACKS graded in one batch, contained: ``({row: result}, seconds)``."""
    from attacks import CLAIM_ATTACKS

    tmp = tmp_path_factory.mktemp("claims-alone")
    paths = []
    for name, row in CLAIM_ATTACKS.items():
        a = row.assignment
        filled = row.filled(_answers(released_notebook(a)), wrong_answers(a))
        paths.append(fill_answers(released_notebook(a), filled, tmp / name / a / f"{a}.ipynb"))
    start = time.monotonic()
    results, stderr, code = run_grader(paths, "--jobs", "2")
    seconds = time.monotonic() - start
    assert code == 0, stderr[-3000:]
    print(f"\nclaims alone: {len(paths)} notebooks graded in {seconds:.0f} s")
    return dict(zip(CLAIM_ATTACKS, results)), seconds


def _earned(result) -> set:
    return {t["grade_id"] for t in result["tests"] if t["points"]}


NOTEBOOK = (pytest.mark.notebook, pytest.mark.xdist_group("claims-alone"),
            pytest.mark.skipif(not AS_ROOT, reason="containment is the grader's as root"))


def _notebook(f):
    """The marks of a test that reads the graded batch (real kernels, contained: as root)."""
    for mark in reversed(NOTEBOOK):
        f = mark(f)
    return f


@_notebook
def test_every_row_was_graded_contained(graded):
    results, _ = graded
    for name, r in results.items():
        assert r.get("containment") == "namespaces+uid" and not r.get("error"), (name, r.get("error"))


@_notebook
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_forged_agent_earns_exactly_the_tests_only_a_claim_decides(graded, assignment):
    from attacks import CLAIM_ATTACKS

    results, _ = graded
    listed = claim_only_table()[assignment]
    rows = {n: r for n, r in results.items() if CLAIM_ATTACKS[n].assignment == assignment and CLAIM_ATTACKS[n].forged}
    assert rows
    unlisted = {n: sorted(_earned(r) - listed) for n, r in rows.items() if _earned(r) - listed}
    assert not unlisted, f"earned with a forged agent, but not in docs/security.md's table: {unlisted}"
    unearned = {g: {n: _feedback(r, g) for n, r in rows.items()} for g in listed - set().union(*map(_earned, rows.values()))}
    assert not unearned, f"listed in docs/security.md's table, but no forged row earns it: {unearned}"


@_notebook
def test_the_wrong_answers_of_our_own_fail_with_the_honest_agent(graded):
    """A wrong answer written in tests/attacks.py (not taken from the judge files' WRONG data, whose
    answers tests/test_exercises.py grades honestly) that earns its test with the forged agent
    scores 0 there with the honest one: the claim catches it, the forging is what earned it."""
    from attacks import CLAIM_ATTACKS

    results, _ = graded
    own = {(row.assignment, gid) for n, row in CLAIM_ATTACKS.items() if row.forged
           for gid, src in row.answers.items() if isinstance(src, str) and f"test_{gid}" in _earned(results[n])}
    assert own, "no wrong answer of our own earns anything with the forged agent"
    honest = {(row.assignment, gid): n for n, row in CLAIM_ATTACKS.items() if not row.forged
              for gid, src in row.answers.items() if isinstance(src, str)}
    assert own <= set(honest), f"wrong answers of our own without an honest row: {sorted(own - set(honest))}"
    passed = {(a, g): _feedback(results[honest[(a, g)]], f"test_{g}") for a, g in own
              if f"test_{g}" in _earned(results[honest[(a, g)]])}
    assert not passed, f"passed with the honest agent: {passed}"


def _feedback(result, grade_id) -> str:
    return next((t["feedback"] for t in result["tests"] if t["grade_id"] == grade_id), "(no such test)")
