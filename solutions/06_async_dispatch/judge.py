"""The judge of 06_async_dispatch (trusted: runs in the grader, never in the learner's kernel).

One ``test_<name>(k)`` per graded test cell; ``k`` is an :class:`autograder.judge.Kernel`.

- ``honest_time`` takes a function, so the judge hands it fixtures of :mod:`autograder.agent.fixtures`.
  The points come from a simulated asynchronous device that the judge times itself
  (``judged_timer_on``, :class:`_Device`): each call, and each first wait for a result, is a
  prompt the judge answers over the channel while the learner's timer runs, so the judge
  records how many calls were made and when each result was first waited for, and makes each
  wait last until the call's duration has passed; the durations are drawn and held here and
  never sent to the kernel, which learns them only by waiting for the results. The number the
  timer returns must be the median of those durations: a kernel that forges its reply cannot
  know it without timing the calls. A real function slow to trace under ``jax.jit``
  (``slow_compile_timed``: compilation must stay out of the number) is the kernel's account,
  with the wall time around it measured here: it can only fail the test.
- ``fused_update``: values against a NumPy reference on fresh inputs and learning rates. Its
  program is exported with every argument traced (a learning rate marked static fails to
  trace: it would compile again for each value) and read here: the top level of the module's
  ``main`` is what one call dispatches (one ``call`` of a jitted function, or several, or
  eager operations), read from the parsed module (:mod:`autograder.judge.mlir`); the values that
  earn points are that same program's, run here on fresh inputs (float32, the exercise's dtype).
  Eager calls in the kernel stay as fail-only checks, and so does the compile count of four
  direct calls with new learning rates (``compiles_per_call``: nothing compiled after the first).
- ``honest_time`` calling the course's own ``ag.honest_time`` is refused: the fixtures report
  whether it is on the stack while the timed function runs (a kernel-side account: it can only
  fail the test).
"""
import math
import time

import numpy as np

from autograder.judge import call, check_close, check_matches_reference, ExerciseFailure, fail
from autograder.judge import mlir, programs
from autograder.judge import AsJax, Opaque, Ref, Spec

# One test at a time (autograder.judge.run_judge): honest_time's test reads wall times around the
# kernel's work, which another test's requests or programs beside it would lengthen.
SERIAL_TESTS = True
CYCLE_S = (0.04, 0.12, 0.12, 0.6)  # the timed calls' durations (in turn), before a grading's scale


# --------------------------------------------------------------------------- honest_time

def _as_seconds(value, label):
    """The timer's result as a float, or a failure that says what it returned: the prompt asks
    for a Python float (NumPy's float64, a subclass of it, is one); an array, a NumPy float32 or
    an int is not."""
    if isinstance(value, bool) or not isinstance(value, float):
        shown = repr(value) if not isinstance(value, str) else value
        kind = value.type if isinstance(value, Opaque) else type(value).__name__
        fail("timing", f"{label} returned {kind} {shown:.80}; return the median number of seconds "
                          "as a Python float.")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        fail("timing", f"{label} returned {value!r}; a duration is a finite, non-negative number of seconds.")
    return value


class _Device:
    """The judge's side of a simulated asynchronous device (the kernel's
    ``judged_timer_on``): every call and every first wait for a result is a prompt the judge
    answers itself (:meth:`autograder.judge.Channel.request`'s ``on_input``), so it is the judge
    that knows and times what happened: when each call was made (the first answered only after
    ``compile_s`` of 'compiling'), and when each result was first waited for (answered only once
    its call's duration, held here and never sent, has passed since the call)."""

    def __init__(self, first_s, cycle_s, compile_s):
        self.first_s, self.cycle_s, self.compile_s = first_s, list(cycle_s), compile_s
        self.starts = []  # when each call's work began (perf_counter)
        self.waited = {}  # call index -> how many calls had been made when its result was first waited for

    def duration(self, i):
        return _duration(i, self.first_s, self.cycle_s)

    def __call__(self, prompt):
        kind, _, index = prompt.partition(" ")
        if kind == "call":
            if not self.starts and self.compile_s:
                time.sleep(self.compile_s)
            self.starts.append(time.perf_counter())
        elif kind == "wait" and index.isdigit() and int(index) < len(self.starts) and int(index) not in self.waited:
            i = int(index)
            self.waited[i] = len(self.starts)
            delay = self.starts[i] + self.duration(i) - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        return ""


