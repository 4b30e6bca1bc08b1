"""Known-wrong answers for 06_async_dispatch: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase of the feedback specific to the mistake,
                    the idea whose course section the feedback must point to), ...]
"""

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
''', "handed the timing to the course's own `ag.honest_time`", 'timing'),
    ],
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
''', 'after the first call a new `lr` must reuse the compiled program', 'recompiles'),
    ],
}

WRONG["logged_losses"] = [
    ('''
def logged_losses(step, params, batches, every):
    losses = []
    for i, batch in enumerate(batches):
        params, loss = step(params, batch)
        if i % every == 0:
            losses.append(loss.item())  # waits for this step, inside the loop
    return params, losses
''', "before every step is dispatched", "async"),
    ('''
def logged_losses(step, params, batches, every):
    logged = []
    for i, batch in enumerate(batches):
        params, loss = step(params, batch)
        logged.append(loss)  # every step's loss kept, not every `every`-th
    return params, [float(v) for v in logged]
''', "(0, every, 2 * every, ...)", "async"),
    ('''
def logged_losses(step, params, batches, every):
    logged = []
    for i, batch in enumerate(batches):
        params, loss = step(params, batch)
        if i % every == 0:
            logged.append(loss)
    return params, logged  # device results, never turned into floats
''', "return a Python list of floats", "async"),
]
