"""What a learner's exported program may contain before the program runner runs it.

The program is read as a parsed module, as the runner executes it (:mod:`.mlir`: never
searched as text; composites and calls inlined, so a custom call inside a composite's
decomposition is checked like any other). Every operation must be of :data:`ALLOWED` (the pure
StableHLO operations, CHLO's, the function and Shardy dialects' structure); a
``stablehlo.custom_call`` only for a target of :data:`VETTED` (the sharding annotations JAX
writes for ``jax.sharding``, ``shard_map`` and Shardy), with its shapes checked. Host callbacks,
LAPACK or any other native call, infeed, outfeed, send and recv are refused, and so is a program
exported for any platform but the judge's, CPU, alone: exported for ``("cpu",)`` exactly, code
written with ``lax.platform_dependent`` holds only CPU's branch (JAX picks it when it lowers for
one platform), so every fact is read from the code that runs.

Must import on JAX 0.7.2 too.
"""
from __future__ import annotations

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


def refusal(exported, program=None) -> str:
    """'' when the program may run; else why not, in words for the learner. ``program``: its
    :class:`autograder.judge.mlir.Program`, when already read."""
    platforms = tuple(getattr(exported, "platforms", ()) or ())
    if platforms != (JUDGE_PLATFORM,):  # one platform: a platform_dependent branch is CPU's, chosen when lowered
        return (f"it was exported for {', '.join(platforms) or 'no platform'}, not for the grader's "
                f"platform alone ({JUDGE_PLATFORM}); the grader runs every program it grades, on CPU")
    if getattr(exported, "ordered_effects", ()) or getattr(exported, "unordered_effects", ()):
        return "it has side effects (a host callback such as jax.debug.print or io_callback)"
    from . import mlir

    try:
        program = program or mlir.read(exported)
    except mlir.ProgramError as exc:
        return str(exc).rstrip(".")
    except Exception as exc:  # noqa: BLE001 - a module the parser refuses
        return f"its module cannot be parsed ({type(exc).__name__})"
    bad = []
    for op in program.ops:
        if op.name == "stablehlo.custom_call":
            check = VETTED.get(op.target) or next(
                (c for p, c in VETTED_PREFIX.items() if op.target.startswith(p)), None)
            if check is None:
                why = "a call into Python" if mlir.CALLBACK.search(op.target) else "a native call"
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
