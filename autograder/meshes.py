"""Meshes for the sharding chapter, and checks of per-device code (``shard_map`` and collectives).

Not imported by ``import autograder`` (which must not start JAX before the notebook has asked for
virtual CPU devices): use ``from autograder.meshes import ...`` after the setup cell.

Which devices the meshes use (:func:`mesh_devices`):

- an accelerator (TPU, GPU) with 2 or more devices: all of its devices, the real chips;
- an accelerator with a single device: a mesh of one teaches nothing, so the CPU devices
  (virtual ones, from ``ag.use_virtual_cpu_devices(8)``) are used instead, and the returned
  list says so in its ``reason``;
- no accelerator: the (virtual) CPU devices.

Mesh shapes are sized to the devices: ``mesh_shape(len(devices))`` is ``(n,)``,
``mesh_shape(len(devices), 2)`` a 2-D factorisation such as ``(2, 4)`` for 8 devices or
``(2, 2)`` for 4; ``make_mesh(None, names)`` does both steps.
"""
from __future__ import annotations

import math

from .feedback import ExerciseFailure, _explain, fail

# Primitive-name prefixes of the collectives a shard_map body can use to combine its shards.
COLLECTIVES = ("psum", "pmean", "pmax", "pmin", "all_gather", "all_reduce", "reduce_scatter",
               "all_to_all", "ppermute", "psum_scatter")


class MeshDevices(list):
    """A list of devices for meshes that also says where they come from.

    ``platform``: ``"tpu"``, ``"gpu"`` or ``"cpu"``; ``fallback``: True when an accelerator is
    present but the devices are CPU ones; ``reason``: one sentence for the learner.
    """

    def __init__(self, devices, *, platform: str, fallback: bool, reason: str):
        super().__init__(devices)
        self.platform, self.fallback, self.reason = platform, fallback, reason


def _kinds(devices) -> str:
    return ", ".join(sorted({str(getattr(d, "device_kind", "?")) for d in devices}))


def _no_devices(have: str, n: int, ask: int | None = None) -> RuntimeError:
    return RuntimeError(
        f"{have}, fewer than {n}. Run `ag.use_virtual_cpu_devices({ask or n})` before any JAX operation: "
        "restart the kernel and run the notebook's first cell first.")


def mesh_devices(n: int | None = None) -> MeshDevices:
    """Devices for the chapter's meshes, as a :class:`MeshDevices` list (with ``reason``).

    Without ``n``: every device of the accelerator when it has 2 or more (size the meshes with
    ``mesh_shape(len(devices))``); with a single accelerator device, or none, the CPU devices
    (8 virtual ones after ``ag.use_virtual_cpu_devices(8)``).

    With ``n``: exactly ``n`` devices, the accelerator's when it has ``n``, else ``n`` CPU devices
    (``reason`` then names the accelerator that had too few). Raises ``RuntimeError`` when
    neither has enough.
    """
    import jax

    backend = jax.default_backend()
    accel = list(jax.devices()) if backend != "cpu" else []
    cpus = list(jax.devices("cpu"))
    name = backend.upper()
    virtual = "virtual CPU devices that share the host's cores (placement and communication, no speed-up)"
    if n is None:
        if len(accel) >= 2:
            return MeshDevices(accel, platform=backend, fallback=False,
                               reason=f"{len(accel)} real {name} devices [{_kinds(accel)}]")
        if len(cpus) >= 2:
            if accel:
                return MeshDevices(
                    cpus, platform="cpu", fallback=True,
                    reason=f"the {name} has a single device [{_kinds(accel)}], too few for a mesh: "
                           f"falling back to {len(cpus)} {virtual}")
            return MeshDevices(cpus, platform="cpu", fallback=False,
                               reason=f"no accelerator: {len(cpus)} {virtual}")
        have = (f"JAX sees 1 {name} device and {len(cpus)} CPU device(s)" if accel
                else f"JAX sees {len(cpus)} CPU device(s) and no accelerator")
        raise _no_devices(have, 2, ask=8)
    if n < 1:
        raise ValueError(f"a mesh needs at least one device, not {n}")
    if len(accel) >= n:
        return MeshDevices(accel[:n], platform=backend, fallback=False,
                           reason=f"{n} of the {len(accel)} real {name} devices [{_kinds(accel)}]")
    if len(cpus) >= n:
        if accel:
            reason = (f"the {name} has {len(accel)} device(s) [{_kinds(accel)}], fewer than the {n} asked "
                      f"for: falling back to {n} {virtual}")
            if len(accel) >= 2:
                reason += (f"; call mesh_devices() without a count to use the {len(accel)} real devices, "
                           "with mesh shapes from mesh_shape(len(devices))")
            return MeshDevices(cpus[:n], platform="cpu", fallback=True, reason=reason)
        return MeshDevices(cpus[:n], platform="cpu", fallback=False,
                           reason=f"no accelerator: {n} {virtual}")
    have = (f"JAX sees {len(accel)} {name} device(s) and {len(cpus)} CPU device(s)" if accel
            else f"JAX sees {len(cpus)} CPU device(s) and no accelerator")
    raise _no_devices(have, n)


def mesh_shape(n: int, ndim: int = 1) -> tuple[int, ...]:
    """A mesh shape for ``n`` devices: ``(n,)``, or for ``ndim=2`` the most square factorisation
    ``(a, n // a)`` with ``a <= n // a``: ``(2, 4)`` for 8, ``(2, 2)`` for 4, ``(1, 2)`` for 2."""
    if n < 1:
        raise ValueError(f"a mesh needs at least one device, not {n}")
    if ndim == 1:
        return (n,)
    if ndim == 2:
        a = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
        return (a, n // a)
    raise ValueError(f"mesh_shape supports 1 or 2 axes, not {ndim}")


def make_mesh(shape, names, kind: str = "auto", devices=None):
    """A mesh of ``shape`` with axes ``names`` of one type (``"auto"`` or ``"explicit"``).

    ``shape=None`` sizes the mesh to the devices (``mesh_devices()`` unless given):
    ``mesh_shape(len(devices), len(names))``. Always passes ``axis_types`` (``jax.make_mesh``
    defaults to explicit axes since JAX 0.9).
    """
    import jax
    from jax.sharding import AxisType

    names = tuple(names)
    if shape is None:
        devices = list(mesh_devices() if devices is None else devices)
        shape = mesh_shape(len(devices), len(names))
    shape = tuple(shape)
    devices = list(mesh_devices(math.prod(shape)) if devices is None else devices)
    types = ({"auto": AxisType.Auto, "explicit": AxisType.Explicit}[kind],) * len(shape)
    return jax.make_mesh(shape, names, axis_types=types, devices=devices)


def shard_map_fn():
    """``jax.shard_map`` (public since JAX 0.6.1; the package needs 0.7.2 or newer)."""
    import jax

    return jax.shard_map


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
    except Exception as exc:
        raise _explain(exc, f"tracing {label}") from exc
    names = primitives_in(jaxpr)
    if not any(n.startswith("shard_map") for n in names):
        fail("shard_map", f"the jaxpr of {label} has no `shard_map`: the exercise asks for per-device "
                          "code written with `jax.shard_map`, not for the compiler's automatic partitioning.")
    if not any(n.startswith(COLLECTIVES) for n in names):
        fail("shard_map", f"the `shard_map` in {label} uses no collective: each device must reduce its own "
                          "shard, then a collective combines the partial results across the mesh axis; "
                          "without one, each device returns only its own shard's part.")
