"""The judge of 10_review (trusted: runs in the grader, never in the learner's kernel).

One ``test_<name>(k)`` per graded test cell; ``k`` is an :class:`autograder.judge.Kernel`.
``train`` is called through ``jax.jit`` (``steps`` static) on the notebook's regression problem,
rebuilt here from its generator (the judge's own copy: the learner's globals are not trusted),
with fresh keys at every grading. Judge-side: the pair returned, its structure and shapes, the
same key giving the same values and different keys different ones, the losses going down, and
the final loss on all the data (computed here with the judge's own copy of the model) against
plain minibatch SGD written out in NumPy here (within 1.5x + 1e-3 of the median of three runs).
Every value judged comes from the learner's exported program (``steps`` static, the key, the
parameters, the data and ``lr`` traced; :mod:`autograder.judge.programs`), run here with the judge's
own keys; its operations, read from the parsed module at two values of ``steps``, must not grow
(no unrolled Python loop), and it must trace without pulling a value to the host and contain no
host callback. A key reused at every step is found before the loss is judged: run with lr=0,
whose parameters never move, every step's minibatch loss is the same; the same run tells a
reported loss that is all the data's, minibatches of another size or not drawn uniformly, and, on
targets that leave only the first and the last example a loss, a draw that never (or too often)
holds one of them. Kernel-side claims,
fail-only: no key consumed twice (JAX's key-reuse checker) and one trace for new keys and
learning rates.
"""
import numpy as np

from autograder.judge import call, ExerciseFailure, fail
from autograder.judge import effect, programs
from autograder.judge import AsJax, Fixture, Key, Ref, Spec

BATCH = 32  # the notebook's given BATCH
_STEPS, _LR = 60, 0.1
# lr = 0 over this many steps: every loss is its minibatch's mean of the examples' losses at the
# initial parameters, enough of them to tell the minibatches' size and where they are drawn from.
_FROZEN = 8000
FLOW_TIME = 6.0  # lr x steps at the step count beyond every size written (see _check_far)
_SPECS = {"w1": Spec((4, 16), "float32"), "b1": Spec((16,), "float32"),
          "w2": Spec((16, 1), "float32"), "b2": Spec((1,), "float32")}
_LABEL = "jax.jit(train, static_argnames='steps')"


def _problem():
    """The notebook's data and initial parameters (its given cells' generators, seeds 0 and 8)."""
    data_rng = np.random.default_rng(0)
    xs = data_rng.normal(size=(256, 4)).astype(np.float32)
    w_true = data_rng.normal(size=(4, 1))
    ys = (np.sin(xs @ w_true) + 0.1 * data_rng.normal(size=(256, 1))).astype(np.float32)
    rng = np.random.default_rng(8)
    params = {"w1": (rng.normal(size=(4, 16)) / 2.0).astype(np.float32), "b1": np.zeros(16, np.float32),
              "w2": (rng.normal(size=(16, 1)) / 4.0).astype(np.float32), "b2": np.zeros(1, np.float32)}
    return xs, ys, params


def _np_params(params):
    return {name: np.asarray(p, np.float64) for name, p in params.items()}


