"""The judge of 01_phases (trusted: runs in the grader, never in the learner's kernel).

One ``test_<name>(k)`` per graded test cell; ``k`` is an :class:`autograder.judge.Kernel`.

- ``primitive_names``: the learner's function is given functions of :mod:`autograder.agent.fixtures`
  (``Fixture`` markers: repeats, two arguments, a nested jit, ``cond``, ``scan``, captured
  constants) at arguments drawn from ``k.rng``; the reference is ``jax.make_jaxpr`` of the same
  fixture, traced here, compared in order.
- ``runtime_print``: values (eager and jitted) judged here; what each jitted call printed comes
  back as text (``printed_call`` fixture) and its numbers are compared with sin(x) here.
- ``scaled``: values from its exported program (``scale`` traced, fresh scales), judged here;
  the kernel's eager calls are fail-only; one compile for four scales under the judge's jit,
  no compile after the first of four direct calls (``compiles_per_call``) and no global
  changed are kernel-side observations that can only fail the test.
- ``matmul_flops``: compared with the cost analysis of the judge's own compile of the same
  product (same JAX, same backend as the kernel). ``n = 1`` is always asked: there XLA's count
  is not the textbook ``2 * n**3`` (on CPU, JAX 0.7.2 and 0.10.2, it reports 1.0), so an answer
  that ignores the compiler fails.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np

from autograder.judge import (
    call,
    check_close,
    check_equal,
    check_matches_reference,
    fail,
    fixtures,
    numbers_in,
    primitives_in,
)
from autograder.judge import programs
from autograder.judge import AsJax, Fixture, Ref, values


def _f32(x):
    return AsJax(np.asarray(x, np.float32))


# --------------------------------------------------------------------------- primitive_names

def _reference_names(fixture, args):
    """(top-level names, names with the nested jaxprs' ones) of the fixture, traced here."""
    closed = jax.make_jaxpr(getattr(fixtures, fixture))(*values(args))
    return [e.primitive.name for e in closed.jaxpr.eqns], primitives_in(closed, nested=True)


def _check_names(k, fixture, args, what):
    """primitive_names(fixture, *args) in the kernel against the judge's own jaxpr; an answer
    with the right primitives in another order, without the repeats, or with the primitives of
    nested jaxprs, is told so."""
    got = call(k.fn("primitive_names"), Fixture(fixture), *args, what=what)
    want, nested = _reference_names(fixture, args)
    names = [str(n) for n in got] if isinstance(got, (list, tuple)) else None
    if names is not None and names != want:
        if sorted(names) == sorted(want):
            fail("phases", f"{what} is {names!r}: the right primitives in the wrong order, expected "
                              f"{want!r}. The names come in the order of the jaxpr's "
                              "equations, not sorted.")
        if names == list(dict.fromkeys(want)):
            fail("phases", f"{what} is {names!r}, expected {want!r}: it dropped the repeated "
                              "primitives, but a primitive applied twice is two equations of the jaxpr.")
        inner = sorted(set(names) & (set(nested) - set(want)))
        if inner:
            fail("phases", f"{what} is {names!r}, expected {want!r}: it lists {inner} from inside "
                              "nested jaxprs (the body of a nested jit, cond or scan). A nested jaxpr is "
                              "one equation of the top level (named `jit`, `cond`, `scan`...); list the "
                              "top level's equations only.")
    check_equal(got, want, what=what, idea="phases")


def test_primitive_names(k):
    rng = k.rng
    n = int(rng.integers(2, 6))
    vec = lambda size=n: _f32(rng.normal(size=size))  # noqa: E731
    # First: no repeats, not in alphabetical order (a sorted answer is told so); then repeats.
    _check_names(k, "sin_times_two", (float(np.float32(rng.uniform(-2.0, 2.0))),),
                 "primitive_names(f, x) for f(x) = jnp.sin(x) * 2")
    _check_names(k, "sin_sin_plus_cos", (vec(),), "primitive_names(f, x) for f(x) = sin(sin(x)) + cos(x)")
    # The same f at integer arguments: its jaxpr is traced anew for them and starts with a
    # conversion to float, so names kept from the float call (a cache keyed by f alone) are wrong.
    ints = AsJax(rng.integers(-3, 4, size=n).astype(np.int32))
    float_names = _reference_names("sin_sin_plus_cos", (vec(),))[0]
    got = call(k.fn("primitive_names"), Fixture("sin_sin_plus_cos"), ints, what="primitive_names")
    if isinstance(got, (list, tuple)) and [str(v) for v in got] == float_names:
        fail("phases", f"primitive_names(f, x) for f(x) = sin(sin(x)) + cos(x) at an int32 x is {list(got)!r}, the "
                       "names of its jaxpr at a float32 x: a jaxpr belongs to f *at* its arguments (their shapes and "
                       "dtypes), and at an int32 x JAX traces another one.")
    _check_names(k, "sin_sin_plus_cos", (ints,), "primitive_names(f, x) for f(x) = sin(sin(x)) + cos(x) at an int32 x")
    # The same f at a float32 vector, then at a float32 matrix: one dtype, two jaxprs (`x.T` of a
    # vector is the vector itself, of a matrix a transpose), so names kept by f and dtypes are wrong.
    _check_names(k, "tanh_matmul_transpose", (vec(),), "primitive_names(f, x) for f(x) = tanh(x) @ x.T at a vector x")
    matrix = (_f32(rng.normal(size=(int(rng.integers(2, 5)), n))),)
    vector_names = _reference_names("tanh_matmul_transpose", (vec(),))[0]
    got = call(k.fn("primitive_names"), Fixture("tanh_matmul_transpose"), *matrix, what="primitive_names")
    if isinstance(got, (list, tuple)) and [str(v) for v in got] == vector_names:
        fail("phases", f"primitive_names(f, x) for f(x) = tanh(x) @ x.T at a float32 matrix x is {list(got)!r}, the "
                       "names of its jaxpr at a float32 vector x: a jaxpr belongs to f *at* its arguments' shapes as "
                       "well as their dtypes, and at a matrix JAX traces another one (`x.T` is a transpose there).")
    _check_names(k, "tanh_matmul_transpose", matrix, "primitive_names(f, x) for f(x) = tanh(x) @ x.T at a matrix x")
    cases = [
        ("exp_times_minus", (float(np.float32(rng.normal())), float(np.float32(rng.normal()))),
         "f(x, y) = exp(x) * y - x"),
        ("tanh_matmul_transpose", (_f32(rng.normal(size=(int(rng.integers(2, 5)), n))),), "f(x) = tanh(x) @ x.T"),
        ("identity", (vec(),), "f(x) = x"),
        ("matmul_tanh", (_f32(rng.normal(size=(2, n))), _f32(rng.normal(size=(n, 3)))), "f(a, b) = tanh(a @ b)"),
        ("nested_jit", (vec(),), "an f that calls a jitted function twice"),
        ("cond_then_exp", (vec(), _f32(rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2.0))),
         "an f with a lax.cond"),
        ("scan_cumsum_tanh", (_f32(rng.normal(size=(int(rng.integers(2, 6)), n))),), "an f with a lax.scan"),
        ("with_constants", (vec(3),), "an f with a captured NumPy constant"),
    ]
    for i in rng.permutation(len(cases)):
        fixture, args, desc = cases[int(i)]
        _check_names(k, fixture, args, f"primitive_names(f, ...) for {desc}")


