"""A verdict is typed (issue 33, item 1): a test passes only when its judge returned normally and
no claim failed; every failure carries a fixed, non-empty message of the judge's; the learner's
text after it is made safe; claims are applied after the evidence and can only fail."""
from __future__ import annotations

import pytest

from autograder import judge
from autograder.judge.outcome import PASSED, Verdict, failed, learner_text, not_graded


class ForgedChannel:
    """A channel whose every claim is answered by ``answer`` (what a forged agent can send)."""

    def __init__(self, answer):
        self.answer = answer
        self.requests = []

    def request(self, payload):
        self.requests.append(payload)
        return {"claim": self.answer}


BLANK_FAILURES = [
    {"ok": False, "idea": "tampering", "detail": " "},
    {"ok": False, "idea": "tampering", "detail": ""},
    {"ok": False, "idea": "numerics", "detail": "\x1b[2K\x1b[1A\r"},
    {"ok": False, "idea": "", "detail": None},
    {"ok": "yes", "idea": "tampering", "detail": " "},
]


@pytest.mark.parametrize("answer", BLANK_FAILURES)
def test_a_failing_claim_with_a_blank_detail_fails_with_the_judges_message(answer):
    k = judge.Kernel(channel=ForgedChannel(answer))
    v = judge.verdict(lambda k: k.claim("check_pure", "step", 1, what="`step`"), k, "test_step")
    assert isinstance(v, Verdict) and not v.passed and v.graded
    assert v.feedback.startswith("A check made in the kernel on `step` failed"), v


def test_claims_are_applied_after_the_evidence_and_can_only_fail():
    k = judge.Kernel(channel=ForgedChannel({"ok": False, "idea": "purity", "detail": "changed G"}))
    seen = []

    def evidence_fails(k):
        k.claim("check_pure", "step", 1)
        seen.append("evidence checked")  # the claim did not end the test
        import autograder as ag

        ag.fail("state", "the state was not threaded")

    v = judge.verdict(evidence_fails, k, "test_step")
    assert seen == ["evidence checked"]
    assert not v.passed and v.feedback.startswith("the state was not threaded"), v  # the evidence's, first
    assert "Also, a check made in the kernel on step failed" in v.feedback and "changed G" in v.feedback
    v = judge.verdict(lambda k: k.claim("check_pure", "step", 1), k, "test_step")
    assert not v.passed and "changed G" in v.feedback and "course/03_purity.ipynb" in v.feedback
    holds = judge.Kernel(channel=ForgedChannel({"ok": True, "idea": "", "detail": ""}))
    assert judge.verdict(lambda k: k.claim("check_pure", "step", 1), holds, "test_step") == PASSED
    # a serial judge hands one Kernel to every test: a claim failed in one is not the next one's
    assert judge.verdict(lambda k: None, k, "test_next") == PASSED
    # a test judged beside others has its own list of failed claims
    view = k.for_test()
    view.claim("check_pure", "step", 1)
    assert len(view.failed_claims) == 1 and k.failed_claims is not view.failed_claims


def test_an_exercise_failure_with_nothing_to_say_is_still_a_failure():
    import autograder as ag

    def blank(k):
        raise ag.ExerciseFailure("tampering", " \x1b[0m ")

    v = judge.verdict(blank, judge.Kernel(channel=ForgedChannel({})), "test_x")
    assert not v.passed and v.feedback.strip(), v


def test_a_verdict_cannot_pass_with_a_message_or_fail_without_one():
    with pytest.raises(ValueError):
        Verdict(False, "  ")
    with pytest.raises(ValueError):
        Verdict(True, "feedback")
    with pytest.raises(ValueError):
        Verdict(True, graded=False)
    with pytest.raises(ValueError):
        failed("\x1b[31m\x1b[0m", "learner text")
    assert failed("The value is wrong", "\x1b]0;title\x07got 3\x1b[2J") == Verdict(False, "The value is wrong: got 3")
    assert not not_graded("Not graded: starved").graded


def test_learner_text_loses_terminal_control_and_keeps_its_words():
    assert learner_text("\x1b[1;31mred\x1b[0m and \x9b2Jplain") == "red and plain"
    assert learner_text("bell\x07 back\x08 bidi\u202e") == "bell\\x07 back\\x08 bidi\\u202e"
    assert learner_text("two\nlines\tand a tab") == "two\nlines\tand a tab"
    assert learner_text("  \n\t ") == ""
    assert learner_text("over\rwritten") == "over\\rwritten"
    assert len(learner_text("x" * 10_000, 100)) == 100


# --------------------------------------------------------------------------- "not graded" is never the learner's choice

