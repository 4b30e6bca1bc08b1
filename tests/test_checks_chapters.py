"""Accept and reject cases for the chapter-specific checks (shapes, timing, pytrees, meshes)."""
from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autograder as ag
from autograder.pytrees import check_input_tree_unchanged, check_leaves
from autograder.shapes import check_fixed_shapes
from autograder.timing import check_honest_timer, check_single_dispatch


def _rejects(fn, *phrases):
    with pytest.raises(ag.ExerciseFailure) as info:
        fn()
    msg = str(info.value)
    for p in phrases:
        assert p.lower() in msg.lower(), f"{p!r} not in {msg!r}"
    return msg


def test_fixed_shapes_accepts_where_and_rejects_boolean_masks():
    x = jnp.array([1.0, -2.0, 3.0])
    check_fixed_shapes(lambda v: jnp.where(v > 0, v, 0.0).sum(), (x,))
    _rejects(lambda: check_fixed_shapes(lambda v: v[v > 0].sum(), (x,)), "05_shapes")


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
    _rejects(lambda: check_honest_timer(_no_block), "wait")


def test_single_dispatch_accepts_one_jit_and_rejects_three_programs():
    predict = jax.jit(lambda w, x: x @ w)
    scale = jax.jit(lambda w, lr: w * lr)
    w, x = jnp.ones((3,)), jnp.ones((4, 3))
    one = jax.jit(lambda w, x, lr: w - lr * (x @ w).sum())
    check_single_dispatch(one, [(w, x, 0.1), (w, x, 0.2)])

    def several(w, x, lr):
        return scale(w, lr) - predict(w, x).sum()

    _rejects(lambda: check_single_dispatch(several, [(w, x, 0.1), (w, x, 0.2)]))


def test_input_tree_unchanged_rejects_in_place_updates():
    params = {"w": np.ones(3), "b": np.zeros(1)}
    check_input_tree_unchanged(lambda p: jax.tree.map(lambda v: v + 1, p), (params,))

    def mutate(p):
        p["w"] = p["w"] + 1
        return p

    _rejects(lambda: check_input_tree_unchanged(mutate, ({"w": np.ones(3), "b": np.zeros(1)},)), "in place")


def test_leaves_reject_unregistered_classes():
    class Box:
        def __init__(self, w):
            self.w = w

    w = jnp.ones(2)
    check_leaves({"w": w}, [w], what="a dict")
    _rejects(lambda: check_leaves(Box(w), [w], what="Box(w)"), "not registered")
