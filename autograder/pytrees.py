"""Pytrees: functions that work on any nesting, inputs left alone, custom nodes registered properly."""
from __future__ import annotations

import numpy as np

from .feedback import ExerciseFailure, _explain, call, fail


def describe(tree) -> str:
    """A short description of a pytree's structure, for messages: ``{'a': *, 'b': [*, None]}``."""
    import jax

    return str(jax.tree_util.tree_structure(tree)).replace("PyTreeDef(", "", 1)[:-1][:160]


def call_on_tree(f, *args, what=None, **kwargs):
    """Call learner code on pytrees; an error that is not about JAX itself becomes pytree feedback.

    A function that walks only ``dict.values()`` or only lists fails on other
    nestings, and one that treats ``None`` as a leaf fails where ``None`` is an
    empty subtree; the learner reads which tree broke it and that ``jax.tree``
    utilities handle every nesting.
    """
    def translate(exc, label):
        if _explain(exc, label).idea != "numerics":
            return None  # a JAX error or a stub: the general translation names its idea
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        shapes = "; ".join(describe(a) for a in args if not isinstance(a, (int, float)))
        return ExerciseFailure(
            "pytrees",
            f"{label} raised {type(exc).__name__} ({first}) on the tree {shapes}. A pytree can nest "
            "dicts, lists and tuples to any depth, and None is an empty subtree, not a leaf: "
            "a walk over it must handle every kind of node.")

    return call(f, *args, what=what or f"`{getattr(f, '__name__', 'f')}`", translate=translate, **kwargs)


def _leaf_snapshot(tree):
    import jax

    leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
    return treedef, [(jax.tree_util.keystr(p), id(x), np.array(x, copy=True)) for p, x in leaves]


def check_input_tree_unchanged(f, args, *, what=None):
    """Check that calling ``f(*args)`` eagerly leaves every input pytree as it was.

    Updating ``params[k] = ...`` inside the function changes the caller's
    dict: state must come back as a new pytree, the old one untouched.
    """
    label = what or f"`{getattr(f, '__name__', 'f')}`"
    before = [_leaf_snapshot(a) for a in args]
    call_on_tree(f, *args, what=label)
    for i, (a, (treedef, leaves)) in enumerate(zip(args, before)):
        after_def, after = _leaf_snapshot(a)
        changed = [p or "(the root)" for (p, ident, v), (_, ident2, v2) in zip(leaves, after)
                   if ident != ident2 or not np.array_equal(v, v2, equal_nan=True)]
        if after_def != treedef or changed:
            fail("tree_state", f"{label} changed its argument #{i + 1} in place "
                               f"({', '.join(changed[:4]) or 'its structure'}); return a new pytree "
                               "and leave the old state untouched.")


def check_leaves(obj, expected, *, what):
    """Check that the leaves of ``obj`` are exactly the arrays ``expected`` (in any order)."""
    import jax

    leaves = jax.tree.leaves(obj)
    if len(leaves) == 1 and leaves[0] is obj:
        fail("custom_pytrees", f"{what} is a single opaque leaf to JAX: its class is not registered "
                               "as a pytree node, so `jax.jit` and `jax.grad` cannot look inside it. "
                               "Register it (`jax.tree_util.register_pytree_node_class` or "
                               "`register_dataclass`).")
    odd = [x for x in leaves if not hasattr(x, "shape")]
    if odd:
        fail("custom_pytrees", f"the leaves of {what} include {odd[0]!r} ({type(odd[0]).__name__}): "
                               "configuration such as a string must be static aux data, returned "
                               "beside the children by tree_flatten, not a child.")
    if len(leaves) != len(expected):
        fail("custom_pytrees", f"{what} has {len(leaves)} leaves, expected {len(expected)} (the arrays "
                               "it holds): tree_flatten must return exactly the arrays as children.")
    remaining = list(expected)
    for leaf in leaves:
        match = next((i for i, e in enumerate(remaining)
                      if np.shape(e) == np.shape(leaf) and np.allclose(np.asarray(leaf), np.asarray(e))), None)
        if match is None:
            fail("custom_pytrees", f"{what} has a leaf of shape {np.shape(leaf)} that is none of the arrays "
                                   "it was built from: tree_flatten must return the arrays themselves.")
        remaining.pop(match)
