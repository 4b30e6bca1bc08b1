"""The judge of 02_static_dynamic (trusted: runs in the grader, never in the learner's kernel).

One ``test_<name>(k)`` per graded test cell; ``k`` is an :class:`autograder.judge.Kernel`.
Each exercise defines the *jitted* function itself. Values are judged here, on inputs drawn
from ``k.rng``, against NumPy references. What is static is checked from outside where a call
shows it: a static argument must be hashable, so ``power`` with ``n`` static refuses a JAX array
as ``n``, and ``scale_by`` with ``factor`` traced accepts one (and scales by it). Compile
counts (one per distinct static value, none for new array values) and whether the name is a
jitted function (it has ``lower``) are kernel-side claims: they can fail a test, never pass it.
Every value that earns points comes from the learner's exported program (the configuration
static, the data traced: :mod:`autograder.judge.programs`), run here at float32, the exercises'
dtype; the kernel's calls are fail-only checks beside them.
"""
import jax
import numpy as np

from autograder.judge import call, check_close, ExerciseFailure, fail
from autograder.judge import programs
from autograder.judge import LearnerError
from autograder.judge import AsJax, Fixture, Ref


def _f32(x):
    return AsJax(np.asarray(x, np.float32))


def _check_is_jitted(k, name):
    """Kernel-side: the notebook's ``name`` has ``lower`` (a jitted function)."""
    if k.call(Fixture("is_jitted"), Ref(name)) is not True:
        fail("static", f"`{name}` is not a jitted function: define `{name}` as the result of "
                          f"`jax.jit(...)` (with the right static arguments), so that its "
                          "compilations can be counted.")


def _static_translate(exc, label):
    """A learner error that comes from tracing a configuration value names the idea."""
    if isinstance(exc, (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError)):
        return ExerciseFailure("static", f"{label} needed the Python value of a traced argument: values "
                                            "that choose the program (a loop count, an axis, an option) "
                                            "must be static arguments of jax.jit.")
    if isinstance(exc, TypeError) and ("abstract array" in str(exc) or "valid JAX type" in str(exc)):
        return ExerciseFailure("static", f"{label} got a Python object that is not an array (a string?) "
                                            "as a traced argument: configuration like this must be a "
                                            "static argument.")
    return None


def _static_call(f, *args, what):
    return call(f, *args, what=what, translate=_static_translate)


# --------------------------------------------------------------------------- power

def _ref_power(x, n):
    return np.asarray(x, np.float64) ** n


def test_power(k):
    power = k.fn("power")
    _check_is_jitted(k, "power")
    shape = (int(k.rng.integers(2, 5)), int(k.rng.integers(3, 7)))
    draw = lambda: k.rng.uniform(-1.5, 1.5, size=shape).astype(np.float32)  # noqa: E731
    x = draw()
    check_close(_static_call(power, _f32(x), 3, what="power(x, 3)"), _ref_power(x, 3), what="power(x, 3)",
                   rtol=1e-4, atol=1e-5)
    # From outside: a static argument is hashed into the compile signature, and a JAX array is
    # not hashable, so a `power` with `n` static refuses one. One that accepts it traces `n`.
    try:
        power(_f32(x), AsJax(np.int32(2)))
    except LearnerError:
        pass
    else:
        fail("static", "power(x, jnp.asarray(2)) ran: `n` is traced, not static, so one program "
                          "serves every `n` and no loop is unrolled per `n`. The number of multiplications must be "
                          "known while tracing, so `n` belongs to the compile signature.")
    for n in (0, 1, 2, 5, 7, int(k.rng.integers(8, 12))):
        xr = draw()
        check_close(_static_call(power, _f32(xr), n, what=f"power(x, {n})"), _ref_power(xr, n),
                       what=f"power(x, {n})", rtol=1e-4, atol=1e-5, dtype=np.float32)
        got = programs.run(k, "power", xr, n, static_argnums=(1,), translate=_static_translate,
                           label=f"power(x, {n})")  # its program, n static: the value that counts
        check_close(got, _ref_power(xr, n), what=f"the program of power(x, {n})", rtol=1e-4, atol=1e-5,
                       dtype=np.float32)
    # Kernel-side claims: compile counts.
    xs = [_f32(draw()) for _ in range(3)]
    k.claim("check_compiles", "power", [(v, 3) for v in xs], 1, what="power with n=3 and three x",
            why="New values of `x` with the same shape and dtype must reuse the compiled program.")
    k.claim("check_compiles", "power", [(xs[0], n) for n in (1, 2, 3, 4, 5)], 5, what="power with n = 1..5",
            why="`n` must be static: each distinct `n` unrolls a different loop, one compile each.")
    k.claim("check_compiles", "power", [(xs[i % 3], n) for i, n in enumerate((2, 4, 2, 4, 2))], 2,
            what="power with n in (2, 4, 2, 4, 2)", why="A static value already seen must reuse its compiled program.")


