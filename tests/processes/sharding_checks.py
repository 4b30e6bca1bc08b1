"""The sharding checks on 8 virtual CPU devices (XLA_FLAGS set by test_checks' fixture, in a
process of its own: this test process's JAX may have started with one device): prints
``RESULTS`` and a JSON object of each check's outcome, read by test_checks' TestSharding."""
import json

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import autograder as ag
from autograder import meshes
from autograder.sharding import _normalise, describe
from autograder.jaxprs import primitives_in

results = {"devices": jax.device_count(), "backend": jax.default_backend()}

def outcome(fn):
    try:
        fn()
        return None
    except ag.ExerciseFailure as e:
        return [e.idea, str(e)]

AxisType = jax.sharding.AxisType
mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
x = jax.device_put(jnp.ones((16, 4)), NamedSharding(mesh, P("data")))
results["equivalent"] = outcome(lambda: ag.check_sharding(x, NamedSharding(mesh, P("data", None))))
results["wrong_axis"] = outcome(lambda: ag.check_sharding(x, NamedSharding(mesh, P(None, "data")),
                                                          what="shard_rows(x, mesh)"))
results["replicated"] = outcome(lambda: ag.check_sharding(jnp.ones((16, 4)), NamedSharding(mesh, P("data"))))
results["not_array"] = outcome(lambda: ag.check_sharding(np.ones((16, 4)), NamedSharding(mesh, P("data"))))
results["describe"] = describe(x.sharding)
results["normalise"] = [_normalise(P("data"), 2) == _normalise(P("data", None), 2),
                        _normalise(P(("data",)), 1) == _normalise(P("data"), 1),
                        _normalise(P(("a", "b")), 1) == _normalise(P("a"), 1)]

mesh2 = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Explicit,) * 2)
with jax.set_mesh(mesh2):
    a = jax.device_put(jnp.ones((8, 16)), P("data", "model"))
    w = jax.device_put(jnp.ones((16, 4)), P("model", None))
    out = jnp.matmul(a, w, out_sharding=P("data", None))
    results["spec_ok"] = outcome(lambda: ag.check_spec_in_type(out, P("data")))
    results["spec_wrong"] = outcome(lambda: ag.check_spec_in_type(out, P("data", "model"),
                                                                  what="explicit_matmul(x, w)"))
results["spec_auto"] = outcome(lambda: ag.check_spec_in_type(x, P("data")))
mesh8 = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Explicit,))
with jax.set_mesh(mesh8):
    xe = jax.device_put(jnp.ones((8, 4)), P("data"))
    results["sharding_type_error"] = outcome(lambda: ag.call(lambda a: a @ a.T, xe, what="gram(x)"))
results["indivisible"] = outcome(lambda: ag.call(
    lambda v: jax.device_put(v, NamedSharding(mesh, P("data"))), jnp.ones(10), what="shard(x)"))

def global_mean(x):
    f = jax.shard_map(lambda v: jax.lax.pmean(jnp.mean(v), "data"), mesh=mesh,
                      in_specs=P("data"), out_specs=P())
    return f(x)

results["shard_map_prims"] = sorted(set(primitives_in(jax.make_jaxpr(global_mean)(x))))

m = meshes.make_mesh((2, 4), ("data", "model"), kind="explicit")
results["mesh"] = [dict(m.shape), [str(t) for t in m.axis_types], len(meshes.mesh_devices(8))]
try:
    meshes.mesh_devices(16)
    results["too_few"] = None
except RuntimeError as e:
    results["too_few"] = str(e)


def no_collective(v):
    return meshes.shard_map_fn()(lambda b: jnp.mean(b)[None], mesh=mesh, in_specs=P("data"), out_specs=P("data"))(v)


results["collective_ok"] = outcome(lambda: meshes.check_uses_collective(global_mean, (x,)))
results["collective_none"] = outcome(lambda: meshes.check_uses_collective(no_collective, (x,), what="mean(x)"))
results["collective_no_shard_map"] = outcome(lambda: meshes.check_uses_collective(jnp.mean, (x,), what="mean(x)"))
results["collective_broken"] = outcome(lambda: meshes.check_uses_collective(lambda v: v.item(), (x,), what="mean(x)"))
results["mean"] = float(global_mean(x))
print("RESULTS" + json.dumps(results))