# --------------------------------------------------------------------------- runtime_print

def _away_from_zero(rng, size):
    """|x| in [1.6, 3]: then |sin(x)| < 1 < |x|, so printing x is never mistaken for sin(x)."""
    return (rng.choice([-1.0, 1.0], size=size) * rng.uniform(1.6, 3.0, size=size)).astype(np.float32)


def _check_printed(k, x, i):
    """jax.jit(runtime_print)(x) in the kernel, with what it printed; the printed numbers are
    read and compared with sin(x) here (the results are checked by the reference test below)."""
    label = "jax.jit(runtime_print)"
    got = call(k.fn(Fixture("printed_call")), Ref("runtime_print"), _f32(x), what=label)
    text = got.get("printed") if isinstance(got, dict) else None
    if not isinstance(text, str):
        fail("runtime_values", f"{label}'s printed output could not be read back from the kernel.")
    if "Traced<" in text or "Tracer" in text:
        fail("runtime_values", f"{label} printed a tracer ({text.strip()[:120]!r}): Python's "
                                  "`print` runs at trace time, when there is no value yet: the print is not part of "
                                  "the compiled program.")
    want = np.sin(x.astype(np.float64))
    seen = numbers_in(text)
    tol = 1e-3
    missing = [float(v) for v in want if not np.any(np.abs(seen - v) <= tol + tol * abs(v))]
    if missing:
        fail("runtime_values", f"on call #{i + 1}, {label} printed {text.strip()[:160] or 'nothing'!r}, "
                                  f"which does not show the values {np.round(missing, 3).tolist()}. Under "
                                  "jit, only a print that the program itself holds runs on every call, with the "
                                  "values of that call.")


