"""Host-device transfers: none inside the hot path.

JAX's transfer guard catches host-to-device transfers on every backend and
device-to-host ones on GPU/TPU (on CPU the device *is* the host, so those
never fire). Tracing under ``jax.jit`` catches ``float()``, ``.item()`` and
``np.asarray()`` on traced values on every backend.
"""
from __future__ import annotations

from .feedback import ExerciseFailure, _explain, call


def _to_device(args, kwargs, static_argnums=(), static_argnames=()):
    """Place every non-static argument on the device before the guarded call: what the
    caller passes is not the learner's transfer. Python scalars become weakly typed arrays,
    as jit would make them; static arguments stay as they are."""
    import jax

    def put(tree):
        def leaf(x):
            if hasattr(x, "shape") or isinstance(x, (bool, int, float, complex)):
                return jax.device_put(x)
            return x
        return jax.tree_util.tree_map(leaf, tree)

    nums = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums)
    nums = {i % len(args) if args else i for i in nums}
    names = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames)
    dev_args = tuple(a if i in nums else put(a) for i, a in enumerate(args))
    dev_kwargs = {k: v if k in names else put(v) for k, v in kwargs.items()}
    return dev_args, dev_kwargs


def check_traceable(f, args, *, what=None, static_argnums=(), static_argnames=(), kwargs=None):
    """Check that ``f`` traces under ``jax.jit``: no Python conversion of a traced value.

    ``float(x)``, ``x.item()``, ``np.asarray(x)`` and ``if x > 0`` all need the
    concrete value, which does not exist while tracing. The learner sees which
    conversion failed and the idea it breaks (as :func:`autograder.call` translates it).
    """
    import jax

    label = what or f"`{getattr(f, '__name__', 'f')}`"
    kwargs = kwargs or {}
    jitted = jax.jit(f, static_argnums=static_argnums or None, static_argnames=static_argnames or None)
    call(jitted.trace, *args, what=f"tracing {label} under jax.jit",
         translate=lambda exc, lbl: _explain(exc, lbl, concrete_idea="async"), **kwargs)


def check_no_host_transfer(f, args, *, what=None, static_argnums=(), static_argnames=(), kwargs=None):
    """Check that a (warmed-up) jitted call of ``f`` makes no implicit host transfer.

    Arguments are placed on the device first and one untimed call compiles,
    then the call runs under ``jax.transfer_guard("disallow")``. The function
    must also trace under jit (see :func:`check_traceable`). A failure says that data
    moved between host and device inside the hot path.
    """
    import jax

    label = what or f"`{getattr(f, '__name__', 'f')}`"
    kwargs = kwargs or {}
    check_traceable(f, args, what=label, static_argnums=static_argnums,
                    static_argnames=static_argnames, kwargs=kwargs)
    jitted = jax.jit(f, static_argnums=static_argnums or None, static_argnames=static_argnames or None)
    dev_args, dev_kwargs = _to_device(tuple(args), kwargs, static_argnums, static_argnames)
    jax.block_until_ready(call(jitted, *dev_args, what=label, **dev_kwargs))

    def translate(exc, lbl):
        if "transfer" not in str(exc).lower():
            return None
        return ExerciseFailure("async", f"{lbl} moved data between host and device inside the hot path "
                                        f"({str(exc).splitlines()[0][:200]}); keep values on the device "
                                        "and return them as arrays.")

    with jax.transfer_guard("disallow"):
        jax.block_until_ready(call(jitted, *dev_args, what=label, translate=translate, **dev_kwargs))
