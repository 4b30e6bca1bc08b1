"""Known-wrong answers for 02_static_dynamic: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase of the feedback specific to the mistake,
                    the idea whose course section the feedback must point to), ...]
"""

WRONG = {
    "power": [
        ('''
@jax.jit
def power(x, n):
    # n stays a traced value: one program for every n, so nothing is specialised per n
    return jax.lax.fori_loop(0, n, lambda i, r: r * x, jnp.ones_like(x))
''', "`n` is traced, not static", "static"),
        ('''
def power(x, n):
    # right values, but never jitted: nothing to count, every call dispatches op by op
    result = jnp.ones_like(x)
    for _ in range(n):
        result = result * x
    return result
''', "`power` is not a jitted function", "static"),
        ('''
@partial(jax.jit, static_argnames="n")
def power(x, n):
    result = x  # off by one: power(x, 0) gives x
    for _ in range(n - 1):
        result = result * x
    return result
''', "power(x, 0) is wrong", "numerics"),
    ],
    "scale_by": [
        ('''
def _scale(x, factor):
    return x * factor

scale_by = jax.jit(_scale, static_argnums=1)  # static by position: still one compile per factor
''', "`factor` is a static argument", "static"),
        ('''
def scale_by(x, factor):
    return x * factor  # correct values, but not jitted
''', "`scale_by` is not a jitted function", "static"),
        ('''
@jax.jit
def scale_by(x, factor):
    return x * float(factor)  # needs a concrete value of a traced input
''', "`scale_by` needed the concrete value of a traced array", "static"),
    ],
    "reduce_along": [
        ('''
@partial(jax.jit, static_argnames="op")
def reduce_along(x, axis, op):
    # axis left dynamic: a traced axis cannot choose which dimension to reduce
    return {"sum": jnp.sum, "max": jnp.max, "mean": jnp.mean}[op](x, axis=axis)
''', "reduce_along(x, 1, \"sum\") needed the Python value of a traced argument", "static"),
        ('''
@partial(jax.jit, static_argnames=("axis", "op"))
def reduce_along(x, axis, op):
    if op == "mean":
        return jnp.sum(x, axis=axis) / x.shape[0]  # divides by the wrong axis' length
    return {"sum": jnp.sum, "max": jnp.max}[op](x, axis=axis)
''', "reduce_along(x, 1, 'mean') is wrong", "numerics"),
        ('''
def reduce_along(x, axis, op):
    # jits a fresh function on every call: a new function object is a new cache entry
    return jax.jit(lambda v: {"sum": jnp.sum, "max": jnp.max, "mean": jnp.mean}[op](v, axis=axis))(x)
''', "`reduce_along` is not a jitted function", "static"),
    ],
    "apply_layer": [
        ("""
@partial(jax.jit, static_argnames="items")
def _layer(x, items):
    config = dict(items)
    act = {"relu": jax.nn.relu, "tanh": jnp.tanh, "gelu": jax.nn.gelu}[config["activation"]]
    y = x
    for _ in range(config["depth"]):
        y = act(y * config["scale"] + config["shift"])
    return y


def apply_layer(x, config):
    return _layer(x, tuple(sorted(config.items())))  # hashable, but scale and shift are static too
""", "must be hashable; and only what chooses the program belongs there", "static"),
        ("""
@partial(jax.jit, static_argnames=("activation", "depth", "scale"))
def _layer(x, shift, activation, depth, scale):
    act = {"relu": jax.nn.relu, "tanh": jnp.tanh, "gelu": jax.nn.gelu}[activation]
    y = x
    for _ in range(depth):
        y = act(y * scale + shift)
    return y


def apply_layer(x, config):
    # the scale is still part of the compile signature
    return _layer(x, config["shift"], config["activation"], config["depth"], float(config["scale"]))
""", "needed the Python value of a traced `scale` or `shift`", "static"),
        ("""
@partial(jax.jit, static_argnames=("activation", "depth"))
def _layer(x, scale, shift, activation, depth):
    act = {"relu": jax.nn.relu, "tanh": jnp.tanh, "gelu": jax.nn.gelu}[activation]
    y = x * scale + shift  # ...
    for _ in range(depth - 1):
        y = act(y) * scale + shift
    return act(y)


def apply_layer(x, config):
    x = jnp.asarray(x, jnp.float32) + 0.0  # eager work before the compiled program: a compile of its own
    return _layer(x, config["scale"], config["shift"], activation=config["activation"], depth=config["depth"])
""", "distinct (activation, depth) compiled", "recompiles"),
        ("""
@partial(jax.jit, static_argnames=("activation", "depth"))
def _layer(x, scale, shift, activation, depth):
    act = {"relu": jax.nn.relu, "tanh": jnp.tanh,
           "gelu": lambda v: jax.nn.gelu(v, approximate=False)}[activation]
    y = x
    for _ in range(depth):
        y = act(y * scale + shift)
    return y


def apply_layer(x, config):
    return _layer(x, config["scale"], config["shift"], activation=config["activation"], depth=config["depth"])
""", "It computes the exact gelu", "numerics"),
    ],
}
