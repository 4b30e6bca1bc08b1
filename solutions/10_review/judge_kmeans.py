"""The judge of 10_review's ``kmeans`` (trusted: runs in the grader, never in the kernel).

The contract is exact: initial centroids ``points[jax.random.choice(key, n, (k,),
replace=False)]`` (drawn here with the judge's own JAX from the same key), then ``iters`` Lloyd
steps (nearest centroid by squared distance, lowest index on ties; the mean of each cluster; a
cluster with no point keeps its centroid), computed here in float64 NumPy. Inputs are drawn so
that no point is within a margin of a tie between two different centroids (float32 and float64
then assign alike); exact duplicates among the points are searched for so that, in one case,
two initial centroids coincide and one cluster is empty at the last step (so what the
program does with an empty cluster shows in its output: Lloyd steps after it would converge
to the same centroids whatever it did); in another, a cluster that had points has none at the
last step (it keeps the value it had then: one that goes back to its initial centroid shows).
The learner's program (``k`` and
``iters`` static; the key as raw ``uint32[2]`` data and the points traced) is read at two
values of ``iters`` and two of ``n`` before any is run: one that grows is told so; then at a
count of each beyond their number of operations (:func:`autograder.judge.effect.past_operations`:
a loop unrolled over a padded count grows there), and at a number of steps beyond every size and
constant written in them (:func:`autograder.judge.effect.beyond`), where its centroids must still
be Lloyd's (converged: the reference stops at its fixed point) and its loops must run more
trips, observed (:func:`autograder.judge.effect.trip_counts`), than at iters=1: converged
centroids look right after any number of steps, so only the trips tell a loop bounded by a
fixed count (the steps past ``iters`` masked out); a loop that stops once a step changes
nothing still runs more. A loop that runs every trip but does the work on only the first few is
told by its effect (:func:`autograder.judge.effect.nudges_kept`): the values the loop changes are
nudged at the end of every trip and the program run again; a Lloyd step recomputes the centroids
from the points, so only the last trip's nudge stays, while trips that only carry the centroids
on keep one each. Its values are compared at float32 tolerance. The compile count over new keys and points is a
kernel-side claim: it can fail the test, never pass it.
"""
import functools

import numpy as np

from autograder.judge import check_close, fail
from autograder.judge import effect, programs
from autograder.judge import AsJax, Fixture, Key, Ref, Spec

MARGIN = 1e-3  # the least gap, relative, between a point's nearest and next different centroid
PUBLISHED_ITERS = (0, 2, 3, 4, 6, 8)  # the numbers of steps the visible test and this judge try
# Added to the values the loop carries at each trip's end (effect.nudges_kept): a few float32 ulps
# of the centroids (|c| < 32), far below the inputs' tie margin (it moves no point's nearest centroid).
NUDGE = 2.0 ** -17


@functools.lru_cache(maxsize=None)
def _initial(seed, n, k):
    import jax

    return np.asarray(jax.random.choice(jax.random.key(int(seed)), n, (k,), replace=False))


def _reference(points, init, iters):
    """(centroids after each of 0..iters steps, the least relative tie margin, the clusters
    that were empty at each step: a set of their indices), float64."""
    p = points.astype(np.float64)
    c = p[init].copy()
    margin, empties, history = np.inf, [], [c.copy()]
    for _ in range(iters):
        if len(history) > 1 and np.array_equal(history[-1], history[-2]):
            break  # a fixed point: every later step is this one again (its margin included)
        d = ((p[:, None, :] - c[None, :, :]) ** 2).sum(-1)
        labels = d.argmin(1)
        nearest = d[np.arange(len(p)), labels]
        same = np.all(c[None, :, :] == c[labels][:, None, :], axis=-1)  # centroids equal to the nearest
        others = np.where(same, np.inf, d).min(1)
        margin = min(margin, float(((others - nearest) / (1.0 + nearest)).min()))
        empties.append(set())
        for j in range(len(c)):
            if np.any(labels == j):
                c[j] = p[labels == j].mean(0)
            else:
                empties[-1].add(j)
        history.append(c.copy())
    return history, margin, empties


