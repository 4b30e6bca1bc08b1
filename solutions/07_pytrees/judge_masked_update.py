"""The judge of 07_pytrees' ``masked_update`` (trusted: runs in the grader, never in the kernel).

``masked_update(params, grads, trainable, lr)``: ``trainable`` is a pytree of booleans whose
structure is a *prefix* of ``params``' (one flag may stand for a whole subtree). The values and
structure graded come from the learner's exported program (``k.export``, with every leaf of
``params``, ``grads`` and ``trainable`` and ``lr`` traced, so one program serves every mask of a
structure), run here on the judge's inputs: frozen leaves must come back bit for bit (``-0.0``,
``inf`` and ``nan`` included, with gradients that are ``inf``, ``nan`` or negative), trainable
ones as ``p - lr * g`` within float32's tolerance; the program has no loop and no callback
(:mod:`autograder.judge.mlir`). The jitted function is also called in the kernel on new masks
(the trace count, a claim, may only fail the test; its outputs are checked here too).
"""
import numpy as np

from autograder.judge import call, check_close, ExerciseFailure, fail, tolerance
from autograder.judge import mlir
from autograder.judge import AsJax, Fixture, Ref, Spec

# Prefix masks over one parameter structure (a bool leaf stands for the subtree under it).
_STRUCTURE = {"encoder": {"w": (3, 4), "b": (4,)}, "head": {"w": (4, 2), "b": (2,)}, "scale": (2,)}


def _masks(rng):
    """Several masks of several prefix structures, with fresh flags."""
    coin = lambda: bool(rng.integers(0, 2))  # noqa: E731
    return [
        {"encoder": False, "head": {"w": True, "b": False}, "scale": True},
        {"encoder": True, "head": False, "scale": False},
        {"encoder": {"w": False, "b": True}, "head": {"w": coin(), "b": not coin()}, "scale": coin()},
        True,
        False,
    ]


def _tree_map(f, tree, *rest):
    """``f`` over the leaves (shape tuples) of the ``_STRUCTURE``-like ``tree``."""
    if isinstance(tree, dict):
        return {k: _tree_map(f, v, *(r[k] for r in rest)) for k, v in tree.items()}
    return f(tree, *rest)


def _cover(mask, structure):
    """The flag covering each leaf of ``structure``: ``mask`` broadcast over the subtrees it prefixes."""
    if isinstance(mask, dict):
        return {k: _cover(mask[k], structure[k]) for k in structure}
    return _tree_map(lambda _: bool(mask), structure)


def _spec_like(mask):
    if isinstance(mask, dict):
        return {k: _spec_like(v) for k, v in mask.items()}
    return Spec((), "bool")


def _bools(mask):
    if isinstance(mask, dict):
        return {k: _bools(v) for k, v in mask.items()}
    return np.bool_(mask)


def _specials(rng, shape, trainable=False):
    """Parameters and gradients with the values a frozen leaf must keep exactly: -0.0 beside a
    negative gradient, inf and nan parameters, inf and nan gradients. On a ``trainable`` leaf,
    where they must become ``p - lr * g`` (inf, -inf, nan), the inf and nan gradients come first,
    so that every leaf, two entries or more, holds both."""
    p = rng.normal(size=shape).astype(np.float32)
    g = rng.normal(size=shape).astype(np.float32)
    flat_p, flat_g = p.reshape(-1), g.reshape(-1)
    picks = rng.permutation(flat_p.size)
    special = [(-0.0, -abs(float(flat_g[0])) - 0.5), (np.inf, 1.0), (np.nan, 2.0), (1.5, np.inf),
               (-2.5, np.nan), (0.0, -1.0)]
    if trainable:
        special = special[3:5] + special[:3] + special[5:]
    for i, (pv, gv) in zip(picks, special):
        flat_p[i], flat_g[i] = pv, gv
    return p, g


def _inputs(rng, cover):
    """(params, grads) as NumPy trees: special values (inf, nan, -0.0) on every leaf."""
    params, grads = {}, {}

    def build(shape, flag):
        return _specials(rng, shape, trainable=flag)

    both = _tree_map(build, _STRUCTURE, cover)
    params = _tree_map(lambda pg: pg[0], both)
    grads = _tree_map(lambda pg: pg[1], both)
    return params, grads


def _tree_map1(f, tree):
    if isinstance(tree, dict):
        return {k: _tree_map1(f, v) for k, v in tree.items()}
    return f(tree)


def _mask_text(mask) -> str:
    if isinstance(mask, dict):
        return "{" + ", ".join(f"{k!r}: {_mask_text(v)}" for k, v in mask.items()) + "}"
    return repr(bool(mask))