def _np_loss(params, xs, ys):
    """The notebook's `loss_fn` on all of (xs, ys), in NumPy (float64)."""
    p = _np_params(params)
    return float(np.mean((np.tanh(xs @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"] - ys) ** 2))


def _np_sgd(rng, params, xs, ys, steps, lr):
    """The reference: plain minibatch SGD on the notebook's loss, written out in NumPy."""
    p = _np_params(params)
    for _ in range(steps):
        i = rng.integers(0, len(xs), BATCH)
        x, y = xs[i], ys[i]
        h = np.tanh(x @ p["w1"] + p["b1"])
        r = 2 * (h @ p["w2"] + p["b2"] - y) / len(y)  # d loss / d prediction
        dh = (r @ p["w2"].T) * (1 - h ** 2)
        g = {"w1": x.T @ dh, "b1": dh.sum(0), "w2": h.T @ r, "b2": r.sum(0)}
        p = {name: p[name] - lr * g[name] for name in p}
    return p


def _concrete(exc, label):
    """Tracing needed a traced value on the host (`float(loss)`, `.item()`)."""
    import jax

    if (isinstance(exc, jax.errors.ConcretizationTypeError)
            and not isinstance(exc, jax.errors.TracerBoolConversionError)):
        return ExerciseFailure(
            "async", "tracing train needed the concrete value of a traced array (such as `float(loss)` "
                     "or `loss.item()`): under jit there is no value yet, and eagerly it would pull "
                     "every step's loss to the host, a hidden synchronisation. Keep the losses as "
                     "arrays and return them stacked.")
    return None


def _program(k, steps):
    """train's exported program at ``steps`` (static); key, params, data and lr traced."""
    # The key as raw data (uint32[2], what jax.random.key(seed) holds): the program runner takes
    # arrays of numbers, not typed keys.
    return programs.trace(k, "train", Spec((2,), "uint32"), _SPECS, Spec((256, 4), "float32"), Spec((256, 1), "float32"),
                          static_argnames=("steps",), steps=steps, lr=np.float32(_LR), loops=True,
                          translate=_concrete, label=f"jax.export of {_LABEL} at steps={steps}")


def _as_np(out):
    params, losses = out
    return [np.asarray(params[name]) for name in sorted(params)] + [np.asarray(losses)]


def _np_flow(params, xs, ys, time):
    """The loss on all the data after gradient flow for ``time`` (learning rate times steps):
    full-batch gradient descent in many small steps, in NumPy (float64). Minibatch SGD with a
    small learning rate follows it: 131077 steps at lr = 6 / 131077 end within 0.1% of its loss."""
    p = _np_params(params)
    n = 2000
    for _ in range(n):
        h = np.tanh(xs @ p["w1"] + p["b1"])
        r = 2 * (h @ p["w2"] + p["b2"] - ys) / len(ys)
        dh = (r @ p["w2"].T) * (1 - h ** 2)
        g = {"w1": xs.T @ dh, "b1": dh.sum(0), "w2": h.T @ r, "b2": r.sum(0)}
        p = {name: p[name] - time / n * g[name] for name in p}
    return _np_loss(p, xs, ys)


def _check_far(k, small, published, inputs, seed):
    """train at a number of steps beyond every size written in its programs at ``published``
    steps (a count padded to, a loop's fixed bound: :func:`autograder.judge.effect.beyond`), at
    a learning rate so small that every step counts: the loss on all the data must be gradient
    flow's for (steps x lr), which no program that stops updating at a count it was written for
    reaches. First at a count beyond the number of operations of its programs (cheap to trace),
    where a loop unrolled over any count it pads to grows."""
    mid = effect.past_operations(small, published, k.rng)
    at_mid = _program(k, mid)
    if effect.grows(small[0].total, at_mid.total):
        fail("loops", f"the program of train grows with `steps` ({small[0].total} operations at steps=3, "
                         f"{at_mid.total} at steps={mid}): a Python loop over the steps is unrolled into it, "
                         "one copy of the step per iteration, beyond the counts it was tried at.")
    far, written = effect.beyond(small, published, k.rng)
    beyond = f"at steps={far}, beyond every size written in its programs at steps=3 and 7 (up to {written})"
    lr = np.float32(FLOW_TIME / far)
    try:
        program = _program(k, far)
        if effect.grows(small[0].total, program.total):
            fail("loops", f"the program of train grows with `steps` ({small[0].total} operations at steps=3, "
                             f"{program.total} {beyond}): a Python loop over the steps is unrolled into it.")
        got, losses = program(programs.raw_key(seed), *inputs, lr=lr)
        if np.shape(losses) != (far,) or not all(np.all(np.isfinite(a)) for a in [*got.values(), losses]):
            fail("capstone", f"it returned losses of shape {np.shape(losses)} (expected ({far},), one per step), "
                                "or values that are not finite.")
    except ExerciseFailure as exc:
        if exc.idea == "loops":
            raise
        fail("loops", f"jax.jit(train) fails {beyond}: it is written for the step counts it was tried at (a "
                         f"loop unrolled over, or bounded by, a fixed number of steps?): {exc.detail}")
    xs, ys, params = _problem()
    xd, yd = xs.astype(np.float64), ys.astype(np.float64)
    mine, full, half = _np_loss(got, xd, yd), _np_flow(params, xd, yd, FLOW_TIME), _np_flow(params, xd, yd, FLOW_TIME / 2)
    if not mine <= full + (half - full) / 4:
        fail("loops", f"jax.jit(train) {beyond}, with lr={lr:.3g} (so steps x lr = {FLOW_TIME:g}), ends at a loss "
                         f"of {mine:.4f} on all the data; every one of its {far} steps taken reaches {full:.4f} "
                         f"(half of them {half:.4f}). It stops updating the parameters before the last step: a "
                         "loop unrolled over, or bounded by, a fixed number of steps?")


def _np_step(p, x, y, lr):
    """One plain SGD step on (x, y) in NumPy (float64): (the loss before it, the new parameters)."""
    h = np.tanh(x @ p["w1"] + p["b1"])
    r = 2 * (h @ p["w2"] + p["b2"] - y) / len(y)
    dh = (r @ p["w2"].T) * (1 - h ** 2)
    g = {"w1": x.T @ dh, "b1": dh.sum(0), "w2": h.T @ r, "b2": r.sum(0)}
    loss = float(np.mean((h @ p["w2"] + p["b2"] - y) ** 2))
    return loss, {name: p[name] - lr * g[name] for name in p}


def _np_run(p, x, y):
    """Plain SGD on the one example (x, y) for _STEPS steps at _LR: (each step's loss, the last params)."""
    losses = []
    for _ in range(_STEPS):
        loss, p = _np_step(p, x, y, _LR)
        losses.append(loss)
    return np.asarray(losses), p


def _steady_examples(params, xs, ys):
    """The examples on which plain SGD at _LR is steady (its loss only goes down, at least halves,
    and a float32 run of it stays within 1e-5 of the float64 one, relative): there a right answer
    in float32 matches the float64 reference well within the check's tolerance. A step too long
    for an example's curvature oscillates, and float32 and float64 runs drift apart there."""
    steady = []
    for i in range(len(xs)):
        x, y = xs[i:i + 1], ys[i:i + 1]
        l64, p64 = _np_run(_np_params(params), x.astype(np.float64), y.astype(np.float64))
        with np.errstate(all="ignore"):
            l32, _ = _np_run({n: np.asarray(v, np.float32) for n, v in params.items()}, x, y)
        if (np.all(np.diff(l64) <= 0) and l64[-1] <= l64[0] / 2 and np.all(np.isfinite(l32))
                and np.allclose(l32, l64, rtol=1e-5, atol=1e-8)):
            steady.append(i)
    return steady


def _check_plain_sgd(k, program, params, xs, ys, seed):
    """On data whose examples are all one example, every minibatch is that example whatever the
    key draws, so plain SGD's run is known exactly: each step's loss (before its update) and the
    parameters after every step, computed here in float64. Momentum, another optimizer or step
    size, or a loss taken after the update, leave it."""
    i = int(k.rng.choice(_steady_examples(params, xs, ys)))
    same_x, same_y = np.repeat(xs[i:i + 1], len(xs), axis=0), np.repeat(ys[i:i + 1], len(ys), axis=0)
    got, losses = program(programs.raw_key(seed), params, same_x, same_y, lr=np.float32(_LR))
    want, p = _np_run(_np_params(params), xs[i:i + 1].astype(np.float64), ys[i:i + 1].astype(np.float64))
    losses = np.asarray(losses, np.float64)
    what = (f"on data whose {len(xs)} examples are all example {i} (every minibatch is then that example, "
            "whatever the key draws)")
    close = np.isclose(losses, want, rtol=2e-3, atol=1e-6)
    if losses.shape == want.shape and not close.all():
        t = int(np.flatnonzero(~close)[0])
        after = np.allclose(losses[:-1], want[1:], rtol=2e-3, atol=1e-6)
        fail("capstone", f"{what}, the loss train reports for step {t} is {losses[t]:.6g}, where plain minibatch SGD's "
                            f"is {want[t]:.6g}" + (": it reports each step's loss after that step's update, not the "
                                                   "loss at the parameters the step starts from."
                                                   if after else
                                                   ": its steps are not plain SGD's, each parameter p set to p - lr * g "
                                                   "(g its gradient on the minibatch), and nothing else."))
    for name in sorted(params):
        if not np.allclose(np.asarray(got[name], np.float64), p[name], rtol=2e-3, atol=1e-5):
            fail("capstone", f"{what}, after {_STEPS} steps params['{name}'] is not where plain minibatch SGD "
                                "takes it: its steps are not plain SGD's, each parameter p set to p - lr * g (g its "
                                "gradient on the minibatch), and nothing else.")


def _check_every_example(program, params, xs, seed):
    """Every example is drawn, the first and the last included (a bound off by one leaves one out;
    a clamped index out of range draws the last twice as often): at lr=0, on targets that give
    every example a loss of 0 at the initial parameters but the first (1) and the last (1000),
    BATCH times each step's loss counts how often each of the two is in its minibatch. A uniform
    draw of BATCH of the 256 examples holds a given one in 11.8% (with replacement) or 12.5%
    (without) of the steps: over _FROZEN steps, within 0.004 (one standard deviation); the
    bounds, 9% and 15%, are 7 standard deviations away."""
    p = _np_params(params)
    targets = np.tanh(xs.astype(np.float64) @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    targets[0] += 1.0
    targets[-1] += np.sqrt(1000.0)
    _, losses = program(programs.raw_key(seed), params, xs, targets.astype(np.float32), lr=np.float32(0.0))
    counts = np.asarray(losses, np.float64) * BATCH
    last = np.floor((counts + 0.5) / 1000.0)
    first = np.rint(counts - 1000.0 * last)
    n = len(xs)
    for index, times in ((0, first), (n - 1, last)):
        share = float(np.mean(times > 0))
        if not 0.09 <= share <= 0.15:
            fail("capstone", f"with lr=0, on targets that leave every example a loss of 0 but examples 0 and {n - 1}, "
                                f"example {index} was in {share:.1%} of the {len(times)} minibatches; a uniform draw of "
                                f"{BATCH} of the {n} examples holds it in about 12% of them: the minibatches do not draw "
                                "every example alike, the first and the last included.")


def _check_loss_is_its_minibatchs(program, params, seeds):
    """Each step's reported loss is the loss of the minibatch whose gradient makes its update
    (two draws a step, one for the loss and one for the gradient, are told): on data of two kinds,
    half the examples at x = 0 with the target the model gives there (loss 0, gradient 0 at the
    initial parameters, whose b1 is 0) and half at one other x with a target 1 above the model's
    (loss 1, gradient -2 on b2), a minibatch holding m examples of the second kind has the loss
    m / BATCH, and one step of plain SGD moves b2 by 2 lr m / BATCH: both give m, which must agree.
    A uniform draw gives m = 16 +- 3, so two independent draws agree in about one key of ten;
    over six keys, about once in a million."""
    n = 256
    p = _np_params(params)
    one = np.array([[0.5, -1.0, 1.5, 0.25]])
    xs = np.zeros((n, 4))
    xs[::2] = one
    targets = (np.tanh(xs @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]).astype(np.float32)
    targets[::2] += np.float32(1.0)
    lr = 0.01
    for seed in seeds:
        got, losses = program(programs.raw_key(seed), params, xs.astype(np.float32), targets, lr=np.float32(lr))
        m_loss = float(np.asarray(losses, np.float64).reshape(-1)[0]) * BATCH
        m_step = (float(np.asarray(got["b2"], np.float64).reshape(-1)[0]) - float(p["b2"][0])) * BATCH / (2 * lr)
        if abs(m_loss - m_step) > 0.5:
            fail("capstone", f"on data where half the examples have a loss of 1 and the others none, step 0 reported "
                                f"the loss of a minibatch holding {m_loss:.0f} examples with a loss, but its update "
                                f"is the gradient of a minibatch holding {m_step:.0f} of them: the loss train reports "
                                "for a step is not the loss of the minibatch whose gradient makes that step's update.")


def test_train(k):
    # The program: traced (and exported) at two values of `steps`, it must not grow.
    small = [_program(k, steps) for steps in (3, 7)]
    sizes = {3: small[0].total, 7: small[1].total}
    if effect.grows(sizes[3], sizes[7]):
        fail("loops", f"the program of train grows with `steps` ({sizes[3]} operations at steps=3, "
                         f"{sizes[7]} at steps=7): a Python loop over the steps is being unrolled "
                         "into it, one copy of the step per iteration.")
    xs, ys, params = _problem()
    xd, yd = xs.astype(np.float64), ys.astype(np.float64)
    args = ({n: AsJax(v) for n, v in params.items()}, AsJax(xs), AsJax(ys))
    s0, s1, s2, s3, s4 = k.distinct_seeds(5)
    # Five runs of the program: the same key twice, new keys, new learning rates.
    plan = [(s0, _LR), (s0, _LR), (s1, _LR), (s3, 0.05), (s4, 0.2)]
    program = _program(k, _STEPS)
    inputs = (params, xs, ys)
    outs = [program(programs.raw_key(s), *inputs, lr=np.float32(lr)) for s, lr in plan]
    for o in outs:
        if isinstance(o, (tuple, list)) and len(o) == 2:
            for leaf in [*(o[0].values() if isinstance(o[0], dict) else []), o[1]]:
                if np.asarray(leaf).dtype != np.float32:
                    fail("capstone", f"train returned {np.asarray(leaf).dtype} values; the exercise's "
                                        "parameters and losses are float32.")
    out = outs[0]
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        fail("capstone", "train must return a pair (params, losses).")
    got, losses = out
    if not isinstance(got, dict) or set(got) != set(params):
        fail("capstone", "the returned params do not have the structure of the `params` passed in "
                            f"(a dict with the keys {sorted(params)}).")
    for name, p in params.items():
        if np.shape(got[name]) != p.shape:
            fail("capstone", f"the returned params['{name}'] has shape {np.shape(got[name])}, "
                                f"expected {p.shape}, the shape passed in.")
    if np.shape(losses) != (_STEPS,):
        fail("capstone", f"losses has shape {np.shape(losses)}; expected ({_STEPS},), one minibatch "
                            "loss per step.")
    for a, b in zip(_as_np(out), _as_np(outs[1])):
        if not np.array_equal(a, b):
            fail("prng", "two calls with the same key gave different results: the randomness must "
                            "come from `key` alone, not from a global generator.")
    out1 = outs[2]
    if np.allclose(np.asarray(losses), np.asarray(out1[1])):
        fail("prng", "different keys gave the same losses: the minibatches do not depend on `key`, so the "
                        "randomness is not explicit (fixed when the program was traced, or drawn from another key).")
    # ... and different parameters: each step's update is the gradient on the minibatch the key
    # drew, so after many steps two keys end at other parameters (the losses alone can come
    # from minibatches that no update used).
    if all(np.allclose(a, b, rtol=1e-6, atol=0.0) for a, b in zip(_as_np(out)[:-1], _as_np(out1)[:-1])):
        fail("capstone", "different keys gave different losses but the same trained parameters: the updates "
                            "do not depend on the minibatches the key draws. Each step's update is the "
                            "gradient of the loss on that step's minibatch, the one whose loss it reports.")
    # With lr = 0 the parameters never move, so each step's loss is the loss of its minibatch
    # alone: equal losses at every step are one minibatch drawn again and again, from one key.
    frozen_program = _program(k, _FROZEN)
    still, frozen = frozen_program(programs.raw_key(s2), *inputs, lr=np.float32(0.0))
    frozen = np.asarray(frozen, np.float64)
    if frozen.shape != (_FROZEN,) or not np.all(np.isfinite(frozen)):
        fail("capstone", f"with lr=0 over {_FROZEN} steps train returned losses of shape {frozen.shape} (expected "
                            f"({_FROZEN},), one per step), or losses that are not finite.")
    moved = [name for name in sorted(params) if not np.array_equal(np.asarray(still[name]), params[name])]
    if moved:
        fail("capstone", f"with lr=0 train returned params['{moved[0]}'] changed from the one passed in: the "
                            "learning rate does not scale the update, which lr=0 leaves where it is.")
    if np.any(frozen <= 0):
        first = int(np.flatnonzero(frozen <= 0)[0])
        fail("loops", f"with lr=0 over {_FROZEN} steps the loss of step {first} is {frozen[first]:g} (and of "
                         f"{int(np.sum(frozen <= 0)) - 1} later steps): a minibatch's loss, a mean of squared errors, "
                         "is positive, so those steps were not run (a loop bounded by a fixed number of "
                         "steps?) or their losses not reported.")
    per_example = ((np.tanh(xd @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"] - yd) ** 2).ravel()
    mu, var = float(per_example.mean()), float(per_example.var())
    if np.allclose(frozen, mu, rtol=1e-4, atol=0.0):
        fail("capstone", f"with lr=0, which leaves the parameters where they are, every one of the {_FROZEN} steps "
                            f"reported {frozen[0]:.5f}, the loss on all {len(per_example)} examples: the loss train reports "
                            "for a step is not the loss of that step's minibatch.")
    if np.allclose(frozen, frozen[0], rtol=1e-6, atol=0.0):
        fail("key_reuse", f"with lr=0, which leaves the parameters where they are, every one of the {_FROZEN} "
                             f"steps reported the same minibatch loss ({frozen[0]:.5f}): every step drew the "
                             "same minibatch, from the same key. Each step needs a key of its own, derived "
                             "from `key`.")
    # Drawn afresh: 8000 draws of BATCH of 256 examples hardly ever repeat a minibatch (its loss),
    # while one order kept for every pass through the data goes through 256 / BATCH of them.
    distinct = len(np.unique(frozen))
    if distinct < _FROZEN // 2:
        fail("capstone", f"with lr=0 the {_FROZEN} steps reported only {distinct} different minibatch losses: the steps "
                            "go through a few minibatches again and again instead of drawing each afresh (one order "
                            "of the examples kept for every pass through them).")
    # ... and they tell the minibatches: each loss is the mean of BATCH of the 256 examples' losses
    # at the initial parameters (known here, mean mu and variance sigma^2). Over 8000 steps their
    # mean is mu within 6 standard errors (sigma / sqrt(BATCH x 8000)), and their sample variance
    # over sigma^2 / BATCH is 1.00 (BATCH drawn with replacement, sd 0.016) or 0.878 (without,
    # sd 0.014): between 0.755 and 1.14, over 8 standard deviations from 1 and 0.878, and from
    # 0.667 (1.5 x BATCH examples) and 1.33 (0.75 x BATCH) with replacement; simulated, 300 runs each.
    z = float((frozen.mean() - mu) / np.sqrt(var / BATCH / _FROZEN))
    if abs(z) > 6:
        fail("capstone", f"with lr=0 the mean of the {_FROZEN} minibatch losses is {frozen.mean():.4f}, but the mean "
                            f"loss of all {len(per_example)} examples is {mu:.4f} ({abs(z):.0f} standard errors away): "
                            "the minibatches do not draw every example alike. Each step's minibatch is drawn "
                            "uniformly from all the examples.")
    spread = float(np.var(frozen, ddof=1) / (var / BATCH))
    if spread < 0.755:
        fail("capstone", f"with lr=0 the {_FROZEN} minibatch losses vary {spread:.2f} times as much as losses of "
                            f"minibatches of {BATCH} examples do: each step's minibatch holds more examples than "
                            f"BATCH = {BATCH}, or the steps go through a few minibatches again and again instead "
                            "of drawing each afresh (one order of the examples kept for every pass through them).")
    if spread > 1.14:
        fail("capstone", f"with lr=0 the {_FROZEN} minibatch losses vary {spread:.2f} times as much as losses of "
                            f"minibatches of {BATCH} examples do: each step's minibatch holds fewer examples than "
                            f"BATCH = {BATCH}.")
    _check_every_example(frozen_program, params, xs, s4)
    lv = np.asarray(losses, np.float64)
    if not np.all(np.isfinite(lv)) or lv[:5].mean() <= lv[-5:].mean():
        fail("capstone", "the minibatch losses do not go down over the steps: check the update "
                            "`p - lr * g` and that `losses` holds each step's loss.")
    # Plain SGD's steps, on data where every minibatch is known (before the final loss, which an
    # answer with momentum or another step size may or may not reach, by the draws)...
    _check_plain_sgd(k, program, params, xs, ys, s3)
    # The final loss on all the data against plain minibatch SGD (the median of three NumPy runs).
    for mine_out in (out, out1):
        mine = _np_loss(mine_out[0], xd, yd)
        ref_rng = np.random.default_rng(k.seed())
        theirs = float(np.median([_np_loss(_np_sgd(ref_rng, params, xd, yd, _STEPS, _LR), xd, yd)
                                  for _ in range(3)]))
        if not mine <= 1.5 * theirs + 1e-3:
            fail("capstone", f"after {_STEPS} steps the loss on all the data is {mine:.4f}; plain "
                                f"minibatch SGD reaches {theirs:.4f}. Check the update and the minibatches.")
    for i in (3, 4):  # other learning rates: other parameters, finite
        if not all(np.all(np.isfinite(a)) for a in _as_np(outs[i])):
            fail("capstone", f"with lr={plan[i][1]} train returned values that are not finite.")
    if np.allclose(np.asarray(outs[3][0]["w1"]), np.asarray(outs[4][0]["w1"])):
        fail("capstone", "train gave the same parameters for the learning rates 0.05 and 0.2: `lr` does not "
                            "reach the update `p - lr * g`.")
    # ... and at a number of steps beyond anything its programs were written for.
    _check_far(k, small, (3, 7, _STEPS), inputs, s1)
    # ... and each step's loss is the loss of the minibatch its update comes from.
    _check_loss_is_its_minibatchs(_program(k, 1), params, k.distinct_seeds(6))
    # Jits once: new keys and learning rates are runtime data (the kernel's trace count, a claim).
    report = call(lambda: k.call(Fixture("jit_static_traces"), Ref("train"), ["steps"],
                                    [((Key(s), *args), {"steps": _STEPS, "lr": lr}) for s, lr in plan]),
                     what=_LABEL)
    traces = report.get("traces") if isinstance(report, dict) else None
    if traces != 1:
        fail("recompiles", f"{_LABEL} traced {traces} time(s) over {len(plan)} calls with new keys and "
                              "learning rates; expected once. New keys and learning rates are runtime data; "
                              "only `steps` is static.")
    # No key consumed twice (JAX's key-reuse checker, kernel-side; it inspects the traced program).
    k.claim("check_no_key_reuse", Fixture("trace_static"), (Ref("train"), ["steps"], Key(s2), *args),
            jit=False, kwargs={"steps": _STEPS, "lr": _LR}, what="jax.jit(train)")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "train": [
        ('''
def train(key, params, xs, ys, steps, lr):
    # one permutation per call, sliced in order and cycled: the same few minibatches at every pass
    n = xs.shape[0]
    perm = jax.random.permutation(key, n)
    def step(params, t):
        idx = jax.lax.dynamic_slice(jnp.concatenate([perm, perm]), ((t * BATCH) % n,), (BATCH,))
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss
    return jax.lax.scan(step, params, jnp.arange(steps))
''', "go through a few minibatches again and again", "capstone"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # the loss reported is of another minibatch than the one the gradient comes from
    def step(params, k):
        k1, k2 = jax.random.split(k)
        i1 = jax.random.randint(k1, (BATCH,), 0, xs.shape[0])
        i2 = jax.random.randint(k2, (BATCH,), 0, xs.shape[0])
        loss = loss_fn(params, xs[i1], ys[i1])
        grads = jax.grad(loss_fn)(params, xs[i2], ys[i2])
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss
    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "is not the loss of the minibatch whose gradient makes", "capstone"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # the starting code: a Python loop of host syncs, NumPy's global RNG, a recompile per step
    params = {name: np.array(p) for name, p in params.items()}
    losses = []
    for step in range(steps):
        idx = np.random.randint(0, len(xs), size=BATCH)
        grad_fn = jax.jit(jax.value_and_grad(loss_fn))
        loss, grads = grad_fn(params, xs[idx], ys[idx])
        for name in params:
            params[name] -= lr * np.asarray(grads[name])
        losses.append(float(loss))
    return params, jnp.array(losses)
''', "converted a traced array to NumPy", "async"),
        ('''
_grad = jax.jit(jax.value_and_grad(loss_fn))  # half-fixed: one jitted gradient, compiled once


def train(key, params, xs, ys, steps, lr):
    # ...but still a Python loop that reads every loss back, with NumPy's global RNG
    losses = []
    for step in range(steps):
        idx = np.random.randint(0, len(xs), size=BATCH)
        loss, grads = _grad(params, xs[idx], ys[idx])
        params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        losses.append(float(loss))
    return params, jnp.array(losses)
''', "tracing train needed the concrete value of a traced array (such as `float(loss)`", "async"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # half-fixed: one loop in the program, but the minibatches are still NumPy's, drawn for all
    # the steps before the loop: when the program is traced, so they are constants in it
    idx_all = np.random.randint(0, xs.shape[0], size=(steps, BATCH))
    def step(params, idx):
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss
    return jax.lax.scan(step, params, idx_all)
''', "the minibatches do not depend on `key`", "prng"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # a key carried through the loop, but the minibatch is drawn with the carried key itself,
    # which the same step also splits: each key is consumed twice
    def step(carry, _):
        params, k = carry
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0])
        k, _unused = jax.random.split(k)
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return (jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), k), loss
    (params, _), losses = jax.lax.scan(step, (params, key), None, length=steps)
    return params, losses
''', "consumed the same key more than once (In random_split", "key_reuse"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # pure and jitted, but the minibatches come from a fixed key: `key` is ignored
    def step(params, k):
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss
    return jax.lax.scan(step, params, jax.random.split(jax.random.key(0), steps))
''', "different keys gave the same losses", "prng"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # pure, explicit keys, but a Python loop over the steps unrolls into the jaxpr
    losses = []
    for k in jax.random.split(key, steps):
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        losses.append(loss)
    return params, jnp.stack(losses)
''', "the program of train grows with `steps`", "loops"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # shuffles with `key` and then splits the same `key` again: one key consumed twice
    order = jax.random.permutation(key, xs.shape[0])
    xs, ys = xs[order], ys[order]
    def step(params, k):
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss
    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "jax.jit(train) consumed the same key more than once", "key_reuse"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # everything in lax.scan, but the loss is pulled to the host every step
    def step(params, k):
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), float(loss)
    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "tracing train needed the concrete value of a traced array (such as `float(loss)`", "async"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # the learning rate is dropped: a fixed, much smaller step
    def step(params, k):
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss
    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "the learning rate does not scale the update", "capstone"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # the learning rate scaled down tenfold: a much smaller step
    def step(params, k):
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * lr * g, params, grads), loss
    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "its steps are not plain SGD's", "capstone"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # everything in lax.scan, but every step's loss is printed from the compiled loop: a host callback
    def step(params, k):
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        jax.debug.print("loss {}", loss)
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss
    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "calls back into Python from the compiled program", "purity"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # one loop in lax.scan, but every step draws its minibatch from the same `key`
    def step(params, _):
        idx = jax.random.randint(key, (BATCH,), 0, xs.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss
    return jax.lax.scan(step, params, None, length=steps)
''', "every step drew the same minibatch, from the same key", "key_reuse"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # one loop in the program, but it runs 1000 times whatever `steps` is, the steps past `steps`
    # masked out: of one size, and right, at every step count up to 1000
    def body(i, carry):
        params, losses = carry
        idx = jax.random.randint(jax.random.fold_in(key, i), (BATCH,), 0, xs.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        params = jax.tree_util.tree_map(lambda p, g: jnp.where(i < steps, p - lr * g, p), params, grads)
        return params, losses.at[i].set(loss, mode="drop")

    return jax.lax.fori_loop(0, 1000, body, (params, jnp.zeros(steps, jnp.float32)))
''', "so those steps were not run", "loops"),
        ('''
def train(key, params, xs, ys, steps, lr):
    def step(params, k):
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0])
        loss = loss_fn(params, xs[idx], ys[idx])     # the loss reported: a minibatch's...
        grads = jax.grad(loss_fn)(params, xs, ys)    # ...the update: the gradient on all the data
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss

    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "the updates do not depend on the minibatches the key draws", "capstone"),
        ('''
def train(key, params, xs, ys, steps, lr):
    def step(params, k):
        idx = jax.random.randint(k, (8 * BATCH,), 0, xs.shape[0])  # a larger minibatch than BATCH
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss

    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "each step's minibatch holds more examples than", "capstone"),
        ('''
def train(key, params, xs, ys, steps, lr):
    def step(params, k):
        idx = jax.random.randint(k, (2 * BATCH,), 0, xs.shape[0])  # twice BATCH examples per step
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss

    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "each step's minibatch holds more examples than", "capstone"),
        ('''
def train(key, params, xs, ys, steps, lr):
    def step(params, k):
        idx = jax.random.randint(k, (BATCH // 2,), 0, xs.shape[0])  # half of BATCH examples per step
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss

    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "each step's minibatch holds fewer examples than", "capstone"),
        ('''
def train(key, params, xs, ys, steps, lr):
    def step(params, k):
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0] // 2)  # only the first half of the examples
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss

    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "the minibatches do not draw every example alike", "capstone"),
        ('''
def train(key, params, xs, ys, steps, lr):
    # heavy-ball momentum: trains at least as well, but it is not the plain SGD step asked for
    def step(carry, k):
        params, velocity = carry
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        velocity = jax.tree_util.tree_map(lambda v, g: 0.9 * v + g, velocity, grads)
        params = jax.tree_util.tree_map(lambda p, v: p - lr * v, params, velocity)
        return (params, velocity), loss

    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    (params, _), losses = jax.lax.scan(step, (params, zeros), jax.random.split(key, steps))
    return params, losses
''', "its steps are not plain SGD's", "capstone"),
        ('''
def train(key, params, xs, ys, steps, lr):
    def step(params, k):
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0])
        grads = jax.grad(loss_fn)(params, xs[idx], ys[idx])
        params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        return params, loss_fn(params, xs[idx], ys[idx])  # the loss after the step's update

    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "it reports each step's loss after that step's update", "capstone"),
        ('''
def train(key, params, xs, ys, steps, lr):
    def step(params, k):
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0] - 1)  # the last example is never drawn
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss

    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "the first and the last included", "capstone"),
        ('''
def train(key, params, xs, ys, steps, lr):
    def step(params, k):
        idx = jax.random.randint(k, (BATCH,), 0, xs.shape[0])
        grads = jax.grad(loss_fn)(params, xs[idx], ys[idx])
        loss = loss_fn(params, xs, ys)  # the loss reported: on all the data, not the minibatch's
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss

    return jax.lax.scan(step, params, jax.random.split(key, steps))
''', "is not the loss of that step's minibatch", "capstone"),
    ],
}