def test_runtime_print(k):
    # Under a jit of its own: call #1 traces (a Python print shows a tracer), later calls run the
    # compiled program only, and each must print that call's sin(x). What was printed comes
    # back as text; the numbers in it are checked here.
    for i in range(3):
        _check_printed(k, _away_from_zero(k.rng, 2), i)
    # Values, judged here: eagerly and under jit, on fresh inputs.
    check_matches_reference(k.fn("runtime_print"), lambda x: np.sin(np.asarray(x, np.float64)) * 2,
                               lambda rng: (rng.uniform(-3, 3, size=(3,)).astype(np.float32),), trials=2,
                               seed=k.seed(), idea="runtime_values")


# --------------------------------------------------------------------------- scaled

def test_scaled(k):
    scaled = k.fn("scaled")
    x = k.rng.normal(size=(4,)).astype(np.float32)
    s = float(np.float32(k.rng.uniform(2.5, 9.0)))  # never the given SCALE = 2.0
    what = f"jax.jit(scaled)(x, {s:.4g}), which must scale by its `scale` argument,"
    got = programs.run(k, "scaled", x, np.float32(s), label=what)  # its exported program, scale traced
    check_close(got, x.astype(np.float64) * s, what=what, idea="constants", dtype=np.float32)
    k.claim("check_globals_unchanged", "scaled", _f32(x), float(np.float32(k.rng.uniform(0.1, 9.0))),
            what="`scaled`")  # kernel-side only
    def make_args(rng):
        return rng.normal(size=(5,)).astype(np.float32), np.float32(rng.uniform(0.1, 9.0))

    check_matches_reference(scaled, lambda x, s: np.asarray(x, np.float64) * s, make_args,
                               trials=3, seed=k.seed(), idea="constants", jit=False, dtype=np.float32)
    programs.check_matches_reference(k, "scaled", lambda x, s: np.asarray(x, np.float64) * s, make_args,
                                     trials=3, seed=k.seed(), idea="constants", dtype=np.float32)
    scales = [float(np.float32(v)) for v in k.rng.uniform(-5.0, 9.0, size=4)]
    k.claim("check_compiles", Fixture("jit_call"), [(Ref("scaled"), _f32(x), v) for v in scales], 1,
            what="jax.jit(scaled)",
            why="A new scale must be new runtime data, not a new constant baked in at trace time.")
    _check_no_recompile(k, "scaled", [(_f32(x), v) for v in scales], "scale", idea="constants")


def _check_no_recompile(k, name, calls, what, idea):
    """``name`` called directly on each of ``calls`` (new values of one shape) compiles on the
    first call at most: a program made anew at each call (a new ``jax.jit`` of a function
    defined inside, its values captured as constants) compiles on every call."""
    counts = k.fixture("compiles_per_call")(Ref(name), calls, what=f"`{name}`")
    again = sum(int(c) for c in counts[1:])
    if again:
        fail(idea, f"called directly with {len(calls)} new values of `{what}`, `{name}` compiled "
                      f"{list(counts)} times per call: after the first call, a new `{what}` must reuse the "
                      "compiled program. A program built anew inside the function at every call, with "
                      "the value baked in, compiles at every call.")


# --------------------------------------------------------------------------- matmul_flops

@functools.lru_cache(maxsize=None)
def _reported_flops(n):
    """The 'flops' of the cost analysis of the judge's own compiled n x n float32 product (kept
    for the grading process's next notebooks: the same JAX and backend give the same count)."""
    spec = jax.ShapeDtypeStruct((n, n), jnp.float32)
    analysis = jax.jit(lambda a, b: a @ b).lower(spec, spec).compile().cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    return float(analysis["flops"])


def _check_flops(k, n):
    got = call(k.fn("matmul_flops"), n, what=f"matmul_flops({n})")
    if type(got) is not float:
        fail("cost", f"matmul_flops({n}) returned a {type(got).__module__}.{type(got).__name__}: the "
                        "contract is the compiler's count as a Python float, the type its cost analysis "
                        "reports.")
    want = _reported_flops(n)
    if float(got) != want:
        textbook = ""
        if float(got) == 2.0 * n ** 3:
            textbook = (f" {float(got)!r} is the textbook count 2*n**3, but the compiler rewrites "
                        "programs (for n = 1, XLA on CPU turns the product into one multiply, one FLOP): "
                        "the exercise asks for what the compiled program reports.")
        fail("cost", f"matmul_flops({n}) is {float(got)!r}, but the compiled program's cost analysis "
                        f"reports {want!r} FLOPs (a multiply-add counts as two)." + textbook)


