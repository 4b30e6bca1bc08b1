"""The judge of 05_shapes' ``segment_mean`` (trusted: runs in the grader, never in the kernel).

``jax.jit(segment_mean)`` with ``num_segments`` static is exported at abstract shapes (values
float32 ``(n,)``, ids int32 ``(n,)``): a shape that depends on the data cannot be exported, and
the program's output must be float32 ``(num_segments,)``. That one program per ``(n,
num_segments)`` is run here on data drawn from ``k.rng`` (ids in any order, repeated, some
segments empty) and compared with a float64 NumPy reference. The compile count over new data
is a kernel-side claim: it can fail the test, never pass it.

A scatter or gather may promise the compiler sorted or unique indices (``indices_are_sorted``,
``unique_indices``): GPU and TPU compilers use the promise, CPU's ignores it, so on CPU a false
promise gives right values. The program is therefore also run with the index operand of each
such operation of its entry function's own block as an extra output (the module rewritten with
JAX's MLIR bindings), and the indices it got on the judge's unsorted, repeated ids must keep the
promise. (An operation nested in a loop or a branch is not observed.)
"""
import numpy as np

from autograder.judge import check_close, data_dependent_shape, ExerciseFailure, fail
from autograder.judge import effect, programs
from autograder.judge import AsJax, Fixture, Ref, Spec


def _reference(values, ids, num_segments):
    values = np.asarray(values, np.float64)
    sums = np.bincount(ids, weights=values, minlength=num_segments)
    counts = np.bincount(ids, minlength=num_segments)
    return np.where(counts > 0, sums / np.maximum(counts, 1), 0.0), counts


