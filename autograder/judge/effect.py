"""A requirement holds by its effect, not by the presence of a form.

A structural requirement of an exercise ("combines the shards with a collective") is met only
when, in the program the runner executes (the normalized module of
:class:`autograder.judge.Exported`):

- **it is on every path** (:func:`on_every_path`): an operation of the kind asked for runs
  whatever branch the program takes; one inside a ``lax.cond``/``lax.switch`` branch counts only
  when every branch of that conditional has one (a branch the judge's inputs never take is
  still a path some input takes);
- **the result depends on it** (:func:`depends_on`): the judge perturbs every such operation
  in the module it holds (:func:`perturbed`: each operand of the operation multiplied by one
  of :data:`FACTORS`, a different one for each operand in turn, so a sum across devices becomes
  ``-3`` times the sum, a gathered or permuted array ``-3`` times the array, and a ratio of two
  sums, such as a mean from a summed total and a summed count, changes too) and runs both
  programs, on the same inputs, in the program runner: an unchanged result means the operation
  is a decoy (``0.0 * psum(...)``, ``jnp.mean(x) + 0 * shard_map(...)``) or code no input
  reaches;
- **data movement is counted in bytes** (:func:`collective_bytes`): the operands of the
  collectives, per device (their types inside a ``shard_map`` region are a device's shard), not
  the number of collective operations.

Everything is read and rewritten with JAX's own MLIR bindings (never printed text), in
:func:`autograder.judge.mlir`'s context.
"""
from __future__ import annotations

import dataclasses

from . import mlir

MAX_SIZE = 2**16  # integer constants above this are read as values, not as sizes (see largest_size)
# Exact in every float type (bfloat16 included) and in every integer type; negative, so a result
# that only keeps a sign changes too; pairwise different, so a ratio or a difference of two
# perturbed values is not the unperturbed one (each operand takes the next factor, in turn).
FACTORS = (-3.0, -5.0, -7.0, -11.0, -13.0)
CONDITIONAL = frozenset({"stablehlo.case", "stablehlo.if"})
_ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "i1": 1,
                  "ui64": 8, "ui32": 4, "ui16": 2, "ui8": 1, "complex<f32>": 8, "complex<f64>": 16}


def _module(exported):
    """The normalized module of ``exported`` (a ``jax.export.Exported``), parsed in the current
    context (the caller holds ``mlir._context()``)."""
    from jax._src.lib.mlir import ir

    module = ir.Module.parse(exported.mlir_module())
    mlir.normalize(module)
    return module


def _entry_block(module):
    return mlir._functions(module)[mlir._entry(module)].regions[0].blocks[0]


def _block_meets(block, names) -> bool:
    """Whether every path through ``block`` runs an operation named in ``names``."""
    for op in block.operations:
        op = op.operation
        if op.name in names:
            return True
        if op.name in CONDITIONAL:
            if op.regions and all(_block_meets(r.blocks[0], names) for r in op.regions if len(r.blocks)):
                return True
            continue
        if op.name == mlir.LOOP:  # a loop's body may run no time at all: only its condition always runs
            if op.regions and _block_meets(op.regions[0].blocks[0], names):
                return True
            continue
        for region in op.regions:  # a shard_map's region, a reduction's body: run where the op runs
            if len(region.blocks) and _block_meets(region.blocks[0], names):
                return True
    return False


def on_every_path(exported, names) -> bool:
    """Whether every path of ``exported``'s normalized program runs an operation of ``names``."""
    with mlir._context():
        module = _module(exported)  # held: its blocks live as long as it does
        return _block_meets(_entry_block(module), frozenset(names))


