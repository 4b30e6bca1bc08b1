"""The judge of 07_pytrees (trusted: runs in the grader, never in the learner's kernel).

One ``test_<name>(k)`` per graded test cell; ``k`` is an :class:`autograder.judge.Kernel`.
Trees of dicts, lists, tuples and ``None`` cross the channel as themselves, so
``tree_l2_norm`` and ``sgd_update`` are called on trees drawn here and their results compared
with NumPy references computed here (structure included), eagerly and under ``jax.jit``.
``sgd_update``'s inputs are read back after the call (a write into the caller's dict shows);
it is exported with every leaf and the learning rate traced (so one program serves a
structure) and the exported program is run here; its jitted traces over new values and
learning rates are also counted by a fixture, with the outputs checked here.

A ``Linear`` instance cannot cross the channel (a learner class), so fixtures of
:mod:`autograder.agent.fixtures` build the layers in the kernel from arrays drawn here and return
data: outputs (direct, after a flatten/unflatten round trip, jitted), leaves (a string child
comes back as a string, an unregistered layer as an opaque object), the gradient's leaves;
all compared here with references computed here; they only fail. The points come from
programs: fixtures that build the layers from a traced program's arrays (``linear_program``,
``linear_structures_program``), exported with ``Linear`` static and run here on new arrays,
their values, their leaves, and which function each of four jitted applies calls (a trace per
tree structure: one per activation, none per new arrays), read from the program.
"""
import numpy as np

from autograder.judge import call_on_tree, check_close, describe, ExerciseFailure, explain_error, fail
from autograder.judge import programs
from autograder.judge import LearnerError
from autograder.judge import AsJax, Fixture, Opaque, Ref, Spec, values


def _f32(rng, *shape):
    return AsJax(rng.normal(size=shape).astype(np.float32))


def _np(tree):
    """A tree of markers as float64 NumPy leaves (None stays an empty subtree)."""
    import jax

    return jax.tree.map(lambda a: np.asarray(values(a), np.float64), tree)


def _leaves(tree):
    import jax

    return jax.tree.leaves(_np(tree))


def _program_of(k, name, **options):
    """``name`` computed by its exported program at its arguments' signature (one program per
    tree structure and shapes); a learner error while tracing is raised for ``call_on_tree``."""
    def f(*args):
        return programs.run(k, name, *args, raw_errors=True, **options)
    f.__name__ = f"jax.jit({name})"
    return f


# --------------------------------------------------------------------------- tree_l2_norm

def _norm(tree):
    return np.sqrt(sum(np.sum(x ** 2) for x in _leaves(tree)))


def _check_norm(f, tree, label):
    got = call_on_tree(f, tree, what=label)
    where = f"{label} on {describe(tree)}"
    if np.shape(got) != ():
        fail("pytrees", f"{label} on {describe(tree)} returned shape {np.shape(got)}; the norm of a whole "
                           "tree is one scalar.")
    try:
        check_close(got, _norm(tree), what=where, dtype=np.float32)
    except ExerciseFailure as exc:
        leaves = _leaves(tree)
        for alt, hint in ((sum(np.sqrt(np.sum(x ** 2)) for x in leaves),
                           "It adds the leaves' norms; the global norm is the square root of the sum of "
                           "every leaf's squared entries."),
                          (np.sqrt(sum(np.sum(x) ** 2 for x in leaves)),
                           "It squares each leaf's sum instead of summing each leaf's squared entries.")):
            if isinstance(got, (float, np.floating, np.ndarray)) and np.isclose(float(got), alt, rtol=1e-4):
                fail("numerics", f"{exc.detail} {hint}")
        raise


