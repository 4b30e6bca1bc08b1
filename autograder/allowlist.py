"""What a learner's exported program may contain before the program runner runs it.

A program (a ``jax.export.Exported``) is read as a parsed module: its StableHLO text is parsed
with jaxlib's MLIR bindings and walked by operation names and regions (never searched as text:
locations, scope and function names are the learner's to choose, and a parsed operation's name
is not). Every operation must be of :data:`ALLOWED` (the pure StableHLO operations, CHLO's, the
function and Shardy dialects' structure); a ``stablehlo.custom_call`` only for a target of
:data:`VETTED` (the sharding annotations JAX writes for ``jax.sharding``, ``shard_map`` and
Shardy), with its shapes checked. Host callbacks, LAPACK or any other native call, infeed,
outfeed, send and recv are refused, and so is a program exported for another platform than the
judge's.

:func:`walk` is the minimal walker the runner needs; :mod:`autograder.programs` (the judges'
parsed-module reader) may replace it. Must import on JAX 0.7.2 too.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

JUDGE_PLATFORM = "cpu"  # where the program runner runs every program

# The StableHLO operations of the specification that compute on values, without host
# communication or native calls of their own (no custom_call, infeed, outfeed, send, recv).
STABLEHLO = frozenset(f"stablehlo.{n}" for n in """
abs add after_all all_gather all_reduce all_to_all and atan2 batch_norm_grad batch_norm_inference
batch_norm_training bitcast_convert broadcast broadcast_in_dim case cbrt ceil cholesky clamp
collective_broadcast collective_permute compare complex composite concatenate constant convert
convolution cosine count_leading_zeros create_token divide dot dot_general dynamic_broadcast_in_dim
dynamic_conv dynamic_gather dynamic_iota dynamic_pad dynamic_reshape dynamic_slice
dynamic_update_slice einsum exponential exponential_minus_one fft floor gather get_dimension_size
get_tuple_element if imag iota is_finite log log_plus_one logistic map maximum minimum multiply
negate not optimization_barrier or pad partition_id popcnt power real real_dynamic_slice reduce
reduce_precision reduce_scatter reduce_window remainder replica_id reshape return reverse rng
rng_bit_generator round_nearest_afz round_nearest_even rsqrt scatter select select_and_scatter
shift_left shift_right_arithmetic shift_right_logical sign sine slice sort sqrt subtract tan tanh
torch_index_select transpose triangular_solve tuple unary_einsum while xor
""".split())
STRUCTURE = frozenset({"builtin.module", "func.func", "func.return", "func.call"})
ALLOWED_DIALECTS = ("chlo.", "sdy.")  # CHLO: pure math; Shardy: meshes, shardings, shard_map
ALLOWED = STABLEHLO | STRUCTURE

LOOPS = frozenset({"stablehlo.while"})
COLLECTIVES = frozenset(f"stablehlo.{n}" for n in (
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute",
    "collective_broadcast")) | frozenset({"sdy.all_reduce", "sdy.all_gather", "sdy.all_slice",
                                          "sdy.all_to_all", "sdy.collective_permute", "sdy.reduce_scatter"})


def _same_type(op) -> str:
    """'' when a ``Sharding`` annotation returns its operand's type unchanged."""
    if len(op.operands) != 1 or len(op.results) != 1:
        return "one operand and one result"
    return "" if op.operands[0] == op.results[0] else "a result of its operand's type"


def _same_kind(op) -> str:
    """'' when each result has its operand's element type and rank (only the shard's size
    changes between a full array and its shard)."""
    if not op.operands or len(op.operands) != len(op.results):
        return "as many results as operands"
    for a, b in zip(op.operands, op.results):
        if _element_and_rank(a) != _element_and_rank(b) or _element_and_rank(a) is None:
            return "results of their operands' element types and ranks"
    return ""


def _element_and_rank(text: str):
    """(element type, rank) of a ranked tensor type's text, e.g. ``tensor<4x8xf32>``."""
    if not (text.startswith("tensor<") and text.endswith(">")) or "?" in text or "*" in text:
        return None
    body = text[len("tensor<"):-1].split(",")[0].strip()  # drop an encoding
    parts = body.split("x")
    return parts[-1], len(parts) - 1


