"""The judge of 04_control_flow (trusted: runs in the grader, never in the learner's kernel).

One ``test_<name>(k)`` per graded test cell; ``k`` is an :class:`autograder.judge.Kernel`.
Values are compared judge-side with NumPy references computed here, on inputs drawn from
``k.rng`` (fresh at every grading), through ``jax.jit`` in the kernel (the channel's timeout
guards against a loop that never ends). What the exercises ask of the *program* is checked on
the learner's traced program exported into the judge (``k.export``): ``ema``'s program must
not grow with the length of ``xs`` (its operations counted at two lengths), ``collatz_steps``
and ``piecewise`` must export with ``n``/``k`` as traced arguments (one program for every
value), and ``piecewise``'s exported program (loop-free, so it always ends) is run here on
fresh inputs for every ``k``. Compile counts are kernel-side claims, an extra only.
"""
import re

import numpy as np

import autograder as ag
from autograder.judge import LearnerError
from autograder.wire import AsJax, Fixture, Ref, Spec

_OP = re.compile(r"\b(?:stablehlo|chlo|mhlo)\.[a-z_]+|\bfunc\.call\b|\bcall @")


def _f32(x):
    return AsJax(np.asarray(x, np.float32))


def _i32(n):
    return AsJax(np.int32(n))


def _export(k, name, *specs, translate=None):
    """``k.export(name, *specs)``; a learner error while tracing becomes feedback that names its
    idea (``translate`` first, then the shared classifier)."""
    try:
        return k.export(name, *specs)
    except LearnerError as exc:
        label = f"jax.export(jax.jit({name}))"
        specific = translate(exc, label) if translate is not None else None
        if specific is not None:
            raise specific from None

        def again():
            raise exc
        return ag.call(again, what=label)


def _jit_calls(name, arg_tuples):
    """``calls`` for a compile-count claim on ``jax.jit(name)`` (through the ``jit_call`` fixture)."""
    return [((Ref(name), *args), {}) for args in arg_tuples]


def _ops(exported) -> int:
    """The number of operations in an exported program's StableHLO (nested bodies included)."""
    return len(_OP.findall(exported.text))


# --------------------------------------------------------------------------- clip_by_norm

def _clip_reference(x, max_norm):
    x = np.asarray(x, np.float64)
    norm = np.sqrt(np.sum(x * x))
    return x * (max_norm / norm) if norm > max_norm else x


def _side(norm, max_norm):
    return (f"norm {norm:.3g} > max_norm {max_norm:.3g}, so it must be scaled to norm max_norm"
            if norm > max_norm else f"norm {norm:.3g} <= max_norm {max_norm:.3g}, so it must come back unchanged")


def _check_clip(got, x, max_norm, what):
    """got against the reference; the usual mistakes (per-entry clipping, scaling to norm 1,
    scaling small vectors up) are told which."""
    try:
        ag.check_close(got, _clip_reference(x, max_norm), what=what, idea="branches")
    except ag.ExerciseFailure as exc:
        xd = np.asarray(x, np.float64)
        norm = float(np.sqrt(np.sum(xd * xd)))
        g = np.asarray(got, np.float64) if np.shape(got) == xd.shape else None
        for alt, hint in ((np.clip(xd, -max_norm, max_norm),
                           "It clips each entry; clip the vector's norm: scale the whole of x by max_norm / norm."),
                          (xd / norm, "It scales x to norm 1; scale it to norm max_norm (x * max_norm / norm)."),
                          (xd * (max_norm / norm),
                           "It also scales vectors whose norm is already within max_norm; choose the scale "
                           "with `jnp.where(norm > max_norm, ...)` so those come back unchanged.")):
            if g is not None and np.allclose(g, alt, rtol=1e-4, atol=1e-5):
                ag.fail("branches", f"{exc.detail} {hint}")
        raise


