"""Learner-facing failures: which idea of the mental model broke, and where it is taught.

Every check in this package raises :class:`ExerciseFailure`. Its message is
what the learner reads (and what ``python -m autograder grade`` reports as
``feedback``): one or two sentences naming the idea, then where the chapter
teaches it.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import re
import sys

from . import manifest as _manifest

# idea -> (chapter notebook, section title), from the course's manifest (autograder/manifest.toml).
# Chapters name their sections with these titles, so the pointer in a message is something a
# learner can find.
TAUGHT_IN = _manifest.load().taught_in()

# The chapter whose exercise is being checked (None: unknown). Where that chapter teaches an
# error's case (its manifest entry's ``errors``), the feedback points to its own section.
_CHAPTER: contextvars.ContextVar = contextvars.ContextVar("autograder_chapter", default=None)
_JUDGE_MODULE = re.compile(r"^_autograder_judge_(\d\d_[a-z0-9_]+?)_judge(?:_|$)")
_NOTEBOOK = re.compile(r"(\d\d_[a-z0-9_]+)\.ipynb$")


@contextlib.contextmanager
def chapter(name: str | None):
    """Inside the block, learner errors are explained for the chapter ``name`` (``NN_slug``)."""
    token = _CHAPTER.set(name)
    try:
        yield
    finally:
        _CHAPTER.reset(token)


def current_chapter() -> str | None:
    """The chapter being checked: set by :func:`chapter`, else the judge file on the call stack
    (a judge module is named after its assignment), else the notebook the kernel runs
    (``JPY_SESSION_NAME``, set by Jupyter's server), else None."""
    name = _CHAPTER.get()
    if name:
        return name
    frame = sys._getframe(1)
    while frame is not None:
        m = _JUDGE_MODULE.match(str(frame.f_globals.get("__name__", "")))
        if m:
            return m.group(1)
        frame = frame.f_back
    m = _NOTEBOOK.search(os.environ.get("JPY_SESSION_NAME", ""))
    return m.group(1) if m else None


def _chapter_idea(kind: str, default: str) -> str:
    """The idea for an error of ``kind``: the current chapter's own, where it teaches the case."""
    entry = _manifest.load().chapter(current_chapter() or "")
    return (entry.errors.get(kind) if entry is not None else None) or default


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


# JAX names the construct whose function it was tracing: "... while tracing the function body at
# f.py:3 for while_body." (0.12; "for while_loop" on older JAX), "for scan", "for fori_loop", "for cond".
_LOOP_BODY = re.compile(r"while tracing the function .{0,300}? for (while_body|while_cond|while_loop|fori_loop|"
                        r"scan|cond|switch)\b", re.DOTALL)


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
    if ("RuntimeError" in names or "JaxRuntimeError" in names) and "Array has been deleted" in first_line:
        return "deleted"
    return None


def kind_of(exc: BaseException) -> str | None:
    """:func:`error_kind` of an exception object."""
    return error_kind([c.__name__ for c in type(exc).__mro__], str(exc))


def explain_error(class_names, message: str, what: str, concrete_idea: str | None = None) -> ExerciseFailure:
    """Feedback that names the idea, for a learner error known by its class names and message.

    ``concrete_idea``: the idea a concretization error breaks in the caller's exercise (default:
    the current chapter's, where its manifest entry teaches the case, else ``static``)."""
    name = class_names[0] if class_names else "an error"
    first_line = (str(message).strip().splitlines() or [""])[0][:300]
    kind = error_kind(class_names, message)
    if kind == "unanswered":
        return ExerciseFailure("unanswered", f"{what} is not answered yet (it raised NotImplementedError): "
                                             "replace the stub in its answer cell with your code.")
    if kind == "bool_conversion":
        body = _LOOP_BODY.search(str(message))
        if body:  # already inside a structured loop or branch: its body is traced once, for all steps
            construct = {"while_body": "lax.while_loop", "while_cond": "lax.while_loop",
                         "while_loop": "lax.while_loop"}.get(body.group(1), f"lax.{body.group(1)}")
            return ExerciseFailure(
                "branches",
                f"{what} used a traced value in a Python `if`/`while`/`and`/`or` inside the body of "
                f"`{construct}`: the body is traced once, for every step at once, so its values are "
                "unknown to Python there too; a choice inside it has to be one the traced program "
                "makes, not Python.")
        return ExerciseFailure(
            _chapter_idea(kind, "control_flow"),
            f"{what} used a traced value in a Python `if`/`while`/`and`/`or`; under jit its "
            "value is unknown while tracing, so Python cannot decide on it: the decision has to "
            "become part of the traced program, made by the program at run time on the value.")
    if kind == "boolean_index":
        return ExerciseFailure(
            "shapes",
            f"{what} indexed with a boolean mask, whose result has a data-dependent shape that "
            "jit cannot compile: under jit every shape is fixed before the data is known.")
    if kind == "integer_conversion":
        return ExerciseFailure(
            "static",
            f"{what} turned a traced value into a Python int; values that decide shapes or "
            "loop counts must be static, everything else should stay an array.")
    if kind == "concretization":
        return ExerciseFailure(
            concrete_idea or _chapter_idea(kind, "static"),
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
            "key_reuse", f"{what} consumed the same PRNG key twice: every draw needs a key of its own, derived from the one given.")
    if kind == "sharding_type":
        return ExerciseFailure(
            "explicit_sharding",
            f"{what} raised ShardingTypeError: it combined arrays whose shardings, part of their "
            f"types under explicit axes, "
            f"give no legal result ({first_line}); under explicit axes an ambiguous result's sharding "
            "is yours to state, it is not inferred.")
    if kind == "indivisible":
        return ExerciseFailure(
            "sharding",
            f"{what} split an array dimension over a mesh axis whose size does not divide it "
            f"({first_line}); a sharded dimension must be a multiple of its mesh axis's size.")
    if kind == "immutable":
        return ExerciseFailure(
            "inplace", f"{what} assigned into a JAX array in place ({first_line}); JAX arrays are "
                       "immutable: a function returns a new array instead of changing its input.")
    if kind == "deleted":
        return ExerciseFailure(
            "purity", f"{what} used an array that had been deleted ({first_line}): a call before it gave that "
                      "array's buffer to its result (donation) or deleted it, a side effect on the caller, "
                      "which still held the array.")
    if kind == "not_defined":
        return ExerciseFailure(
            "unanswered", f"{what} raised NameError ({first_line}): run from top to bottom, the "
                          "notebook does not define that name. Keep the exercise's function under "
                          "the name it is given, in its answer cell, and define what it uses above it.")
    return ExerciseFailure("numerics", f"{what} raised {name}: {first_line}")


def _explain(exc: BaseException, what: str, concrete_idea: str | None = None) -> ExerciseFailure:
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
    held = _live_arrays(args, kwargs)
    try:
        out = f(*args, **kwargs)
    except ExerciseFailure:
        raise
    except Exception as exc:  # every learner error becomes feedback
        if _machine_starved(exc):  # the grading machine's fault: not graded, never a zero (judge.step)
            raise
        gone = _deleted(f, held)
        if gone:
            raise ExerciseFailure("purity", _deleted_message(label, gone)) from exc
        specific = translate(exc, label) if translate is not None else None
        raise (specific or _explain(exc, label)) from exc
    gone = _deleted(f, held)
    if gone:
        raise ExerciseFailure("purity", _deleted_message(label, gone))
    return out


def _machine_starved(exc: BaseException) -> bool:
    """Whether ``exc`` is the judge's :class:`autograder.judge.starvation.Starved` (a time limit
    that ran out while the machine was starved), known by its class, never by its text."""
    return any(c.__name__ == "Starved" and c.__module__ == "autograder.judge.starvation" for c in type(exc).__mro__)


def _live_arrays(args, kwargs) -> list:
    """``[(argument, path, array), ...]``: the JAX arrays among a call's arguments (positions as
    ints, keywords as names) that are not deleted before it."""
    jax = sys.modules.get("jax")
    if jax is None:
        return []
    out = []
    try:
        for top, value in [*enumerate(args), *dict(kwargs).items()]:
            for path, leaf in jax.tree_util.tree_leaves_with_path(value):
                if isinstance(leaf, jax.Array) and not leaf.is_deleted():
                    out.append((top, jax.tree_util.keystr(path), leaf))
    except Exception:  # noqa: BLE001 - an argument JAX cannot walk: nothing to watch
        return []
    return out


def _deleted(f, held) -> list:
    """The ones of ``held`` the call deleted, as ``(name, path)`` (a positional argument named by
    ``f``'s parameter where it has one)."""
    gone = [(top, path) for top, path, leaf in held if leaf.is_deleted()]
    if not gone:
        return []
    try:
        import inspect

        params = [p.name for p in inspect.signature(f).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except Exception:  # noqa: BLE001
        params = []
    return [(f"`{top}`" if isinstance(top, str) else f"`{params[top]}`" if top < len(params)
             else f"argument {top + 1}", path) for top, path in gone]


def _deleted_message(label: str, gone: list) -> str:
    name, path = gone[0]
    entry = f" (its entry {path[:80]})" if path else ""
    return (f"{label} deleted the caller's {name}{entry}: the call gave an input buffer to its result "
            "(donation) or deleted it, a side effect on the caller, which still holds the array and whose "
            "next use of it raises 'Array has been deleted'.")


@contextlib.contextmanager
def explained(what: str):
    """Context manager form of :func:`call` for a block of learner code."""
    try:
        yield
    except ExerciseFailure:
        raise
    except Exception as exc:
        raise _explain(exc, what) from exc
