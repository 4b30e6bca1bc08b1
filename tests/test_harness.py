"""The suite's grading harness (conftest): a notebook a starved machine left not graded is graded
again, a bounded number of times, never turned into a red suite or a wrong grade; any other
result is kept as it came. Fake graders stand in for the real one (no timing involved): the
starved tests' feedback is what the judge itself says of a starved kernel or program."""
from __future__ import annotations

import json
import subprocess

import pytest

import conftest
from autograder import judge
from autograder.judge import starvation
from autograder.judge.runner import ProgramStarved
from conftest import STARVED_REGRADES, regrading_starved, run_grader, starved


class _Starving:
    """A kernel channel whose every request ran out of time on a starved machine."""

    def request(self, payload):
        raise judge.channel.KernelStarved(starvation.Watch(None).message("the code under test"))


def _program_starved(k):
    raise ProgramStarved(starvation.Watch(None).message("the program, run by the grader,"))


def _judge_bug(k):
    raise KeyError("a judge's bug")


def _feedback(test) -> str:
    """The judge's own verdict of ``test`` (a judge function) on a starving kernel."""
    v = judge.verdict(test, judge.Kernel(channel=_Starving()), "test_f")
    assert not v.graded
    return v.feedback


KERNEL_STARVED = _feedback(lambda k: k.call("f", 1))
PROGRAM_STARVED = _feedback(_program_starved)
JUDGE_BUG = _feedback(_judge_bug)


def _result(path, feedback: str = "") -> dict:
    """A notebook's result as the grade command writes it: its test passed, or not graded with
    ``feedback`` (the notebook's error then names it)."""
    test = {"grade_id": "test_f", "exercise": "f", "points": 0.0 if feedback else 1.0, "max_points": 1.0,
            "passed": not feedback, "feedback": feedback}
    r = {"notebook": str(path), "assignment": "01_phases", "score": test["points"], "max_score": 1.0,
         "tests": [test]}
    if feedback:
        r["error"] = f"not graded: test_f: {feedback}"
    return r


class _Grader:
    """A fake batch grader: ``not_graded[path]`` is the feedback of its first ``times`` gradings."""

    def __init__(self, not_graded: dict, times: int = 1):
        self.not_graded, self.times, self.batches = not_graded, times, []

    def __call__(self, paths):
        self.batches.append(list(paths))
        results = [_result(p, self.not_graded.get(p, "") if self._count(p) <= self.times else "") for p in paths]
        return results, f"graded {len(paths)}\n", int(any("error" in r for r in results))

    def _count(self, path) -> int:
        return sum(path in b for b in self.batches)


def test_the_starvation_message_is_recognised_whichever_process_ran_out():
    assert starved(_result("a", KERNEL_STARVED)) == ["test_f"]
    assert starved(_result("a", PROGRAM_STARVED)) == ["test_f"]
    assert starved(_result("a", JUDGE_BUG)) == []  # not graded, but not the machine's doing
    assert starved(_result("a")) == []


def test_exactly_the_starved_notebooks_are_graded_again():
    grader = _Grader({"b": KERNEL_STARVED, "d": PROGRAM_STARVED, "c": JUDGE_BUG})
    results, stderr, codes = regrading_starved(grader, ["a", "b", "c", "d"])
    assert grader.batches == [["a", "b", "c", "d"], ["b", "d"]]
    assert [r["notebook"] for r in results] == ["a", "b", "c", "d"]
    assert [r["score"] for r in results] == [1.0, 1.0, 0.0, 1.0]
    assert results[2]["error"] and results[2]["tests"][0]["feedback"] == JUDGE_BUG  # kept as it came
    assert codes == [1, 0]
    assert stderr.startswith("graded 4\n") and stderr.endswith("graded 2\n")


def test_a_batch_nothing_starved_is_graded_once():
    grader = _Grader({"b": JUDGE_BUG})
    results, _, codes = regrading_starved(grader, ["a", "b"])
    assert grader.batches == [["a", "b"]] and codes == [1]


def test_a_machine_starved_every_time_fails_the_test_saying_so():
    grader = _Grader({"b": KERNEL_STARVED}, times=STARVED_REGRADES + 1)
    with pytest.raises(pytest.fail.Exception, match="too starved to grade.*'b': \\['test_f'\\]"):
        regrading_starved(grader, ["a", "b"])
    assert grader.batches == [["a", "b"]] + [["b"]] * STARVED_REGRADES


def test_starved_once_within_the_bound_is_graded():
    grader = _Grader({"b": KERNEL_STARVED}, times=STARVED_REGRADES)
    results, _, _ = regrading_starved(grader, ["a", "b"])
    assert [r["score"] for r in results] == [1.0, 1.0] and len(grader.batches) == STARVED_REGRADES + 1


def _fake_command(monkeypatch, grader: _Grader):
    """``python -m autograder grade ... --json`` answered by ``grader`` (the command's JSON: one
    object for one notebook, a list for more)."""
    def run(cmd, **kwargs):
        paths = cmd[cmd.index("grade") + 1:cmd.index("--json")]
        results, stderr, code = grader(paths)
        out = results[0] if len(results) == 1 else results
        return subprocess.CompletedProcess(cmd, code, json.dumps(out), stderr)

    monkeypatch.setattr(conftest.subprocess, "run", run)


def test_run_grader_grades_a_starved_notebook_again_and_exits_as_the_command_would(monkeypatch):
    grader = _Grader({"b": KERNEL_STARVED})
    _fake_command(monkeypatch, grader)
    results, _, code = run_grader(["a", "b"])
    assert [r["score"] for r in results] == [1.0, 1.0] and code == 0
    assert grader.batches == [["a", "b"], ["b"]]

    grader = _Grader({"b": KERNEL_STARVED, "c": JUDGE_BUG})  # an error left: the command's non-zero exit
    _fake_command(monkeypatch, grader)
    results, _, code = run_grader(["a", "b", "c"])
    assert [r["score"] for r in results] == [1.0, 1.0, 0.0] and code == 1

    grader = _Grader({"a": KERNEL_STARVED})  # one notebook: the command's single object
    _fake_command(monkeypatch, grader)
    result, _, code = run_grader(["a"])
    assert result["score"] == 1.0 and "error" not in result and code == 0


def test_tests_of_starvation_itself_see_the_raw_result(monkeypatch):
    grader = _Grader({"b": KERNEL_STARVED})
    _fake_command(monkeypatch, grader)
    results, _, code = run_grader(["a", "b"], regrade_starved=False)
    assert starved(results[1]) == ["test_f"] and results[1]["error"] and code == 1
    assert grader.batches == [["a", "b"]]
