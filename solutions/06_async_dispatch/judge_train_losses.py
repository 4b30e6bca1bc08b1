"""The judge of 06_async_dispatch's ``train_losses`` (trusted: runs in the grader, never in the kernel).

``train_losses(params, batches)`` must be the whole training loop as one compiled program. The
values and the structure graded come from the learner's exported programs (``k.export`` traces
under ``jax.jit``, so ``float()``, ``.item()`` or ``np.asarray`` of a traced loss fails there):
one program per number of steps, each run here on the judge's own inputs (``loops=True``: the
exercise needs a loop inside the program) and compared with the judge's float64 copy of the
notebook's ``sgd_step``; the programs read as parsed modules (:mod:`autograder.judge.mlir`) have
the same number of operations at two step counts and at a third beyond every size written in
those two and every published one (:func:`autograder.judge.effect.beyond`), all three of one
remainder modulo 120 (a scan partly unrolled by a factor dividing 120, 2 to 6 and 8 among them, is
one size there), where its values are judged too (each program's size judged before it runs): the loop is inside, not unrolled over batches padded to a fixed length. Kernel
claims, which can only fail the test: one trace of ``jax.jit(train_losses)`` for new values of one
shape (its outputs checked here), and no host transfer (the guard fires on GPU and TPU only).
The direct call must return a ``jax.Array`` of the right values.
"""
import numpy as np

from autograder.judge import call, check_close, explain_error, ExerciseFailure, fail, tolerance
from autograder.judge import effect, mlir
from autograder.judge import Fixture, Ref, Spec, as_jax

LR = 0.1  # the notebook's sgd_step
# Step counts that differ by multiples of 120: a scan unrolled by a factor that divides 120 (unroll=2
# to 6, 8, 10, 12...) runs its remainder steps (steps % factor) unrolled, a size that depends on the
# count's remainder and is bounded, not growing; at one remainder it is one size. (840 would admit 7
# too, but a loop unrolled in Python would then be exported at over 850 steps: minutes.)
PERIOD = 120
PUBLISHED = 24 + PERIOD  # the most steps a published test (the visible one's 20, this judge's 17 to 144) tries


def _reference_losses(params, batches):
    """The judge's own copy of the notebook's sgd_step (MSE of x @ w + b, learning rate 0.1), in
    float64: the loss before each step."""
    w, b = np.asarray(params["w"], np.float64), float(params["b"])
    losses = []
    for x, y in zip(np.asarray(batches["x"], np.float64), np.asarray(batches["y"], np.float64)):
        r = x @ w + b - y
        losses.append(np.mean(r ** 2))
        w, b = w - LR * 2 * x.T @ r / len(y), b - LR * 2 * np.mean(r)
    return np.array(losses)


def _data(rng, steps, batch=8, d=3):
    params = {"w": (rng.normal(size=d) * 0.1).astype(np.float32), "b": np.float32(rng.normal() * 0.1)}
    x = rng.normal(size=(steps, batch, d)).astype(np.float32)
    y = (x @ rng.normal(size=d) + rng.uniform(-1, 1) + 0.1 * rng.normal(size=(steps, batch))).astype(np.float32)
    return params, {"x": x, "y": y}


def _as_async(exc, label):
    """A traced loss converted to Python or NumPy is a hidden host sync (idea: async)."""
    return explain_error([c.__name__ for c in type(exc).__mro__], str(exc), label, concrete_idea="async")


def _specs(tree):
    return {name: Spec(np.shape(a), str(np.asarray(a).dtype)) for name, a in tree.items()}


def _tolerance():
    rtol, atol = tolerance("float32")
    return 10 * rtol, 10 * atol  # a few steps of float32 SGD, each loss a mean of squares


def _check_values(got, params, batches, what):
    steps = batches["x"].shape[0]
    if not isinstance(got, np.ndarray) or got.shape != (steps,):
        fail("async", f"{what} returned {type(got).__name__} of shape {getattr(got, 'shape', None)}; "
                         f"return the losses as one array of shape ({steps},), stacked on the device.")
    if got.dtype != np.float32:
        fail("async", f"{what} returned losses of dtype {got.dtype}; `sgd_step`'s losses are float32.")
    rtol, atol = _tolerance()
    check_close(got, _reference_losses(params, batches), what=f"{what} (the loss `sgd_step` returns at each "
                                                                  "step)", rtol=rtol, atol=atol)


