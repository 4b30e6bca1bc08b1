"""The judge of 05_shapes (trusted: runs in the grader, never in the learner's kernel).

One ``test_<name>(k)`` per graded test cell; ``k`` is an :class:`autograder.judge.Kernel`.
Every value and every shape judged for the traced exercises comes from the learner's program
exported into the judge at abstract shapes (:mod:`autograder.judge.programs`: a shape that depends on
the data cannot be exported, and the program's output shape must follow from the input shapes;
one program per input shape, with the data traced, is one compile for any data of that shape),
run here on inputs drawn from ``k.rng`` (fresh at every grading) against NumPy references, at
the exercises' dtypes (float32 sums and means, int32 indices). ``bucket_length`` (a function
of a Python int) is called in the kernel for every length 1..256; the compile count of the
chapter's kernel over those lengths is a kernel-side claim, an extra only.
"""
import numpy as np

from autograder.judge import call, check_close, check_equal, data_dependent_shape, ExerciseFailure, fail
from autograder.judge import programs
from autograder.judge import LearnerError
from autograder.judge import AsJax, Fixture, Ref, Spec

BUCKETS = (16, 32, 64, 128, 256)


def _f32(x):
    return AsJax(np.asarray(x, np.float32))


def _i32(x):
    return AsJax(np.asarray(x, np.int32))


def _fixed_shapes(k, name, specs, out_shape, static_argnames=(), kwargs=None):
    """The program of ``jax.jit(name)`` at ``specs``: every shape must follow from the input
    shapes, and the output's shape must be ``out_shape``. Its values are the ones judged."""
    def dynamic(exc, label):
        if data_dependent_shape(exc):
            first_line = (str(exc).strip().splitlines() or [""])[0][:200]
            return ExerciseFailure(
                "dynamic_shapes",
                f"under jax.jit, {name} asked for a shape that depends on the values of its inputs "
                f"({type(exc).__name__}: {first_line}); every shape must follow from the input shapes "
                "alone, never from the data.")
        return None

    program = programs.trace(k, name, *specs, static_argnames=static_argnames, translate=dynamic,
                             label=f"jax.jit({name})", **(kwargs or {}))
    shapes = [tuple(a.shape) for a in program.exported.exported.out_avals]
    if shapes != [tuple(out_shape)]:
        fail("shapes", f"under jax.jit, {name} at input shapes {[tuple(s.shape) for s in specs]} returns "
                          f"shape(s) {shapes}, expected one array of shape {tuple(out_shape)}.")
    return program


# --------------------------------------------------------------------------- positive_mean

def _positive_mean_reference(x):
    x = np.asarray(x, np.float64)
    return x[x > 0].mean() if (x > 0).any() else 0.0


def _check_mean(got, x, what):
    """got against the mean of x's positive entries; the usual mistakes are told which."""
    x = np.asarray(x, np.float64)
    try:
        check_close(got, _positive_mean_reference(x), what=what, idea="shapes", dtype=np.float32)
    except ExerciseFailure as exc:
        if np.shape(got) == ():
            g = float(got)
            flat = x.ravel()
            idx = np.concatenate([np.flatnonzero(flat > 0), np.zeros(int(np.sum(flat <= 0)), np.int64)])
            if np.isclose(g, np.sum(np.where(x > 0, x, 0.0)) / x.size, rtol=1e-4):
                fail("shapes", f"{exc.detail} It divides by the number of all entries: a mean of the "
                                  "positive entries divides by how many entries are positive.")
            if (flat == 0).any() and np.isclose(g, flat[flat >= 0].mean(), rtol=1e-4):
                fail("shapes", f"{exc.detail} It counts zeros as positive entries: a zero is not positive, "
                                  "and counting it changes the mean.")
            if np.isclose(g, flat[idx].mean(), rtol=1e-4):
                fail("shapes", f"{exc.detail} It averages the padding too: the indices that pad a "
                                  "fixed-size list of positions point at a real entry, which then counts.")
        raise


