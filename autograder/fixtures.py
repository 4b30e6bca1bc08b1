"""Functions the judge passes to exercises that take functions (``primitive_names(f, *args)``,
``honest_time(f, ...)``), by name: ``autograder.wire.Fixture("sin_times_two")``.

Trusted code: the agent resolves a fixture only to a function defined in this module. Add the
functions a judge file needs here (plain JAX, no state).
"""
from __future__ import annotations


def sin_times_two(x):
    """``sin(x) * 2``: primitives ``sin`` and ``mul``."""
    import jax.numpy as jnp

    return jnp.sin(x) * 2


def matmul_tanh(a, b):
    """``tanh(a @ b)``: primitives ``dot_general`` and ``tanh``."""
    import jax.numpy as jnp

    return jnp.tanh(a @ b)


# --------------------------------------------------------------------------- 09_sharding
# Fixtures that call a learner function themselves (the agent calls a fixture in place of a
# notebook function when the judge sends ``Fixture(name)`` as the callee): they build the
# kernel-side objects the call needs (meshes, ``jax.set_mesh``) and return data only: the
# output, and where its pieces live as device ids and index ranges, for the judge to check.

def _mesh(shape, names, kind="auto", order=None):
    """A mesh of the first ``prod(shape)`` mesh devices, in ``order`` (indices) if given."""
    import math

    from .meshes import make_mesh, mesh_devices

    devices = list(mesh_devices(math.prod(shape)))
    if order is not None:
        devices = [devices[int(i)] for i in order]
    return make_mesh(tuple(shape), tuple(names), kind, devices=devices)


def _ids(mesh) -> list:
    return [int(d.id) for d in mesh.devices.flat]


def placement(a):
    """Where the pieces of ``a`` live: ``[[device id, [[start, stop] per dimension]], ...]``
    sorted by device id (``None`` for a value that is not a ``jax.Array``)."""
    import jax

    if not isinstance(a, jax.Array):
        return None
    out = []
    for device, index in a.sharding.devices_indices_map(a.shape).items():
        ranges = [[int(s.indices(n)[0]), int(s.indices(n)[1])] for s, n in zip(index, a.shape)]
        out.append([int(device.id), ranges])
    return sorted(out)


def _described(out, mesh):
    """The output with its placement, the mesh's device ids and the ids of the output's own
    mesh (when it has a ``NamedSharding``)."""
    own = getattr(getattr(out, "sharding", None), "mesh", None)
    return {"out": out, "placement": placement(out), "mesh": _ids(mesh),
            "out_mesh": _ids(own) if hasattr(own, "devices") else None}


def shard_rows_on(f, x, order):
    """``f(x, mesh)`` for the 1-D ``"data"`` mesh (automatic axis) of 8 devices in ``order``."""
    mesh = _mesh((8,), ("data",), "auto", order)
    return _described(f(x, mesh), mesh)


def explicit_matmul_on(f, x, w, jit):
    """Under ``jax.set_mesh`` of the 2-D explicit mesh ``("data", "model")`` of 8 devices:
    ``x`` placed as P("data", "model"), ``w`` as P("model", None), then ``f(x, w)`` (or
    ``jax.jit(f)(x, w)``). Also returns the sharding spec in the output's type."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    from .meshes import mesh_shape

    mesh = _mesh(mesh_shape(8, 2), ("data", "model"), "explicit")
    with jax.set_mesh(mesh):
        xs = jax.device_put(x, NamedSharding(mesh, P("data", "model")))
        ws = jax.device_put(w, NamedSharding(mesh, P("model", None)))
        out = (jax.jit(f) if jit else f)(xs, ws)
    result = _described(out, mesh)
    aval = jax.typeof(out) if isinstance(out, jax.Array) else None
    spec = getattr(getattr(aval, "sharding", None), "spec", None)
    result["type_spec"] = None if spec is None else [list(p) if isinstance(p, tuple) else p for p in spec]
    result["type"] = None if aval is None else str(aval.str_short() if hasattr(aval, "str_short") else aval)
    result["mesh_shape"] = [int(n) for n in mesh.devices.shape]
    return result


def global_mean_on(f, x, jit, primitives):
    """``f(x, mesh)`` (or ``jax.jit`` of it) for ``x`` placed with its rows over the 1-D
    ``"data"`` mesh of 8 devices; with ``primitives``, also the primitive names of the jaxpr of
    ``lambda a: f(a, mesh)`` (nested ones included)."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    from .jaxprs import primitives_in

    mesh = _mesh((8,), ("data",), "auto")
    xs = jax.device_put(x, NamedSharding(mesh, P("data")))
    out = jax.jit(lambda a: f(a, mesh))(xs) if jit else f(xs, mesh)
    result = {"out": out}
    if primitives:
        result["primitives"] = primitives_in(jax.make_jaxpr(lambda a: f(a, mesh))(xs))
    return result


def keys_equal(f, xs):
    """``f`` applied to each of ``xs``; ``{"equal": [[f(a) == f(b)]], "same_hash": [[hash(f(a))
    == hash(f(b))]]}`` for every pair, compared here because the keys may be any hashable
    objects (a dtype, a sharding...) that the channel does not carry."""
    keys = [f(x) for x in xs]
    hashes = [hash(k) for k in keys]
    return {"equal": [[bool(a == b) for b in keys] for a in keys],
            "same_hash": [[ha == hb for hb in hashes] for ha in hashes]}
