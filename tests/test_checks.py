"""Unit tests for the autograder's checks: for every check, a case it accepts and a case it
rejects, with the idea and the course section the learner is pointed to.

Fast (no notebooks): tiny arrays, one subprocess for the 8-device sharding checks.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import autograder as ag
from autograder import compilation, device, phases, purity, transfers
from autograder.feedback import TAUGHT_IN, where
from autograder.jaxprs import primitives_in  # the judges' helper (not in ag: it is the answer to 01's primitive_names)
from conftest import PROCESSES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rejects(fn, idea, *phrases):
    """Run ``fn``; it must raise ExerciseFailure for ``idea`` whose message contains every
    phrase and points (once) to where the course teaches ``idea``."""
    with pytest.raises(ag.ExerciseFailure) as info:
        fn()
    err = info.value
    msg = str(err)
    assert err.idea == idea, f"idea {err.idea!r}, expected {idea!r}: {msg}"
    chapter, section = TAUGHT_IN[idea]
    if chapter is not None:
        assert f"course/{chapter}.ipynb" in msg and f"\u201c{section}\u201d" in msg, msg
    pointers = 1 if where(idea) else 0
    assert msg.count("(see ") == pointers, f"the pointer to the course appears {msg.count('(see ')} times: {msg}"
    for phrase in phrases:
        assert phrase.lower() in msg.lower(), f"{phrase!r} not in {msg!r}"
    return err


def learner(src: str, name: str):
    """Define learner code in its own namespace, as a notebook would; return (function, globals)."""
    ns = {"jax": jax, "jnp": jnp, "np": np, "lax": lax}
    exec(textwrap.dedent(src), ns)  # noqa: S102 - test fixture
    return ns[name], ns


# --------------------------------------------------------------------------- feedback


class TestFeedback:
    def test_message_names_the_section(self):
        err = ag.ExerciseFailure("purity", "it changed a global.")
        assert str(err) == ("it changed a global. (see course/03_purity.ipynb, section "
                            "\u201cSide effects under jit\u201d.)")
        assert err.idea == "purity" and err.detail == "it changed a global."
        assert isinstance(err, AssertionError)

    def test_unknown_or_chapterless_idea(self):
        assert where("no-such-idea") == ""
        assert str(ag.ExerciseFailure("no-such-idea", "x.")) == "x."
        assert str(ag.ExerciseFailure("numerics", "x.")) == "x. (see the exercise's description.)"

    def test_every_idea_points_somewhere(self):
        for idea, (chapter, section) in TAUGHT_IN.items():
            assert chapter is None or (chapter[:2].isdigit() and section), idea
            assert (where(idea) == "") == (section is None), idea

    def test_fail_raises(self):
        rejects(lambda: ag.fail("static", "n must be static."), "static", "n must be static")

    def test_call_returns_the_result(self):
        assert ag.call(lambda x, y=1: x + y, 1, y=2) == 3

    def test_tracer_bool_conversion(self):
        def f(x):
            return x if x > 0 else -x

        rejects(lambda: ag.call(jax.jit(f), 1.0, what="`absval`"), "control_flow",
                "`absval`", "python `if`", "part of the traced program")

    def test_concretization(self):
        def f(x):
            return jnp.zeros(3) * float(x)

        rejects(lambda: ag.call(jax.jit(f), 1.0), "static", "concrete value")

    def test_non_concrete_boolean_index(self):
        def f(x):
            return x[x > 0].sum()

        rejects(lambda: ag.call(jax.jit(f), jnp.arange(3.0)), "shapes", "boolean mask", "every shape is fixed")

    def test_key_reuse(self):
        def f(key):
            return jax.random.normal(key, (2,)) + jax.random.uniform(key, (2,))

        with jax.debug_key_reuse(True):
            rejects(lambda: ag.call(f, jax.random.key(0)), "key_reuse", "same prng key twice", "a key of its own")

    def test_not_implemented(self):
        def stub(x):
            raise NotImplementedError()

        rejects(lambda: ag.call(stub, 1), "unanswered", "`stub` is not answered yet")

    def test_other_tracer_errors(self):
        rejects(lambda: ag.call(jax.jit(lambda i: [1, 2, 3][i]), jnp.int32(1)), "static", "python int")
        rejects(lambda: ag.call(jax.jit(lambda x: np.asarray(x)), jnp.ones(2)), "async", "numpy")
        box = []

        def leak(x):
            box.append(x)
            return x

        jax.jit(leak)(1.0)
        rejects(lambda: ag.call(lambda: box[0] + 1), "purity", "leaked a tracer")

    def test_other_errors_are_reported_as_such(self):
        def f(x):
            raise ValueError("bad input\nmore detail")

        err = rejects(lambda: ag.call(f, 1), "numerics", "`f` raised ValueError: bad input")
        assert "more detail" not in str(err)

    def test_exercise_failure_passes_through(self):
        def f():
            ag.fail("state", "the state was not returned.")

        rejects(lambda: ag.call(f), "state", "the state was not returned")

    def test_explained_block(self):
        def run():
            with ag.explained("your loop"):
                raise NotImplementedError

        rejects(run, "unanswered", "your loop is not answered yet")
        with ag.explained("fine"):
            pass


# --------------------------------------------------------------------------- numerics


class TestNumerics:
    def test_tolerance_by_dtype(self):
        assert ag.tolerance(np.float32) == (1e-4, 1e-5)
        assert ag.tolerance("float64") == (1e-9, 1e-12)
        assert ag.tolerance(jnp.bfloat16) == (2e-2, 1e-2)
        assert ag.tolerance(np.int32) == ag.tolerance(bool) == (0.0, 0.0)

    def test_close_accepts(self):
        x = np.random.default_rng(0).normal(size=50)
        # a float32 JAX result against a float64 NumPy reference is judged as float32
        ag.check_close(jnp.sum(jnp.asarray(x, jnp.float32) ** 2), np.sum(x ** 2))
        ag.check_close({"a": jnp.arange(3), "b": (jnp.ones(2), 2.0)},
                       {"a": np.arange(3), "b": (np.ones(2), 2.0)})
        ag.check_close(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))
        ag.check_close(np.array([1 + 1j], np.complex64), np.array([1 + 1j + 1e-6]))
        ag.check_close(jnp.array([1.0, 2.0], jnp.bfloat16), np.array([1.0, 2.004]), dtype=jnp.bfloat16)
        ag.check_close(np.array([1.0]), np.array([1.5]), atol=1.0)
        ag.check_close(np.array(["relu"]), np.array(["relu"]))

    def test_close_rejects_a_wrong_leaf(self):
        rejects(lambda: ag.check_close({"a": np.zeros(2), "b": np.array([1.0, 2.5])},
                                       {"a": np.zeros(2), "b": np.array([1.0, 2.0])}, what="out"),
                "numerics", "out['b'] is wrong", "index (1,)", "2.5", "expected", "1 of 2")

    def test_close_rejects_shape_structure_none(self):
        rejects(lambda: ag.check_close(np.ones(3), np.ones((3, 1))), "numerics", "shape (3,)", "(3, 1)")
        rejects(lambda: ag.check_close((1.0, 2.0), [1.0, 2.0]), "numerics", "structure")
        rejects(lambda: ag.check_close(None, np.ones(2)), "numerics", "is none", "return")

    def test_close_rejects_what_float64_casts_hid(self):
        rejects(lambda: ag.check_close(np.array([1 + 1j]), np.array([1 + 2j])), "numerics", "(1+1j)")
        rejects(lambda: ag.check_close(np.array([1.0, np.nan]), np.array([1.0, 1.0])),
                "numerics", "index (1,)", "nan")
        rejects(lambda: ag.check_close(np.array([np.nan]), np.array([1.0])), "numerics", "nan")
        rejects(lambda: ag.check_close(np.arange(3) + 1, np.arange(3)), "numerics", "index (0,)")
        rejects(lambda: ag.check_close(np.array(["tanh"]), np.array(["relu"])), "numerics", "tanh")
        rejects(lambda: ag.check_close(np.float32(1.001), np.float32(1.0), idea="purity"), "purity")

    def test_matches_reference_accepts(self):
        seen = []

        def make_args(rng):
            assert isinstance(rng, np.random.Generator)
            x = rng.normal(size=(4, 3))
            seen.append(x)
            return (x, 2.0)

        ag.check_matches_reference(lambda x, s: jnp.tanh(x) * s, lambda x, s: np.tanh(x) * s,
                                   make_args, trials=2)
        first = seen[:]
        seen.clear()
        ag.check_matches_reference(lambda x, s: jnp.tanh(x) * s, lambda x, s: np.tanh(x) * s,
                                   make_args, trials=2)
        assert all(np.array_equal(a, b) for a, b in zip(first, seen))  # deterministic inputs
        assert not np.array_equal(seen[0], seen[1])  # fresh inputs per trial

    def test_matches_reference_static(self):
        def cube(x, n):  # `n` must be static under jit: it is a Python loop count
            y = x
            for _ in range(n - 1):
                y = y * x
            return y

        ag.check_matches_reference(cube, lambda x, n: x ** n,
                                   lambda rng: (rng.uniform(1, 2, size=3), 3), static_argnums=(1,))

    def test_matches_reference_rejects(self):
        def half(x):
            return x / 2.0

        rejects(lambda: ag.check_matches_reference(half, lambda x: x / 3.0,
                                                   lambda rng: (rng.normal(size=3),)),
                "numerics", "`half`'s result on random input #1 is wrong")

    def test_matches_reference_names_the_idea(self):
        def half(x):
            return x / 2.0

        rejects(lambda: ag.check_matches_reference(half, lambda x: x / 3.0,
                                                   lambda rng: (rng.normal(size=3),), idea="constants",
                                                   what="scaled"),
                "constants", "scaled's result on random input #1 is wrong")
        rejects(lambda: ag.check_matches_reference(half, lambda x: x / 3.0,
                                                   lambda rng: (rng.normal(size=3),), idea="loops",
                                                   jit=False),
                "loops", "`half`'s result on random input #1 is wrong")
        # an error raised by the learner's code keeps its own idea
        def assign(x):
            x = jnp.asarray(x)
            x[0] = 1.0
            return x

        rejects(lambda: ag.check_matches_reference(assign, lambda x: x,
                                                   lambda rng: (rng.normal(size=3),), idea="constants"),
                "inplace", "immutable")

    def test_matches_reference_rejects_jit_disagreement(self):
        def f(x):  # eager sees a NumPy array, jit a tracer
            return x * 2 if isinstance(x, np.ndarray) else x * 3

        rejects(lambda: ag.check_matches_reference(f, lambda x: x * 2,
                                                   lambda rng: (rng.normal(size=3),)),
                "purity", "jax.jit(`f`) disagrees with calling it eagerly",
                "jax.jit(`f`)'s result on random input #1", "runs once, at trace time")
        # whatever idea the wrong values break, jit disagreeing with eager is purity
        rejects(lambda: ag.check_matches_reference(f, lambda x: x * 2,
                                                   lambda rng: (rng.normal(size=3),), idea="constants"),
                "purity", "disagrees with calling it eagerly")
        ag.check_matches_reference(f, lambda x: x * 2, lambda rng: (rng.normal(size=3),), jit=False)

    def test_matches_reference_stub(self):
        def todo(x):
            raise NotImplementedError

        rejects(lambda: ag.check_matches_reference(todo, lambda x: x, lambda rng: (1.0,)),
                "unanswered", "not answered yet")

    def test_equal(self):
        ag.check_equal(["sin", "mul"], ["sin", "mul"])
        rejects(lambda: ag.check_equal(["sin"], ["sin", "mul"], what="the names", idea="phases"),
                "phases", "the names is ['sin']", "expected ['sin', 'mul']")
        ag.check_equal(np.int64(3), 3)
        ag.check_equal(jnp.int32(16), 16)
        ag.check_equal((np.float32(0.5), "a"), (0.5, "a"))

    def test_equal_is_not_fooled_by_the_answer_s_own_comparison(self):
        class Liar:
            def __eq__(self, other):
                return True

            def __ne__(self, other):
                return False

        class LyingList(list):
            def __eq__(self, other):
                return True

            def __ne__(self, other):
                return False

            def __iter__(self):
                return iter(["sin", "mul"])

        class LyingStr(str):
            def __eq__(self, other):
                return True

            def __ne__(self, other):
                return False

        rejects(lambda: ag.check_equal(Liar(), ["sin", "mul"], what="the names"),
                "numerics", "the names is a Liar, not a plain value")
        rejects(lambda: ag.check_equal(LyingList(), ["sin", "mul"], what="the names"),
                "numerics", "the names is [], expected ['sin', 'mul']")
        rejects(lambda: ag.check_equal([LyingStr("cos")], ["sin"]), "numerics", "is ['cos']")
        liars = np.empty(3, dtype=object)
        liars[:] = [Liar(), Liar(), Liar()]
        rejects(lambda: ag.check_close(liars, np.ones(3, np.float32)), "numerics",
                "holds Liar objects, not numbers")
        names = np.empty(2, dtype=object)
        names[:] = [LyingStr("cos"), "mul"]
        rejects(lambda: ag.check_close(names, np.array(["sin", "mul"])), "numerics", "cos")


# --------------------------------------------------------------------------- phases


def _debug_sin(x):
    y = jnp.sin(x)
    jax.debug.print("sin(x) = {}", y)
    return y * 2


def _print_sin(x):
    y = jnp.sin(x)
    print("sin(x) =", y)
    return y * 2


def _debug_wrong(x):
    jax.debug.print("x = {}", x)
    return jnp.sin(x) * 2


class TestPhases:
    def test_captured_stdout(self):
        out, text = ag.captured_stdout(jax.jit(_debug_sin), jnp.array([0.5]))
        assert "sin(x) = [0.47" in text
        np.testing.assert_allclose(out, np.sin([0.5]) * 2, rtol=1e-6)

    def test_numbers_in(self):
        np.testing.assert_array_equal(phases.numbers_in("a=[-1.5 2.] b=3e-2 c=.5 d=7"),
                                      [-1.5, 2.0, 0.03, 0.5, 7.0])

    ARGS = [(jnp.array([0.5, 1.0]),), (jnp.array([2.0, 3.0]),)]

    def test_prints_values_accepts(self):
        ag.check_prints_values(jax.jit(_debug_sin), self.ARGS, lambda x: np.sin(np.asarray(x)))

    def test_prints_values_rejects_trace_time_print(self):
        rejects(lambda: ag.check_prints_values(jax.jit(_print_sin), self.ARGS,
                                               lambda x: np.sin(np.asarray(x)), what="rp"),
                "runtime_values", "rp printed a tracer", "jax.debug.print")

    def test_prints_values_rejects_wrong_values(self):
        rejects(lambda: ag.check_prints_values(jax.jit(_debug_wrong), self.ARGS,
                                               lambda x: np.sin(np.asarray(x))),
                "runtime_values", "on call #1", "does not show the values")

    def test_prints_values_rejects_printing_once(self):
        # a Python print of a concrete value still prints only at trace time: call #2 is silent
        def once(x):
            print("sin(x) =", np.sin([0.5, 1.0]))
            return x

        rejects(lambda: ag.check_prints_values(jax.jit(once), self.ARGS,
                                               lambda x: np.sin(np.asarray(x))),
                "runtime_values", "on call #2", "printed 'nothing'")


# --------------------------------------------------------------------------- compilation


def _power(x, n):
    for _ in range(n - 1):
        x = x * x
    return x


class TestCompilation:
    def test_count_compiles(self):
        p = jax.jit(_power, static_argnums=1)
        x = jnp.ones(3)
        assert ag.count_compiles(p, [(x, 2), (x + 1, 2), (x, 3)]) == 2
        assert ag.count_compiles(p, [(x, 2)], fresh=False) == 0  # cached from before
        assert ag.count_compiles(p, [(x, 2)]) == 1  # fresh clears the caches
        scale = jax.jit(lambda x, factor=1.0: x * factor, static_argnames="factor")
        assert ag.count_compiles(scale, [((x,), {"factor": 2.0}), ((x,), {"factor": 3.0}),
                                         ((x,), {"factor": 2.0})]) == 2
        assert ag.count_compiles(jax.jit(jnp.sin), [x, x + 1, jnp.ones(4)]) == 2

    def test_a_dict_argument_is_not_read_as_kwargs(self):
        x = jnp.ones(3)
        apply = jax.jit(lambda x, params: x * params["w"])
        # two positional arguments, the second a dict pytree: not (args, kwargs)
        assert ag.count_compiles(apply, [(x, {"w": 2.0}), (x, {"w": 3.0})]) == 1
        assert ag.count_compiles(apply, [ag.Call(x, {"w": 2.0}), ag.Call(x, params={"w": 1.0})]) == 2
        assert repr(ag.Call(1, lr=0.5)) == "Call(1, lr=0.5)"

    def test_listener_is_registered_once(self):
        # registering the monitoring listener twice would count every compile twice
        f = jax.jit(lambda x: x - 1)
        x = jnp.ones(2)
        assert ag.count_compiles(f, [x]) == 1
        compilation._ensure_listener()
        compilation._ensure_listener()
        assert ag.count_compiles(f, [x]) == 1

    def test_count_traces(self):
        x = jnp.ones(3)
        assert ag.count_traces(_power, [(x, 2), (x * 2, 2), (x, 4)], static_argnums=1) == 2
        assert ag.count_traces(lambda x, n: x * n, [(x, 1.0), (x, 2.0)]) == 1
        assert ag.count_traces(lambda x, *, n: x * n, [((x,), {"n": 1}), ((x,), {"n": 2})],
                               static_argnames="n") == 2

    def test_compile_counter(self):
        f = jax.jit(lambda x: x + 1)
        a, b, c = jnp.ones(2), jnp.ones(5), jnp.ones(7)  # eager ops compile too: make them first
        with ag.CompileCounter() as outer:
            f(a).block_until_ready()
            with ag.CompileCounter(fresh=False) as inner:
                f(a).block_until_ready()
                f(b).block_until_ready()
        assert (outer.compiles, inner.compiles) == (2, 1)
        assert outer.traces >= 2 and inner.traces >= 1
        f(c).block_until_ready()
        assert outer.compiles == 2  # nothing counted after the block

    def test_check_compiles_accepts(self):
        x = jnp.ones(3)
        ag.check_compiles(jax.jit(_power, static_argnums=1), [(x, n) for n in (1, 2, 3, 2)], 3)
        ag.check_compiles(jax.jit(lambda x, s: x * s), ((x, s) for s in (0.5, 2.0, 7.0)), 1)
        ag.check_compiles_at_most(jax.jit(lambda x, s: x * s), [(x, 1.0), (x, 2.0)], 1)

    def test_check_compiles_rejects_too_many(self):
        scale = jax.jit(lambda x, s: x * s, static_argnums=1)
        rejects(lambda: ag.check_compiles(scale, [(jnp.ones(3), s) for s in (0.5, 2.0, 7.0)], 1,
                                          what="scale_by"),
                "recompiles", "scale_by compiled 3 time(s) over 3 call(s); expected 1",
                "compile signature")
        rejects(lambda: ag.check_compiles(scale, [(jnp.ones(3), s) for s in (1.0, 2.0)], 1,
                                          why="Make it dynamic."),
                "recompiles", "Make it dynamic.")

    def test_check_compiles_rejects_too_few(self):
        x = jnp.ones(3)
        rejects(lambda: ag.check_compiles(jax.jit(lambda x, n: x * n), [(x, 2), (x, 3)], 2),
                "recompiles", "compiled 1 time(s)", "should be static")

    def test_check_compiles_at_most_rejects(self):
        rejects(lambda: ag.check_compiles_at_most(jax.jit(jnp.sum), [jnp.ones(n) for n in (1, 2, 3)],
                                                  2, what="the kernel"),
                "recompiles", "the kernel compiled 3 times over 3 calls; at most 2")

    def test_learner_error_while_counting(self):
        def bad(x):
            return x if x > 0 else -x

        rejects(lambda: ag.check_compiles(jax.jit(bad), [(1.0,)], 1), "control_flow")

# --------------------------------------------------------------------------- jaxprs


def _nested(x):
    """sin only inside cond inside scan; exp only inside while; tanh only inside an inner jit."""
    def body(c, xi):
        y = lax.cond(xi > 0, jnp.sin, jnp.cos, c)
        return y, y

    c, _ = lax.scan(body, x[0], x)
    w = lax.while_loop(lambda v: v < 10.0, lambda v: v + jnp.exp(1.0), c)
    return jax.jit(jnp.tanh)(w)


def _ema_loop(xs, alpha):
    ys = [xs[0]]
    for t in range(1, xs.shape[0]):
        ys.append(alpha * xs[t] + (1 - alpha) * ys[-1])
    return jnp.stack(ys)


def _ema_scan(xs, alpha):
    def step(y, x):
        y = alpha * x + (1 - alpha) * y
        return y, y

    _, ys = lax.scan(step, xs[0], xs[1:])
    return jnp.concatenate([xs[:1], ys])


class TestJaxprs:
    def test_primitives_in_walks_nested_jaxprs(self):
        closed = jax.make_jaxpr(_nested)(jnp.ones(3))
        found = set(primitives_in(closed))
        assert {"scan", "cond", "sin", "cos", "while", "exp", "lt", "tanh"} <= found
        assert not {"sin", "cos", "exp", "tanh"} & set(primitives_in(closed, nested=False))
        assert primitives_in(closed.jaxpr) == primitives_in(closed)  # open jaxpr too
        assert ag.jaxpr_size(closed) == len(primitives_in(closed)) > ag.jaxpr_size(closed, nested=False)

    def test_primitives_in_custom_and_remat(self):
        found = primitives_in(jax.make_jaxpr(jax.checkpoint(lambda x: jnp.sin(jnp.cos(x))))(1.0))
        assert {"sin", "cos"} <= set(found)
        assert "max" in primitives_in(jax.make_jaxpr(jax.nn.relu)(1.0))  # inside custom_jvp

    def test_primitive_present(self):
        ag.check_primitive_present(_nested, (jnp.ones(3),), "sin")
        ag.check_primitive_present(_nested, (jnp.ones(3),), ["while", "fori_loop"])
        rejects(lambda: ag.check_primitive_present(jnp.sin, (1.0,), {"cond", "select_n"},
                                                   what="clip", why="Use lax.cond or jnp.where."),
                "control_flow", "the jaxpr of clip has none of ['cond', 'select_n']",
                "Use lax.cond or jnp.where.")

    def test_primitive_absent(self):
        ag.check_primitive_absent(jnp.sin, (1.0,), ["cos", "while"])
        rejects(lambda: ag.check_primitive_absent(_nested, (jnp.ones(3),), "tanh", idea="loops"),
                "loops", "the jaxpr of `_nested` contains ['tanh']")

    def test_primitive_checks_static_argnums(self):
        ag.check_primitive_present(_power, (jnp.ones(2), 3), "mul", static_argnums=(1,))
        ag.check_primitive_absent(_power, (jnp.ones(2), 1), "mul", static_argnums=(1,))

    def test_tracing_errors_become_feedback(self):
        def f(x):
            return x if x > 0 else -x

        rejects(lambda: ag.check_primitive_present(f, (1.0,), "cond"), "control_flow", "python `if`")

    def test_jaxpr_size_constant(self):
        make = lambda n: (jnp.ones((n, 2)), 0.3)  # noqa: E731
        ag.check_jaxpr_size_constant(_ema_scan, make, [4, 8, 16])
        rejects(lambda: ag.check_jaxpr_size_constant(_ema_loop, make, [4, 8], what="ema"),
                "loops", "the jaxpr of ema grows with the length", "length 4:", "length 8:",
                "unrolled")

    def test_jaxpr_size_constant_static_length(self):
        def repeat(x, n):
            return lax.fori_loop(0, n, lambda i, v: v * 2, x)

        def unrolled(x, n):
            return _power(x, n)

        ag.check_jaxpr_size_constant(repeat, lambda n: (1.0, n), [2, 5], static_argnums=(1,))
        rejects(lambda: ag.check_jaxpr_size_constant(unrolled, lambda n: (1.0, n), [2, 5],
                                                     static_argnums=(1,)), "loops", "grows")


# --------------------------------------------------------------------------- purity

PURE_SRC = """
def step(state, x):
    count = state["count"] + 1
    total = state["total"] + x
    return {"count": count, "total": total}, total / count