def test_positive_mean(k):
    # One program per shape: exported with the data traced, a scalar out; its values judged.
    by_shape = {shape: _fixed_shapes(k, "positive_mean", [Spec(shape, "float32")], ()) for shape in ((4,), (3, 4))}
    for none in (-k.rng.uniform(0.0, 2.0, size=4).astype(np.float32),
                 -k.rng.uniform(0.1, 2.0, size=(3, 4)).astype(np.float32)):
        none[0] = 0.0  # a zero is not positive either
        got = np.asarray(by_shape[none.shape](none))
        if got.shape != () or not np.isfinite(got) or got != 0.0:
            shown = got.tolist() if got.ndim else got.item()
            fail("shapes", f"jax.jit(positive_mean) on an input with no positive entry returned "
                              f"{shown}, expected 0.0 (watch out for 0 / 0).")
    for trial, shape in enumerate([(4,), (3, 4), (3, 4), (4,)]):
        x = k.rng.normal(size=shape).astype(np.float32)
        order = k.rng.permutation(x.size)
        if trial == 0:  # a positive first entry: an answer that averages padding indices (0) then
            order = np.concatenate([[0], order[order != 0]])  # differs from one dividing by every entry
        i, j = order[:2]
        x.flat[i], x.flat[j] = abs(x.flat[i]) + 0.5, -abs(x.flat[j]) - 0.5  # some positive, some not
        if trial < 2:  # a zero among them: not positive, so not counted
            x.flat[k.rng.permutation([m for m in range(x.size) if m not in (i, j)])[0]] = 0.0
        if trial == 0:  # a second positive entry: with x[0] the only one, an answer that pads with
            # index 0 would average x[0] alone, the right mean, and its mistake would show only later
            other = [m for m in range(x.size) if m not in (i, j) and x.flat[m] != 0.0][0]
            x.flat[other] = abs(x.flat[other]) + 0.5
        _check_mean(by_shape[shape](x), x, f"jax.jit(positive_mean)'s result on random input #{trial + 1}")


# --------------------------------------------------------------------------- masked_sequence_sum

def _masked_sum_reference(tokens, lengths):
    tokens = np.asarray(tokens, np.float64)
    return np.array([tokens[i, :int(n)].sum() for i, n in enumerate(lengths)])


def _check_sums(got, tokens, lengths, what):
    """got against the masked sums; the usual masking mistakes are told which."""
    try:
        check_close(got, _masked_sum_reference(tokens, lengths), what=what, idea="shapes", dtype=np.float32)
    except ExerciseFailure as exc:
        t, n = np.asarray(tokens, np.float64), np.asarray(lengths)
        g = np.asarray(got, np.float64) if np.shape(got) == n.shape else None
        pos = np.arange(t.shape[1])[None, :]

        def close(want):
            return g is not None and np.allclose(g, want, rtol=1e-4, atol=1e-4)

        want = _masked_sum_reference(tokens, lengths)
        if g is not None and not np.all(np.isfinite(t)) and np.any(~np.isfinite(g) & np.isfinite(want)):
            fail("shapes", f"{exc.detail} The padding held nan or inf, and it reached the result: "
                              "a padding entry multiplied by a floating-point zero is still nan (nan * 0 and "
                              "inf * 0 are nan in floating point). The padding's values must never enter the "
                              "arithmetic.")
        if g is not None and np.any(n == 0) and not np.allclose(g[n == 0], 0.0):
            fail("shapes", f"{exc.detail} A row of length 0 must sum to 0: it has no real entry, and "
                              "no last real position either.")
        if close(np.sum(np.where(pos <= n[:, None], t, 0.0), axis=1)):
            fail("shapes", f"{exc.detail} It also sums position lengths[i], the first padding entry.")
        if close(t.sum(axis=1)):
            fail("shapes", f"{exc.detail} It sums the padding too.")
        raise


def _padded(rng, batch, max_len, lengths, wild=False):
    """A padded batch; its padding holds odd finite values, or (``wild``) nan, inf and -inf too,
    which the prompt allows: "do not assume anything about the values in the padding"."""
    tokens = rng.normal(size=(batch, max_len)).astype(np.float32)
    padding = np.arange(max_len) >= np.asarray(lengths)[:, None]
    tokens += 5.0 * padding  # odd padding values
    if wild:
        specials = rng.choice(np.float32([np.nan, np.inf, -np.inf]), size=tokens.shape)
        tokens = np.where(padding, specials, tokens).astype(np.float32)
    return tokens, np.asarray(lengths, np.int32)


