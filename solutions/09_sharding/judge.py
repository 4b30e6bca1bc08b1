"""The judge of 09_sharding (trusted: runs in the grader, never in the learner's kernel).

One ``test_<name>(k)`` per graded test cell; ``k`` is an :class:`autograder.judge.Kernel`.
The exercises take kernel-side objects (a mesh, ``jax.set_mesh``), so the judge calls them
through fixtures of :mod:`autograder.agent.fixtures` (``k.call(Fixture(...), Ref(name), ...)``) that
build those objects, call the learner's function and return data: the output's values, where
its pieces live (device ids and index ranges), the spec in its type. Placements and values are
checked here against references computed here, on inputs drawn from ``k.rng``.

``global_mean``'s and ``explicit_matmul``'s traced programs also come out of the kernel
through ``jax.export``, one per shape the test asks for (its eager calls included): the judge
reads the first as a parsed module (a ``shard_map`` region, a collective, and for
``global_mean`` the bytes its collectives take per device, fewer than a device's block:
:mod:`autograder.judge.mlir`, never the printed text) and runs both on its own devices
on new values (the second on its own explicit mesh: the sharding in the output's type is seen
here); the kernel's own results beside them only fail. ``shard_rows``'s answer is an eager
``device_put``, which a traced program does not keep: its placement is kernel data, checked
here.
Kernel-side observations used: the pairwise equality of ``signature_key``'s keys, which are
arbitrary hashable objects and so are compared in the kernel (they are the answer itself, as
data). The truth for ``signature_key`` is decided here: fresh jitted functions called in this
process, with the compiles counted, on the judge's own copies of the same arguments (8 CPU
devices, asked for when this file loads).
"""
import numpy as np

from autograder.judge import call, check_close, ExerciseFailure, fail
from autograder.judge import mlir
from autograder.judge import JUDGE_CPU_DEVICES as DEVICES, ensure_judge_devices
from autograder.judge import AsJax, Fixture, Ref, Sharded


def _judge_devices():
    """JAX, asked for the judge's CPU devices before it starts its backends (the grading
    process asks before it forks: :func:`autograder.judge.ensure_judge_devices`)."""
    import jax

    ensure_judge_devices()
    return jax


_judge_devices()


# What each fixture's reply must hold: a key and a check of its value.
_SHAPES = {
    "shard_rows_on": {"out": None, "placement": None, "mesh": "ids", "out_mesh": None},
    "explicit_matmul_on": {"out": None, "placement": None, "mesh": "ids", "type_spec": None, "type": None,
                           "mesh_shape": "ids"},
    "global_mean_on": {"out": None},
    "keys_equal": {"equal": None, "same_hash": None},
}


def _unhashable(exc, label):
    if isinstance(exc, TypeError) and "unhashable" in str(exc):
        return ExerciseFailure("sharding_signature", f"{label} returned a value that cannot be hashed "
                                  f"({str(exc)[:100]}): return a hashable key, such as a tuple (not a list "
                                  "or an array), so it can index a cache as jax.jit's signature does.")
    return None


def _fixture(k, name, *args, what):
    """``k.call(Fixture(name), *args)`` through ``ag.call`` (a learner error names its idea); a
    reply without the fields the fixture returns is the kernel's fault, never a judge bug."""
    from autograder.judge import ChannelError

    res = call(lambda *a: k.call(Fixture(name), *a), *args, what=what, translate=_unhashable)
    shape = _SHAPES[name]
    ok = isinstance(res, dict) and all(key in res for key in shape) and all(
        isinstance(res[key], list) and all(type(v) is int for v in res[key])
        for key, kind in shape.items() if kind == "ids")
    if not ok:
        raise ChannelError("The kernel's reply does not have the form the grader's fixture gives; was the "
                           "kernel's machinery changed by a cell?")
    return res


def _spec_text(spec) -> str:
    if spec is None:
        return "no spec"
    return "P(" + ", ".join(repr(tuple(e)) if isinstance(e, list) else repr(e) for e in spec) + ")"


def _placed_as(out) -> str:
    info = getattr(out, "sharding", None)
    if not isinstance(info, dict):
        return "an unknown sharding"
    if info.get("kind") == "NamedSharding":
        return f"NamedSharding({_spec_text(info.get('spec'))})"
    return f"{info.get('kind')} over {info.get('devices')} device(s)"


def _is_array(out, what, idea):
    if not getattr(out, "is_jax", False):
        kind = type(out).__name__
        fail(idea, f"{what} is of type {kind}, not a jax.Array, so it has no sharding: return the "
                      "array JAX computed (np.asarray, .tolist() or float() bring it to the host as one "
                      "unsharded copy).")


def _rows_placement(shape, ids_grid):
    """Where P("data", None) puts an array of ``shape``: ``ids_grid`` has one row of device ids
    per position along "data" (several ids in a row: replicated over the other mesh axis)."""
    rows = shape[0] // len(ids_grid)
    rest = [[0, n] for n in shape[1:]]
    return sorted([int(d), [[i * rows, (i + 1) * rows]] + rest] for i, row in enumerate(ids_grid) for d in row)


