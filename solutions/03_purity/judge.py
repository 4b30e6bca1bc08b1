"""The judge of 03_purity (trusted: runs in the grader, never in the learner's kernel).

One ``test_<name>(k)`` per graded test cell; ``k`` is an :class:`autograder.judge.Kernel`.
Every exercise here can be traced: the values that earn points come from the learner's
exported program (one per input signature, :mod:`autograder.judge.programs`), run by the judge on
inputs drawn from ``k.rng`` (fresh at every grading) and compared with references computed
here at the exercises' dtype, float32. Calls of the learner's Python in the kernel (eager) are
kept where they see what a program cannot: an argument written in place, two calls that
differ, and the notebook's globals a call changed (the ``check_globals_unchanged`` claim).
What the kernel says can fail a test, never pass one: each such test also runs the program.
"""
import numpy as np

from autograder.judge import call, check_close, check_matches_reference, ExerciseFailure, fail
from autograder.judge import programs
from autograder.judge import LearnerError
from autograder.judge import AsJax, AsNumPy, Spec, values

F32 = np.float32  # the exercises' dtype


def _f32(x):
    return AsJax(np.asarray(x, np.float32))


def _i32(x):
    return AsJax(np.asarray(x, np.int32))


def _state(count, total):
    return {"count": _i32(count), "total": _f32(total)}


def _same_twice(f, args, label, idea="purity"):
    """Two calls with the same inputs give the same outputs (checked judge-side)."""
    first = call(f, *args, what=label)
    second = call(f, *args, what=label)
    try:
        check_close(second, first, what=f"{label}'s second call", idea=idea)
    except ExerciseFailure as exc:
        fail("purity", f"{label} gave different results for the same inputs: {exc.detail}")
    return first


# --------------------------------------------------------------------------- step

def _ref_step(state, x):
    state, x = values(state), values(x)
    count = np.asarray(state["count"]) + 1
    total = np.asarray(state["total"], np.float64) + np.float64(x)
    return {"count": count, "total": total}, total / count


def _pair(got, what):
    """``step``'s result as ``(new_state, mean)``, or a failure that says what came back."""
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        kind = f"a {len(got)}-tuple" if isinstance(got, (tuple, list)) else f"a {type(got).__name__}"
        fail("state", f"{what} returned {kind}; `step` must return the pair `(new_state, mean)`.")
    return tuple(got)


def test_step(k):
    step = k.fn("step")
    x0 = float(np.float32(k.rng.uniform(0.5, 4.0)))
    got, after = k.call_keep_args("step", _state(0, 0.0), _f32(x0))
    s0_after = after[0]
    s1, y1 = _pair(got, f"step({{count: 0, total: 0}}, {x0:.4g})")
    check_close((s1, y1), ({"count": 1, "total": x0}, x0), what=f"step({{count: 0, total: 0}}, {x0:.4g})",
                   idea="state")
    if int(np.asarray(s0_after["count"])) != 0 or float(np.asarray(s0_after["total"])) != 0.0:
        fail("state", "`step` changed the `state` dict it was given in place; build and return a new "
                         "dict instead, so the caller's state stays as it was.")
    args = (_state(int(k.rng.integers(1, 9)), float(k.rng.normal(scale=5.0))), _f32(k.rng.normal()))
    _same_twice(step, args, "`step`")
    k.claim("check_globals_unchanged", "step", *args, what="`step`")  # kernel-side only

    def make_args(rng):  # count >= 1: the count-0 case is the first check above
        return (_state(int(rng.integers(1, 40)), float(rng.normal(scale=10.0))), _f32(rng.normal()))

    check_matches_reference(step, _ref_step, make_args, trials=4, seed=k.seed(), what="`step`",
                               idea="state", jit=False, dtype=F32)
    # The program of jax.jit(step): the state threaded through it, every value from it.
    program = programs.trace(k, "step", {"count": Spec((), "int32"), "total": Spec((), "float32")},
                             Spec((), "float32"), label="jax.jit(step)")
    xs = k.rng.normal(size=6).astype(np.float32)
    state = values(_state(0, 0.0))
    for i, x in enumerate(xs):
        state, y = _pair(program(state, x), "jax.jit(step)(state, x)")
        check_close(y, np.mean(xs[: i + 1].astype(np.float64)),
                       what=f"the running mean after {i + 1} jitted steps", idea="state", dtype=F32)
        if not isinstance(state, dict):
            fail("state", f"jax.jit(step) returned a {type(state).__name__} as its new state; `step` "
                             "must return the state as a dict like the one it was given.")
    check_close(state["count"], np.int32(len(xs)),
                   what="the count after threading the state through 6 jitted steps", idea="state")
    programs.check_matches_reference(k, "step", _ref_step, make_args, trials=3, seed=k.seed(),
                                     what="jax.jit(step)", idea="state", dtype=F32)


