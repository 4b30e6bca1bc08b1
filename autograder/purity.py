"""Purity: same inputs give the same outputs, no globals touched, jit and eager agree, no leaks."""
from __future__ import annotations

import copy
import hashlib
import pickle
import re
import types

import numpy as np

from .feedback import _explain, call, fail
from .numerics import check_close


def _fingerprint(value, depth=0):
    """A comparable snapshot of a global's value."""
    if _defined_here(value):  # a function or class of the notebook: the state it keeps is watched
        return _state_fingerprint(value, depth)
    if isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)):
        return ("id", id(value))
    try:
        import jax

        if isinstance(value, jax.Array):
            return ("array", id(value), value.shape, str(value.dtype))
    except Exception:  # noqa: BLE001
        pass
    if isinstance(value, np.ndarray):
        try:  # a digest of the buffer, not a copy of it: a notebook may hold gigabytes in one global
            data = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
            return ("ndarray", value.shape, str(value.dtype), hashlib.blake2b(data).digest())
        except (TypeError, ValueError):  # an object array: pickled below
            pass
    try:
        return ("pickle", pickle.dumps(value, protocol=4))
    except Exception:  # noqa: BLE001
        return _container_fingerprint(value, depth)


# A container pickle refuses (it holds a tracer, a lock, an open file...) is fingerprinted by its
# type, length and elements, so an append or a new key still shows; deeper or longer than this,
# by its length and identity only.
_DEPTH, _ELEMENTS = 4, 10_000


def _container_fingerprint(value, depth):
    wrapped = getattr(value, "__wrapped__", None) if depth < _DEPTH else None
    if not isinstance(value, (list, tuple, dict, set, frozenset)) and _defined_here(wrapped):
        return ("wrapper", id(value), _fingerprint(wrapped, depth + 1))  # jax.jit of a notebook's function
    if depth < _DEPTH and not isinstance(value, type) and type(value).__module__ == "__main__" \
            and isinstance(getattr(value, "__dict__", None), dict):
        return ("object", id(value), _container_fingerprint(vars(value), depth + 1))
    if depth >= _DEPTH or not isinstance(value, (list, tuple, dict, set, frozenset)):
        return ("id", id(value))
    if isinstance(value, (set, frozenset)) or len(value) > _ELEMENTS:
        return ("container", type(value).__name__, id(value), len(value))
    items = value.items() if isinstance(value, dict) else enumerate(value)
    return ("container", type(value).__name__,
            tuple((_fingerprint(k, depth + 1), _fingerprint(v, depth + 1)) for k, v in items))


def _defined_here(value) -> bool:
    """A function or class the notebook defined (its module is ``__main__``, as every cell's is)."""
    return isinstance(value, (types.FunctionType, type)) and getattr(value, "__module__", None) == "__main__"


def _state_fingerprint(value, depth):
    """A notebook's function by the state it carries (its closure's cells, its defaults, its
    attributes), a notebook's class by its attributes: ``seen.append`` in a closure, a mutable
    default, ``f.calls += 1`` or ``Log.seen.append`` are changes as a global list's append is."""
    if depth >= _DEPTH:
        return ("id", id(value))
    if isinstance(value, type):
        # (pickle caches __slotnames__ on a class whose instance it pickled: not the notebook's change)
        return ("class", id(value), tuple((k, _fingerprint(v, depth + 1)) for k, v in vars(value).items()
                                          if k not in ("__dict__", "__weakref__", "__slotnames__")))
    cells = []
    for cell in value.__closure__ or ():
        try:
            cells.append(_fingerprint(cell.cell_contents, depth + 1))
        except ValueError:  # a cell not filled yet
            cells.append(None)
    # each part fingerprinted itself (the objects the function holds: a temporary copy's identity
    # would differ at every snapshot)
    return ("function", id(value), value.__code__, tuple(cells), _fingerprint(value.__defaults__, depth + 1),
            _fingerprint(value.__kwdefaults__, depth + 1), _fingerprint(value.__dict__, depth + 1))


# IPython's own bookkeeping in a notebook's namespace: the output and input history (`_`, `__`,
# `___`, `_7`, `_i`, `_ii`, `_i7`, `_oh`, `_ih`, `_dh`) and its helpers. A learner's global, even
# one whose name starts with an underscore (`_SEEN`), is watched like any other.
_IPYTHON_NAMES = re.compile(r"_{1,3}|_\d+|_i{1,3}|_i\d+|_oh|_ih|_dh|__\w+__|In|Out|exit|quit|get_ipython")


def snapshot_globals(namespace: dict) -> dict:
    """Fingerprints of the globals in ``namespace`` that the notebook's code defined."""
    return {k: _fingerprint(v) for k, v in list(namespace.items()) if not _IPYTHON_NAMES.fullmatch(k)}


def changed_globals(before: dict, after: dict) -> list[str]:
    """Names whose fingerprint changed, appeared or disappeared between two snapshots."""
    names = set(before) | set(after)
    return sorted(n for n in names if before.get(n) != after.get(n))


def _copy_args(args):
    import jax

    def leaf_copy(x):
        if isinstance(x, np.ndarray):
            return x.copy()
        return x

    return jax.tree_util.tree_map(leaf_copy, copy.copy(args))


