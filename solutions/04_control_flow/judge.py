"""The judge of 04_control_flow (trusted: runs in the grader, never in the learner's kernel).

One ``test_<name>(k)`` per graded test cell; ``k`` is an :class:`autograder.judge.Kernel`.
Every exercise here can be traced, so every value compared and every fact about the program
comes from the learner's exported program (``jax.export`` of ``jax.jit(f)``, one per input
signature, :func:`autograder.judge.programs.trace`), run by the judge on inputs drawn from ``k.rng``
(fresh at every grading) and read as a parsed module: ``collatz_steps``'s program must have a
loop and take ``n`` as data, ``ema``'s must not grow with the length of ``xs`` (its operations
counted at two lengths), ``piecewise``'s takes ``k`` as data (one program for every branch).
References are NumPy's; the exercises' dtype is float32 (int32 for the step count). Compile
counts are kernel-side claims: they can fail a test, never pass one.
"""
import numpy as np

from autograder.judge import check_close, ExerciseFailure, fail
from autograder.judge import programs
from autograder.judge import Fixture, Ref, Spec


F32 = np.float32  # the exercises' dtype


def _f32(x):
    return np.asarray(x, np.float32)


def _i32(n):
    return np.int32(n)


def _jit_calls(name, arg_tuples):
    """``calls`` for a compile-count claim on ``jax.jit(name)`` (through the ``jit_call`` fixture)."""
    from autograder.judge import as_jax

    return [((Ref(name), *as_jax(args)), {}) for args in arg_tuples]


# --------------------------------------------------------------------------- clip_by_norm

def _clip_reference(x, max_norm):
    x = np.asarray(x, np.float64)
    norm = np.sqrt(np.sum(x * x))
    return x * (max_norm / norm) if norm > max_norm else x


def _side(norm, max_norm):
    return (f"norm {norm:.3g} > max_norm {max_norm:.3g}, so it must be scaled to norm max_norm"
            if norm > max_norm else f"norm {norm:.3g} <= max_norm {max_norm:.3g}, so it must come back unchanged")


def _check_clip(got, x, max_norm, what):
    """got against the reference; the usual mistakes (per-entry clipping, scaling to norm 1,
    scaling small vectors up) are told which."""
    try:
        check_close(got, _clip_reference(x, max_norm), what=what, idea="branches", dtype=F32)
    except ExerciseFailure as exc:
        xd = np.asarray(x, np.float64)
        norm = float(np.sqrt(np.sum(xd * xd)))
        g = np.asarray(got, np.float64) if np.shape(got) == xd.shape else None
        for alt, hint in ((np.clip(xd, -max_norm, max_norm),
                           "It clips each entry; clip the vector's norm: scale the whole of x by max_norm / norm."),
                          (xd / norm, "It scales x to norm 1; scale it to norm max_norm (x * max_norm / norm)."),
                          (xd * (max_norm / norm),
                           "It also scales vectors whose norm is already within max_norm; those must come back "
                           "unchanged, so the program has to choose per call whether to scale.")):
            if g is not None and np.allclose(g, alt, rtol=1e-4, atol=1e-5):
                fail("branches", f"{exc.detail} {hint}")
        raise


def test_clip_by_norm(k):
    # The exported program (one per shape), with max_norm traced, two shapes only; both sides of the norm, the first two in a fixed order.
    factors = [float(k.rng.uniform(0.2, 0.6)), float(k.rng.uniform(1.25, 3.0))]
    factors += [float(f) for f in k.rng.choice([0.3, 0.7, 1.4, 2.5], size=4)]
    for trial, factor in enumerate(factors):
        shape = (2,) if trial % 2 == 0 else (2, 3)
        x = (k.rng.normal(size=shape) * k.rng.uniform(0.5, 4.0)).astype(np.float32)
        norm = float(np.sqrt(np.sum(x.astype(np.float64) ** 2)))
        max_norm = float(np.float32(norm * factor))
        what = f"jax.jit(clip_by_norm) on random input #{trial + 1} ({_side(norm, max_norm)})"
        got = programs.run(k, "clip_by_norm", x, max_norm, label="`jax.jit(clip_by_norm)`")
        _check_clip(got, x, max_norm, what)
    # x = 0 (a zero gradient): norm 0 is within every max_norm, so x comes back as it is; the scale
    # max_norm / norm, which has no value at norm 0 (inf, and 0 * inf is nan), must not reach it.
    zero = np.zeros((2, 3), np.float32)
    max_norm = float(np.float32(k.rng.uniform(0.5, 3.0)))
    what = f"jax.jit(clip_by_norm) on x = 0 ({_side(0.0, max_norm)})"
    got = programs.run(k, "clip_by_norm", zero, max_norm, label="`jax.jit(clip_by_norm)`")
    if np.shape(got) == zero.shape and not np.all(np.isfinite(np.asarray(got, np.float64))):
        fail("branches", f"{what} is {np.asarray(got).tolist()}: the scale for a norm above max_norm, which has no "
                         "value at norm 0, reached a result that must be x unchanged.")
    _check_clip(got, zero, max_norm, what)
    y = k.rng.uniform(0.5, 3.0, size=(2, 3)).astype(np.float32)
    k.claim("check_compiles", Fixture("jit_call"),
            _jit_calls("clip_by_norm", [(_f32(y), 0.5), (_f32(y), 100.0), (_f32(2 * y), 3.0), (_f32(-y), 9.5)]),
            1, what="jax.jit(clip_by_norm)",
            why="A new `max_norm` or new data must not change the compiled program.")


