"""The judge of 03_purity's ``adam_init``/``adam_step`` (trusted: runs in the grader, never in the kernel).

The optimizer state is whatever ``adam_init`` returns (any pytree, a learner's registered
dataclass included), so it never leaves the kernel: fixtures of :mod:`autograder.agent.fixtures`
chain it there, and only its leaves come back (``leaves_of``, ``adam_twice``).

- Values: all the steps, from ``adam_init``, are traced as ONE exported program
  (fixture ``adam_run``, ``adam_init`` and ``adam_step`` static, params, every step's grads and
  every ``lr`` traced), and that program is run here on the judge's own params, grads and
  learning rates (``k.rng``), every step compared with a float64 NumPy reference (rtol 1e-4,
  atol 1e-6). A step count or moments kept in a global or an object are baked in while
  tracing and give wrong steps.
- Kernel-side claims (they can fail the test, never pass it): ``jax.jit(adam_step)`` traces
  once over all the steps and every ``lr`` (fixture ``adam_jit_run``; its values are checked
  too), and ``adam_step`` called twice unjitted on the same inputs gives the same outputs and
  leaves every input as it was (fixture ``adam_twice``, on params of the same structure with scalar
  leaves, which eager JAX compiles once; writes into an input are looked for first:
  with one gradient twice, Adam's second step can equal its first).
"""
import jax
import numpy as np

from autograder.judge import call, check_close, ExerciseFailure, fail
from autograder.judge import programs
from autograder.judge import AsJax, Fixture, Ref, Spec

B1, B2, EPS = 0.9, 0.999, 1e-8
RTOL, ATOL = 1e-4, 1e-6


def _tree_map(f, tree):
    if isinstance(tree, dict):
        return {key: _tree_map(f, v) for key, v in tree.items()}
    return f(tree)


def _leaves(tree):
    """(path, leaf) of a nested dict, keys in sorted order (jax's order for dicts)."""
    if isinstance(tree, dict):
        return [(f"[{key!r}]" + p, leaf) for key in sorted(tree) for p, leaf in _leaves(tree[key])]
    return [("", tree)]


def _draw_params(rng):
    d_in, d_hidden, d_out = (int(v) for v in rng.integers(2, 6, size=3))
    shapes = {"hidden": {"w": (d_in, d_hidden), "b": (d_hidden,)}, "out": {"w": (d_hidden, d_out)},
              "scale": ()}
    # Away from zero, so that a few steps of size about lr never bring a parameter near 0, where
    # float32 rounding of its earlier values would be large next to rtol * |p|.
    return _tree_map(lambda s: (rng.choice([-1.0, 1.0], size=s) * rng.uniform(1.0, 3.0, size=s)).astype(np.float32),
                     shapes)


def _reference(params, grads, lrs, eps_at="denominator"):
    """The params after every step of Adam (float64), from t = 0 and zero moments. ``eps_at``:
    where eps is added ("denominator", Adam's; "root", under the square root; "update", to the
    whole update): the last two are usual mistakes, named when a result matches them."""
    p = _tree_map(lambda a: np.asarray(a, np.float64), params)
    flat_p = dict(_leaves(p))
    m = {k: np.zeros_like(v) for k, v in flat_p.items()}
    v = {k: np.zeros_like(a) for k, a in flat_p.items()}
    out = []
    for t, (g, lr) in enumerate(zip(grads, lrs), start=1):
        flat_g = dict(_leaves(g))
        for key in flat_p:
            gk = np.asarray(flat_g[key], np.float64)
            m[key] = B1 * m[key] + (1 - B1) * gk
            v[key] = B2 * v[key] + (1 - B2) * gk * gk
            m_hat, v_hat = m[key] / (1 - B1 ** t), v[key] / (1 - B2 ** t)
            with np.errstate(divide="ignore", invalid="ignore"):
                if eps_at == "root":
                    flat_p[key] = flat_p[key] - lr * m_hat / np.sqrt(v_hat + EPS)
                elif eps_at == "update":
                    flat_p[key] = flat_p[key] - (lr * m_hat / np.sqrt(v_hat) + EPS)
                else:
                    flat_p[key] = flat_p[key] - lr * m_hat / (np.sqrt(v_hat) + EPS)
        out.append(dict(flat_p))
    return out


def _check_step(got, want, step, what):
    """``got`` (a params tree) against the reference's flat dict at ``step``."""
    if not isinstance(got, dict):
        fail("state", f"{what} returned {type(got).__name__} as the new params; return the params "
                         "with the structure they came in.")
    flat = _leaves(got)
    if sorted(p for p, _ in flat) != sorted(want):
        fail("state", f"{what}: the new params have the leaves {sorted(p for p, _ in flat)}, expected "
                         f"{sorted(want)}.")
    for path, leaf in flat:
        check_close(np.asarray(leaf), want[path], rtol=RTOL, atol=ATOL, dtype="float32",
                       what=f"{what}, params{path} after step {step}", idea="state")


def _spec(tree):
    return _tree_map(lambda a: Spec(tuple(np.shape(a)), "float32"), tree)