class AnsweringChannel:
    """A kernel that answers every call with ``value`` (whatever a learner's function returns)."""

    def __init__(self, value):
        self.value = value

    def request(self, payload):
        return {"value": self.value}


def test_an_error_checking_what_the_learner_gave_fails_naming_it():
    """Issue 43, item 3: a value of another type or shape that makes the judge's own check raise
    is the learner's zero, with the exception named, never "not graded"."""
    def test(k):
        got = k.call("f", 1)
        return got["rows"] + 1  # the judge expects a dict; the learner returned a list

    v = judge.verdict(test, judge.Kernel(channel=AnsweringChannel([1, 2])), "test_f")
    assert not v.passed and v.graded
    assert "could not check what the code under test gave" in v.feedback and "TypeError" in v.feedback


def test_a_judge_that_fails_before_asking_the_kernel_anything_is_not_graded():
    v = judge.verdict(lambda k: {}["missing"], judge.Kernel(channel=AnsweringChannel(1)), "test_f")
    assert not v.passed and not v.graded and v.feedback.startswith("Not graded: the grader's own check")


def test_a_program_that_takes_other_inputs_fails_naming_it():
    """A patched export that adds an input: the program's signature is not the exercise's."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import export

    exp = export.export(jax.jit(lambda x, unused: x * 2), platforms=("cpu",))(
        *[jax.ShapeDtypeStruct((3,), jnp.float32)] * 2)
    prog = judge.Exported(exp, runner=object(), name="`f`")  # refused before any runner runs it
    v = judge.verdict(lambda k: prog.call(np.zeros(3, np.float32)), judge.Kernel(channel=AnsweringChannel(1)),
                      "test_f")
    assert not v.passed and v.graded and "takes other inputs than the exercise's function" in v.feedback


def test_the_graders_own_runner_failing_is_not_graded_a_program_failing_is_a_zero():
    from autograder.judge.runner import ProgramFailure, RunnerFault

    def raises(exc):
        def test(k):
            k.call("f", 1)
            raise exc
        return test

    k = judge.Kernel(channel=AnsweringChannel(1))
    v = judge.verdict(raises(RunnerFault("The grader's program runner could not start; please tell the course "
                                         "staff.")), k, "test_f")
    assert not v.passed and not v.graded and v.feedback.startswith("Not graded: The grader's program runner")
    v = judge.verdict(raises(ProgramFailure("The program crashed when the grader ran it.")), k, "test_f")
    assert not v.passed and v.graded and "crashed" in v.feedback


def test_a_runner_that_cannot_start_while_a_traced_program_runs_is_not_graded():
    """The runner failing under a traced program's run (Traced.__call__, which turns the
    program's own failures into a zero) is still the machine's fault: not graded."""
    import numpy as np

    from autograder.judge.programs import Traced
    from autograder.judge.runner import ProgramFailure, RunnerFault

    class Failing:
        def __init__(self, exc):
            self.exc = exc

        def call(self, *args, **kwargs):
            raise self.exc

    def test_with(exc):
        def test(k):
            k.call("f", 1)
            prog = object.__new__(Traced)  # its facts are not read: only its run is under test
            prog.exported, prog.label = Failing(exc), "`f`"
            prog(np.zeros(3, np.float32))
        return test

    k = judge.Kernel(channel=AnsweringChannel(1))
    v = judge.verdict(test_with(RunnerFault("The grader's program runner could not start; please tell the "
                                            "course staff.")), k, "test_f")
    assert not v.passed and not v.graded and "program runner could not start" in v.feedback, v.feedback
    v = judge.verdict(test_with(ProgramFailure("The program crashed when the grader ran it.")), k, "test_f")
    assert not v.passed and v.graded and "failed when the grader ran it" in v.feedback, v.feedback


def test_tests_the_judge_left_undecided_are_zeros_unless_the_grader_failed(tmp_path):
    """write_verdicts: a test the judge never decided is a zero where the submission's run ended
    it (the kernel died, its time ran out), and not graded where the grader itself failed."""
    from nbformat.v4 import new_code_cell, new_notebook

    def notebook():
        cell = new_code_cell("assert True")
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "test_f", "points": 1}
        return new_notebook(cells=[cell])

    step = judge.JudgeStep(tmp_path)
    feedback = step.write_verdicts(notebook(), "Not run to completion: the kernel died.")
    assert feedback == {"test_f": "Not run to completion: the kernel died."} and step.ungraded == {}
    step = judge.JudgeStep(tmp_path)
    feedback = step.write_verdicts(notebook(), "Not graded: internal grading error (RuntimeError).", graded=False)
    assert step.ungraded == {"test_f": "Not graded: internal grading error (RuntimeError)."}, step.ungraded