def perturbed(exported, names, factors=FACTORS):
    """``exported`` with every operation of ``names`` fed its operands multiplied by ``factors``,
    the next one for each operand in turn (see the module's docstring), or None where it has none
    that can be (an operand of a type that is not a ranked tensor of numbers)."""
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir

    changed = 0
    with mlir._context():
        module = _module(exported)
        for op in [o for o in mlir._walk(module.operation) if o.name in names]:
            for i, operand in enumerate(list(op.operands)):
                try:
                    kind = ir.RankedTensorType(operand.type)
                except (ValueError, TypeError):
                    continue
                element, factor = kind.element_type, factors[changed % len(factors)]
                with op.location:
                    if mlir._is(element, ir.FloatType):
                        value = ir.FloatAttr.get(element, factor)
                    elif mlir._is(element, ir.IntegerType) and ir.IntegerType(element).width > 1:
                        value = ir.IntegerAttr.get(element, int(factor))
                    else:
                        continue
                with ir.InsertionPoint(op), op.location:
                    scale = ir.Operation.create("stablehlo.constant", results=[kind], attributes={
                        "value": ir.DenseElementsAttr.get_splat(kind, value)})
                    product = ir.Operation.create("stablehlo.multiply", results=[kind],
                                                  operands=[operand, scale.results[0]])
                op.operands[i] = product.results[0]
                changed += 1
        if not changed:
            return None
        blob = jax_mlir.module_to_bytecode(module)
    return dataclasses.replace(exported, mlir_module_serialized=blob)


def depends_on(program, names, args=(), kwargs=None, **run) -> bool | None:
    """Whether the result of ``program`` (an :class:`autograder.judge.Exported`) on ``args``
    changes when its operations of ``names`` are perturbed (:func:`perturbed`); both are run in
    the program runner (``run``: :meth:`~autograder.judge.Exported.run`'s options). None where
    it has no such operation to perturb."""
    import numpy as np
    import jax

    from .kernel import Exported

    variant = perturbed(program.exported, names)
    if variant is None:
        return None
    other = Exported(variant, runner=program.runner, name=program.name)
    first = jax.tree_util.tree_leaves(program.run(args, kwargs, **run)[0])
    second = jax.tree_util.tree_leaves(other.run(args, kwargs, **run)[0])
    return any(not np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True) for a, b in zip(first, second))


def require(program, names, args=(), kwargs=None, *, what: str, idea: str, needs: str, **run) -> None:
    """Fail (``idea``, learner-facing) unless ``program`` meets the requirement ``needs`` (in
    words: "combine the shards with a collective") by its operations of ``names``, on every path
    and by its effect on the result for ``args`` (see the module's docstring)."""
    from ..feedback import fail

    names = frozenset(names)
    if not on_every_path(program.exported, names):
        fail(idea, f"the program of {what} does not {needs} on every path it can take: a branch "
                   "(`lax.cond`, `lax.switch`, `lax.platform_dependent`) computes the result without it, "
                   "so inputs that take that branch never use it.")
    if not depends_on(program, names, args, kwargs, **run):
        fail(idea, f"the result of {what} does not depend on the operations that {needs}: the grader changed "
                   "what they compute and the result stayed the same. They are a decoy (such as "
                   "`0.0 * psum(...)` added to a result computed without them), or no input reaches them.")


def _bytes(type_text: str) -> int | None:
    """Bytes of a ranked tensor type's text (``tensor<4x8xf32>``); None when not static."""
    body = type_text[len("tensor<"):-1].split(",")[0].strip() if type_text.startswith("tensor<") else ""
    if not body or "?" in body or "*" in body:
        return None
    parts = body.split("x")
    element = _ELEMENT_BYTES.get(parts[-1])
    if element is None:
        return None
    n = 1
    for d in parts[:-1]:
        n *= int(d)
    return n * element


def collective_bytes(program) -> int:
    """Bytes the collectives of ``program``'s normalized module take as operands, per device (a
    collective inside a ``shard_map`` region sees a device's shard), every path counted (a
    conditional's branches summed: an upper bound). A type that is not static counts as
    unbounded (``2**62``)."""
    total = 0
    for op in mlir.read(program).ops:
        if op.name in mlir.COLLECTIVES:
            for t in op.operands:
                b = _bytes(t)
                total += 2**62 if b is None else b
    return total


