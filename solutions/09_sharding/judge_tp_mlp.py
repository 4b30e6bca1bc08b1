"""The judge of 09_sharding's ``tp_mlp`` (trusted: runs in the grader, never in the learner's kernel).

``tp_mlp(x, w1, w2, mesh)`` takes a mesh, a kernel-side object, so the fixture ``tp_mlp_on`` of
:mod:`autograder.agent.fixtures` builds the 2 x 4 mesh ``("data", "model")`` of automatic axes, places
the judge's arrays on it, calls ``tp_mlp`` directly and exports ``jax.jit(lambda x, w1, w2:
tp_mlp(x, w1, w2, mesh))``. Everything graded comes from that one exported program: its
parsed module (:mod:`autograder.judge.mlir`: a manual region, i.e. ``shard_map``; no loop), and
the program compiled and run by the grader's contained program runner on a 2 x 4 mesh of CPU
devices, on new inputs placed as the exercise lays them out: its values, and its collectives as
XLA compiled them (by HLO opcode: exactly one all-reduce, no all-gather, reduce-scatter,
all-to-all or collective-permute). No learner program is compiled in the grading process. The
direct call's values and placement are checked too (a kernel observation beside the
program's).
"""
import numpy as np

from autograder.judge import call, check_close, ExerciseFailure, fail, tolerance
from autograder.judge import mlir
from autograder.judge import ProgramFailure
from autograder.judge import Ref


def _reference(x, w1, w2):
    x, w1, w2 = (np.asarray(a, np.float64) for a in (x, w1, w2))
    return np.maximum(x @ w1, 0) @ w2


def _tolerance(x, w1, w2):
    """float32's relative tolerance, and an absolute one scaled by the size of the terms summed."""
    rtol, _ = tolerance("float32")
    x, w1, w2 = (np.abs(np.asarray(a, np.float64)) for a in (x, w1, w2))
    return rtol, float(rtol * ((x @ w1) @ w2).max() + 1e-6)


def _fixture(k, *args, what):
    from autograder.judge import ChannelError
    from autograder.judge import Fixture

    res = call(lambda *a: k.call(Fixture("tp_mlp_on"), *a), *args, what=what)
    ok = isinstance(res, dict) and all(key in res for key in ("out", "placement", "mesh", "mesh_shape"))
    if not ok or not all(isinstance(res[key], list) and all(type(v) is int for v in res[key])
                         for key in ("mesh", "mesh_shape")):
        raise ChannelError("The kernel's reply does not have the form the grader's fixture gives; was the "
                           "kernel's machinery changed by a cell?")
    return res


def _rows_placement(shape, ids_grid):
    """Where P("data", None) puts an array of ``shape`` on a mesh whose device ids are ``ids_grid``
    (one row per position along "data", replicated over "model")."""
    rows = shape[0] // len(ids_grid)
    rest = [[0, n] for n in shape[1:]]
    return sorted([int(d), [[i * rows, (i + 1) * rows]] + rest] for i, row in enumerate(ids_grid) for d in row)


def _read(data, what):
    """The learner's exported program, deserialized here; refused (host callbacks, effects,
    operations off the runner's allow-list) with a learner-facing failure."""
    import base64

    from jax import export

    from autograder.judge import ChannelError, Exported

    if not isinstance(data, str):
        raise ChannelError(f"The exported program of {what} is missing.")
    try:
        blob = base64.b64decode(data, validate=True)
        program = Exported(export.deserialize(bytearray(blob)), blob=blob, name=what)
    except Exception as exc:  # noqa: BLE001 - a forged or broken module
        raise ChannelError(f"The exported program of {what} cannot be read ({type(exc).__name__}).") from None
    return program.check()


def _collectives(facts, label) -> dict:
    """``{collective: count}`` of the compiled program, as the program runner counted them (by
    HLO opcode; data from the runner, checked)."""
    counts = facts.get("collectives") if isinstance(facts, dict) else None
    if not (isinstance(counts, dict) and "all-reduce" in counts
            and all(isinstance(k, str) and type(v) is int and v >= 0 for k, v in counts.items())):
        raise ExerciseFailure("shard_map", f"{label}: the grader's program runner did not say which collectives "
                                              "it holds; please tell the course staff.")
    return counts


def _sizes(rng):
    return (2 * int(rng.integers(1, 4)), int(rng.integers(3, 9)), 4 * int(rng.integers(1, 4)),
            int(rng.integers(2, 7)))