def test_matmul_flops(k):
    extra = k.rng.choice(np.arange(2, 48), size=2, replace=False)
    for n in [16, 1, *(int(v) for v in extra)]:
        _check_flops(k, n)


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

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
        ('''
import re


def primitive_names(f, *args):
    # the starting code: names read off the printed jaxpr, where nested bodies are printed too
    printed = str(jax.make_jaxpr(f)(*args))
    return re.findall(r"= ([a-z_]\\w*)", printed)
''', "from inside nested jaxprs", "phases"),
        ('''
_NAMES = {}


def primitive_names(f, *args):
    # traced once per function and kept: the arguments' shapes and dtypes are not part of the key
    if f not in _NAMES:
        _NAMES[f] = [eqn.primitive.name for eqn in jax.make_jaxpr(f)(*args).eqns]
    return list(_NAMES[f])
''', "JAX traces another one", "phases"),
        ('''
import re

_NAMES = {}  # the starting code: names kept per function, read off the printed jaxpr


def primitive_names(f, *args):
    if f not in _NAMES:
        printed = str(jax.make_jaxpr(f)(*args))
        _NAMES[f] = re.findall(r"= ([a-z_]\\w*)", printed)
    return list(_NAMES[f])
''', "at an int32 x JAX traces another one", "phases"),
        ('''
_CACHE = {}


def primitive_names(f, *args):
    # kept per function and dtypes: the arguments' shapes are not part of the key
    key = (f, tuple(str(jnp.result_type(a)) for a in jax.tree.leaves(args)))
    if key not in _CACHE:
        _CACHE[key] = [e.primitive.name for e in jax.make_jaxpr(f)(*args).jaxpr.eqns]
    return list(_CACHE[key])
''', "shapes as well as their dtypes", "phases"),
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
_kernel = jax.jit(lambda x, scale: x * scale, donate_argnums=0)


def scaled(x, scale):
    return _kernel(x, scale)  # right values, one compile, but x's buffer is handed to the result
''', "the caller's `x` was deleted", "purity"),
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
_seen = []


def scaled(x, scale):
    _seen.append(scale)  # a history of the scales: under jit (the export too) it keeps a tracer
    return x * scale
''', "changed the global(s) ['_seen']", "purity"),
        ('''
def scaled(x, scale):
    return x * float(scale)  # needs a concrete value: fails to trace
''', "needed the concrete value of a traced array", "static"),
        ('''
def scaled(x, scale):
    # a fresh jitted function per call: right values, but each new scale is a new program
    return jax.jit(lambda v: v * scale)(x)
''', "after the first call, a new `scale` must reuse the compiled program", "constants"),
        ('''
@jax.jit
def _scale_kernel(x):
    return x * SCALE


def scaled(x, scale):
    global SCALE  # the starting code: right values, by throwing the compiled program away
    SCALE = scale
    _scale_kernel.clear_cache()
    return _scale_kernel(x)
''', "a new `scale` must reuse the compiled program", "constants"),
        ('''
class Log:
    seen = []  # state kept in a class: the class is a global, and its attribute changes


def scaled(x, scale):
    Log.seen.append(scale)
    return x * scale
''', "changed the global(s) ['Log']", "purity"),
        ('''
def _make_scaled():
    seen = []  # state kept in a closure: the function is a global, and what it holds changes

    def scaled(x, scale):
        seen.append(scale)
        return x * scale
    return scaled


scaled = _make_scaled()
''', "changed the global(s) ['scaled']", "purity"),
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
        ('''
def matmul_flops(n):
    a = jnp.ones((n, n), jnp.float32)
    analysis = jax.jit(jnp.matmul).lower(a, a).compile().cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    return int(analysis["flops"])  # the right count, but an int where the contract says float
''', "the contract is the compiler's count as a Python float", "cost"),
    ],
}

RIGHT = {
    "primitive_names": [
        '''
_NAMES = {}


def primitive_names(f, *args):
    # kept under a key that holds all a trace depends on: the function, the arguments' structure and types
    leaves, structure = jax.tree.flatten(args)
    key = (f, structure, tuple(jax.typeof(a) for a in leaves))
    if key not in _NAMES:
        _NAMES[key] = [eqn.primitive.name for eqn in jax.make_jaxpr(f)(*args).jaxpr.eqns]
    return list(_NAMES[key])
''',
        '''
def primitive_names(f, *args):
    # the traced stage of jax.jit: its jaxpr is the function's own, a primitive prints as its name
    return [str(eqn.primitive) for eqn in jax.jit(f).trace(*args).jaxpr.eqns]
''',
    ],
}