def _plus(op, ir, value, amount, *, integers):
    """``value`` (a loop's carried value, before ``op``) plus ``amount``, where it is a ranked
    tensor of floats (or, with ``integers``, of integers wider than a bit); else None."""
    try:
        kind = ir.RankedTensorType(value.type)
    except (ValueError, TypeError):
        return None
    element = kind.element_type
    with op.location:
        if mlir._is(element, ir.FloatType):
            step = ir.FloatAttr.get(element, float(amount))
        elif integers and mlir._is(element, ir.IntegerType) and ir.IntegerType(element).width > 1:
            step = ir.IntegerAttr.get(element, int(amount))
        else:
            return None
    with ir.InsertionPoint(op), op.location:
        c = ir.Operation.create("stablehlo.constant", results=[kind],
                                attributes={"value": ir.DenseElementsAttr.get_splat(kind, step)})
        return ir.Operation.create("stablehlo.add", results=[kind], operands=[value, c.results[0]]).results[0]


def _loops_rewritten(exported, loops, amount, *, integers, state_only):
    """``exported`` with the loops ``loops(module)`` returns each adding ``amount`` to the values
    its body carries on, at the end of every trip (``state_only``: not those carried through
    unchanged), or None where no value could be."""
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir

    changed = 0
    with mlir._context():
        module = _module(exported)
        for loop in loops(module):
            body = loop.regions[1].blocks[0]
            ret = list(body.operations)[-1].operation
            for i, v in enumerate(list(ret.operands)):
                if state_only and v == body.arguments[i]:
                    continue  # carried through unchanged: a value the loop reads (its data), not its state
                new = _plus(ret, ir, v, amount, integers=integers)
                if new is not None:
                    ret.operands[i] = new
                    changed += 1
        if not changed:
            return None
        blob = jax_mlir.module_to_bytecode(module)
    return dataclasses.replace(exported, mlir_module_serialized=blob)


def loops_bumped(exported):
    """``exported`` with every loop's body changed to add one to each value it carries on (a
    program that runs a loop's body at all computes something else), or None where it has no
    loop whose body can be."""
    return _loops_rewritten(exported, lambda m: [o for o in mlir._walk(m.operation) if o.name == mlir.LOOP],
                            1, integers=True, state_only=False)


def loops_nudged(exported, epsilon: float):
    """``exported`` with each loop of its entry function's own block (loops nested in a branch or
    another loop left as they are) adding ``epsilon`` to every float value its body changes (its
    state; a value carried through unchanged is data the loop reads), at the end of every trip;
    None where it has no such loop with a float value."""
    return _loops_rewritten(
        exported, lambda m: [o.operation for o in _entry_block(m).operations if o.operation.name == mlir.LOOP],
        epsilon, integers=False, state_only=True)


def nudges_kept(program, args=(), kwargs=None, *, epsilon: float, **run) -> float | None:
    """How many of the nudges :func:`loops_nudged` gives (``epsilon`` added to the float values a
    loop carries, at the end of every trip) ``program``'s result on ``args`` keeps: the largest
    change of a float output, in units of ``epsilon``. A loop that recomputes what it carries from
    the data on every trip (a Lloyd step: the centroids are the means of their points) keeps
    only the last trip's (about 1); one whose later trips do no work (the steps past a count
    masked out) carries the nudges on, one a trip. None where the program has no loop to nudge."""
    import numpy as np
    import jax

    from .kernel import Exported

    variant = loops_nudged(program.exported, epsilon)
    if variant is None:
        return None
    first = jax.tree_util.tree_leaves(program.run(args, kwargs, **run)[0])
    second = jax.tree_util.tree_leaves(Exported(variant, runner=program.runner, name=program.name).run(
        args, kwargs, **run)[0])
    kept = 0.0
    for a, b in zip(first, second):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind == "f" and a.shape == b.shape and a.size:
            diff = np.abs(b.astype(np.float64) - a.astype(np.float64))
            kept = max(kept, float(np.max(diff)) / epsilon if np.all(np.isfinite(diff)) else np.inf)
    return kept


def runs_a_loop(program, args=(), kwargs=None, *, timeout: float = 20.0, **run) -> bool:
    """Whether ``program`` (an :class:`autograder.judge.Exported`) runs the body of a loop on
    ``args``: its result changes (or it fails, or runs out of time) when every loop body is
    changed (:func:`loops_bumped`). The trip count observed, for an input that needs none,
    whatever the loop's condition is written as."""
    import numpy as np
    import jax

    from .kernel import Exported
    from .runner import ProgramFailure

    variant = loops_bumped(program.exported)
    if variant is None:
        return False
    first = jax.tree_util.tree_leaves(program.run(args, kwargs, **run)[0])
    try:
        second = jax.tree_util.tree_leaves(Exported(variant, runner=program.runner, name=program.name).run(
            args, kwargs, timeout=timeout, **run)[0])
    except ProgramFailure as exc:
        from .runner import RunnerFault
        from .starvation import Starved

        if isinstance(exc, (Starved, RunnerFault)):  # the machine's fault, not the program's
            raise
        return True
    return any(not np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True) for a, b in zip(first, second))