def _draw(rng, batch, d, h, d_out):
    return (rng.normal(size=(batch, d)).astype(np.float32), rng.normal(size=(d, h)).astype(np.float32),
            rng.normal(size=(h, d_out)).astype(np.float32))


def _check_out(out, placement, grid, args, what):
    """The direct call's output: a jax.Array placed as P("data", None) on the mesh, right values."""
    if not getattr(out, "is_jax", False):
        fail("shard_map", f"{what} is of type {type(out).__name__}, not a jax.Array, so it has no sharding: "
                             "return the array the per-device code computed.")
    if not (isinstance(placement, list) and sorted(map(repr, placement)) == sorted(
            map(repr, _rows_placement(np.shape(out), grid)))):
        fail("shard_map", f"{what} is not placed with its rows split over \"data\" and replicated over "
                             "\"model\" (P('data', None)): after the partial products are combined, every "
                             "device of a \"data\" row holds the same rows of the output.")
    _check_values(out, args, what)


def _check_values(out, args, what):
    if np.asarray(out).dtype != np.float32:
        fail("shard_map", f"{what} has dtype {np.asarray(out).dtype}; the MLP of float32 arrays is float32.")
    rtol, atol = _tolerance(*args)
    check_close(np.asarray(out), _reference(*args), what=f"{what}, relu(x @ w1) @ w2,", rtol=rtol, atol=atol,
                   idea="shard_map")