def _same_placement(got, expected) -> bool:
    return isinstance(got, list) and sorted(map(repr, got)) == sorted(map(repr, expected))


# --------------------------------------------------------------------------- shard_rows

def _check_rows(k, x, order, what):
    res = _fixture(k, "shard_rows_on", Ref("shard_rows"), x, list(order), what=what)
    out = res["out"]
    _is_array(out, what, "sharding")
    if res.get("out_mesh") is not None and res["out_mesh"] != res["mesh"]:
        fail("sharding", f"{what} is placed on a mesh of other devices (or in another order) than the "
                            "mesh it was given: build the NamedSharding from the `mesh` argument.")
    shape = np.shape(out)
    expected = _rows_placement(shape, [[d] for d in res["mesh"]]) if len(shape) == 2 else None
    if expected is None or not _same_placement(res["placement"], expected):
        fail("sharding", f"{what} is placed as {_placed_as(out)}, expected NamedSharding(P('data', None)).")
    want = np.asarray(x.value if hasattr(x, "value") else x)
    _check_block_order(out, want, len(res["mesh"]), what)
    check_close(out, want, what=what, idea="sharding")


def _check_block_order(out, want, n, what):
    """Right rows in the wrong places: every block of rows of the result is a whole block of
    ``x``, and some are another one than the block their position names (the blocks were cut in
    one order of the devices and placed by another)."""
    got = np.asarray(out)
    if got.shape != want.shape or got.ndim != 2 or got.shape[0] % n or np.array_equal(got, want):
        return
    rows = got.shape[0] // n
    blocks, wanted = got.reshape(n, rows, -1), want.reshape(n, rows, -1)
    source = [next((j for j in range(n) if np.array_equal(blocks[i], wanted[j])), None) for i in range(n)]
    if None in source or source == list(range(n)):
        return
    moved = [f"rows {i * rows}-{(i + 1) * rows - 1} hold x's rows {j * rows}-{(j + 1) * rows - 1}"
             for i, j in enumerate(source) if i != j]
    fail("sharding", f"{what} holds whole blocks of rows of x, in another order: {'; '.join(moved[:3])}. Its "
                        "sharding says which rows each device holds, by the device's position in the mesh; the "
                        "values a device holds must be those rows.")


def test_shard_rows(k):
    natural = list(range(DEVICES))
    rng = k.rng
    c = DEVICES * int(rng.integers(1, 3))  # columns that "data" divides too: a column split is no error
    _check_rows(k, rng.normal(size=(2 * DEVICES, c)).astype(np.float32), natural, "shard_rows(x, mesh)")
    _check_rows(k, AsJax(rng.normal(size=(4 * DEVICES, 3)).astype(np.float32)), natural,
                "shard_rows(x, mesh) of a jax.Array")
    _check_rows(k, Sharded(rng.normal(size=(DEVICES, 6)).astype(np.float32), ()), natural,
                "shard_rows(x, mesh) of a replicated x")
    _check_rows(k, Sharded(rng.normal(size=(DEVICES, 2 * DEVICES)).astype(np.float32), (None, "data")), natural,
                "shard_rows(x, mesh) of a column-sharded x")
    order = [int(i) for i in rng.permutation(DEVICES)]
    if order == natural:
        order = natural[::-1]
    _check_rows(k, rng.normal(size=(3 * DEVICES, 2)).astype(np.float32), order,
                "shard_rows(x, mesh) on a mesh whose devices are in another order")


# --------------------------------------------------------------------------- explicit_matmul

_HINT = (" Under explicit axes the output's sharding is part of its type: the operation itself must be "
         "told the sharding its result should have (see how the chapter's explicit-axes section asks for it).")


def _padded(spec, ndim):
    return [tuple(e) if isinstance(e, (list, tuple)) and len(e) != 1 else
            (e[0] if isinstance(e, (list, tuple)) else e) for e in list(spec) + [None] * (ndim - len(spec))]


def _check_type_spec(spec, type_text, ndim, what):
    if spec is None:
        fail("explicit_sharding", f"{what} has no sharding in its type ({type_text}); with explicit "
                                     "axes the sharding is part of the array type." + _HINT)
    if _padded(spec, ndim) != ["data", None]:
        fail("explicit_sharding", f"{what} has type {type_text}, whose sharding is "
                                     f"{_spec_text([list(e) if isinstance(e, tuple) else e for e in spec])}, "
                                     "expected P('data', None)." + _HINT)


