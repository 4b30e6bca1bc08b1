"""No exercise function may delete its caller's arrays (issue 45, the course-wide decision on
donation): every call the judge makes of a learner function in the kernel sends its arrays as
``jax.Array``s of the judge, and after the call the kernel's agent reads each of them again; one
that can no longer be read (donated by ``jax.jit(..., donate_argnums=...)``, or ``.delete()``d)
fails the test naming the argument, the idea "purity". A function whose values the judge takes
from its exported program (under whose jit an inner donation does nothing) is called directly
once too (:class:`autograder.judge.donation.DirectCall`).

In process: the agent's own handler (``autograder.agent.handle``) on an IPython shell's
namespace, as tests/test_judge_secrets.py; the programs run in a program runner."""
from __future__ import annotations

import numpy as np
import pytest

from autograder import judge, wire
from autograder.feedback import ExerciseFailure
from in_process import InProcess

judge.ensure_judge_devices()

CELLS = """
import jax
import jax.numpy as jnp
import numpy as np
from functools import partial

def pure(x, scale):
    return x * scale

@partial(jax.jit, donate_argnums=0)
def donating(x, scale):
    return x * scale

_inner = jax.jit(lambda x, scale: x * scale, donate_argnums=0)

def inner_donation(x, scale):
    # right values; under the caller's own jax.jit the inner donation does nothing
    return _inner(x, scale)

def deleting(x, scale):
    y = x * scale
    x.delete()
    return y

def step(state, x):
    # donates the whole state dict: every leaf of it
    return jax.jit(lambda s, x: {"count": s["count"] + 1, "total": s["total"] + x}, donate_argnums=0)(state, x)

def by_keyword(x, *, w):
    return jax.jit(lambda x, w: x - w, donate_argnums=1)(x, w)

def twin(x, scale):
    # hides the deletion: answers is_deleted with False for every array, returns the donated result
    from jax._src.array import ArrayImpl
    ArrayImpl.is_deleted = lambda self: False
    return _inner(x, scale)

def mean_then_delete(x, mesh):
    m = jnp.mean(x)
    if not isinstance(x, jax.core.Tracer):
        x.delete()  # what an inner jit's donation does to a direct caller's array
    return m

def exits(x):
    raise SystemExit(0)

def huge(x):
    return 10 ** 100_000

def kind(x):
    return type(x).__module__.split(".")[0]

def raising_after(x, scale):
    _inner(x, scale)
    raise ValueError("something else went wrong")
"""


@pytest.fixture(scope="module")
def shell(ipython):
    ipython.reset(new_session=False)
    assert ipython.run_cell(CELLS, silent=True).success
    yield ipython
    from jax._src.array import ArrayImpl

    if "is_deleted" in vars(ArrayImpl) and ipython.user_ns.get("_real_is_deleted") is not None:
        ArrayImpl.is_deleted = ipython.user_ns["_real_is_deleted"]


@pytest.fixture
def k(shell, runner):
    return judge.Kernel(channel=InProcess(), runner=runner)


def _x():
    return np.arange(6, dtype=np.float32)


def test_a_pure_function_keeps_its_callers_arrays_and_gets_jax_arrays(k):
    out, after = k.call_keep_args("pure", _x(), 2.0)
    assert np.array_equal(out, 2 * _x()) and isinstance(out, wire.KernelArray)
    # a NumPy argument reaches the learner's function as a JAX array of the judge's
    assert isinstance(after[0], wire.KernelArray) and np.array_equal(after[0], _x())
    assert np.array_equal(k.call("pure", wire.AsJax(_x()), 3.0), 3 * _x())


def test_a_numpy_argument_is_sent_as_numpy_only_when_the_judge_says_so(k):
    assert k.call("kind", _x()) == "jaxlib" and k.call("kind", judge.AsNumPy(_x())) == "numpy"
    assert k.call("kind", {"a": [judge.AsNumPy(_x())]}["a"][0]) == "numpy"
    assert k.call(wire.Fixture("call_each"), wire.Ref("kind"), [(_x(),)]) == ["numpy"]  # a fixture's: as sent