def _draw(rng, n, num_segments):
    """Values and ids with some segments empty (at least one), others repeated, in any order."""
    empty = set(int(s) for s in rng.choice(num_segments, size=max(1, num_segments // 3), replace=False))
    used = np.array([s for s in range(num_segments) if s not in empty], np.int32)
    ids = rng.choice(used, size=n).astype(np.int32)
    values = (rng.normal(size=n) * rng.uniform(0.5, 4.0)).astype(np.float32)
    # A value of exactly 0.0 (never the first) in a segment with other entries: an entry like any other.
    counts = np.bincount(ids[1:], minlength=num_segments)
    shared = [i for i in range(1, n) if counts[ids[i]] >= 2]
    if not shared:
        ids[2] = ids[1]
        shared = [2]
    values[shared[int(rng.integers(len(shared)))]] = 0.0
    return values, ids


def _translate(exc, label):
    if data_dependent_shape(exc):
        first_line = (str(exc).strip().splitlines() or [""])[0][:200]
        return ExerciseFailure("dynamic_shapes", f"under jax.jit, segment_mean asked for a shape that depends on "
                                                    f"the values of its inputs ({type(exc).__name__}: {first_line}): "
                                                    "how many entries a segment has is data, and every shape must "
                                                    "follow from the input shapes and num_segments alone.")
    return None


def _program(k, n, num_segments):
    return programs.trace(k, "segment_mean", Spec((n,), "float32"), Spec((n,), "int32"), num_segments,
                          static_argnums=(2,), translate=_translate, loops=True,
                          label=f"jax.export(jax.jit(segment_mean)) at n={n}, num_segments={num_segments}")


def _check_means(got, values, ids, num_segments, what):
    want, counts = _reference(values, ids, num_segments)
    got = np.asarray(got)
    if got.shape != (num_segments,):
        fail("shapes", f"{what} has shape {got.shape}; expected one mean per segment, ({num_segments},).")
    if got.dtype != np.float32:
        fail("numerics", f"{what} has dtype {got.dtype}; the means are float32.")
    for s in np.flatnonzero(counts == 0):
        if not got[s] == 0.0:
            fail("shapes", f"{what}: segment {int(s)} has no entry, so its mean must be 0.0, but it is "
                              f"{float(got[s])} (an empty segment's count is 0).")
    try:
        check_close(got, want, dtype="float32", what=what, idea="shapes")
    except ExerciseFailure as exc:
        g = got.astype(np.float64)
        sums = np.bincount(ids, weights=np.asarray(values, np.float64), minlength=num_segments)
        n = len(values)
        padded = np.where(counts > 0, (sums + (n - counts) * float(values[0])) / n, 0.0)
        if np.allclose(g, padded, rtol=1e-4, atol=1e-6):
            fail("shapes", f"{exc.detail} It averages in entries that are not in the segment (a fixed-size "
                              "selection is padded with a real entry, and the padding counts in its mean).")
        nonzero = np.bincount(ids, weights=(np.asarray(values) != 0).astype(np.float64), minlength=num_segments)
        if np.allclose(g, np.where(nonzero > 0, sums / np.maximum(nonzero, 1), 0.0), rtol=1e-4, atol=1e-6):
            fail("shapes", f"{exc.detail} It counts only the nonzero values of a segment, but a value of 0.0 "
                              "is an entry of its segment like any other.")
        if np.allclose(g, sums / n, rtol=1e-4, atol=1e-6):
            fail("shapes", f"{exc.detail} It divides each segment's sum by the number of all values; a "
                              "segment's mean divides by the number of values in that segment.")
        raise


def _check_promises(program, values, ids, what):
    """The promises about indices the program makes the compiler (:func:`effect.index_promises`),
    checked against the indices it gets on ``values`` and ``ids``: unsorted indices where it
    promised sorted ones, or repeated ones where it promised unique ones, fail."""
    try:
        promises = effect.index_promises(program.exported, (values, ids))
    except Exception:  # noqa: BLE001 - MLIR bindings that differ across JAX versions: in doubt, not judged
        return
    for op, promised_sorted, promised_unique, keys in promises:
        seen = [k[0] if len(k) == 1 else list(k) for k in keys[:12]]
        if promised_sorted and keys != sorted(keys):
            fail("shapes", f"{what}: one of its {op}s tells the compiler that its indices are sorted, but on these "
                           f"segment ids, which come in any order, it got {seen}... "
                           "(unsorted). A compiler that relies on the promise (on a GPU or TPU) gives wrong sums; "
                           "only a CPU ignores it.")
        if promised_unique and len(set(keys)) != len(keys):
            fail("shapes", f"{what}: one of its {op}s tells the compiler that its indices are unique, but on these "
                           f"segment ids, which repeat, it got {seen}... (repeated). "
                           "A compiler that relies on the promise (on a GPU or TPU) drops or mixes the repeated "
                           "entries' updates; only a CPU ignores it.")


def test_segment_mean(k):
    rng = k.rng
    for first in (True, False):
        n, num_segments = int(rng.integers(5, 40)), int(rng.integers(3, 9))
        program = _program(k, n, num_segments)
        for trial in range(3):
            values, ids = _draw(rng, n, num_segments)
            got = program(values, ids)
            what = (f"the program of jax.jit(segment_mean) (n={n}, num_segments={num_segments}) on "
                    f"random input #{trial + 1}")
            _check_means(got, values, ids, num_segments, what)
            if first and trial == 0:
                _check_promises(program, values, ids, what)
    # Kernel-side claim: one compile for new data of one shape.
    n, num_segments = int(rng.integers(5, 30)), int(rng.integers(3, 8))
    calls = []
    for _ in range(4):
        values, ids = _draw(rng, n, num_segments)
        calls.append(((Ref("segment_mean"), AsJax(values), AsJax(ids)), {"num_segments": num_segments}))
    k.claim("check_compiles", Fixture("jit_call"), calls, 1,  # keyword arguments static: num_segments
            what=f"jax.jit(segment_mean) at n={n}, num_segments={num_segments} on four data",
            why="How the values fall into segments is data: new data must reuse the compiled program.")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "segment_mean": [
        ('''
def segment_mean(values, segment_ids, num_segments):
    # counts the entries by their values: a 0.0 is not counted
    sums = jax.ops.segment_sum(values, segment_ids, num_segments)
    counts = jax.ops.segment_sum((values != 0).astype(jnp.float32), segment_ids, num_segments)
    return sums / jnp.maximum(counts, 1.0)
''', "a value of 0.0 is an entry of its segment", "shapes"),
        ('''
def segment_mean(values, segment_ids, num_segments):
    means = []
    for s in range(num_segments):
        idx = jnp.flatnonzero(segment_ids == s)  # as many indices as the segment has entries
        means.append(jnp.where(idx.size > 0, jnp.mean(values[idx]), 0.0))
    return jnp.stack(means)
''', "asked for a shape that depends on the values of its inputs", "dynamic_shapes"),
        ('''
def segment_mean(values, segment_ids, num_segments):
    sums = jax.ops.segment_sum(values, segment_ids, num_segments=num_segments)
    counts = jax.ops.segment_sum(jnp.ones_like(values), segment_ids, num_segments=num_segments)
    return sums / counts  # 0 / 0 for an empty segment
''', "has no entry, so its mean must be 0.0", "shapes"),
        ('''
def segment_mean(values, segment_ids, num_segments):
    means = []
    for s in range(num_segments):
        idx = jnp.nonzero(segment_ids == s, size=values.shape[0], fill_value=0)[0]
        count = jnp.sum(segment_ids == s)
        # the padding indices point at entry 0, a real value, and are averaged in
        means.append(jnp.where(count > 0, jnp.mean(values[idx]), 0.0))
    return jnp.stack(means)
''', "It averages in entries that are not in the segment", "shapes"),
        ('''
def segment_mean(values, segment_ids, num_segments):
    member = segment_ids[:, None] == jnp.arange(num_segments)
    sums = jnp.sum(jnp.where(member, values[:, None], 0.0), axis=0)
    return sums / values.shape[0]  # every segment divided by all n values
''', "divides each segment's sum by the number of all values", "shapes"),
        ('''
def segment_mean(values, segment_ids, num_segments):
    # right on CPU, which ignores the promise; a GPU or TPU scatter relies on it
    sums = jax.ops.segment_sum(values, segment_ids, num_segments, indices_are_sorted=True)
    counts = jax.ops.segment_sum(jnp.ones_like(values), segment_ids, num_segments, indices_are_sorted=True)
    return jnp.where(counts > 0, sums / jnp.maximum(counts, 1.0), 0.0)
''', "tells the compiler that its indices are sorted", "shapes"),
        ('''
def segment_mean(values, segment_ids, num_segments):
    # right on CPU, which ignores the promise; the ids repeat
    sums = jax.ops.segment_sum(values, segment_ids, num_segments, unique_indices=True)
    counts = jax.ops.segment_sum(jnp.ones_like(values), segment_ids, num_segments, unique_indices=True)
    return jnp.where(counts > 0, sums / jnp.maximum(counts, 1.0), 0.0)
''', "tells the compiler that its indices are unique", "shapes"),
    ],
}

RIGHT = {
    "segment_mean": [
        '''
def segment_mean(values, segment_ids, num_segments):
    # a one-hot mask (n, num_segments): sums and counts as column sums, a fixed shape throughout
    onehot = (segment_ids[:, None] == jnp.arange(num_segments)[None, :]).astype(jnp.float32)
    sums = jnp.sum(onehot * values[:, None], axis=0)
    counts = jnp.sum(onehot, axis=0)
    return jnp.where(counts > 0, sums / jnp.maximum(counts, 1.0), 0.0)
''',
        '''
def segment_mean(values, segment_ids, num_segments):
    # sorted by segment first: then the promise of sorted indices holds
    order = jnp.argsort(segment_ids)
    ids, sorted_values = segment_ids[order], values[order]
    sums = jax.ops.segment_sum(sorted_values, ids, num_segments, indices_are_sorted=True)
    counts = jax.ops.segment_sum(jnp.ones_like(sorted_values), ids, num_segments, indices_are_sorted=True)
    return jnp.where(counts > 0, sums / jnp.maximum(counts, 1.0), 0.0)
''',
    ],
}