# --------------------------------------------------------------------------- set_diagonal

def _ref_set_diagonal(x, v):
    out = np.array(values(x), dtype=np.float64, copy=True)
    i = np.arange(out.shape[0])
    out[i, i] = values(v)
    return out


def _immutable(exc) -> bool:
    return isinstance(exc, TypeError) and "immutable" in str(exc)


def _call_immutable(f, *args, what):
    """Call ``f``; an attempt to assign into a JAX array names the in-place idea."""
    try:
        return f(*args)
    except LearnerError as exc:
        if _immutable(exc):
            fail("inplace", f"{what} assigned into a JAX array in place; JAX arrays are "
                               "immutable, so the function must return a new array with the diagonal "
                               "updated, built with JAX's functional update syntax.")
    return call(f, *args, what=what)  # any other error becomes feedback that names its idea


def _numpy_input_untouched(k, n, v):
    """set_diagonal on a NumPy array must leave that array as it was. An answer that accepts
    only JAX arrays cannot have written into it."""
    xn = k.rng.normal(size=(n, n)).astype(np.float32)
    try:
        _, after = k.call_keep_args("set_diagonal", AsNumPy(xn), v)  # a NumPy array, on purpose
    except LearnerError:
        return
    if not (isinstance(after, tuple) and np.array_equal(np.asarray(after[0]), xn)):
        fail("inplace", "set_diagonal on a NumPy array modified that array in place; the function "
                           "must return a new array, built in JAX, and leave the one it was given as it was.")


def _traced_numpy(exc, label):
    """Under jit there is no NumPy array to write into."""
    import jax

    if isinstance(exc, jax.errors.TracerArrayConversionError):
        return ExerciseFailure(
            "inplace", f"{label} converted a traced array to NumPy to write into it; under jit there is no "
                       "NumPy array to write into. The new array must be built in JAX, with its "
                       "functional update syntax.")
    return None


def _set_diagonal_program(k, x, v):
    """jax.jit(set_diagonal) at the signature of (x, v): the learner's exported program."""
    return programs.trace(k, "set_diagonal", x, v, translate=_traced_numpy, label="jax.jit(set_diagonal)")


def _check_non_finite_diagonal(k, x, v, shown_x):
    """jax.jit(set_diagonal)(x, v) on an x whose diagonal holds non-finite entries (x finite
    elsewhere, or -inf where the reference keeps it): none may reach the diagonal."""
    shown = "a scalar v" if np.ndim(v) == 0 else "a vector v"
    what = f"jax.jit(set_diagonal)(x, v) with {shown}, on {shown_x},"
    got = _set_diagonal_program(k, x, v)(x, v)
    want = _ref_set_diagonal(x, v)
    if np.shape(got) == x.shape and not np.isfinite(np.diagonal(np.asarray(got, np.float64))).all():
        fail("inplace", f"{what} returned {np.diagonal(np.asarray(got)).tolist()} on its diagonal where v is "
                        f"{np.diagonal(want).tolist()}: the old diagonal reached the result through arithmetic, "
                        "but setting an entry replaces it, whatever it held.")
    check_close(got, want, what=what, idea="inplace", dtype=F32)