def _check_matmul(k, rows, inner, cols, jit, what, exported=False):
    d, m = 2, DEVICES // 2  # mesh_shape(8, 2)
    xh = k.rng.normal(size=(rows * d, inner * m)).astype(np.float32)
    wh = k.rng.normal(size=(inner * m, cols)).astype(np.float32)
    res = _fixture(k, "explicit_matmul_on", Ref("explicit_matmul"), xh, wh, jit, exported, what=what)
    out = res["out"]
    _is_array(out, what, "explicit_sharding")
    _check_type_spec(res.get("type_spec"), res.get("type"), np.ndim(out), what)
    grid = np.asarray(res["mesh"]).reshape(res["mesh_shape"]).tolist()
    if not _same_placement(res["placement"], _rows_placement(np.shape(out), grid)):
        fail("explicit_sharding", f"{what} is placed as {_placed_as(out)}, expected "
                                     "NamedSharding(P('data', None)) on the mesh it was given." + _HINT)
    check_close(out, (xh.astype(np.float64) @ wh).astype(np.float32), what=what, rtol=1e-4, atol=1e-4,
                   idea="explicit_sharding")
    if exported:
        _check_matmul_program(k, _exported(res.get("exported"), "jax.jit(explicit_matmul)"), xh.shape, wh.shape)


def _check_matmul_program(k, program, shape_x, shape_w):
    """The learner's traced program, run here on the judge's own explicit 2 x 4 mesh on new
    values: the sharding in its output's type and the values, seen in this process."""
    jax = _judge_devices()
    from jax.sharding import NamedSharding, PartitionSpec as P

    from autograder.judge import make_mesh, mesh_shape

    what = "jax.jit(explicit_matmul)'s program, run by the grader on its own mesh"
    mesh = make_mesh(mesh_shape(DEVICES, 2), ("data", "model"), "explicit", devices=_judge_cpus(jax))
    xh = k.rng.normal(size=shape_x).astype(np.float32)
    wh = k.rng.normal(size=shape_w).astype(np.float32)
    try:
        with jax.set_mesh(mesh):
            out = program.call(jax.device_put(xh, NamedSharding(mesh, P("data", "model"))),
                               jax.device_put(wh, NamedSharding(mesh, P("model", None))))
            info = getattr(out, "sharding", None)
            aval = None if isinstance(info, dict) else jax.typeof(out)
    except Exception as exc:  # noqa: BLE001
        fail("explicit_sharding", f"{what} failed ({type(exc).__name__}: {str(exc)[:200]}).")
    if isinstance(info, dict):  # the contained program runner's answer: the output's type and placement as data
        spec = info.get("type_spec")
        _check_type_spec(None if spec is None else tuple(tuple(e) if isinstance(e, list) else e for e in spec),
                         info.get("type"), np.ndim(out), what)
        if info.get("kind") != "NamedSharding" or _padded(info.get("spec") or [], np.ndim(out)) != ["data", None]:
            fail("explicit_sharding", f"{what} is placed as {_placed_as(out)}, expected "
                                         "NamedSharding(P('data', None))." + _HINT)
    else:
        spec = getattr(getattr(aval, "sharding", None), "spec", None)
        _check_type_spec(None if spec is None else tuple(spec), aval.str_short() if hasattr(aval, "str_short")
                         else str(aval), out.ndim, what)
        if not out.sharding.is_equivalent_to(NamedSharding(mesh, P("data", None)), out.ndim):
            fail("explicit_sharding", f"{what} is placed as {out.sharding}, expected "
                                         "NamedSharding(P('data', None))." + _HINT)
    check_close(np.asarray(out), (xh.astype(np.float64) @ wh).astype(np.float32), what=what, rtol=1e-4,
                   atol=1e-4, idea="explicit_sharding")


def test_explicit_matmul(k):
    r = k.rng
    # every shape's program is exported, read and run here: the kernel's own results only fail
    _check_matmul(k, 4, 4, 4, False, "explicit_matmul(x, w)", exported=True)
    _check_matmul(k, int(r.integers(2, 6)), int(r.integers(2, 6)), int(r.integers(3, 9)), True,
                  "jax.jit(explicit_matmul)(x, w)", exported=True)
    _check_matmul(k, int(r.integers(6, 10)), int(r.integers(6, 10)), int(r.integers(9, 14)), False,
                  "explicit_matmul(x, w)", exported=True)


# --------------------------------------------------------------------------- global_mean

def _exported(data, what, idea="explicit_sharding"):
    """The learner's exported program (base64 of ``jax.export``'s bytes), read here as a parsed
    module (:mod:`autograder.judge.mlir`; ``program.facts``); host callbacks are refused (no
    learner Python ever runs in the judge)."""
    import base64

    from jax import export

    from autograder.judge import ChannelError, Exported

    if not isinstance(data, str):
        raise ChannelError(f"The exported program of {what} is missing.")
    try:
        exp = export.deserialize(bytearray(base64.b64decode(data, validate=True)))
        program = Exported(exp, name=what)
        program.facts = mlir.read(exp)
    except Exception as exc:  # noqa: BLE001 - a forged or broken module
        raise ChannelError(f"The exported program of {what} cannot be read ({type(exc).__name__}).") from None
    refused = program.refusal()  # exported for CPU alone (a platform_dependent branch is CPU's), allowed ops
    if refused and "into Python" not in refused and "side effects" not in refused:  # callbacks: below
        fail(idea, f"the program of {what} cannot be graded: {refused}.")
    if (program.facts.callbacks or getattr(exp, "ordered_effects", ())
            or getattr(exp, "unordered_effects", ())):
        fail("purity", f"{what} calls back into Python from the compiled program; the grader only runs "
                          "pure JAX programs.")
    if program.facts.has_loops:  # a sharded product or mean needs no loop
        fail(idea, f"the program of {what} has a loop (`while`); a sharded product or mean needs "
                      "none: let the collectives and the compiler do the work.")
    return program