def test_tree_l2_norm(k):
    f = k.fn("tree_l2_norm")
    r = lambda *s: _f32(k.rng, *s)  # noqa: E731
    trees = [
        {"w": r(2, 3), "b": r(2)},
        {"layer1": {"w": r(2, 2), "b": r(2)}, "scale": [r(3), (r(1),)]},
        (r(3), {"a": r(2, 3), "b": [r(2), r()]}),
        {"encoder": [{"w": r(2, 3), "b": None}, {"w": r(2, 2), "b": r(2)}], "step": None},
        r(2, 2),
        {"deep": ((([r(2, 1, 3)],),),)},
    ]
    program = _program_of(k, "tree_l2_norm")
    for tree in trees:
        _check_norm(f, tree, "tree_l2_norm")  # the kernel's eager call: fail-only
        _check_norm(program, tree, "jax.jit(tree_l2_norm)")  # the program's value: the one that counts
    # The trees a training run meets: entries all zero (a layer initialised to zero), leaves with
    # no entries (an unused table of zero rows), both at once.
    zero = lambda *s: AsJax(np.zeros(s, np.float32))  # noqa: E731
    edges = [({"w": zero(2, 3), "b": zero(3)}, "a tree whose entries are all zero"),
             ({"w": r(2, 3), "unused": zero(0, 4), "b": [r(2), zero(0)]}, "a tree with leaves that hold no entries"),
             ({"embed": zero(0, 3), "head": {"w": zero(3, 2), "b": None}}, "a tree whose entries are all zero, "
              "one leaf with no entries")]
    for tree, kind in edges:
        for fn, label in ((f, "tree_l2_norm"), (program, "jax.jit(tree_l2_norm)")):
            try:
                _check_norm(fn, tree, label)
            except ExerciseFailure as exc:
                fail(exc.idea, f"{exc.detail} (on {describe(tree)}, {kind}: it is a tree of arrays like any "
                                  f"other, and its norm is {_norm(tree):.4g}.)")
    # Trees with no leaves at all (an empty dict, a list of None): valid pytrees, of norm 0.0.
    for tree in ({}, [None], {"a": None, "b": ()}):
        for fn, label in ((f, "tree_l2_norm"), (program, "jax.jit(tree_l2_norm)")):
            try:
                _check_norm(fn, tree, label)
            except ExerciseFailure as exc:
                fail("pytrees", f"{exc.detail} (on {describe(tree)}, a tree with no leaves: it is a pytree "
                                   "all the same, and its norm, a sum of no squares, is 0.0.)")


# --------------------------------------------------------------------------- sgd_update

def _sgd(params, grads, lr):
    import jax

    return jax.tree.map(lambda p, g: p - lr * g, _np(params), _np(grads))


def _like(rng, tree):
    """New values, same structure."""
    import jax

    return jax.tree.map(lambda a: AsJax(rng.normal(size=np.shape(a.value)).astype(np.float32)), tree)


def _untouched(k, params, grads, lr):
    """sgd_update must leave the trees it is given as they were (read back after the call)."""
    import jax

    try:
        _, after = k.call_keep_args("sgd_update", params, grads, lr)
    except LearnerError:
        return  # the error is reported by the value checks, with its label
    for i, sent in enumerate((params, grads)):
        got = after[i] if isinstance(after, tuple) and len(after) > i else None
        sent_leaves, sent_def = jax.tree_util.tree_flatten_with_path(_np(sent))
        try:
            got_leaves, got_def = jax.tree_util.tree_flatten_with_path(got)
        except Exception:  # noqa: BLE001 - not a tree the judge can read
            got_leaves, got_def = [], None
        changed = [jax.tree_util.keystr(p) or "(the root)" for (p, a), (_, b) in zip(sent_leaves, got_leaves)
                   if np.shape(a) != np.shape(b) or not np.array_equal(np.asarray(b, np.float64), a)]
        if got_def != sent_def or changed:
            fail("tree_state", f"sgd_update changed its argument #{i + 1} in place "
                                  f"({', '.join(changed[:4]) or 'its structure'}); an update builds a new "
                                  "pytree and leaves the old state untouched.")


def _check_sgd(f, params, grads, lr, label):
    got = call_on_tree(f, params, grads, lr, what=label)
    check_close(got, _sgd(params, grads, lr), what=f"{label} on {describe(params)}", idea="pytrees",
                   dtype=np.float32)


def _as_recompile(exc, label):
    """A learning rate marked static cannot be traced: each new value would compile again."""
    if isinstance(exc, ValueError) and "static" in str(exc):
        return ExerciseFailure(
            "recompiles", f"{label} failed with the learning rate as a traced argument: it marks it static, "
                          "so every new learning rate compiles again; values belong to the run time, not "
                          "to the compile signature.")
    return None