def _check_large_diagonal(k, x, v):
    """jax.jit(set_diagonal)(x, v) on an x whose diagonal entries are large next to v: a result
    right off the diagonal whose diagonal is not v is told so."""
    shown = "a scalar v" if np.ndim(v) == 0 else "a vector v"
    what = f"jax.jit(set_diagonal)(x, v) with {shown}, on an x whose diagonal entries are large (|x_ii| >= 1e7),"
    got = _set_diagonal_program(k, x, v)(x, v)
    want = _ref_set_diagonal(x, v)
    if np.shape(got) == x.shape:
        g = np.asarray(got, np.float64)
        off = ~np.eye(x.shape[0], dtype=bool)
        if np.allclose(g[off], want[off], rtol=1e-6, atol=0) \
                and not np.allclose(np.diagonal(g), np.diagonal(want), rtol=1e-5, atol=1e-6):
            fail("inplace", f"{what} is right off the diagonal, but its diagonal is {np.diagonal(g).tolist()} where "
                            f"v is {np.diagonal(want).tolist()} (x held {np.diagonal(x).tolist()} there): the old "
                            "diagonal reached the result through arithmetic, rounded at its own magnitude, but "
                            "setting an entry replaces it, whatever it held.")
    check_close(got, want, what=what, idea="inplace", dtype=F32)


def test_set_diagonal(k):
    set_diagonal = k.fn("set_diagonal")
    _numpy_input_untouched(k, 4, -1.0)
    xv = k.rng.normal(size=(4, 4)).astype(np.float32)
    try:
        out, after = k.call_keep_args("set_diagonal", _f32(xv), 7.0)
    except LearnerError:
        out, after = _call_immutable(set_diagonal, _f32(xv), 7.0, what="set_diagonal(x, 7.0)"), None
    check_close(out, _ref_set_diagonal(xv, 7.0), what="set_diagonal(x, 7.0)", idea="inplace")
    if after is not None:
        check_close(after[0], xv, what="x after set_diagonal(x, 7.0)", idea="inplace")
    # The program of jax.jit(set_diagonal), with v a scalar and a vector: the values that count.
    for v in (np.float32(4.0), k.rng.normal(size=4).astype(np.float32)):
        shown = "a scalar v" if np.ndim(v) == 0 else "a vector v"
        check_close(_set_diagonal_program(k, xv, v)(xv, v), _ref_set_diagonal(xv, v),
                       what=f"jax.jit(set_diagonal)(x, v) with {shown}", idea="inplace", dtype=F32)
    # The diagonal is replaced, whatever it held: large entries there must not reach the result
    # (the visible test's, then drawn ones: |x_ii| >= 1e7, where float32's step is 1 or more, and
    # |v| with a fractional part in [0.25, 0.75], which no sum through x_ii gives back) ...
    _check_large_diagonal(k, np.diag(np.float32([1e8, -3e7, 2.5e8, 4e7])) + np.float32(0.25), np.float32(0.5))
    big = xv.copy()
    big[np.arange(4), np.arange(4)] = k.rng.choice([-1.0, 1.0], size=4) * 10.0 ** k.rng.uniform(7, 9, size=4)
    frac = lambda size=None: k.rng.choice([-1.0, 1.0], size=size) * (  # noqa: E731
        k.rng.integers(0, 3, size=size) + k.rng.uniform(0.25, 0.75, size=size))
    _check_large_diagonal(k, big, np.float32(frac()))
    _check_large_diagonal(k, big, frac(4).astype(np.float32))
    # ... nor -inf on the diagonal of an attention mask (the visible test's), nor nan, inf and -inf.
    mask = np.full((4, 4), -np.inf, np.float32)
    mask[:2, :2] = 0.0
    _check_non_finite_diagonal(k, mask, np.float32(0.0), "an attention mask holding -inf on its diagonal")
    xs = xv.copy()
    xs[np.arange(3), np.arange(3)] = (np.nan, np.inf, -np.inf)
    for v in (np.float32(-2.0), k.rng.normal(size=4).astype(np.float32)):
        _check_non_finite_diagonal(k, xs, v, "an x holding nan, inf and -inf on its diagonal")
    k.claim("check_globals_unchanged", "set_diagonal", _f32(xv), 4.0, what="`set_diagonal`")
    v = k.rng.normal(size=4).astype(np.float32)
    out = _call_immutable(set_diagonal, _f32(xv), _f32(v), what="set_diagonal(x, v) with a vector v")
    check_close(out, _ref_set_diagonal(xv, v), what="set_diagonal(x, v) with a vector v", idea="inplace")

    def make_args(rng, n=4):
        x = _f32(rng.normal(size=(n, n)))
        v = float(np.float32(rng.normal())) if rng.random() < 0.5 else _f32(rng.normal(size=n))
        return x, v

    check_matches_reference(set_diagonal, _ref_set_diagonal, make_args, trials=3, seed=k.seed(),
                               what="`set_diagonal`", jit=False, dtype=F32)
    # Other sizes: one small program each.
    programs.check_matches_reference(k, "set_diagonal", _ref_set_diagonal,
                                     lambda rng: make_args(rng, n=int(rng.integers(2, 7))), trials=3,
                                     seed=k.seed(), what="`jax.jit(set_diagonal)`", idea="inplace",
                                     dtype=F32, translate=_traced_numpy)
    _numpy_input_untouched(k, 4, np.arange(4, dtype=np.float32))


