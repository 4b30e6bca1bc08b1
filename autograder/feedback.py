"""Learner-facing failures: which idea of the mental model broke, and where it is taught.

Every check in this package raises :class:`ExerciseFailure`. Its message is
what the learner reads (and what ``python -m autograder grade`` reports as
``feedback``): one or two sentences naming the idea, then where the chapter
teaches it.
"""
from __future__ import annotations

import contextlib

# idea -> (chapter notebook, section title). Chapters name their sections with
# these titles, so the pointer in a message is something a learner can find.
TAUGHT_IN = {
    "phases": ("01_phases", "Tracing: what Python sees vs what JAX sees"),
    "runtime_values": ("01_phases", "Printing at run time: jax.debug.print"),
    "constants": ("01_phases", "Captured globals become constants"),
    "cost": ("01_phases", "Lowering and compiling: the compiled program"),
    "static": ("02_static_dynamic", "Static arguments and the compile signature"),
    "recompiles": ("02_static_dynamic", "What causes a recompile"),
    "purity": ("03_purity", "Side effects under jit"),
    "state": ("03_purity", "Threading state in and out"),
    "inplace": ("03_purity", "In-place updates with .at[]"),
    "control_flow": ("04_control_flow", "Python control flow on traced values"),
    "loops": ("04_control_flow", "Loops that do not unroll: lax.scan and lax.fori_loop"),
    "branches": ("04_control_flow", "Choosing a branch: lax.cond, lax.switch and jnp.where"),
    "shapes": ("05_shapes", "Fixed shapes: padding and masks"),
    "dynamic_shapes": ("05_shapes", "Data-dependent shapes: boolean masks and nonzero"),
    "bucketing": ("05_shapes", "Bucketing: a few shapes instead of many"),
    "async": ("06_async_dispatch", "Hidden synchronisations"),
    "timing": ("06_async_dispatch", "An honest benchmark"),
    "dispatch": ("06_async_dispatch", "Fewer, larger programs: one dispatch per step"),
    "tree_state": ("07_pytrees", "Training state as a pytree"),
    "pytrees": ("07_pytrees", "Leaves and structure"),
    "custom_pytrees": ("07_pytrees", "Custom nodes"),
    "prng": ("08_prng", "Explicit keys: split and fold_in"),
    "key_reuse": ("08_prng", "The key-reuse checker"),
    "per_example_keys": ("08_prng", "Per-example randomness with vmap"),
    "sharding": ("09_sharding", "Meshes, PartitionSpec and NamedSharding"),
    "shard_map": ("09_sharding", "Manual mode: shard_map and collectives"),
    "explicit_sharding": ("09_sharding", "Explicit mode: shardings in the type"),
    "sharding_signature": ("09_sharding", "Sharding is part of the signature"),
    "review": ("10_review", "The review report"),
    "capstone": ("10_review", "The rewrite: one pure training run that jits once"),
    "numerics": (None, "the exercise's description"),
    "unanswered": (None, None),
    "tampering": (None, None),  # the kernel's machinery was changed (e.g. its JAX config cannot be reset)
}


def where(idea: str) -> str:
    """Where the course teaches ``idea``, as a phrase for a message."""
    chapter, section = TAUGHT_IN.get(idea, (None, None))
    if chapter is None:
        return f"see {section}" if section else ""
    return f"see course/{chapter}.ipynb, section \u201c{section}\u201d"


class ExerciseFailure(AssertionError):
    """A check failed. ``str(err)`` is the learner-facing feedback.

    Attributes: ``idea`` (a key of ``TAUGHT_IN``) and ``detail`` (what was
    observed, in one sentence).
    """

    def __init__(self, idea: str, detail: str):
        self.idea = idea
        self.detail = detail.strip()
        pointer = where(idea)
        message = self.detail if not pointer else f"{self.detail} ({pointer}.)"
        super().__init__(message)


def fail(idea: str, detail: str):
    """Raise :class:`ExerciseFailure` for ``idea`` with the observed ``detail``."""
    raise ExerciseFailure(idea, detail)


# The one classifier of errors raised by learner code, shared by the checks (``call``), the
# review report and the judge (which sees only an error's class names and message, as data).
# Each kind names what went wrong in JAX's terms; callers map kinds to their own wording.
_KINDS_BY_CLASS = (
    ("NotImplementedError", "unanswered"),
    ("TracerBoolConversionError", "bool_conversion"),
    ("NonConcreteBooleanIndexError", "boolean_index"),
    ("TracerIntegerConversionError", "integer_conversion"),
    ("ConcretizationTypeError", "concretization"),
    ("TracerArrayConversionError", "array_conversion"),
    ("UnexpectedTracerError", "leaked_tracer"),
    ("KeyReuseError", "key_reuse"),
    ("ExerciseFailure", "exercise_failure"),
    ("ShardingTypeError", "sharding_type"),
)


def error_kind(class_names, message: str = "") -> str | None:
    """The kind of a learner error from its class names (the class and its bases, most
    derived first) and its message; None for an error JAX does not explain."""
    names = set(class_names)
    for cls, kind in _KINDS_BY_CLASS:
        if cls in names:
            return kind
    first_line = (str(message).strip().splitlines() or [""])[0]
    if "ValueError" in names and ("evenly divide" in message or
                                  ("sharding" in message and "divisible" in message)):
        return "indivisible"
    if "TypeError" in names and ("immutable" in first_line or "item assignment" in first_line):
        return "immutable"
    if "NameError" in names and "is not defined" in first_line:
        return "not_defined"
    return None