def _draw(rng, n, d, k, iters, want_empty, seeds):
    """Points (a few exact duplicates) and a seed whose run has no near tie and, if
    ``want_empty``, an empty cluster at its last step (else none at any step); if ``want_empty``
    is ``"moved"``, one whose centroid then is no longer its initial one (it had points at an
    earlier step: what it keeps is its value then, not where it started). About 1 in 100 of
    (points, seed) pairs is such a run, and 400 x 39 are tried: ``(points, seed, reference
    centroids)``."""
    for _ in range(400):
        centers = rng.normal(size=(k, d)) * 6.0
        points = (centers[rng.integers(0, k, n)] + rng.normal(size=(n, d))).astype(np.float32)
        dup = rng.choice(n, size=4, replace=False)
        points[dup] = points[dup[0]]  # four copies of one point
        for seed in seeds:
            history, margin, empties = _reference(points, _initial(seed, n, k), iters)
            if want_empty == "moved":
                wanted = any(not np.array_equal(history[-1][j], history[0][j]) for j in empties[-1])
            else:
                wanted = bool(empties[-1]) if want_empty else not any(empties)
            if margin > MARGIN and wanted and np.ptp(history[-1]) > 0:
                return points, seed, history[-1]
    raise RuntimeError("kmeans: no input without near ties was found")  # never expected


def _program(k, n, d, kk, iters):
    return programs.trace(k, "kmeans", Spec((2,), "uint32"), Spec((n, d), "float32"), kk, iters,
                          static_argnums=(2, 3), loops=True,
                          label=f"jax.jit(kmeans, static_argnames=('k', 'iters')) at k={kk}, iters={iters}")


def _grows(small, large) -> bool:
    """A program that copies a step per iteration (or per point) grows by whole steps; one loop
    differs at most by a constant or two (the trip count's)."""
    return large > 1.1 * small


def _check_not_unrolled(k, d, kk):
    at = {i: _program(k, 24, d, kk, i) for i in (2, 8)}
    by_iters = {i: p.total for i, p in at.items()}
    if _grows(by_iters[2], by_iters[8]):
        fail("loops", f"the program of kmeans grows with `iters` ({by_iters[2]} operations at iters=2, "
                         f"{by_iters[8]} at iters=8): a Python loop over the steps is unrolled into it, one "
                         "copy of the step per iteration.")
    by_n = {n: _program(k, n, d, kk, 2).total for n in (24, 40)}
    if _grows(by_n[24], by_n[40]):
        fail("shapes", f"the program of kmeans grows with the number of points ({by_n[24]} operations at "
                          f"24 points, {by_n[40]} at 40): something is computed once per point or per "
                          "cluster in Python; every step's shapes must follow from the input shapes.")
    # Beyond the operations of those programs (where a loop unrolled over any padded count grows)...
    mid = effect.past_operations(at.values(), PUBLISHED_ITERS, k.rng)
    grown = _program(k, 24, d, kk, mid).total
    if _grows(by_iters[2], grown):
        fail("loops", f"the program of kmeans grows with `iters` ({by_iters[2]} operations at iters=2, {grown} at "
                         f"iters={mid}): a Python loop over the steps is unrolled into it, one copy of the step per "
                         "iteration, beyond the counts it was tried at.")
    mid_n = effect.past_operations([_program(k, n, d, kk, 2) for n in (24, 40)], (24, 40), k.rng)
    grown = _program(k, mid_n, d, kk, 2).total
    if _grows(by_n[24], grown):
        fail("shapes", f"the program of kmeans grows with the number of points ({by_n[24]} operations at 24 points, "
                          f"{grown} at {mid_n}): something is computed once per point in Python, beyond the numbers "
                          "of points it was tried at.")
    return at