"""

IMPURE_SRC = """
HISTORY = []
CALLS = 0

def step(state, x):
    global CALLS
    CALLS += 1
    HISTORY.append(x)
    count = state["count"] + 1
    total = state["total"] + x
    return {"count": count, "total": total}, total / count
"""

STATE = ({"count": jnp.int32(0), "total": jnp.float32(0.0)}, jnp.float32(2.0))


class TestPurity:
    def test_pure_accepts(self):
        step, ns = learner(PURE_SRC, "step")
        ag.check_pure(step, STATE)
        ag.check_pure(step, STATE, namespace=ns)

    def test_pure_rejects_changed_globals(self):
        step, _ = learner(IMPURE_SRC, "step")
        rejects(lambda: ag.check_pure(step, STATE, what="step"), "purity",
                "calling step changed the global(s) ['CALLS', 'HISTORY']")

    def test_pure_rejects_a_jitted_impure_function(self):
        step, _ = learner(IMPURE_SRC.replace("def step", "@jax.jit\ndef step"), "step")
        rejects(lambda: ag.check_pure(step, STATE), "purity", "changed the global(s)")
        # even after it was run once, when its trace is cached
        step(*STATE)
        rejects(lambda: ag.check_pure(step, STATE), "purity", "changed the global(s)")

    def test_pure_rejects_different_results(self):
        noisy, _ = learner("def noisy(x):\n    return x + np.random.rand()\n", "noisy")
        rejects(lambda: ag.check_pure(noisy, (jnp.ones(3),)), "purity",
                "`noisy` gave different results for the same inputs", "second call is wrong")

    def test_pure_rejects_jit_disagreement(self):
        # the Python body looks at the concrete argument, which only exists eagerly
        src = """