def _check(got, params, grads, cover, lr, mask, what):
    """Frozen leaves bit for bit, trainable ones p - lr * g (float32's tolerance), the structure of params."""
    shown = f"{what} with trainable={_mask_text(mask)}"
    _check_node(got, params, grads, cover, lr, shown, "")


def _check_node(got, p, g, flag, lr, shown, path):
    if isinstance(p, dict):
        if not isinstance(got, dict) or set(got) != set(p):
            keys = f" with keys {sorted(map(str, got))}" if isinstance(got, dict) else ""
            fail("pytrees", f"{shown}: params{path} came back as {type(got).__name__}{keys}; the result has "
                               "the structure of params.")
        for key in p:
            _check_node(got[key], p[key], g[key], flag[key], lr, shown, f"{path}[{key!r}]")
        return
    arr = got if isinstance(got, np.ndarray) else None
    if arr is None or arr.shape != p.shape or arr.dtype != np.float32:
        fail("pytrees", f"{shown}: the leaf params{path} came back as "
                           f"{getattr(arr, 'dtype', type(got).__name__)}{getattr(arr, 'shape', '')}, "
                           f"expected float32{p.shape}.")
    arr = np.asarray(arr, np.float32)
    if flag:
        want = (p.astype(np.float64) - lr * g.astype(np.float64)).reshape(-1)
        flat = arr.reshape(-1)
        odd = ~np.isfinite(want)  # inf or nan in p or g: p - lr * g is inf, -inf or nan
        same = np.where(np.isnan(want), np.isnan(flat), flat == want)
        if (odd & ~same).any():
            bad = int(np.flatnonzero(odd & ~same)[0])
            fail("pytrees", f"{shown}: the trainable leaf params{path}, entry {bad}: p was "
                               f"{float(p.reshape(-1)[bad])!r} and its gradient {float(g.reshape(-1)[bad])!r}, "
                               f"so p - lr * g is {float(want[bad])!r}; it came back {float(flat[bad])!r}. A leaf "
                               "whose flag is true is p - lr * g for every float32 value, inf and nan included.")
        rtol, atol = tolerance("float32")
        check_close(np.where(odd, 0.0, flat).astype(np.float32).reshape(p.shape),
                       np.where(odd, 0.0, want).reshape(p.shape),
                       what=f"{shown}, the trainable leaf params{path} (p - lr * g),", rtol=rtol, atol=atol,
                       idea="pytrees")
    elif not np.array_equal(arr.view(np.uint32), p.view(np.uint32)):
        bad = int(np.flatnonzero(arr.view(np.uint32).reshape(-1) != p.view(np.uint32).reshape(-1))[0])
        fail("pytrees", f"{shown}: the frozen leaf params{path} changed: entry {bad} was "
                           f"{float(p.reshape(-1)[bad])!r} (its gradient {float(g.reshape(-1)[bad])!r}) and "
                           f"came back {float(arr.reshape(-1)[bad])!r}. A leaf whose flag is false is returned "
                           "exactly as it was, for any float32 value: arithmetic on it, even times zero, "
                           "changes -0.0, inf and nan.")


def _as_structure(exc, label):
    """A mask that is a prefix of params, mapped leaf by leaf beside them, fails to line up."""
    text = str(exc)
    if isinstance(exc, (ValueError, TypeError)) and ("mismatch" in text or "structure" in text
                                                     or "not a prefix" in text or "arity" in text):
        return ExerciseFailure(
            "pytrees", f"{label} failed when `trainable` has fewer levels than params ({text.splitlines()[0][:160]}): "
                       "its structure is a prefix of params', so one of its flags stands for a whole subtree "
                       "and cannot be lined up leaf by leaf with params and grads.")
    return None