def _program(k, steps, run=True):
    """The exported jax.jit(train_losses) for ``steps`` steps and its facts, its values run here
    (with ``run``; else :func:`_run` them once its size is judged: an unrolled program of hundreds
    of steps would take long to compile)."""
    p, b = _data(k.rng, steps)
    label = "tracing train_losses under jax.jit"
    exported = call(k.export, "train_losses", _specs(p), _specs(b), what=label, translate=_as_async)
    facts = mlir.read(exported)
    if run:
        _run(k, exported, steps)
    return exported, facts


def _run(k, exported, steps):
    p, b = _data(k.rng, steps)  # new values for the same program
    got = exported.call(p, b, loops=True)
    _check_values(np.asarray(got) if got is not None else None, p, b,
                  f"the exported jax.jit(train_losses), run by the grader over {steps} steps,")


def test_train_losses(k):
    train_losses = k.fn("train_losses")
    # The direct call: a jax.Array of the losses, right values.
    p, b = _data(k.rng, 6)
    got = call(train_losses, as_jax(p), as_jax(b), what="train_losses(params, batches) over 6 steps",
                  translate=_as_async)
    _check_values(got, p, b, "train_losses(params, batches) over 6 steps")
    # One program per number of steps, of one size: the loop is inside the program.
    # Step counts of one remainder modulo PERIOD (see above), at least 17: a loop of a single
    # unrolled trip (steps <= 2 x factor) is folded away. The larger program's size is judged before
    # it runs: unrolled, it would take long to compile.
    few = int(k.rng.integers(17, 25))
    many = few + PERIOD
    small_program, small = _program(k, few)
    try:
        large_program, large = _program(k, many, run=False)
    except ExerciseFailure as exc:
        fail("dispatch", f"jax.jit(train_losses) fails over {many} steps, though it runs over {few}: it is written "
                            f"for some numbers of steps only (a loop unrolled over batches padded to a fixed "
                            f"length?): {exc.detail}")
    if effect.grows(small.total, large.total):
        fail("dispatch", f"the program of jax.jit(train_losses) has {small.total} operations over {few} steps "
                            f"and {large.total} over {many}: it grows with the number of steps, so the loop was "
                            "unrolled into the program while tracing instead of running inside it as one loop.")
    _run(k, large_program, many)
    # ... and over a number of steps beyond every size written in those programs (a length the
    # batches are padded to, a bound) and every published one: an unrolled loop over batches
    # padded to a fixed length has one size at every count below it, and fails or grows beyond.
    far, written = effect.beyond((small_program, large_program), (few, many, PUBLISHED), k.rng)
    far += (few - far) % PERIOD  # the same remainder as the others (see above), still beyond them all
    beyond = (f"over {far} steps, beyond every size written in its programs over {few} and {many} steps "
              f"(up to {written})")
    try:
        far_program, grown = _program(k, far, run=False)
    except ExerciseFailure as exc:
        fail("dispatch", f"jax.jit(train_losses) fails {beyond}: it is written for the numbers of steps it was "
                            f"tried at (a loop unrolled over batches padded to a fixed length?): {exc.detail}")
    if effect.grows(small.total, grown.total):
        fail("dispatch", f"the program of jax.jit(train_losses) has {small.total} operations over {few} steps and "
                            f"{grown.total} {beyond}: it grows with the number of steps, so the loop was unrolled "
                            "into the program while tracing instead of running inside it as one loop.")
    _run(k, far_program, far)
    if not small.has_loops:
        fail("dispatch", f"the program of jax.jit(train_losses) over {few} steps has no loop, yet it does "
                            f"{few} training steps: the steps must run as one loop inside the compiled program.")
    if not getattr(got, "is_jax", False):
        fail("async", "train_losses returned a NumPy array: the losses were copied to the host inside it. "
                         "Return the jax.Array of losses and let the caller decide when to transfer.")
    # Kernel claims (they can only fail): one trace for new values of one shape, no host transfer.
    calls = []
    for _ in range(3):
        p, b = _data(k.rng, few)
        calls.append((as_jax(p), as_jax(b)))
    report = call(lambda: k.call(Fixture("jit_traces"), Ref("train_losses"), calls), what="jax.jit(train_losses)",
                     translate=_as_async)
    outs = report.get("outs") if isinstance(report, dict) else None
    for i, (p, b) in enumerate(calls):
        values = (outs[i] if isinstance(outs, list) and len(outs) > i else None)
        _check_values(values, {n: a.value for n, a in p.items()}, {n: a.value for n, a in b.items()},
                      f"jax.jit(train_losses) over {few} steps, call #{i + 1},")
    if report.get("traces") != 1:
        fail("dispatch", f"jax.jit(train_losses) traced {report.get('traces')} times for {len(calls)} calls with "
                            "new values of one shape: one compiled program must serve them all.")
    p, b = _data(k.rng, few)
    k.claim("check_no_host_transfer", "train_losses", (as_jax(p), as_jax(b)), what="train_losses")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "train_losses": [
        ('''
def train_losses(params, batches):
    steps = jax.tree.leaves(batches)[0].shape[0]
    losses = []
    for i in range(steps):
        params, loss = sgd_step(params, jax.tree.map(lambda a: a[i], batches))
        losses.append(loss.item())  # a host sync, just spelled differently
    return jnp.array(losses)
''', "tracing train_losses under jax.jit needed the concrete value of a traced array", "async"),
        ('''
def train_losses(params, batches):
    def body(p, batch):
        p, loss = sgd_step(p, batch)
        return p, loss
    _, losses = jax.lax.scan(body, params, batches)
    return np.asarray(losses)  # copies to the host at the end
''', "converted a traced array to NumPy", "async"),
        ('''
def train_losses(params, batches):
    def body(p, batch):
        p, _ = sgd_step(p, batch)
        return p, loss_fn(p, batch)  # the loss after the step, not the one sgd_step reports
    _, losses = jax.lax.scan(body, params, batches)
    return losses
''', "(the loss `sgd_step` returns at each step) is wrong", "numerics"),
        ('''
def train_losses(params, batches):
    steps = jax.tree.leaves(batches)[0].shape[0]
    losses = []
    for i in range(steps):
        params, loss = sgd_step(params, jax.tree.map(lambda a: a[i], batches))
        losses.append(loss)
    return losses  # a list of scalars, not one array
''', "returned list of shape None; return the losses as one array of shape (6,)", "async"),
        ('''
def train_losses(params, batches):
    def body(p, batch):
        _, loss = sgd_step(params, batch)  # the initial params at every step: nothing is learned
        return p, loss
    _, losses = jax.lax.scan(body, params, batches)
    return losses
''', "(the loss `sgd_step` returns at each step) is wrong", "numerics"),
        ('''
def train_losses(params, batches):
    steps = jax.tree.leaves(batches)[0].shape[0]
    losses = []
    for i in range(steps):  # no host sync any more, but the loop is unrolled while tracing
        params, loss = sgd_step(params, jax.tree.map(lambda a: a[i], batches))
        losses.append(loss)
    return jnp.stack(losses)
''', "it grows with the number of steps", "dispatch"),
        ('''
def train_losses(params, batches):
    _, losses = jax.lax.scan(sgd_step, params, batches, unroll=True)  # a scan, fully unrolled
    return losses
''', "it grows with the number of steps", "dispatch"),
        ('''
def train_losses(params, batches):
    # a Python loop unrolled over batches padded to 64 steps, each padded step masked out: the
    # program has the same size at every number of steps up to 64; one loop in it, as a decoy
    steps = jax.tree.leaves(batches)[0].shape[0]
    padded = jax.tree.map(lambda a: jnp.concatenate([a, jnp.zeros((64 - steps,) + a.shape[1:], a.dtype)]), batches)
    losses = []
    for i in range(64):
        batch = jax.tree.map(lambda a: a[i], padded)
        live = jnp.any(batch["x"] != 0)
        new, loss = sgd_step(params, batch)
        params = jax.tree.map(lambda n, o: jnp.where(live, n, o), new, params)
        losses.append(loss)
    losses = jax.lax.fori_loop(0, 2, lambda i, l: jnp.maximum(l, 0.0), jnp.stack(losses))
    return losses[:steps]
''', "it is written for some numbers of steps only", "dispatch"),
    ],
}

RIGHT = {
    "train_losses": [
        '''
def train_losses(params, batches):
    steps = jax.tree.leaves(batches)[0].shape[0]

    def body(i, carry):  # a fori_loop over the steps, the losses written into a buffer
        p, losses = carry
        p, loss = sgd_step(p, jax.tree.map(lambda a: a[i], batches))
        return p, losses.at[i].set(loss)

    return jax.lax.fori_loop(0, steps, body, (params, jnp.zeros(steps, jnp.float32)))[1]
''',
        '''
def train_losses(params, batches):
    # a scan partly unrolled for speed: 4 steps per trip, a bounded program at any number of steps
    _, losses = jax.lax.scan(sgd_step, params, batches, unroll=4)
    return losses
''',
        '''
def train_losses(params, batches):
    # unrolled by 5: a bounded program too (a remainder of up to 4 steps unrolled)
    _, losses = jax.lax.scan(sgd_step, params, batches, unroll=5)
    return losses
''',
    ],
}