@pytest.mark.parametrize("name", ["donating", "inner_donation", "deleting"])
def test_a_direct_call_that_deletes_an_argument_fails_naming_it(k, name):
    with pytest.raises(ExerciseFailure) as info:
        k.call(name, _x(), 2.0)
    assert info.value.idea == "purity"
    assert f"after a direct call of `{name}` (not under jax.jit), the caller's `x` was deleted" in info.value.detail
    assert "03_purity" in str(info.value)  # where the course teaches it


def test_a_numpy_argument_is_sent_as_a_jax_array_so_its_donation_shows(k):
    with pytest.raises(ExerciseFailure, match="the caller's `x` was deleted"):
        k.fn("donating")(_x(), np.float32(2.0))  # both NumPy: both become the judge's JAX arrays


def test_the_entry_of_a_nested_argument_and_a_keyword_are_named(k):
    state = {"count": np.int32(0), "total": np.float32(0.0)}
    with pytest.raises(ExerciseFailure) as info:
        k.call("step", state, np.float32(2.0))
    assert "the caller's `state` was deleted (its entry ['count']); 2 of the 3 arrays" in info.value.detail
    with pytest.raises(ExerciseFailure, match="the caller's `w` was deleted"):
        k.call("by_keyword", _x(), w=_x())


def test_under_the_callers_jit_an_inner_donation_is_inert(k):
    assert np.array_equal(k.call("inner_donation", _x(), 2.0, jit=True), 2 * _x())


def test_a_function_judged_by_its_program_is_also_called_directly_once(k):
    prog = k.program("inner_donation", wire.Spec((6,), "float32"), wire.Spec((), "float32"))
    with pytest.raises(ExerciseFailure, match="after a direct call of `inner_donation`"):
        prog(_x(), np.float32(2.0))  # the program's values are right; its direct call deletes x
    assert np.array_equal(prog(_x(), np.float32(2.0)), 2 * _x())  # once per function and grading
    fine = k.program("pure", wire.Spec((6,), "float32"), wire.Spec((), "float32"))
    assert np.array_equal(fine(_x(), np.float32(2.0)), 2 * _x())
    assert k.called_directly("pure")  # its direct call was made, and passed


def test_an_exported_program_alone_also_gets_its_direct_call(k):
    prog = k.export("inner_donation", wire.Spec((6,), "float32"), wire.Spec((), "float32"))
    with pytest.raises(ExerciseFailure, match="after a direct call of `inner_donation`"):
        prog(_x(), np.float32(2.0))


def test_an_array_a_fixture_placed_for_the_call_is_watched_too(k):
    x = np.arange(16, dtype=np.float32).reshape(8, 2)
    out = k.call(wire.Fixture("global_mean_on"), wire.Ref("mean_then_delete"), x, True, False)  # under jit: kept
    assert np.isclose(float(out["out"]), x.mean())
    with pytest.raises(ExerciseFailure) as info:
        k.call(wire.Fixture("global_mean_on"), wire.Ref("mean_then_delete"), x, False, False)
    assert info.value.idea == "purity"
    assert ("after the grader's check `global_mean_on` called the notebook's function on arrays it placed for it, "
            "the caller's `x` was deleted") in info.value.detail


def test_a_deletion_is_seen_by_reading_not_by_asking(k, shell):
    from jax._src.array import ArrayImpl

    shell.user_ns["_real_is_deleted"] = ArrayImpl.is_deleted
    try:
        with pytest.raises(ExerciseFailure, match="the caller's `x` was deleted"):
            k.call("twin", _x(), 2.0)
    finally:
        ArrayImpl.is_deleted = shell.user_ns["_real_is_deleted"]


