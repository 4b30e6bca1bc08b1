"""autograder.judge.mlir (exported programs read as parsed modules) and autograder.judge.programs
(the judges' traced programs). What a learner names
(scopes, functions, arguments) never changes a fact; the operations do."""
from __future__ import annotations

import pytest

from autograder.judge import mlir, programs
from autograder.judge import ensure_judge_devices

ensure_judge_devices()  # before JAX starts (at collection): the shard_map test meshes 4 devices


def _export(f, *shapes, dtype="float32"):
    import jax
    from jax import export

    return export.export(jax.jit(f))(*(jax.ShapeDtypeStruct(s, dtype) for s in shapes))


def _mean_sin(x):
    import jax.numpy as jnp

    return jnp.sin(x).mean()


def _facts(p):
    return (dict(p.op_counts), p.has_loops, p.collectives, p.callbacks, sorted(p.custom_call_targets), p.manual)


def test_names_scopes_and_named_call_do_not_change_the_facts():
    import jax

    def scoped(x):
        with jax.named_scope("stablehlo.all_reduce stablehlo.while {"):
            return _mean_sin(x)

    def braces(x):
        return _mean_sin(x)
    braces.__name__ = "f{ stablehlo.while } @main"

    def named(x):
        return jax.named_call(_mean_sin, name="stablehlo.all_gather")(x)

    def nested(x):  # an inner jitted function: a func.call, counted as its body
        return jax.jit(braces)(x)

    plain = mlir.read(_export(_mean_sin, (8,)))
    assert plain.count("stablehlo.sine") == 1 and not plain.has_loops and not plain.collectives
    for f in (scoped, braces, named, nested):
        assert _facts(mlir.read(_export(f, (8,)))) == _facts(plain), f.__name__




