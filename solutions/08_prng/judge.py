"""The judge of 08_prng (trusted: runs in the grader, never in the learner's kernel).

One ``test_<name>(k)`` per graded test cell; ``k`` is an :class:`autograder.judge.Kernel`.
Keys are sent as typed keys made from fresh seeds (``Key``); everything the exercises promise
is checked here from the returned values: the same key gives the same numbers, different keys
different ones, dropout's kept entries are scaled and its keep fraction is 1 - rate, init_mlp's
shapes, zero biases and per-layer scale, noisy_batch's rows keep their noise when the batch is
cut. Statistical checks use bounds that fail a correct answer with probability below 1e-11
each (Hoeffding for a fraction, Laurent-Massart for a chi-square, a Gaussian tail for a mean),
since the inputs are fresh at every grading. Every value judged comes from the learner's
exported program (dropout's masks also from direct calls, eager: the same key twice, then another) (:mod:`autograder.judge.programs`; the key as raw ``uint32[2]`` data, the judge's
own keys fed to it; ``rate`` and ``sizes`` static), run here; noisy_batch with
``jax_threefry_partitionable`` off too (the flag is read while tracing: that program is
exported through the ``threefry_jit_call`` fixture, which turns it off). Kernel-side claims:
JAX's key-reuse checker only (the kernel alone sees a key consumed twice); init_mlp's key
reuse also has an outside symptom, same-shaped layers with the same numbers, checked here.
noisy_batch's program is read at 3 and 6 rows before any is run: one that grows with the batch
(a Python loop over the rows, unrolled) is told so instead of timing out; then at a number of rows
past those programs' operations (a loop unrolled over rows padded to a fixed count grows or fails
there), and run at one beyond every size written in them (:func:`autograder.judge.effect.beyond`).
"""
import numpy as np

from autograder.judge import call, check_close, ExerciseFailure, fail
from autograder.judge import effect, programs
from autograder.judge import AsJax, Fixture, Key, Ref, Spec

PUBLISHED = 512  # the most rows noisy_batch is tried at (the visible test's 12, this judge's 256 to 512)
_TAIL = float(np.log(1e11))  # each statistical bound fails a correct answer with p < 1e-11


def _f32(x):
    return AsJax(np.asarray(x, np.float32))


def _keyed(k, name, static_argnums=(), label=None):
    """``f(Key(seed), *args)``: ``name`` computed by its exported program at the arguments'
    signature, the key traced as raw data and fed the judge's key ``seed`` (arguments at
    ``static_argnums``, counted from the key's 0, fixed in the program). A learner error while
    tracing is raised for ``ag.call`` to translate."""
    def f(key, *args):
        program = programs.trace(k, name, Spec((2,), "uint32"), *args, static_argnums=static_argnums,
                                 raw_errors=True, label=label or f"jax.jit({name})")
        return program(programs.raw_key(key.seed), *(a for i, a in enumerate(args, start=1)
                                                     if i not in static_argnums))
    f.__name__ = f"jax.jit({name})"
    return f


def _rms_bounds(n):
    """(low, high) for sqrt(mean(z**2)) / sigma of ``n`` independent N(0, sigma**2) draws:
    Laurent-Massart, each side exceeded with probability < exp(-_TAIL)."""
    r = np.sqrt(_TAIL / n)
    return float(np.sqrt(max(1.0 - 2.0 * r, 0.0))), float(np.sqrt(1.0 + 2.0 * r + 2.0 * _TAIL / n))


def _mean_bound(n):
    """|mean| / sigma of ``n`` independent N(0, sigma**2) draws stays below this (p < 2 exp(-_TAIL))."""
    return float(np.sqrt(2.0 * _TAIL / n))


# --------------------------------------------------------------------------- dropout

def _dropout_mask(drop, seed, x, rate, what=None):
    """The keep-mask of jax.jit(dropout)(key(seed), x, rate) (or of ``drop``, named ``what``), its
    kept entries checked."""
    what = what or f"jax.jit(dropout)(key, x, {rate})"
    out = np.asarray(call(drop, Key(seed), _f32(x), rate, what=what))
    if out.shape != x.shape:
        fail("numerics", f"{what} has shape {out.shape}, expected the shape of x, {x.shape}.")
    kept = out != 0  # x has no zeros: a zero in the output means "dropped"
    check_close(np.where(kept, out, 0.0), np.where(kept, x.astype(np.float64) / (1.0 - rate), 0.0),
                   what=f"{what}: the kept entries (each must be x / (1 - rate))", dtype=np.float32)
    return kept