RIGHT = {
    "train": [
        '''
def train(key, params, xs, ys, steps, lr):
    # random reshuffling: a fresh permutation per pass through the data (fold_in of the pass), sliced in order
    n = xs.shape[0]
    per_epoch = n // BATCH
    def step(params, t):
        perm = jax.random.permutation(jax.random.fold_in(key, t // per_epoch), n)
        idx = jax.lax.dynamic_slice(perm, ((t % per_epoch) * BATCH,), (BATCH,))
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss
    return jax.lax.scan(step, params, jnp.arange(steps))
''',
        '''
def train(key, params, xs, ys, steps, lr):
    def step(carry, _):  # the key carried by the loop, renewed at every step; choice without replacement
        params, k = carry
        k, sub = jax.random.split(k)
        idx = jax.random.choice(sub, xs.shape[0], (BATCH,), replace=False)
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return (jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), k), loss

    (params, _), losses = jax.lax.scan(step, (params, key), None, length=steps)
    return params, losses
''',
        '''
def train(key, params, xs, ys, steps, lr):
    # every step's minibatch drawn before the loop from one key, as one (steps, BATCH) array of
    # indices; the loop, a while_loop over the step number with a buffer of losses
    idx_all = jax.random.randint(key, (steps, BATCH), 0, xs.shape[0])

    def cond(carry):
        return carry[0] < steps

    def body(carry):
        i, params, losses = carry
        idx = idx_all[i]
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        return i + 1, params, losses.at[i].set(loss)

    _, params, losses = jax.lax.while_loop(cond, body, (0, params, jnp.zeros(steps, jnp.float32)))
    return params, losses
''',
        '''
def train(key, params, xs, ys, steps, lr):
    def body(i, carry):  # a fori_loop, step i's key folded in from `key`, its loss written into a buffer
        params, losses = carry
        idx = jax.random.randint(jax.random.fold_in(key, i), (BATCH,), 0, xs.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        return params, losses.at[i].set(loss)

    return jax.lax.fori_loop(0, steps, body, (params, jnp.zeros(steps, jnp.float32)))
''',
        '''
def train(key, params, xs, ys, steps, lr):
    def step(params, k):  # a scan over split keys; each minibatch drawn without replacement
        idx = jax.random.permutation(k, xs.shape[0])[:BATCH]
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss

    return jax.lax.scan(step, params, jax.random.split(key, steps))
''',
        '''
def train(key, params, xs, ys, steps, lr):
    # epochs: each a permutation of the examples (from a key folded in per epoch), cut into minibatches
    n = xs.shape[0]
    per_epoch = n // BATCH

    def step(params, t):
        order = jax.random.permutation(jax.random.fold_in(key, t // per_epoch), n)
        idx = jax.lax.dynamic_slice_in_dim(order, (t % per_epoch) * BATCH, BATCH)
        loss, grads = jax.value_and_grad(loss_fn)(params, xs[idx], ys[idx])
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss

    return jax.lax.scan(step, params, jnp.arange(steps))
''',
    ],
}