def _simulated(k, args, repeats, first_s, cycle_s, compile_s):
    """Run the learner's timer on a device the judge times (:class:`_Device`): (label, seconds
    it reported, the device's record, the calls' arguments as the kernel saw them)."""
    shown = f"honest_time(f, {', '.join(map(repr, args))}{'' if repeats is None else f', repeats={repeats}'})"
    device = _Device(first_s, cycle_s, compile_s)
    report = k.fixture("judged_timer_on")(Ref("honest_time"), tuple(args), repeats, what=shown, on_input=device)
    _check_own_timer(report, shown)
    seconds = _as_seconds(report.get("seconds"), shown)
    calls = report.get("calls")
    expected = repr((tuple(args), {}))
    for i, c in enumerate(calls if isinstance(calls, list) else []):  # the kernel's account: it can only fail
        if c != expected:
            fail("timing", f"{shown} called f as {c} on call #{i + 1}; every call must be f(*args), "
                              f"here f{tuple(args)!r}.")
    return shown, seconds, device


def _check_own_timer(report, label):
    """The exercise is the timer: the course's own ``ag.honest_time`` doing the timing is refused."""
    if report.get("course_timer"):
        fail("timing", f"{label} handed the timing to the course's own `ag.honest_time`: the exercise "
                          "is to write that timer (the warm-up, waiting for each result, the median) "
                          "yourself, not to call the course's.")


def _duration(k, first_s, cycle_s):
    return first_s if k == 0 else cycle_s[(k - 1) % len(cycle_s)]


def test_honest_time(k):
    # A real jitted function whose first call spends trace_s tracing (the visible test's idea).
    trace_s = 0.4
    x = AsJax(k.rng.normal(size=int(k.rng.integers(500, 1500))).astype(np.float32))
    label = "honest_time(jax.jit(f), x, repeats=3)"
    # Its result is a pytree (a tuple holding an array and a dict of arrays), as a jitted training
    # step's is: a timer must wait for all of it (the prompt says f may return one).
    start = time.perf_counter()
    try:
        report = k.fixture("slow_compile_timed")(Ref("honest_time"), x, 3, trace_s, True, what=label)
    except ExerciseFailure as exc:
        fail("timing", f"{label}, for an f whose result is a pytree (a tuple holding an array and a dict of two "
                       f"arrays), failed: {exc.detail} A timer waits until the whole of f's result is ready, "
                       "whatever pytree of arrays f returns, not only a single array.")
    wall = time.perf_counter() - start
    _check_own_timer(report, label)
    got = _as_seconds(report.get("seconds"), label)
    if wall < trace_s or not report.get("traces"):
        fail("timing", f"{label} never called f: an honest timer calls the function it times.")
    if got > trace_s / 2:
        fail("timing", f"{label} reported {got:.3f} s for a function whose first call spends {trace_s} s "
                          "tracing and compiling and whose later calls take microseconds: the first call "
                          "must be an untimed warm-up.")

    args = (str(k.rng.choice(["x", "batch", "w"])), int(k.rng.integers(1, 100)))
    # 1. One timed call: the warm-up must absorb the slow first call.
    shown, got, device = _simulated(k, args, 1, 0.005, [0.06], 0.4)
    if len(device.starts) < 2:
        fail("timing", f"{shown} called f {len(device.starts)} time(s); with repeats=1 an honest timer calls it "
                          "at least twice: one untimed warm-up call (which pays for tracing and compiling), "
                          "then the timed one.")
    # The timed call takes 0.06 s; the warm-up before it 0.4 s more. A median taken over the warm-up
    # and the timed call together is about 0.23 s.
    if got >= 0.15:
        fail("timing", f"{shown} reported {got:.3f} s, but only the first call is slow (0.4 s of "
                          "'compiling') and the one timed call takes 0.06 s; the warm-up call must stay out "
                          "of the timing (not even among the times the median is taken over).")
    # 2. Every timed result waited for, one at a time; the median of the timed calls. The
    # durations are the judge's (never sent to the kernel, which learns them only by waiting),
    # scaled afresh at each grading, one run's median at least 1.8 times the other's, so no
    # fixed number passes both.
    first_s = 0.005
    scales = [float(k.rng.uniform(0.55, 0.75)), float(k.rng.uniform(1.35, 1.6))]
    k.rng.shuffle(scales)
    for repeats, scale in zip((None, 3), scales):  # the default (5) and another count
        cycle_s = [round(c * scale, 4) for c in CYCLE_S]
        median = cycle_s[1]
        n = 5 if repeats is None else repeats
        arg = (round(float(k.rng.uniform(0.5, 9.5)), 2),)
        shown, got, device = _simulated(k, arg, repeats, first_s, cycle_s, 0.2)
        made = len(device.starts)
        if made < n + 1:
            fail("timing", f"{shown} called f {made} time(s); expected {n} timed calls after at "
                              "least one untimed warm-up call.")
        timed = range(made - n, made)
        for i in timed:
            if i not in device.waited:
                fail("timing", f"{shown} never waited for the result of call #{i + 1}: without "
                                  "`jax.block_until_ready` a timer measures only how long dispatch takes, "
                                  "not the work.")
            if device.waited[i] != i + 1:
                fail("timing", f"{shown} made call #{device.waited[i]} before waiting for the result of call "
                                  f"#{i + 1}; block on each timed result before stopping the clock, or the "
                                  "calls overlap and the timing is not one call's.")
        durations = [device.duration(i) for i in timed]
        if got < min(durations) / 2:
            fail("timing", f"{shown} reported {got * 1e3:.2f} ms, but each call's work takes at least "
                              f"{min(durations) * 1e3:.0f} ms; stop the clock only after the result is ready.")
        if not median * 0.83 <= got <= median * 1.42:
            fail("timing", f"{shown} reported {got:.3f} s; the timed calls took about "
                              f"{', '.join(f'{d:.3f}' for d in durations)} s, whose median is {median:.3f} s. "
                              "Report the median of the `repeats` timed calls (not the mean, minimum or total): "
                              "one slow outlier must not move it.")