def test_masked_sequence_sum(k):
    # One program per shape: exported with tokens and lengths traced, one sum per row out.
    by_shape = {(b, n): _fixed_shapes(k, "masked_sequence_sum", [Spec((b, n), "float32"), Spec((b,), "int32")], (b,))
                for b, n in ((2, 4), (3, 8), (3, 4))}
    # First every row with some padding (no empty row), then empty and full rows.
    tokens, lengths = _padded(k.rng, 2, 4, k.rng.integers(1, 3, size=2))  # 2 or 3 padding entries
    _check_sums(by_shape[(2, 4)](tokens, lengths), tokens, lengths,
                f"jax.jit(masked_sequence_sum) with lengths {lengths.tolist()}")
    for trial, (batch, max_len) in enumerate([(2, 4), (3, 8), (3, 8), (2, 4)]):
        lengths = k.rng.integers(0, max_len + 1, size=batch)
        lengths[0], lengths[-1] = 0, max_len  # an empty row and a full one
        tokens, lengths = _padded(k.rng, batch, max_len, lengths)
        _check_sums(by_shape[(batch, max_len)](tokens, lengths), tokens, lengths,
                    f"jax.jit(masked_sequence_sum)'s result on random input #{trial + 1}")
    # Then padding that holds nan, inf and -inf (every row but the full one has some).
    for trial, (batch, max_len) in enumerate([(3, 8), (2, 4)]):
        lengths = k.rng.integers(0, max_len, size=batch)
        lengths[-1] = max_len
        tokens, lengths = _padded(k.rng, batch, max_len, lengths, wild=True)
        _check_sums(by_shape[(batch, max_len)](tokens, lengths), tokens, lengths,
                    f"jax.jit(masked_sequence_sum) on random input #{trial + 1} whose padding holds nan and inf")
        # Called directly too (fail-only, in the kernel): each operation then runs on its own, and
        # no compiler rewrite of the whole program can hide padding that enters the arithmetic.
        what = f"masked_sequence_sum (called directly) on random input #{trial + 1} whose padding holds nan and inf"
        _check_sums(call(k.fn("masked_sequence_sum"), AsJax(tokens), AsJax(lengths), what=what),
                    tokens, lengths, what)
    # A row's own entries are summed whatever they hold: an inf among them makes that row's sum inf.
    lengths = k.rng.integers(2, 8, size=3)
    lengths[-1] = 8
    tokens, lengths = _padded(k.rng, 3, 8, lengths, wild=True)
    tokens[0, int(k.rng.integers(0, lengths[0]))] = np.inf
    what = "jax.jit(masked_sequence_sum) on an input whose row 0 holds inf among its own entries"
    try:
        _check_sums(by_shape[(3, 8)](tokens, lengths), tokens, lengths, what)
    except ExerciseFailure as exc:
        if "padding" in exc.detail:
            raise
        fail("shapes", f"{exc.detail} A row's own entries count whatever they hold: the sum of entries "
                          "one of which is inf is inf; only the padding must stay out of the sum.")
    # The visible test's inputs too, so that no grade passes what it fails.
    for tokens, lengths, what in [
            ([[1.0, 2.0, 3.0, 9.0], [4.0, 5.0, 7.0, 7.0]], [3, 1], "on the example"),
            ([[1.0, 2.0, np.nan, np.inf], [4.0, -1.0, 0.5, 2.0], [np.nan, -np.inf, 3.0, 1.0]], [2, 4, 0],
             "on lengths [2, 4, 0], padding that holds nan and inf")]:
        tokens, lengths = np.asarray(tokens, np.float32), np.asarray(lengths, np.int32)
        _check_sums(by_shape[tokens.shape](tokens, lengths), tokens, lengths, f"jax.jit(masked_sequence_sum) {what}")


# --------------------------------------------------------------------------- first_k_positive

def _first_k_reference(x, k):
    idx = np.flatnonzero(np.asarray(x) > 0)[:k]
    return np.concatenate([idx, -np.ones(k - len(idx), np.int64)]).astype(np.int32)


