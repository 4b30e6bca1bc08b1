"""The judge of 02_static_dynamic's ``apply_layer`` (trusted: runs in the grader, never in the kernel).

Values: ``apply_layer(x, config)`` called directly in the kernel on configs and inputs drawn from
``k.rng``, every activation and depth, against a float64 NumPy reference computed here. Data all
the way down: ``apply_layer`` is exported with ``scale`` and ``shift`` as traced arguments
(fixture ``layer_with_config``, ``activation`` and ``depth`` static), and that one program is run
here on fresh ``x``, ``scale`` and ``shift``: a scale that became part of what is static (a
tuple of the config's items, ``float(scale)``) cannot be traced, a scale baked in as a constant
gives wrong values. The compile count (exactly one per new ``(activation, depth)``, every
compile during the calls counted) is a kernel-side claim: it can fail the test, never pass it.
"""
import jax
import numpy as np

from autograder.judge import call, check_close, ExerciseFailure, fail
from autograder.judge import programs
from autograder.judge import AsJax, Fixture, Ref, Spec

ACTIVATIONS = ("relu", "tanh", "gelu")


def _f32(x):
    return AsJax(np.asarray(x, np.float32))


def _act(name, v):
    if name == "relu":
        return np.maximum(v, 0.0)
    if name == "tanh":
        return np.tanh(v)
    return 0.5 * v * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (v + 0.044715 * v ** 3)))


def _reference(x, activation, depth, scale, shift):
    y = np.asarray(x, np.float64)
    for _ in range(depth):
        y = _act(activation, y * scale + shift)
    return y


def _gelu_exact_reference(x, depth, scale, shift):
    from math import erf

    y = np.asarray(x, np.float64)
    for _ in range(depth):
        v = y * scale + shift
        y = 0.5 * v * (1.0 + np.vectorize(erf)(v / np.sqrt(2.0)))
    return y


def _translate(exc, label):
    """Errors of a configuration handled as the wrong kind (static vs data) name the idea."""
    msg = str(exc)
    if isinstance(exc, (ValueError, TypeError)) and "hashable" in msg.lower():
        return ExerciseFailure("static", f"{label} raised {type(exc).__name__}: {msg.splitlines()[0][:160]}. "
                                            "A static argument is a key of the compile cache, so it must be "
                                            "hashable; and only what chooses the program belongs there.")
    if isinstance(exc, (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError)):
        return ExerciseFailure("static", f"{label} needed the Python value of a traced `scale` or `shift` "
                                            "(such as `float(scale)`): they are data, which has no value while "
                                            "the program is traced.")
    if isinstance(exc, TypeError) and ("abstract array" in msg or "valid JAX type" in msg):
        return ExerciseFailure("static", f"{label} passed a Python object that is not an array (the "
                                            "activation's name?) as a traced argument: what chooses the program "
                                            "is configuration, not data.")
    return None


def _config(activation, depth, scale, shift):
    return {"activation": activation, "depth": int(depth), "scale": float(scale), "shift": float(shift)}


def _draw_config(rng, activation=None, depth=None):
    return _config(activation or ACTIVATIONS[int(rng.integers(0, 3))],
                   depth or int(rng.integers(1, 5)),
                   float(np.float32(rng.uniform(0.3, 1.6))), float(np.float32(rng.uniform(-0.5, 0.5))))


def _check_value(got, x, cfg, what):
    want = _reference(x, cfg["activation"], cfg["depth"], cfg["scale"], cfg["shift"])
    try:
        check_close(got, want, what=what, idea="numerics")
    except ExerciseFailure as exc:
        if (cfg["activation"] == "gelu" and np.shape(got) == np.shape(x) and np.allclose(
                np.asarray(got, np.float64), _gelu_exact_reference(x, cfg["depth"], cfg["scale"], cfg["shift"]),
                rtol=1e-4, atol=1e-5)):
            fail("numerics", f"{exc.detail} It computes the exact gelu; the exercise's \"gelu\" is "
                                "jax.nn.gelu with its default approximate=True.")
        raise


def _program(k, activation, depth, shape):
    """The one exported program of apply_layer at (activation, depth), scale and shift traced."""
    label = (f"apply_layer traced with scale and shift as traced values "
             f"(activation={activation!r}, depth={depth})")
    return programs.trace(k, Fixture("layer_with_config"), Ref("apply_layer"), Spec(shape, "float32"),
                          Spec((), "float32"), Spec((), "float32"), activation, depth, static_argnums=(0, 4, 5),
                          translate=_translate, loops=True, label=label)