def _check_mean(k, rows_per_device, cols, jit=False, exported=False, order=None, measure=False):
    shape = (rows_per_device * DEVICES, cols)
    # every row has its own offset, so the shards have different means
    xh = (k.rng.normal(size=shape) + np.arange(shape[0])[:, None]).astype(np.float32)
    what = (f"jax.jit of global_mean(x, mesh) for x of shape {shape}" if jit
            else f"global_mean(x, mesh) for x of shape {shape}")
    if order is None:
        res = _fixture(k, "global_mean_on", Ref("global_mean"), xh, jit, exported, what=what)
    else:  # a mesh of the same devices in another order, x placed on it
        what += " on a mesh whose devices come in another order"
        try:
            res = _fixture(k, "global_mean_on", Ref("global_mean"), xh, jit, exported, list(order), what=what)
        except ExerciseFailure as exc:
            if exc.idea == "purity":
                raise
            fail("shard_map", f"{exc.detail} The mesh passed in is where the shards of x are: the per-device code "
                                 "runs on that mesh, whatever order its devices come in (a mesh the function "
                                 "builds for itself, of the devices in their usual order, is another mesh).")
    mean = xh.astype(np.float64).mean()
    _check_mean_value(res["out"], mean, what)
    if exported:  # the traced program, read and run here
        program = _exported(res.get("exported"), "global_mean(x, mesh)", idea="shard_map")
        if not program.facts.manual:
            fail("shard_map", "the program of global_mean(x, mesh) has no `shard_map`: the exercise asks for "
                                 "per-device code written with `jax.shard_map`, not for the compiler's "
                                 "automatic partitioning.")
        if not program.facts.collectives:
            fail("shard_map", "the `shard_map` in global_mean(x, mesh) uses no collective: each device must "
                                 "reduce its own shard, then a collective combines the partial results across "
                                 "the mesh axis.")
        jax = _judge_devices()
        from jax.sharding import NamedSharding, PartitionSpec as P

        from autograder.judge import effect

        xh2 = (k.rng.normal(size=shape) * 3 + 1).astype(np.float32)  # new values, the same shape
        # by its effect: a collective on every path, and the result changes when it is perturbed
        effect.require(program, mlir.COLLECTIVES, (xh2,), what="global_mean(x, mesh)", idea="shard_map",
                       needs="combine the devices' partial results with a collective")
        # (where a block has 2 rows or more: gathered partial results, n rows of them, are never as large as x)
        whole = [op for op in program.facts.ops if op.name == "stablehlo.reduce"
                 and any(_elements(t) == xh.size for t in op.operands[:1])]
        if measure and whole:  # every device reduces all of x, gathered to it, not its own shard
            fail("shard_map", f"the program of global_mean(x, mesh) for x of shape {shape} reduces an array with "
                                 f"as many elements as the whole of x ({xh.size}) in one operation: each device "
                                 "works on all of x, gathered to it before its code runs, where it must reduce "
                                 "only its own shard.")
        if measure:  # what crosses the mesh, in bytes per device: partial results, not rows
            block, handed = rows_per_device * cols * xh.itemsize, effect.collective_bytes(program)
            if handed >= block:
                fail("shard_map", f"the program of global_mean(x, mesh) for x of shape {shape} hands its "
                                     f"collectives {handed} bytes per device, where one device's block of x "
                                     f"({rows_per_device} x {cols} float32) is {block} bytes: the devices' rows "
                                     "cross the mesh, not a partial result of each device's own shard.")
        try:
            out = program.call(jax.device_put(xh2, NamedSharding(_judge_mesh(jax), P("data"))))
        except Exception as exc:  # noqa: BLE001
            fail("shard_map", f"the program of global_mean(x, mesh), run by the grader on x of shape {shape}, "
                                 f"failed ({type(exc).__name__}: {str(exc)[:200]}).")
        _check_mean_value(np.asarray(out), xh2.astype(np.float64).mean(),
                          f"the program of global_mean(x, mesh) run by the grader on new values of shape {shape}")


def _elements(type_text):
    """Elements of a ranked tensor type's text (``tensor<4x8xf32>``: 32); None when not static."""
    body = type_text[len("tensor<"):-1].split(",")[0].strip() if str(type_text).startswith("tensor<") else ""
    try:
        return int(np.prod([int(d) for d in body.split("x")[:-1]]))
    except ValueError:
        return None


def _check_mean_value(got, mean, what):
    if np.shape(got) == () and np.isclose(float(np.asarray(got, np.float64)), DEVICES * mean, rtol=1e-4):
        fail("shard_map", f"{what} is {float(got):.4f}, {DEVICES} times the mean {mean:.4f}: the {DEVICES} "
                             "devices' partial results were added up, and each was already the mean of its own "
                             "block; the mean of the whole array counts every element once.")
    check_close(got, np.float32(mean), what=what, rtol=1e-5, atol=1e-4, idea="shard_map")