def test_masked_update(k):
    import jax

    masks = _masks(k.rng)
    spec = _tree_map(lambda s: Spec(s, "float32"), _STRUCTURE)
    for mask in masks[:3] + [masks[3]]:  # one program per mask structure, every flag traced
        label = f"jax.jit(masked_update) with trainable={_mask_text(mask)} traced"
        exported = call(k.export, "masked_update", spec, spec, _spec_like(mask), Spec((), "float32"),
                           what=label, translate=_as_structure)
        facts = mlir.read(exported)
        if facts.has_loops:
            fail("pytrees", f"the program of {label} has a loop; an update of every leaf needs none.")
        # the same program for this mask's structure, with fresh flags, values and learning rates
        for flags in (mask, _tree_map1(lambda b: not b, mask) if isinstance(mask, dict) else (not mask)):
            cover = _cover(flags, _STRUCTURE)
            params, grads = _inputs(k.rng, cover)
            lr = np.float32(k.rng.uniform(0.01, 0.5))
            got = exported.call(params, grads, _bools(flags), lr)
            got = jax.tree.map(np.asarray, got)
            _check(got, params, grads, cover, float(lr), flags, "the exported masked_update, run by the grader,")
    # Called jitted in the kernel with traced flags: new masks of one structure, one trace.
    mask = masks[0]
    calls, expected = [], []
    for flags in (mask, _tree_map1(lambda b: not b, mask), {"encoder": True, "head": {"w": False, "b": True},
                                                          "scale": False}):
        cover = _cover(flags, _STRUCTURE)
        params, grads = _inputs(k.rng, cover)
        lr = float(round(k.rng.uniform(0.01, 0.5), 3))
        calls.append((_tree_map1(AsJax, params), _tree_map1(AsJax, grads), _tree_map1(lambda b: AsJax(np.bool_(b)),
                                                                                      flags),
                      AsJax(np.float32(lr))))
        expected.append((params, grads, cover, lr, flags))
    report = call(lambda: k.call(Fixture("jit_traces"), Ref("masked_update"), calls), what="jax.jit(masked_update)",
                     translate=_as_structure)
    outs = report.get("outs") if isinstance(report, dict) else None
    for i, (params, grads, cover, lr, flags) in enumerate(expected):
        got = outs[i] if isinstance(outs, list) and len(outs) > i else None
        _check(got, params, grads, cover, float(np.float32(lr)), flags, "jax.jit(masked_update)")
    traces = report.get("traces")
    if traces != 1:
        fail("recompiles", f"jax.jit(masked_update) traced {traces} times for {len(calls)} masks of one "
                              "structure passed as traced booleans: the flags are data, so a new mask of the "
                              "same structure must reuse the compiled program.")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "masked_update": [
        ('''
def masked_update(params, grads, trainable, lr):
    def update_subtree(flag, p_subtree, g_subtree):
        # the flag as a 0/1 factor: frozen leaves get p - lr * g * 0
        return jax.tree.map(lambda p, g: p - lr * g * flag, p_subtree, g_subtree)
    return jax.tree.map(update_subtree, trainable, params, grads)
''', "arithmetic on it, even times zero, changes -0.0, inf and nan", "pytrees"),
        ('''
def masked_update(params, grads, trainable, lr):
    # one flag per leaf, lined up beside params and grads
    return jax.tree.map(lambda p, g, t: jnp.where(t, p - lr * g, p), params, grads, trainable)
''', "its structure is a prefix of params'", "pytrees"),
        ('''
def masked_update(params, grads, trainable, lr):
    def update_subtree(flag, p_subtree, g_subtree):
        if flag:  # a Python decision on the flag
            return jax.tree.map(lambda p, g: p - lr * g, p_subtree, g_subtree)
        return p_subtree
    return jax.tree.map(update_subtree, trainable, params, grads)
''', "traced value in a Python", "control_flow"),
        ('''
def masked_update(params, grads, trainable, lr):
    def update_subtree(flag, p_subtree, g_subtree):
        return jax.tree.map(lambda p, g: jnp.where(flag, p - lr * g, p).astype(jnp.bfloat16), p_subtree, g_subtree)
    return jax.tree.map(update_subtree, trainable, params, grads)
''', "expected float32", "pytrees"),
        ('''
def masked_update(params, grads, trainable, lr):
    def update_subtree(flag, p_subtree, g_subtree):
        # "careful": a non-finite gradient is skipped, so a trainable leaf keeps p there
        return jax.tree.map(lambda p, g: jnp.where(flag & jnp.isfinite(g), p - lr * g, p), p_subtree, g_subtree)
    return jax.tree.map(update_subtree, trainable, params, grads)
''', "A leaf whose flag is true is p - lr * g for every float32 value", "pytrees"),
    ],
}

RIGHT = {
    "masked_update": [
        '''
def masked_update(params, grads, trainable, lr):
    # the mask broadcast to params' full structure first, then one flag per leaf
    full = jax.tree_util.tree_broadcast(trainable, params)
    return jax.tree.map(lambda t, p, g: jnp.where(t, p - lr * g, p), full, params, grads)
''',
        '''
def masked_update(params, grads, trainable, lr):
    def update_subtree(flag, p_subtree, g_subtree):  # a lax.cond per leaf on the traced flag
        return jax.tree.map(lambda p, g: jax.lax.cond(flag, lambda: p - lr * g, lambda: p), p_subtree, g_subtree)
    return jax.tree.map(update_subtree, trainable, params, grads)
''',
    ],
}