# --------------------------------------------------------------------------- scale_by

def _factor(rng):
    return float(np.float32(rng.choice([-1.0, 1.0]) * rng.uniform(0.05, 6.0)))


def test_scale_by(k):
    scale_by = k.fn("scale_by")
    _check_is_jitted(k, "scale_by")
    shape = (int(k.rng.integers(2, 5)), int(k.rng.integers(2, 6)))
    draw = lambda: k.rng.normal(size=shape).astype(np.float32)  # noqa: E731
    x, f = draw(), _factor(k.rng)
    check_close(call(scale_by, _f32(x), f), x * np.float32(f), what=f"scale_by(x, {f:.4g})")
    # From outside: with `factor` traced, a JAX array is a valid factor; a static `factor` must
    # be hashed into the compile signature, and a JAX array cannot be.
    x2, f2 = draw(), _factor(k.rng)
    label = f"scale_by(x, jnp.asarray({f2:.4g}))"
    try:
        got = scale_by(_f32(x2), _f32(f2))
    except LearnerError as exc:
        if isinstance(exc, ValueError) and "static" in str(exc):
            fail("static", f"{label} was refused: `factor` is a static argument (a JAX array "
                              "cannot be hashed into the compile signature), so every new factor "
                              "compiles a new program. A float that is data must be a traced input: "
                              "no static arguments here.")
        got = call(scale_by, _f32(x2), _f32(f2), what=label)  # any other error: its feedback
    check_close(got, x2 * np.float32(f2), what=label)
    # Kernel-side claims: compile counts.
    k.claim("check_compiles", "scale_by", [(_f32(x), 0.1 * i + 0.05) for i in range(10)], 1,
            what="scale_by with ten factors", why="`factor` is data: it must be a traced input, not a static argument.")
    k.claim("check_compiles", "scale_by", [(_f32(draw()), _factor(k.rng)) for _ in range(6)], 1,
            what="scale_by with new x values and new factors",
            why="Neither new array values nor a new factor change the compile signature.")
    for _ in range(4):
        xr, fr = draw(), _factor(k.rng)
        check_close(call(scale_by, _f32(xr), fr), xr * np.float32(fr), what=f"scale_by(x, {fr:.4g})",
                       dtype=np.float32)
        got = programs.run(k, "scale_by", xr, np.float32(fr), translate=_static_translate,
                           label=f"scale_by(x, {fr:.4g})")  # its program, factor traced
        check_close(got, xr * np.float32(fr), what=f"the program of scale_by(x, {fr:.4g})", dtype=np.float32)


# --------------------------------------------------------------------------- reduce_along

_NP_OPS = {"sum": np.sum, "max": np.max, "mean": np.mean}
_COMBOS = [(a, o) for a in (0, 1, 2) for o in ("sum", "max", "mean")]


