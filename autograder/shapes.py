"""Fixed shapes: under jit every shape must follow from the input shapes, never from the data."""
from __future__ import annotations

from .feedback import ExerciseFailure, _explain, fail


def data_dependent_shape(exc: BaseException) -> bool:
    """Whether ``exc`` is JAX refusing a shape, size, slice or index that depends on traced values."""
    import jax

    errors = jax.errors
    if isinstance(exc, errors.TracerBoolConversionError):
        return False  # a Python `if`/`while` on a traced value: control flow, explained elsewhere
    if isinstance(exc, (errors.NonConcreteBooleanIndexError, errors.ConcretizationTypeError,
                        errors.TracerIntegerConversionError)):
        return True
    if isinstance(exc, (IndexError, TypeError)):  # e.g. ``x[:n]`` or ``jnp.zeros(n)`` with a traced ``n``
        text = str(exc)
        return any(word in text for word in ("static", "concrete", "Tracer"))
    return False


def check_fixed_shapes(f, args, *, what=None, static_argnums=(), static_argnames=()):
    """Check that ``f`` traces under ``jax.jit`` at ``args`` with every shape known from the input shapes.

    Boolean-mask indexing (``x[x > 0]``), ``jnp.nonzero`` without ``size=``, or slicing
    to a traced length ask for a shape that depends on the data, which jit cannot
    compile. On failure the learner reads which of these happened and that a mask
    (``jnp.where``) or ``jnp.nonzero(..., size=..., fill_value=...)`` keeps the shape fixed.
    """
    import jax

    label = what or f"`{getattr(f, '__name__', 'f')}`"
    try:
        # Pass only what was given: an explicit empty tuple stops jit from inferring the
        # positions of `static_argnames` (and the names of `static_argnums`).
        jax.jit(f, static_argnums=static_argnums or None,
                static_argnames=static_argnames or None).trace(*args)
    except ExerciseFailure:
        raise
    except Exception as exc:  # every learner error becomes feedback
        if data_dependent_shape(exc):
            first_line = (str(exc).strip().splitlines() or [""])[0][:200]
            fail("dynamic_shapes",
                 f"under jax.jit, {label} asked for a shape that depends on the values of its "
                 f"inputs ({type(exc).__name__}: {first_line}); every shape must follow from the "
                 "input shapes alone, never from the values.")
        raise _explain(exc, label) from exc