def test_apply_layer(k):
    rng = k.rng
    layer = k.fn("apply_layer")
    shape = (int(rng.integers(2, 5)), int(rng.integers(3, 7)))
    draw_x = lambda: rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)  # noqa: E731
    # Values: every activation, depths 1..4, called directly.
    for activation in [ACTIVATIONS[int(i)] for i in rng.permutation(3)]:
        for depth in sorted({1, 4, int(rng.integers(2, 4))}):
            x, cfg = draw_x(), _draw_config(rng, activation, depth)
            what = f"apply_layer(x, {cfg})"
            _check_value(call(layer, _f32(x), cfg, what=what, translate=_translate), x, cfg, what)
    # The caller keeps its `config` as it was (a deleted `x` fails in every call: the judge's check).
    x, cfg = draw_x(), _draw_config(rng, "tanh", 2)
    _, after = k.call_keep_args("apply_layer", _f32(x), cfg)
    if isinstance(after[1], dict) and after[1] != cfg:
        fail("purity", f"apply_layer(x, config) changed the caller's `config` dict: it was {cfg}, and after the "
                          f"call it is {after[1]}. A function's inputs are the caller's: a layer that writes into "
                          "them has a side effect the caller did not ask for.")
    # Data all the way down: one exported program per (activation, depth), run here on new data.
    for activation in rng.permutation(ACTIVATIONS)[:2]:
        depth = int(rng.integers(1, 5))
        program = _program(k, str(activation), depth, shape)
        for _ in range(3):
            x, cfg = draw_x(), _draw_config(rng, str(activation), depth)
            got = program(x, np.float32(cfg["scale"]), np.float32(cfg["shift"]))
            _check_value(got, x, cfg, f"the program of apply_layer traced with scale and shift as traced values, "
                                      f"run at {cfg}, which must use that scale and shift,")
    # Kernel-side claim: exactly one compile per new (activation, depth), none for new data.
    pairs = [("tanh", 2), ("relu", 3), ("tanh", 2), ("gelu", 1), ("relu", 3), ("tanh", 2), ("gelu", 1)]
    calls = [((_f32(draw_x()), _draw_config(rng, a, d)), {}) for a, d in pairs]
    k.claim("check_compiles", "apply_layer", calls, len(set(pairs)),
            what=f"apply_layer over {len(calls)} calls with {len(set(pairs))} distinct (activation, depth)",
            why="Only what chooses the program (the activation and the depth) may be part of the compile "
                "signature, and nothing may compile outside the one program per configuration.")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "apply_layer": [
        ('''
_ACTS = {"relu": jax.nn.relu, "tanh": jnp.tanh, "gelu": jax.nn.gelu}


@partial(jax.jit, static_argnames=("activation", "depth"), donate_argnums=0)
def _layer(x, scale, shift, activation, depth):
    y = x
    for _ in range(depth):
        y = _ACTS[activation](y * scale + shift)
    return y


def apply_layer(x, config):
    # right values and compiles, but x's buffer is handed to the result: the caller's x is gone
    return _layer(x, config["scale"], config["shift"], activation=config["activation"], depth=config["depth"])
''', "the caller's `x` was deleted", "purity"),
        ('''
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
''', "must be hashable; and only what chooses the program belongs there", "static"),
        ('''
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
''', "needed the Python value of a traced `scale` or `shift`", "static"),
        ('''
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
''', "distinct (activation, depth) compiled", "recompiles"),
        ('''
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
''', "It computes the exact gelu", "numerics"),
        ('''
_ACTS = {"relu": jax.nn.relu, "tanh": jnp.tanh, "gelu": jax.nn.gelu}


@partial(jax.jit, static_argnames=("activation", "depth"))
def _layer(x, scale, shift, activation, depth):
    y = x
    for _ in range(depth):
        y = _ACTS[activation](y * scale + shift)
    return y


def apply_layer(x, config):
    # right values and compiles, but it notes in the caller's dict that this config was seen
    config.setdefault("seen", True)
    return _layer(x, config["scale"], config["shift"], activation=config["activation"], depth=config["depth"])
''', "changed the caller's `config` dict", "purity"),
    ],
}