def kind_of(exc: BaseException) -> str | None:
    """:func:`error_kind` of an exception object."""
    return error_kind([c.__name__ for c in type(exc).__mro__], str(exc))


def is_sharding_type_error(exc: BaseException) -> bool:
    """True for JAX's ``ShardingTypeError`` (explicit axes: a sharding the type rules cannot
    decide). The class lives in ``jax._src.core`` and is not public, so it is found by name."""
    return kind_of(exc) == "sharding_type"


def explain_error(class_names, message: str, what: str, concrete_idea: str = "static") -> ExerciseFailure:
    """Feedback that names the idea, for a learner error known by its class names and message."""
    name = class_names[0] if class_names else "an error"
    first_line = (str(message).strip().splitlines() or [""])[0][:300]
    kind = error_kind(class_names, message)
    if kind == "unanswered":
        return ExerciseFailure("unanswered", f"{what} is not answered yet (it raised NotImplementedError): "
                                             "replace the stub in its answer cell with your code.")
    if kind == "bool_conversion":
        return ExerciseFailure(
            "control_flow",
            f"{what} used a traced value in a Python `if`/`while`/`and`/`or`; under jit its "
            "value is unknown while tracing, so use `jnp.where`, `lax.cond` or `lax.while_loop`.")
    if kind == "boolean_index":
        return ExerciseFailure(
            "shapes",
            f"{what} indexed with a boolean mask, whose result has a data-dependent shape that "
            "jit cannot compile; keep the shape fixed with `jnp.where` or a mask.")
    if kind == "integer_conversion":
        return ExerciseFailure(
            "static",
            f"{what} turned a traced value into a Python int; values that decide shapes or "
            "loop counts must be static, everything else should stay an array.")
    if kind == "concretization":
        return ExerciseFailure(
            concrete_idea,
            f"{what} needed the concrete value of a traced array ({first_line}); under jit there "
            "is no value yet: keep the computation in JAX instead of converting to Python or NumPy.")
    if kind == "array_conversion":
        return ExerciseFailure(
            "async",
            f"{what} converted a traced array to NumPy; under jit that is impossible, and "
            "eagerly it is a device-to-host transfer. Keep the computation in jax.numpy.")
    if kind == "leaked_tracer":
        return ExerciseFailure(
            "purity",
            f"{what} leaked a tracer out of a transformed function (stored it in a global or "
            "a list); return values instead of storing them.")
    if kind == "key_reuse":
        return ExerciseFailure(
            "key_reuse", f"{what} consumed the same PRNG key twice: split it (or fold_in) first.")
    if kind == "sharding_type":
        return ExerciseFailure(
            "explicit_sharding",
            f"{what} raised ShardingTypeError: it combined arrays whose shardings, part of their "
            f"types under explicit axes, "
            f"give no legal result ({first_line}); say where the result goes with "
            "`out_sharding=` or move an input first with `jax.sharding.reshard`.")
    if kind == "indivisible":
        return ExerciseFailure(
            "sharding",
            f"{what} split an array dimension over a mesh axis whose size does not divide it "
            f"({first_line}); pad the dimension to a multiple of the axis size or shard another one.")
    if kind == "immutable":
        return ExerciseFailure(
            "inplace", f"{what} assigned into a JAX array in place ({first_line}); JAX arrays are "
                       "immutable: return a new array with `x.at[idx].set(value)`.")
    if kind == "not_defined":
        return ExerciseFailure(
            "unanswered", f"{what} raised NameError ({first_line}): run from top to bottom, the "
                          "notebook does not define that name. Keep the exercise's function under "
                          "the name it is given, in its answer cell, and define what it uses above it.")
    return ExerciseFailure("numerics", f"{what} raised {name}: {first_line}")


def _explain(exc: BaseException, what: str, concrete_idea: str = "static") -> ExerciseFailure:
    """Turn an exception raised by learner code into feedback that names the idea."""
    if isinstance(exc, ExerciseFailure):
        return exc
    return explain_error([c.__name__ for c in type(exc).__mro__], str(exc), what, concrete_idea)


def call(f, *args, what: str | None = None, translate=None, **kwargs):
    """Call learner code, turning any exception into feedback that names the idea.

    Every check runs learner code through here. ``translate(exc, label)`` may return a
    more specific :class:`ExerciseFailure` for a check's own errors (``None`` falls back
    to the general translation).
    """
    label = what or f"`{getattr(f, '__name__', 'the function')}`"
    try:
        return f(*args, **kwargs)
    except ExerciseFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - every learner error becomes feedback
        specific = translate(exc, label) if translate is not None else None
        raise (specific or _explain(exc, label)) from exc


@contextlib.contextmanager
def explained(what: str):
    """Context manager form of :func:`call` for a block of learner code."""
    try:
        yield
    except ExerciseFailure:
        raise
    except Exception as exc:  # noqa: BLE001
        raise _explain(exc, what) from exc
