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
}