# --------------------------------------------------------------------------- fused_update

def _reference_update(w, x, y, lr):
    w, x, y = (np.asarray(a.value if isinstance(a, AsJax) else a, np.float64) for a in (w, x, y))
    return w - lr * 2 * x.T @ (x @ w - y) / len(y)


def _update_args(rng, lr, n=16, d=4):
    w, x, y = (rng.normal(size=s).astype(np.float32) for s in (d, (n, d), n))
    return AsJax(w), AsJax(x), AsJax(y), lr


def _top_level(program):
    """The operations of the exported program's entry function, in order: ``(calls, other op
    names)``, from the parsed module. A ``call`` there is a jitted function called from Python
    (its own compiled program when called outside jit); any other operation ran eagerly, a
    dispatch of its own. Constants are literals, not dispatches."""
    calls, others = [], []
    for op in program.top_level:
        if op.name == mlir.CALL:
            calls.append(op)
        elif op.name not in ("func.return", "stablehlo.constant"):
            others.append(op.name.split(".")[-1])
    return calls, others


def _as_recompile(exc, label):
    """A value marked static cannot be traced: each new value would compile again."""
    if isinstance(exc, ValueError) and "static" in str(exc):
        return ExerciseFailure(
            "recompiles", f"{label} failed with its values as traced arguments: it marks one of them (such as "
                          "the learning rate) static, so every new value compiles again; values belong to "
                          "the run time, not to the compile signature.")
    if isinstance(exc, TypeError) and "unhashable" in str(exc) and "Tracer" in str(exc):
        return ExerciseFailure(
            "recompiles", f"{label} failed with its values as traced arguments: it uses one of them (such as "
                          "the learning rate) as a key of a Python cache or dict, so each new value builds and "
                          "compiles a program of its own; values belong to the run time, not to the compile "
                          "signature.")
    return None