def test_a_real_psum_in_shard_map_is_found():
    """In a fresh process (this one's JAX may have started with 1 device): a real ``psum`` in
    ``shard_map`` is one all-reduce in a manual region; a plain mean has neither."""
    import subprocess
    import sys

    from conftest import PROCESSES, ROOT

    proc = subprocess.run([sys.executable, str(PROCESSES / "psum_found.py")], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_loops_and_calls_are_followed():
    import jax
    import jax.numpy as jnp

    def looped(x):
        return jax.lax.fori_loop(0, 3, lambda i, c: c * 2.0, x)

    assert mlir.read(_export(looped, (3,))).has_loops
    step = jax.jit(lambda x: jnp.sin(x) + 1.0)

    def three(x):
        return step(step(step(x)))

    p = mlir.read(_export(three, (3,)))
    assert p.count("stablehlo.sine") == 3  # one callee, three calls
    assert [o.name for o in p.top_level].count("func.call") == 3
    assert all(o.callee.op_counts["stablehlo.sine"] == 1 for o in p.top_level if o.name == "func.call")
    with_loop = mlir.read(_export(lambda x: jax.jit(looped)(x), (3,)))
    assert with_loop.has_loops  # a loop inside a called function is the program's loop


def test_custom_call_targets_and_types_come_from_the_operations():
    import jax.numpy as jnp

    p = mlir.read(_export(lambda a: jnp.linalg.eigh(a @ a.T)[0], (3, 3)))
    calls = [o for o in p.ops if o.name == mlir.CUSTOM_CALL]
    assert calls and all(o.target for o in calls) and not p.callbacks
    assert all(o.results for o in calls)


_CALLBACK_MODULE = """
module @m {
  func.func public @main(%arg0: tensor<f32> loc("xla_python_cpu_callback")) -> tensor<f32> {
    %0 = stablehlo.custom_call @xla_ffi_python_cpu_callback(%arg0) {has_side_effect = true} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
"""


def test_a_host_callback_is_a_custom_call_target_not_a_word_in_the_text():
    p = mlir.read(_CALLBACK_MODULE)
    assert p.callbacks == ["xla_ffi_python_cpu_callback"]
    quiet = _CALLBACK_MODULE.replace("stablehlo.custom_call @xla_ffi_python_cpu_callback(%arg0) "
                                     "{has_side_effect = true}", "stablehlo.sine %arg0")
    q = mlir.read(quiet)
    assert q.callbacks == [] and q.count("stablehlo.sine") == 1  # the location's name is not read


@pytest.mark.parametrize("text, why", [
    ("not mlir at all", "cannot be parsed"),
    ("module {\n}", "no entry function"),
    ("""module {
  func.func public @main(%a: tensor<f32>) -> tensor<f32> {
    %0 = func.call @main(%a) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}""", "recursively"),
])
def test_unreadable_programs_are_refused_with_a_reason(text, why):
    with pytest.raises(mlir.ProgramError, match=why):
        mlir.read(text)


class _Held:
    """An exported program as the judge holds one (``exported``, ``call``), run in this process."""

    def __init__(self, exp):
        self.exported = exp

    def call(self, *args, **kwargs):
        return self.exported.call(*args, **kwargs)


def test_a_traced_program_gives_values_and_facts_from_one_artifact():
    import numpy as np

    traced = programs.Traced(_Held(_export(_mean_sin, (4,))), "`f`")
    x = np.arange(4, dtype=np.float32)
    assert np.isclose(traced(x), np.sin(x).mean()) and traced.count("stablehlo.sine") == 1


def test_a_program_for_another_platform_is_refused_not_skipped():
    import jax
    import numpy as np
    from jax import export

    from autograder import judge
    from autograder.feedback import ExerciseFailure

    exp = export.export(jax.jit(_mean_sin), platforms=("cuda",))(jax.ShapeDtypeStruct((4,), "float32"))
    never_used = object()  # refused before any runner runs it (the runner's own refusal reads otherwise)
    with pytest.raises(ExerciseFailure, match=r"exported for cuda, not for the grader's platform alone \(cpu\)"):
        programs.Traced(judge.Exported(exp, runner=never_used), "`f`")(np.zeros(4, np.float32))


def test_a_program_starved_by_the_machine_is_not_graded_not_failed():
    """A run that ran out of time on a starved machine reaches the verdict as such (not graded),
    not as a failure of the learner's program."""
    import numpy as np

    from autograder import judge
    from autograder.judge.runner import ProgramStarved
    from autograder.judge.starvation import Watch

    class Starving(_Held):
        def call(self, *args, **kwargs):
            raise ProgramStarved(Watch(None).message("the program, run by the grader,"))

    traced = programs.Traced(Starving(_export(_mean_sin, (4,))), "`f`")
    v = judge.verdict(lambda k: traced(0.5 * np.ones(4, np.float32)), None, "test_f")
    assert not v.passed and not v.graded and v.feedback.startswith("Not graded: the program"), v


def _collatz(v):
    import jax.numpy as jnp

    return jnp.where(v % 2 == 0, v // 2, 3 * v + 1)


def test_a_loop_whose_trip_count_no_input_changes_is_told_apart():
    """``fixed_loops``: a ``fori_loop`` or ``scan`` with fixed bounds runs a fixed number of times
    whatever its flags; a ``while_loop`` whose condition reads the data does not, even with a cap."""
    import jax
    import jax.numpy as jnp

    def until_one(n):
        return jax.lax.while_loop(lambda s: s[0] != 1, lambda s: (_collatz(s[0]), s[1] + 1), (n, 0))[1]

    def capped(n):
        return jax.lax.while_loop(lambda s: (s[0] != 1) & (s[1] < 1000),
                                  lambda s: (_collatz(s[0]), s[1] + 1), (n, 0))[1]

    def flagged(v, c):
        done = v == 1
        return jnp.where(done, v, _collatz(v)), c + jnp.where(done, 0, 1)

    def fixed(n):
        return jax.lax.fori_loop(0, 600, lambda i, s: flagged(*s), (n, 0))[1]

    def fixed_traced_bounds(n):
        return jax.lax.fori_loop(jnp.int32(0), jnp.int32(600), lambda i, s: flagged(*s), (n, 0))[1]

    def counted_while(n):
        return jax.lax.while_loop(lambda s: s[2] < 700, lambda s: (*flagged(s[0], s[1]), s[2] + 1), (n, 0, 0))[1]

    def scanned(n):
        return jax.lax.scan(lambda s, _: (flagged(*s), None), (n, 0), length=600)[0][1]

    for f, fixed_loops in ((until_one, 0), (capped, 0), (fixed, 1), (fixed_traced_bounds, 1), (counted_while, 1),
                           (scanned, 1)):
        p = mlir.read(_export(f, (), dtype="int32"))
        assert (p.has_loops, p.fixed_loops) == (True, fixed_loops), f.__name__


# --------------------------------------------------------------------------- issue 33, item 2

def test_a_loop_inside_a_composite_is_the_programs_loop_and_its_size():
    """A composite is what XLA runs of it, its decomposition: a loop wrapped in
    ``jax.lax.composite`` is the program's loop, and an unrolled one grows with the length."""
    import jax
    import jax.numpy as jnp

    def looped(x):
        return jax.lax.composite(lambda x: jax.lax.fori_loop(0, 5, lambda i, c: c * 2.0, x), name="my.loop")(x)

    assert mlir.read(_export(looped, (3,))).has_loops

    def unrolled(n):
        def f(x):
            def body(x):
                ys = [x[0]]
                for t in range(1, x.shape[0]):
                    ys.append(0.5 * x[t] + 0.5 * ys[-1])
                return jnp.stack(ys)
            return jax.lax.composite(body, name="ema.fast")(x)
        return mlir.read(_export(f, (n,))).total

    assert unrolled(16) > unrolled(4) + 12


def test_a_custom_call_inside_a_composite_is_refused():
    import jax
    import jax.numpy as jnp

    from autograder.judge import allowlist

    def hidden(a):
        return jax.lax.composite(lambda a: jnp.linalg.eigh(a @ a.T)[0], name="my.eigh")(a)

    exp = _export(hidden, (3, 3))
    why = allowlist.refusal(exp)
    assert "custom_call" in why and "a native call" in why, why


def test_a_correct_program_with_composites_conds_and_calls_keeps_its_facts_and_values():
    import jax
    import jax.numpy as jnp
    import numpy as np

    from autograder.judge import allowlist

    step = jax.jit(lambda c, x: 0.3 * x + 0.7 * c)

    def ema(xs):
        def scan(xs):
            def body(c, x):
                y = step(c, x)
                return y, y
            return jnp.concatenate([xs[:1], jax.lax.scan(body, xs[0], xs[1:])[1]])
        ys = jax.lax.composite(scan, name="course.ema")(xs)
        return jax.lax.cond(xs[0] > 1e30, lambda y: y * 0.0, lambda y: y, ys)  # a branch an input can take

    exp = _export(ema, (6,))
    assert allowlist.refusal(exp) == ""
    p = mlir.read(exp)
    assert p.has_loops and p.count("stablehlo.case") == 1 and p.count("stablehlo.composite") == 0
    runnable = mlir.executable(exp)
    assert mlir.read(runnable).op_counts == p.op_counts  # what is read is what runs
    xs = np.arange(6, dtype=np.float32)
    assert np.allclose(np.asarray(runnable.call(xs)), np.asarray(exp.call(xs)))


@pytest.mark.parametrize("text", [
    # a custom_call whose called computation the checker would not read
    """module {
  func.func public @main(%a: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @Sharding(%a) {called_computations = [@hidden]} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @hidden(%a: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @lapack_sgetrf_ffi(%a) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}""",
    # a second public function beside the entry
    """module {
  func.func public @main(%a: tensor<f32>) -> tensor<f32> {
    return %a : tensor<f32>
  }
  func.func public @other(%a: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @lapack_sgetrf_ffi(%a) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}""",
])
def test_a_reference_the_checker_does_not_follow_is_refused(text):
    with pytest.raises(mlir.ProgramError, match="does not follow"):
        mlir.read(text)