def test_dropout(k):
    drop = _keyed(k, "dropout", static_argnums=(2,))  # the program of jax.jit(dropout), rate static
    rate = round(float(k.rng.uniform(0.2, 0.45)), 2)  # keep probability 0.55 .. 0.8
    shape = (128, 64)
    x = (k.rng.uniform(0.5, 2.0, shape) * k.rng.choice([-1.0, 1.0], shape)).astype(np.float32)
    seeds = k.distinct_seeds(5)
    # Called directly (not under jax.jit) first: the same key twice gives the same mask, another
    # key another mask, whatever was called before (no state kept from one call to the next).
    direct = k.fn("dropout")
    eager = [_dropout_mask(direct, s, x, rate, what=f"dropout(key, x, {rate})")
             for s in (seeds[0], seeds[0], seeds[1])]
    if not np.array_equal(eager[0], eager[1]):
        fail("prng", f"called twice directly (not under jax.jit) with the same key, dropout(key, x, {rate}) gave "
                     "two different masks: the mask depends on something besides its inputs (state kept from "
                     "one call to the next).")
    if np.array_equal(eager[0], eager[2]):
        fail("prng", f"called directly (not under jax.jit) with two different keys, dropout(key, x, {rate}) gave "
                     "the same mask: the key does not decide the mask.")
    m0 = _dropout_mask(drop, seeds[0], x, rate)
    if not np.array_equal(m0, _dropout_mask(drop, seeds[0], x, rate)):
        fail("prng", "the same key gave two different masks: the randomness must come from `key` "
                        "alone, so that the same key gives the same numbers.")
    masks = [m0] + [_dropout_mask(drop, s, x, rate) for s in seeds[1:]]
    if np.array_equal(masks[0], masks[1]):
        fail("prng", "two different keys gave the same mask under jax.jit: draw the mask from `key` "
                        "with `jax.random`; a mask drawn while tracing is a constant of the compiled program.")
    for i in range(len(masks)):
        for j in range(i):
            if np.array_equal(masks[i], masks[j]):
                fail("prng", "two different keys gave the same mask: the mask must be drawn from `key`.")
    # Every entry gets its own draw: rows and columns do not share one pattern (for a correct
    # answer, two rows of 64 entries agree with probability < 0.68**64).
    for axis, name in ((0, "row"), (1, "column")):
        lines = np.moveaxis(masks[0], axis, 0)
        if sum(np.array_equal(lines[0], line) for line in lines[1:]) > 2:
            fail("prng", f"every {name} of the output got the same dropout pattern: draw one "
                            "independent keep/drop decision per entry.")
        # ... nor do any two of them (8128 pairs of rows: for a correct answer < 2e-7 in all).
        _, first, counts = np.unique(lines, axis=0, return_index=True, return_counts=True)
        if (counts > 1).any():
            twin = int(first[np.flatnonzero(counts > 1)[0]])
            again = next(i for i in range(twin + 1, len(lines)) if np.array_equal(lines[i], lines[twin]))
            fail("prng", f"{name}s {twin} and {again} of the output got the same dropout pattern: each entry "
                            "gets its own independent keep/drop decision, so no two of them share one.")
    # Independent draws: the number kept is itself random (binomial, standard deviation >= 45 here),
    # so eight keys keeping exactly as many entries happens with probability < 2e-15; a fixed count
    # (a permutation's first entries, a choice without replacement) keeps as many under every key.
    masks += [_dropout_mask(drop, s, x, rate) for s in k.distinct_seeds(8)[5:]]
    kept = {int(m.sum()) for m in masks}
    if len(kept) == 1:
        fail("prng", f"under each of {len(masks)} keys dropout kept exactly {kept.pop()} of the {x.size} entries: "
                        "with an independent keep/drop draw per entry the number kept varies from key to key "
                        "(here by about 45); a fixed number of kept entries ties every entry's draw to the "
                        "others'.")
    # The keep fraction, pooled over the masks, against 1 - rate (Hoeffding's bound).
    n = sum(m.size for m in masks)
    frac = float(np.mean([m.mean() for m in masks]))
    slack = float(np.sqrt((_TAIL + np.log(2.0)) / (2.0 * n)))
    if abs(frac - (1.0 - rate)) > slack:
        fail("numerics", f"with rate={rate} dropout kept {frac:.3f} of the entries (over {n} entries); "
                            f"each entry must be kept with probability 1 - rate = {1.0 - rate:.2f}.")
    # No key consumed twice (JAX's key-reuse checker, kernel-side: it inspects the
    # program traced under jit).
    k.claim("check_no_key_reuse", Fixture("trace_static"), (Ref("dropout"), ["rate"], Key(seeds[1]), _f32(x), rate),
            jit=False, what=f"jax.jit(dropout)(key, x, {rate})")


# --------------------------------------------------------------------------- init_mlp

def _layers(init, seed, sizes):
    """The weights of init_mlp(key(seed), sizes) as float64 arrays, structure, shapes and zero
    biases checked."""
    what = f"init_mlp(key, {sizes})"
    params = call(init, Key(seed), sizes, what=what)
    if not isinstance(params, list) or len(params) != len(sizes) - 1:
        fail("numerics", f"{what} must be a list of {len(sizes) - 1} layer dicts, got "
                            f"{type(params).__name__} of length {len(params) if hasattr(params, '__len__') else '?'} "
                            "(a tuple is another pytree structure than a list).")
    for i, (layer, m, n) in enumerate(zip(params, sizes[:-1], sizes[1:])):
        if not isinstance(layer, dict) or set(layer) != {"w", "b"}:
            fail("numerics", f"{what}[{i}] must be a dict with the keys 'w' and 'b'.")
        if tuple(np.shape(layer["w"])) != (m, n) or tuple(np.shape(layer["b"])) != (n,):
            fail("numerics", f"{what}[{i}] has w of shape {np.shape(layer['w'])} and b of shape "
                                f"{np.shape(layer['b'])}, expected {(m, n)} and {(n,)}.")
        if not np.issubdtype(np.asarray(layer["w"]).dtype, np.floating):
            fail("numerics", f"{what}[{i}]['w'] has dtype {np.asarray(layer['w']).dtype}; weights are floats.")
        if np.any(np.asarray(layer["b"]) != 0):
            fail("numerics", f"{what}[{i}]['b'] must be zeros.")
    return [np.asarray(layer["w"], np.float64) for layer in params]