def test_clip_by_norm(k):
    clip = k.fn("clip_by_norm").jitted()
    # Under jit only, two shapes only; both sides of the norm, the first two in a fixed order.
    factors = [float(k.rng.uniform(0.2, 0.6)), float(k.rng.uniform(1.25, 3.0))]
    factors += [float(f) for f in k.rng.choice([0.3, 0.7, 1.4, 2.5], size=4)]
    for trial, factor in enumerate(factors):
        shape = (2,) if trial % 2 == 0 else (2, 3)
        x = (k.rng.normal(size=shape) * k.rng.uniform(0.5, 4.0)).astype(np.float32)
        norm = float(np.sqrt(np.sum(x.astype(np.float64) ** 2)))
        max_norm = float(np.float32(norm * factor))
        what = f"jax.jit(clip_by_norm) on random input #{trial + 1} ({_side(norm, max_norm)})"
        _check_clip(ag.call(clip, _f32(x), max_norm, what="`jax.jit(clip_by_norm)`"), x, max_norm, what)
    y = k.rng.uniform(0.5, 3.0, size=(2, 3)).astype(np.float32)
    k.claim("check_compiles", Fixture("jit_call"),
            _jit_calls("clip_by_norm", [(_f32(y), 0.5), (_f32(y), 100.0), (_f32(2 * y), 3.0), (_f32(-y), 9.5)]),
            1, what="jax.jit(clip_by_norm)",
            why="A new `max_norm` or new data must not change the compiled program.")


# --------------------------------------------------------------------------- collatz_steps

def _collatz_reference(n):
    n, steps = int(n), 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return np.int32(steps)


def _traced_n(exc, label):
    """A loop that needs the Python value of `n` is control flow on a traced value."""
    import jax

    if isinstance(exc, jax.errors.TracerBoolConversionError):
        return None  # a Python `if`/`while` on a traced value: the general feedback says so
    if isinstance(exc, (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError)):
        return ag.ExerciseFailure(
            "control_flow", f"{label} needed the Python value of the traced `n` (such as `int(n)`); "
                            "under jit `n` has no value while tracing: loop with `lax.while_loop`, "
                            "whose condition is traced too.")
    return None


def test_collatz_steps(k):
    collatz = k.fn("collatz_steps").jitted()
    # 27 takes 111 steps and 871 takes 178: a fixed trip count of 100 falls short on both.
    ns = [1, 6, 2, 7, 27, 97, 871] + [int(v) for v in k.rng.integers(2, 5000, size=5)]
    for n in ns:
        what = f"jax.jit(collatz_steps)({n})"
        got = ag.call(collatz, _i32(n), what=what, translate=_traced_n)
        ag.check_close(got, _collatz_reference(n), what=f"{what} (steps to reach 1)", idea="loops")
    # The exported program takes `n` as a traced argument: one program for every n.
    exported = _export(k, "collatz_steps", Spec((), "int32"), translate=_traced_n)
    if not exported.has_loops:
        ag.fail("loops", "the program of collatz_steps has no loop: the number of steps depends on n, "
                         "so the loop must run on the device (`lax.while_loop`).")
    k.claim("check_compiles", Fixture("jit_call"), _jit_calls("collatz_steps", [(_i32(n),) for n in (1, 6, 27, 871)]), 1,
            what="jax.jit(collatz_steps)",
            why="The number of steps is data: it must not be part of the compiled program.")


# --------------------------------------------------------------------------- ema

def _ema_reference(xs, alpha):
    xs = np.asarray(xs, np.float64)
    ys = np.empty_like(xs)
    ys[0] = xs[0]
    for t in range(1, xs.shape[0]):
        ys[t] = alpha * xs[t] + (1 - alpha) * ys[t - 1]
    return ys


