"""Accept and reject cases for the chapter-specific checks (shapes, timing, pytrees, meshes).

Every reject case asserts the idea the learner is told about, the pointer to the course
section that teaches it, and a phrase specific to the mistake (``rejects`` from test_checks).
"""
from __future__ import annotations

import json
import re
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from autograder.feedback import TAUGHT_IN
from autograder.pytrees import call_on_tree, check_input_tree_unchanged, check_leaves
from autograder.shapes import check_fixed_shapes
from autograder.timing import check_honest_timer, check_single_dispatch
from test_checks import rejects

COURSE = Path(__file__).resolve().parent.parent / "course"


def _headings(notebook: Path) -> list[str]:
    """The text of every markdown heading line (``#`` to ``######``) of a notebook."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    found, fenced = [], False
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        for line in source.splitlines():
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
                continue
            m = re.match(r"^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$", line)
            if m and not fenced:
                found.append(m.group(1).strip())
        fenced = False
    return found


def test_every_taught_in_section_is_a_heading_of_its_chapter():
    missing = []
    for idea, (chapter, section) in TAUGHT_IN.items():
        if chapter is None:
            continue
        notebook = COURSE / f"{chapter}.ipynb"
        assert notebook.exists(), f"{idea}: no chapter {notebook}"
        if section not in _headings(notebook):
            missing.append(f"{idea}: \u201c{section}\u201d is not a heading of course/{chapter}.ipynb")
    assert not missing, "\n".join(missing)


def test_headings_are_read_from_markdown_heading_lines_only(tmp_path):
    nb = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["## Real heading\n", "text # not one\n"]},
        {"cell_type": "markdown", "metadata": {}, "source": "```\n# in a fence\n```\n### Closed ###"},
        {"cell_type": "code", "metadata": {}, "source": ["# a comment\n"], "outputs": [],
         "execution_count": None},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert _headings(path) == ["Real heading", "Closed"]


def test_fixed_shapes_accepts_where_and_rejects_boolean_masks():
    x = jnp.array([1.0, -2.0, 3.0])
    check_fixed_shapes(lambda v: jnp.where(v > 0, v, 0.0).sum(), (x,))
    rejects(lambda: check_fixed_shapes(lambda v: v[v > 0].sum(), (x,), what="positive_sum"),
            "dynamic_shapes", "positive_sum asked for a shape that depends on the values", "never from the values")


def _honest(f, *args, repeats=5):
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _no_block(f, *args, repeats=5):
    f(*args)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def test_honest_timer_accepts_blocking_median_and_rejects_unblocked():
    check_honest_timer(_honest)
    rejects(lambda: check_honest_timer(_no_block), "timing", "never waited for the result",
            "block_until_ready")


def test_single_dispatch_accepts_one_jit_and_rejects_three_programs():
    predict = jax.jit(lambda w, x: x @ w)
    scale = jax.jit(lambda w, lr: w * lr)
    w, x = jnp.ones((3,)), jnp.ones((4, 3))
    one = jax.jit(lambda w, x, lr: w - lr * (x @ w).sum())
    check_single_dispatch(one, [(w, x, 0.1), (w, x, 0.2)])

    def several(w, x, lr):
        return scale(w, lr) - predict(w, x).sum()

    rejects(lambda: check_single_dispatch(several, [(w, x, 0.1), (w, x, 0.2)], what="several"),
            "dispatch", "one call of several dispatches 2 separately compiled programs", "is its own dispatch")

    def eager(w, x, lr):
        return w - lr * (x @ w).sum()

    rejects(lambda: check_single_dispatch(eager, [(w, x, 0.1), (w, x, 0.2)], what="eager"),
            "dispatch", "eager runs its", "operations eagerly")
    static_lr = jax.jit(lambda w, x, lr: w - lr * (x @ w).sum(), static_argnums=2)
    rejects(lambda: check_single_dispatch(static_lr, [(w, x, 0.1), (w, x, 0.2)], what="static_lr"),
            "recompiles", "static_lr compiled again 1 time(s)", "do not mark them static")


def test_input_tree_unchanged_rejects_in_place_updates():
    params = {"w": np.ones(3), "b": np.zeros(1)}
    check_input_tree_unchanged(lambda p: jax.tree.map(lambda v: v + 1, p), (params,))

    def mutate(p):
        p["w"] = p["w"] + 1
        return p

    rejects(lambda: check_input_tree_unchanged(mutate, ({"w": np.ones(3), "b": np.zeros(1)},), what="mutate"),
            "tree_state", "mutate changed its argument #1 in place", "['w']", "leave the old state untouched")


def test_leaves_reject_unregistered_classes():
    class Box:
        def __init__(self, w):
            self.w = w

    w = jnp.ones(2)
    check_leaves({"w": w}, [w], what="a dict")
    rejects(lambda: check_leaves(Box(w), [w], what="Box(w)"), "custom_pytrees",
            "Box(w) is a single opaque leaf", "not registered")


def test_call_on_tree_accepts_any_nesting_and_returns_the_result():
    tree = {"a": [jnp.ones(2), (jnp.full(3, 2.0), None)], "b": jnp.zeros(1)}
    total = call_on_tree(lambda t: sum(jnp.sum(v) for v in jax.tree.leaves(t)), tree, what="total")
    assert float(total) == 8.0
    assert call_on_tree(lambda t, scale=1: scale * len(jax.tree.leaves(t)), tree, scale=2) == 6


def test_call_on_tree_rejects_code_that_walks_one_kind_of_node():
    def dict_only(t):
        return sum(jnp.sum(v) for v in t.values())

    rejects(lambda: call_on_tree(dict_only, [jnp.ones(2), {"w": jnp.ones(3)}], what="dict_only"),
            "pytrees", "dict_only raised AttributeError", "[*, {'w': *}]", "any depth",
            "every kind of node")

    def none_is_a_leaf(t):
        return sum(jnp.sum(v ** 2) for v in t.values())

    rejects(lambda: call_on_tree(none_is_a_leaf, {"w": jnp.ones(2), "b": None}, what="none_is_a_leaf"),
            "pytrees", "none_is_a_leaf raised TypeError", "None is an empty subtree")


def test_call_on_tree_keeps_the_idea_of_jax_errors_and_stubs():
    rejects(lambda: call_on_tree(jax.jit(lambda t: t["x"] if t["x"] > 0 else -t["x"]), {"x": jnp.ones(())},
                                 what="branchy"),
            "control_flow", "branchy used a traced value in a Python `if`")

    def todo(t):
        raise NotImplementedError

    rejects(lambda: call_on_tree(todo, {"x": jnp.ones(())}), "unanswered", "`todo` is not answered yet")