def _count_block(block, ir, constant, scalar) -> list:
    """Give every loop of ``block`` a trip counter (see :func:`counted`), and the loops nested in
    it theirs, and return the counters' values in ``block``, one a site in order: a loop's own
    trips, then the trips of each site nested in its body summed over its trips; a
    conditional's (``lax.cond``/``lax.switch``) trips of the loops in the branch it took, summed
    (0 where that branch has none). A loop's condition region is not entered."""
    counters = []
    for op in [o.operation for o in block.operations]:
        if op.name == mlir.LOOP:
            counters += _count_loop(op, ir, constant, scalar)
        elif op.name in CONDITIONAL and op.regions:
            counters += _count_branches(op, ir, constant, scalar)
    return counters


def _moved(old, new, extra, ir, scalar):
    """Move each region of ``old`` into the matching one of ``new``, its block given ``extra``
    more arguments of type ``scalar`` (returned, per region)."""
    added = []
    for region_old, region_new in zip(old.regions, new.regions):
        before = region_old.blocks[0]
        after = ir.Block.create_at_start(region_new, [*[a.type for a in before.arguments], *[scalar] * extra],
                                         [old.location] * (len(before.arguments) + extra))
        for a_old, a_new in zip(before.arguments, after.arguments):
            a_old.replace_all_uses_with(a_new)
        for o in list(before.operations):
            after.append(o.operation)
        added.append(list(after.arguments)[len(before.arguments):])
    return added


def _returned(block, ir, more):
    """Replace ``block``'s terminator by one of the same kind that returns ``more`` besides."""
    ret = list(block.operations)[-1].operation
    with ir.InsertionPoint(ret), ret.location:
        values = more(ret)
        ir.Operation.create(ret.name, operands=[*ret.operands, *values])
    ret.erase()


def _replaced(old, new, n):
    for r_old, r_new in zip(old.results, list(new.results)[:n]):
        r_old.replace_all_uses_with(r_new)
    old.erase()
    return list(new.results)[n:]


def _count_loop(old, ir, constant, scalar) -> list:
    inner = _count_block(old.regions[1].blocks[0], ir, constant, scalar)  # nested sites, per trip
    extra = 1 + len(inner)
    with ir.InsertionPoint(old), old.location:
        zeros = [constant(0) for _ in range(extra)]
        new = ir.Operation.create("stablehlo.while", results=[*[r.type for r in old.results], *[scalar] * extra],
                                  operands=[*old.operands, *zeros], regions=2)
    _, carried = _moved(old, new, extra, ir, scalar)

    def more(ret):
        trips = ir.Operation.create("stablehlo.add", results=[scalar], operands=[carried[0], constant(1)])
        sums = [ir.Operation.create("stablehlo.add", results=[scalar], operands=[total, value]).results[0]
                for total, value in zip(carried[1:], inner)]
        return [trips.results[0], *sums]

    _returned(new.regions[1].blocks[0], ir, more)
    return _replaced(old, new, len(old.results))


def _count_branches(old, ir, constant, scalar) -> list:
    sites = [_count_block(r.blocks[0], ir, constant, scalar) if len(r.blocks) else [] for r in old.regions]
    if not any(sites):
        return []
    with ir.InsertionPoint(old), old.location:
        new = ir.Operation.create(old.name, results=[*[r.type for r in old.results], scalar],
                                  operands=list(old.operands), regions=len(old.regions))
    for attr in old.attributes:
        new.attributes[attr.name] = attr.attr
    _moved(old, new, 0, ir, scalar)
    for region, values in zip(new.regions, sites):
        def more(ret, values=values):
            total = constant(0)
            for v in values:
                total = ir.Operation.create("stablehlo.add", results=[scalar], operands=[total, v]).results[0]
            return [total]

        _returned(region.blocks[0], ir, more)
    return _replaced(old, new, len(old.results))