def test_sgd_update(k):

    f = k.fn("sgd_update")
    r = lambda *s: _f32(k.rng, *s)  # noqa: E731
    lr = round(float(k.rng.uniform(0.02, 0.5)), 3)
    params, grads = {"w": r(2, 3), "b": r(3)}, {"w": r(2, 3), "b": r(3)}
    _untouched(k, params, grads, lr)
    _check_sgd(f, params, grads, lr, "sgd_update")
    trees = [
        {"layer1": {"w": r(2, 3), "b": r(3)}, "layer2": {"w": r(3, 2), "b": r(2)}},  # dicts two deep
        [{"w": r(2, 3), "b": r(3)}, {"w": r(3, 2), "b": r(2)}],
        {"encoder": ({"w": r(3, 2), "b": None}, r(2)), "decoder": [r(2, 3)]},
        r(3),
    ]
    # The program of jax.jit(sgd_update), exported with every leaf and the learning rate traced
    # (one program serves a structure), run here on fresh values: the values that count.
    program = _program_of(k, "sgd_update", translate=_as_recompile)
    _check_sgd(program, params, grads, np.float32(lr), "jax.jit(sgd_update)")
    pp, gg, lr_ = _like(k.rng, params), _like(k.rng, params), np.float32(k.rng.uniform(0.01, 0.5))
    _check_sgd(program, pp, gg, lr_, "jax.jit(sgd_update) with new values")
    for p in trees:
        g = _like(k.rng, p)
        lr = round(float(k.rng.uniform(0.01, 0.2)), 3)
        _untouched(k, p, g, lr)
        _check_sgd(f, p, g, lr, "sgd_update")
        _check_sgd(program, p, g, np.float32(lr), "jax.jit(sgd_update)")
    # One trace for new values and new learning rates of the same structure.
    p = trees[1]
    calls = [(_like(k.rng, p), _like(k.rng, p), lr) for lr in (0.1, 0.01, 0.5)]
    report = k.fixture("jit_traces")(Ref("sgd_update"), calls, what="jax.jit(sgd_update)")  # a claim
    traces = report.get("traces") if isinstance(report, dict) else None
    if traces != 1:
        fail("recompiles", f"jax.jit(sgd_update) traced {traces} times over {len(calls)} calls with new "
                              "values and a new learning rate of the same structure; it must reuse the "
                              "compiled program (the learning rate is a traced value, not static).")


# --------------------------------------------------------------------------- Linear

_ACTS = {"relu": lambda y: np.maximum(y, 0), "tanh": np.tanh, "identity": lambda y: y}
_DACTS = {"relu": lambda z: (z > 0).astype(np.float64), "tanh": lambda z: 1 - np.tanh(z) ** 2,
          "identity": np.ones_like}


def _expected(w, b, act, x):
    return _ACTS[act](_np(x) @ _np(w) + _np(b))


def _raise_at(report, step, label):
    """The learner's exception at ``step`` of a fixture's report, as feedback naming its idea."""
    if isinstance(report, dict) and report.get("failed_at") == step:
        err = report.get("error") if isinstance(report.get("error"), dict) else {}
        mro = [str(n) for n in err.get("mro") or []] or [str(err.get("type") or "Exception")]
        raise explain_error(mro, str(err.get("message") or ""), label)


def _check_leaves(leaves, self_leaf, w, b, what):
    """The judge-side port of autograder.pytrees.check_leaves, on the leaves as data."""
    if self_leaf:
        fail("custom_pytrees", f"{what} is a single opaque leaf to JAX: its class is not registered as a "
                                  "pytree node, so `jax.jit` and `jax.grad` cannot look inside it. Register it "
                                  "(`jax.tree_util.register_pytree_node_class` or `register_dataclass`).")
    leaves = leaves if isinstance(leaves, list) else []
    odd = [x for x in leaves if not isinstance(x, np.ndarray)]
    if odd:
        kind = odd[0].type if isinstance(odd[0], Opaque) else type(odd[0]).__name__
        fail("custom_pytrees", f"the leaves of {what} include {odd[0]!r} ({kind}): configuration such as a "
                                  "string must be static aux data, returned beside the children by "
                                  "tree_flatten, not a child.")
    expected = [_np(w), _np(b)]
    if len(leaves) != len(expected):
        fail("custom_pytrees", f"{what} has {len(leaves)} leaves, expected {len(expected)} (the arrays it "
                                  "holds): tree_flatten must return exactly the arrays as children.")
    for leaf in leaves:
        match = next((i for i, e in enumerate(expected)
                      if np.shape(e) == np.shape(leaf) and np.allclose(np.asarray(leaf, np.float64), e)), None)
        if match is None:
            fail("custom_pytrees", f"{what} has a leaf of shape {np.shape(leaf)} that is none of the arrays "
                                      "it was built from: tree_flatten must return the arrays themselves.")
        expected.pop(match)


