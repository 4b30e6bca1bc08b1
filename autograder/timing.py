"""What a timer really measures: asynchronous dispatch, blocking, and how many programs a call runs.

- :class:`SimulatedDevice`: a stand-in for a jitted function on an asynchronous
  device (returns at once; its result is ready only later; the first call is slow
  like a compile), which records when each result was waited for;
- :func:`check_honest_timer`: a learner's timer warms up, blocks on every timed
  result and reports the median;
- :func:`check_single_dispatch`: one call of a function runs one compiled program.
"""
from __future__ import annotations

import math
import numbers
import time

import numpy as np

from .feedback import _explain, call, fail


class SimulatedResult:
    """The "array" a :class:`SimulatedDevice` returns: ready only at ``done_at``.

    Every way of waiting for it (``block_until_ready``, ``jax.block_until_ready``,
    ``np.asarray``, ``float``, ``.item()``, ``.tolist()``, printing or formatting it, or using
    it in a ``jnp`` function) sleeps until then and is recorded, as each waits for a jax.Array;
    ``copy_to_host_async()`` starts the copy and waits for nothing, as it does on a jax.Array.
    """

    shape = ()
    dtype = np.dtype("float32")
    ndim = 0
    size = 1

    def __init__(self, device, index, done_at):
        self._device = device
        self.index = index
        self.done_at = done_at
        self.waited_after_calls = None  # how many calls had been made when it was first waited for

    def block_until_ready(self):
        if self.waited_after_calls is None:
            self.waited_after_calls = len(self._device.calls)
        delay = self.done_at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        return self

    def __array__(self, dtype=None, copy=None):
        self.block_until_ready()
        return np.asarray(float(self.index), dtype=dtype or self.dtype)

    def item(self):
        self.block_until_ready()
        return float(self.index)

    def __float__(self):
        return self.item()

    def tolist(self):
        return self.item()

    def __jax_array__(self):  # jnp.stack, jnp.asarray...: the value, once it is ready
        import jax.numpy as jnp

        self.block_until_ready()
        return jnp.asarray(float(self.index), self.dtype)

    def copy_to_host_async(self):
        """Starts the copy to the host and returns at once: not a wait."""

    def __format__(self, spec):  # an f-string or format() of a result reads its value
        return format(self.item(), spec)

    def __str__(self):  # print() of a result reads its value
        return str(self.item())

    def __repr__(self):
        return repr(self.item())


class SimulatedDevice:
    """A callable that behaves like a jitted function on an asynchronous device.

    Call ``k`` returns at once with a :class:`SimulatedResult` that is ready
    ``duration(k)`` seconds later: ``first_s`` for the first call, then the
    entries of ``cycle_s`` in turn. The first call also sleeps ``compile_s``
    before returning, as tracing and compiling do. (Calls do not queue behind
    each other, so a warm-up that is not waited for does not change the timing
    of later calls; overlapping timed calls are caught by the order of waits.)
    """

    def __init__(self, first_s, cycle_s, compile_s=0.0):
        self.first_s = first_s
        self.cycle_s = list(cycle_s)
        self.compile_s = compile_s
        self.calls = []
        self.results = []
        self.__name__ = "simulated_jitted_function"

    def duration(self, k):
        return self.first_s if k == 0 else self.cycle_s[(k - 1) % len(self.cycle_s)]

    def __call__(self, *args, **kwargs):
        k = len(self.calls)
        if k == 0 and self.compile_s:
            time.sleep(self.compile_s)
        self.calls.append((args, kwargs))
        result = SimulatedResult(self, k, time.perf_counter() + self.duration(k))
        self.results.append(result)
        return result


def _as_seconds(value, label):
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        shape = getattr(value, "shape", None)
        if shape == () and hasattr(value, "dtype"):
            value = float(value)
        else:
            fail("timing", f"{label} returned {type(value).__name__} {value!r:.80}; return the median "
                           "number of seconds as a Python float.")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        fail("timing", f"{label} returned {value!r}; a duration is a finite, non-negative number of seconds.")
    return value


def _run_timer(timer, device, args, repeats, what):
    kwargs = {} if repeats is None else {"repeats": repeats}
    shown = f"{what}(f, {', '.join(map(repr, args))}{'' if repeats is None else f', repeats={repeats}'})"
    got = _as_seconds(call(timer, device, *args, what=shown, **kwargs), shown)
    for i, (a, kw) in enumerate(device.calls):
        if a != tuple(args) or kw:
            fail("timing", f"{shown} called f with arguments {a!r} {kw or ''} on call #{i + 1}; "
                           f"every call must be f(*args), here f{tuple(args)!r}.")
    return shown, got


