"""Known-wrong answers for 09_sharding: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase of the feedback specific to the mistake,
                    the idea whose course section the feedback must point to), ...]
"""

WRONG = {
    "shard_rows": [
        ('''
def shard_rows(x, mesh):
    return jax.device_put(x, NamedSharding(mesh, P(None, "data")))  # splits the columns
''', "is placed as NamedSharding(P(None, 'data')), expected NamedSharding(P('data', None))", "sharding"),
        ('''
def shard_rows(x, mesh):
    return jax.device_put(x, NamedSharding(mesh, P()))  # replicated: every device holds all rows
''', "is placed as NamedSharding(P()), expected NamedSharding(P('data', None))", "sharding"),
        ('''
def shard_rows(x, mesh):
    own = jax.sharding.Mesh(np.array(jax.devices()[:mesh.size]), ("data",), axis_types=(AxisType.Auto,))
    return jax.device_put(x, NamedSharding(own, P("data")))  # ignores the mesh it is given
''', "than the mesh it was given", "sharding"),
    ],
    "explicit_matmul": [
        ('''
def explicit_matmul(x, w):
    return x @ w
''', "explicit_matmul(x, w) raised ShardingTypeError", "explicit_sharding"),
        ('''
def explicit_matmul(x, w):
    return jnp.matmul(x, w, out_sharding=P(None, None))  # replicated, not split by rows
''', "whose sharding is P(None, None), expected P('data', None)", "explicit_sharding"),
        ('''
def explicit_matmul(x, w):
    return jnp.matmul(x, w, out_sharding=P("data", "model"))  # also splits the columns
''', "whose sharding is P('data', 'model'), expected P('data', None)", "explicit_sharding"),
    ],
    "global_mean": [
        ('''
def global_mean(x, mesh):
    return jnp.mean(x)
''', "the program of global_mean(x, mesh) has no `shard_map`", "shard_map"),
        ('''
def global_mean(x, mesh):
    # per-device means, but combined outside shard_map by the compiler, not by a collective
    means = shard_map_fn()(lambda b: jnp.mean(b)[None], mesh=mesh, in_specs=P("data"), out_specs=P("data"))(x)
    return jnp.mean(means)
''', "uses no collective", "shard_map"),
        ('''
def global_mean(x, mesh):
    # sums the per-device means: forgets that there are mesh.size of them
    return shard_map_fn()(lambda b: jax.lax.psum(jnp.mean(b), "data"), mesh=mesh,
                          in_specs=P("data"), out_specs=P())(x)
''', "8 times the mean", "shard_map"),
        ('''
def global_mean(x, mesh):
    # the right number, but each device sums its rows in a loop: the grader runs the program
    # itself, and no loop that the exercise does not need
    def per_device(block):
        total = jax.lax.fori_loop(1, block.shape[0], lambda i, acc: acc + jnp.sum(block[i]), jnp.sum(block[0]))
        return jax.lax.psum(total, "data") / x.size
    return shard_map_fn()(per_device, mesh=mesh, in_specs=P("data"), out_specs=P())(x)
''', "has a loop (`while`)", "shard_map"),
    ],
    "signature_key": [
        ("""
def signature_key(x):
    aval = jax.typeof(x)
    return (aval.shape, aval.dtype, aval.weak_type)  # forgets where a committed array lives
""", "the key is missing 1 of the things the compile signature holds", "sharding_signature"),
        ("""
def signature_key(x):
    aval = jax.typeof(x)
    return (aval.shape, aval.dtype, x.sharding if isinstance(x, jax.Array) else None)  # no weak type
""", "the key is missing 1 of the things the compile signature holds", "sharding_signature"),
        ("""
def signature_key(x):
    aval = jax.typeof(x)
    return (aval.shape, aval.weak_type, x.sharding if isinstance(x, jax.Array) else None)  # no dtype
""", "the key is missing 1 of the things the compile signature holds", "sharding_signature"),
        ("""
def signature_key(x):
    aval = jax.typeof(x)
    sharding = x.sharding if isinstance(x, jax.Array) else None
    return (aval.shape, aval.dtype, aval.weak_type, sharding, np.asarray(x).tobytes())  # the values too
""", "the key holds something jax.jit leaves out of the compile signature", "sharding_signature"),
        ('''
def signature_key(x):
    return jax.typeof(x).shape  # the shape alone: dtype, weak type and sharding forgotten
''', 'the key is missing 3 of the things the compile signature holds', 'sharding_signature'),
    ],
    "tp_mlp": [
        ("""
def tp_mlp(x, w1, w2, mesh):
    def per_device(x, w1, w2):
        w1 = jax.lax.all_gather(w1, "model", axis=1, tiled=True)  # the whole w1 on every device
        h = jax.nn.relu(x @ w1)
        i = jax.lax.axis_index("model")
        rows = w2.shape[0]
        return jax.lax.psum(jax.lax.dynamic_slice_in_dim(h, i * rows, rows, axis=1) @ w2, "model")
    return shard_map_fn()(per_device, mesh=mesh, in_specs=(P("data", None), P(None, "model"), P("model", None)),
                          out_specs=P("data", None))(x, w1, w2)
""", "all-gather: data other than the partial products crosses the mesh", "shard_map"),
        ("""
@jax.jit
def _mlp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2  # the compiler partitions it: right numbers, no per-device code

def tp_mlp(x, w1, w2, mesh):
    return _mlp(x, w1, w2)
""", "has no per-device region", "shard_map"),
        ("""
def tp_mlp(x, w1, w2, mesh):
    def per_device(x, w1, w2):
        return jax.lax.pmean(jax.nn.relu(x @ w1) @ w2, "model")  # the mean of the partial products
    return shard_map_fn()(per_device, mesh=mesh, in_specs=(P("data", None), P(None, "model"), P("model", None)),
                          out_specs=P("data", None))(x, w1, w2)
""", "relu(x @ w1) @ w2, is wrong", "shard_map"),
        ("""
def tp_mlp(x, w1, w2, mesh):
    def per_device(x, w1, w2):
        i, rows = jax.lax.axis_index("model"), w1.shape[1]
        own = jax.lax.dynamic_slice_in_dim(w2, i * rows, rows, axis=0)  # its rows, cut from the whole w2
        return jax.lax.psum(jax.nn.relu(x @ w1) @ own, "model")
    return shard_map_fn()(per_device, mesh=mesh, in_specs=(P("data", None), P(None, "model"), P()),
                          out_specs=P("data", None))(x, w1, w2)
""", "a weight or an activation is gathered or redistributed", "shard_map"),
    ],
}