def _same_numbers(ws, sizes):
    """The first pair of layers that got the same numbers (scaled back to unit variance, on
    their common leading entries), or strongly correlated ones when of the same shape."""
    unit = [w.ravel() * np.sqrt(m) for w, m in zip(ws, sizes[:-1])]
    for i in range(len(ws)):
        for j in range(i):
            n = min(unit[i].size, unit[j].size)
            a, b = unit[i][:n], unit[j][:n]
            if np.allclose(a, b, rtol=1e-4, atol=1e-5):
                return j, i
            # same shape: >= 576 entries, so |corr| > 0.5 is 12 standard errors for independent draws
            if ws[i].shape == ws[j].shape and abs(np.corrcoef(a, b)[0, 1]) > 0.5:
                return j, i
    return None


_SCALE_HINTS = (
    (lambda m, n: 1.0 / m, "The weights look scaled by 1 / fan_in; the standard deviation is "
                           "1 / sqrt(fan_in): divide standard normal draws by sqrt(sizes[i])."),
    (lambda m, n: 1.0, "The weights look unscaled (standard deviation 1): divide standard normal "
                       "draws by sqrt(sizes[i])."),
    (lambda m, n: 1.0 / np.sqrt(n), "The weights look scaled by 1 / sqrt(fan_out) (sizes[i + 1]); "
                                    "the scale comes from the fan-in, sizes[i]."),
)


def test_init_mlp(k):
    init = _keyed(k, "init_mlp", static_argnums=(1,), label="init_mlp")  # its program, sizes static
    # Layers 1 and 2 have the same shape. Layer 0's fan_out is >= 2 fan_in, and sqrt(fan_out) is
    # <= 0.75 fan_in, so a scale by 1 / sqrt(fan_out) or 1 / fan_in there is told apart.
    m0 = int(k.rng.integers(8, 13))
    h = int(k.rng.integers(max(24, 2 * m0), 37))
    sizes = (m0, h, h, h)
    seeds = k.distinct_seeds(19)  # the last only for the globals claim: a key no other call had
    first = _layers(init, seeds[0], sizes)
    # No key consumed twice (JAX's key-reuse checker, kernel-side).
    k.claim("check_no_key_reuse", "init_mlp", (Key(seeds[1]), sizes), jit=False, what=f"init_mlp(key, {sizes})")
    # ... nor a global changed (a key stream kept outside the function), kernel-side.
    k.claim("check_globals_unchanged", "init_mlp", Key(seeds[18]), sizes, what=f"init_mlp(key, {sizes})")
    # ... and its outside symptom: layers with the same numbers.
    same = _same_numbers(first, sizes)
    if same is not None:
        fail("prng", f"layers {same[0]} and {same[1]} of init_mlp(key, {sizes}) got identical (or strongly "
                        "correlated) weights: one key was used for more than one layer, "
                        "and each layer needs a key of its own, derived from `key`.")
    # The same key gives the same parameters; another key different ones.
    if not all(np.array_equal(u, v) for u, v in zip(first, _layers(init, seeds[0], sizes))):
        fail("prng", "init_mlp gave different parameters for the same key: the randomness must come "
                        "from `key` alone.")
    draws = [first] + [_layers(init, s, sizes) for s in seeds[2:18]]
    if any(np.allclose(u, v) for u, v in zip(draws[0], draws[1])):
        fail("prng", "init_mlp gave the same weights for two different keys: draw them from `key`.")
    # The scale: per layer, pooled over the keys, standard deviation 1 / sqrt(fan_in) and mean 0.
    failures = []
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = np.concatenate([d[i].ravel() for d in draws])
        target = 1.0 / np.sqrt(m)
        low, high = _rms_bounds(w.size)
        rms, mean = float(np.sqrt(np.mean(w * w))), float(w.mean())
        if low <= rms / target <= high and abs(mean) <= _mean_bound(w.size) * target:
            continue
        text = (f"layer {i} of init_mlp(key, {sizes}) has weights with mean {mean:.4f} and standard "
                f"deviation {w.std():.4f} (over {len(draws)} keys), expected 0 and 1 / sqrt({m}) = {target:.4f}.")
        hints = [hint for scale, hint in _SCALE_HINTS if low <= rms / scale(m, n) <= high]
        failures.append((len(hints) == 1, f"{text} {hints[0]}" if len(hints) == 1 else text))
    if failures:
        fail("numerics", next((t for hinted, t in failures if hinted), failures[0][1]))
    # The distribution, not only its scale: pooled over every layer and key (>= 20000 entries, each
    # in units of its layer's standard deviation), a normal distribution puts 4.55% beyond 2 and
    # 0.27% beyond 3 standard deviations (standard errors <= 0.15% and 0.04% here); a uniform one of
    # the same deviation puts none beyond 2, a Laplace one 1.4% beyond 3.
    # A truncated normal rescaled to that deviation (jax.nn.initializers' "truncated_normal" and
    # lecun_normal: cut at 2 of its own deviations, 2.27 of the result's) puts about 3.5% beyond 2 and
    # none beyond 3, where a normal puts at least 10 of 20000 (expected 54; fewer: p < 1e-13).
    unit = np.concatenate([d[i].ravel() * np.sqrt(m) for d in draws for i, m in enumerate(sizes[:-1])])
    beyond2, beyond3 = float(np.mean(np.abs(unit) > 2)), float(np.mean(np.abs(unit) > 3))
    if not (0.03 <= beyond2 <= 0.062 and 0.0005 <= beyond3 <= 0.008):
        fail("numerics", f"the weights of init_mlp(key, {sizes}) have the right standard deviation, but not the "
                         f"shape of a normal distribution: {beyond2:.2%} of them lie beyond 2 standard deviations "
                         f"and {beyond3:.2%} beyond 3, where a normal distribution puts about 4.6% and 0.3%. "
                         "The weights are drawn from a normal distribution with that deviation (its tails not cut).")