def _check_first(got, x, k, what):
    """got against the reference; padding with another value, or counting zeros, is told so."""
    want = _first_k_reference(x, k)
    if np.shape(got) == want.shape and np.asarray(got).dtype.kind not in "iu":
        fail("dynamic_shapes", f"{what} is an array of {np.asarray(got).dtype.name}: the contract is an integer "
                                  f"array of shape ({k},), indices (and -1 where there are fewer than k).")
    try:
        check_close(got, want, what=what, idea="dynamic_shapes", dtype=np.int32)
    except ExerciseFailure as exc:
        g = np.asarray(got) if np.shape(got) == want.shape else None
        if g is not None and np.any(want < 0) and np.array_equal(g[want >= 0], want[want >= 0]):
            fail("dynamic_shapes", f"{exc.detail} It pads with {g[want < 0][0].item()!r} where there are fewer than "
                                      "k positive entries; pad with -1, never a valid index.")
        if g is not None and np.array_equal(g, _first_k_reference(np.asarray(x) + (np.asarray(x) == 0), k)):
            fail("dynamic_shapes", f"{exc.detail} It counts zeros as positive: a zero is not positive.")
        nan = np.isnan(np.asarray(x, np.float64))
        if g is not None and nan.any():
            as_positive = _first_k_reference(np.where(nan, 1.0, x), k)  # nan taken for a positive entry
            if np.array_equal(g, as_positive) or np.array_equal(g, np.where(np.isin(as_positive, np.flatnonzero(nan)),
                                                                             -1, as_positive)):
                fail("dynamic_shapes", f"{exc.detail} A nan entry takes one of the k places: nan is not "
                                          "positive, and the positive entries after it belong in those places.")
        raise


def test_first_k_positive(k):
    # One program per k (static): exported with the data traced, k indices out; its values judged.
    by_k = {kk: _fixed_shapes(k, "first_k_positive", [Spec((5,), "float32")], (kk,), static_argnames=("k",),
                              kwargs={"k": kk}) for kk in (2, 4, 7)}
    neg = -k.rng.uniform(0.5, 3.0, size=5).astype(np.float32)
    _check_first(by_k[4](neg), neg, 4,
                 f"first_k_positive({np.round(neg.astype(np.float64), 3).tolist()}, k=4) (no positive entry)")
    for trial in range(6):
        x = k.rng.integers(-3, 4, size=5).astype(np.float32)
        if trial == 0:  # a zero before a positive entry, and fewer positive entries than k
            x = k.rng.integers(-3, 1, size=5).astype(np.float32)
            x[int(k.rng.integers(0, 3))] = 0.0
            x[int(k.rng.integers(3, 5))] = float(k.rng.integers(1, 4))
        kk = 4 if trial == 0 else int(k.rng.choice([2, 4]))  # fewer or more positive entries than k
        _check_first(by_k[kk](x), x, kk, f"first_k_positive({x.tolist()}, k={kk})")
    # nan is not positive (nan > 0 is false), inf is: a nan before positive entries, and more
    # positive entries after it than k, so that a nan that takes a place pushes one out.
    for kk in (2, 4):
        x = k.rng.uniform(0.5, 3.0, size=5).astype(np.float32)
        x[0] = np.nan
        x[int(k.rng.integers(1, 5))] = np.inf if kk == 2 else -float(k.rng.integers(1, 4))
        if kk == 4:
            x[int(k.rng.integers(1, 3))] = np.nan
        shown = np.round(x.astype(np.float64), 3).tolist()
        _check_first(by_k[kk](x), x, kk, f"first_k_positive({shown}, k={kk}) (nan is not positive)")
    # k larger than len(x): every index of a positive entry, then padding up to k.
    x = k.rng.integers(-3, 4, size=5).astype(np.float32)
    x[int(k.rng.integers(0, 5))] = 1.0
    _check_first(by_k[7](x), x, 7, f"first_k_positive({x.tolist()}, k=7) (k larger than len(x))")
    # The visible test's inputs too, so that no grade passes what it fails.
    for x, kk in [([0.0, 2.0, -1.0, 3.0, 5.0], 2), ([0.0, 2.0, -1.0, 3.0, 5.0], 4), ([0.0, 2.0, -1.0, 3.0, 5.0], 7),
                  ([np.nan, 4.0, -1.0, 2.0, 1.0], 2)]:
        x = np.asarray(x, np.float32)
        _check_first(by_k[kk](x), x, kk, f"first_k_positive({x.tolist()}, k={kk})")