# --------------------------------------------------------------------------- collatz_steps

def _collatz_reference(n):
    n, steps = int(n), 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return np.int32(steps)


def _traced_n(exc, label):
    """A loop that needs the Python value of `n` is control flow on a traced value."""
    import jax

    if isinstance(exc, jax.errors.TracerBoolConversionError):
        return None  # a Python `if`/`while` on a traced value: the general feedback says so
    if isinstance(exc, (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError)):
        return ExerciseFailure(
            "control_flow", f"{label} needed the Python value of the traced `n` (such as `int(n)`); "
                            "under jit `n` has no value while tracing, so a loop whose end depends on `n` has to be "
                            "decided by the program, not by Python.")
    return None


_INT32_MAX = np.iinfo(np.int32).max


def _long_starts(rng, count, min_steps=400, high=3_000_000):
    """``count`` distinct n below ``high`` whose sequences take at least ``min_steps`` steps
    (at most 494 below 3,000,000) and never leave int32, drawn afresh: no fixed trip count a
    learner might guess (100, 256, 300...) reaches them all. About 1 n in 3,700 qualifies, so
    batches of 20,000 are searched (vectorized, int64) until enough are found."""
    found = []
    while len(found) < count:
        n = np.unique(rng.integers(2, high, size=20_000, dtype=np.int64))
        value, steps, peak = n.copy(), np.zeros_like(n), n.copy()
        alive = value != 1
        while alive.any():
            v = value[alive]
            v = np.where(v % 2 == 0, v // 2, 3 * v + 1)
            value[alive], steps[alive] = v, steps[alive] + 1
            peak[alive] = np.maximum(peak[alive], v)
            alive = value != 1
        found += [int(v) for v in n[(steps >= min_steps) & (peak <= _INT32_MAX)] if int(v) not in found]
    return found[:count]


_TRIPS_AT = (1, 5, 32, 6, 27)  # 0, 5, 5, 8 and 111 steps: neither n's order nor its parity is the steps'


def _follows_steps(trips, steps):
    """Whether ``trips`` (a count per n) follow ``steps`` (the steps each n's sequence takes): never
    fewer for more steps, and more for 3 steps more or beyond (a loop may take up to 3 steps a
    trip)."""
    for a in trips:
        for b in trips:
            if steps[a] < steps[b] and (trips[a] > trips[b] or (steps[b] - steps[a] >= 3 and trips[a] == trips[b])):
                return False
    return True


def _check_trips(program, rng):
    """The trips the program's loops run for n in :data:`_TRIPS_AT` and two drawn n, observed
    (:func:`autograder.judge.effect.trip_counts`: a counter added to each loop, wherever it sits,
    run in the program runner), whatever its conditions are written as: a loop that runs as long
    as n's sequence says runs more trips for a sequence of more steps, never fewer. Each site's
    trips (a loop's; those of the loops nested in its body; those of the loops in the branch a
    `lax.cond` took), or their sum, must follow the steps; a count fixed in advance does not,
    however its bound reads n (its parity, n itself) and whichever branch it sits in. Where no
    loop can be counted (a loop only in another's condition) the written conditions are read."""
    from autograder.judge import effect

    ns = list(_TRIPS_AT)
    while len(ns) < len(_TRIPS_AT) + 2:
        n = int(rng.integers(2, 5000))
        if n not in ns:
            ns.append(n)
    steps = {n: int(_collatz_reference(n)) for n in ns}
    trips = {n: effect.trip_counts(program.exported, (_i32(n),)) for n in ns}
    sites = len(trips[ns[0]])
    if sites:
        series = [{n: c[i] for n, c in trips.items()} for i in range(sites)] + [{n: sum(c) for n, c in trips.items()}]
        if not any(_follows_steps(t, steps) for t in series):
            seen = ", ".join(f"{n} ({steps[n]} steps): {c[0] if len(c) == 1 else c}" for n, c in trips.items())
            fail("loops", "the loop of collatz_steps runs a fixed number of times whatever n is: the grader counted "
                             f"its trips for n = {', '.join(map(str, ns))} and saw {seen}, a count that does not "
                             "follow how many steps each sequence takes. A loop with a fixed trip count falls "
                             "short whenever a sequence is longer than its bound, and only n's own sequence knows "
                             "how many steps it takes, so the loop must run as long as it says.")
    elif program.fixed_loops == program.count("stablehlo.while"):
        fail("loops", "the loop of collatz_steps runs a fixed number of times whatever n is (its condition "
                         "reads only a counter with fixed bounds): a loop with a fixed trip count falls short "
                         "whenever a sequence is longer than its bound, and only n's own sequence knows how "
                         "many steps it takes, so the loop's condition must depend on it.")


def test_collatz_steps(k):
    # One program for every n: exported with `n` traced, with a loop whose trip count depends on
    # the input (a fori_loop or scan with a fixed count and a done flag is refused by the trips its
    # loops run, observed: no n within int32 and below 3e6 takes more than 494 steps, so values
    # alone cannot tell), run
    # here on every n. 27 takes 111 steps and 871 takes 178; the drawn long ones take 400 to 494.
    ns = ([1, 6, 2, 7, 27, 97, 871] + [int(v) for v in k.rng.integers(2, 5000, size=3)]
          + _long_starts(k.rng, 2))
    for n in ns:
        what = f"jax.jit(collatz_steps)({n})"
        program = programs.trace(k, "collatz_steps", Spec((), "int32"), translate=_traced_n, loops=True,
                                 label=what)
        if not program.has_loops:
            fail("loops", "the program of collatz_steps has no loop: the number of steps depends on n, "
                             "so the loop has to run in the program, on the device.")
        if n == ns[0]:
            _check_trips(program, k.rng)
        got, want = program(_i32(n)), _collatz_reference(n)
        if np.shape(got) == () and not np.issubdtype(np.asarray(got).dtype, np.integer):
            fail("loops", f"{what} is {got!r}, of dtype {np.asarray(got).dtype}: the number of steps is a count, "
                             "an integer array scalar like `n`.")
        try:
            check_close(got, want, what=f"{what} (steps to reach 1)", idea="loops", dtype=np.int32)
        except ExerciseFailure as exc:
            if np.shape(got) == () and 0 <= int(got) < int(want) and not program.fixed_loops:
                fail("loops", f"{exc.detail} It counts fewer steps than n's sequence takes to reach 1: each "
                                 "application of the map, n // 2 for an even n or 3 * n + 1 for an odd one, is "
                                 "one step.")
            if np.shape(got) == () and 0 <= int(got) < int(want):
                fail("loops", f"{exc.detail} It stopped short of the {int(want)} steps this n needs: a "
                                 "loop with a fixed trip count falls short whenever the sequence is longer. The "
                                 "number of iterations depends on the value of n, so the loop's condition "
                                 "must be traced.")
            raise
    # The trips it runs, observed (whatever its condition is written as): n = 1 takes no step, so
    # a loop that runs as long as n's sequence says runs its body no time at all there.
    from autograder.judge import effect

    if effect.runs_a_loop(program.exported, (_i32(1),)):
        fail("loops", "the loop of collatz_steps runs its body for n = 1, whose sequence takes no step: it runs "
                         "a number of times fixed in advance (a bound, with a flag that stops the work), not as "
                         "long as n's sequence says, and a longer sequence would fall short. Make reaching 1 the "
                         "loop's condition.")
    k.claim("check_compiles", Fixture("jit_call"), _jit_calls("collatz_steps", [(_i32(n),) for n in (1, 6, 27, 871)]), 1,
            what="jax.jit(collatz_steps)",
            why="The number of steps is data: it must not be part of the compiled program.")


# --------------------------------------------------------------------------- ema

def _ema_reference(xs, alpha):
    xs = np.asarray(xs, np.float64)
    ys = np.empty_like(xs)
    ys[0] = xs[0]
    for t in range(1, xs.shape[0]):
        ys[t] = alpha * xs[t] + (1 - alpha) * ys[t - 1]
    return ys


def _ema(k, xs, alpha):
    """ema(xs, alpha) computed by its exported program at xs's shape (alpha traced)."""
    return programs.run(k, "ema", xs, np.float32(alpha), loops=True, label="jax.jit(ema)")


def test_ema(k):
    # The first element first: y[0] is xs[0], not alpha * xs[0].
    xs = k.rng.normal(size=4).astype(np.float32)
    alpha = float(np.float32(k.rng.uniform(0.2, 0.8)))
    ys = _ema(k, xs, alpha)
    if np.shape(ys) == xs.shape:
        check_close(np.asarray(ys)[0], xs[0],
                       what=f"y[0] of jax.jit(ema)(xs, {alpha:.3f}), which must start the average at xs[0],",
                       idea="loops", dtype=F32)
    # Three shapes (a single step among them), each its own program.
    for trial, shape in enumerate([(4,), (6, 3), (1,), (6, 3), (4,)]):
        x, a = k.rng.normal(size=shape).astype(np.float32), float(np.float32(k.rng.uniform(0.05, 0.95)))
        check_close(_ema(k, x, a), _ema_reference(x, a),
                       what=f"jax.jit(ema)'s result on random input #{trial + 1} (alpha={a:.3f}; "
                            "y[t] = alpha * xs[t] + (1 - alpha) * y[t-1])",
                       idea="loops", dtype=F32)
    # The program at three lengths of xs, each 4 times the last, read before any is run: a loop
    # unrolled while tracing grows in proportion to the length (the second growth 4 times the
    # first), a loop in the program not at all, an associative scan by one level per doubling
    # (the same growth each time). Then each is run.
    short = int(k.rng.integers(3, 7))
    lengths = (short, 4 * short, 16 * short)
    traced = {n: programs.trace(k, "ema", np.zeros((n, 2), np.float32), np.float32(0.5), loops=True,
                                label="jax.jit(ema)") for n in lengths}
    sizes = {n: p.total for n, p in traced.items()}
    _check_not_in_proportion(sizes)
    # A long sequence, where a closed form in powers of (1 - alpha) overflows float32: 0.1**40 is
    # below its smallest normal number (and 0.7**300, tried last, below every float32).
    _check_long(k, 40, 0.9)
    for n in lengths:
        x, a = k.rng.normal(size=(n, 2)).astype(np.float32), float(np.float32(k.rng.uniform(0.05, 0.95)))
        check_close(_ema(k, x, a), _ema_reference(x, a), what=f"jax.jit(ema) on xs of shape {(n, 2)}",
                       idea="loops", dtype=F32)
    # ... and at a length beyond every size written in those programs (a length padded to, a bound):
    # a loop unrolled over a padded input is flat at every length below its padding.
    from autograder.judge import effect

    far, written = effect.beyond(traced.values(), lengths, k.rng)
    x, a = k.rng.normal(size=(far, 2)).astype(np.float32), float(np.float32(k.rng.uniform(0.05, 0.95)))
    beyond = (f"at length {far}, beyond every size written in its programs at lengths {lengths[0]} to "
              f"{lengths[-1]} (up to {written})")
    try:
        far_program = programs.trace(k, "ema", x, np.float32(a), loops=True, label="jax.jit(ema)")
        check_close(far_program(x, np.float32(a)), _ema_reference(x, a), what=f"jax.jit(ema) on xs of shape {(far, 2)}",
                    idea="loops", dtype=F32)
    except ExerciseFailure as exc:
        fail("loops", f"jax.jit(ema) fails {beyond}: it is written for the lengths it was tried at (a loop "
                         f"unrolled over xs padded to a fixed length?): {exc.detail}")
    # ... and how it grows from there (an input padded to a length beyond the first three).
    grown = {far: far_program.total, **{m: programs.trace(k, "ema", np.zeros((m, 2), np.float32), np.float32(0.5),
                                                          loops=True, label="jax.jit(ema)").total
                                        for m in (4 * far, 16 * far)}}
    _check_not_in_proportion(grown)
    _check_long(k, 300, 0.3)


def _check_long(k, n, alpha):
    x = k.rng.normal(size=(n, 2)).astype(np.float32)
    check_close(_ema(k, x, alpha), _ema_reference(x, alpha),
                what=f"jax.jit(ema) on xs of shape {(n, 2)} with alpha={alpha} (a long sequence, where "
                     "(1 - alpha)**t falls far below float32's range)", idea="loops", dtype=F32)


def _check_not_in_proportion(sizes):
    """``sizes``: ``{length: operations}`` at three lengths, each 4 times the last. The growth
    from the second to the third more than twice the growth from the first to the second is a
    program that grows in proportion to the length: a copy of the body per element."""
    (n1, s1), (n2, s2), (n3, s3) = sorted(sizes.items())
    if s3 - s2 > 2 * max(s2 - s1, 0):
        fail("loops", f"the program of ema grows with the length of xs ({s1} operations at length {n1}, {s2} "
                         f"at {n2}, {s3} at {n3}): in proportion to the length, one copy of the body per "
                         "element, a loop unrolled while tracing instead of running inside the program.")


# --------------------------------------------------------------------------- piecewise

_BRANCHES_NP = (np.sin, lambda x: x ** 2 - 1.0, lambda x: 3.0 * np.abs(x))


def _traced_k(exc, label):
    """Indexing the tuple of branches with the traced `k` is a branch chosen in Python."""
    import jax

    if isinstance(exc, jax.errors.TracerBoolConversionError):
        return None  # a Python `if` on a traced value: the general feedback says so
    if isinstance(exc, (jax.errors.TracerIntegerConversionError, jax.errors.ConcretizationTypeError)):
        return ExerciseFailure(
            "branches", f"{label} used the traced `k` as a Python index (`BRANCHES[k]`); under jit `k` "
                        "has no value while tracing, so the branch cannot be picked in Python: the "
                        "program itself must choose among the branches at run time, with `k` as data.")
    return None


def _check_branch(got, x, kk, what):
    check_close(got, _BRANCHES_NP[kk](np.asarray(x, np.float64)),
                   what=f"{what}, which must apply BRANCHES[{kk}],", idea="branches", dtype=F32)


def test_piecewise(k):
    # One program for every k: exported with `k` traced, run here on every branch.
    program = programs.trace(k, "piecewise", Spec((3,), "float32"), Spec((), "int32"), translate=_traced_k,
                             label="jax.jit(piecewise)")
    x = k.rng.normal(size=3).astype(np.float32) * 1.5
    _check_branch(program(x, _i32(1)), x, 1, "jax.jit(piecewise)(x, 1)")
    for kk in (0, 2, 1) + tuple(int(v) for v in k.rng.integers(0, 3, size=3)):
        v = (k.rng.normal(size=3) * 1.5).astype(np.float32)
        _check_branch(program(v, _i32(kk)), v, kk,
                      f"jax.jit(piecewise)({np.round(v.astype(np.float64), 3).tolist()}, {kk})")
    # A branch not chosen must not touch the result: at 3e19, BRANCHES[1] overflows float32 to inf,
    # while BRANCHES[2] is 9e19, finite. (A blend of every branch's result by arithmetic gets nan.)
    v = np.array([3e19, float(k.rng.normal()), -2.5], np.float32)
    got = program(v, _i32(2))
    if np.shape(got) == v.shape and not np.isfinite(np.asarray(got, np.float64)).all():
        fail("branches", "jax.jit(piecewise)([3e19, ...], 2) has non-finite entries although BRANCHES[2] is finite "
                         "there (BRANCHES[1] overflows to inf at 3e19): a branch that is not chosen reached "
                         "the result.")
    _check_branch(got, v, 2, "jax.jit(piecewise)([3e19, ...], 2)")
    k.claim("check_compiles", Fixture("jit_call"), _jit_calls("piecewise", [(_f32(x), _i32(kk)) for kk in (0, 1, 2, 1)]),
            1, what="jax.jit(piecewise)", why="`k` is runtime data: one program must hold every branch.")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "clip_by_norm": [
        ('''
def clip_by_norm(x, max_norm):
    norm = jnp.sqrt(jnp.sum(x ** 2))
    return x * (max_norm / norm) if norm > max_norm else x  # still a Python decision
''', "used a traced value in a Python `if`/`while`", "control_flow"),
        ('''
def clip_by_norm(x, max_norm):
    norm = jnp.linalg.norm(x)
    return x * (max_norm / norm)  # also scales small vectors up
''', "It also scales vectors whose norm is already within max_norm", "branches"),
        ('''
def clip_by_norm(x, max_norm):
    return jnp.clip(x, -max_norm, max_norm)  # clips each entry, not the norm
''', "It clips each entry; clip the vector's norm", "branches"),
        ('''
def clip_by_norm(x, max_norm):
    norm = jnp.linalg.norm(x)
    return lax.cond(norm > max_norm, lambda: x / norm, lambda: x)  # forgets max_norm
''', "It scales x to norm 1; scale it to norm max_norm", "branches"),
        ('''
def clip_by_norm(x, max_norm):
    norm = jnp.linalg.norm(x)
    return x * (jnp.minimum(norm, max_norm) / norm)  # right for every x but 0, where it is 0 / 0
''', "which has no value at norm 0, reached a result", "branches"),
    ],
    "collatz_steps": [
        ('''
def collatz_steps(n):
    steps = 0
    while n > 1:  # the Python loop is still deciding on a traced value
        n = jnp.where(n % 2 == 0, n // 2, 3 * n + 1)
        steps += 1
    return steps
''', "jax.jit(collatz_steps)(1) used a traced value in a Python `if`/`while`", "control_flow"),
        ('''
def collatz_steps(n):
    def body(i, state):
        value, steps = state
        done = value == 1
        value = jnp.where(done, value, jnp.where(value % 2 == 0, value // 2, 3 * value + 1))
        return value, steps + jnp.where(done, 0, 1)
    return lax.fori_loop(0, 100, body, (n, 0))[1]  # a fixed trip count: too few for some n
''', "runs a fixed number of times whatever n is", "loops"),
        ('''
def collatz_steps(n):
    n, steps = int(n), 0  # needs the concrete value
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps
''', "needed the Python value of the traced `n`", "control_flow"),
        ('''
def collatz_steps(n):
    def step(state):
        value, steps = state
        return jnp.where(value % 2 == 0, value // 2, 3 * value + 1), steps + 1
    return lax.while_loop(lambda s: s[0] != 1, step, (n, 1))[1]  # counts from 1
''', "jax.jit(collatz_steps)(1) (steps to reach 1) is wrong", "loops"),
        ('''
def collatz_steps(n):
    n = jnp.asarray(n)

    def body(i, state):
        value, steps = state
        done = value == 1
        value = jnp.where(done, value, jnp.where(value % 2 == 0, value // 2, 3 * value + 1))
        return value, steps + jnp.where(done, 0, 1)

    # a fixed trip count with a done flag: right for every sequence shorter than 300 steps
    return lax.fori_loop(0, 300, body, (n, jnp.zeros_like(n)))[1]
''', "a loop with a fixed trip count falls short", "loops"),
        ('''
def collatz_steps(n):
    def step(state, _):
        value, steps = state
        done = value == 1
        value = jnp.where(done, value, jnp.where(value % 2 == 0, value // 2, 3 * value + 1))
        return (value, steps + jnp.where(done, 0, 1)), None

    # 600 fixed steps with a done flag: right for every n the tests draw, but not a loop on n
    return lax.scan(step, (n, jnp.int32(0)), None, length=600)[0][1]
''', "runs a fixed number of times whatever n is", "loops"),
        ('''
def collatz_steps(n):
    # 1000 steps whatever n is, a flag stopping the work; the bound is written to read n, so the
    # condition "depends on the input" while the trip count never does
    def body(state):
        v, steps, i = state
        done = v == 1
        return (jnp.where(done, v, jnp.where(v % 2 == 0, v // 2, 3 * v + 1)), jnp.where(done, steps, steps + 1),
                i + 1)
    return jax.lax.while_loop(lambda s: s[2] < 1000 + (n < 0), body, (n, jnp.int32(0), jnp.int32(0)))[1]
''', "runs a fixed number of times whatever n is: the grader counted its trips", "loops"),
        ('''
def collatz_steps(n):
    # about 1000 steps, a flag stopping the work; the count differs with n's parity, so it varies
    def body(state):
        v, steps, i = state
        done = v == 1
        return (jnp.where(done, v, jnp.where(v % 2 == 0, v // 2, 3 * v + 1)), jnp.where(done, steps, steps + 1),
                i + 1)
    return jax.lax.while_loop(lambda s: s[2] < 1000 + n % 2, body, (n, jnp.int32(0), jnp.int32(0)))[1]
''', "the grader counted its trips", "loops"),
        ('''
def collatz_steps(n):
    # n = 1 answered by a branch; in the other one, 1000 steps whatever n is, a flag stopping the
    # work: the loop runs no trip for n = 1 and 1000 for every other n
    def bounded(n):
        def body(state):
            v, steps, i = state
            done = v == 1
            return (jnp.where(done, v, jnp.where(v % 2 == 0, v // 2, 3 * v + 1)),
                    jnp.where(done, steps, steps + 1), i + 1)
        return lax.while_loop(lambda s: s[2] < 1000, body, (n, jnp.int32(0), jnp.int32(0)))[1]
    return lax.cond(n == 1, lambda n: jnp.int32(0), bounded, n)
''', "the grader counted its trips", "loops"),
        ('''
def collatz_steps(n):
    # in a branch, a bound that grows with n itself (1000 + n steps), a flag stopping the work: the
    # trips differ for every n, but follow n, not the steps its sequence takes
    def bounded(n):
        def body(state):
            v, steps, i = state
            done = v == 1
            return (jnp.where(done, v, jnp.where(v % 2 == 0, v // 2, 3 * v + 1)),
                    jnp.where(done, steps, steps + 1), i + 1)
        return lax.while_loop(lambda s: s[2] < 1000 + n, body, (n, jnp.int32(0), jnp.int32(0)))[1]
    return lax.cond(n == 1, lambda n: jnp.int32(0), bounded, n)
''', "the grader counted its trips", "loops"),
        ('''
def collatz_steps(n):
    def body(state):
        value, steps = state
        # an odd value's 3n + 1 (always even) and the halving after it, taken as one step
        return jnp.where(value % 2 == 0, value // 2, (3 * value + 1) // 2), steps + 1
    return lax.while_loop(lambda s: s[0] != 1, body, (n, jnp.zeros_like(n)))[1]
''', "It counts fewer steps than n's sequence takes", "loops"),
        ('''
def collatz_steps(n):
    def body(state):
        value, steps = state
        return jnp.where(value % 2 == 0, value // 2, 3 * value + 1), steps + 1.0
    return lax.while_loop(lambda s: s[0] != 1, body, (n, jnp.float32(0)))[1]  # the count kept as a float
''', "the number of steps is a count, an integer array scalar", "loops"),
    ],
    "ema": [
        ('''
def ema(xs, alpha):
    ys = jnp.zeros_like(xs).at[0].set(xs[0])
    for t in range(1, xs.shape[0]):  # .at[] is fine, but the Python loop still unrolls
        ys = ys.at[t].set(alpha * xs[t] + (1 - alpha) * ys[t - 1])
    return ys
''', "the program of ema grows with the length of xs", "loops"),
        ('''
def ema(xs, alpha):
    def step(prev, x):
        y = alpha * x + (1 - alpha) * prev
        return y, y
    return lax.scan(step, jnp.zeros_like(xs[0]), xs)[1]  # y[0] becomes alpha * xs[0]
''', "which must start the average at xs[0]", "loops"),
        ('''
def ema(xs, alpha):
    def step(prev, x):
        y = (1 - alpha) * x + alpha * prev  # alpha on the wrong term
        return y, y
    _, rest = lax.scan(step, xs[0], xs[1:])
    return jnp.concatenate([xs[:1], rest])
''', "y[t] = alpha * xs[t] + (1 - alpha) * y[t-1]) is wrong", "loops"),
        ('''
def ema(xs, alpha):
    # a Python loop unrolled 128 times over xs zero-padded to 128: the same program at every length tried
    padded = jnp.pad(xs, ((0, 128 - xs.shape[0]),) + ((0, 0),) * (xs.ndim - 1))
    ys = [padded[0]]
    for t in range(1, 128):
        ys.append(alpha * padded[t] + (1 - alpha) * ys[-1])
    return jnp.stack(ys)[:xs.shape[0]]
''', "beyond every size written in its programs", "loops"),
        ('''
def ema(xs, alpha):
    # the closed form y[t] = (1-a)**t * (xs[0] + sum_s a * xs[s] / (1-a)**s): no loop at all, but
    # (1-a)**-t overflows float32 on a long sequence (t = 300 at a = 0.3, t = 40 at a = 0.9)
    t = jnp.arange(xs.shape[0], dtype=xs.dtype).reshape((-1,) + (1,) * (xs.ndim - 1))
    decay = (1 - alpha) ** t
    terms = jnp.where(t == 0, xs, alpha * xs) / decay
    return decay * jnp.cumsum(terms, axis=0)
''', "a long sequence, where (1 - alpha)**t falls far below float32's range", "loops"),
    ],
    "piecewise": [
        ('''
def piecewise(x, k):
    return BRANCHES[k](x)
''', "used the traced `k` as a Python index", "branches"),
        ('''
def piecewise(x, k):
    return lax.cond(k == 0, BRANCHES[0], BRANCHES[1], x)  # the third branch is never taken
''', "which must apply BRANCHES[2], is wrong", "branches"),
        ('''
def piecewise(x, k):
    return lax.switch(k - 1, BRANCHES, x)  # off by one (lax.switch clamps the index)
''', "jax.jit(piecewise)(x, 1), which must apply BRANCHES[1], is wrong", "branches"),
        ('''
def piecewise(x, k):
    if k == 0:  # the starting code: Python picks the branch
        return BRANCHES[0](x)
    elif k == 1:
        return BRANCHES[1](x)
    return BRANCHES[2](x)
''', "used a traced value in a Python `if`", "control_flow"),
        ('''
def piecewise(x, k):
    # every branch weighted by 0 or 1 and summed: 0 * inf is nan where a branch not chosen overflows
    return sum((k == i) * f(x) for i, f in enumerate(BRANCHES))
''', "a branch that is not chosen reached the result", "branches"),
    ],
}


