"""Known-wrong answers for 03_purity: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase of the feedback specific to the mistake,
                    the idea whose course section the feedback must point to), ...]
"""

WRONG = {
    "step": [
        ('''
STEPS_TAKEN = 0

def step(state, x):
    global STEPS_TAKEN
    STEPS_TAKEN += 1  # "just bookkeeping", but a global written on every call
    count = state["count"] + 1
    total = state["total"] + x
    return {"count": count, "total": total}, total / count
''', "changed the global(s) ['STEPS_TAKEN']", "purity"),
        ('''
def step(state, x, _seen=[]):
    # the history hides in a mutable default argument instead of a global
    _seen.append(x)
    count = state["count"] + 1
    total = state["total"] + x
    return {"count": count, "total": total}, sum(_seen) / len(_seen)
''', "`step` gave different results for the same inputs", "purity"),
        ('''
def step(state, x):
    # updates the caller's dict in place instead of returning a new one
    state["count"] = state["count"] + 1
    state["total"] = state["total"] + x
    return state, state["total"] / state["count"]
''', "`step` changed the `state` dict it was given in place", "state"),
        ('''
def step(state, x):
    total = state["total"] + x
    # the mean uses the old count: off by one
    return {"count": state["count"] + 1, "total": total}, total / jnp.maximum(state["count"], 1)
''', "`step`'s result on random input #1[1] is wrong", "state"),
    ],
    "set_diagonal": [
        ('''
def set_diagonal(x, v):
    # a copy through NumPy: fine eagerly, impossible on a tracer under jit
    out = np.array(x, copy=True)
    np.fill_diagonal(out, v)
    return jnp.asarray(out)
''', "jax.jit(set_diagonal) converted a traced array to NumPy", "inplace"),
        ('''
def set_diagonal(x, v):
    x = np.asarray(x)  # no copy: writes into the caller's NumPy array
    i = np.arange(x.shape[0])
    x[i, i] = v
    return jnp.asarray(x)
''', "set_diagonal on a NumPy array modified that array in place", "inplace"),
        ('''
def set_diagonal(x, v):
    i = jnp.arange(x.shape[0])
    return jnp.asarray(x).at[i, i].add(v)  # adds to the diagonal instead of setting it
''', "set_diagonal(x, 7.0) is wrong", "inplace"),
    ],
    "normalize_batch": [
        ('''
_CACHE = {}

def normalize_batch(x):
    # statistics cached per shape: a new batch of the same shape reuses old statistics
    if x.shape not in _CACHE:
        _CACHE[x.shape] = (jnp.mean(x, axis=0), jnp.sqrt(jnp.var(x, axis=0) + 1e-5))
    mean, std = _CACHE[x.shape]
    return (x - mean) / std
''', "normalize_batch(batch 2), called after batch 1 is wrong", "purity"),
        ('''
SEEN = {"batches": 0}

def normalize_batch(x):
    SEEN["batches"] += 1  # bookkeeping "on the side", in a global
    mean, var = jnp.mean(x, axis=0), jnp.var(x, axis=0)
    return (x - mean) / jnp.sqrt(var + 1e-5)
''', "changed the global(s) ['SEEN']", "purity"),
        ('''
def normalize_batch(x):
    mean = jnp.mean(x, axis=0)
    return (x - mean) / (jnp.std(x, axis=0) + 1e-5)  # eps outside the square root
''', "It adds eps outside the square root", "numerics"),
        ('''
def normalize_batch(x):
    mean = jnp.mean(x, axis=0)
    return (x - mean) / jnp.sqrt(jnp.var(x, axis=0, ddof=1) + 1e-5)  # sample variance
''', "It divides by the sample variance (ddof=1)", "numerics"),
    ],
    "adam_step": [
        ("""
STEP = [0]  # the step count kept outside the state


def adam_init(params):
    zeros = lambda tree: jax.tree_util.tree_map(jnp.zeros_like, tree)
    return {"m": zeros(params), "v": zeros(params)}


def adam_step(params, grads, state, lr):
    STEP[0] += 1
    t = STEP[0]
    m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, state["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, state["v"], grads)
    new = jax.tree_util.tree_map(
        lambda p, m, v: p - lr * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8), params, m, v)
    return new, {"m": m, "v": v}
""", "after step 2", "state"),
        ("""
def adam_init(params):
    zeros = lambda tree: jax.tree_util.tree_map(jnp.zeros_like, tree)
    return {"m": zeros(params), "v": zeros(params), "t": jnp.zeros((), jnp.int32)}


def adam_step(params, grads, state, lr):
    state["t"] = state["t"] + 1  # writes into the state it was given
    t = state["t"].astype(jnp.float32)
    state["m"] = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, state["m"], grads)
    state["v"] = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, state["v"], grads)
    new = jax.tree_util.tree_map(
        lambda p, m, v: p - lr * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8),
        params, state["m"], state["v"])
    return new, state
""", "changed the state it was given", "purity"),
        ("""
def adam_init(params):
    zeros = lambda tree: jax.tree_util.tree_map(jnp.zeros_like, tree)
    return {"m": zeros(params), "v": zeros(params), "t": 0}  # a Python int, not an array


def adam_step(params, grads, state, lr):
    t = state["t"] + 1
    m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, state["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, state["v"], grads)
    new = jax.tree_util.tree_map(
        lambda p, m, v: p - lr * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8), params, m, v)
    return new, {"m": m, "v": v, "t": t}
""", "the state must be a pytree of arrays", "state"),
        ("""
def adam_init(params):
    zeros = lambda tree: jax.tree_util.tree_map(jnp.zeros_like, tree)
    return (zeros(params), zeros(params), jnp.zeros((), jnp.int32))


def adam_step(params, grads, state, lr):
    m, v, t = state
    m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, grads)
    v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, grads)
    tf = t.astype(jnp.float32)  # the bias correction uses the count before this step
    new = jax.tree_util.tree_map(
        lambda p, m, v: p - lr * (m / (1 - 0.9 ** (tf + 1))) / (jnp.sqrt(v / (1 - 0.999 ** (tf + 1))) + 1e-8),
        params, m, v)
    return new, (m, v, t)  # ...and never advances it
""", "after step 2", "state"),
    ],
}

# Other right answers: each must earn the exercise's points.
RIGHT = {
    "adam_step": [
        '''
import dataclasses


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class AdamState:
    """The optimizer's state as a class of one's own: a pytree of arrays, registered."""
    m: dict
    v: dict
    t: jax.Array


def adam_init(params):
    zeros = lambda tree: jax.tree_util.tree_map(jnp.zeros_like, tree)
    return AdamState(m=zeros(params), v=zeros(params), t=jnp.zeros((), jnp.int32))


def adam_step(params, grads, state, lr):
    b1, b2, eps = 0.9, 0.999, 1e-8
    t = state.t + 1
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, state.m, grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state.v, grads)
    tf = t.astype(jnp.float32)
    new_params = jax.tree_util.tree_map(
        lambda p, m, v: p - lr * (m / (1 - b1 ** tf)) / (jnp.sqrt(v / (1 - b2 ** tf)) + eps), params, m, v)
    return new_params, AdamState(m=m, v=v, t=t)
''',
    ],
}
