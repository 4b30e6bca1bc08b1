"""Host-device transfers: none inside the hot path.

JAX's transfer guard catches host-to-device transfers on every backend and
device-to-host ones on GPU/TPU (on CPU the device *is* the host, so those
never fire). Tracing under ``jax.jit`` catches ``float()``, ``.item()`` and
``np.asarray()`` on traced values on every backend.
"""
from __future__ import annotations

from .feedback import ExerciseFailure, _explain, fail


def _to_device(args):
    import jax

    return jax.tree_util.tree_map(lambda x: jax.device_put(x) if hasattr(x, "shape") else x, args)


def check_traceable(f, args, *, what=None, static_argnums=(), static_argnames=(), kwargs=None):
    """Check that ``f`` traces under ``jax.jit``: no Python conversion of a traced value.

    ``float(x)``, ``x.item()``, ``np.asarray(x)`` and ``if x > 0`` all need the
    concrete value, which does not exist while tracing.
    """
    import jax

    label = what or f"`{getattr(f, '__name__', 'f')}`"
    kwargs = kwargs or {}
    try:
        jax.jit(f, static_argnums=static_argnums, static_argnames=static_argnames).trace(*args, **kwargs)
    except ExerciseFailure:
        raise
    except Exception as exc:  # noqa: BLE001
        raise _explain(exc, f"tracing {label} under jax.jit") from exc


def check_no_host_transfer(f, args, *, what=None, static_argnums=(), static_argnames=(), kwargs=None):
    """Check that a (warmed-up) jitted call of ``f`` makes no implicit host transfer.

    Arguments are placed on the device first and one untimed call compiles,
    then the call runs under ``jax.transfer_guard("disallow")``. The function
    must also trace under jit (see :func:`check_traceable`).
    """
    import jax

    label = what or f"`{getattr(f, '__name__', 'f')}`"
    kwargs = kwargs or {}
    check_traceable(f, args, what=label, static_argnums=static_argnums,
                    static_argnames=static_argnames, kwargs=kwargs)
    jitted = jax.jit(f, static_argnums=static_argnums, static_argnames=static_argnames)
    dev_args = _to_device(args)
    try:
        jax.block_until_ready(jitted(*dev_args, **kwargs))
    except Exception as exc:  # noqa: BLE001
        raise _explain(exc, label) from exc
    try:
        with jax.transfer_guard("disallow"):
            jax.block_until_ready(jitted(*dev_args, **kwargs))
    except Exception as exc:  # noqa: BLE001
        if "transfer" in str(exc).lower():
            fail("async", f"{label} moved data between host and device inside the hot path "
                          f"({str(exc).splitlines()[0][:200]}); keep values on the device and "
                          "return them as arrays.")
        raise _explain(exc, label) from exc
