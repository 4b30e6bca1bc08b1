"""A real ``psum`` in ``shard_map`` read from its program (8 CPU devices, in a process of its
own: the test process's JAX may have started with one): one all-reduce in a manual region; a
plain mean has neither; a shard_map in a branch no input takes counts for nothing. Prints ``ok``."""
import jax

jax.config.update("jax_num_cpu_devices", 8)  # right after importing jax, before any device is used

from jax import export  # noqa: E402 - after the device count
from jax.sharding import PartitionSpec as P  # noqa: E402

from autograder.judge import mlir  # noqa: E402

mesh = jax.make_mesh((4,), ("d",), axis_types=(jax.sharding.AxisType.Auto,))

def total(x):
    return jax.shard_map(lambda b: jax.lax.psum(b.sum(), "d"), mesh=mesh, in_specs=P("d"), out_specs=P())(x)

def mean_sin(x):
    return jax.numpy.sin(x).mean()

spec = jax.ShapeDtypeStruct((16,), "float32")
p = mlir.read(export.export(jax.jit(total))(spec))
assert p.collectives == {"stablehlo.all_reduce": 1} and p.manual, (p.collectives, p.manual)
q = mlir.read(export.export(jax.jit(mean_sin))(spec))
assert not q.collectives and not q.manual

# issue 33: a shard_map and a psum in a branch no input takes count for nothing (the value
# comes from jnp.mean); the same shard_map in a branch that is taken counts
def dead_branch(x):
    return jax.lax.cond(x.shape[0] < 0, total, lambda x: x.mean() * x.shape[0], x)

def live_branch(x):
    return jax.lax.cond(x[0] > -1e30, total, lambda x: x.mean() * x.shape[0], x)

d = mlir.read(export.export(jax.jit(dead_branch))(spec))
assert not d.collectives and not d.manual, (d.collectives, d.manual)
live = mlir.read(export.export(jax.jit(live_branch))(spec))
assert live.collectives == {"stablehlo.all_reduce": 1} and live.manual, (live.collectives, live.manual)
print("ok")