# --------------------------------------------------------------------------- normalize_batch

def _ref_normalize(x):
    x = np.asarray(values(x), dtype=np.float64)
    return (x - x.mean(axis=0)) / np.sqrt(x.var(axis=0) + 1e-5)


def _check_normalized(f, x, what, idea="numerics"):
    """f(x) against the reference (``f``: the kernel's function, or a program); a result that
    uses the sample variance, or adds eps outside the square root, is told which."""
    got = call(f, _f32(x) if not isinstance(f, programs.Traced) else x, what=what)
    try:
        check_close(got, _ref_normalize(x), what=what, idea=idea, dtype=F32)
    except ExerciseFailure as exc:
        xd = np.asarray(x, np.float64)
        centred = xd - xd.mean(axis=0)
        for alt, hint in ((centred / np.sqrt(xd.var(axis=0, ddof=1) + 1e-5),
                           "It divides by the sample variance (ddof=1); use the population variance (ddof 0)."),
                          (centred / (xd.std(axis=0) + 1e-5),
                           "It adds eps outside the square root; use sqrt(var + 1e-5).")):
            if np.shape(got) == alt.shape and np.allclose(np.asarray(got, np.float64), alt, rtol=1e-3, atol=1e-4):
                fail(idea, f"{exc.detail} {hint}")
        raise


def _batch(rng, b=8, d=3):
    scale = 10.0 ** rng.uniform(-3.5, 1.0, size=d)  # some features vary far less than sqrt(eps)
    offset = rng.uniform(-2.0, 2.0, size=d)
    return (scale * (rng.normal(size=(b, d)) + offset)).astype(np.float32)


def _raw_readings(rng, b=8, d=3):
    """Features far from zero: each one's mean is about 1000 times its spread (the prompt's edge).
    A two-pass variance in float32 keeps about 2e-4 of the normalised values there; the mean of the
    squares minus the squared mean keeps none of its digits (errors of order 1, or nan)."""
    spread = 10.0 ** rng.uniform(-0.5, 0.5, size=d)
    mean = spread * 1000.0 * rng.choice([-1.0, 1.0], size=d) * rng.uniform(0.8, 1.25, size=d)
    return (mean + spread * rng.normal(size=(b, d))).astype(np.float32)


# The tolerance of the raw readings, from the exercise: float32 with 7 digits, of which a mean
# 1000 times the spread takes 3 (a right answer is off by ~2e-4 there, the one-pass variance by ~1).
RAW_RTOL, RAW_ATOL = 1e-3, 2e-3


def _check_raw(f, x, what):
    got = call(f, _f32(x) if not isinstance(f, programs.Traced) else x, what=what)
    try:
        check_close(got, _ref_normalize(x), what=what, idea="numerics", rtol=RAW_RTOL, atol=RAW_ATOL, dtype=F32)
    except ExerciseFailure as exc:
        fail("numerics", f"{exc.detail} Each feature here is about 1000 times its spread away from zero. "
                         "float32 keeps about 7 significant digits: a variance obtained by subtracting two "
                         "large, nearly equal numbers (the mean of the squares and the square of the mean, "
                         "each about a million times the variance) loses them all, where the batch's own "
                         "deviations from its mean keep them.")


