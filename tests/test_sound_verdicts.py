"""Issue 33's attacks, graded end to end (tests/attacks.py, SOUND_ATTACKS): a failing claim or
an ExerciseFailure with nothing to say is a failure (item 1); a loop or a native call inside a
composite, and a collective in a branch no input takes, are read from the program that runs
(item 2); a forged agent's reports and results for exercises once judged on kernel values
(Linear's tree structures, global_mean's and explicit_matmul's results at shapes never exported)
count for nothing beside their programs (item 5). Each row earns nothing for what it targets; the solution beside it, and a correct
answer written with a composite, a cond and a named scope, keep full marks."""
from __future__ import annotations

import nbformat
import pytest

from conftest import fill_answers, grade_attack_table, run_grader, solution_notebook

pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("sound-verdicts")]


def _names():
    from attacks import SOUND_ATTACKS

    return list(SOUND_ATTACKS)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from attacks import SOUND_ATTACKS

    return grade_attack_table(SOUND_ATTACKS, tmp_path_factory.mktemp("sound-verdicts"))


@pytest.mark.parametrize("name", _names())
def test_an_issue_33_attack_earns_nothing_for_what_it_targets(graded, name):
    from attacks import SOUND_ATTACKS

    attack, r = SOUND_ATTACKS[name], graded[name]
    assert not r.get("error"), r.get("error")
    by_id = {t["grade_id"]: t for t in r["tests"]}
    lost = attack.lost_of(list(by_id))
    won = {g: by_id[g]["feedback"] for g in lost if by_id[g]["points"]}
    assert not won, won
    assert all(by_id[g]["feedback"].strip() for g in lost)
    if attack.says:
        assert all(attack.says in by_id[g]["feedback"] for g in lost), {g: by_id[g]["feedback"] for g in lost}
    kept = {g: t["feedback"] for g, t in by_id.items() if g not in lost and not t["passed"]}
    assert not kept, kept  # the rest of the notebook (all of it, for a control) is graded normally


def test_the_solutions_beside_the_attacks_keep_full_marks(graded):
    from attacks import SOUND_ATTACKS

    controls = {n: r for n, r in graded.items() if n.startswith("control-")}
    assert len(controls) == len({a.assignment for a in SOUND_ATTACKS.values()}) >= 3
    for n, r in controls.items():
        assert r["score"] == r["max_score"] > 0, (n, [t["feedback"] for t in r["tests"] if not t["passed"]])


# Hundreds of busy threads that hold no GIL (hashlib releases it for large data), started by an
# answer cell and left running while the notebook is graded.
_BUSY_THREADS = (
    "import hashlib as _hashlib, threading as _threading\n"
    "_blob = b'x' * (1 << 22)\n"
    "def _burn():\n"
    "    while True:\n"
    "        _hashlib.sha256(_blob).digest()\n"
    "for _ in range(400):\n"
    "    try:\n"
    "        _threading.Thread(target=_burn, daemon=True).start()\n"
    "    except RuntimeError:  # the thread cap\n"
    "        break\n")


@pytest.mark.slow
def test_a_starving_notebook_never_turns_its_neighbours_grade_into_a_silent_zero(tmp_path):
    """No shared fate (issue 33, item 3): graded beside a notebook whose kernel runs hundreds of
    busy threads, a correct notebook keeps full marks, or a test the machine starved is "not
    graded", never a zero said to be the learner's."""
    a = "01_phases"
    base = {c.metadata["nbgrader"]["grade_id"]: c.source
            for c in nbformat.read(str(solution_notebook(a)), as_version=4).cells
            if c.metadata.get("nbgrader", {}).get("solution")}
    first = next(iter(base))
    hog = fill_answers(solution_notebook(a), {first: _BUSY_THREADS + base[first]}, tmp_path / "hog" / a / f"{a}.ipynb")
    fine = fill_answers(solution_notebook(a), {}, tmp_path / "fine" / a / f"{a}.ipynb")
    results, stderr, code = run_grader([hog, fine], "--jobs", "2", "--cell-timeout", "60", regrade_starved=False)
    _, ok = results
    assert ok["max_score"] > 0
    zeros = [t["feedback"] for t in ok["tests"] if not t["passed"] and not t["feedback"].startswith("Not graded:")]
    assert not zeros, zeros
    # a test it starved is an error of that notebook, and the command exits non-zero: never silent
    starved = any(t["feedback"].startswith("Not graded:") for t in ok["tests"])
    assert bool(ok.get("error")) == starved, ok.get("error")
    assert code != 0 or not starved