def test_reduce_along(k):
    reduce_along = k.fn("reduce_along")
    _check_is_jitted(k, "reduce_along")
    # Three different lengths: an answer that divides by the wrong axis' length is caught.
    shape = tuple(int(v) for v in k.rng.choice(np.arange(2, 7), size=3, replace=False))
    draw = lambda: k.rng.normal(size=shape).astype(np.float32)  # noqa: E731
    x = draw()
    check_close(_static_call(reduce_along, _f32(x), 1, "sum", what='reduce_along(x, 1, "sum")'),
                   np.sum(x.astype(np.float64), axis=1), what='reduce_along(x, 1, "sum")')
    # Kernel-side claims: compile counts (before the values below, which reuse these programs).
    k.claim("check_compiles", "reduce_along", [(_f32(draw()), 0, "max") for _ in range(3)], 1,
            what='reduce_along(x, 0, "max") on three x',
            why="New values of `x` must reuse the program compiled for that (axis, op).")
    k.claim("check_compiles", "reduce_along", [(_f32(draw()), a, o) for _ in range(2) for a, o in _COMBOS],
            len(_COMBOS), what="reduce_along over 9 (axis, op) combinations, each called twice",
            why="`axis` and `op` are static: exactly one compile per combination.")
    for a, o in _COMBOS + [(-1, "sum"), (-1, "max"), (-2, "mean")]:
        xr = draw()
        what = f"reduce_along(x, {a}, {o!r})"
        check_close(_static_call(reduce_along, _f32(xr), a, o, what=what),
                       _NP_OPS[o](xr.astype(np.float64), axis=a), what=what, dtype=np.float32)
        got = programs.run(k, "reduce_along", xr, a, o, static_argnums=(1, 2), translate=_static_translate,
                           label=what)  # its program, axis and op static
        check_close(got, _NP_OPS[o](xr.astype(np.float64), axis=a), what=f"the program of {what}",
                       dtype=np.float32)


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "power": [
        ('''
@jax.jit
def power(x, n):
    # n stays a traced value: one program for every n, so nothing is specialised per n
    return jax.lax.fori_loop(0, n, lambda i, r: r * x, jnp.ones_like(x))
''', "`n` is traced, not static", "static"),
        ('''
def power(x, n):
    # right values, but never jitted: nothing to count, every call dispatches op by op
    result = jnp.ones_like(x)
    for _ in range(n):
        result = result * x
    return result
''', "`power` is not a jitted function", "static"),
        ('''
@partial(jax.jit, static_argnames="n")
def power(x, n):
    result = x  # off by one: power(x, 0) gives x
    for _ in range(n - 1):
        result = result * x
    return result
''', "power(x, 0) is wrong", "numerics"),
        ('''
@partial(jax.jit, static_argnames="n", donate_argnums=0)
def power(x, n):
    # right values and compiles, but the call hands x's buffer to the result: the caller's x is gone
    result = jnp.ones_like(x)
    for _ in range(n):
        result = result * x
    return result
''', "the caller's `x` was deleted", "purity"),
    ],
    "scale_by": [
        ('''
def _scale(x, factor):
    return x * factor

scale_by = jax.jit(_scale, static_argnums=1)  # static by position: still one compile per factor
''', "`factor` is a static argument", "static"),
        ('''
def scale_by(x, factor):
    return x * factor  # correct values, but not jitted
''', "`scale_by` is not a jitted function", "static"),
        ('''
@jax.jit
def scale_by(x, factor):
    return x * float(factor)  # needs a concrete value of a traced input
''', "`scale_by` needed the concrete value of a traced array", "static"),
        ('''
@partial(jax.jit, donate_argnums=0)
def scale_by(x, factor):
    return x * factor  # one compile for every factor, but the caller's x is given away
''', "the caller's `x` was deleted", "purity"),
        ('''
import inspect


def jit_with_options(fn):
    params = inspect.signature(fn).parameters.items()
    return jax.jit(fn, static_argnames=[n for n, p in params if p.annotation in (bool, int, float, str)])


@jit_with_options
def scale_by(x, factor: float):  # the starting code: the annotation makes `factor` static
    return x * factor
''', "`factor` is a static argument (a JAX array cannot be hashed", "static"),
    ],
    "reduce_along": [
        ('''
@partial(jax.jit, static_argnames="op")
def reduce_along(x, axis, op):
    # axis left dynamic: a traced axis cannot choose which dimension to reduce
    return {"sum": jnp.sum, "max": jnp.max, "mean": jnp.mean}[op](x, axis=axis)
''', 'reduce_along(x, 1, "sum") needed the Python value of a traced argument', "static"),
        ('''
@partial(jax.jit, static_argnames=("axis", "op"))
def reduce_along(x, axis, op):
    if op == "mean":
        return jnp.sum(x, axis=axis) / x.shape[0]  # divides by the wrong axis' length
    return {"sum": jnp.sum, "max": jnp.max}[op](x, axis=axis)
''', "reduce_along(x, 1, 'mean') is wrong", "numerics"),
        ('''
def reduce_along(x, axis, op):
    # jits a fresh function on every call: a new function object is a new cache entry
    return jax.jit(lambda v: {"sum": jnp.sum, "max": jnp.max, "mean": jnp.mean}[op](v, axis=axis))(x)
''', "`reduce_along` is not a jitted function", "static"),
        ('''
_REDUCTIONS = {"sum": jnp.sum, "max": jnp.max, "mean": jnp.mean}


@partial(jax.jit, static_argnames="reduction")
def _reduce(x, reduction):
    return reduction(x)


def reduce_along(x, axis, op):  # the starting code: a new functools.partial, a new static value, per call
    return _reduce(x, reduction=partial(_REDUCTIONS[op], axis=axis))
''', "`reduce_along` is not a jitted function", "static"),
    ],
}

RIGHT = {
    "scale_by": [
        '''
import inspect


def jit_with_options(fn):
    params = inspect.signature(fn).parameters.items()
    return jax.jit(fn, static_argnames=[n for n, p in params if p.annotation in (bool, int, float, str)])


@jit_with_options
def scale_by(x, factor):  # the project's jit kept: without the annotation, `factor` is traced data
    return x * factor
''',
    ],
    "reduce_along": [
        '''
def _reduce_impl(x, axis, op):
    if op == "sum":
        return jnp.sum(x, axis=axis)
    if op == "max":
        return jnp.max(x, axis=axis)
    return jnp.mean(x, axis=axis)


reduce_along = jax.jit(_reduce_impl, static_argnums=(1, 2))  # by position: the same signature
''',
    ],
}