def test_a_deletion_comes_before_the_error_the_function_raised(k):
    with pytest.raises(ExerciseFailure, match="the caller's `x` was deleted"):
        k.call("raising_after", _x(), 2.0)
    with pytest.raises(judge.LearnerError):  # no array of the judge deleted: the error itself
        k.call("raising_after", 1.0, 2.0)


def test_arguments_that_cannot_be_built_are_the_learners_error_not_the_machinerys(k):
    with pytest.raises(NameError, match="not defined"):  # no call was made: nothing to say of the arrays
        k.call("pure", _x(), wire.Ref("a_name_no_cell_defines"))
    with pytest.raises(NameError, match="not defined"):
        k.call("a_function_no_cell_defines", _x(), 2.0)


def test_an_exit_or_an_unsendable_int_is_named_not_a_reply_that_does_not_answer(k):
    """The issue-42 audit's cases: both came back as 'the kernel's reply does not answer the grader's
    request', naming neither."""
    v = judge.verdict(lambda k: k.call("exits", 1.0), k, "test_exits")
    assert not v.passed and v.graded and "raised SystemExit" in v.feedback, v.feedback
    got = k.call("huge", 1.0)
    assert isinstance(got, wire.Opaque) and got.type == "int of about 100000 digits"


def test_a_claim_that_deletes_fails_as_a_claim(k):
    k.claim("check_globals_unchanged", "donating", wire.AsJax(_x()), 2.0, what="`donating`")
    assert len(k.failed_claims) == 1 and "the caller's `x` was deleted" in k.failed_claims[0].feedback


def test_a_reply_that_does_not_say_what_became_of_the_arrays_is_refused(k):
    class Forged(InProcess):
        def request(self, payload, *, on_input=None):
            reply = super().request(payload, on_input=on_input)
            reply.pop("kept", None)
            return reply

    forged = judge.Kernel(channel=Forged(), runner=k.runner)
    with pytest.raises(judge.ChannelError, match="what became of the arrays"):
        forged.call("donating", _x(), 2.0)
    assert forged.call("pure", 2.0, 3.0) == 6.0  # no array of the judge's: nothing to say


# --------------------------------------------------------------------------- the learner's side: visible tests

def test_ag_call_names_an_argument_the_call_deleted():
    import jax
    import jax.numpy as jnp

    import autograder as ag

    donating = jax.jit(lambda state, x: {"n": state["n"] + x}, donate_argnums=0)

    def step(state, x):
        return donating(state, x)

    state = {"n": jnp.zeros(3)}
    with pytest.raises(ExerciseFailure) as info:
        ag.call(step, state, jnp.ones(3), what="step(state, x)")
    assert info.value.idea == "purity"
    assert info.value.detail.startswith("step(state, x) deleted the caller's `state` (its entry ['n'])")
    with pytest.raises(ExerciseFailure, match="used an array that had been deleted") as again:
        ag.call(step, state, jnp.ones(3), what="step(state, x) again")  # the caller reuses it: JAX's error, named
    assert again.value.idea == "purity"
    kept = {"n": jnp.zeros(3)}
    assert ag.call(lambda s, x: {"n": s["n"] + x}, kept, 1.0)["n"].shape == (3,)  # nothing deleted: no failure
    assert not kept["n"].is_deleted()


def test_check_my_answers_names_the_idea_when_a_test_reuses_a_deleted_array():
    from autograder.selfcheck import run_visible_tests

    source = ("import jax, jax.numpy as jnp\n"
              "_x = jnp.arange(3.0)\n"
              "_y = jax.jit(lambda v: v * 2, donate_argnums=0)(_x)  # the function under test, called directly\n"
              "float(_x[0])\n")
    (row,) = run_visible_tests({"scaled": source}, {})
    assert not row["passed"] and "used an array that had been deleted" in row["feedback"]
    assert "03_purity" in row["feedback"]
    (plain,) = run_visible_tests({"other": "raise KeyError('k')"}, {})
    assert plain["feedback"] == "KeyError: 'k'"  # other errors as before