def _judge_cpus(jax):
    cpus = jax.devices("cpu")
    if len(cpus) < DEVICES:
        raise RuntimeError(f"the grader's process has {len(cpus)} CPU devices, the judge needs {DEVICES}")
    return list(cpus[:DEVICES])


def _judge_mesh(jax):
    from autograder.judge import make_mesh

    return make_mesh((DEVICES,), ("data",), "auto", devices=_judge_cpus(jax))


def test_global_mean(k):
    r = k.rng
    # every shape's program is exported, read and run here: the kernel's own results only fail
    # (the bytes the collectives take are measured where a block has 2 rows and 2 columns or more:
    # a partial result, even a row or a column of sums, is then smaller than the block)
    _check_mean(k, int(r.integers(4, 9)), int(r.integers(3, 7)), exported=True, measure=True)
    _check_mean(k, 1, int(r.integers(2, 5)), exported=True)
    _check_mean(k, int(r.integers(2, 5)), int(r.integers(4, 8)), jit=True, exported=True, measure=True)
    # ... on the mesh it is given, whatever its devices' order (a mesh the answer builds itself
    # from the devices in their usual order puts the shards elsewhere: JAX refuses it)
    natural = list(range(DEVICES))
    order = [int(i) for i in r.permutation(DEVICES)]
    _check_mean(k, int(r.integers(2, 5)), int(r.integers(2, 6)), jit=True,
                order=order if order != natural else natural[::-1])


# --------------------------------------------------------------------------- signature_key

def _sample(rng):
    """Arguments of every kind the exercise lists, in a fresh order, with values that differ:
    ``[(wire value for the kernel, judge value builder, description)]``. Pairs that differ in
    exactly one of shape, dtype, weak type and sharding are always present."""
    import ml_dtypes

    def pyfloat():
        return float(np.round(rng.uniform(-9, 9), 3)) or 0.5

    r0 = DEVICES * int(rng.integers(1, 4))          # sharded dimensions divide evenly
    c0 = DEVICES * int(rng.integers(1, 3))
    base = (r0, c0)
    other = (r0 + DEVICES, c0) if rng.random() < 0.5 else (r0, c0 + DEVICES)
    deep = (DEVICES, DEVICES * int(rng.integers(1, 3)), int(rng.integers(2, 4)))
    arrays = [(base, "float32", ("data", None)), (base, "float32", ("data", None)),
              (base, "float32", ()), (base, "float32", (None, "data")),
              (base, "bfloat16", ("data", None)), (base, "int32", ("data", None)),
              (other, "float32", ("data", None)), (deep, "float32", (None, "data")),
              ((), "float32", ()), ((int(rng.integers(2, 20)),), "float32", ())]
    dtypes = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "int32": np.int32}
    items = []
    seen = set()
    for shape, dtype, spec in arrays:
        values = (rng.normal(size=shape) * 4).astype(dtypes[dtype])
        while values.tobytes() in seen:
            values = (rng.normal(size=shape) * 4).astype(dtypes[dtype])
        seen.add(values.tobytes())
        shown = "[" + ",".join(map(str, shape)) + "]"
        items.append((Sharded(values, spec), ("array", values, spec),
                      f"a {dtype}{shown} jax.Array placed with {_spec_text(list(spec))}"))
    b = bool(rng.integers(0, 2))
    i1, i2 = (int(v) for v in rng.choice(np.arange(-50, 50), size=2, replace=False))
    f1, f2 = pyfloat(), pyfloat()
    while f2 == f1:
        f2 = pyfloat()
    s1, s2 = (np.float32(v) for v in rng.choice(np.arange(-40, 40), size=2, replace=False) / 4)
    n1, n2 = (np.int32(v) for v in rng.choice(np.arange(-30, 30), size=2, replace=False))
    for v in (b, not b, i1, i2, f1, f2, s1, s2, n1, n2):
        kind = {bool: "Python bool", int: "Python int", float: "Python float"}.get(type(v))
        shown = f"the {kind} {v!r}" if kind else f"np.{type(v).__name__}({v!r})"
        items.append((v, ("scalar", v, None), shown))
    return [items[i] for i in rng.permutation(len(items))]


def _judge_value(jax, mesh, spec_value):
    from jax.sharding import NamedSharding, PartitionSpec as P

    kind, value, spec = spec_value
    if kind == "scalar":
        return value
    return jax.device_put(value, NamedSharding(mesh, P(*spec)))


