"""Known-wrong answers for 08_prng: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase of the feedback specific to the mistake,
                    the idea whose course section the feedback must point to), ...]
"""

WRONG = {
    "dropout": [
        ('''
def dropout(key, x, rate):
    rng = np.random.default_rng(0)  # seeded, so reproducible, but it ignores `key`
    keep = rng.random(x.shape) >= rate
    return jnp.where(keep, x / (1.0 - rate), 0.0)
''', "two different keys gave the same mask under jax.jit", "prng"),
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
    ],
    "init_mlp": [
        ('''
def init_mlp(key, sizes):
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        w = jax.random.normal(key, (m, n)) / jnp.sqrt(m)
        params.append({"w": w, "b": jnp.zeros((n,))})
    return params
''', "got identical (or strongly correlated) weights: each layer needs its own key", "prng"),
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
    ],
    "noisy_batch": [
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
''', 'the program of noisy_batch grows with the batch', 'per_example_keys'),
    ],
}

WRONG["random_crop"] = [
    ('''
def random_crop(key, images, size):
    n, h, w = images.shape
    limits = jnp.array([h - size + 1, w - size + 1])

    def crop_one(image):
        top, left = jax.random.randint(key, (2,), 0, limits)  # the one key for every image
        return jax.lax.dynamic_slice(image, (top, left), (size, size))

    return jax.vmap(crop_one)(images)
''', "cut every image at the same position", "per_example_keys"),
    ('''
def random_crop(key, images, size):
    n, h, w = images.shape
    crops = []
    for i, k in enumerate(jax.random.split(key, n)):  # a Python loop: one copy per image
        top, left = jax.random.randint(k, (2,), 0, jnp.array([h - size + 1, w - size + 1]))
        crops.append(jax.lax.dynamic_slice(images[i], (top, left), (size, size)))
    return jnp.stack(crops)
''', "grows with the number of images", "per_example_keys"),
    ('''
def random_crop(key, images, size):
    n, h, w = images.shape
    limits = jnp.array([h - size, w - size])  # the last position that fits is never drawn

    def crop_one(k, image):
        top, left = jax.random.randint(k, (2,), 0, limits)
        return jax.lax.dynamic_slice(image, (top, left), (size, size))

    return jax.vmap(crop_one)(jax.random.split(key, n), images)
''', "by the contract: one randint of shape (2,)", "per_example_keys"),
]