# --------------------------------------------------------------------------- exercises that had no check of their own

DONATING = {
    ("04_control_flow", "clip_by_norm"): '''
_clip = jax.jit(lambda x, max_norm: x * jnp.minimum(1.0, max_norm / jnp.linalg.norm(x)), donate_argnums=0)

def clip_by_norm(x, max_norm):
    # right values; the inner jit gives x's buffer to the result (inert under the caller's own jit)
    return _clip(x, max_norm)
''',
    ("04_control_flow", "ema"): '''
def _ema(xs, alpha):
    def body(y, x):
        y = alpha * x + (1 - alpha) * y
        return y, y
    _, ys = lax.scan(body, xs[0], xs[1:])
    return jnp.concatenate([xs[:1], ys])

_ema_donating = jax.jit(_ema, donate_argnums=0)

def ema(xs, alpha):
    return _ema_donating(xs, alpha)
''',
    ("05_shapes", "window_range"): '''
def _window_range(x, width):
    def one(_, start):
        window = jax.lax.dynamic_slice(x, (start,), (width,))
        return None, jnp.max(window) - jnp.min(window)
    return jax.lax.scan(one, None, jnp.arange(x.shape[0] - width + 1))[1]

_centred = jax.jit(lambda x: x - jnp.mean(x), donate_argnums=0)  # the result reuses x's buffer

def window_range(x, width):
    return _window_range(_centred(x), width)  # a range does not change with a shift
''',
}


@pytest.mark.parametrize("assignment,gid", sorted(DONATING))
def test_a_donating_inner_jit_fails_where_the_judge_has_no_donation_check(assignment, gid, runner):
    """04's clip_by_norm and ema, 05's window_range: their judges take every value from the
    exported program and never asked about donation; the answer's values are right."""
    from IPython.core.interactiveshell import InteractiveShell

    from conftest import ROOT
    from test_judge_secrets import _shell

    shell, solutions = _shell(InteractiveShell.instance(), assignment)
    try:
        assert shell.run_cell(DONATING[(assignment, gid)], silent=True).success
        kernel = judge.Kernel(channel=InProcess(), runner=runner)
        verdict = judge.run_judge(ROOT / "solutions" / assignment, kernel=kernel, grade_ids=[f"test_{gid}"],
                                  runner=runner, threads=1)[f"test_{gid}"]
        assert not verdict.passed and verdict.graded
        assert f"after a direct call of `{gid}` (not under jax.jit), the caller's" in verdict.feedback
        assert "was deleted" in verdict.feedback and "03_purity" in verdict.feedback, verdict.feedback
        assert shell.run_cell(solutions[gid], silent=True).success  # the control: the solution passes
        kernel = judge.Kernel(channel=InProcess(), runner=runner)
        assert judge.run_judge(ROOT / "solutions" / assignment, kernel=kernel, grade_ids=[f"test_{gid}"],
                               runner=runner, threads=1)[f"test_{gid}"].passed
    finally:
        shell.reset(new_session=False)
        assert shell.run_cell(CELLS, silent=True).success  # the module's shell as the other tests left it


def test_a_starved_kernel_call_through_ag_call_is_not_graded_not_a_zero():
    """The issue-42 audit's case: a judge calling the learner's function through ``call`` (01's
    count_primitives) turned a starved request into an ExerciseFailure (a zero)."""
    from autograder.feedback import call
    from autograder.judge import starvation

    class Starving:
        def request(self, payload, **_):
            raise judge.channel.KernelStarved(starvation.Watch(None).message("the code under test"))

    v = judge.verdict(lambda k: call(k.fn("f"), 1, what="f(1)"), judge.Kernel(channel=Starving()), "test_f")
    assert not v.passed and not v.graded and v.feedback.startswith("Not graded: the code under test ran out")
    with pytest.raises(ExerciseFailure, match=r"f\(1\) raised KeyError"):  # a learner's error: feedback
        call(lambda x: {}[x], 1, what="f(1)")