def _extended(exported, module, func, ir, values):
    """``exported`` whose entry function ``func`` (in ``module``, rewritten in place) also returns
    ``values`` (integer values of its own block) after its outputs: the variant's outputs are
    ``(outputs, [value, ...])``; None where the rewritten module does not verify. The caller holds
    ``mlir._context()``."""
    import numpy as np
    import jax
    from jax._src import core
    from jax._src.interpreters import mlir as jax_mlir

    types = [ir.RankedTensorType(v.type) for v in values]
    _returned(func.regions[0].blocks[0], ir, lambda ret: values)
    kind = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(list(kind.inputs), [*kind.results, *types]))
    if "res_attrs" in func.attributes:
        attrs = list(ir.ArrayAttr(func.attributes["res_attrs"]))
        func.attributes["res_attrs"] = ir.ArrayAttr.get([*attrs, *[ir.DictAttr.get({})] * len(values)])
    if not module.operation.verify():
        return None
    blob = jax_mlir.module_to_bytecode(module)
    avals = [core.ShapedArray(tuple(t.shape), np.dtype(f"int{ir.IntegerType(t.element_type).width}")) for t in types]
    n = len(values)
    shaped = jax.tree_util.tree_unflatten(exported.out_tree, [0] * len(exported.out_avals))
    fields = {f.name for f in dataclasses.fields(exported)}
    extra = ({"_out_named_shardings": (*exported._out_named_shardings, *[None] * n)}
             if "_out_named_shardings" in fields else {})
    return dataclasses.replace(
        exported, mlir_module_serialized=blob, out_tree=jax.tree_util.tree_structure((shaped, [0] * n)),
        out_avals=(*exported.out_avals, *avals), out_shardings_hlo=(*exported.out_shardings_hlo, *[None] * n),
        **extra)


def counted(exported):
    """``(variant, n)``: ``exported`` with a trip counter (``int32``, 0 before the loop, one more
    at the end of each trip) on each of its loops, wherever they sit: the ``n`` counters of the
    entry function's own sites are returned after the program's outputs (``variant``'s outputs
    are ``(outputs, [trips, ...])``): a loop of the entry function gives its trips, then those of
    the sites in its body, summed over its trips (a nested loop's trips in all); a conditional
    (``lax.cond``/``lax.switch``) with loops in a branch gives the trips of the loops in the
    branch it took (0 where that branch has none). ``(None, 0)`` where it has no loop outside a
    loop's condition. The module is rewritten with JAX's MLIR bindings: a new
    ``stablehlo.while`` per loop carrying the counters, a new conditional returning them, the
    old regions' operations moved into them."""
    from jax._src.lib.mlir import ir

    with mlir._context():
        module = _module(exported)
        func = mlir._functions(module)[mlir._entry(module)]
        i32 = ir.IntegerType.get_signless(32)
        scalar = ir.RankedTensorType.get([], i32, loc=ir.Location.unknown())

        def constant(value):
            return ir.Operation.create("stablehlo.constant", results=[scalar], attributes={
                "value": ir.DenseElementsAttr.get_splat(scalar, ir.IntegerAttr.get(i32, value))}).results[0]

        counters = _count_block(func.regions[0].blocks[0], ir, constant, scalar)
        if not counters:
            return None, 0
        variant = _extended(exported, module, func, ir, counters)
    return (variant, len(counters)) if variant is not None else (None, 0)


def trip_counts(program, args=(), kwargs=None, **run) -> list[int]:
    """The trips ``program``'s loops (an :class:`autograder.judge.Exported`) ran on ``args``,
    one count a site of its entry function (:func:`counted`: a loop's own trips, then the loops
    nested in its body summed; a conditional's, the trips of the loops in the branch it took),
    observed: the program run in the program runner with a trip counter added to each loop,
    whatever its condition is written as. Empty where it has no loop to count."""
    import numpy as np

    from .kernel import Exported

    variant, n = counted(program.exported)
    if variant is None:
        return []
    out = Exported(variant, runner=program.runner, name=program.name).run(args, kwargs, **run)[0]
    return [int(np.asarray(t)) for t in out[1]]