# --------------------------------------------------------------------------- bucket_length

def _bucket_reference(n):
    return min(b for b in BUCKETS if b >= n)


def test_bucket_length(k):
    # Every length in one request (the fixture calls bucket_length once per n in the kernel);
    # if some n raised, one request per n, so that the feedback names the first n that fails.
    try:
        got = k.call(Fixture("call_each"), Ref("bucket_length"), [(n,) for n in range(1, 257)])
    except LearnerError:
        got = None
    if not isinstance(got, list) or len(got) != 256:
        bucket_length = k.fn("bucket_length")
        got = (call(bucket_length, n, what=f"bucket_length({n})") for n in range(1, 257))
    lengths = {}
    for n, b in zip(range(1, 257), got):
        if type(b) is not int:
            fail("bucketing", f"bucket_length({n}) returned a {type(b).__module__}.{type(b).__name__}, not a "
                                 "Python int: the length is a host-side value for the padding code, and the "
                                 "contract is a Python int.")
        try:
            check_equal(b, _bucket_reference(n), what=f"bucket_length({n}), the smallest bucket that holds {n},",
                           idea="bucketing")
        except ExerciseFailure as exc:
            if isinstance(b, (int, np.integer)) and int(b) in BUCKETS and int(b) >= n:
                fail("bucketing", f"{exc.detail} It holds {n} but is not the smallest bucket that does: "
                                     "every extra padded position is wasted work.")
            raise
        lengths[n] = int(b)
    # The chapter's kernel over lengths from 1 to 256 (every bucket's edges and random ones),
    # padded here to the learner's buckets: at most 5 compiles (a kernel-side claim, an extra:
    # the values above already fix the shapes).
    ns = sorted({1, 16, 17, 32, 33, 64, 65, 128, 129, 256} | {int(n) for n in k.rng.integers(1, 257, size=22)})
    calls = []
    for n in ns:
        tokens = np.zeros(lengths[n], np.float32)
        tokens[:n] = k.rng.normal(size=n)
        calls.append(((Ref("kernel"), tokens, np.arange(lengths[n]) < n), {}))
    k.claim("check_compiles_at_most", Fixture("jit_call"), calls, 5,
            what=f"jax.jit(kernel) over {len(ns)} lengths from 1 to 256",
            why="Pad every length to one of a few buckets.")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "positive_mean": [
        ('''
def positive_mean(x):
    positives = x[jnp.where(x > 0)]  # integer indices, but still a data-dependent length
    return jnp.sum(positives) / jnp.maximum(positives.size, 1)
''', "positive_mean asked for a shape that depends on the values", "dynamic_shapes"),
        ('''
def positive_mean(x):
    return jnp.mean(jnp.where(x > 0, x, 0.0))  # divides by every entry, not by the positives
''', "It divides by the number of all entries", "shapes"),
        ('''
def positive_mean(x):
    mask = x > 0
    return jnp.sum(jnp.where(mask, x, 0.0)) / jnp.sum(mask)  # 0 / 0 when nothing is positive
''', "on an input with no positive entry returned nan", "shapes"),
        ('''
def positive_mean(x):
    idx = jnp.nonzero(x.ravel() > 0, size=x.size)[0]  # pads with index 0, a real entry
    return jnp.mean(x.ravel()[idx])
''', "It averages the padding too: the indices that pad", "shapes"),
        ('''
def positive_mean(x):
    mask = x >= 0  # counts zeros as positive: right without zeros, and with no positive entry
    return jnp.sum(jnp.where(mask, x, 0.0)) / jnp.maximum(jnp.sum(mask), 1)
''', "It counts zeros as positive entries", "shapes"),
    ],
    "masked_sequence_sum": [
        ('''
def masked_sequence_sum(tokens, lengths):
    # nan and inf made finite everywhere first: the padding is safe, but an inf in a row's own
    # entries is changed too (to the largest float32), so that row's sum is no longer inf
    mask = jnp.arange(tokens.shape[1])[None, :] < lengths[:, None]
    return jnp.sum(jnp.nan_to_num(tokens) * mask, axis=1)
''', "A row's own entries count whatever they hold", "shapes"),
        ('''
def masked_sequence_sum(tokens, lengths):
    return jnp.stack([jnp.sum(tokens[i, :int(lengths[i])]) for i in range(tokens.shape[0])])
''', "masked_sequence_sum asked for a shape that depends on the values", "dynamic_shapes"),
        ('''
def masked_sequence_sum(tokens, lengths):
    mask = jnp.arange(tokens.shape[1])[None, :] <= lengths[:, None]  # one entry too many
    return jnp.sum(jnp.where(mask, tokens, 0.0), axis=1)
''', "It also sums position lengths[i], the first padding entry", "shapes"),
        ('''
def masked_sequence_sum(tokens, lengths):
    return jnp.sum(tokens, axis=1)  # assumes the padding is zero
''', "It sums the padding too", "shapes"),
        ('''
def masked_sequence_sum(tokens, lengths):
    sums = jnp.cumsum(tokens, axis=1)
    return sums[jnp.arange(tokens.shape[0]), lengths - 1]  # a length of 0 reads index -1
''', "A row of length 0 must sum to 0", "shapes"),
        ('''
def masked_sequence_sum(tokens, lengths):
    weights = jnp.where(jnp.arange(tokens.shape[1])[None, :] < lengths[:, None], 1.0, 0.0)
    return jnp.sum(tokens * weights, axis=1)  # nan * 0 is nan: the padding leaks in
''', "The padding held nan or inf, and it reached the result", "shapes"),
        ('''
_row_sums_jit = jax.jit(lambda tokens, lengths: jnp.stack([jnp.sum(tokens[i, :n]) for i, n in enumerate(lengths)]),
                        static_argnums=1)


def masked_sequence_sum(tokens, lengths):
    # right sums, but the lengths are made static (a compile per new lengths)
    return _row_sums_jit(tokens, tuple(int(n) for n in lengths))
''', "masked_sequence_sum asked for a shape that depends on the values", "dynamic_shapes"),
        ('''
def masked_sequence_sum(tokens, lengths):
    # the starting code: running totals from one product with a triangle of ones, read at each
    # row's last real position; a row of length 0 reads position -1, the row's full total
    max_len = tokens.shape[1]
    upper = jnp.triu(jnp.ones((max_len, max_len), tokens.dtype))
    running = tokens @ upper
    return jnp.take_along_axis(running, lengths[:, None] - 1, axis=1)[:, 0]
''', "A row of length 0 must sum to 0", "shapes"),
        ('''
def masked_sequence_sum(tokens, lengths):
    # half a repair: empty rows chosen to be 0, but nan or inf padding still meets a zero in the product
    max_len = tokens.shape[1]
    upper = jnp.triu(jnp.ones((max_len, max_len), tokens.dtype))
    running = tokens @ upper
    last = jnp.take_along_axis(running, jnp.maximum(lengths - 1, 0)[:, None], axis=1)[:, 0]
    return jnp.where(lengths > 0, last, 0.0)
''', "The padding held nan or inf, and it reached the result", "shapes"),
        ('''
def masked_sequence_sum(tokens, lengths):
    # the padding cleared by multiplying with a float mask: nan * 0.0 is still nan
    real = (jnp.arange(tokens.shape[1])[None, :] < lengths[:, None]).astype(tokens.dtype)
    upper = jnp.triu(jnp.ones((tokens.shape[1],) * 2, tokens.dtype))
    running = (tokens * real) @ upper
    last = jnp.take_along_axis(running, jnp.maximum(lengths - 1, 0)[:, None], axis=1)[:, 0]
    return jnp.where(lengths > 0, last, 0.0)
''', "The padding held nan or inf, and it reached the result", "shapes"),
    ],
    "first_k_positive": [
        ('''
def first_k_positive(x, k):
    idx = jnp.nonzero(x > 0)[0]  # data-dependent length, padded afterwards
    return jnp.concatenate([idx, -jnp.ones(k, idx.dtype)])[:k]
''', "first_k_positive asked for a shape that depends on the values", "dynamic_shapes"),
        ('''
def first_k_positive(x, k):
    return jnp.nonzero(x > 0, size=k)[0]  # pads with 0, a valid index, instead of -1
''', "It pads with 0 where there are fewer than k positive entries", "dynamic_shapes"),
        ('''
def first_k_positive(x, k):
    return jnp.nonzero(x >= 0, size=k, fill_value=-1)[0]  # counts zeros as positive
''', "It counts zeros as positive", "dynamic_shapes"),
        ('''
def first_k_positive(x, k):
    return jnp.where(x > 0, jnp.arange(x.shape[0]), -1)  # a fixed shape, but x's length, not k
''', "returns shape(s) [(5,)], expected one array of shape (2,)", "shapes"),
        ('''
def first_k_positive(x, k):
    # sorted positions of the positive entries, then the first k: only len(x) of them when k > len(x)
    idx = jnp.sort(jnp.where(x > 0, jnp.arange(x.shape[0]), x.shape[0]))[:k]
    return jnp.where(idx < x.shape[0], idx, -1)
''', "returns shape(s) [(5,)], expected one array of shape (7,)", "shapes"),
        ('''
def first_k_positive(x, k):
    found = []  # a Python walk that stops at the k-th positive entry
    for i in range(x.shape[0]):
        if x[i] > 0:
            found.append(i)
            if len(found) == k:
                break
    return jnp.array(found + [-1] * (k - len(found)), jnp.int32)
''', "used a traced value in a Python `if`", "control_flow"),
        ('''
def first_k_positive(x, k):
    # the starting code: a stable sort on "is not positive"; k places only up to len(x), and a
    # nan (nan <= 0 is false) sorts among the positive entries and then becomes -1 in their place
    order = jnp.argsort(x <= 0, stable=True)
    first = order[:k]
    return jnp.where(x[first] > 0, first, -1)
''', "returns shape(s) [(5,)], expected one array of shape (7,)", "shapes"),
        ('''
def first_k_positive(x, k):
    # half a repair: room for k places, but the sort still asks "at most zero", false for nan
    order = jnp.argsort(x <= 0, stable=True)
    order = jnp.concatenate([order, jnp.zeros(max(k - x.shape[0], 0), order.dtype)])[:k]
    return jnp.where((jnp.arange(k) < x.shape[0]) & (x[order] > 0), order, -1)
''', "A nan entry takes one of the k places", "dynamic_shapes"),
        ('''
def first_k_positive(x, k):
    # "not at most zero" is not "positive": nan <= 0 is false, so nan entries are counted
    return jnp.nonzero(~(x <= 0), size=k, fill_value=-1)[0]
''', "A nan entry takes one of the k places", "dynamic_shapes"),
        ('''
def first_k_positive(x, k):
    # the k best scores, earlier positive entries first; but with fewer positive entries than k
    # the places left over hold indices of entries that are not positive
    n = x.shape[0]
    score = jnp.where(x > 0, n - jnp.arange(n), 0)
    _, idx = jax.lax.top_k(score, min(k, n))
    return jnp.concatenate([idx.astype(jnp.int32), jnp.full((k - min(k, n),), -1, jnp.int32)])
''', "It pads with", "dynamic_shapes"),
        ('''
def first_k_positive(x, k):
    # half a repair: the sort asks the contract's question, but there are k places only up to len(x)
    order = jnp.argsort(~(x > 0), stable=True)[:k]
    return jnp.where(x[order] > 0, order, -1)
''', "returns shape(s) [(5,)], expected one array of shape (7,)", "shapes"),
        ('''
def first_k_positive(x, k):
    idx = jnp.nonzero(x > 0, size=k, fill_value=-1)[0]
    return idx.astype(jnp.float32)  # the right positions, as floats
''', "the contract is an integer array of shape", "dynamic_shapes"),
    ],
    "bucket_length": [
        ('''
def bucket_length(n):
    return 1 << (n - 1).bit_length()  # next power of two: too many small buckets
''', "bucket_length(1), the smallest bucket that holds 1, is 1, expected 16", "bucketing"),
        ('''
def bucket_length(n):
    return min(b for b in BUCKETS if b > n)  # a full bucket is skipped
''', "bucket_length(16), the smallest bucket that holds 16, is 32, expected 16", "bucketing"),
        ('''
def bucket_length(n):
    return max(16, n)  # only short sequences are bucketed
''', "bucket_length(17), the smallest bucket that holds 17, is 17, expected 32", "bucketing"),
        ('''
def bucket_length(n):
    return BUCKETS[-1]  # holds every n in one compile, but pads a 1-token sequence to 256
''', "It holds 1 but is not the smallest bucket that does", "bucketing"),
        ('''
def bucket_length(n):
    return np.asarray(BUCKETS)[np.searchsorted(BUCKETS, n)]  # the right bucket, as a NumPy integer
''', "not a Python int", "bucketing"),
    ],
}