def test_tp_mlp(k):
    batch, d, h, d_out = _sizes(k.rng)
    args = _draw(k.rng, batch, d, h, d_out)
    what = f"tp_mlp(x, w1, w2, mesh) for x {args[0].shape}, w1 {args[1].shape}, w2 {args[2].shape}"
    res = _fixture(k, Ref("tp_mlp"), *args, True, what=what)
    grid = np.asarray(res["mesh"]).reshape(res["mesh_shape"]).tolist()
    _check_out(res["out"], res["placement"], grid, args, what)

    program = _read(res.get("exported"), "tp_mlp(x, w1, w2, mesh)")
    facts = mlir.read(program)
    if not facts.manual:
        fail("shard_map", "the program of tp_mlp(x, w1, w2, mesh) has no per-device region: the exercise asks "
                             "for the per-device code written with `jax.shard_map`, not for the compiler's "
                             "automatic partitioning.")
    if facts.has_loops:
        fail("shard_map", "the program of tp_mlp(x, w1, w2, mesh) has a loop (`while`); two matrix products "
                             "and one combination of the partial results need none.")

    # The program compiled and run in the contained program runner, on the program's 2 x 4 mesh, on
    # new values placed as the exercise lays them out (x's rows over "data", w1's columns and w2's
    # rows over "model"): whatever else XLA must move shows as collectives of the compiled program.
    new = _draw(k.rng, batch, d, h, d_out)
    label = "the program of tp_mlp(x, w1, w2, mesh), compiled by the grader on a 2 x 4 mesh"
    try:
        out, facts = program.run(new, placements=[["data", None], [None, "model"], ["model", None]],
                                 compiled_facts=True)
    except ProgramFailure as exc:
        fail("shard_map", f"{label} could not be compiled and run: {exc}")
    counts = _collectives(facts, label)
    moved = {name: n for name, n in counts.items() if n and name != "all-reduce"}
    if moved:
        shown = ", ".join(f"{n} {name}" for name, n in moved.items())
        fail("shard_map", f"{label} has {shown}: data other than the partial products crosses the mesh (a "
                             "weight or an activation is gathered or redistributed). In the Megatron layout "
                             "each device keeps its own columns of w1 and rows of w2, and only the partial "
                             "products of the second layer are combined.")
    if counts["all-reduce"] != 1:
        fail("shard_map", f"{label} has {counts['all-reduce']} all-reduce(s), expected exactly one: the partial "
                             "products of the devices along \"model\" are combined once, at the end.")
    _check_values(np.asarray(out), new, "the program of tp_mlp(x, w1, w2, mesh), run by the grader on new values")
    # What crosses the mesh, in bytes per device (the collectives' operands in the per-device
    # code), not by opcode: the partial products of a device's rows of the output, and no more
    # than half as much again (a reduce-scatter and an all-gather of them).
    from autograder.judge import effect

    rows, d_out = args[0].shape[0] // res["mesh_shape"][0], args[2].shape[1]
    partial, crossed = rows * d_out * 4, effect.collective_bytes(program)
    if crossed > 1.5 * partial:
        fail("shard_map", f"the program of tp_mlp(x, w1, w2, mesh) moves {crossed} bytes per device across the "
                             f"mesh, where the partial products of its {rows} row(s) of the output are {partial} "
                             "bytes: a weight is gathered, even through a psum of zero-padded shards. In the "
                             "Megatron layout each device keeps its own columns of w1 and rows of w2, and only the "
                             "partial products of the second layer are combined.")
    effect.require(program, mlir.COLLECTIVES, new, what="tp_mlp(x, w1, w2, mesh)", idea="shard_map",
                   needs="combine the partial products across \"model\" with a collective",
                   placements=[["data", None], [None, "model"], ["model", None]])

    # A second shape, called directly (it may jit inside).
    batch, d, h, d_out = _sizes(k.rng)
    args = _draw(k.rng, batch, d, h, d_out)
    what = f"tp_mlp(x, w1, w2, mesh) for x {args[0].shape}, w1 {args[1].shape}, w2 {args[2].shape}"
    res = _fixture(k, Ref("tp_mlp"), *args, False, what=what)
    _check_out(res["out"], res["placement"], np.asarray(res["mesh"]).reshape(res["mesh_shape"]).tolist(), args,
               what)


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "tp_mlp": [
        ('''
def tp_mlp(x, w1, w2, mesh):
    def per_device(x, w1, w2):
        w1 = jax.lax.all_gather(w1, "model", axis=1, tiled=True)  # the whole w1 on every device
        h = jax.nn.relu(x @ w1)
        i = jax.lax.axis_index("model")
        rows = w2.shape[0]
        return jax.lax.psum(jax.lax.dynamic_slice_in_dim(h, i * rows, rows, axis=1) @ w2, "model")
    return shard_map_fn()(per_device, mesh=mesh, in_specs=(P("data", None), P(None, "model"), P("model", None)),
                          out_specs=P("data", None))(x, w1, w2)
''', "all-gather: data other than the partial products crosses the mesh", "shard_map"),
        ('''
@jax.jit
def _mlp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2  # the compiler partitions it: right numbers, no per-device code

def tp_mlp(x, w1, w2, mesh):
    return _mlp(x, w1, w2)
''', "has no per-device region", "shard_map"),
        ('''
def tp_mlp(x, w1, w2, mesh):
    def per_device(x, w1, w2):
        return jax.lax.pmean(jax.nn.relu(x @ w1) @ w2, "model")  # the mean of the partial products
    return shard_map_fn()(per_device, mesh=mesh, in_specs=(P("data", None), P(None, "model"), P("model", None)),
                          out_specs=P("data", None))(x, w1, w2)
''', "relu(x @ w1) @ w2, is wrong", "shard_map"),
        ('''
def tp_mlp(x, w1, w2, mesh):
    def per_device(x, w1, w2):
        i, rows = jax.lax.axis_index("model"), w1.shape[1]
        own = jax.lax.dynamic_slice_in_dim(w2, i * rows, rows, axis=0)  # its rows, cut from the whole w2
        return jax.lax.psum(jax.nn.relu(x @ w1) @ own, "model")
    return shard_map_fn()(per_device, mesh=mesh, in_specs=(P("data", None), P(None, "model"), P()),
                          out_specs=P("data", None))(x, w1, w2)
''', "a weight or an activation is gathered or redistributed", "shard_map"),
        ('''
def tp_mlp(x, w1, w2, mesh):
    def per_device(x, w1, w2):
        # the whole of w1 and w2 on every device, through ONE psum of zero-padded shards: one
        # all-reduce and no all-gather, yet every device holds the full weights
        n, i = mesh.shape["model"], jax.lax.axis_index("model")
        pad1 = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((w1.shape[0], w1.shape[1] * n), w1.dtype), w1,
                                                   i * w1.shape[1], axis=1)
        pad2 = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((w2.shape[0] * n, w2.shape[1]), w2.dtype), w2,
                                                   i * w2.shape[0], axis=0)
        full1, full2 = jax.lax.psum((pad1, pad2), "model")
        return jax.nn.relu(x @ full1) @ full2
    return shard_map_fn()(per_device, mesh=mesh, in_specs=(P("data", None), P(None, "model"), P("model", None)),
                          out_specs=P("data", None))(x, w1, w2)
''', "a weight is gathered, even through a psum of zero-padded shards", "shard_map"),
    ],
}