def _globals_of(f) -> dict:
    """The module globals ``f`` reads, looking through ``jax.jit``, ``functools.wraps`` and
    ``functools.partial`` wrappers (a jitted function has no ``__globals__`` of its own)."""
    seen = set()
    while id(f) not in seen:
        seen.add(id(f))
        if hasattr(f, "__globals__"):
            return f.__globals__
        f = getattr(f, "__wrapped__", None) or getattr(f, "func", None)
        if f is None:
            break
    return {}


def _detail(exc) -> str:
    """The observation of a failure, without the pointer to the course (added again later)."""
    return getattr(exc, "detail", None) or exc.args[0]


def check_pure(f, args, *, namespace=None, what=None, jit=True, static_argnames=(), static_argnums=()):
    """Check purity the way JAX can observe it.

    - the same inputs give the same outputs on two calls;
    - the module globals of ``namespace`` (default: ``f``'s globals) do not change;
    - with ``jit=True``, ``jax.jit(f)`` agrees with ``f`` and still agrees on a second call
      (a jitted function runs Python only once, so hidden state shows up here).

    A failure names the global that changed or the call that disagreed.
    """
    import jax

    label = what or f"`{getattr(f, '__name__', 'f')}`"
    namespace = namespace if namespace is not None else _globals_of(f)
    jax.clear_caches()  # an `f` the learner jitted and ran before must run its Python body again
    before = snapshot_globals(namespace)
    first = call(f, *_copy_args(args), what=label)
    second = call(f, *_copy_args(args), what=label)
    changed = changed_globals(before, snapshot_globals(namespace))
    if changed:
        fail("purity", f"calling {label} changed the global(s) {changed}; a pure function "
                       "communicates only through its arguments and return value.")
    try:
        check_close(second, first, what=f"{label}'s second call", idea="purity")
    except AssertionError as exc:
        fail("purity", f"{label} gave different results for the same inputs: {_detail(exc)}")
    if jit:
        jitted = jax.jit(f, static_argnames=static_argnames or None, static_argnums=static_argnums or None)
        for attempt in (1, 2):
            got = call(jitted, *_copy_args(args), what=f"jax.jit({label})")
            try:
                check_close(got, first, what=f"jax.jit({label}) (call {attempt})", idea="purity")
            except AssertionError as exc:
                fail("purity", f"jax.jit({label}) disagrees with calling it eagerly: {_detail(exc)} "
                               "Under jit the Python body runs once, at trace time.")
        changed = changed_globals(before, snapshot_globals(namespace))
        if changed:
            fail("purity", f"jax.jit({label}) changed the global(s) {changed}; a pure function "
                           "communicates only through its arguments and return value.")


def check_no_tracer_leak(f, args, *, what=None, static_argnums=()):
    """Check that tracing ``f`` under ``jax.checking_leaks()`` leaks no tracer.

    ``f`` is traced afresh (JAX's caches are cleared first), so a leak is found even when
    ``f`` was jitted and called before. The learner sees that a traced value was kept
    after tracing ended.
    """
    import jax

    label = what or f"`{getattr(f, '__name__', 'f')}`"

    def fresh(*a):  # a new function object: never served from a trace cache
        return f(*a)

    try:
        with jax.checking_leaks():
            jax.clear_caches()
            jax.block_until_ready(jax.jit(fresh, static_argnums=static_argnums or None)(*args))
    except Exception as exc:
        if "leak" in str(exc).lower() or isinstance(exc, jax.errors.UnexpectedTracerError):
            fail("purity", f"{label} leaked a tracer (it kept a traced value after tracing "
                           "ended, e.g. in a global or a list).")
        raise _explain(exc, label) from exc


def _leaf_snapshot(x):
    return ("ndarray", np.array(x, copy=True)) if isinstance(x, np.ndarray) else ("id", id(x))


def _same_leaf(x, saved) -> bool:
    kind, value = saved
    if kind == "ndarray":
        return (isinstance(x, np.ndarray) and x.shape == value.shape
                and np.array_equal(x, value, equal_nan=value.dtype.kind in "fc"))
    return id(x) == value


def check_input_unchanged(f, args, *, what=None):
    """Check that ``f(*args)`` writes nothing in place into its arguments.

    NumPy arrays must keep their values, and pytree containers (a state dict, a list of
    layers) their structure and leaves. The learner sees which argument was modified
    and that a pure function returns a new value (``x.at[...].set(...)``) instead.
    """
    import jax

    label = what or f"`{getattr(f, '__name__', 'f')}`"
    saved = []
    for a in args:
        leaves, tree = jax.tree_util.tree_flatten(a)
        saved.append((tree, [_leaf_snapshot(x) for x in leaves]))
    call(f, *args, what=label)
    for i, (a, (tree, snaps)) in enumerate(zip(args, saved)):
        leaves, now = jax.tree_util.tree_flatten(a)
        if now != tree or not all(_same_leaf(x, s) for x, s in zip(leaves, snaps)):
            fail("inplace", f"{label} modified its argument #{i + 1} in place; return a new array "
                            "with `x.at[...].set(...)` (or a new container) instead.")