RIGHT = {
    "masked_sequence_sum": [
        '''
def masked_sequence_sum(tokens, lengths):
    # the starting code repaired: padding chosen to be 0 before the product, empty rows chosen to be 0
    max_len = tokens.shape[1]
    real = jnp.arange(max_len)[None, :] < lengths[:, None]
    upper = jnp.triu(jnp.ones((max_len, max_len), tokens.dtype))
    running = jnp.where(real, tokens, 0.0) @ upper
    last = jnp.take_along_axis(running, jnp.maximum(lengths - 1, 0)[:, None], axis=1)[:, 0]
    return jnp.where(lengths > 0, last, 0.0)
''',
        '''
def masked_sequence_sum(tokens, lengths):
    # running totals by a cumulative sum: position m holds entries 0..m only, so the padding after a
    # row's last real position never enters it; an empty row is chosen to be 0
    running = jnp.cumsum(tokens, axis=1)
    last = jnp.take_along_axis(running, jnp.clip(lengths - 1, 0, None)[:, None], axis=1)[:, 0]
    return jnp.where(lengths > 0, last, jnp.zeros_like(last))
''',
        '''
def masked_sequence_sum(tokens, lengths):
    # running totals that start with an empty prefix: column n holds the sum of the first n entries
    running = jnp.cumsum(tokens, axis=1)
    running = jnp.concatenate([jnp.zeros((tokens.shape[0], 1), tokens.dtype), running], axis=1)
    return jnp.take_along_axis(running, lengths[:, None], axis=1)[:, 0]
''',
        '''
def masked_sequence_sum(tokens, lengths):
    real = jnp.arange(tokens.shape[1])[None, :] < lengths[:, None]
    return jnp.sum(tokens, axis=1, where=real)  # a masked reduction: the padding is never added
''',
    ],
    "first_k_positive": [
        '''
def first_k_positive(x, k):
    # no nonzero: each positive entry's rank among them, then a scatter of its index into slot rank
    positive = x > 0
    rank = jnp.cumsum(positive) - 1
    slot = jnp.where(positive & (rank < k), rank, k)  # slot k collects everything that is dropped
    out = jnp.full((k + 1,), -1, jnp.int32).at[slot].set(jnp.arange(x.shape[0], dtype=jnp.int32))
    return out[:k]
''',
        '''
def first_k_positive(x, k):
    # the k best scores, earlier positive entries first; -1 where the score says "not positive",
    # and the places beyond len(x) added as -1
    n = x.shape[0]
    score = jnp.where(x > 0, n - jnp.arange(n), 0)
    best, idx = jax.lax.top_k(score, min(k, n))
    idx = jnp.where(best > 0, idx, -1).astype(jnp.int32)
    return jnp.concatenate([idx, jnp.full((k - min(k, n),), -1, jnp.int32)])
''',
        '''
def first_k_positive(x, k):
    # a stable sort puts the positive entries first, in order; padded to k, then -1 past their count
    positive = x > 0
    order = jnp.argsort(~positive, stable=True).astype(jnp.int32)
    order = jnp.concatenate([order, jnp.full((max(k - x.shape[0], 0),), -1, jnp.int32)])[:k]
    return jnp.where(jnp.arange(k) < jnp.sum(positive), order, -1)
''',
    ],
    "positive_mean": [
        '''
def positive_mean(x):
    positive = x > 0
    # a masked mean; with no positive entry it is 0 / 0, and the selection returns 0.0 instead
    return jnp.where(positive.any(), jnp.mean(x, where=positive), 0.0)
''',
    ],
}
