"""Both sides of every exercise: the released notebook scores zero, the solution full marks,
and every known-wrong answer fails with feedback that names the broken idea: a phrase specific
to the mistake, and the pointer to the course section that teaches the idea."""
from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest

from autograder.feedback import TAUGHT_IN, where
from conftest import (ASSIGNMENTS, fill_answers, known_answers, released_notebook, run_grader,
                      solution_notebook, wrong_answers)

pytestmark = pytest.mark.notebook
# One xdist group per assignment: its notebooks are graded once, by one worker.
PARAMS = [pytest.param(a, marks=pytest.mark.xdist_group(f"ex-{a}")) for a in ASSIGNMENTS]


def _answer_ids(assignment):
    nb = nbformat.read(str(solution_notebook(assignment)), as_version=4)
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution")]


def _right_answers(assignment):
    """``{grade_id: [answer source, ...]}``: other right answers (``RIGHT`` beside ``WRONG`` in
    the judge files), each of which must earn the exercise's points."""
    return known_answers(assignment)["RIGHT"]


def _fill_rounds(tmp, assignment, name, by_gid):
    """One notebook per round k, the k-th entry of every exercise of ``by_gid`` filled in."""
    paths = []
    for k in range(max((len(v) for v in by_gid.values()), default=0)):
        answers = {gid: items[k] for gid, items in by_gid.items() if k < len(items)}
        dest = tmp / f"{name}{k}" / assignment / f"{assignment}.ipynb"
        paths.append((fill_answers(released_notebook(assignment), answers, dest), sorted(answers)))
    return paths


@functools.lru_cache(maxsize=None)
def _graded(assignment):
    """Grade, in one grader call: the released notebook, the solution, each round of wrong
    answers (round k fills the k-th wrong answer of every exercise), then each round of other
    right answers (kept in ``_graded_right``)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"ex-{assignment}-"))
    released = tmp / "released" / assignment / f"{assignment}.ipynb"
    released.parent.mkdir(parents=True)
    shutil.copy(released_notebook(assignment), released)
    solution = tmp / "solution" / assignment / f"{assignment}.ipynb"
    solution.parent.mkdir(parents=True)
    shutil.copy(solution_notebook(assignment), solution)
    wrong = wrong_answers(assignment)
    rounds = max((len(v) for v in wrong.values()), default=0)
    paths, expectations = [released, solution], []
    for k in range(rounds):
        answers = {gid: items[k][0] for gid, items in wrong.items() if k < len(items)}
        dest = tmp / f"wrong{k}" / assignment / f"{assignment}.ipynb"
        paths.append(fill_answers(released_notebook(assignment), answers, dest))
        expectations.append({gid: tuple(items[k][1:]) for gid, items in wrong.items() if k < len(items)})
    right = _fill_rounds(tmp, assignment, "right", _right_answers(assignment))
    results, stderr, code = run_grader(paths + [p for p, _ in right])
    shutil.rmtree(tmp, ignore_errors=True)
    if not isinstance(results, list):
        results = [results]
    _graded_right[assignment] = list(zip(results[len(paths):], (gids for _, gids in right)))
    return results[:len(paths)], expectations, stderr, code


_graded_right: dict = {}


@pytest.mark.parametrize("assignment", PARAMS)
def test_released_notebook_scores_zero(assignment):
    results, _, stderr, code = _graded(assignment)
    released = results[0]
    assert code == 0, stderr[-2000:]
    assert released["max_score"] > 0
    assert [t["grade_id"] for t in released["tests"]] == [f"test_{g}" for g in _answer_ids(assignment)]
    earned = {t["exercise"]: t["points"] for t in released["tests"] if t["points"]}
    assert not earned, f"the released notebook already earns points: {earned}"
    for t in released["tests"]:
        assert t["feedback"], f"{t['exercise']} failed without feedback"


@pytest.mark.parametrize("assignment", PARAMS)
def test_solution_scores_full_marks(assignment):
    results, _, stderr, _ = _graded(assignment)
    solution = results[1]
    failed = {t["exercise"]: t["feedback"] for t in solution["tests"] if not t["passed"]}
    assert not failed, f"the solution fails: {failed}"
    assert solution["score"] == solution["max_score"] > 0


@pytest.mark.parametrize("assignment", PARAMS)
def test_every_exercise_has_two_wrong_answers(assignment):
    wrong = wrong_answers(assignment)
    for gid in _answer_ids(assignment):
        assert len(wrong.get(gid, [])) >= 2, f"{assignment}: {gid} needs at least two known-wrong answers"


# Phrases every failure of a comparison contains: they prove nothing about the mistake.
GENERIC = {"is wrong", "expected", "wrong", "is", "error", "raised", "failed", "see"}


def _pointer(idea):
    """The pointer the feedback of a failure for ``idea`` carries: where the course teaches it
    (at the end of a judge's failure, after "A check made in the kernel ... failed" for a claim)."""
    return where(idea)


@pytest.mark.parametrize("assignment", PARAMS)
def test_wrong_answer_needles_are_specific(assignment):
    for gid, items in wrong_answers(assignment).items():
        for k, item in enumerate(items):
            assert len(item) == 3, f"{gid} #{k + 1}: expected (source, phrase, idea), got {len(item)} items"
            source, needle, idea = item
            assert needle.strip().lower() not in GENERIC and len(needle.strip()) >= 6, \
                f"{gid} #{k + 1}: the phrase {needle!r} is generic; quote what is specific to this mistake"
            assert idea in TAUGHT_IN and where(idea), f"{gid} #{k + 1}: {idea!r} is not an idea the course teaches"


@pytest.mark.parametrize("assignment", PARAMS)
def test_wrong_answers_fail_with_intended_feedback(assignment):
    results, expectations, _, _ = _graded(assignment)
    problems = []
    for k, (result, expected) in enumerate(zip(results[2:], expectations)):
        by_exercise = {t["exercise"]: t for t in result["tests"]}
        for gid, (needle, idea) in expected.items():
            t = by_exercise[gid]
            feedback = t["feedback"]
            if t["passed"]:
                problems.append(f"wrong answer #{k + 1} for {gid} passed")
                continue
            if needle.lower() not in feedback.lower():
                problems.append(f"wrong answer #{k + 1} for {gid}: feedback {feedback!r} "
                                f"does not mention {needle!r}")
            if _pointer(idea) not in feedback:
                problems.append(f"wrong answer #{k + 1} for {gid}: feedback {feedback!r} "
                                f"does not point to {where(idea)!r} (idea {idea!r})")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("assignment", PARAMS)
def test_other_right_answers_pass(assignment):
    """Answers the prompt allows but the solution does not take (a learner's own pytree class as
    a state...) earn the exercise's points, or the judge refuses more than the prompt states."""
    _graded(assignment)
    problems = []
    for k, (result, gids) in enumerate(_graded_right.get(assignment, [])):
        by_exercise = {t["exercise"]: t for t in result["tests"]}
        problems += [f"right answer #{k + 1} for {gid} failed: {by_exercise[gid]['feedback']}"
                     for gid in gids if not by_exercise[gid]["passed"]]
    assert not problems, "\n".join(problems)