def _signature_truth(jax, args):
    """Class labels: ``label[i] == label[j]`` exactly when a jitted one-argument function called
    with ``args[i]`` and then ``args[j]`` compiles once, decided with compiles counted here.

    ``every`` is one fresh jitted function called once with one argument of each class found so
    far: a new argument that makes it compile is unlike all of them (a new class). Otherwise
    the argument is tried against each class's first member with a fresh function of its own
    (called with that member, then with the argument: one compile means the same class)."""
    from autograder.judge import CompileCounter

    def fresh():
        return jax.jit(lambda v: v)  # a new function: nothing of it compiled yet

    def compiles(f, a):
        with CompileCounter(fresh=False) as c:
            jax.block_until_ready(f(a))
        return c.compiles

    def same(first, second):
        f = fresh()
        compiles(f, first)
        return compiles(f, second) == 0

    every, firsts, labels = fresh(), [], []
    for i, a in enumerate(args):
        if compiles(every, a) > 0:  # unlike every class so far (the first argument included)
            firsts.append(i)
            labels.append(len(firsts) - 1)
            continue
        # the likeliest class first: the one whose shape, dtype, weak type and sharding differ least
        for label, j in sorted(enumerate(firsts), key=lambda p: len(_differences(jax, args[p[1]], a))):
            if same(args[j], a):
                labels.append(label)
                break
        else:  # never expected: `every` knew its signature but no class did; a class of its own
            firsts.append(i)
            labels.append(len(firsts) - 1)
    return labels


def _differences(jax, a, b) -> list:
    ta, tb = jax.typeof(a), jax.typeof(b)
    out = []
    if ta.shape != tb.shape:
        out.append("shape")
    if ta.dtype != tb.dtype:
        out.append("dtype")
    if bool(ta.weak_type) != bool(tb.weak_type):
        out.append("weak type")
    sa = a.sharding if isinstance(a, jax.Array) else None
    sb = b.sharding if isinstance(b, jax.Array) else None
    if (sa is None) != (sb is None) or (sa is not None and sa != sb):
        out.append("sharding")
    return out