def test_normalize_batch(k):
    normalize_batch = k.fn("normalize_batch")
    b1 = k.rng.normal(size=(8, 3)).astype(np.float32)
    b2 = (3.0 * k.rng.normal(size=(8, 3)) + 5.0).astype(np.float32)
    _same_twice(normalize_batch, (_f32(b1),), "`normalize_batch`")
    k.claim("check_globals_unchanged", "normalize_batch", _f32(b1), what="`normalize_batch`")
    _check_normalized(normalize_batch, b1, "normalize_batch(batch 1)")
    _check_normalized(normalize_batch, b2, "normalize_batch(batch 2), called after batch 1", idea="purity")
    # The program of jax.jit(normalize_batch): both batches in turn, and a batch with features
    # that vary far less than sqrt(eps).
    program = programs.trace(k, "normalize_batch", Spec((8, 3), "float32"), label="jax.jit(normalize_batch)")
    tiny = ((k.rng.normal(size=(8, 3)) + [0.5, -1.0, 2.0]) * [1.0, 1e-2, 1e-3]).astype(np.float32)
    _check_normalized(normalize_batch, tiny, "normalize_batch(a batch whose features have spreads 1, 1e-2 and 1e-3)")
    for x, label in ((b1, "jax.jit(normalize_batch)(batch 1)"), (b2, "jax.jit(normalize_batch)(batch 2)"),
                     (tiny, "jax.jit(normalize_batch)(a batch whose features have spreads 1, 1e-2 and 1e-3)")):
        _check_normalized(program, x, label)
    # Raw readings far from zero, from the same program and eagerly: the variance must keep its digits.
    raw = "raw readings whose features sit about 1000 spreads from zero"
    for trial in range(2):
        x = _raw_readings(k.rng)
        _check_raw(program, x, f"jax.jit(normalize_batch) on {raw} (#{trial + 1})")
        _check_raw(normalize_batch, x, f"normalize_batch on {raw} (#{trial + 1})")
    check_matches_reference(normalize_batch, _ref_normalize, lambda rng: (_f32(_batch(rng)),), trials=3,
                               seed=k.seed(), what="`normalize_batch`", jit=False, dtype=F32)
    # Other batch shapes: one small program each.
    programs.check_matches_reference(
        k, "normalize_batch", _ref_normalize,
        lambda rng: (_batch(rng, b=int(rng.integers(4, 12)), d=int(rng.integers(2, 6))),),
        trials=3, seed=k.seed(), what="`jax.jit(normalize_batch)`", dtype=F32)


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "step": [
        ('''
def _step(state, x):
    count, total = state["count"] + 1, state["total"] + x
    return {"count": count, "total": total}, total / count


step = jax.jit(_step, donate_argnums=0)  # right values, but the caller's state buffers go to the result
''', "the caller's `state` was deleted", "purity"),
        ('''
STEPS_TAKEN = 0

def step(state, x):
    global STEPS_TAKEN
    STEPS_TAKEN += 1  # "just bookkeeping", but a global written on every call
    count = state["count"] + 1
    total = state["total"] + x
    return {"count": count, "total": total}, total / count
''', "changed the global(s) ['STEPS_TAKEN']", "purity"),
        ('''
_SEEN = []

def step(state, x):
    _SEEN.append(x)  # a "private" global: still a global written on every call
    count = state["count"] + 1
    total = state["total"] + x
    return {"count": count, "total": total}, total / count
''', "changed the global(s) ['_SEEN']", "purity"),
        ('''
_LOG = []


def step(state, x):
    _LOG.append(x)  # under jit it holds a tracer, which pickle refuses: still a global written
    count = state["count"] + 1
    total = state["total"] + x
    return {"count": count, "total": total}, total / count


jax.jit(step)({"count": jnp.int32(0), "total": jnp.float32(0.0)}, jnp.float32(1.0))
''', "changed the global(s) ['_LOG']", "purity"),
        ('''
def step(state, x, _seen=[]):
    # the history hides in a mutable default argument instead of a global
    _seen.append(x)
    count = state["count"] + 1
    total = state["total"] + x
    return {"count": count, "total": total}, sum(_seen) / len(_seen)
''', "`step` gave different results for the same inputs", "purity"),
        ('''
def step(state, x):
    # updates the caller's dict in place instead of returning a new one
    state["count"] = state["count"] + 1
    state["total"] = state["total"] + x
    return state, state["total"] / state["count"]
''', "`step` changed the `state` dict it was given in place", "state"),
        ('''
def step(state, x):
    total = state["total"] + x
    # the mean uses the old count: off by one
    return {"count": state["count"] + 1, "total": total}, total / jnp.maximum(state["count"], 1)
''', "`step`'s result on random input #1[1] is wrong", "state"),
        ('''
def step(state, x):
    step.calls = getattr(step, "calls", 0) + 1  # a call count kept as the function's attribute
    total = state["total"] + x
    count = state["count"] + 1
    return {"count": count, "total": total}, total / count
''', "changed the global(s) ['step']", "purity"),
    ],
    "set_diagonal": [
        ('''
def _set(x, v):
    i = jnp.arange(x.shape[0])
    return x.at[i, i].set(v)


def set_diagonal(x, v):
    return jax.jit(_set, donate_argnums=0)(jnp.asarray(x), v)  # x's buffer becomes the result's: the caller's JAX array is gone
''', "the caller's `x` was deleted", "purity"),
        ('''
def set_diagonal(x, v):
    # a mask by arithmetic: the old diagonal times 0 is nan where it held nan or inf
    x = jnp.asarray(x)
    eye = jnp.eye(x.shape[0], dtype=x.dtype)
    return x * (1 - eye) + eye * v
''', "the old diagonal reached the result", "inplace"),
        ('''
def set_diagonal(x, v):
    # subtracts the old diagonal: inf - inf is nan
    x = jnp.asarray(x)
    n = x.shape[0]
    return x - jnp.diag(jnp.diag(x)) + jnp.diag(jnp.broadcast_to(v, (n,)))
''', "the old diagonal reached the result", "inplace"),
        ('''
def set_diagonal(x, v):
    # a copy through NumPy: fine eagerly, impossible on a tracer under jit
    out = np.array(x, copy=True)
    np.fill_diagonal(out, v)
    return jnp.asarray(out)
''', "jax.jit(set_diagonal) converted a traced array to NumPy", "inplace"),
        ('''
def set_diagonal(x, v):
    x = np.asarray(x)  # no copy: writes into the caller's NumPy array
    i = np.arange(x.shape[0])
    x[i, i] = v
    return jnp.asarray(x)
''', "set_diagonal on a NumPy array modified that array in place", "inplace"),
        ('''
def set_diagonal(x, v):
    i = jnp.arange(x.shape[0])
    return jnp.asarray(x).at[i, i].add(v)  # adds to the diagonal instead of setting it
''', "set_diagonal(x, 7.0) is wrong", "inplace"),
        ('''
def set_diagonal(x, v):
    # the starting code: adds to each diagonal entry what it lacks (-inf + inf is nan; 1e8 rounds v away)
    x = jnp.asarray(x)
    n = x.shape[0]
    v = jnp.broadcast_to(v, (n,))
    lacking = v - jnp.diagonal(x)
    return x + jnp.diag(lacking)
''', "the old diagonal reached the result through arithmetic", "inplace"),
        ('''
def set_diagonal(x, v):
    # the functional update, but still adding what each entry lacks: the same arithmetic
    x = jnp.asarray(x)
    i = jnp.arange(x.shape[0])
    return x.at[i, i].add(v - jnp.diagonal(x))
''', "the old diagonal reached the result through arithmetic", "inplace"),
        ('''
def set_diagonal(x, v):
    # the starting code with its nan patched away: the large diagonal still rounds v away
    x = jnp.asarray(x)
    n = x.shape[0]
    lacking = jnp.broadcast_to(v, (n,)) - jnp.diagonal(x)
    out = x + jnp.diag(lacking)
    return jnp.where(jnp.isnan(out) & ~jnp.isnan(x), jnp.broadcast_to(v, x.shape), out)
''', "rounded at its own magnitude", "inplace"),
        ('''
def set_diagonal(x, v):
    # one index array: x.at[i] names whole rows, not the diagonal's entries
    x = jnp.asarray(x)
    i = jnp.arange(x.shape[0])
    return x.at[i].set(jnp.broadcast_to(v, (x.shape[0],))[:, None])
''', "set_diagonal(x, 7.0) is wrong", "inplace"),
    ],
    "normalize_batch": [
        ('''
def _normalize(x):
    centred = x - jnp.mean(x, axis=0)
    return centred / jnp.sqrt(jnp.mean(centred ** 2, axis=0) + 1e-5)


normalize_batch = jax.jit(_normalize, donate_argnums=0)  # right values, but the caller's batch goes to the result
''', "the caller's `x` was deleted", "purity"),
        ('''
_CACHE = {}

def normalize_batch(x):
    # statistics cached per shape: a new batch of the same shape reuses old statistics
    if x.shape not in _CACHE:
        _CACHE[x.shape] = (jnp.mean(x, axis=0), jnp.sqrt(jnp.var(x, axis=0) + 1e-5))
    mean, std = _CACHE[x.shape]
    return (x - mean) / std
''', "normalize_batch(batch 2), called after batch 1 is wrong", "purity"),
        ('''
SEEN = {"batches": 0}

def normalize_batch(x):
    SEEN["batches"] += 1  # bookkeeping "on the side", in a global
    mean, var = jnp.mean(x, axis=0), jnp.var(x, axis=0)
    return (x - mean) / jnp.sqrt(var + 1e-5)
''', "changed the global(s) ['SEEN']", "purity"),
        ('''
def normalize_batch(x):
    mean = jnp.mean(x, axis=0)
    return (x - mean) / (jnp.std(x, axis=0) + 1e-5)  # eps outside the square root
''', "It adds eps outside the square root", "numerics"),
        ('''
def normalize_batch(x):
    mean = jnp.mean(x, axis=0)
    return (x - mean) / jnp.sqrt(jnp.var(x, axis=0, ddof=1) + 1e-5)  # sample variance
''', "It divides by the sample variance (ddof=1)", "numerics"),
        ('''
def normalize_batch(x):
    STATS["n"] = STATS.get("n", 0) + x.shape[0]  # the starting code: running statistics in a global
    STATS["sum"] = STATS.get("sum", 0.0) + jnp.sum(x, axis=0)
    STATS["sumsq"] = STATS.get("sumsq", 0.0) + jnp.sum(x * x, axis=0)
    mean = STATS["sum"] / STATS["n"]
    var = STATS["sumsq"] / STATS["n"] - mean ** 2
    return (x - mean) / jnp.sqrt(var + 1e-5)
''', "changed the global(s) ['STATS']", "purity"),
        ('''
def normalize_batch(x):
    # pure, this batch only, but the one-pass variance: the mean of the squares minus the squared mean
    mean = jnp.mean(x, axis=0)
    var = jnp.mean(x * x, axis=0) - mean ** 2
    return (x - mean) / jnp.sqrt(var + 1e-5)
''', "loses them all", "numerics"),
        ('''
class Stats:
    last = None  # the last batch, kept in a class attribute


def normalize_batch(x):
    Stats.last = x
    return (x - jnp.mean(x, axis=0)) / jnp.sqrt(jnp.var(x, axis=0) + 1e-5)
''', "changed the global(s) ['Stats']", "purity"),
    ],
}