def _check_layer(k, w, b, x, act, keyword):
    label = f"Linear(w, b, {act!r})"
    built = f"Linear(w=w, b=b, activation={act!r})" if keyword else label
    rep = k.fixture("linear_report")(Ref("Linear"), w, b, act, x, keyword, what=built)
    want = _expected(w, b, act, x)
    _raise_at(rep, "build", built)
    _raise_at(rep, "out", f"{label}(x)")
    check_close(rep.get("out"), want, what=f"{label}(x), {act}(x @ w + b),")
    _raise_at(rep, "leaves", f"jax.tree.flatten({label})")
    _check_leaves(rep.get("leaves"), rep.get("self_leaf"), w, b, label)
    _raise_at(rep, "round_trip", f"the flatten/unflatten round trip of {label}")
    if rep.get("same_type") is not True:
        fail("custom_pytrees", f"unflattening {label} gave another kind of object; tree_unflatten must "
                                  "rebuild the same kind of layer.")
    if rep.get("same_structure") is not True:
        fail("custom_pytrees", f"unflattening {label} gave a layer with another tree structure (another "
                                  "activation?): tree_unflatten must rebuild the layer from the aux data and "
                                  "the children it is given.")
    back = np.asarray(rep.get("back_out"), np.float64) if isinstance(rep.get("back_out"), np.ndarray) else None
    if back is None or back.shape != want.shape or not np.allclose(back, want, rtol=1e-4, atol=1e-5):
        fail("custom_pytrees", f"{label} rebuilt by jax.tree.unflatten computes something else: the round "
                                  "trip lost the activation or mixed up w and b. tree_unflatten gets the aux "
                                  "data and the children back; rebuild the layer from both.")
    _raise_at(rep, "jit", f"jax.jit(lambda layer, x: layer(x))({label}, x)")
    check_close(rep.get("jit_out"), want, what=f"the jitted {label}'s output")
    _raise_at(rep, "grad", f"jax.jit(jax.grad(loss))({label}, x)")
    if rep.get("grad_same_structure") is not True:
        fail("custom_pytrees", f"the gradient of a loss with respect to {label} has structure "
                                  f"{rep.get('grad_structure')}, not the layer's own.")
    z = _np(x) @ _np(w) + _np(b)
    dz = 2 * _ACTS[act](z) * _DACTS[act](z)  # d sum(act(z) ** 2) / dz, by hand
    grads = rep.get("grad_leaves") if isinstance(rep.get("grad_leaves"), list) else []
    by_shape = {np.shape(v): v for v in grads}
    check_close(by_shape.get(np.shape(_np(w))), _np(x).T @ dz, what=f"the gradient for w of {label}")
    check_close(by_shape.get(np.shape(_np(b))), dz.sum(axis=0), what=f"the gradient for b of {label}")
    _raise_at(rep, "tree_map", f"jax.tree.map over {label}")
    if rep.get("map_same_structure") is not True:
        fail("custom_pytrees", f"jax.tree.map over {label} changed its structure.")


# Linear on its program: the layer built in a traced program from the judge's arrays
# (fixtures linear_program and linear_structures_program), exported at the test's shapes and
# run here on new arrays; which function each apply calls is read from the program.

def _spec(a):
    return Spec(tuple(np.shape(values(a))), "float32")


def _fresh(rng, *like):
    return [rng.normal(size=np.shape(values(a))).astype(np.float32) for a in like]


def _check_layer_program(k, w, b, x, act, keyword):
    label = f"Linear(w, b, {act!r})"
    built = f"Linear(w=w, b=b, activation={act!r})" if keyword else label
    program = programs.trace(k, Fixture("linear_program"), Ref("Linear"), act, keyword, _spec(w), _spec(b), _spec(x),
                             static_argnums=(0, 1, 2), label=f"a jitted function that builds {built} from its arguments")
    w2, b2, x2 = _fresh(k.rng, w, b, x)
    got = program(w2, b2, x2)
    got = got if isinstance(got, dict) else {}
    what = f"{label} built from traced arrays (its program, run by the grader on new arrays)"
    z = x2.astype(np.float64) @ w2 + b2
    check_close(got.get("out"), _ACTS[act](z), what=f"{what}: {act}(x @ w + b)")
    leaves = got.get("leaves") if isinstance(got.get("leaves"), list) else []
    _check_leaves(leaves, False, AsJax(w2), AsJax(b2), what)
    back = got.get("back_out")
    if not isinstance(back, np.ndarray) or back.shape != z.shape or not np.allclose(back, _ACTS[act](z), rtol=1e-4,
                                                                                   atol=1e-5):
        fail("custom_pytrees", f"{what}, rebuilt by jax.tree.unflatten, computes something else: the round "
                                  "trip lost the activation or mixed up w and b. tree_unflatten gets the aux data "
                                  "and the children back; rebuild the layer from both.")
    check_close(got.get("jit_out"), _ACTS[act](z), what=f"{what}, applied by a jitted function,")
    dz = 2 * _ACTS[act](z) * _DACTS[act](z)
    grads = got.get("grad_leaves") if isinstance(got.get("grad_leaves"), list) else []
    by_shape = {np.shape(v): v for v in grads}
    check_close(by_shape.get(w2.shape), x2.astype(np.float64).T @ dz, what=f"the gradient for w of {what}")
    check_close(by_shape.get(b2.shape), dz.sum(axis=0), what=f"the gradient for b of {what}")


