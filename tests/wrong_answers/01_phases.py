"""Known-wrong answers for 01_phases: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase the feedback must contain), ...]
"""

WRONG = {
    "primitive_names": [
        ('''
def primitive_names(f, *args):
    jaxpr = jax.make_jaxpr(f)(*args)
    return sorted({eqn.primitive.name for eqn in jaxpr.eqns})
''', "expected"),
        ('''
def primitive_names(f, *args):
    names = [eqn.primitive.name for eqn in jax.make_jaxpr(f)(*args).eqns]
    return list(dict.fromkeys(names))  # drops repeated primitives
''', "expected"),
    ],
    "runtime_print": [
        ('''
def runtime_print(x):
    y = jnp.sin(x)
    print("sin(x) =", y)
    return y * 2
''', "printed a tracer"),
        ('''
def runtime_print(x):
    y = jnp.sin(x)
    jax.debug.print("x = {}", x)  # prints the input, not the intermediate value
    return y * 2
''', "does not show the values"),
        ('''
def runtime_print(x):
    y = jnp.sin(x)
    jax.debug.print("sin(x) = {}", y)
    return y  # result changed
''', "is wrong"),
    ],
    "scaled": [
        ('''
def scaled(x, scale):
    return x * SCALE
''', "is wrong"),
        ('''
def scaled(x, scale):
    global SCALE
    SCALE = scale  # writes the input into a global: impure, and leaks a tracer under jit
    return x * SCALE
''', "global"),
        ('''
def scaled(x, scale):
    return x * float(scale)  # needs a concrete value: fails to trace
''', "concrete value"),
    ],
    "matmul_flops": [
        ('''
def matmul_flops(n):
    return float(n ** 3)  # forgets that each multiply-add is two FLOPs
''', "expected"),
        ('''
def matmul_flops(n):
    a = jnp.ones((n, n), jnp.float32)
    analysis = jax.jit(jnp.matmul).lower(a, a).compile().cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    return float(analysis["bytes accessed"])
''', "expected"),
    ],
}
