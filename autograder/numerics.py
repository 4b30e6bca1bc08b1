"""Outputs against a reference, on fresh random inputs, with dtype-aware tolerances."""
from __future__ import annotations

import numpy as np

from .feedback import ExerciseFailure, call, fail

# (rtol, atol) by dtype; float32 matmuls and reductions differ across backends.
_TOLERANCES = {
    np.dtype("float64"): (1e-9, 1e-12),
    np.dtype("float32"): (1e-4, 1e-5),
    np.dtype("float16"): (1e-2, 1e-3),
    np.dtype("complex64"): (1e-4, 1e-5),
    np.dtype("complex128"): (1e-9, 1e-12),
}


def tolerance(dtype) -> tuple[float, float]:
    """``(rtol, atol)`` suited to ``dtype``: exact for integers and booleans."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = np.dtype("float32")
    if dt.name == "bfloat16":
        return (2e-2, 1e-2)
    if dt.kind in "iub":
        return (0.0, 0.0)
    return _TOLERANCES.get(dt, (1e-4, 1e-5))


def _float_bits(dt) -> int | None:
    """The significand bits of a floating dtype (of its parts, for complex), else ``None``."""
    if dt.kind == "c":
        dt = np.dtype(f"f{dt.itemsize // 2}")
    if dt.kind != "f" and dt.kind != "V":
        return None
    try:
        import ml_dtypes

        return int(ml_dtypes.finfo(dt).nmant) + 1  # bfloat16 and float8 too
    except Exception:  # noqa: BLE001 - not a floating dtype
        return None


def exercise_dtype(expected_dtype):
    """The dtype a comparison is judged at when the judge states none: the reference's, with
    NumPy's float64 (what references are computed in) read as JAX's float32, complex128 as
    complex64. Never the dtype of what the learner returned."""
    dt = np.dtype(expected_dtype)
    if dt == np.float64:
        return np.dtype("float32")
    if dt == np.complex128:
        return np.dtype("complex64")
    return dt


def _show(v) -> str:
    """A value as a person writes it: ``4.25``, ``3``, ``True``, ``[1.0, 2.5]``; never
    ``np.float32(4.25)``."""
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if isinstance(v, np.generic):
        return str(v)
    if isinstance(v, np.ndarray):
        return np.array2string(v, separator=", ", threshold=20)
    return repr(v)


def _where(idx) -> str:
    return f"at index {tuple(int(i) for i in idx)} " if len(idx) else ""


def _numeric(x: np.ndarray):
    """``x`` as float64 (complex128 for complex input), or ``None`` if it is not numeric."""
    try:
        return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    except (TypeError, ValueError):
        return None


def check_close(actual, expected, *, what="the result", rtol=None, atol=None, idea="numerics",
                dtype=None):
    """Check that two pytrees have the same structure, shapes and values.

    The tolerance comes from the exercise, never from what was returned: from ``dtype`` (the
    exercise's dtype, stated by the judge), else from the reference's (:func:`exercise_dtype`:
    a float64 reference is judged at float32), through :func:`tolerance` (exact for integers
    and booleans); ``rtol``/``atol`` override it. A floating result of lower precision than
    the exercise's dtype (bfloat16 for float32) fails, and says so. NaNs equal NaNs; complex
    numbers are compared with their imaginary parts. Fails with a message that says which
    leaf differs, where, and by how much.
    """
    import jax

    if actual is None and expected is not None:
        fail(idea, f"{what} is None; did the function forget to `return` its result?")
    a_leaves, a_tree = jax.tree_util.tree_flatten_with_path(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten_with_path(expected)
    if a_tree != e_tree:
        fail(idea, f"{what} has structure {a_tree}, expected {e_tree}.")
    for (path, a), (_, e) in zip(a_leaves, e_leaves):
        name = what + jax.tree_util.keystr(path)
        a_np = np.asarray(a)
        e_np = np.asarray(e)
        if a_np.dtype == object:  # compare what the objects are, not what they say of themselves
            try:
                a_np = np.asarray(_plain(a_np.tolist()))
            except _NotPlain as kind:
                fail(idea, f"{name} holds {kind} objects, not numbers.")
        if a_np.shape != e_np.shape:
            fail(idea, f"{name} has shape {a_np.shape}, expected {e_np.shape}.")
        want = np.dtype(dtype) if dtype is not None else exercise_dtype(e_np.dtype)
        a_bits, w_bits = _float_bits(a_np.dtype), _float_bits(want)
        if a_bits is not None and w_bits is not None and a_bits < w_bits:
            fail(idea, f"{name} is {a_np.dtype.name}, a lower precision than the exercise's {want.name}: "
                       f"compute it in {want.name} (a result of lower precision is not judged with a "
                       "looser tolerance).")
        r, t = tolerance(want)
        r = r if rtol is None else rtol
        t = t if atol is None else atol
        a_num, e_num = _numeric(a_np), _numeric(e_np)
        if a_num is None or e_num is None:  # strings, objects: exact equality
            bad = np.asarray(a_np != e_np)
            bad = bad if bad.shape == a_np.shape else np.ones(a_np.shape, dtype=bool)
        elif e_np.dtype.kind in "iub" and a_np.dtype.kind in "iub" and rtol is None and atol is None:
            bad = a_np != e_np
        else:
            if a_num.dtype.kind == "c" or e_num.dtype.kind == "c":
                a_num, e_num = a_num.astype(np.complex128), e_num.astype(np.complex128)
            bad = ~np.isclose(a_num, e_num, rtol=r, atol=t, equal_nan=True)
        if np.any(bad):
            if a_num is not None and e_num is not None:
                diff = np.where(bad, np.abs(a_num - e_num), -1.0)
                diff = np.where(np.isnan(diff), np.inf, diff)  # NaN where a number was expected
                idx = np.unravel_index(np.argmax(diff), diff.shape) if diff.ndim else ()
            else:
                idx = np.unravel_index(np.argmax(bad), bad.shape) if bad.ndim else ()
            count = f" ({int(np.sum(bad))} of {bad.size} entries differ)" if bad.size > 1 else ""
            fail(idea, f"{name} is wrong: {_where(idx)}it is {_show(a_np[idx])}, expected "
                       f"{_show(e_np[idx])}{count}.")


def check_matches_reference(f, reference, make_args, *, trials=3, seed=0, what=None,
                            rtol=None, atol=None, jit=True, static_argnames=(), static_argnums=(),
                            idea="numerics", dtype=None):
    """Compare ``f`` with ``reference`` on ``trials`` fresh random inputs.

    ``make_args(rng)`` gets a ``numpy.random.Generator`` (seeded, so the check
    is deterministic) and returns the argument tuple. With ``jit=True``, ``f``
    is also called under ``jax.jit`` (with the given static arguments) and
    must agree there too. The learner sees which trial and which leaf was wrong,
    eagerly or under jit.

    ``dtype``: the exercise's dtype, which sets the tolerance (see :func:`check_close`).

    ``idea`` is the idea a wrong result breaks (a key of ``TAUGHT_IN``; the default,
    ``"numerics"``, points to the exercise's description). A jitted result that is wrong
    where the eager one was right is a disagreement between jit and eager, and is
    reported under ``"purity"`` whatever ``idea`` is.
    """
    import jax

    label = what or f"`{getattr(f, '__name__', 'f')}`"
    rng = np.random.default_rng(seed)
    jitted = None
    if jit and hasattr(f, "jitted"):  # a judge's RemoteFunction: the kernel's agent applies jit
        jitted = f.jitted(static_argnums=static_argnums or None, static_argnames=static_argnames or None)
    elif jit:
        jitted = jax.jit(f, static_argnames=static_argnames or None, static_argnums=static_argnums or None)
    for trial in range(trials):
        args = make_args(rng)
        expected = reference(*args)
        got = call(f, *args, what=label)
        check_close(got, expected, what=f"{label}'s result on random input #{trial + 1}",
                    rtol=rtol, atol=atol, idea=idea, dtype=dtype)
        if jitted is not None:
            got_jit = call(jitted, *args, what=f"jax.jit({label})")
            try:
                check_close(got_jit, expected,
                            what=f"jax.jit({label})'s result on random input #{trial + 1}",
                            rtol=rtol, atol=atol, idea="purity", dtype=dtype)
            except ExerciseFailure as exc:
                fail("purity", f"jax.jit({label}) disagrees with calling it eagerly, which gave the "
                               f"right result: {exc.detail} Under jit the Python body runs once, at "
                               "trace time, so Python-side state or decisions are frozen into the "
                               "compiled program.")


class _NotPlain(Exception):
    pass


def _plain(x):
    """``x`` rebuilt from built-in types only, read through the built-in types' own methods, so
    a value's class cannot decide its own comparison (an object whose ``__eq__`` always says
    yes, a list subclass with its own ``__iter__``). NumPy scalars and 0-d or small arrays
    become Python numbers and lists."""
    if x is None or type(x) in (bool, int, float, complex, str, bytes):
        return x
    if isinstance(x, np.generic) and type(x).__module__ == "numpy":
        return x.item()
    if type(x) is np.ndarray:
        return x.tolist()
    import jax

    if isinstance(x, jax.Array):
        return np.asarray(x).tolist()
    for base, read in ((bool, bool), (int, int.__index__), (float, float.__float__),
                       (str, str.__str__), (bytes, bytes.__bytes__)):
        if isinstance(x, base):
            return read(x)
    for base in (list, tuple):
        if isinstance(x, base):
            return base(_plain(v) for v in base.__iter__(x))
    if isinstance(x, dict):
        return {_plain(k): _plain(v) for k, v in dict.items(x)}
    for base in (frozenset, set):
        if isinstance(x, base):
            return base(_plain(v) for v in base.__iter__(x))
    raise _NotPlain(type(x).__name__)


def check_equal(actual, expected, *, what="the result", idea="numerics"):
    """Check plain Python values (lists, strings, numbers) for equality; the learner sees
    both values.

    Both sides are first rebuilt from built-in types (NumPy and JAX scalars and arrays become
    numbers and lists), so the comparison is Python's own, whatever class the answer returns.
    """
    try:
        got = _plain(actual)
    except _NotPlain as kind:
        article = "an" if str(kind)[:1].lower() in "aeiou" else "a"
        fail(idea, f"{what} is {article} {kind}, not a plain value (a number, string, list, tuple or dict "
                   f"of them); expected {expected!r}.")
    want = _plain(expected)
    if got != want:
        fail(idea, f"{what} is {got!r}, expected {want!r}.")