def test_ema(k):
    ema = k.fn("ema").jitted()
    # The first element first: y[0] is xs[0], not alpha * xs[0].
    xs = k.rng.normal(size=4).astype(np.float32)
    alpha = float(np.float32(k.rng.uniform(0.2, 0.8)))
    ys = ag.call(ema, _f32(xs), alpha, what="jax.jit(ema)")
    if np.shape(ys) == xs.shape:
        ag.check_close(np.asarray(ys)[0], xs[0],
                       what=f"y[0] of jax.jit(ema)(xs, {alpha:.3f}), which must start the average at xs[0],",
                       idea="loops")
    # Under jit only, and three shapes only (a single step among them): each new shape compiles.
    for trial, shape in enumerate([(4,), (6, 3), (1,), (6, 3), (4,)]):
        x, a = k.rng.normal(size=shape).astype(np.float32), float(np.float32(k.rng.uniform(0.05, 0.95)))
        ag.check_close(ag.call(ema, _f32(x), a, what="jax.jit(ema)"), _ema_reference(x, a),
                       what=f"jax.jit(ema)'s result on random input #{trial + 1} (alpha={a:.3f}; "
                            "y[t] = alpha * xs[t] + (1 - alpha) * y[t-1])",
                       idea="loops")
    # The traced program, exported at two lengths of xs: the same number of operations.
    short = int(k.rng.integers(3, 7))
    lengths = (short, short + int(k.rng.integers(9, 30)))
    sizes = {n: _ops(_export(k, "ema", Spec((n, 2), "float32"), Spec((), "float32"))) for n in lengths}
    if len(set(sizes.values())) > 1:
        shown = ", ".join(f"{s} operations at length {n}" for n, s in sizes.items())
        ag.fail("loops", f"the program of ema grows with the length of xs ({shown}): a Python loop is "
                         "being unrolled. Use `lax.scan` (or `lax.fori_loop`) so the body appears once.")


# --------------------------------------------------------------------------- piecewise

_BRANCHES_NP = (np.sin, lambda x: x ** 2 - 1.0, lambda x: 3.0 * np.abs(x))


def _traced_k(exc, label):
    """Indexing the tuple of branches with the traced `k` is a branch chosen in Python."""
    import jax

    if isinstance(exc, jax.errors.TracerBoolConversionError):
        return None  # a Python `if` on a traced value: the general feedback says so
    if isinstance(exc, (jax.errors.TracerIntegerConversionError, jax.errors.ConcretizationTypeError)):
        return ag.ExerciseFailure(
            "branches", f"{label} used the traced `k` as a Python index (`BRANCHES[k]`); under jit `k` "
                        "has no value while tracing: let `lax.switch(k, BRANCHES, x)` choose the branch "
                        "at run time.")
    return None


def _check_branch(got, x, kk, what):
    ag.check_close(got, _BRANCHES_NP[kk](np.asarray(x, np.float64)),
                   what=f"{what}, which must apply BRANCHES[{kk}],", idea="branches")


def test_piecewise(k):
    piecewise = k.fn("piecewise").jitted()
    x = k.rng.normal(size=3).astype(np.float32) * 1.5
    _check_branch(ag.call(piecewise, _f32(x), _i32(1), what="jax.jit(piecewise)", translate=_traced_k),
                  x, 1, "jax.jit(piecewise)(x, 1)")
    # Under jit only, at one shape.
    for kk in (0, 2, 1) + tuple(int(v) for v in k.rng.integers(0, 3, size=3)):
        v = (k.rng.normal(size=3) * 1.5).astype(np.float32)
        got = ag.call(piecewise, _f32(v), _i32(kk), what="jax.jit(piecewise)", translate=_traced_k)
        _check_branch(got, v, kk, f"jax.jit(piecewise)({np.round(v.astype(np.float64), 3).tolist()}, {kk})")
    # One program for every k: exported with k traced, then run here on fresh inputs.
    exported = _export(k, "piecewise", Spec((3,), "float32"), Spec((), "int32"), translate=_traced_k)
    if not exported.has_loops:  # a loop-free program always ends: safe to run here
        for kk in (2, 0, 1):
            v = (k.rng.normal(size=3) * 1.5).astype(np.float32)
            _check_branch(np.asarray(exported.call(v, np.int32(kk))), v, kk,
                          f"the exported program of jax.jit(piecewise) at ({np.round(v.astype(np.float64), 3).tolist()}, {kk})")
    k.claim("check_compiles", Fixture("jit_call"), _jit_calls("piecewise", [(_f32(x), _i32(kk)) for kk in (0, 1, 2, 1)]),
            1, what="jax.jit(piecewise)", why="`k` is runtime data: one program must hold every branch.")