def test_signature_key(k):
    jax = _judge_devices()
    mesh = _judge_mesh(jax)
    sample = _sample(k.rng)
    res = _fixture(k, "keys_equal", Ref("signature_key"), [w for w, _, _ in sample],
                  what="signature_key(x)")
    n = len(sample)
    equal, same_hash = res["equal"], res["same_hash"]
    if not all(isinstance(m, list) and len(m) == n and all(isinstance(r, list) and len(r) == n for r in m)
               for m in (equal, same_hash)):
        from autograder.judge import ChannelError

        raise ChannelError("The kernel's comparison of the keys of signature_key is malformed.")
    args = [_judge_value(jax, mesh, v) for _, v, _ in sample]
    labels = _signature_truth(jax, args)
    wrong = []
    for i in range(n):
        for j in range(n):
            if bool(equal[i][j]) and not bool(same_hash[i][j]):
                fail("sharding_signature", f"signature_key gives equal keys to {sample[i][2]} and to "
                                              f"{sample[j][2]} whose hashes differ: a key must be hashable "
                                              "consistently (equal keys, equal hashes), as a dict key is.")
            if bool(equal[i][j]) != (labels[i] == labels[j]):
                wrong.append((i, j))
    if not wrong:
        return
    # Only how many pieces are missing (or that something extra is held), never which: naming
    # them one by one would let the feedback write the key.
    merged = [(i, j) for i, j in wrong if labels[i] != labels[j]]
    if merged:
        # The pieces missing: what the pairs mixed up that differ in one thing only differ in.
        missing = set()
        for i, j in merged:
            diffs = _differences(jax, args[i], args[j])
            if len(diffs) == 1:
                missing.add(diffs[0])
        fail("sharding_signature",
                f"signature_key gives equal keys to arguments that jax.jit compiles separately: the key is "
                f"missing {max(len(missing), 1)} of the things the compile signature holds "
                f"({len(merged) // 2} pair(s) of the grader's arguments mixed up).")
    fail("sharding_signature",
            f"signature_key gives different keys to arguments that a jitted function compiles once "
            f"({len(wrong) // 2} pair(s) of the grader's arguments): the key holds something jax.jit leaves "
            "out of the compile signature.")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "shard_rows": [
        ('''
def shard_rows(x, mesh):
    return jax.device_put(x, NamedSharding(mesh, P(None, "data")))  # splits the columns
''', "is placed as NamedSharding(P(None, 'data')), expected NamedSharding(P('data', None))", "sharding"),
        ('''
def shard_rows(x, mesh):
    return jax.device_put(x, NamedSharding(mesh, P()))  # replicated: every device holds all rows
''', "is placed as NamedSharding(P()), expected NamedSharding(P('data', None))", "sharding"),
        ('''
def shard_rows(x, mesh):
    own = jax.sharding.Mesh(np.array(jax.devices()[:mesh.size]), ("data",), axis_types=(AxisType.Auto,))
    return jax.device_put(x, NamedSharding(own, P("data")))  # ignores the mesh it is given
''', "than the mesh it was given", "sharding"),
        ('''
def shard_rows(x, mesh):
    """`x` with its rows split over the mesh axis "data" and its columns replicated."""
    # the starting code: blocks cut in the order of jax.devices(), placed by the mesh's order
    rows = NamedSharding(mesh, P("data", None))
    devices = jax.devices()
    size = x.shape[0] // len(devices)
    blocks = [jax.device_put(x[i * size:(i + 1) * size], d) for i, d in enumerate(devices)]
    return jax.make_array_from_single_device_arrays(x.shape, rows, blocks)
''', "holds whole blocks of rows of x, in another order", "sharding"),
    ],
    "explicit_matmul": [
        ('''
def explicit_matmul(x, w):
    return x @ w
''', "explicit_matmul(x, w) raised ShardingTypeError", "explicit_sharding"),
        ('''
def explicit_matmul(x, w):
    return jnp.matmul(x, w, out_sharding=P(None, None))  # replicated, not split by rows
''', "whose sharding is P(None, None), expected P('data', None)", "explicit_sharding"),
        ('''
def explicit_matmul(x, w):
    return jnp.matmul(x, w, out_sharding=P("data", "model"))  # also splits the columns
''', "whose sharding is P('data', 'model'), expected P('data', None)", "explicit_sharding"),
    ],
    "global_mean": [
        ('''
def global_mean(x, mesh):
    return jnp.mean(x)
''', "the program of global_mean(x, mesh) has no `shard_map`", "shard_map"),
        ('''
def global_mean(x, mesh):
    # per-device means, but combined outside shard_map by the compiler, not by a collective
    means = shard_map_fn()(lambda b: jnp.mean(b)[None], mesh=mesh, in_specs=P("data"), out_specs=P("data"))(x)
    return jnp.mean(means)
''', "uses no collective", "shard_map"),
        ('''
def global_mean(x, mesh):
    # sums the per-device means: forgets that there are mesh.size of them
    return shard_map_fn()(lambda b: jax.lax.psum(jnp.mean(b), "data"), mesh=mesh,
                          in_specs=P("data"), out_specs=P())(x)
''', "8 times the mean", "shard_map"),
        ('''
def global_mean(x, mesh):
    # the right number, but each device sums its rows in a loop: the grader runs the program
    # itself, and no loop that the exercise does not need
    def per_device(block):
        total = jax.lax.fori_loop(1, block.shape[0], lambda i, acc: acc + jnp.sum(block[i]), jnp.sum(block[0]))
        return jax.lax.psum(total, "data") / x.size
    return shard_map_fn()(per_device, mesh=mesh, in_specs=P("data"), out_specs=P())(x)
''', "has a loop (`while`)", "shard_map"),
        ('''
def global_mean(x, mesh):
    # a live shard_map that the result never needs: a decoy beside the compiler's mean
    decoy = shard_map_fn()(lambda b: jax.lax.psum(jnp.sum(b), "data"), mesh=mesh, in_specs=P("data"),
                           out_specs=P())(x)
    return jnp.mean(x) + 0.0 * decoy
''', "does not depend on the operations that combine the devices' partial results", "shard_map"),
        ('''
def global_mean(x, mesh):
    # the shard_map in a branch that no input the grader draws takes
    sharded = shard_map_fn()(lambda b: jax.lax.psum(jnp.sum(b), "data") / x.size, mesh=mesh,
                             in_specs=P("data"), out_specs=P())
    return jax.lax.cond(jnp.abs(x[0, 0]) > 1e30, sharded, jnp.mean, x)
''', "on every path it can take", "shard_map"),
        ('''
import jax.export as _jax_export

_export = _jax_export.export


def _for_every_platform(fun, *args, **kwargs):  # the kernel's export patched: CPU and CUDA asked for
    kwargs["platforms"] = ("cpu", "cuda")
    return _export(fun, *args, **kwargs)


_jax_export.export = _for_every_platform


def global_mean(x, mesh):
    # CPU's branch is the compiler's mean; the shard_map is the branch no CPU run enters
    sharded = shard_map_fn()(lambda b: jax.lax.psum(jnp.sum(b), "data") / x.size, mesh=mesh,
                             in_specs=P("data"), out_specs=P())
    return jax.lax.platform_dependent(x, cpu=jnp.mean, default=sharded)
''', "not for the grader's platform alone (cpu)", "shard_map"),
        ('''
def _add_up(block):
    # every device's block added to the others', element by element, across "data": each device
    # then holds the sum of all the blocks, and their mean over the n devices is the mean of x
    total = jax.lax.psum(block, "data")
    return jnp.mean(total) / jax.lax.psum(1, "data")


# built once, when this cell runs, on a mesh of all the devices
_MEAN = shard_map_fn()(_add_up, mesh=make_mesh(None, ("data",), "auto"), in_specs=P("data"), out_specs=P())


def global_mean(x, mesh):
    """Mean of all elements of `x`: per-device partial results combined by a collective in shard_map."""
    # TODO: the right number here; measure what crosses the mesh, and try a mesh in another order.
    return _MEAN(x)
''', "the devices' rows cross the mesh", "shard_map"),
        ('''
def global_mean(x, mesh):
    # the starting code on the mesh it is given: still the whole blocks added up across the devices
    def add_up(block):
        return jnp.mean(jax.lax.psum(block, "data")) / jax.lax.psum(1, "data")
    return shard_map_fn()(add_up, mesh=mesh, in_specs=P("data"), out_specs=P())(x)
''', "the devices' rows cross the mesh", "shard_map"),
        ('''
def global_mean(x, mesh):
    # the mean of the devices' blocks, element by element, then of that: blocks cross the mesh
    return shard_map_fn()(lambda b: jnp.mean(jax.lax.pmean(b, "data")), mesh=mesh,
                          in_specs=P("data"), out_specs=P())(x)
''', "the devices' rows cross the mesh", "shard_map"),
        ('''
def global_mean(x, mesh):
    # every device receives the whole of x (replicated) and reduces all of it
    def per_device(whole):
        return jax.lax.psum(jnp.sum(whole), "data") / (whole.size * jax.lax.psum(1, "data"))
    return shard_map_fn()(per_device, mesh=mesh, in_specs=P(), out_specs=P())(x)
''', "as many elements as the whole of x", "shard_map"),
        ('''
def _partial(block):
    return jax.lax.psum(jnp.sum(block), "data") / (block.size * jax.lax.psum(1, "data"))


# reduced first, but still built once, at import, on a mesh of all the devices in their usual order
_MEAN = shard_map_fn()(_partial, mesh=make_mesh(None, ("data",), "auto"), in_specs=P("data"), out_specs=P())


def global_mean(x, mesh):
    return _MEAN(x)
''', "the per-device code runs on that mesh", "shard_map"),
        ('''
def global_mean(x, mesh):
    # its own mesh of every device, in their usual order: not the mesh x is placed on
    from jax.sharding import Mesh
    own = Mesh(np.array(jax.devices()), ("data",), axis_types=(AxisType.Auto,))
    mean = lambda block: jax.lax.pmean(jnp.mean(block), "data")
    return shard_map_fn()(mean, mesh=own, in_specs=P("data"), out_specs=P())(x)
''', "the per-device code runs on that mesh", "shard_map"),
    ],
    "signature_key": [
        ('''
def signature_key(x):
    aval = jax.typeof(x)
    return (aval.shape, aval.dtype, aval.weak_type)  # forgets where a committed array lives
''', "the key is missing 1 of the things the compile signature holds", "sharding_signature"),
        ('''
def signature_key(x):
    aval = jax.typeof(x)
    return (aval.shape, aval.dtype, x.sharding if isinstance(x, jax.Array) else None)  # no weak type
''', "the key is missing 1 of the things the compile signature holds", "sharding_signature"),
        ('''
def signature_key(x):
    aval = jax.typeof(x)
    return (aval.shape, aval.weak_type, x.sharding if isinstance(x, jax.Array) else None)  # no dtype
''', "the key is missing 1 of the things the compile signature holds", "sharding_signature"),
        ('''
def signature_key(x):
    aval = jax.typeof(x)
    sharding = x.sharding if isinstance(x, jax.Array) else None
    return (aval.shape, aval.dtype, aval.weak_type, sharding, np.asarray(x).tobytes())  # the values too
''', "the key holds something jax.jit leaves out of the compile signature", "sharding_signature"),
        ('''
def signature_key(x):
    return jax.typeof(x).shape  # the shape alone: dtype, weak type and sharding forgotten
''', "the key is missing 3 of the things the compile signature holds", "sharding_signature"),
    ],
}

