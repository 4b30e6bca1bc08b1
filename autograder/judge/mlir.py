"""Exported programs read as parsed modules, never as printed text.

A learner's program (``jax.export``'s StableHLO) is parsed with JAX's own MLIR bindings, in a
context where the dialects an export uses are registered (StableHLO, CHLO, Shardy, func), and
walked by operation names and regions. What the printed text holds besides operations (source
locations, ``jax.named_scope`` strings, function and argument names) is never read: a
function under ``jax.named_scope("stablehlo.all_reduce")``, one named ``"f{ }"`` or wrapped in
``jax.named_call`` has exactly the facts of the plain one.

Facts are read from the program the runner executes (:func:`normalize`, :func:`executable`):
every ``stablehlo.composite`` replaced by its decomposition and every ``func.call`` by its
callee's body, constants folded (a ``cond`` branch no input can take is gone), dead code and
unused functions removed; a program that still refers to a function after that is refused.

Facts (:class:`Program`):

- ``op_counts``: every operation reachable from the entry function, nested regions included
  and every ``func.call`` counted as the body of the function it calls (so a helper called
  three times counts three times, and wrapping code in ``jax.named_call`` changes nothing);
  the call plumbing itself (``func.call``, ``func.return``) is not counted.
- ``has_loops`` (a ``stablehlo.while``), ``fixed_loops`` (how many of those run a number of
  times no input changes: :func:`fixed_trip_count`), ``collectives``, ``custom_call_targets``,
  ``callbacks`` (custom calls into host Python), ``manual`` (a ``shard_map`` region:
  ``sdy.manual_computation``, or GSPMD's ``SPMDFullToShardShape``).
- ``top_level``: the entry function's own operations as written, in order, before
  inlining (a call there is one :class:`Op` named ``func.call``, its callee's facts in
  ``callee``): how the learner's Python dispatches, not what runs; ``calls()`` numbers the
  functions those calls call (one per trace of a jitted function).
- ``ops``: every operation of every reachable function once, with operand and result types
  (for an allow-list and shape checks).

Works on JAX 0.7.2 (Colab) and 0.12.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

LOOP = "stablehlo.while"
COLLECTIVES = frozenset({
    "stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter", "stablehlo.all_to_all",
    "stablehlo.collective_permute", "stablehlo.collective_broadcast",
})
CUSTOM_CALL = "stablehlo.custom_call"
CALL = "func.call"
# Structure, not computation: not counted as operations.
_PLUMBING = frozenset({"func.call", "func.return", "func.func", "builtin.module", "sdy.mesh"})
# custom_call targets that call back into host Python (jax.pure_callback, io_callback,
# jax.debug.print/callback) on any platform.
CALLBACK = re.compile(r"callback|python|host", re.IGNORECASE)
_MANUAL_OPS = frozenset({"sdy.manual_computation"})
_MANUAL_TARGETS = frozenset({"SPMDFullToShardShape"})
MAX_OPS = 1_000_000  # operations parsed per module; more is refused


class ProgramError(Exception):
    """The program cannot be read (unparsable, no entry function, a call to a function that is
    not in the module, recursion, too big). ``str(err)`` is learner-facing."""


@dataclass(frozen=True)
class Op:
    """One operation: its name, its ``custom_call`` target (else ``""``), its operand and
    result types (MLIR's spelling, such as ``tensor<3x4xf32>``), and for a ``func.call`` the
    facts of the function it calls."""

    name: str
    target: str = ""
    operands: tuple = ()
    results: tuple = ()
    callee: "Facts | None" = field(default=None, compare=False, repr=False)


@dataclass
class Facts:
    """What a function computes, its calls followed (see the module's docstring)."""

    op_counts: Counter
    custom_call_targets: frozenset

    @property
    def total(self) -> int:
        return sum(self.op_counts.values())

    @property
    def has_loops(self) -> bool:
        return self.op_counts.get(LOOP, 0) > 0

    @property
    def collectives(self) -> dict:
        return {n: c for n, c in sorted(self.op_counts.items()) if n in COLLECTIVES}

    @property
    def callbacks(self) -> list:
        return sorted(t for t in self.custom_call_targets if CALLBACK.search(t))

    @property
    def manual(self) -> bool:
        return (any(self.op_counts.get(n, 0) for n in _MANUAL_OPS)
                or bool(self.custom_call_targets & _MANUAL_TARGETS))


class Program(Facts):
    """An exported program's facts (see the module's docstring), built by :func:`read`."""

    def __init__(self, facts: Facts, top_level: list, ops: list):
        super().__init__(facts.op_counts, facts.custom_call_targets)
        self.top_level = top_level
        self.ops = ops
        self.fixed_loops = 0  # set by _parse: the loops whose trip count no input changes

    def count(self, *names: str) -> int:
        """How many operations named any of ``names`` (such as ``"stablehlo.case"``)."""
        return sum(self.op_counts.get(n, 0) for n in names)

    def calls(self) -> list:
        """The entry function's calls as written (:attr:`top_level`), in order: for each, the
        number of the function it calls, numbered by first call (``[0, 0, 1, 1]``: two
        functions, each called twice). A jitted function called from traced Python is one
        function per trace: calls that share a number reused one trace."""
        functions: list = []
        numbers = []
        for op in self.top_level:
            if op.name != CALL:
                continue
            i = next((j for j, f in enumerate(functions) if f is op.callee), None)
            if i is None:
                functions.append(op.callee)
                i = len(functions) - 1
            numbers.append(i)
        return numbers

    def __repr__(self):
        return (f"<Program {self.total} ops, loops={self.has_loops}, collectives={self.collectives}, "
                f"targets={sorted(self.custom_call_targets)}>")


def read(program) -> Program:
    """The :class:`Program` of ``program``: a ``jax.export.Exported``, the judge's
    :class:`autograder.judge.Exported` (its :attr:`~autograder.judge.Exported.structure`, read
    once), anything else holding one as ``exported``, or StableHLO text."""
    if isinstance(program, Program):
        return program
    structure = getattr(program, "structure", None)
    if isinstance(structure, Program):
        return structure
    exp = getattr(program, "exported", program)
    if isinstance(exp, str):
        return _parse(exp)
    try:
        text = exp.mlir_module()
    except Exception as exc:  # noqa: BLE001 - a forged or broken module
        raise ProgramError(f"The exported program cannot be read ({type(exc).__name__}).") from None
    return _parse(text)


def _context():
    from jax._src.interpreters import mlir

    return mlir.make_ir_context()


def _str_attr(op, name: str) -> str:
    try:
        attr = op.attributes[name]
    except (KeyError, IndexError, ValueError):
        return ""
    value = getattr(attr, "value", None)
    if isinstance(value, str):
        return value
    text = str(attr)  # a FlatSymbolRefAttr prints as @name
    return text[1:].strip('"') if text.startswith("@") else text.strip('"')


# What the runner's compiler would do first, done here so that the facts are the executed
# program's: calls inlined, constants folded (a branch no input can take is dropped), common
# subexpressions merged, dead code and unused functions removed.
# (MLIR's inline pass is a no-op in jaxlib's context, which registers no inliner for func:
# :func:`_inline_calls` does that part.)
PIPELINE = "builtin.module(canonicalize,cse,symbol-dce)"


def _parse(text: str) -> Program:
    from jax._src.lib.mlir import ir

    if not isinstance(text, str):
        raise ProgramError("The exported program is not StableHLO text.")
    with _context():
        try:
            module = ir.Module.parse(text)
        except Exception as exc:  # noqa: BLE001 - MLIR's error type differs across versions
            raise ProgramError(f"The exported program cannot be parsed ({type(exc).__name__}).") from None
        # the entry function as written (its calls kept: one per jitted function called from Python)
        top = _Walker(_functions(module)).program(_entry(module)).top_level
        normalize(module)
        program = _Walker(_functions(module)).program(_entry(module))
        program.top_level = top
        program.fixed_loops = sum(1 for op in _walk(module.operation) if op.name == LOOP and fixed_trip_count(op))
        return program


_CONSTANT = "stablehlo.constant"
_STEPS = frozenset({"stablehlo.add", "stablehlo.subtract"})


def _defining_op(value):
    from jax._src.lib.mlir import ir

    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner


def _constant(value) -> bool:
    op = _defining_op(value)
    return op is not None and op.name == _CONSTANT


def fixed_trip_count(loop) -> bool:
    """Whether the ``stablehlo.while`` ``loop`` (of a normalized module) runs a number of times
    that no input changes: its condition reads only constants and loop values that start as
    constants and that each step keeps or moves by a constant (the counter of a ``lax.fori_loop``
    or ``lax.scan`` with fixed bounds, whatever flag its body carries). False whenever in doubt (an
    operation with regions in the condition, a value from outside it that is not a constant)."""
    from jax._src.lib.mlir import ir

    try:
        cond, body = loop.regions[0].blocks[0], loop.regions[1].blocks[0]
        returned = list(body.operations)[-1].operands
        counters = set()
        for i, start in enumerate(loop.operands):
            arg, new, step = body.arguments[i], returned[i], _defining_op(returned[i])
            moved = (step is not None and step.name in _STEPS and len(step.operands) == 2
                     and any(v == arg for v in step.operands) and any(_constant(v) for v in step.operands))
            if _constant(start) and (new == arg or moved):
                counters.add(i)
        pending, visited = [list(cond.operations)[-1].operands[0]], 0
        while pending:
            visited += 1
            if visited > MAX_OPS:
                return False
            value = pending.pop()
            if isinstance(value.owner, ir.Block):
                if value.owner != cond or ir.BlockArgument(value).arg_number not in counters:
                    return False
                continue
            op = value.owner
            if op.name == _CONSTANT:
                continue
            if len(op.regions):
                return False
            pending.extend(op.operands)
        return True
    except Exception:  # noqa: BLE001 - an MLIR binding that differs across versions: in doubt, not fixed
        return False


def _functions(module) -> dict:
    return {_str_attr(op.operation, "sym_name"): op.operation
            for op in module.body.operations if op.operation.name == "func.func"}


def _entry(module) -> str:
    funcs = _functions(module)
    public = [n for n, o in funcs.items() if _str_attr(o, "sym_visibility") in ("", "public")]
    entry = "main" if "main" in funcs else (public[0] if len(public) == 1 else None)
    if entry is None:
        raise ProgramError("The exported program has no entry function.")
    return entry


def _walk(op):
    """``op`` and every operation nested in its regions."""
    yield op
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield from _walk(inner.operation)


def normalize(module) -> None:
    """Make ``module`` (parsed, in its context) the program the runner executes, in place: every
    ``stablehlo.composite`` replaced by a call of its decomposition (what XLA runs of it), then
    :data:`PIPELINE`. What is left must be one function of operations the checker reads: a
    call, a composite, another function or any other reference to a symbol is refused
    (:class:`ProgramError`)."""
    from jax._src.lib.mlir import ir, passmanager

    composites = [op for op in _walk(module.operation) if op.name == "stablehlo.composite"]
    if len(composites) > MAX_OPS:
        raise ProgramError(f"The exported program has more than {MAX_OPS} operations.")
    for op in composites:
        callee = _str_attr(op, "decomposition")
        if not callee:
            raise ProgramError("The exported program has a composite without its decomposition.")
        with ir.InsertionPoint(op), op.location:
            call = ir.Operation.create("func.call", results=[r.type for r in op.results],
                                       operands=list(op.operands),
                                       attributes={"callee": ir.FlatSymbolRefAttr.get(callee)})
        for old, new in zip(op.results, call.results):
            old.replace_all_uses_with(new)
        op.erase()
    _inline_calls(module)
    try:
        passmanager.PassManager.parse(PIPELINE).run(module.operation)
    except Exception as exc:  # noqa: BLE001 - MLIR's error type differs across versions
        raise ProgramError(f"The exported program cannot be compiled ({type(exc).__name__}).") from None
    entry = _entry(module)
    extra = sorted(n for n in _functions(module) if n != entry)
    if extra:
        raise ProgramError("The exported program keeps functions the grader does not follow (a recursive call, "
                           "or one reached other than by a call).")
    for op in _walk(module.operation):
        if op.name in (CALL, "stablehlo.composite") or any(_refers(a) for a in _attrs(op.attributes)):
            raise ProgramError(f"The exported program's {op.name} refers to a function the grader does not "
                               "follow.")


def _inline_calls(module) -> None:
    """Replace every ``func.call`` reachable from the entry function by a copy of its callee's
    body, until none is left (a recursive call is refused: it never ends)."""
    from jax._src.lib.mlir import ir

    funcs = _functions(module)
    entry = funcs[_entry(module)]
    copied = 0
    while True:
        call = next((op for op in _walk(entry) if op.name == CALL), None)
        if call is None:
            return
        callee = funcs.get(_str_attr(call, "callee"))
        if callee is None or not callee.regions or len(callee.regions[0].blocks) != 1:
            raise ProgramError("The exported program calls a function that is not in it.")
        block = callee.regions[0].blocks[0]
        mapping = dict(zip(block.arguments, call.operands))
        returned = None
        for inner in block.operations:
            inner = inner.operation
            if inner.name == "func.return":
                returned = [mapping.get(v, v) for v in inner.operands]
                break
            copied += 1
            if copied > MAX_OPS:
                raise ProgramError("The exported program calls its own functions recursively, or has more "
                                   f"than {MAX_OPS} operations once its calls are inlined.")
            clone = inner.clone(ip=ir.InsertionPoint(call))
            for op in _walk(clone):
                for i, v in enumerate(op.operands):
                    if v in mapping:
                        op.operands[i] = mapping[v]
            mapping.update(zip(inner.results, clone.results))
        if returned is None or len(returned) != len(call.results):
            raise ProgramError("The exported program calls a function that returns no value.")
        for old, new in zip(call.results, returned):
            old.replace_all_uses_with(new)
        call.erase()


def _refers(attr) -> bool:
    """Whether an attribute is, or holds, a reference to a symbol (a function)."""
    from jax._src.lib.mlir import ir

    if _is(attr, ir.FlatSymbolRefAttr) or _is(attr, ir.SymbolRefAttr):
        return True
    if _is(attr, ir.ArrayAttr):
        return any(_refers(a) for a in ir.ArrayAttr(attr))
    if _is(attr, ir.DictAttr):
        return any(_refers(a) for a in _attrs(ir.DictAttr(attr)))
    return False


def _is(attr, cls) -> bool:
    """``isinstance`` for an MLIR attribute (newer bindings downcast, older ones ask the class)."""
    check = getattr(cls, "isinstance", None)
    return isinstance(attr, cls) or (check is not None and check(attr))


def _attrs(named) -> list:
    """The attributes of an operation's attribute list or of a dictionary attribute."""
    return [named[i].attr for i in range(len(named))]


def executable(exported):
    """``exported`` (a ``jax.export.Exported``) with its module replaced by the normalized one
    (:func:`normalize`): the module whose facts :func:`read` gives is the one the runner
    compiles and runs. The same object where the module cannot be written back (an older JAX)."""
    import dataclasses

    from jax._src.export import _export

    try:
        with _context():
            from jax._src.lib.mlir import ir

            module = ir.Module.parse(exported.mlir_module())
            normalize(module)
            serialized = _export._module_to_bytecode(module)
    except ProgramError:
        raise
    except Exception:  # noqa: BLE001 - read() refuses what cannot be read, with its reason
        return exported
    return dataclasses.replace(exported, mlir_module_serialized=serialized)


class _Walker:
    def __init__(self, funcs):
        self.funcs = funcs
        self.facts: dict = {}
        self.ops: list = []
        self.active: set = set()
        self.parsed = 0

    def program(self, entry) -> Program:
        facts, top = self.function(entry)
        return Program(facts, top, self.ops)

    def function(self, name):
        if name in self.active:
            raise ProgramError("The exported program calls its own functions recursively.")
        if name not in self.funcs:
            raise ProgramError("The exported program calls a function that is not in it.")
        self.active.add(name)
        counts, targets, top = Counter(), set(), []
        for region in self.funcs[name].regions:
            for block in region.blocks:
                for op in block.operations:
                    top.append(self.op(op.operation, counts, targets))
        self.active.discard(name)
        facts = Facts(counts, frozenset(targets))
        self.facts[name] = (facts, top)
        return facts, top

    def op(self, o, counts, targets) -> Op:
        self.parsed += 1
        if self.parsed > MAX_OPS:
            raise ProgramError(f"The exported program has more than {MAX_OPS} operations.")
        name = o.name
        callee = None
        target = _str_attr(o, "call_target_name") if name == CUSTOM_CALL else ""
        if name == CALL:
            fname = _str_attr(o, "callee")
            callee = (self.facts.get(fname) or self.function(fname))[0]
            counts.update(callee.op_counts)
            targets |= callee.custom_call_targets
        elif name not in _PLUMBING:
            counts[name] += 1
        if target:
            targets.add(target)
        rec = Op(name, target, tuple(str(v.type) for v in o.operands), tuple(str(r.type) for r in o.results),
                 callee)
        self.ops.append(rec)
        for region in o.regions:
            for block in region.blocks:
                for inner in block.operations:
                    self.op(inner.operation, counts, targets)
        return rec
