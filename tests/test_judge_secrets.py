"""Every judge's value checks hold for every grading secret (issue 43, deterministic grades): each
known wrong answer of the judge files (``WRONG``) is judged under several fresh grading secrets,
each drawing other hidden inputs, and must fail under each, naming its mistake. A judge that
catches a wrong answer only on some draws (an even width, a tie, an empty cluster that only some
inputs produce) fails here, where tests/test_exercises.py grades it under one secret only.

Cheap: the judge files run in this process against an in-process stand-in for the learner's
kernel (:class:`InProcess`: the agent's own request handler, ``autograder.agent.handle``, on an
IPython shell's namespace where the solution notebook's cells ran, the answer cell replaced), and
the programs it takes run in a program runner, as in a grading; no kernel is started and nothing
is contained. What this does not test (the kernel, containment, the pipeline) test_exercises.py
does. The answer cell is run afresh before each grading, the notebook's other cells are not: a
wrong answer that keeps state in a global another cell made (03's ``STATS``) would carry it from
one grading to the next here, so those are left to test_exercises.py."""
from __future__ import annotations

import secrets

import nbformat
import numpy as np
import pytest

from autograder import judge
from autograder.judge import seeding
from conftest import ROOT, wrong_answers
from in_process import InProcess

judge.ensure_judge_devices()  # 8 CPU devices, as a grading's judge has (09's programs are sharded)

SECRETS = {"05_shapes": 2, "10_review": 1}  # fresh grading secrets a wrong answer (test_exercises.py's is one more)
# The exercises whose wrong answers are told apart by what the hidden draws hold (an even width, a
# zero, a tie, an empty cluster, a point at the padding's index): the ones CI saw pass a known
# wrong answer under some secrets (window_range, kmeans) and their neighbours. The others' are
# decided by what the program is (traced or not, its size, its loops, a claim), the same under
# every secret; grading all of them here would take many minutes.
BY_DRAWS = {"05_shapes": None, "10_review": ("kmeans",)}  # None: every exercise of the assignment


def _shell(shell, assignment):
    """``shell``, its namespace the solution notebook's (its answer and setup cells run, its test
    cells not), and the solution's answers."""
    shell.reset(new_session=False)
    nb = nbformat.read(str(ROOT / "solutions" / assignment / f"{assignment}.ipynb"), as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and not meta.get("grade"):
            assert shell.run_cell(cell.source, silent=True).success, f"{assignment}: a cell failed"
    return shell, {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
                   if c.metadata.get("nbgrader", {}).get("solution")}


def _problems(folder, shell, gid, number, source, phrase, keys, runner) -> list[str]:
    """Judge the wrong answer ``source`` of ``gid`` (in ``shell``) by the judge files of
    ``folder`` under each of ``keys`` (``{secret: submission key}``): what went otherwise than a
    failure naming ``phrase``, one line each."""
    problems = []
    for secret, key in keys.items():
        # each grading a kernel of its own: the answer cell run afresh (its globals too)
        assert shell.run_cell(source, silent=True).success, f"{gid} #{number} does not run"
        kernel = judge.Kernel(channel=InProcess(), key=key, runner=runner)
        verdict = judge.run_judge(folder, kernel=kernel, grade_ids=[f"test_{gid}"], runner=runner,
                                  threads=1)[f"test_{gid}"]
        if verdict.passed or phrase.lower() not in verdict.feedback.lower():
            problems.append(f"{gid} #{number} under the grading secret {secret.hex()}: "
                            f"{'passed' if verdict.passed else 'failed with ' + repr(verdict.feedback[:300])}"
                            f", expected a failure naming {phrase!r}")
    return problems


@pytest.mark.parametrize("assignment", sorted(BY_DRAWS))
def test_every_wrong_answer_fails_under_every_secret(assignment, runner, ipython):
    shell, solutions = _shell(ipython, assignment)
    problems = []
    for gid, items in wrong_answers(assignment).items():
        if BY_DRAWS[assignment] is not None and gid not in BY_DRAWS[assignment]:
            continue
        for number, (source, phrase, _) in enumerate(items, 1):
            fresh = [secrets.token_bytes(32) for _ in range(SECRETS[assignment])]
            keys = {s: seeding.submission_key(s, assignment, "ada") for s in fresh}
            problems += _problems(ROOT / "solutions" / assignment, shell, gid, number, source, phrase, keys, runner)
        shell.run_cell(solutions[gid], silent=True)
    assert not problems, "\n".join(problems)


def test_a_judge_that_holds_only_for_some_secrets_is_caught(tmp_path, runner, ipython):
    """The control: a judge whose check of ``double`` draws x in {0, 1}, and a wrong answer
    (``2.0`` whatever x is) that only x = 0 shows: graded under eight fixed secrets, it passes
    under those that draw 1, and each of them is named."""
    (tmp_path / "judge.py").write_text(
        "from autograder.judge import call, fail\n\n"
        "def test_double(k):\n"
        "    x = float(k.rng.integers(0, 2))\n"
        "    if call(k.fn('double'), x, what='double(x)') != 2 * x:\n"
        "        fail('shapes', 'double(x) is not twice x')\n")
    shell = ipython
    shell.reset(new_session=False)
    fixed = [bytes([i]) * 32 for i in range(8)]
    keys = {s: seeding.submission_key(s, tmp_path.name, "ada") for s in fixed}
    draws = {s: int(np.random.default_rng(seeding.seed_for(key, "test_double")).integers(0, 2)) for s, key in keys.items()}
    assert set(draws.values()) == {0, 1}  # these secrets draw both
    problems = _problems(tmp_path, shell, "double", 1, "def double(x):\n    return 2.0\n", "not twice x", keys,
                         runner)
    assert sorted(problems) == sorted(f"double #1 under the grading secret {s.hex()}: passed, expected a failure "
                                      "naming 'not twice x'" for s, x in draws.items() if x == 1)