def scaled(x):
    return x * (2.0 if isinstance(x, np.ndarray) else 3.0)
"""
        scaled, _ = learner(src, "scaled")
        rejects(lambda: ag.check_pure(scaled, (np.ones(2),)), "purity",
                "jax.jit(`scaled`) disagrees with calling it eagerly", "trace time")

    def test_no_tracer_leak(self):
        step, _ = learner(PURE_SRC, "step")
        ag.check_no_tracer_leak(step, STATE)
        leaky, ns = learner("SEEN = []\ndef leaky(x):\n    SEEN.append(x)\n    return x * 2\n", "leaky")
        jax.jit(leaky)(jnp.ones(3))  # a cached trace must not hide the leak
        rejects(lambda: ag.check_no_tracer_leak(leaky, (jnp.ones(3),)), "purity", "leaked a tracer")
        rejects(lambda: ag.check_no_tracer_leak(jax.jit(leaky), (jnp.ones(3),)), "purity", "leaked")

    def test_no_tracer_leak_other_errors(self):
        def f(x):
            return x if x > 0 else -x

        rejects(lambda: ag.check_no_tracer_leak(f, (1.0,)), "control_flow")

    def test_input_unchanged(self):
        def copy_set(x, v):
            y = np.array(x)
            np.fill_diagonal(y, v)
            return y

        def in_place(x, v):
            np.fill_diagonal(x, v)
            return x

        ag.check_input_unchanged(copy_set, (np.zeros((3, 3)), 1.0))
        ag.check_input_unchanged(lambda x, v: x.at[0, 0].set(v), (jnp.zeros((3, 3)), 1.0))
        rejects(lambda: ag.check_input_unchanged(in_place, (np.zeros((3, 3)), 1.0)), "inplace",
                "`in_place` modified its argument #1 in place", ".at[")

    def test_input_unchanged_containers(self):
        def pure_step(state, x):
            return {"count": state["count"] + 1, "total": state["total"] + x}

        def mutating_step(state, x):
            state["count"] = state["count"] + 1
            return state

        ag.check_input_unchanged(pure_step, ({"count": jnp.int32(0), "total": np.zeros(2)}, 1.0))
        rejects(lambda: ag.check_input_unchanged(mutating_step, ({"count": jnp.int32(0)}, 1.0)),
                "inplace", "modified its argument #1 in place")
        rejects(lambda: ag.check_input_unchanged(lambda xs: xs.append(1), ([np.ones(2)],)),
                "inplace", "argument #1")

    def test_globals_snapshot(self):
        """A learner's global is watched whatever its name (``_private`` too: issue 45); IPython's
        own history names (``_``, ``_7``, ``_i``, ``_oh``...) and dunders are not."""
        before = purity.snapshot_globals({"a": [1], "_private": [2], "arr": np.ones(2), "f": len, "_": 1,
                                          "_7": 2, "_i": "x", "__name__": "m"})
        assert set(before) == {"a", "_private", "arr", "f"}
        after = purity.snapshot_globals({"a": [1, 2], "_private": [], "arr": np.ones(2), "f": len, "b": 1, "_": 5})
        assert purity.changed_globals(before, after) == ["_private", "a", "b"]


# --------------------------------------------------------------------------- transfers


class TestTransfers:
    def test_traceable(self):
        ag.check_traceable(lambda x, n: x * n, (jnp.ones(2), 3), static_argnums=(1,))
        rejects(lambda: ag.check_traceable(lambda x: jnp.sin(x) * float(x.sum()), (jnp.ones(2),),
                                           what="train_losses"),
                "async", "tracing train_losses under jax.jit needed the concrete value")
        rejects(lambda: ag.check_traceable(lambda x: x.item(), (jnp.ones(()),)), "async", "concrete value")
        rejects(lambda: ag.check_traceable(lambda x: x if x > 0 else -x, (1.0,)), "control_flow")

    def test_no_host_transfer_accepts(self):
        def update(w, x, lr, *, steps=1):
            for _ in range(steps):
                w = w - lr * x
            return w

        # NumPy arrays and Python scalars passed by the caller are placed before the guarded call
        ag.check_no_host_transfer(update, (np.ones(3, np.float32), jnp.ones(3), 0.1))
        ag.check_no_host_transfer(update, (jnp.ones(3),), kwargs={"x": np.ones(3, np.float32),
                                                                  "lr": np.float32(0.1), "steps": 2},
                                  static_argnames=("steps",))
        ag.check_no_host_transfer(lambda x, n: x * n, (jnp.ones(3), 2), static_argnums=1)

    def test_no_host_transfer_rejects_host_conversion(self):
        def losses(x):
            return jnp.stack([jnp.float32(float(v)) for v in x])

        rejects(lambda: ag.check_no_host_transfer(losses, (jnp.ones(3),)), "async", "concrete value")

    def test_no_host_transfer_rejects_a_guarded_transfer(self, monkeypatch):
        # On CPU a jitted call has no other way to transfer; simulate one by not placing the args.
        monkeypatch.setattr(transfers, "_to_device", lambda args, kwargs, *a: (args, kwargs))
        rejects(lambda: ag.check_no_host_transfer(lambda x: x + 1, (np.ones(3, np.float32),),
                                                  what="the step"),
                "async", "the step moved data between host and device inside the hot path",
                "host-to-device")


# --------------------------------------------------------------------------- randomness


def _split_twice(key, n):
    k1, k2 = jax.random.split(key)
    return jax.random.normal(k1, (n,)) + jax.random.uniform(k2, (n,))


def _reuse(key, n):
    return jax.random.normal(key, (n,)) + jax.random.uniform(key, (n,))


class TestRandomness:
    def test_is_typed_key(self):
        assert ag.is_typed_key(jax.random.key(0))
        assert not ag.is_typed_key(jax.random.PRNGKey(0))
        assert not ag.is_typed_key(3)

    def test_typed_key(self):
        ag.check_typed_key(jax.random.key(1))
        rejects(lambda: ag.check_typed_key(jax.random.PRNGKey(1)), "prng",
                "legacy uint32 `PRNGKey`", "jax.random.key(seed)", "key-reuse checker")
        rejects(lambda: ag.check_typed_key(42, what="the seed"), "prng",
                "the seed is not a PRNG key (it is int)", "jax.random.key(seed)")

    def test_no_key_reuse_accepts(self):
        key = jax.random.key(0)
        ag.check_no_key_reuse(_split_twice, (key, 3), static_argnums=1)
        # the caller's key is still fresh: the check worked on copies
        ag.check_no_key_reuse(_split_twice, (key, 3), static_argnums=1)
        ag.check_no_key_reuse(lambda n, *, key: _split_twice(key, n), (3,), kwargs={"key": key},
                              jit=False)
        with jax.debug_key_reuse(True):
            jax.random.split(key)

    def test_no_key_reuse_rejects(self):
        rejects(lambda: ag.check_no_key_reuse(_reuse, (jax.random.key(0), 3), static_argnums=1,
                                              what="init_mlp"),
                "key_reuse", "init_mlp consumed the same key more than once", "jax.random.split")

    def test_no_key_reuse_sees_programs_compiled_without_the_checker(self):
        def reuse_late(key, n):
            return _reuse(key, n) * 2

        key = jax.random.key(5)
        reuse_late(key, 4), jax.jit(reuse_late, static_argnums=1)(key, 4)  # compiled, unchecked
        rejects(lambda: ag.check_no_key_reuse(reuse_late, (key, 4), static_argnums=1, jit=False),
                "key_reuse", "consumed the same key")
        with jax.debug_key_reuse(False):
            jax.jit(reuse_late, static_argnums=1)(key, 4)
        rejects(lambda: ag.check_no_key_reuse(reuse_late, (key, 4), static_argnums=1),
                "key_reuse", "consumed the same key")

    def test_no_key_reuse_eager_only(self):
        rejects(lambda: ag.check_no_key_reuse(_reuse, (jax.random.key(0), 3), jit=False,
                                              static_argnums=1),
                "key_reuse", "consumed the same key")

    def test_no_key_reuse_rejects_under_jit(self):
        def sneaky(key, n):  # reuses the key only while being traced
            return _reuse(key, n) if isinstance(key, jax.core.Tracer) else _split_twice(key, n)

        rejects(lambda: ag.check_no_key_reuse(sneaky, (jax.random.key(0), 3), static_argnums=1),
                "key_reuse", "jax.jit of `sneaky` consumed the same key more than once")

    def test_no_key_reuse_rejects_legacy_keys(self):
        rejects(lambda: ag.check_no_key_reuse(_split_twice, (jax.random.PRNGKey(0), 3),
                                              static_argnums=1),
                "prng", "legacy", "jax.random.key(seed)")

    def test_no_key_reuse_other_errors(self):
        def stub(key):
            raise NotImplementedError

        rejects(lambda: ag.check_no_key_reuse(stub, (jax.random.key(0),)), "unanswered")


# --------------------------------------------------------------------------- sharding (8 devices)



@pytest.fixture(scope="module")
def sharding_results():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, str(PROCESSES / "sharding_checks.py")], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULTS")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULTS"):])


class TestSharding:
    def test_eight_virtual_devices(self, sharding_results):
        assert sharding_results["devices"] == 8 and sharding_results["backend"] == "cpu"

    def test_sharding_accepts_equivalent_specs(self, sharding_results):
        assert sharding_results["equivalent"] is None
        assert sharding_results["describe"] in ("NamedSharding(PartitionSpec('data',))",
                                                "NamedSharding(P('data',))")  # repr differs by version
        assert sharding_results["normalise"] == [True, True, False]

    @pytest.mark.parametrize("case, phrases", [
        ("wrong_axis", ["shard_rows(x, mesh) is placed as NamedSharding(", "('data',))",
                        "expected NamedSharding(", "(None, 'data'))"]),
        ("replicated", ["the output is placed as", "expected NamedSharding(", "('data',))"]),
        ("not_array", ["the output is of type numpy.ndarray, not a jax.Array", "np.asarray"]),
    ])
    def test_sharding_rejects(self, sharding_results, case, phrases):
        idea, msg = sharding_results[case]
        assert idea == "sharding"
        assert "course/09_sharding.ipynb" in msg and TAUGHT_IN["sharding"][1] in msg
        for phrase in phrases:
            assert phrase in msg, msg

    def test_spec_in_type(self, sharding_results):
        assert sharding_results["spec_ok"] is None
        idea, msg = sharding_results["spec_wrong"]
        assert idea == "sharding" and "explicit_matmul(x, w) has type float32[8@data,4]" in msg
        assert "('data', None), expected " in msg and "('data', 'model')." in msg
        assert TAUGHT_IN["sharding"][1] in msg
        idea, msg = sharding_results["spec_auto"]
        assert idea == "sharding" and "(None, None), expected " in msg and "('data',)." in msg

    def test_sharding_errors_are_explained(self, sharding_results):
        idea, msg = sharding_results["sharding_type_error"]
        assert idea == "explicit_sharding" and "gram(x) raised ShardingTypeError: it combined" in msg
        assert "is yours to state" in msg and TAUGHT_IN["explicit_sharding"][1] in msg
        assert "out_sharding" not in msg and "reshard" not in msg   # the idea, never the fix's code
        idea, msg = sharding_results["indivisible"]
        assert idea == "sharding" and "shard(x) split an array dimension" in msg and "a multiple of" in msg

    def test_meshes_helpers(self, sharding_results):
        shape, types, n = sharding_results["mesh"]
        assert shape == {"data": 2, "model": 4} and n == 8
        assert all("Explicit" in t for t in types)  # axis_types passed, whatever the default
        assert "fewer than 16" in sharding_results["too_few"]
        assert "use_virtual_cpu_devices(16)" in sharding_results["too_few"]

    def test_check_uses_collective(self, sharding_results):
        assert sharding_results["collective_ok"] is None
        for case, phrase in [("collective_none", "uses no collective"),
                             ("collective_no_shard_map", "has no `shard_map`")]:
            idea, msg = sharding_results[case]
            assert idea == "shard_map" and phrase in msg and "mean(x)" in msg, msg
            assert TAUGHT_IN["shard_map"][1] in msg
        idea, msg = sharding_results["collective_broken"]
        assert "tracing mean(x)" in msg and idea != "numerics", (idea, msg)

    def test_shard_map_jaxpr_is_walked(self, sharding_results):
        assert {"shard_map", "reduce_sum"} <= set(sharding_results["shard_map_prims"])
        assert sharding_results["mean"] == 1.0


# --------------------------------------------------------------------------- device helpers


class _Pending:
    """A fake result: blocking on it takes ``seconds`` (like waiting for the device)."""

    def __init__(self, log, seconds):
        self.log, self.seconds = log, seconds

    def block_until_ready(self):
        time.sleep(self.seconds)
        self.log.append("block")
        return self


class TestDevice:
    def test_device_report(self):
        report = ag.device_report()
        assert report.startswith(f"JAX {jax.__version__} on {jax.default_backend().upper()}: ")
        assert f"{jax.device_count()} device(s)" in report
        assert jax.devices()[0].device_kind in report

    @pytest.mark.parametrize("backend, expected", [("cpu", 1), ("gpu", 2), ("tpu", 3), ("metal", 1)])
    def test_problem_size(self, monkeypatch, backend, expected):
        monkeypatch.setattr(device, "backend", lambda: backend)
        assert ag.problem_size(cpu=1, gpu=2, tpu=3) == expected
        assert ag.problem_size(cpu=1, gpu=2) == (1 if backend in ("cpu", "metal") else 2)
        assert ag.problem_size(cpu=1) == 1

    def test_problem_size_here(self):
        assert ag.problem_size(cpu="c", gpu="g", tpu="t") == {"cpu": "c", "gpu": "g", "tpu": "t"}[
            jax.default_backend()]

    def test_honest_time_blocks_and_warms_up(self):
        log = []
        calls = []

        def f(x):
            calls.append(x)
            log.append("call")
            # the first (warm-up) call is slow, like tracing + compiling
            return _Pending(log, 0.3 if len(calls) == 1 else 0.01)

        t = ag.honest_time(f, 7, repeats=3, warmup=1)
        assert calls == [7] * 4  # one untimed warm-up, three timed calls
        assert log == ["call", "block"] * 4  # every call blocked before the next one
        assert len(t.times) == 3 and t["times"] == t.times
        assert t.median >= 0.01 and t.min >= 0.01  # the wait is inside the timed region
        assert t.median < 0.2  # the warm-up is not
        assert t.compile_s >= 0.1
        assert t.min <= t.median

    def test_honest_time_jitted(self):
        f = jax.jit(lambda x: x @ x)
        x = jnp.ones((8, 8))
        with ag.CompileCounter() as counter:
            t = ag.honest_time(f, x, repeats=2, warmup=0)  # still warms up once
            assert counter.compiles == 1
        assert len(t.times) == 2 and t.median > 0

    def test_honest_time_validates(self):
        with pytest.raises(ValueError):
            ag.honest_time(lambda: None, repeats=0)
        with pytest.raises(AttributeError):
            ag.honest_time(lambda: 1, repeats=1).nonexistent  # noqa: B018

    def test_use_virtual_cpu_devices(self, monkeypatch):
        monkeypatch.setenv("XLA_FLAGS", "--xla_foo=1")
        ag.use_virtual_cpu_devices(8)  # backends exist already: harmless, no exception
        assert os.environ["XLA_FLAGS"] == "--xla_foo=1 --xla_force_host_platform_device_count=8"
        ag.use_virtual_cpu_devices(4)  # an explicit setting is kept
        assert os.environ["XLA_FLAGS"].count("device_count") == 1

    def test_matmul_flops(self):
        assert device.matmul_flops(4) == 128.0
        assert device.matmul_flops(2, 3, 4) == 48.0


# --------------------------------------------------------------------------- one error classifier

def test_error_kind_is_shared_by_checks_review_and_judge():
    """The checks, the review report and the judge (which sees only class names and a message)
    classify learner errors with one function: the same error gets the same kind either way."""
    import importlib

    from autograder.feedback import _explain, error_kind, explain_error, kind_of
    review = importlib.import_module("autograder.review")

    def bool_on_tracer(x):
        return x if x > 0 else -x

    with pytest.raises(jax.errors.TracerBoolConversionError) as info:
        jax.jit(bool_on_tracer)(1.0)
    exc = info.value
    names = [c.__name__ for c in type(exc).__mro__]
    assert kind_of(exc) == error_kind(names, str(exc)) == "bool_conversion"
    assert review._classify(exc) == "decisions"
    assert explain_error(names, str(exc), "f").idea == _explain(exc, "f").idea == "control_flow"
    # judged by names alone, as the judge sees a kernel's error
    assert error_kind(["TypeError", "Exception"], "'ArrayImpl' object does not support item assignment") == "immutable"
    assert error_kind(["RuntimeError"], "boom") is None
    missing = explain_error(["NameError", "Exception"], "name 'scaled' is not defined", "`scaled`")
    assert missing.idea == "unanswered" and "does not define that name" in str(missing)
    assert error_kind(["UnboundLocalError", "NameError"], "cannot access local variable 'x'") is None
    assert explain_error(["RuntimeError"], "boom", "f").idea == "numerics"