def _check_trips(k, d, kk, at, seeds):
    """The Lloyd steps run, observed (:func:`autograder.judge.effect.trip_counts`) at iters=1 and
    at a count beyond every size and constant written in the programs (``at``): its loops must run
    more trips there (a loop bounded by a fixed count, the steps past ``iters`` masked out, runs
    as many at both, and converged centroids look right after any number of steps; a loop that
    stops once a step changes nothing runs more, since no drawn input is at its fixed point
    from the start), and its values there are still Lloyd's (converged: the reference stops at
    the fixed point)."""
    far, written = effect.beyond(at.values(), PUBLISHED_ITERS, k.rng)
    beyond = f"at iters={far}, beyond every size written in its programs at iters=2 and 8 (up to {written})"
    program = _program(k, 24, d, kk, far)
    if _grows(at[2].total, program.total):
        fail("loops", f"the program of kmeans grows with `iters` ({at[2].total} operations at iters=2, "
                         f"{program.total} {beyond}): a Python loop over the steps is unrolled into it.")
    pts, seed, want = _draw(k.rng, 24, d, kk, far, False, seeds)
    _check(program(programs.raw_key(seed), pts), want, f"jax.jit(kmeans)(key, points, {kk}, {far}) {beyond}")
    inputs = (programs.raw_key(seed), pts)
    one = _program(k, 24, d, kk, 1)
    few, many = sum(effect.trip_counts(one.exported, inputs)), sum(effect.trip_counts(program.exported, inputs))
    if many <= few:
        fail("loops", f"the loops of kmeans ran {few} trips in all at iters=1 and {many} {beyond}: the number of "
                         "Lloyd steps it runs does not follow `iters` (a loop bounded by a fixed number of steps, "
                         "the ones past `iters` masked out?). A loop on the device runs one trip per step "
                         "asked for, however many that is.")
    # ... and every trip does a step: each trip's end nudged (the centroids it carries plus
    # NUDGE), a Lloyd step recomputes them from the points, so only the last trip's nudge stays.
    kept = effect.nudges_kept(program.exported, inputs, epsilon=NUDGE)
    if kept is not None and kept > 3:
        fail("loops", f"the loop of kmeans runs its trips {beyond}, but its last trips do no work: the grader "
                         f"added {NUDGE:.1e} to the values its loop carries at the end of every trip and ran it "
                         "again. A Lloyd step recomputes the centroids from the points, so a loop whose every trip "
                         f"is a step keeps only the last trip's nudge; these centroids kept {kept:.0f} of them, one "
                         "for each trip that only carried them on (the steps past some count masked out or "
                         "skipped). Every trip up to `iters` must be a Lloyd step.")


def _check(got, want, what):
    got = np.asarray(got)
    if got.shape != want.shape:
        fail("capstone", f"{what} has shape {got.shape}, expected the k centroids, {want.shape}.")
    if not np.all(np.isfinite(got)):
        fail("shapes", f"{what} has centroids that are not finite: a cluster with no point assigned "
                          "keeps its centroid (a mean over no points is 0 / 0).")
    check_close(got, want, what=what, idea="capstone", rtol=1e-4, atol=1e-4, dtype=np.float32)