RIGHT = {
    "set_diagonal": [
        '''
def set_diagonal(x, v):
    # a selection, not arithmetic: where the identity's mask is set, v; elsewhere, x
    x = jnp.asarray(x)
    return jnp.where(jnp.eye(x.shape[0], dtype=bool), jnp.asarray(v, x.dtype), x)
''',
        '''
def set_diagonal(x, v):
    # NumPy's fill_diagonal in JAX's form: a new array, never in place
    return jnp.fill_diagonal(jnp.asarray(x), v, inplace=False)
''',
        '''
def set_diagonal(x, v):
    # the diagonal's (rows, columns) pair of index arrays, from JAX
    x = jnp.asarray(x)
    return x.at[jnp.diag_indices(x.shape[0])].set(v)
''',
        '''
def set_diagonal(x, v):
    # a selection by comparing the row and column of every entry; a vector v broadcasts along rows,
    # so entry (i, i) takes v[i]
    x = jnp.asarray(x)
    r = jnp.arange(x.shape[0])
    return jnp.where(r[:, None] == r[None, :], jnp.asarray(v, x.dtype), x)
''',
    ],
    "normalize_batch": [
        '''
def normalize_batch(x):
    centred = x - jnp.mean(x, axis=0)
    return centred / jnp.sqrt(jnp.mean(centred ** 2, axis=0) + 1e-5)  # two passes: deviations first
''',
        '''
def normalize_batch(x):
    # one pass, but over data shifted by its first row: the large offset is gone before squaring
    shifted = x - x[0]
    m = jnp.mean(shifted, axis=0)
    var = jnp.mean(shifted * shifted, axis=0) - m * m
    return (shifted - m) / jnp.sqrt(var + 1e-5)
''',
    ],
}
