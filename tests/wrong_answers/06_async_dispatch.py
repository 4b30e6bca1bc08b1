"""Known-wrong answers for 06_async_dispatch: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase the feedback must contain), ...]
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
''', "never waited"),
        ('''
def honest_time(f, *args, repeats=5):
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return sum(times) / len(times)  # the mean: one outlier moves it
''', "median"),
        ('''
def honest_time(f, *args, repeats=5):
    times = []
    for _ in range(repeats):  # no warm-up: the first timed call compiles
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return float(statistics.median(times))
''', "warm-up"),
        ('''
def honest_time(f, *args, repeats=5):
    jax.block_until_ready(f(*args))
    start = time.perf_counter()
    outs = [f(*args) for _ in range(repeats)]  # overlapping calls, one wait at the end
    jax.block_until_ready(outs)
    return (time.perf_counter() - start) / repeats
''', "before waiting"),
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
''', "concrete value"),
        ('''
def train_losses(params, batches):
    def body(p, batch):
        p, loss = sgd_step(p, batch)
        return p, loss
    _, losses = jax.lax.scan(body, params, batches)
    return np.asarray(losses)  # copies to the host at the end
''', "numpy"),
        ('''
def train_losses(params, batches):
    def body(p, batch):
        p, _ = sgd_step(p, batch)
        return p, loss_fn(p, batch)  # the loss after the step, not the one sgd_step reports
    _, losses = jax.lax.scan(body, params, batches)
    return losses
''', "is wrong"),
        ('''
def train_losses(params, batches):
    steps = jax.tree.leaves(batches)[0].shape[0]
    losses = []
    for i in range(steps):
        params, loss = sgd_step(params, jax.tree.map(lambda a: a[i], batches))
        losses.append(loss)
    return losses  # a list of scalars, not one array
''', "one array"),
    ],
    "fused_update": [
        ('''
predict_and_grad = jax.jit(lambda w, x, y: (predict(w, x), grad_mse(w, x, y)))

def fused_update(w, x, y, lr):
    _, g = predict_and_grad(w, x, y)  # one program here...
    return apply_update(w, g, lr)     # ...and another one here
''', "separately compiled programs"),
        ('''
def fused_update(w, x, y, lr):
    r = x @ w - y  # every jnp operation outside jit is its own dispatch
    return w - lr * 2 * x.T @ r / y.shape[0]
''', "eagerly"),
        ('''
from functools import partial

@partial(jax.jit, static_argnames="lr")
def fused_update(w, x, y, lr):
    return apply_update(w, grad_mse(w, x, y), lr)  # a new lr, a new compile
''', "compiled again"),
        ('''
@jax.jit
def fused_update(w, x, y, lr):
    return w - lr * x.T @ (x @ w - y) / y.shape[0]  # forgets the factor 2 of the square
''', "is wrong"),
        ('''
_grad = jax.jit(lambda w, x, y: grad_mse(w, x, y))

def fused_update(w, x, y, lr):
    return w - lr * _grad(w, x, y)  # the update itself runs outside the jitted program
''', "eager operation"),
    ],
}