def test_kmeans(k):
    rng = k.rng
    d, kk = int(rng.integers(2, 4)), int(rng.integers(3, 6))
    at = _check_not_unrolled(k, d, kk)
    seeds = k.distinct_seeds(40)
    # iters = 0: the initial centroids are the key's choice of points.
    points = rng.normal(size=(24, d)).astype(np.float32)
    got0 = _program(k, 24, d, kk, 0)(programs.raw_key(seeds[0]), points)
    want0 = points[_initial(seeds[0], 24, kk)].astype(np.float64)
    if np.shape(got0) == want0.shape and not np.allclose(got0, want0):
        chosen = all(any(np.array_equal(c, p) for p in points) for c in np.asarray(got0))
        fail("prng", "with iters=0 kmeans returned "
                        + ("points, but not the ones `jax.random.choice(key, n, (k,), replace=False)` chooses"
                           if chosen else "centroids that are not points of `points`")
                        + ": the initial centroids are the key's choice, exactly as the prompt states.")
    _check(got0, want0, f"jax.jit(kmeans)(key, points, {kk}, 0)")
    # Lloyd steps, with and without an empty cluster (two equal initial centroids).
    # A cluster emptied after it had points keeps the value it had then, not its initial one.
    empties = {True: " (two initial centroids coincide: one cluster stays empty)",
               "moved": " (a cluster that had points has none at the last step)"}
    trials = [(24, 4, False), (40, 1, True), (40, 3, False), (40, 3, "moved")]
    for trial, (n, iters, want_empty) in enumerate(trials):
        pts, seed, want = _draw(rng, n, d, kk, iters, want_empty, seeds[1:])
        got = _program(k, n, d, kk, iters)(programs.raw_key(seed), pts)
        empty = empties.get(want_empty, "")
        _check(got, want, f"jax.jit(kmeans)(key, points, {kk}, {iters}) on random input #{trial + 1}{empty}")
    # ... and at a number of steps beyond anything its programs were written for: the trips observed.
    _check_trips(k, d, kk, at, seeds[1:])
    # Kernel-side claim: one compile for new keys and points at one (k, iters).
    calls = [((Ref("kmeans"), Key(s), AsJax(rng.normal(size=(24, d)).astype(np.float32))), {"k": kk, "iters": 3})
             for s in seeds[:4]]
    k.claim("check_compiles", Fixture("jit_call"), calls, 1,  # keyword arguments static: k, iters
            what=f"jax.jit(kmeans, static_argnames=('k', 'iters')) at k={kk}, iters=3 with four keys",
            why="The key and the points are data: new values must reuse the compiled program.")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "kmeans": [
        ('''
def kmeans(key, points, k, iters):
    n = points.shape[0]
    init = points[jax.random.choice(key, n, (k,), replace=False)]

    def step(centroids, _):
        distances = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        labels = jnp.argmin(distances, axis=1)
        sums = jax.ops.segment_sum(points, labels, num_segments=k)
        counts = jax.ops.segment_sum(jnp.ones(n, points.dtype), labels, num_segments=k)

        return sums / jnp.maximum(counts, 1)[:, None], None  # an empty cluster falls to the origin

    return jax.lax.scan(step, init, None, length=iters)[0]
''', "(two initial centroids coincide: one cluster stays empty)", "capstone"),
        ('''
def kmeans(key, points, k, iters):
    n = points.shape[0]
    init = points[jax.random.choice(key, n, (k,), replace=False)]

    def step(centroids, _):
        distances = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        labels = jnp.argmin(distances, axis=1)
        sums = jax.ops.segment_sum(points, labels, num_segments=k)
        counts = jax.ops.segment_sum(jnp.ones(n, points.dtype), labels, num_segments=k)

        return sums / counts[:, None], None  # 0 / 0 for an empty cluster

    return jax.lax.scan(step, init, None, length=iters)[0]
''', "a cluster with no point assigned keeps its centroid", "shapes"),
        ('''
def kmeans(key, points, k, iters):
    n = points.shape[0]
    centroids = points[jax.random.choice(key, n, (k,), replace=False)]
    for _ in range(iters):  # a Python loop: one copy of the step per iteration
        distances = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        labels = jnp.argmin(distances, axis=1)
        sums = jax.ops.segment_sum(points, labels, num_segments=k)
        counts = jax.ops.segment_sum(jnp.ones(n, points.dtype), labels, num_segments=k)
        centroids = jnp.where((counts > 0)[:, None], sums / jnp.maximum(counts, 1)[:, None], centroids)
    return centroids
''', "the program of kmeans grows with `iters`", "loops"),
        ('''
def kmeans(key, points, k, iters):
    n = points.shape[0]
    init = points[:k]  # the first k points: the key decides nothing

    def step(centroids, _):
        distances = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        labels = jnp.argmin(distances, axis=1)
        sums = jax.ops.segment_sum(points, labels, num_segments=k)
        counts = jax.ops.segment_sum(jnp.ones(n, points.dtype), labels, num_segments=k)

        return jnp.where((counts > 0)[:, None], sums / jnp.maximum(counts, 1)[:, None], centroids), None

    return jax.lax.scan(step, init, None, length=iters)[0]
''', "but not the ones `jax.random.choice(key, n, (k,), replace=False)` chooses", "prng"),
        ('''
def kmeans(key, points, k, iters):
    # one loop in the program, but 16 Lloyd steps whatever `iters` is, the steps past `iters`
    # masked out: right at every count up to 16, and beyond it once the centroids have converged
    n = points.shape[0]
    init = points[jax.random.choice(key, n, (k,), replace=False)]

    def step(i, centroids):
        distances = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        labels = jnp.argmin(distances, axis=1)
        sums = jax.ops.segment_sum(points, labels, num_segments=k)
        counts = jax.ops.segment_sum(jnp.ones(n, points.dtype), labels, num_segments=k)
        new = jnp.where((counts > 0)[:, None], sums / jnp.maximum(counts, 1)[:, None], centroids)
        return jnp.where(i < iters, new, centroids)

    return jax.lax.fori_loop(0, 16, step, init)
''', "the number of Lloyd steps it runs does not follow `iters`", "loops"),
        ('''
def kmeans(key, points, k, iters):
    # `iters` trips, but Lloyd steps only in the first 16: right at every count up to 16, and
    # beyond it once the centroids have converged
    n = points.shape[0]
    init = points[jax.random.choice(key, n, (k,), replace=False)]

    def step(i, centroids):
        distances = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        labels = jnp.argmin(distances, axis=1)
        sums = jax.ops.segment_sum(points, labels, num_segments=k)
        counts = jax.ops.segment_sum(jnp.ones(n, points.dtype), labels, num_segments=k)
        new = jnp.where((counts > 0)[:, None], sums / jnp.maximum(counts, 1)[:, None], centroids)
        return jnp.where(i < 16, new, centroids)

    return jax.lax.fori_loop(0, iters, step, init)
''', "but its last trips do no work", "loops"),
        ('''
def kmeans(key, points, k, iters):
    n = points.shape[0]
    init = points[jax.random.choice(key, n, (k,), replace=False)]

    def step(centroids, _):
        labels = jnp.argmin(jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1), axis=1)
        onehot = jax.nn.one_hot(labels, k, dtype=points.dtype)
        counts = onehot.sum(0)
        means = (onehot.T @ points) / jnp.maximum(counts, 1)[:, None]
        # an empty cluster goes back to where it started, not to the value it had
        return jnp.where((counts > 0)[:, None], means, init), None

    return jax.lax.scan(step, init, None, length=iters)[0]
''', "(a cluster that had points has none at the last step)", "capstone"),
    ],
}