def _check_structures_program(k, w, b, x):
    """Four layers (relu, relu with other arrays, tanh, tanh with another b) applied by one
    jitted function inside a traced program: its calls must call two functions, one per
    activation (a trace per tree structure), and its values are run here on new arrays."""
    what = "one jitted function applied to two relu and two tanh layers inside a traced program"
    program = programs.trace(k, Fixture("linear_structures_program"), Ref("Linear"), _spec(w), _spec(b), _spec(x),
                             static_argnums=(0,), label=what)
    calls = program.facts.calls()
    if len(calls) < 4:
        fail("custom_pytrees", f"the program of {what} does not call the jitted function four times; it "
                                  "cannot be graded.")
    relu1, relu2, tanh1, tanh2 = calls[-4:]
    if {relu1, relu2} & {tanh1, tanh2}:
        fail("custom_pytrees", f"{what} traced it once for a relu and a tanh layer: the activation is not part "
                                  "of the tree structure. It must be static aux data, part of the treedef.")
    if relu1 != relu2 or tanh1 != tanh2:
        fail("custom_pytrees", f"{what} traced it once per layer, not once per activation: the layers' tree "
                                  "structures differ although only their arrays do. The arrays must be children "
                                  "and the aux data only the configuration, the same for every layer of one "
                                  "activation.")
    w2, b2, x2 = (a.astype(np.float64) for a in _fresh(k.rng, w, b, x))
    outs = program(*(a.astype(np.float32) for a in (w2, b2, x2)))
    outs = outs if isinstance(outs, list) else []
    for i, (lw, lb, act) in enumerate([(w2, b2, "relu"), (2 * w2, b2 + 1, "relu"), (w2, b2, "tanh"),
                                       (w2, 3 * b2, "tanh")]):
        check_close(outs[i] if len(outs) > i else None, _ACTS[act](x2 @ lw + lb),
                       what=f"the program's layer #{i + 1} ({act}), run by the grader on new arrays,")


def _check_protocol_program(k, w, b, x):
    """JAX rebuilds a node from leaves that are not arrays (``None``, a vmap's axis numbers,
    lists): a layer that checks or converts what it is built from breaks each of them."""
    what = ("JAX's pytree functions on a tanh layer (jax.tree.map of every leaf to None, a jax.vmap whose "
            "in_axes is a layer, jax.tree.transpose of a list of two layers)")

    def rebuilt(exc, label):
        return ExerciseFailure("custom_pytrees", f"{label} raised {type(exc).__name__} ({str(exc)[:160]}): JAX "
                               "rebuilds a layer through its unflatten from leaves that are not arrays (None, "
                               "the axis numbers of in_axes, lists), and building a Linear refused them.")

    ws = np.stack([_f32(k.rng, *np.shape(values(w))).value for _ in range(3)])
    program = programs.trace(k, Fixture("linear_protocol_program"), Ref("Linear"), _spec(w), _spec(b), _spec(ws),
                             _spec(x), static_argnums=(0,), translate=rebuilt, label=what)
    w2, b2, x2 = _fresh(k.rng, w, b, x)
    ws2 = k.rng.normal(size=ws.shape).astype(np.float32)
    got = program(w2, b2, ws2, x2)
    got = got if isinstance(got, dict) else {}
    if np.asarray(got.get("none_leaves", -1)).tolist() != 0:
        fail("custom_pytrees", f"jax.tree.map(lambda _: None, layer) gave a tree with {got.get('none_leaves')} "
                                  "leaves; mapped to None, a layer has none.")
    x64 = x2.astype(np.float64)
    check_close(got.get("vmapped"), np.stack([np.tanh(x64 @ wi + b2) for wi in ws2.astype(np.float64)]),
                what="jax.vmap over a batch of layers (w batched, b shared, in_axes given as a layer)",
                idea="custom_pytrees")
    check_close(got.get("transposed"), [w2, 2 * w2, b2, b2 + 1],
                what="the leaves of jax.tree.transpose of two layers (one layer whose w and b are lists)",
                idea="custom_pytrees")