RIGHT = {
    "collatz_steps": [
        '''
def collatz_steps(n):
    # the step count carried next to the value, the loop running while the value is above 1
    def step(state):
        value, steps = state
        return lax.cond(value % 2 == 0, lambda v: v // 2, lambda v: 3 * v + 1, value), steps + 1
    return lax.while_loop(lambda s: s[0] > 1, step, (jnp.asarray(n, jnp.int32), jnp.int32(0)))[1]
''',
        '''
def collatz_steps(n):
    # n = 1 answered by a branch; the loop, in the other one, runs as long as the sequence says
    def walk(n):
        def step(state):
            value, steps = state
            return jnp.where(value % 2 == 0, value // 2, 3 * value + 1), steps + 1
        return lax.while_loop(lambda s: s[0] != 1, step, (n, jnp.int32(0)))[1]
    return lax.cond(n == 1, lambda n: jnp.int32(0), walk, n)
''',
        '''
def collatz_steps(n):
    # an outer loop per odd step, an inner one halving while the value is even
    def halve(state):
        value, steps = state
        return value // 2, steps + 1

    def odd_step(state):
        value, steps = lax.while_loop(lambda s: s[0] % 2 == 0, halve, state)
        return lax.cond(value > 1, lambda s: (3 * s[0] + 1, s[1] + 1), lambda s: s, (value, steps))

    return lax.while_loop(lambda s: s[0] > 1, odd_step, (jnp.asarray(n, jnp.int32), jnp.int32(0)))[1]
''',
    ],
    "piecewise": [
        '''
def piecewise(x, k):
    # every branch computed, the integer picks one result: right values, more work than one branch
    return jnp.select([k == i for i in range(len(BRANCHES))], [f(x) for f in BRANCHES])
''',
        '''
def piecewise(x, k):
    # two nested conds: only the branch chosen runs
    return lax.cond(k == 0, BRANCHES[0], lambda v: lax.cond(k == 1, BRANCHES[1], BRANCHES[2], v), x)
''',
    ],
    "ema": [
        '''
def ema(xs, alpha):
    # y[t] = a[t] * y[t-1] + b[t] composes associatively: (a1, b1) then (a2, b2) is (a1 a2, a2 b1 + b2);
    # an associative scan has about log2(T) levels, so its program grows by one level per doubling
    a = jnp.where(jnp.arange(xs.shape[0]) == 0, 0.0, 1 - alpha).astype(xs.dtype)
    a = jnp.broadcast_to(a.reshape((-1,) + (1,) * (xs.ndim - 1)), xs.shape)
    b = jnp.where(a == 0, xs, alpha * xs)

    def combine(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]

    return lax.associative_scan(combine, (a, b))[1]
''',
        '''
def ema(xs, alpha):
    # unrolled, y[t] = sum_s alpha (1-alpha)**(t-s) xs[s] + (1-alpha)**(t+1) xs[0]: a convolution with
    # decaying weights (they only shrink, so a long sequence underflows harmlessly to 0, never overflows)
    T = xs.shape[0]
    decay = (1 - alpha) ** jnp.arange(T, dtype=xs.dtype)
    flat = xs.reshape(T, -1)
    conv = jax.vmap(lambda col: jnp.convolve(col, alpha * decay)[:T], in_axes=1, out_axes=1)(flat)
    return (conv + ((1 - alpha) * decay)[:, None] * flat[0]).reshape(xs.shape)
''',
    ],
}