def _as_jax(tree):
    return _tree_map(lambda a: AsJax(np.asarray(a, np.float32)), tree)


def _traced_translate(exc, label):
    if isinstance(exc, (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError,
                        jax.errors.TracerBoolConversionError)):
        return ExerciseFailure("state", f"{label} needed the Python value of a traced array (the step "
                                           "count or lr?): under jit the state and lr are data, without values "
                                           "while tracing.")
    if isinstance(exc, jax.errors.UnexpectedTracerError):
        return ExerciseFailure("purity", f"{label} kept a traced value outside the function (in a global "
                                            "or an object) and used it in a later trace: a step's results "
                                            "must leave through its return value.")
    return None


def _program(k, params, grads, lrs):
    """All the steps from adam_init as one exported program (params, grads and lrs traced)."""
    label = f"the {len(lrs)} steps of adam_step from adam_init, traced as one program"
    return programs.trace(k, Fixture("adam_run"), Ref("adam_init"), Ref("adam_step"), _spec(params),
                          [_spec(g) for g in grads], [Spec((), "float32") for _ in lrs], static_argnums=(0, 1),
                          translate=_traced_translate, loops=True, label=label)


def _flat_values(tree):
    """Every array of a decoded value (lists, tuples, dicts), in order: for comparing two results."""
    if isinstance(tree, dict):
        return [a for key in sorted(tree, key=str) for a in _flat_values(tree[key])]
    if isinstance(tree, (list, tuple)):
        return [a for v in tree for a in _flat_values(v)]
    return [np.asarray(tree)]


def _same(a, b) -> bool:
    fa, fb = _flat_values(a), _flat_values(b)
    return len(fa) == len(fb) and all(x.shape == y.shape and np.array_equal(x, y, equal_nan=True)
                                      for x, y in zip(fa, fb))