INDEXED = ("stablehlo.scatter", "stablehlo.gather")


def _promised_indices(exported):
    """``(variant, promises)``: ``exported`` returning, after its outputs, the index operand of
    each scatter and gather of its entry function's own block that promises the compiler sorted
    (``indices_are_sorted``) or unique (``unique_indices``) indices, and one
    ``(operation, sorted, unique, index_vector_dim)`` for each; ``(None, [])`` where none does."""
    import re

    from jax._src.lib.mlir import ir

    with mlir._context():
        module = _module(exported)
        func = mlir._functions(module)[mlir._entry(module)]
        found = []
        for op in [o.operation for o in func.regions[0].blocks[0].operations]:
            if op.name not in INDEXED:
                continue
            named = {n: op.attributes[n] for n in ("indices_are_sorted", "unique_indices", "scatter_dimension_numbers",
                                                   "dimension_numbers") if n in op.attributes}
            flags = [n in named and ir.BoolAttr(named[n]).value for n in ("indices_are_sorted", "unique_indices")]
            if not any(flags):
                continue
            numbers = named.get("scatter_dimension_numbers" if op.name == INDEXED[0] else "dimension_numbers")
            dim = re.search(r"index_vector_dim = (\d+)", str(numbers))
            index = op.operands[(len(op.operands) - 1) // 2] if op.name == INDEXED[0] else op.operands[1]
            found.append(((op.name.split(".")[1], *flags, int(dim.group(1)) if dim else None), index))
        if not found:
            return None, []
        variant = _extended(exported, module, func, ir, [v for _, v in found])
    return (variant, [p for p, _ in found]) if variant is not None else (None, [])


def index_promises(program, args=(), kwargs=None, **run) -> list:
    """What ``program`` (an :class:`autograder.judge.Exported`) promises the compiler about the
    indices of its scatters and gathers (those of its entry function's own block), with the
    indices each one got on ``args``, observed: ``[(operation, promised_sorted, promised_unique,
    rows), ...]``, ``rows`` a list of index tuples in the operation's order. A promise is for XLA
    to use (GPU and TPU scatters do, CPU's does not), so only the indices an operation gets at run
    time say whether it holds. Empty where nothing is promised."""
    import numpy as np

    from .kernel import Exported

    variant, promises = _promised_indices(program.exported)
    if variant is None:
        return []
    out = Exported(variant, runner=program.runner, name=program.name).run(args, kwargs, **run)[0]
    found = []
    for (op, promised_sorted, promised_unique, dim), index in zip(promises, out[1]):
        index = np.asarray(index)
        rows = np.moveaxis(index, dim, -1) if dim is not None and dim < index.ndim else index[..., None]
        found.append((op, promised_sorted, promised_unique, [tuple(r) for r in rows.reshape(-1, rows.shape[-1]).tolist()]))
    return found


def largest_size(program) -> int:
    """The largest size written in ``program``'s normalized module (``program``: a judge's
    :class:`~autograder.judge.Exported`, a :class:`~autograder.judge.programs.Traced` or a
    ``jax.export.Exported``): every dimension of every operand and result type, and every integer
    constant up to :data:`MAX_SIZE` (a bound, a padded length). A length beyond it is beyond
    anything the program was written or padded for."""
    import re

    from jax._src.lib.mlir import ir

    target = program
    while not hasattr(target, "structure") and not hasattr(target, "mlir_module") and hasattr(target, "exported"):
        target = target.exported  # a Traced: the judge's Exported
    runnable = target.exported if hasattr(target, "structure") else target
    largest = 0
    for op in mlir.read(target).ops:
        for t in (*op.operands, *op.results):
            for d in re.findall(r"(\d+)x", t):
                largest = max(largest, int(d))
    with mlir._context():
        module = _module(runnable)
        for op in mlir._walk(module.operation):
            if op.name != "stablehlo.constant":
                continue
            try:
                attr = ir.DenseIntElementsAttr(op.attributes["value"])
            except (ValueError, TypeError, KeyError):
                continue
            for i in range(min(len(attr), 4096)):
                try:
                    value = abs(int(attr[i]))
                except (OverflowError, ValueError, TypeError):
                    continue
                if value <= MAX_SIZE:  # larger: an integer's range (argmax's start), not a length
                    largest = max(largest, value)
    return largest


def grows(small: int, large: int) -> bool:
    """Whether a program of ``large`` operations at a larger size (a length, a number of steps)
    grew from ``small`` at a smaller one by more than one loop's program can: a loop unrolled
    while tracing grows by a copy of its body per step, while one loop in the program differs at
    most by a few operations (a bound or a clamp folded at one length and not another: a
    ``fori_loop`` writing into a buffer is 59 operations at 3 steps and 60 at 24)."""
    return large > small + max(3, small // 10)


def past_operations(programs, published, rng) -> int:
    """A size beyond every ``published`` one and beyond the number of operations of any of
    ``programs`` (the learner's programs at the published sizes): a loop unrolled over any count
    has at least one operation per step, so a program unrolled over a count it pads to (below
    its number of operations) grows, or fails, at this size. Cheap to trace before
    :func:`beyond`'s size (often far larger: a PRNG writes constants up to 2**16), so that such
    a program is told so before it is traced there."""
    return 2 * max(*(p.total for p in programs), *published) + int(rng.integers(1, 9))


def beyond(programs, published, rng) -> tuple[int, int]:
    """``(far, written)``: ``written``, the largest size written in any of ``programs`` (the
    learner's programs at the ``published`` sizes: :func:`largest_size`), and ``far``, a size
    beyond it and every published one (twice the largest, plus a few drawn from ``rng``), where
    a loop unrolled over an input padded to a fixed size fails or grows."""
    written = max(largest_size(p) for p in programs)
    return 2 * max(written, *published) + int(rng.integers(1, 9)), written


def not_unrolled(trace, counts, published, rng, *, name: str, unit: str, copy: str, advice: str,
                 idea: str) -> tuple[int, int, int]:
    """Judge a program over a batch (rows, images) by its size, before any is run: ``trace(count)``
    (the learner's program at ``count`` items, a :class:`~autograder.judge.programs.Traced`) at
    the two ``counts`` must not grow (:func:`grows`: a Python loop over the items is unrolled into
    it, ``copy``, so a batch of hundreds takes minutes to compile); then at a count beyond every
    ``published`` one and those programs' operations (:func:`past_operations`: a loop unrolled
    over items padded to a fixed count has at least one operation per item, so it grows or fails
    there) it must be traced and not grow either. Fails (``idea``; learner-facing, naming
    ``name`` and the ``unit``, ``advice`` the last sentence of a growth's message) otherwise.
    Returns ``(far, written, small)``: :func:`beyond`'s far count and the largest size written in
    the programs at ``counts``, and the operations at the first count."""
    from ..feedback import ExerciseFailure, fail

    first, second = counts
    traced = {c: trace(c) for c in counts}
    sizes = {c: p.total for c, p in traced.items()}
    if grows(sizes[first], sizes[second]):
        fail(idea, f"the program of {name} grows with the number of {unit} ({sizes[first]} operations at "
                   f"{first} {unit}, {sizes[second]} at {second}): a Python loop over the {unit} is unrolled into "
                   f"it, {copy}, so a batch of a few hundred {unit} takes minutes to compile. {advice}")
    many = past_operations(traced.values(), published, rng)
    try:
        grown = trace(many).total
    except ExerciseFailure as exc:
        fail(idea, f"jax.jit({name}) cannot be traced at {many} {unit}, beyond every number of {unit} it was "
                   f"tried at and the {max(sizes.values())} operations of its program: it is written for the "
                   f"batch sizes it was tried at (a loop unrolled over {unit} padded to a fixed count?): "
                   f"{exc.detail}")
    if grows(sizes[first], grown):
        fail(idea, f"the program of {name} grows with the number of {unit} ({sizes[first]} operations at "
                   f"{first} {unit}, {grown} at {many}, beyond every number of {unit} it was tried at): a loop "
                   f"over the {unit}, padded to a fixed count, is unrolled into it, {copy}.")
    return (*beyond(traced.values(), published, rng), sizes[first])