def check_honest_timer(timer, *, what="honest_time"):
    """Check that ``timer(f, *args, repeats=...)`` times ``f`` the honest way.

    It drives the timer with :class:`SimulatedDevice` functions whose first call is
    slow (a compile) and whose results are ready only some time after they are
    returned (asynchronous dispatch), then checks that the timer

    - calls ``f(*args)`` at least ``repeats + 1`` times (an untimed warm-up first);
    - keeps the slow first call out of what it reports;
    - waits for the result of each timed call before making the next call;
    - reports the median of the timed calls (not the mean, minimum or total).

    The learner reads which of these broke, e.g. "the result of a timed call
    was not waited for before the next call: the timer measured dispatch only".
    """
    # 1. One timed call: the warm-up must absorb the slow first call.
    sim = SimulatedDevice(first_s=0.005, cycle_s=[0.03], compile_s=0.4)
    shown, got = _run_timer(timer, sim, ("x", 2), 1, what)
    if len(sim.calls) < 2:
        fail("timing", f"{shown} called f {len(sim.calls)} time(s); with repeats=1 an honest timer "
                       "calls it at least twice: one untimed warm-up call (which pays for tracing and "
                       "compiling), then the timed one.")
    if got >= 0.3:
        fail("timing", f"{shown} reported {got:.3f} s, but only the first call is slow (0.4 s of "
                       "'compiling'); the warm-up call must stay out of the timing.")
    # 2. Every timed result waited for, one at a time; the median of the timed calls.
    for repeats in (None, 3, 7):
        n = 5 if repeats is None else repeats
        sim = SimulatedDevice(first_s=0.005, cycle_s=[0.02, 0.06, 0.06, 0.3], compile_s=0.2)
        shown, got = _run_timer(timer, sim, (1.5,), repeats, what)
        if len(sim.calls) < n + 1:
            fail("timing", f"{shown} called f {len(sim.calls)} time(s); expected {n} timed calls after "
                           "at least one untimed warm-up call.")
        timed = sim.results[-n:]
        for r in timed:
            if r.waited_after_calls is None:
                fail("timing", f"{shown} never waited for the result of call #{r.index + 1}: without "
                               "`jax.block_until_ready` a timer measures only how long dispatch takes, "
                               "not the work.")
            if r.waited_after_calls != r.index + 1:
                fail("timing", f"{shown} made call #{r.waited_after_calls} before waiting for the result "
                               f"of call #{r.index + 1}; block on each timed result before stopping the "
                               "clock, or the calls overlap and the timing is not one call's.")
        if got < 0.01:
            fail("timing", f"{shown} reported {got * 1e3:.2f} ms, but each call's work takes at least "
                           "20 ms; stop the clock only after the result is ready.")
        if not 0.05 <= got <= 0.085:
            durations = ", ".join(f"{sim.duration(r.index):.2f}" for r in timed)
            fail("timing", f"{shown} reported {got:.3f} s; the timed calls took about {durations} s, "
                           "whose median is 0.06 s. Report the median of the `repeats` timed calls "
                           "(not the mean, minimum or total): one slow outlier must not move it.")


def check_single_dispatch(f, calls, *, what=None):
    """Check that each call of ``f`` runs one compiled program, and that new values do not recompile.

    Over ``calls`` (argument tuples with the same shapes but new values, e.g. a
    new learning rate), ``f`` must compile only on the first call. Then the
    jaxpr of one call must be a single ``jit`` call at the top level: each
    jitted function called from Python, and each eager ``jnp`` operation, is a
    separate dispatch. The learner reads how many programs or eager operations
    one call dispatched.
    """
    import jax

    from .compilation import CompileCounter

    label = what or f"`{getattr(f, '__name__', 'f')}`"
    with CompileCounter(fresh=True):
        jax.block_until_ready(call(f, *calls[0], what=label))
    with CompileCounter(fresh=False) as rest:
        for args in calls[1:]:
            jax.block_until_ready(call(f, *args, what=label))
    if rest.compiles:
        fail("recompiles", f"{label} compiled again {rest.compiles} time(s) over {len(calls) - 1} calls "
                           "that changed only values (data, learning rate): values belong to the run "
                           "time, not to the compile signature; do not mark them static.")
    try:
        jaxpr = jax.make_jaxpr(f)(*calls[0])
    except Exception as exc:
        if isinstance(exc, ValueError) and "static" in str(exc):
            fail("recompiles", f"{label} marks one of its values (such as the learning rate) static, so "
                               "each new value is compiled again; values belong to the run time.")
        raise _explain(exc, f"tracing {label}") from exc
    names = [eqn.primitive.name for eqn in jaxpr.jaxpr.eqns]
    jits = [n for n in names if n in ("jit", "pjit")]
    others = [n for n in names if n not in ("jit", "pjit")]
    if len(jits) > 1:
        fail("dispatch", f"one call of {label} dispatches {len(jits)} separately compiled programs "
                         f"(plus {len(others)} eager operation(s)): every jitted function called from "
                         "Python is its own dispatch, each paying the per-call cost.")
    if not jits and others:
        fail("dispatch", f"{label} runs its {len(others)} operations eagerly, each one a separate "
                         f"dispatch ({', '.join(sorted(set(others))[:6])}) paying the per-call cost.")
    if jits and others:
        fail("dispatch", f"besides one jitted call, {label} runs {len(others)} eager operation(s) "
                         f"outside it ({', '.join(sorted(set(others))[:6])}), each a separate dispatch "
                         "paying the per-call cost.")