def test_adam_step(k):
    rng = k.rng
    params = _draw_params(rng)
    steps = int(rng.integers(4, 11))  # one program unrolls them all: its compile time grows with them
    grads = [_tree_map(lambda a: (rng.normal(size=np.shape(a)) * rng.uniform(0.1, 3.0)).astype(np.float32), params)
             for _ in range(steps)]
    lrs = [float(np.float32(v)) for v in rng.uniform(0.001, 0.02, size=steps)]
    want = _reference(params, grads, lrs)
    # The state's leaves are arrays (kernel data, read only to say so). The state stays in the
    # kernel, whatever its class (a learner's registered dataclass cannot cross the channel):
    # its leaves come back.
    leaves = k.fixture("leaves_of")(Ref("adam_init"), _as_jax(params), what="adam_init(params)")
    leaves = list(leaves) if isinstance(leaves, (list, tuple)) else [leaves]
    odd = [getattr(v, "type", type(v).__name__) for v in leaves if not isinstance(v, np.ndarray)]
    if odd or not leaves:
        fail("state", f"the leaves of adam_init(params) are {odd or 'none'}: the state must be a pytree "
                         "of arrays, holding everything the steps need.")
    # One exported program for all the steps, run here on the judge's inputs.
    program = _program(k, params, grads, lrs)
    outs = program(params, grads, [np.float32(lr) for lr in lrs])
    if not isinstance(outs, (list, tuple)) or len(outs) != steps:
        fail("state", "the traced steps of adam_step did not return new params at every step.")
    for i, got in enumerate(outs):
        _check_step(got, want[i], i + 1, f"adam_step's step {i + 1} (traced from adam_init, lr={lrs[i]:.4g})")
    # The same program on gradients that vanish: every step's gradient 0 for params['scale'] (a
    # parameter the loss does not use) and about 1e-6 for params['hidden']['b'], where sqrt(v_hat)
    # is about 1e-6 and eps, 1e-8, must still only guard the division.
    small = [dict(g, scale=np.float32(0.0), hidden=dict(g["hidden"], b=(g["hidden"]["b"] * 1e-6).astype(np.float32)))
             for g in grads]
    want_small = _reference(params, small, lrs)
    outs = program(params, small, [np.float32(lr) for lr in lrs])
    if not isinstance(outs, (list, tuple)) or len(outs) != steps:
        fail("state", "the traced steps of adam_step did not return new params at every step.")
    for i, got in enumerate(outs):
        what = (f"adam_step's step {i + 1} (traced from adam_init, lr={lrs[i]:.4g}) on gradients 0 for "
                "params['scale'] and about 1e-6 for params['hidden']['b']")
        try:
            _check_step(got, want_small[i], i + 1, what)
        except ExerciseFailure as exc:
            for eps_at, hint in (("root", "It adds eps under the square root, where it outweighs a small "
                                          "v_hat: Adam adds eps to sqrt(v_hat), only to guard the division."),
                                 ("update", "It adds eps to the whole update, which moves a parameter whose "
                                            "gradient is 0 (and divides 0 by 0): Adam adds eps to sqrt(v_hat), "
                                            "only to guard the division.")):
                alt = _reference(params, small, lrs, eps_at)[i]
                flat = dict(_leaves(got)) if isinstance(got, dict) else {}
                if flat.keys() == alt.keys() and all(
                        np.allclose(np.asarray(flat[key], np.float64), alt[key], rtol=RTOL, atol=ATOL, equal_nan=True)
                        for key in alt):
                    fail("state", f"{exc.detail} {hint}")
            raise
    # Claim: jax.jit(adam_step) traces once for all the steps and every lr; its values too.
    n = min(steps, 6)
    run = call(k.fn(Fixture("adam_jit_run")), Ref("adam_init"), Ref("adam_step"), _as_jax(params),
                  [_as_jax(g) for g in grads[:n]], lrs[:n], what="jax.jit(adam_step) over the steps",
                  translate=_traced_translate)
    traces = run.get("traces") if isinstance(run, dict) else None
    if traces != 1:
        fail("state", f"jax.jit(adam_step) was traced {traces} times over {n} steps with new values of lr: "
                         "everything a step needs from the steps before must come in through `state`, with "
                         "the same structure, shapes and dtypes every step, and lr is data.")
    for i, got in list(enumerate(run.get("outs") or []))[:n]:
        _check_step(got, want[i], i + 1, f"jax.jit(adam_step)'s step {i + 1}")
    # Claim: unjitted, twice on the same inputs: the same outputs, and no input changed.
    # On a params tree of the same structure whose leaves are all scalars: what this claim sees
    # (writes into an input, a state kept between calls) does not depend on the shapes, and eager
    # JAX compiles each operation once per shape (four shapes cost the kernel about 1 s here).
    scalars = _tree_map(lambda a: np.float32(rng.choice([-1.0, 1.0]) * rng.uniform(1.0, 3.0)), params)
    g0 = _tree_map(lambda a: np.float32(rng.normal() * rng.uniform(0.1, 3.0)), params)
    lr0 = lrs[0]
    twice = call(k.fn(Fixture("adam_twice")), Ref("adam_init"), Ref("adam_step"), _as_jax(scalars),
                    _as_jax(g0), lr0, what="adam_step called twice on the same inputs")
    if not isinstance(twice, dict):
        fail("purity", "adam_step called twice on the same inputs could not be read back.")
    p_after, g_after, state_after = twice.get("after") or (None, None, None)
    if not (_same(p_after, scalars) and _same(g_after, g0)):
        fail("purity", "adam_step changed the params or grads it was given (an assignment into the "
                          "input dict): inputs must come back as they were.")
    if not _same(state_after, twice.get("fresh")):
        fail("purity", "adam_step changed the state it was given (a write into the state's dict or "
                          "list): the new state must be a new value, returned, and the old one left as it was.")
    if not _same(twice.get("first"), twice.get("second")):
        fail("purity", "adam_step called twice, unjitted, on the same params, grads, state and lr gave "
                          "different results: it depends on something besides its inputs (a global, an "
                          "object's attribute) that the first call changed.")
    _check_step(twice["first"][0], _reference(scalars, [g0], [lr0])[0], 1, "adam_step (unjitted)")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "adam_step": [
        ('''
def adam_init(params):
    zeros = lambda tree: jax.tree_util.tree_map(jnp.zeros_like, tree)
    return {"m": zeros(params), "v": zeros(params), "t": jnp.zeros((), jnp.int32)}


def adam_step(params, grads, state, lr):
    b1, b2, eps = 0.9, 0.999, 1e-8
    t = state["t"] + 1
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
    c1, c2 = 1 - b1 ** t.astype(jnp.float32), 1 - b2 ** t.astype(jnp.float32)
    # eps under the square root: right while v_hat is far above eps
    new_params = jax.tree_util.tree_map(lambda p, m, v: p - lr * (m / c1) / jnp.sqrt(v / c2 + eps), params, m, v)
    return new_params, {"m": m, "v": v, "t": t}
''', "It adds eps under the square root", "state"),
        ('''
def adam_init(params):
    zeros = lambda tree: jax.tree_util.tree_map(jnp.zeros_like, tree)
    return {"m": zeros(params), "v": zeros(params), "t": jnp.zeros((), jnp.int32)}


def adam_step(params, grads, state, lr):
    b1, b2, eps = 0.9, 0.999, 1e-8
    t = state["t"] + 1
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
    c1, c2 = 1 - b1 ** t.astype(jnp.float32), 1 - b2 ** t.astype(jnp.float32)
    # eps added to the update, not to the denominator
    new_params = jax.tree_util.tree_map(lambda p, m, v: p - (lr * (m / c1) / jnp.sqrt(v / c2) + eps), params, m, v)
    return new_params, {"m": m, "v": v, "t": t}
''', "It adds eps to the whole update", "state"),
        ('''
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
''', "after step 2", "state"),
        ('''
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
''', "changed the state it was given", "purity"),
        ('''
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
''', "the state must be a pytree of arrays", "state"),
        ('''
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
''', "after step 2", "state"),
    ],
}

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