def test_Linear(k):
    d_in, d_out = int(k.rng.integers(2, 5)), int(k.rng.integers(2, 4))
    w, b, x = _f32(k.rng, d_in, d_out), _f32(k.rng, d_out), _f32(k.rng, 5, d_in)
    _check_layer(k, w, b, x, "relu", keyword=False)
    for act in ("tanh", "identity"):
        _check_layer(k, w, b, x, act, keyword=True)
    # the same layers built in a traced program, whose values the grader computes
    _check_layer_program(k, w, b, x, "relu", keyword=False)
    _check_layer_program(k, w, b, x, "tanh", keyword=True)
    # activation is static: part of the treedef, and of the compile signature
    rep = k.fixture("linear_structures")(Ref("Linear"), w, b, x, what="Linear(w, b, activation)")
    _raise_at(rep, "build", "Linear(w, b, activation)")
    _raise_at(rep, "structure", "jax.tree.structure(Linear(w, b, activation))")
    if rep.get("relu_tanh_equal") is not False:
        fail("custom_pytrees", "Linear(w, b, 'relu') and Linear(w, b, 'tanh') have the same tree structure: "
                                  "the activation must be static aux data, part of the treedef.")
    if rep.get("relu_relu_equal") is not True:
        fail("custom_pytrees", "two relu layers with different arrays of the same shapes have different tree "
                                  "structures: the arrays must be children, not aux data.")
    _raise_at(rep, "jit", "the jitted layer")
    wn, bn = _np(w), _np(b)
    layers = [(wn, bn, "relu"), (2 * wn, bn + 1, "relu"), (wn, bn, "tanh"), (wn, 3 * bn, "tanh")]
    outs = rep.get("outs") if isinstance(rep.get("outs"), list) else []
    for i, (lw, lb, act) in enumerate(layers):
        check_close(outs[i] if len(outs) > i else None, _ACTS[act](_np(x) @ lw + lb),
                       what=f"the jitted layer #{i + 1} ({act})")
    if rep.get("traces") != 2:
        fail("custom_pytrees", f"calling a jitted function on two relu and two tanh layers traced it "
                                  f"{rep.get('traces')} time(s), expected 2: one program per activation "
                                  "(static), none per new array values (children).")
    _check_structures_program(k, w, b, x)
    _check_protocol_program(k, w, b, x)


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "tree_l2_norm": [
        ('''
def tree_l2_norm(tree):
    """sqrt(sum of x**2 over every entry of every leaf of `tree`)."""
    # Scaled, as careful norms are (BLAS's nrm2): divided by the largest |entry| first, the
    # squares cannot overflow float32 even where the entries are huge.
    # TODO: right on random trees; run it on the trees the prompt lists.
    largest = jax.tree.map(lambda leaf: jnp.max(jnp.abs(leaf)), tree)
    scale = jax.tree.reduce(jnp.maximum, largest)
    squares = jax.tree.map(lambda leaf: jnp.sum(jnp.square(leaf / scale)), tree)
    return scale * jnp.sqrt(jax.tree.reduce(jnp.add, squares))
''', "a tree whose entries are all zero", "numerics"),
        ('''
def tree_l2_norm(tree):
    # the scaling made safe for a tree of zeros only: a leaf with no entries, or no leaf, still breaks it
    scale = jax.tree.reduce(jnp.maximum, jax.tree.map(lambda leaf: jnp.max(jnp.abs(leaf)), tree))
    safe = jnp.where(scale > 0, scale, 1.0)
    return safe * jnp.sqrt(jax.tree.reduce(jnp.add, jax.tree.map(lambda leaf: jnp.sum(jnp.square(leaf / safe)), tree)))
''', "a tree with leaves that hold no entries", "pytrees"),
        ('''
def tree_l2_norm(tree):
    # every step defined for empty leaves and no leaves, but a tree of zeros still divides 0 by 0
    leaves = jax.tree.leaves(tree)
    scale = jax.tree.reduce(jnp.maximum, [jnp.max(jnp.abs(leaf), initial=0.0) for leaf in leaves], jnp.zeros(()))
    return scale * jnp.sqrt(sum((jnp.sum(jnp.square(leaf / scale)) for leaf in leaves), jnp.zeros(())))
''', "a tree whose entries are all zero", "numerics"),
        ('''
def tree_l2_norm(tree):
    flat = jnp.concatenate([jnp.ravel(leaf) for leaf in jax.tree.leaves(tree)])  # nothing to join: no leaves
    return jnp.sqrt(jnp.sum(flat ** 2))
''', "a tree with no leaves: it is a pytree all the same", "pytrees"),
        ('''
def tree_l2_norm(tree):
    # walks nested dicts only: lists, tuples and None break it
    if isinstance(tree, dict):
        return jnp.sqrt(sum(tree_l2_norm(v) ** 2 for v in tree.values()))
    return jnp.sqrt(jnp.sum(tree ** 2))
''', "on the tree {'layer1': {'b': *, 'w': *}, 'scale': [*, (*,)]}", "pytrees"),
        ('''
def tree_l2_norm(tree):
    return sum(jnp.linalg.norm(leaf) for leaf in jax.tree.leaves(tree))  # sum of norms, not the norm
''', "It adds the leaves' norms", "numerics"),
        ('''
def tree_l2_norm(tree):
    return jnp.sqrt(sum(jnp.sum(leaf) ** 2 for leaf in jax.tree.leaves(tree)))  # squares the sums
''', "It squares each leaf's sum", "numerics"),
        ('''
def tree_l2_norm(tree):
    def walk(t):
        if isinstance(t, dict):
            return sum(walk(v) for v in t.values())
        if isinstance(t, (list, tuple)):
            return sum(walk(v) for v in t)
        return jnp.sum(t ** 2)  # None is not a leaf: None ** 2 fails
    return jnp.sqrt(walk(tree))
''', "unsupported operand type(s) for ** or pow(): 'NoneType' and 'int'", "pytrees"),
    ],
    "sgd_update": [
        ('''
def sgd_update(params, grads, lr):
    # the right numbers, but a flat list instead of the structure of params
    return [p - lr * g for p, g in zip(jax.tree.leaves(params), jax.tree.leaves(grads))]
''', "has structure PyTreeDef([*, *]), expected PyTreeDef({'b': *, 'w': *})", "pytrees"),
        ('''
def sgd_update(params, grads, lr):
    new = params  # not a copy: the caller's dict is updated in place
    for name in new:
        new[name] = jax.tree.map(lambda p, g: p - lr * g, params[name], grads[name])
    return new
''', "sgd_update changed its argument #1 in place (['b'], ['w'])", "tree_state"),
        ('''
def sgd_update(params, grads, lr):
    return jax.tree.map(lambda g, p: p - lr * g, params, grads)  # arguments swapped
''', "sgd_update on {'b': *, 'w': *}['b'] is wrong", "pytrees"),
        ('''
def sgd_update(params, grads, lr):
    return {k: params[k] - lr * grads[k] for k in params}  # a flat dict only
''', "raised TypeError (unsupported operand type(s) for *: 'float' and 'dict')", "pytrees"),
        ('''
def sgd_update(params, grads, lr):
    step = float(lr)  # needs a concrete learning rate: breaks under jit
    return jax.tree.map(lambda p, g: p - step * g, params, grads)
''', "jax.jit(sgd_update) needed the concrete value of a traced array", "static"),
        ('''
def sgd_update(params, grads, lr):
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)  # the learning rate of the example, always
''', "sgd_update on {'b': *, 'w': *}['b'] is wrong", "pytrees"),
        ('''
from functools import partial

@partial(jax.jit, static_argnames="lr")
def sgd_update(params, grads, lr):
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)  # every new learning rate compiles again
''', "it marks it static, so every new learning rate compiles again", "recompiles"),
        ('''
def _update_in_place(p, g, lr):
    for name in p:
        if isinstance(p[name], dict):
            _update_in_place(p[name], g[name], lr)
        else:
            p[name] = p[name] - lr * g[name]


def sgd_update(params, grads, lr):
    # the starting code: a shallow copy, then the inner dicts (the caller's own) written in place
    new = dict(params)
    _update_in_place(new, grads, lr)
    return new
''', "sgd_update changed its argument #1 in place (['layer1']['b']", "tree_state"),
        ('''
import copy


def sgd_update(params, grads, lr):
    # a deep copy first: the caller's tree is safe, but the walk knows dicts only
    new = copy.deepcopy(params)

    def walk(p, g):
        for name in p:
            if isinstance(p[name], dict):
                walk(p[name], g[name])
            else:
                p[name] = p[name] - lr * g[name]

    walk(new, grads)
    return new
''', "raised TypeError (list indices must be integers or slices, not dict)", "pytrees"),
    ],
    "Linear": [
        ('''
@jax.tree_util.register_pytree_node_class
class Linear:
    def __init__(self, w, b, activation):
        # the starting code's conversion and checks kept, only the aux data fixed
        w, b = jnp.asarray(w, jnp.float32), jnp.asarray(b, jnp.float32)
        if w.ndim != 2 or b.shape != (w.shape[1],):
            raise ValueError(f"w must be (d_in, d_out) and b (d_out,), got {w.shape} and {b.shape}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}")
        self.w, self.b, self.activation = w, b, activation

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w + self.b)

    def tree_flatten(self):
        return (self.w, self.b), self.activation

    @classmethod
    def tree_unflatten(cls, activation, children):
        return cls(*children, activation)
''', "and building a Linear refused them", "custom_pytrees"),
        ('''
@jax.tree_util.register_pytree_node_class
class Linear:
    def __init__(self, w, b, activation):
        if w.ndim != 2 or b.ndim != 1:  # "defensive" checks: None, 0 and lists have no ndim
            raise ValueError("w must be 2-D and b 1-D")
        self.w, self.b, self.activation = w, b, activation

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w + self.b)

    def tree_flatten(self):
        return (self.w, self.b), self.activation

    @classmethod
    def tree_unflatten(cls, activation, children):
        return cls(*children, activation)
''', "and building a Linear refused them", "custom_pytrees"),
        ('''
class Linear:
    def __init__(self, w, b, activation):
        self.w, self.b, self.activation = w, b, activation

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w + self.b)

    # tree_flatten/tree_unflatten defined, but the class is never registered
    def tree_flatten(self):
        return (self.w, self.b), self.activation

    @classmethod
    def tree_unflatten(cls, activation, children):
        return cls(*children, activation)
''', "is a single opaque leaf to JAX: its class is not registered", "custom_pytrees"),
        ('''
@jax.tree_util.register_pytree_node_class
class Linear:
    def __init__(self, w, b, activation):
        self.w, self.b, self.activation = w, b, activation

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w + self.b)

    def tree_flatten(self):
        return (self.w, self.b, self.activation), None  # the string is a child, not aux data

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)
''', "include 'relu' (str): configuration such as a string must be static aux data", "custom_pytrees"),
        ('''
@jax.tree_util.register_pytree_node_class
class Linear:
    def __init__(self, w, b, activation="identity"):
        self.w, self.b, self.activation = w, b, activation

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w + self.b)

    def tree_flatten(self):
        return (self.w, self.b), None  # the activation is dropped from the treedef

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)
''', "the round trip lost the activation", "custom_pytrees"),
        ('''
@jax.tree_util.register_pytree_node_class
class Linear:
    def __init__(self, w, b, activation):
        self.w, self.b, self.activation = w, b, activation

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w) + self.b  # activation applied before the bias

    def tree_flatten(self):
        return (self.w, self.b), self.activation

    @classmethod
    def tree_unflatten(cls, activation, children):
        return cls(*children, activation)
''', "Linear(w, b, 'relu')(x), relu(x @ w + b), is wrong", "numerics"),
        ('''
@jax.tree_util.register_pytree_node_class
class Linear:
    def __init__(self, w, b, activation):
        self.w, self.b, self.activation = w, b, activation

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w + self.b)

    def tree_flatten(self):
        return (self.w, self.b), self.activation

    @classmethod
    def tree_unflatten(cls, activation, children):
        return cls(*children, "relu")  # the aux data is ignored: every rebuilt layer is a relu
''', "unflattening Linear(w, b, 'tanh') gave a layer with another tree structure", "custom_pytrees"),
    ],
}

