"""A requirement holds by its effect, not by the presence of a form.

A structural requirement of an exercise ("combines the shards with a collective") is met only
when, in the program the runner executes (the normalized module of
:class:`autograder.judge.Exported`):

- **it is on every path** (:func:`on_every_path`): an operation of the kind asked for runs
  whatever branch the program takes; one inside a ``lax.cond``/``lax.switch`` branch counts only
  when every branch of that conditional has one (a branch the judge's inputs never take is
  still a path some input takes);
- **the result depends on it** (:func:`depends_on`): the judge perturbs every such operation
  in the module it holds (:func:`perturbed`: each operand of the operation multiplied by
  :data:`FACTOR`, so a sum across devices becomes ``FACTOR`` times the sum, a gathered or
  permuted array ``FACTOR`` times the array) and runs both programs, on the same inputs, in the
  program runner: an unchanged result means the operation is a decoy (``0.0 * psum(...)``,
  ``jnp.mean(x) + 0 * shard_map(...)``) or code no input reaches;
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
FACTOR = -3.0  # exact in every float type; negative, so a result that only keeps a sign changes too
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


def perturbed(exported, names, factor: float = FACTOR):
    """``exported`` with every operation of ``names`` fed ``factor`` times its operands (see the
    module's docstring), or None where it has none that can be (an operand of a type that is not
    a ranked tensor of numbers)."""
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
                element = kind.element_type
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


def _bumped(op, ir, value):
    """``value`` (a loop's carried value, before ``op``) plus one, where it is a ranked tensor of
    numbers; else None."""
    try:
        kind = ir.RankedTensorType(value.type)
    except (ValueError, TypeError):
        return None
    element = kind.element_type
    with op.location:
        if mlir._is(element, ir.FloatType):
            one = ir.FloatAttr.get(element, 1.0)
        elif mlir._is(element, ir.IntegerType) and ir.IntegerType(element).width > 1:
            one = ir.IntegerAttr.get(element, 1)
        else:
            return None
    with ir.InsertionPoint(op), op.location:
        c = ir.Operation.create("stablehlo.constant", results=[kind],
                                attributes={"value": ir.DenseElementsAttr.get_splat(kind, one)})
        return ir.Operation.create("stablehlo.add", results=[kind], operands=[value, c.results[0]]).results[0]


def loops_bumped(exported):
    """``exported`` with every loop's body changed to add one to each value it carries on (a
    program that runs a loop's body at all computes something else), or None where it has no
    loop whose body can be."""
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir

    changed = 0
    with mlir._context():
        module = _module(exported)
        for loop in [o for o in mlir._walk(module.operation) if o.name == mlir.LOOP]:
            body = loop.regions[1].blocks[0]
            ret = list(body.operations)[-1].operation
            for i, v in enumerate(list(ret.operands)):
                new = _bumped(ret, ir, v)
                if new is not None:
                    ret.operands[i] = new
                    changed += 1
        if not changed:
            return None
        blob = jax_mlir.module_to_bytecode(module)
    return dataclasses.replace(exported, mlir_module_serialized=blob)


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


def counted(exported):
    """``(variant, n)``: ``exported`` with each of the ``n`` loops of its entry function's own
    block (not those nested in a branch or another loop) carrying one more value, a trip
    counter (``int32``, 0 before the loop, one more at the end of each trip), returned after
    the program's outputs: ``variant``'s outputs are ``(outputs, [trips, ...])``. ``(None, 0)``
    where it has no such loop. The module is rewritten with JAX's MLIR bindings: a new
    ``stablehlo.while`` per loop, the old regions' operations moved into it."""
    import numpy as np
    import jax
    from jax._src import core
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir

    with mlir._context():
        module = _module(exported)
        func = mlir._functions(module)[mlir._entry(module)]
        block = func.regions[0].blocks[0]
        loops = [op.operation for op in block.operations if op.operation.name == mlir.LOOP]
        if not loops:
            return None, 0
        i32 = ir.IntegerType.get_signless(32)
        scalar = ir.RankedTensorType.get([], i32, loc=ir.Location.unknown())

        def constant(value):
            return ir.Operation.create("stablehlo.constant", results=[scalar], attributes={
                "value": ir.DenseElementsAttr.get_splat(scalar, ir.IntegerAttr.get(i32, value))}).results[0]

        counters = []
        for old in loops:
            with ir.InsertionPoint(old), old.location:
                new = ir.Operation.create("stablehlo.while", results=[*[r.type for r in old.results], scalar],
                                          operands=[*old.operands, constant(0)], regions=2)
            for region_old, region_new in zip(old.regions, new.regions):
                before = region_old.blocks[0]
                after = ir.Block.create_at_start(region_new, [*[a.type for a in before.arguments], scalar],
                                                 [old.location] * (len(before.arguments) + 1))
                for a_old, a_new in zip(before.arguments, after.arguments):
                    a_old.replace_all_uses_with(a_new)
                for op in list(before.operations):
                    after.append(op.operation)
            body = new.regions[1].blocks[0]
            ret = list(body.operations)[-1].operation
            with ir.InsertionPoint(ret), old.location:
                trips = body.arguments[len(body.arguments) - 1]
                more = ir.Operation.create("stablehlo.add", results=[scalar], operands=[trips, constant(1)])
                ir.Operation.create(ret.name, operands=[*ret.operands, more.results[0]])
            ret.erase()
            for r_old, r_new in zip(old.results, list(new.results)[:-1]):
                r_old.replace_all_uses_with(r_new)
            old.erase()
            counters.append(list(new.results)[-1])
        ret = list(block.operations)[-1].operation
        with ir.InsertionPoint(ret), ret.location:
            ir.Operation.create(ret.name, operands=[*ret.operands, *counters])
        ret.erase()
        kind = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            list(kind.inputs), [*kind.results, *[scalar] * len(counters)]))
        if "res_attrs" in func.attributes:
            attrs = list(ir.ArrayAttr(func.attributes["res_attrs"]))
            func.attributes["res_attrs"] = ir.ArrayAttr.get([*attrs, *[ir.DictAttr.get({})] * len(counters)])
        if not module.operation.verify():
            return None, 0
        blob = jax_mlir.module_to_bytecode(module)
    n = len(counters)
    shaped = jax.tree_util.tree_unflatten(exported.out_tree, [0] * len(exported.out_avals))
    fields = {f.name for f in dataclasses.fields(exported)}
    extra = ({"_out_named_shardings": (*exported._out_named_shardings, *[None] * n)}
             if "_out_named_shardings" in fields else {})
    return dataclasses.replace(
        exported, mlir_module_serialized=blob, out_tree=jax.tree_util.tree_structure((shaped, [0] * n)),
        out_avals=(*exported.out_avals, *[core.ShapedArray((), np.dtype(np.int32))] * n),
        out_shardings_hlo=(*exported.out_shardings_hlo, *[None] * n), **extra), n


def trip_counts(program, args=(), kwargs=None, **run) -> list[int]:
    """The trips each loop of ``program``'s entry function (an :class:`autograder.judge.
    Exported`; loops nested in a branch or another loop are not counted) ran on ``args``,
    observed: the program run in the program runner with a trip counter added to each loop
    (:func:`counted`), whatever its condition is written as. Empty where it has no such loop."""
    import numpy as np

    from .kernel import Exported

    variant, n = counted(program.exported)
    if variant is None:
        return []
    out = Exported(variant, runner=program.runner, name=program.name).run(args, kwargs, **run)[0]
    return [int(np.asarray(t)) for t in out[1]]


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