# --------------------------------------------------------------------------- noisy_batch

def _noisy(k, seed, x, partitionable=True):
    """jax.jit(noisy_batch)(key(seed), x): its exported program's value (JAX's default,
    `jax_threefry_partitionable` on), or with ``partitionable=False`` the value of the program
    exported through the ``threefry_jit_call`` fixture with the flag off (the flag is read while
    tracing, so that program draws as JAX does with it off)."""
    what = "jax.jit(noisy_batch)"
    if partitionable:
        out = call(_keyed(k, "noisy_batch"), Key(seed), np.asarray(x, np.float32), what=what)
    else:
        def off(key, a):
            program = programs.trace(k, Fixture("threefry_jit_call"), Ref("noisy_batch"), False, Spec((2,), "uint32"),
                                     a, static_argnums=(0, 1), raw_errors=True, label=what)
            return program(programs.raw_key(key.seed), a)
        out = call(off, Key(seed), np.asarray(x, np.float32), what=what)
    out = np.asarray(out)
    if out.shape != x.shape:
        fail("numerics", f"{what} has shape {out.shape}, expected the shape of x, {x.shape}.")
    return out.astype(np.float64)


def _check_not_unrolled(k, d, published):
    """The program of noisy_batch at 3 and 6 rows, read before any is run, then at a number of
    rows past those programs' operations (:func:`autograder.judge.effect.not_unrolled`): a loop
    over the rows in Python is unrolled, one copy of the draw per row, so it is told so instead of
    running out of time. Returns ``(far, written, small)``: a number of rows beyond every size
    written in the programs at 3 and 6 rows (:func:`autograder.judge.effect.beyond`), and the
    operations at 3."""
    def trace(rows):
        return programs.trace(k, "noisy_batch", Spec((2,), "uint32"), Spec((rows, d), "float32"),
                              label="jax.jit(noisy_batch)")

    return effect.not_unrolled(trace, (3, 6), published, k.rng, name="noisy_batch", unit="rows",
                               copy="one copy of the random draw per row", idea="per_example_keys",
                               advice="Draw every row's noise, from its own key, in a program whose size does "
                                      "not depend on the batch.")


