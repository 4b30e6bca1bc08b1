"""Known-wrong answers for 10_review: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase of the feedback specific to the mistake,
                    the idea whose course section the feedback must point to), ...]
"""

WRONG = {
    "train": [
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
''', "plain minibatch SGD reaches", "capstone"),
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
''', 'every step drew the same minibatch, from the same key', 'key_reuse'),
    ],
}

_KMEANS_STEP = '''
    def step(centroids, _):
        distances = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        labels = jnp.argmin(distances, axis=1)
        sums = jax.ops.segment_sum(points, labels, num_segments=k)
        counts = jax.ops.segment_sum(jnp.ones(n, points.dtype), labels, num_segments=k)
'''

WRONG["kmeans"] = [
    ('''
def kmeans(key, points, k, iters):
    n = points.shape[0]
    init = points[jax.random.choice(key, n, (k,), replace=False)]
''' + _KMEANS_STEP + '''
        return sums / jnp.maximum(counts, 1)[:, None], None  # an empty cluster falls to the origin

    return jax.lax.scan(step, init, None, length=iters)[0]
''', "(two initial centroids coincide: one cluster stays empty)", "capstone"),
    ('''
def kmeans(key, points, k, iters):
    n = points.shape[0]
    init = points[jax.random.choice(key, n, (k,), replace=False)]
''' + _KMEANS_STEP + '''
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
''' + _KMEANS_STEP + '''
        return jnp.where((counts > 0)[:, None], sums / jnp.maximum(counts, 1)[:, None], centroids), None

    return jax.lax.scan(step, init, None, length=iters)[0]
''', "but not the ones `jax.random.choice(key, n, (k,), replace=False)` chooses", "prng"),
]