RIGHT = {
    "shard_rows": [
        '''
def shard_rows(x, mesh):
    rows = NamedSharding(mesh, P("data", None))
    return jax.make_array_from_callback(x.shape, rows, lambda index: x[index])  # each device's own rows
''',
        '''
def shard_rows(x, mesh):
    # the block by block assembly, each device's block cut by the index its sharding gives it
    rows = NamedSharding(mesh, P("data", None))
    blocks = [jax.device_put(x[index], d) for d, index in rows.addressable_devices_indices_map(x.shape).items()]
    return jax.make_array_from_single_device_arrays(x.shape, rows, blocks)
''',
    ],
    "global_mean": [
        '''
def global_mean(x, mesh):
    # a partial reduction: each device's column sums cross the mesh (a row of numbers, not its rows)
    def per_device(block):
        return jnp.sum(jax.lax.psum(jnp.sum(block, axis=0), "data")) / x.size
    return shard_map_fn()(per_device, mesh=mesh, in_specs=P("data"), out_specs=P())(x)
''',
        '''
def global_mean(x, mesh):
    # the mean of each block, averaged over the devices: right because every block has as many elements
    return shard_map_fn()(lambda b: jax.lax.pmean(jnp.mean(b), "data"), mesh=mesh,
                          in_specs=P("data"), out_specs=P())(x)
''',
        '''
def global_mean(x, mesh):
    # one psum of a (total, count) pair, in a jit inside: the mean is the ratio of two collectives
    @jax.jit
    def mean(x):
        def per_device(block):
            total, count = jax.lax.psum((jnp.sum(block), jnp.float32(block.size)), "data")
            return total / count
        return shard_map_fn()(per_device, mesh=mesh, in_specs=P("data"), out_specs=P())(x)
    return mean(x)
''',
    ],
}