def test_noisy_batch(k):
    n, d = int(k.rng.integers(256, 513)), int(k.rng.integers(4, 9))
    far, written, small = _check_not_unrolled(k, d, (12, PUBLISHED))
    cut = int(k.rng.integers(n // 4, 3 * n // 4))
    x = k.rng.normal(size=(n, d)).astype(np.float32)
    s0, s1, s2 = k.distinct_seeds(3)
    out = _noisy(k, s0, x)
    if not np.array_equal(out, _noisy(k, s0, x)):
        fail("prng", "called twice with the same key, jax.jit(noisy_batch) gave different noise: the "
                        "randomness must come from `key` alone, not from hidden global state.")
    other = _noisy(k, s1, x)
    if np.allclose(out, other):
        fail("prng", "two different keys gave the same noise under jax.jit: draw it from `key` with "
                        "`jax.random`; noise drawn while tracing (NumPy's global generator) is a constant "
                        "of the compiled program.")
    # A row's noise does not change when rows are cut from (or added to) the end of the batch,
    # with either setting of jax_threefry_partitionable (split-derived keys differ with it off).
    for flag in (True, False):
        full = out if flag else _noisy(k, s0, x, flag)
        if not np.allclose(_noisy(k, s0, x[:cut], flag), full[:cut], rtol=1e-5, atol=1e-5):
            fail("per_example_keys",
                    f"jax.jit(noisy_batch): the noise of the first {cut} rows changed when the batch was cut "
                    f"from {n} to {cut} rows (jax_threefry_partitionable={flag}). Each row's key must "
                    "come from `key` and the row's index alone (per-example keys), instead of one block "
                    "of numbers drawn for the whole batch, whose values depend on the batch's shape.")
    # The noise is independent of the data, different for every row, and standard normal.
    noise = out - x
    x2 = k.rng.normal(size=(n, d)).astype(np.float32)
    if not np.allclose(_noisy(k, s0, x2) - x2, noise, atol=1e-5):
        fail("per_example_keys", "the noise changed when the values of x changed: row i's noise must "
                                    "depend only on `key` and `i`, not on the data.")
    if (any(np.allclose(noise[0], r, atol=1e-5) for r in noise[1:])
            or any(np.allclose(a, b, atol=1e-5) for a, b in zip(noise[1:], noise[2:]))):
        fail("per_example_keys", "several rows got exactly the same noise: every row needs its own key, "
                                    "derived from `key` and the row's index, not the same `key` for each row.")
    twin = next((j for j in range(1, d) if np.allclose(noise[:, 0], noise[:, j], atol=1e-5)), None)
    if twin is not None:
        fail("numerics", f"in every row the noise of column {twin} equals that of column 0: each entry of a row gets "
                            "its own independent standard normal draw, not one number shared by the row.")
    pooled = np.concatenate([noise.ravel(), (other - x).ravel(), (_noisy(k, s2, x) - x).ravel()])
    low, high = _rms_bounds(pooled.size)
    rms, mean = float(np.sqrt(np.mean(pooled ** 2))), float(pooled.mean())
    if not (low <= rms <= high and abs(mean) <= _mean_bound(pooled.size)):
        fail("numerics", f"the noise has mean {mean:.3f} and standard deviation {pooled.std():.3f} "
                            f"(over {pooled.size} draws); standard normal noise has 0 and 1.")
    # ... and the shape of a normal distribution: 4.55% of the draws beyond 2 deviations (within 7
    # standard errors over >= 3072 draws); uniform noise of that deviation puts none there.
    share = float(np.mean(np.abs(pooled) > 2))
    slack = 7 * float(np.sqrt(0.0455 * 0.9545 / pooled.size))
    if abs(share - 0.0455) > slack:
        fail("numerics", f"the noise has mean about 0 and deviation about 1, but {share:.2%} of its {pooled.size} "
                            "draws lie beyond 2, where standard normal noise puts about 4.6%: it is not drawn "
                            "from a normal distribution.")
    # ... and at a number of rows beyond every size written in its programs (a count rows are
    # padded to, a loop's bound) and every one it was tried at: a row's noise is still its own
    # there, the first n rows keep theirs, and the program is no larger.
    beyond = f"at {far} rows, beyond every size written in its programs at 3 and 6 rows (up to {written})"
    xf = np.concatenate([x, k.rng.normal(size=(far - n, d)).astype(np.float32)])
    try:
        total = programs.trace(k, "noisy_batch", Spec((2,), "uint32"), Spec((far, d), "float32"),
                               label="jax.jit(noisy_batch)").total
        tail = _noisy(k, s0, xf) - xf
    except ExerciseFailure as exc:
        fail("per_example_keys", f"jax.jit(noisy_batch) fails {beyond}: it is written for the batch sizes it "
                                    f"was tried at (a loop over rows padded to a fixed count?): {exc.detail}")
    if effect.grows(small, total):
        fail("per_example_keys", f"the program of noisy_batch grows with the batch ({small} operations at 3 rows, "
                                    f"{total} {beyond}): a loop over the rows is unrolled into it.")
    if not np.allclose(tail[:n], noise, atol=1e-5):
        fail("per_example_keys", f"jax.jit(noisy_batch) {beyond}: the noise of the first {n} rows is not the "
                                    f"noise they got in a batch of {n}, so a row's noise depends on more than "
                                    "`key` and its index once the batch is that large.")
    low, high = _rms_bounds((far - n) * d)
    rest = tail[n:]
    rms, mean = float(np.sqrt(np.mean(rest ** 2))), float(rest.mean())
    if not (low <= rms <= high and abs(mean) <= _mean_bound(rest.size)):
        fail("per_example_keys", f"jax.jit(noisy_batch) {beyond}: the noise of rows {n} to {far - 1} has mean "
                                    f"{mean:.3f} and standard deviation {rest.std():.3f}, where standard normal "
                                    "noise has 0 and 1: rows past a fixed count get no noise of their own.")
    # No key consumed twice (JAX's key-reuse checker, kernel-side: it inspects the
    # program traced under jit).
    k.claim("check_no_key_reuse", Fixture("trace_static"), (Ref("noisy_batch"), [], Key(s1), _f32(x)),
            jit=False, what="jax.jit(noisy_batch)(key, x)")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "dropout": [
        ('''
def dropout(key, x, rate):
    rng = np.random.default_rng(0)  # seeded, so reproducible, but it ignores `key`
    keep = rng.random(x.shape) >= rate
    return jnp.where(keep, x / (1.0 - rate), 0.0)
''', "with two different keys, dropout(key, x, 0.", "prng"),
        ('''
def dropout(key, x, rate):
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x, 0.0)  # forgets to rescale the kept entries
''', "the kept entries (each must be x / (1 - rate)) is wrong", "numerics"),
        ('''
def dropout(key, x, rate):
    keep = jax.random.bernoulli(key, 1.0 - rate, (1, x.shape[1]))  # one mask shared by every row
    return jnp.where(keep, x / (1.0 - rate), 0.0)
''', "every row of the output got the same dropout pattern", "prng"),
        ('''
def dropout(key, x, rate):
    keep = jax.random.bernoulli(key, rate, x.shape)  # keeps with probability `rate`
    return jnp.where(keep, x / (1.0 - rate), 0.0)
''', "each entry must be kept with probability 1 - rate = 0.", "numerics"),
        ('''
def dropout(key, x, rate):
    # half the draws, used twice: the second half of the rows repeats the first half's mask
    half = jax.random.bernoulli(key, 1.0 - rate, (x.shape[0] // 2 + 1,) + x.shape[1:])
    keep = jnp.concatenate([half, half])[: x.shape[0]]
    return jnp.where(keep, x / (1.0 - rate), 0.0)
''', "of the output got the same dropout pattern: each entry gets its own", "prng"),
        ('''
def dropout(key, x, rate):
    # exactly round(n * (1 - rate)) entries kept, chosen by a permutation: not one draw per entry
    n = x.size
    kept = jax.random.permutation(key, n)[: int(round(n * (1.0 - rate)))]
    keep = jnp.zeros(n, bool).at[kept].set(True).reshape(x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)
''', "a fixed number of kept entries ties every entry's draw", "prng"),
        ('''
class Dropout:
    """Inverted dropout with a generator of its own, seeded from the first key it is given."""

    def __init__(self, rate, key):
        self.rate = rate
        self.rng = np.random.default_rng(np.asarray(jax.random.key_data(key)))  # reproducible

    def __call__(self, x):
        keep = self.rng.random(x.shape) >= self.rate
        return jnp.where(keep, x / (1.0 - self.rate), 0.0)


_LAYERS = {}  # one layer per rate, built on first use and kept between calls


def dropout(key, x, rate):
    """Zero each entry of `x` with probability `rate`; scale the survivors by 1 / (1 - rate)."""
    # TODO: eagerly it runs, yet the same key does not give the same mask twice; under jax.jit
    # it fails, or (after an eager call) gives every key one mask. Find both causes, then fix it.
    if rate not in _LAYERS:
        _LAYERS[rate] = Dropout(rate, key)
    return _LAYERS[rate](x)
''', "gave two different masks: the mask depends on something besides its inputs", "prng"),
        ('''
class Dropout:
    def __init__(self, rate, key):
        self.rate = rate
        self.rng = np.random.default_rng(np.asarray(jax.random.key_data(key)))

    def __call__(self, x):
        keep = self.rng.random(x.shape) >= self.rate
        return jnp.where(keep, x / (1.0 - self.rate), 0.0)


def dropout(key, x, rate):
    # half-fix: a new layer on every call, seeded from this key: right eagerly, NumPy under jit
    return Dropout(rate, key)(x)
''', "converted a traced array to NumPy", "async"),
        ('''
class Dropout:
    def __init__(self, rate, key):
        self.rate = rate
        self.key = key  # the first key it is given, kept

    def __call__(self, x):
        keep = jax.random.bernoulli(self.key, 1.0 - self.rate, x.shape)
        return jnp.where(keep, x / (1.0 - self.rate), 0.0)


_LAYERS = {}


def dropout(key, x, rate):
    # half-fix: jax.random inside, but the layer (and its first key) is still kept between calls
    if rate not in _LAYERS:
        _LAYERS[rate] = Dropout(rate, key)
    return _LAYERS[rate](x)
''', "with two different keys, dropout(key, x, 0.", "prng"),
        ('''
class _Keys:
    key = None

def dropout(key, x, rate):
    # a key kept between calls and split at every call: "fresh" masks
    if _Keys.key is None:
        _Keys.key = key
    _Keys.key, sub = jax.random.split(_Keys.key)
    keep = jax.random.bernoulli(sub, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)
''', 'gave two different masks: the mask depends on something besides its inputs', 'prng'),
    ],
    "init_mlp": [
        ('''
def init_mlp(key, sizes):
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        w = jax.random.normal(key, (m, n)) / jnp.sqrt(m)
        params.append({"w": w, "b": jnp.zeros((n,))})
    return params
''', "got identical (or strongly correlated) weights: one key was used for more than one layer", "prng"),
        ('''
def init_mlp(key, sizes):
    # a key per layer *shape*: same-shaped layers still get the same key
    return [{"w": jax.random.normal(jax.random.fold_in(key, m * 1000 + n), (m, n)) / jnp.sqrt(m),
             "b": jnp.zeros((n,))} for m, n in zip(sizes[:-1], sizes[1:])]
''', "got identical (or strongly correlated) weights", "prng"),
        ('''
def init_mlp(key, sizes):
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        w = jax.random.normal(key, (m, n)) / jnp.sqrt(m)  # draws from the key it goes on splitting
        params.append({"w": w, "b": jnp.zeros((n,))})
    return params
''', "more than once (Previously-consumed key passed to random_split", "key_reuse"),
        ('''
def init_mlp(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [{"w": jax.random.normal(k, (m, n)) / m, "b": jnp.zeros((n,))}  # 1 / fan_in, not 1 / sqrt
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]
''', "The weights look scaled by 1 / fan_in", "numerics"),
        ('''
def init_mlp(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [{"w": jax.random.normal(k, (m, n)) / jnp.sqrt(n), "b": jnp.zeros((n,))}  # fan_out, not fan_in
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]
''', "The weights look scaled by 1 / sqrt(fan_out)", "numerics"),
        ('''
def init_mlp(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    params = []
    for k, m, n in zip(keys, sizes[:-1], sizes[1:]):
        limit = (3.0 / m) ** 0.5  # uniform on [-limit, limit]: the right deviation, not a normal draw
        params.append({"w": jax.random.uniform(k, (m, n), minval=-limit, maxval=limit), "b": jnp.zeros((n,))})
    return params
''', "not the shape of a normal distribution", "numerics"),
        ('''
def init_mlp(key, sizes):
    # JAX's LeCun initializer: a truncated normal rescaled to 1 / sqrt(fan_in), not a normal
    init = jax.nn.initializers.lecun_normal()
    keys = jax.random.split(key, len(sizes) - 1)
    return [{"w": init(k, (m, n)), "b": jnp.zeros((n,))} for k, m, n in zip(keys, sizes[:-1], sizes[1:])]
''', "not the shape of a normal distribution", "numerics"),
        ('''
def init_mlp(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return tuple({"w": jax.random.normal(k, (m, n)) / jnp.sqrt(m), "b": jnp.zeros((n,))}  # a tuple
                 for k, m, n in zip(keys, sizes[:-1], sizes[1:]))
''', "(a tuple is another pytree structure than a list)", "numerics"),
        ('''
key_stream = {"key": None}  # the key the layers draw from, set by init_mlp (as hk.next_rng_key's)


def next_key():
    """A fresh key from the stream."""
    new_key, layer_key = jax.random.split(key_stream["key"])
    return layer_key


def init_mlp(key, sizes):
    """One {"w", "b"} dict per layer; w ~ Normal(0, 1 / sqrt(fan_in)), b = 0."""
    # TODO: two layers of the same shape come out identical, and JAX's key-reuse checker
    # objects. There is more than one cause: find them, then fix it.
    key_stream["key"] = key
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        w = jax.random.normal(next_key(), (m, n)) / jnp.sqrt(m)
        params.append({"w": w, "b": jnp.zeros((n,))})
    return params
''', "got identical (or strongly correlated) weights", "prng"),
        ('''
key_stream = {"key": None}


def next_key():
    new_key, layer_key = jax.random.split(key_stream["key"])
    key_stream["key"] = new_key  # half-fix: the stream moves on, but it is still a global
    return layer_key


def init_mlp(key, sizes):
    key_stream["key"] = key
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        w = jax.random.normal(next_key(), (m, n)) / jnp.sqrt(m)
        params.append({"w": w, "b": jnp.zeros((n,))})
    return params
''', "changed the global(s) ['key_stream']", "purity"),
        ('''
def _make_stream():
    state = {}
    def next_key(key=None):
        if key is not None:
            state["key"] = key
        state["key"], sub = jax.random.split(state["key"])
        return sub
    return next_key

next_key = _make_stream()

def init_mlp(key, sizes):
    next_key(key)
    return [{"w": jax.random.normal(next_key(), (m, n)) / jnp.sqrt(m), "b": jnp.zeros((n,))}
            for m, n in zip(sizes[:-1], sizes[1:])]
''', "changed the global(s) ['next_key']", 'purity'),
        ('''
def init_mlp(key, sizes):
    # a key per layer from one split, but the last layer reuses the first layer's key
    keys = jax.random.split(key, len(sizes) - 2)
    keys = list(keys) + [keys[0]]
    return [{"w": jax.random.normal(k, (m, n)) / jnp.sqrt(m), "b": jnp.zeros((n,))}
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]
''', 'got identical (or strongly correlated) weights', 'prng'),
    ],
    "noisy_batch": [
        ('''
def noisy_batch(key, x):
    # a key per row from its index, right numbers, but a Python loop: one draw per row in the program
    return jnp.stack([x[i] + jax.random.normal(jax.random.fold_in(key, i), x.shape[1:], x.dtype)
                      for i in range(x.shape[0])])
''', "the program of noisy_batch grows with the number of rows", "per_example_keys"),
        ('''
def noisy_batch(key, x):
    return x + jax.random.normal(key, x.shape, x.dtype)
''', "rows changed when the batch was cut from", "per_example_keys"),
        ('''
def noisy_batch(key, x):
    keys = jax.random.split(key, x.shape[0])  # row i's key depends on the batch size
    return jax.vmap(lambda k, row: row + jax.random.normal(k, row.shape, row.dtype))(keys, x)
''', "rows (jax_threefry_partitionable=False)", "per_example_keys"),
        ('''
def noisy_batch(key, x):
    return jax.vmap(lambda row: row + jax.random.normal(key, row.shape, row.dtype))(x)  # one key for all rows
''', "several rows got exactly the same noise", "per_example_keys"),
        ('''
def noisy_batch(key, x):
    return x + np.random.normal(size=x.shape).astype(np.float32)  # global NumPy state
''', "two different keys gave the same noise under jax.jit", "prng"),
        ('''
def noisy_batch(key, x):
    # right values, but a Python loop over the rows: unrolled, one draw per row in the program
    rows = [x[i] + jax.random.normal(jax.random.fold_in(key, i), x.shape[1:], x.dtype)
            for i in range(x.shape[0])]
    return jnp.stack(rows)
''', "the program of noisy_batch grows with the number of rows", "per_example_keys"),
        ('''
def noisy_batch(key, x):
    # a Python loop over x padded to 64 rows: the same program at every batch size up to 64
    padded = jnp.pad(x, ((0, 64 - x.shape[0]), (0, 0)))
    rows = [padded[i] + jax.random.normal(jax.random.fold_in(key, i), x.shape[1:], x.dtype) for i in range(64)]
    return jnp.stack(rows)[:x.shape[0]]
''', "beyond every number of rows it was tried at", "per_example_keys"),
        ('''
def noisy_batch(key, x):
    # a key per row, but uniform noise scaled to deviation 1: not a normal draw
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(x.shape[0]))
    u = jax.vmap(lambda k: jax.random.uniform(k, x.shape[1:], x.dtype, -1.0, 1.0))(keys)
    return x + u * jnp.sqrt(3.0)
''', "it is not drawn from a normal distribution", "numerics"),
        ('''
def noisy_batch(key, x):
    # a key per row, but one number per row, added to each of its entries
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(x.shape[0]))
    return x + jax.vmap(lambda k: jax.random.normal(k, (), x.dtype))(keys)[:, None]
''', "not one number shared by the row", "numerics"),
        ('''
def noisy_batch(key, x):
    """x plus standard normal noise; row i's noise depends only on `key` and `i`."""
    # TODO: reproducible, and each row's noise is its own, eagerly and under jax.jit; yet at a
    # few hundred rows jax.jit takes minutes. Measure why (its jaxpr at two batch sizes), then fix it.
    rows = []
    for row in x:  # one row at a time
        key, row_key = jax.random.split(key)  # the next key of the chain: row i's key
        rows.append(row + jax.random.normal(row_key, row.shape, row.dtype))
    return jnp.stack(rows)
''', "the program of noisy_batch grows with the number of rows", "per_example_keys"),
        ('''
def noisy_batch(key, x):
    # a compiled loop over keys made up front by one split of the batch's size
    def step(_, pair):
        row, row_key = pair
        return None, row + jax.random.normal(row_key, row.shape, row.dtype)
    return jax.lax.scan(step, None, (x, jax.random.split(key, x.shape[0])))[1]
''', "rows (jax_threefry_partitionable=False)", "per_example_keys"),
        ('''
def noisy_batch(key, x):
    # one fixed-size block of noise, so its shape never depends on the batch
    block = jax.random.normal(key, (1024,) + x.shape[1:], x.dtype)
    return x + block[: x.shape[0]]
''', 'beyond every number of rows it was tried at', 'per_example_keys'),
    ],
}

RIGHT = {
    "dropout": [
        '''
def dropout(key, x, rate):
    # one uniform number per entry from the key, compared with the rate
    keep = jax.random.uniform(key, x.shape) >= rate
    return jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x))
''',
    ],
    "init_mlp": [
        '''
def init_mlp(key, sizes):
    # a key per layer folded in from the layer's index
    return [{"w": jax.random.normal(jax.random.fold_in(key, i), (m, n)) / jnp.sqrt(m), "b": jnp.zeros((n,))}
            for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:]))]
''',
        '''
def init_mlp(key, sizes):
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)  # carry one key on, consume the other
        params.append({"w": jax.random.normal(sub, (m, n)) * (1.0 / m) ** 0.5, "b": jnp.zeros((n,))})
    return params
''',
        '''
def init_mlp(key, sizes):
    # one draw for every weight, cut into layers: one key, consumed once
    shapes = list(zip(sizes[:-1], sizes[1:]))
    flat = jax.random.normal(key, (sum(m * n for m, n in shapes),))
    params, start = [], 0
    for m, n in shapes:
        params.append({"w": flat[start:start + m * n].reshape(m, n) / jnp.sqrt(m), "b": jnp.zeros((n,))})
        start += m * n
    return params
''',
    ],
    "noisy_batch": [
        '''
def noisy_batch(key, x):
    # one key per row from fold_in by its index, made for every row at once; then one draw per key
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(x.shape[0]))
    return x + jax.vmap(lambda k: jax.random.normal(k, x.shape[1:], x.dtype))(keys)
''',
        '''
def noisy_batch(key, x):
    # the starting code's chain of keys, carried through a compiled loop over the rows
    def step(key, row):
        key, row_key = jax.random.split(key)
        return key, row + jax.random.normal(row_key, row.shape, row.dtype)
    return jax.lax.scan(step, key, x)[1]
''',
        '''
def noisy_batch(key, x):
    # a fori_loop over the rows, each row's key folded in from its index
    def body(i, out):
        noise = jax.random.normal(jax.random.fold_in(key, i), x.shape[1:], x.dtype)
        return out.at[i].add(noise)
    return jax.lax.fori_loop(0, x.shape[0], body, x)
''',
    ],
}