def test_fused_update(k):
    fused_update = k.fn("fused_update")
    a = _update_args(k.rng, 0.1)
    check_close(call(fused_update, *a, what="fused_update(w, x, y, 0.1)"), _reference_update(*a),
                   what="fused_update(w, x, y, 0.1), one step of w - lr * (the gradient of the mean squared "
                        "error),", rtol=1e-4, atol=1e-5)
    # (A call that deletes the caller's `w` by donation fails at that first direct call: the
    # judge's generic check of every call's arguments, autograder.judge.kernel.)
    # The program one call runs, exported with every argument traced (the learning rate
    # included: a static one fails here), read and run by the judge.
    n, d = int(k.rng.integers(8, 33)), int(k.rng.integers(2, 7))
    program = programs.trace(k, "fused_update", Spec((d,), "float32"), Spec((n, d), "float32"),
                             Spec((n,), "float32"), Spec((), "float32"), label="fused_update",
                             translate=_as_recompile)
    calls, others = _top_level(program)
    shown = sorted(set(others))[:6]
    if len(calls) > 1:
        fail("dispatch", f"one call of fused_update dispatches {len(calls)} separately compiled programs "
                            f"(plus {len(others)} eager operation(s)): every jitted function called from "
                            "Python is its own dispatch, and the step is split between them.")
    if not calls and others:
        fail("dispatch", f"fused_update runs its {len(others)} operations eagerly, each one a separate "
                            f"dispatch ({', '.join(shown)}), with no compiled program around them.")
    if calls and others:
        fail("dispatch", f"besides one jitted call, fused_update runs {len(others)} eager operation(s) "
                            f"outside it ({', '.join(shown)}), each a separate dispatch of its own.")
    for _ in range(3):  # the values that count: the program's, on fresh inputs and learning rates
        lr = np.float32(k.rng.uniform(0.01, 1.0))
        w, x, y = (v.value for v in _update_args(k.rng, lr, n=n, d=d)[:3])
        check_close(program(w, x, y, lr), _reference_update(w, x, y, float(lr)),
                       what=f"the program of fused_update, run by the grader with learning rate {lr:.3g}",
                       rtol=1e-4, atol=1e-5, dtype=np.float32)
    check_matches_reference(fused_update, _reference_update,
                               lambda rng: _update_args(rng, float(rng.uniform(0.01, 1.0))),
                               trials=3, seed=k.seed(), rtol=1e-4, atol=1e-5, what="`fused_update`",
                               jit=False, dtype=np.float32)
    # Called directly, as the prompt's caller would: a new learning rate compiles nothing new.
    calls = [_update_args(k.rng, float(np.float32(k.rng.uniform(0.01, 1.0))), n=n, d=d) for _ in range(4)]
    counts = k.fixture("compiles_per_call")(Ref("fused_update"), calls, what="`fused_update`")
    if sum(int(c) for c in counts[1:]):
        fail("recompiles", f"called directly with 4 new learning rates, `fused_update` compiled {list(counts)} "
                              "times per call: after the first call a new `lr` must reuse the compiled program. "
                              "A program built anew inside the function at every call compiles at every call.")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "honest_time": [
        ('''
def honest_time(f, *args, repeats=5):
    f(*args)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = f(*args)  # returns when dispatched, long before the work is done
        times.append(time.perf_counter() - start)
    jax.block_until_ready(out)
    return float(statistics.median(times))
''', "never waited for the result of call #2", "timing"),
        ('''
def honest_time(f, *args, repeats=5):
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return sum(times) / len(times)  # the mean: one outlier moves it
''', "Report the median of the `repeats` timed calls (not the mean, minimum or total)", "timing"),
        ('''
def honest_time(f, *args, repeats=5):
    times = []
    for _ in range(repeats):  # no warm-up: the first timed call compiles
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return float(statistics.median(times))
''', "with repeats=1 an honest timer calls it at least twice", "timing"),
        ('''
def honest_time(f, *args, repeats=5):
    jax.block_until_ready(f(*args))
    start = time.perf_counter()
    outs = [f(*args) for _ in range(repeats)]  # overlapping calls, one wait at the end
    jax.block_until_ready(outs)
    return (time.perf_counter() - start) / repeats
''', "made call #6 before waiting for the result of call #2", "timing"),
        ('''
def honest_time(f, *args, repeats=3):  # the contract's default is 5 timed calls
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return float(statistics.median(times))
''', "expected 5 timed calls after at least one untimed warm-up call", "timing"),
        ('''
def honest_time(f, *args, repeats=5):
    jax.block_until_ready(f(*args))
    for _ in range(repeats):
        jax.block_until_ready(f(*args))
    return 0.06  # a number that once looked right, whatever f costs
''', "Report the median of the `repeats` timed calls (not the mean, minimum or total)", "timing"),
        ('''
def honest_time(f, *args, repeats=5):
    return float(ag.honest_time(f, *args, repeats=repeats).median)  # the course's timer does the job
''', "handed the timing to the course's own `ag.honest_time`", "timing"),
        ('''
def honest_time(f, *args, repeats=5):
    f(*args).block_until_ready()  # the result's own method: a single array only
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f(*args).block_until_ready()
        times.append(time.perf_counter() - start)
    return float(statistics.median(times))
''', "for an f whose result is a pytree", "timing"),
        ('''
def honest_time(f, *args, repeats=5):
    times = []
    for _ in range(repeats + 1):  # one call more than timed; the median "drops" the slow first one
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return float(statistics.median(times))
''', "the warm-up call must stay out of the timing", "timing"),
        ('''
def honest_time(f, *args, repeats=5):
    jax.block_until_ready(f(*args))  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return jnp.median(jnp.asarray(times))  # the right median, as a JAX array
''', "return the median number of seconds as a Python float", "timing"),
    ],
    "fused_update": [
        ('''
predict_and_grad = jax.jit(lambda w, x, y: (predict(w, x), grad_mse(w, x, y)))

def fused_update(w, x, y, lr):
    _, g = predict_and_grad(w, x, y)  # one program here...
    return apply_update(w, g, lr)     # ...and another one here
''', "one call of fused_update dispatches 2 separately compiled programs", "dispatch"),
        ('''
def fused_update(w, x, y, lr):
    r = x @ w - y  # every jnp operation outside jit is its own dispatch
    return w - lr * 2 * x.T @ r / y.shape[0]
''', "operations eagerly, each one a separate dispatch", "dispatch"),
        ('''
from functools import partial

@partial(jax.jit, static_argnames="lr")
def fused_update(w, x, y, lr):
    return apply_update(w, grad_mse(w, x, y), lr)  # a new lr, a new compile
''', "it marks one of them (such as the learning rate) static, so every new value compiles again", "recompiles"),
        ('''
@jax.jit
def fused_update(w, x, y, lr):
    return w - lr * x.T @ (x @ w - y) / y.shape[0]  # forgets the factor 2 of the square
''', "one step of w - lr * (the gradient of the mean squared error), is wrong", "numerics"),
        ('''
_grad = jax.jit(lambda w, x, y: grad_mse(w, x, y))

def fused_update(w, x, y, lr):
    return w - lr * _grad(w, x, y)  # the update itself runs outside the jitted program
''', "besides one jitted call, fused_update runs 3 eager operation(s) outside it", "dispatch"),
        ('''
def fused_update(w, x, y, lr):
    # one program per call: a new jitted function, the learning rate baked in as a constant
    return jax.jit(lambda w, x, y: apply_update(w, grad_mse(w, x, y), lr))(w, x, y)
''', "after the first call a new `lr` must reuse the compiled program", "recompiles"),
        ('''
def fused_update(w, x, y, lr):
    """One SGD step on mean squared error, as one compiled program."""
    # the starting code: a jitted function made anew at every call, and the update outside it
    step = jax.jit(lambda w, x, y: lr * grad_mse(w, x, y))
    return w - step(w, x, y)
''', "besides one jitted call, fused_update runs 1 eager operation(s) outside it", "dispatch"),
        ('''
def fused_update(w, x, y, lr):
    # the whole step in one program, and lr an argument; but the jitted function is made anew at
    # every call, so each call traces and compiles again, whatever its learning rate
    step = jax.jit(lambda w, x, y, lr: apply_update(w, grad_mse(w, x, y), lr))
    return step(w, x, y, lr)
''', "A program built anew inside the function at every call compiles at every call", "recompiles"),
        ('''
from functools import partial

@partial(jax.jit, donate_argnums=0)
def fused_update(w, x, y, lr):
    # one program, lr traced; but w's buffer is given to the result, deleting the caller's w
    return w - lr * jax.grad(lambda w_: jnp.mean((x @ w_ - y) ** 2))(w)
''', "the caller's `w` was deleted", "purity"),
        ('''
_steps = {}

def fused_update(w, x, y, lr):
    # one jitted step per learning rate, kept in a cache: a new lr builds and compiles a new one
    if lr not in _steps:
        _steps[lr] = jax.jit(lambda w, x, y: w - lr * grad_mse(w, x, y))
    return _steps[lr](w, x, y)
''', "as a key of a Python cache or dict", "recompiles"),
    ],
}


RIGHT = {
    "fused_update": [
        '''
@jax.jit
def _sgd_step(w, x, y, lr):
    return w - lr * grad_mse(w, x, y)  # jitted once, where it is defined


def fused_update(w, x, y, lr):
    return _sgd_step(w, x, y, lr)  # a plain function whose call runs that one program
''',
        '''
@jax.jit
def fused_update(w, x, y, lr):
    # the three given jitted functions called inside one jit: traced into one program
    return apply_update(w, grad_mse(w, x, y), lr)
''',
    ],
}
