"""Meshes for the sharding chapter, and checks of per-device code (``shard_map`` and collectives).

Not imported by ``import autograder`` (which must not start JAX before the notebook has asked for
8 virtual CPU devices): use ``from autograder.meshes import ...`` after the setup cell.
"""
from __future__ import annotations

import math

from .feedback import ExerciseFailure, _explain, call, fail, is_sharding_type_error  # noqa: F401

# Primitive-name prefixes of the collectives a shard_map body can use to combine its shards.
COLLECTIVES = ("psum", "pmean", "pmax", "pmin", "all_gather", "all_reduce", "reduce_scatter",
               "all_to_all", "ppermute", "psum_scatter")


def mesh_devices(n: int = 8):
    """``n`` devices for a mesh: the default backend's when it has ``n`` (a TPU with 8 chips),
    otherwise ``n`` CPU devices (virtual ones, from ``ag.use_virtual_cpu_devices(n)``)."""
    import jax

    devices = jax.devices()
    if len(devices) >= n:
        return devices[:n]
    cpus = jax.devices("cpu")
    if len(cpus) >= n:
        return cpus[:n]
    raise RuntimeError(
        f"JAX sees {len(devices)} {jax.default_backend()} device(s) and {len(cpus)} CPU device(s), "
        f"fewer than {n}. Run `ag.use_virtual_cpu_devices({n})` before any JAX operation: restart "
        "the kernel and run the notebook's first cell first.")


def axis_type(kind: str):
    """``AxisType.Auto`` for ``"auto"``, ``AxisType.Explicit`` for ``"explicit"``."""
    from jax.sharding import AxisType

    return {"auto": AxisType.Auto, "explicit": AxisType.Explicit}[kind]


def make_mesh(shape, names, kind: str = "auto", devices=None):
    """A mesh of ``shape`` with axes ``names`` of one type (``"auto"`` or ``"explicit"``).

    Always passes ``axis_types`` (``jax.make_mesh`` defaults to explicit axes since JAX 0.9).
    """
    import numpy as np
    import jax
    from jax.sharding import Mesh

    shape, names = tuple(shape), tuple(names)
    devices = list(mesh_devices(math.prod(shape)) if devices is None else devices)
    types = (axis_type(kind),) * len(shape)
    try:
        return jax.make_mesh(shape, names, axis_types=types, devices=devices)
    except TypeError:  # an older make_mesh without ``devices``
        return Mesh(np.array(devices).reshape(shape), names, axis_types=types)


def shard_map_fn():
    """``jax.shard_map`` (JAX >= 0.6.1), else ``jax.experimental.shard_map.shard_map``."""
    import jax

    fn = getattr(jax, "shard_map", None)
    if fn is None:
        from jax.experimental.shard_map import shard_map as fn
    return fn


def call_explicit(f, *args, what: str | None = None, **kwargs):
    """Call learner code under explicit sharding; a ``ShardingTypeError`` becomes feedback that
    names explicit sharding (as every check's :func:`autograder.feedback.call` does)."""
    return call(f, *args, what=what or f"`{getattr(f, '__name__', 'the function')}`", **kwargs)


def check_uses_collective(f, args, *, what=None):
    """Check that ``f(*args)`` runs per-device code (``shard_map``) that combines its shards with a
    collective (``psum``, ``pmean``, ``all_gather``, ...), seen in the jaxpr.

    The learner sees which of the two is missing.
    """
    import jax

    from .jaxprs import primitives_in

    label = what or f"`{getattr(f, '__name__', 'f')}`"
    try:
        jaxpr = jax.make_jaxpr(f)(*args)
    except ExerciseFailure:
        raise
    except Exception as exc:  # noqa: BLE001
        raise _explain(exc, f"tracing {label}") from exc
    names = primitives_in(jaxpr)
    if not any(n.startswith("shard_map") for n in names):
        fail("shard_map", f"the jaxpr of {label} has no `shard_map`: the exercise asks for per-device "
                          "code written with `jax.shard_map`, not for the compiler's automatic partitioning.")
    if not any(n.startswith(COLLECTIVES) for n in names):
        fail("shard_map", f"the `shard_map` in {label} uses no collective: each device must reduce its own "
                          "shard, then a collective such as `jax.lax.psum` combines the partial results "
                          "across the mesh axis.")
