"""Shardings: where the pieces of one logical array live."""
from __future__ import annotations

from .feedback import fail


def describe(sharding) -> str:
    """A short human description of a sharding."""
    spec = getattr(sharding, "spec", None)
    return f"{type(sharding).__name__}({spec})" if spec is not None else repr(sharding)


def check_sharding(out, expected, *, what="the output", idea="sharding"):
    """Check that ``out`` (a ``jax.Array``) is placed equivalently to ``expected`` (a ``Sharding``).

    Equivalence (``Sharding.is_equivalent_to``), not spelling: ``P("data")`` and
    ``P("data", None)`` are the same placement of a 2-D array. The learner sees the
    placement found and the one expected.
    """
    import jax

    if not isinstance(out, jax.Array):
        kind = type(out)
        name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        fail(idea, f"{what} is of type {name}, not a jax.Array, so it has no sharding: return "
                   "the array JAX computed (np.asarray, .tolist() or float() bring it to the host "
                   "as one unsharded copy).")
    actual = out.sharding
    if not actual.is_equivalent_to(expected, out.ndim):
        fail(idea, f"{what} is placed as {describe(actual)}, expected {describe(expected)}.")


def _normalise(spec, ndim):
    entries = list(tuple(spec)) + [None] * max(0, ndim - len(tuple(spec)))
    return tuple(tuple(e) if isinstance(e, (list, tuple)) and len(e) != 1 else
                 (e[0] if isinstance(e, (list, tuple)) else e) for e in entries)


def check_spec_in_type(out, expected_spec, *, what="the output"):
    """Check that ``jax.typeof(out)`` carries ``expected_spec`` (explicit sharding, JAX >= 0.6).

    Specs are compared after padding with ``None``: ``P("data")`` equals ``P("data", None)``
    for a 2-D array. The learner sees the array's type and the spec expected.
    """
    import jax

    aval = jax.typeof(out)
    spec = getattr(getattr(aval, "sharding", None), "spec", None)
    if spec is None:
        fail("sharding", f"{what} has no sharding in its type ({aval}); with explicit axes the "
                         "sharding is part of the array type.")
    if _normalise(spec, out.ndim) != _normalise(expected_spec, out.ndim):
        fail("sharding", f"{what} has type {aval.str_short() if hasattr(aval, 'str_short') else aval}, "
                         f"whose sharding is {spec}, expected {expected_spec}.")
