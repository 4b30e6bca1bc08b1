"""Known-wrong answers for 01_phases: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase of the feedback specific to the mistake,
                    the idea whose course section the feedback must point to), ...]
"""

WRONG = {
    "primitive_names": [
        ('''
def primitive_names(f, *args):
    jaxpr = jax.make_jaxpr(f)(*args)
    return sorted({eqn.primitive.name for eqn in jaxpr.eqns})
''', "in the wrong order", "phases"),
        ('''
def primitive_names(f, *args):
    names = [eqn.primitive.name for eqn in jax.make_jaxpr(f)(*args).eqns]
    return list(dict.fromkeys(names))  # drops repeated primitives
''', "dropped the repeated primitives", "phases"),
        ('''
def primitive_names(f, *args):
    names = []

    def walk(jaxpr):  # also lists what is inside nested jaxprs (jit, cond, scan bodies)
        for eqn in jaxpr.eqns:
            names.append(eqn.primitive.name)
            for param in eqn.params.values():
                for sub in (param if isinstance(param, (list, tuple)) else [param]):
                    if hasattr(sub, "eqns"):
                        walk(sub)
                    elif hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):
                        walk(sub.jaxpr)

    walk(jax.make_jaxpr(f)(*args).jaxpr)
    return names
''', "from inside nested jaxprs", "phases"),
    ],
    "runtime_print": [
        ('''
def runtime_print(x):
    y = jnp.sin(x)
    print("sin(x) =", y)
    return y * 2
''', "printed a tracer", "runtime_values"),
        ('''
def runtime_print(x):
    y = jnp.sin(x)
    jax.debug.print("x = {}", x)  # prints the input, not the intermediate value
    return y * 2
''', "does not show the values", "runtime_values"),
        ('''
def runtime_print(x):
    y = jnp.sin(x)
    jax.debug.print("sin(x) = {}", y)
    return y  # result changed
''', "`runtime_print`'s result on random input #1 is wrong", "runtime_values"),
    ],
    "scaled": [
        ('''
def scaled(x, scale):
    return x * SCALE
''', "must scale by its `scale` argument", "constants"),
        ('''
def scaled(x, scale):
    global SCALE
    SCALE = scale  # writes the input into a global: impure, and leaks a tracer under jit
    return x * SCALE
''', "changed the global(s) ['SCALE']", "purity"),
        ('''
def scaled(x, scale):
    return x * float(scale)  # needs a concrete value: fails to trace
''', "needed the concrete value of a traced array", "static"),
        ('''
def scaled(x, scale):
    # a fresh jitted function per call: right values, but each new scale is a new program
    return jax.jit(lambda v: v * scale)(x)
''', 'after the first call, a new `scale` must reuse the compiled program', 'constants'),
    ],
    "matmul_flops": [
        ('''
def matmul_flops(n):
    return float(n ** 3)  # forgets that each multiply-add is two FLOPs
''', "matmul_flops(16) is 4096.0, but the compiled program's cost analysis reports 8192.0", "cost"),
        ('''
def matmul_flops(n):
    a = jnp.ones((n, n), jnp.float32)
    analysis = jax.jit(jnp.matmul).lower(a, a).compile().cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    return float(analysis["bytes accessed"])
''', "matmul_flops(16) is 3072.0", "cost"),
        ('''
def matmul_flops(n):
    return 2.0 * n ** 3  # the textbook count, not what the compiled program reports
''', "matmul_flops(1) is 2.0, but the compiled program's cost analysis reports 1.0", "cost"),
    ],
    "count_primitives": [
        ("""
from jax.extend import core as jax_core


def count_primitives(f, *args):
    counts = {}
    for eqn in jax.make_jaxpr(f)(*args).eqns:  # the top level only
        counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
    return counts
""", "it counts the top level only", "phases"),
        ("""
from jax.extend import core as jax_core


def count_primitives(f, *args):
    counts = {}

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
            for value in eqn.params.values():
                if isinstance(value, (jax_core.ClosedJaxpr, jax_core.Jaxpr)):  # a cond's tuple of branches is missed
                    walk(value)

    walk(jax.make_jaxpr(f)(*args))
    return counts
""", "inside a tuple or list in the params", "phases"),
        ("""
from jax.extend import core as jax_core


def count_primitives(f, *args):
    counts, seen = {}, set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
            for value in eqn.params.values():
                for inner in value if isinstance(value, (tuple, list)) else [value]:
                    if isinstance(inner, (jax_core.ClosedJaxpr, jax_core.Jaxpr)) and id(inner) not in seen:
                        seen.add(id(inner))  # a jaxpr shared by two equations is walked once
                        walk(inner)

    walk(jax.make_jaxpr(f)(*args))
    return counts
""", "once per place", "phases"),
        ("""
from collections import Counter
from jax.extend import core as jax_core


def count_primitives(f, *args):
    counts = Counter()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            inner = [v for value in eqn.params.values()
                     for v in (value if isinstance(value, (tuple, list)) else [value])
                     if isinstance(v, (jax_core.ClosedJaxpr, jax_core.Jaxpr))]
            if inner:
                for j in inner:  # the holding equation itself is not counted
                    walk(j)
            else:
                counts[eqn.primitive.name] += 1

    walk(jax.make_jaxpr(f)(*args))
    return dict(counts)
""", "does not count the equation that holds a nested jaxpr", "phases"),
        ("""
from jax.extend import core as jax_core


def count_primitives(f, *args):
    counts = {}

    def add(jaxpr, deeper):
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
            if not deeper:
                continue
            for value in eqn.params.values():
                for inner in value if isinstance(value, (tuple, list)) else [value]:
                    if isinstance(inner, (jax_core.ClosedJaxpr, jax_core.Jaxpr)):
                        add(inner, False)  # one level of nesting only

    add(jax.make_jaxpr(f)(*args), True)
    return counts
""", "one level of nesting only", "phases"),
    ],
}
