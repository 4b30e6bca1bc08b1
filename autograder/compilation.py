"""Traces and compilations, counted over a sequence of calls.

A thin layer over JAX's own instrument: :mod:`jax.monitoring` reports the duration of every
trace, lowering and XLA compile (the moments ``jax_log_compiles`` logs "Finished tracing" and
"Finished XLA compilation"); :class:`CompileCounter` counts those events. Why a call missed
the caches is ``jax_explain_cache_misses``'s job (:func:`autograder.review.capture_cache_misses`).
"""
from __future__ import annotations

import functools
import threading

from .feedback import call, fail

# what a jax.monitoring event counts: one trace, one lowering to StableHLO, one XLA compile
_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "traces",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowerings",
    "/jax/core/compile/backend_compile_duration": "compiles",
}
_state = threading.local()


def _listener(event, duration=None, *args, **kwargs):
    attribute = _EVENTS.get(event)
    if attribute is not None:
        for counter in getattr(_state, "counters", ()):
            setattr(counter, attribute, getattr(counter, attribute) + 1)
            counter.seconds[attribute] += duration or 0.0


def _ensure_listener():
    """Register :func:`_listener` with JAX once per process.

    The mark lives on the function object, not in a module global: the grader restores
    the autograder modules' globals before every test cell, and a reset module flag would
    register the listener again and count every compile twice.
    """
    if not getattr(_listener, "registered", False):
        import jax.monitoring

        jax.monitoring.register_event_duration_secs_listener(_listener)
        _listener.registered = True


class CompileCounter:
    """Counts XLA compilations (and jit traces, and lowerings) while active, on this thread: the
    ``jax.monitoring`` duration events JAX records for each trace, lowering and compile.

    Use as a context manager::

        with CompileCounter(fresh=True) as c:
            f(x); f(y)
        c.compiles

    ``fresh=True`` clears JAX's in-memory caches first, so programs compiled
    earlier in the session are not silently reused and counts are the same
    on every run.
    """

    def __init__(self, fresh: bool = True):
        self.fresh = fresh
        self.compiles = 0
        self.traces = 0
        self.lowerings = 0
        #: JAX's own measure of the time those events took: "traces", "lowerings", "compiles" -> seconds
        self.seconds = dict.fromkeys(("traces", "lowerings", "compiles"), 0.0)

    def __enter__(self):
        import jax

        _ensure_listener()
        if self.fresh:
            jax.clear_caches()
        if not hasattr(_state, "counters"):
            _state.counters = []
        _state.counters.append(self)
        return self

    def __exit__(self, *exc):
        _state.counters.remove(self)
        return False


class Call:
    """One call's arguments, unambiguously: ``Call(x, params, lr=0.1)``.

    In ``calls`` an item can also be a tuple of positional arguments, a single argument, or
    ``((args...), {kwargs})``; a ``Call`` says which without guessing (a two-argument call
    whose second argument is a dict pytree is otherwise read as args plus kwargs).
    """

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    def __repr__(self):
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"Call({', '.join(parts)})"


def split_call(item):
    """``(args, kwargs)`` of one item of ``calls``."""
    if isinstance(item, Call):
        return item.args, item.kwargs
    if (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], tuple)
            and type(item[1]) is dict and all(isinstance(k, str) for k in item[1])):
        return item
    return (item if isinstance(item, tuple) else (item,)), {}


def count_compiles(f, calls, *, fresh=True, what=None) -> int:
    """Call ``f`` once per item of ``calls``; return how many XLA compilations happened
    (results are blocked on, so all work is done).

    An item is a :class:`Call`, a tuple of positional arguments, one non-tuple argument, or
    ``((args...), {"name": value})`` for keyword arguments.
    """
    import jax

    label = what or f"`{getattr(f, '__name__', 'f')}`"
    with CompileCounter(fresh=fresh) as counter:
        for item in calls:
            args, kwargs = split_call(item)
            jax.block_until_ready(call(f, *args, what=label, **kwargs))
    return counter.compiles


def count_traces(f, calls, *, static_argnames=(), static_argnums=(), what=None) -> int:
    """How many times ``jax.jit(f)`` runs the Python body of ``f`` over ``calls``."""
    import jax

    box = {"n": 0}

    @functools.wraps(f)
    def counted(*args, **kwargs):
        box["n"] += 1
        return f(*args, **kwargs)

    jitted = jax.jit(counted, static_argnames=static_argnames or None, static_argnums=static_argnums or None)
    count_compiles(jitted, calls, fresh=False, what=what or f"`{getattr(f, '__name__', 'f')}`")
    return box["n"]


def check_compiles(f, calls, expected: int, *, what=None, why=""):
    """Check that ``f`` over ``calls`` compiles exactly ``expected`` times.

    ``f`` is called as given: pass ``jax.jit(f, ...)`` when the test applies
    jit itself, or the learner's jitted function when choosing static
    arguments is the exercise. Caches are cleared first, so the count is the
    same on every run. The learner sees how many compiles happened, how many
    were expected, and ``why`` (or a default reason) under "What causes a recompile".
    """
    label = what or f"`{getattr(f, '__name__', 'f')}`"
    calls = list(calls)  # a generator would be used up before its len() in the message
    n = count_compiles(f, calls, what=label)
    if n != expected:
        more = "more" if n > expected else "fewer"
        fail("recompiles",
             f"{label} compiled {n} time(s) over {len(calls)} call(s); expected {expected}. "
             f"{why or ('Something that should be runtime data is part of the compile signature.' if more == 'more' else 'Values that should be static are not, or the function is not jitted.')}")


def check_compiles_at_most(f, calls, limit: int, *, what=None, why=""):
    """Check that ``f`` over ``calls`` compiles at most ``limit`` times (caches cleared first).

    The learner sees the count, the limit and ``why``, under "What causes a recompile".
    """
    label = what or f"`{getattr(f, '__name__', 'f')}`"
    calls = list(calls)  # a generator would be used up before its len() in the message
    n = count_compiles(f, calls, what=label)
    if n > limit:
        fail("recompiles", f"{label} compiled {n} times over {len(calls)} calls; at most {limit} "
                           f"expected. {why or 'Something that should be runtime data is part of the compile signature.'}")