RIGHT = {
    "sgd_update": [
        '''
def sgd_update(params, grads, lr):
    # a walk that rebuilds every kind of node, no pytree tool
    if params is None:
        return None
    if isinstance(params, dict):
        return {k: sgd_update(params[k], grads[k], lr) for k in params}
    if isinstance(params, (list, tuple)):
        return type(params)(sgd_update(p, g, lr) for p, g in zip(params, grads))
    return params - lr * grads
''',
    ],
    "tree_l2_norm": [
        '''
def tree_l2_norm(tree):
    # the starting code's scaling kept, every step defined: a largest |entry| from zero, a scale never 0
    leaves = jax.tree.leaves(tree)
    scale = jax.tree.reduce(jnp.maximum, [jnp.max(jnp.abs(leaf), initial=0.0) for leaf in leaves], jnp.zeros(()))
    safe = jnp.where(scale > 0, scale, 1.0)
    return safe * jnp.sqrt(sum((jnp.sum(jnp.square(leaf / safe)) for leaf in leaves), jnp.zeros(())))
''',
        '''
from jax.flatten_util import ravel_pytree

def tree_l2_norm(tree):
    # the chapter's other tool: every leaf in one flat vector (empty for a tree with no leaves)
    flat, _ = ravel_pytree(tree)
    return jnp.sqrt(jnp.sum(jnp.square(flat)))
''',
        '''
def tree_l2_norm(tree):
    # a fold over the leaves, from a zero scalar
    return jnp.sqrt(jax.tree.reduce(lambda total, leaf: total + jnp.sum(leaf * leaf), tree, jnp.zeros(())))
''',
    ],
    "Linear": [
        '''
import dataclasses

@dataclasses.dataclass
class Linear:
    # another registration: a dataclass with its field lists spelled out
    w: jax.Array
    b: jax.Array
    activation: str

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w + self.b)

jax.tree_util.register_dataclass(Linear, data_fields=["w", "b"], meta_fields=["activation"])
''',
        '''
class Linear:
    def __init__(self, w, b, activation):
        self.w, self.b, self.activation = w, b, activation

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w + self.b)

# the general registration, by functions
jax.tree_util.register_pytree_node(
    Linear, lambda layer: ((layer.w, layer.b), layer.activation),
    lambda activation, children: Linear(*children, activation))
''',
    ],
}
