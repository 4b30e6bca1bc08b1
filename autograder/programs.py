"""Exported programs read as parsed modules, never as printed text.

A learner's program (``jax.export``'s StableHLO) is parsed with JAX's own MLIR bindings, in a
context where the dialects an export uses are registered (StableHLO, CHLO, Shardy, func), and
walked by operation names and regions. What the printed text holds besides operations (source
locations, ``jax.named_scope`` strings, function and argument names) is never read: a
function under ``jax.named_scope("stablehlo.all_reduce")``, one named ``"f{ }"`` or wrapped in
``jax.named_call`` has exactly the facts of the plain one.

Facts (:class:`Program`):

- ``op_counts``: every operation reachable from the entry function, nested regions included
  and every ``func.call`` counted as the body of the function it calls (so a helper called
  three times counts three times, and wrapping code in ``jax.named_call`` changes nothing);
  the call plumbing itself (``func.call``, ``func.return``) is not counted.
- ``has_loops`` (a ``stablehlo.while``), ``collectives``, ``custom_call_targets``,
  ``callbacks`` (custom calls into host Python), ``manual`` (a ``shard_map`` region:
  ``sdy.manual_computation``, or GSPMD's ``SPMDFullToShardShape``).
- ``top_level``: the entry function's own operations, in order (a call there is one
  :class:`Op` named ``func.call``, its callee's facts in ``callee``).
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
_CALLBACK = re.compile(r"callback|python|host", re.IGNORECASE)
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
        return sorted(t for t in self.custom_call_targets if _CALLBACK.search(t))

    @property
    def manual(self) -> bool:
        return (any(self.op_counts.get(n, 0) for n in _MANUAL_OPS)
                or bool(self.custom_call_targets & _MANUAL_TARGETS))


class Program(Facts):
    """An exported program's facts (see the module's docstring). Build it with
    :func:`read` (or :meth:`Program.parse`)."""

    def __init__(self, facts: Facts, top_level: list, ops: list, platforms: tuple = ()):
        super().__init__(facts.op_counts, facts.custom_call_targets)
        self.top_level = top_level
        self.ops = ops
        self.platforms = tuple(platforms)

    @property
    def op_names(self) -> frozenset:
        return frozenset(o.name for o in self.ops)

    def count(self, *names: str) -> int:
        """How many operations named any of ``names`` (such as ``"stablehlo.case"``)."""
        return sum(self.op_counts.get(n, 0) for n in names)

    @classmethod
    def parse(cls, text: str, platforms=()) -> "Program":
        return _parse(text, platforms)

    def __repr__(self):
        return (f"<Program {self.total} ops, loops={self.has_loops}, collectives={self.collectives}, "
                f"targets={sorted(self.custom_call_targets)}>")


def read(program) -> Program:
    """The :class:`Program` of ``program``: a ``jax.export.Exported``, the judge's
    :class:`autograder.judge.Exported` (anything with ``exported``), or StableHLO text."""
    if isinstance(program, Program):
        return program
    cached = getattr(program, "_programs_facts", None)
    if isinstance(cached, Program):
        return cached
    exp = getattr(program, "exported", program)
    if isinstance(exp, str):
        return _parse(exp, ())
    try:
        text = exp.mlir_module()
    except Exception as exc:  # noqa: BLE001 - a forged or broken module
        raise ProgramError(f"The exported program cannot be read ({type(exc).__name__}).") from None
    result = _parse(text, tuple(getattr(exp, "platforms", ()) or ()))
    try:
        program._programs_facts = result
    except Exception:  # noqa: BLE001 - a jax.export.Exported is frozen
        pass
    return result


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


def _parse(text: str, platforms) -> Program:
    from jax._src.lib.mlir import ir

    if not isinstance(text, str):
        raise ProgramError("The exported program is not StableHLO text.")
    with _context():
        try:
            module = ir.Module.parse(text)
        except Exception as exc:  # noqa: BLE001 - MLIR's error type differs across versions
            raise ProgramError(f"The exported program cannot be parsed ({type(exc).__name__}).") from None
        funcs: dict = {}
        public = []
        for op in module.body.operations:
            o = op.operation
            if o.name == "func.func":
                name = _str_attr(o, "sym_name")
                funcs[name] = o
                if _str_attr(o, "sym_visibility") in ("", "public"):
                    public.append(name)
        entry = "main" if "main" in funcs else (public[0] if len(public) == 1 else None)
        if entry is None:
            raise ProgramError("The exported program has no entry function.")
        return _Walker(funcs, platforms).program(entry)


class _Walker:
    def __init__(self, funcs, platforms):
        self.funcs, self.platforms = funcs, platforms
        self.facts: dict = {}
        self.ops: list = []
        self.active: set = set()
        self.parsed = 0

    def program(self, entry) -> Program:
        facts, top = self.function(entry)
        return Program(facts, top, self.ops, self.platforms)

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