RIGHT = {
    "kmeans": [
        '''
def kmeans(key, points, k, iters):
    # a fori_loop; distances by |p|^2 - 2 p.c + |c|^2; sums and counts by a one-hot matrix
    n = points.shape[0]
    init = points[jax.random.choice(key, n, (k,), replace=False)]

    def body(i, c):
        d = (points ** 2).sum(1)[:, None] - 2 * points @ c.T + (c ** 2).sum(1)[None, :]
        onehot = (jnp.argmin(d, axis=1)[:, None] == jnp.arange(k)[None, :]).astype(points.dtype)
        counts = onehot.sum(0)
        sums = jnp.einsum("nk,nd->kd", onehot, points)
        return jnp.where((counts > 0)[:, None], sums / jnp.where(counts > 0, counts, 1)[:, None], c)

    return jax.lax.fori_loop(0, iters, body, init)
''',
        '''
def kmeans(key, points, k, iters):
    n = points.shape[0]
    init = points[jax.random.choice(key, n, (k,), replace=False)]

    def step(_, centroids):  # a fori_loop of `iters` Lloyd steps, the sums by a one-hot matmul
        distances = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        one_hot = jax.nn.one_hot(jnp.argmin(distances, axis=1), k, dtype=points.dtype)
        sums, counts = one_hot.T @ points, one_hot.sum(0)
        return jnp.where((counts > 0)[:, None], sums / jnp.maximum(counts, 1)[:, None], centroids)

    return jax.lax.fori_loop(0, iters, step, init)
''',
        '''
def kmeans(key, points, k, iters):
    n = points.shape[0]
    init = points[jax.random.choice(key, n, (k,), replace=False)]

    def step(centroids):
        distances = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        labels = jnp.argmin(distances, axis=1)
        sums = jax.ops.segment_sum(points, labels, num_segments=k)
        counts = jax.ops.segment_sum(jnp.ones(n, points.dtype), labels, num_segments=k)
        return jnp.where((counts > 0)[:, None], sums / jnp.maximum(counts, 1)[:, None], centroids)

    def more(state):  # stops early once a step changes nothing: every later step would repeat it
        i, _, changed = state
        return (i < iters) & changed

    def body(state):
        i, centroids, _ = state
        new = step(centroids)
        return i + 1, new, jnp.any(new != centroids)

    return jax.lax.while_loop(more, body, (0, init, jnp.bool_(True)))[1]
''',
    ],
}