# custom_call targets JAX writes for sharding annotations (GSPMD and Shardy), with their check
VETTED = {"Sharding": _same_type, "SPMDFullToShardShape": _same_kind, "SPMDShardToFullShape": _same_kind}
VETTED_PREFIX = {"xla.sdy.": _same_kind}


@dataclass(frozen=True)
class Op:
    name: str                  # e.g. "stablehlo.add"
    target: str = ""           # a custom_call's call_target_name
    operands: tuple = ()       # the operands' types, as text
    results: tuple = ()        # the results' types, as text
    loop_depth: int = 0        # how many loops it is nested in


@dataclass
class Structure:
    """A walked program: every operation, in order, nested bodies included."""
    ops: list = field(default_factory=list)

    @property
    def op_counts(self) -> Counter:
        return Counter(op.name for op in self.ops)

    @property
    def loops(self) -> int:
        return sum(op.name in LOOPS for op in self.ops)

    @property
    def collectives(self) -> set:
        return {op.name for op in self.ops if op.name in COLLECTIVES}

    @property
    def custom_call_targets(self) -> list:
        return sorted({op.target for op in self.ops if op.name == "stablehlo.custom_call"})


def walk(exported) -> Structure:
    """Parse ``exported``'s StableHLO (debug information plays no part: only operation names,
    a custom_call's target and types are read) and list its operations."""
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir

    text = exported.mlir_module()
    out = Structure()
    with jmlir.make_ir_context():
        module = ir.Module.parse(text)

        def visit(op, depth):
            name = op.name
            target = ""
            if name == "stablehlo.custom_call":
                try:
                    target = ir.StringAttr(op.attributes["call_target_name"]).value
                except Exception:  # noqa: BLE001 - a call without a readable target
                    target = "?"
            out.ops.append(Op(name, target, tuple(str(v.type) for v in op.operands),
                              tuple(str(r.type) for r in op.results), depth))
            inner = depth + (name in LOOPS)
            for region in op.regions:
                for block in region.blocks:
                    for child in block.operations:
                        visit(child.operation if hasattr(child, "operation") else child, inner)

        visit(module.operation, 0)
    return out


def refusal(exported, structure: Structure | None = None) -> str:
    """'' when the program may run; else why not, in words for the learner."""
    platforms = tuple(getattr(exported, "platforms", ()) or ())
    if JUDGE_PLATFORM not in platforms:
        return (f"it was exported for {', '.join(platforms) or 'no platform'}, not for the grader's "
                f"platform ({JUDGE_PLATFORM}); the grader runs every program it grades")
    if getattr(exported, "ordered_effects", ()) or getattr(exported, "unordered_effects", ()):
        return "it has side effects (a host callback such as jax.debug.print or io_callback)"
    try:
        structure = structure or walk(exported)
    except Exception as exc:  # noqa: BLE001 - a module the parser refuses
        return f"its module cannot be parsed ({type(exc).__name__})"
    bad = []
    for op in structure.ops:
        if op.name == "stablehlo.custom_call":
            check = VETTED.get(op.target) or next(
                (c for p, c in VETTED_PREFIX.items() if op.target.startswith(p)), None)
            if check is None:
                why = "a call into Python" if _callback(op.target) else "a native call"
                bad.append(f"custom_call @{op.target[:60]} ({why})")
            elif check(op):
                bad.append(f"custom_call @{op.target[:60]} without {check(op)}")
        elif op.name not in ALLOWED and not op.name.startswith(ALLOWED_DIALECTS):
            bad.append(op.name[:60])
    if bad:
        shown = sorted(set(bad))
        return ("it uses operations the grader does not run: " + ", ".join(shown[:6])
                + (f" and {len(shown) - 6} more" if len(shown) > 6 else ""))
    return ""


def _callback(target: str) -> bool:
    t = target.lower()
    return any(w in t for w in ("callback", "python", "host"))
