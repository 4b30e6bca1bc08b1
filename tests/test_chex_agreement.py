"""The grader's own counters and comparisons agree with chex, the well-kept library for them.

The autograder does not grade with chex assertions: a learner needs feedback that names the
broken idea and the chapter that teaches it, and a comparison that a hostile answer cannot
talk its way through (see CONTRIBUTING.md). So chex serves as the independent reference here:
on the same calls, `autograder.count_traces` must count exactly the traces
`chex.assert_max_traces` allows, and `autograder.check_close` must accept exactly the pytrees
`chex.assert_trees_all_close` accepts.
"""
from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autograder as ag
from autograder.feedback import ExerciseFailure


def _body(x, n=2):
    return jnp.sin(x) * n


F32 = np.float32
TRACE_CASES = {
    "new values, one signature": ([(np.ones(3, F32),), (np.zeros(3, F32),), (np.full(3, 2, F32),)], ()),
    "new shape, then an old one": ([(np.ones(3, F32),), (np.ones(4, F32),), (np.ones(3, F32),)], ()),
    "new dtype": ([(np.ones(3, F32),), (np.ones(3, np.int32),)], ()),
    "static values 2, 3, 2": ([((np.ones(3, F32),), {"n": 2}), ((np.ones(3, F32),), {"n": 3}),
                               ((np.ones(3, F32),), {"n": 2})], ("n",)),
    "weak type, then strong": ([(1.0,), (F32(1.0),), (2.0,)], ()),
}


@pytest.mark.parametrize("case", TRACE_CASES)
def test_count_traces_agrees_with_chex_assert_max_traces(case):
    calls, static = TRACE_CASES[case]
    ours = ag.count_traces(_body, calls, static_argnames=static)
    assert ours >= 1

    def run(limit):
        chex.clear_trace_counter()
        guarded = jax.jit(chex.assert_max_traces(_body, n=limit), static_argnames=static or None)
        for item in calls:
            args, kwargs = item if isinstance(item[-1], dict) else (item, {})
            jax.block_until_ready(guarded(*args, **kwargs))

    run(ours)  # chex allows exactly as many traces as we counted ...
    if ours > 1:
        with pytest.raises(AssertionError, match="traced"):
            run(ours - 1)  # ... and not one fewer


rng = np.random.default_rng(0)
_A = rng.standard_normal((4, 3)).astype(F32)
CLOSE_CASES = {
    "identical": ({"w": _A, "b": _A[0]}, {"w": _A, "b": _A[0]}),
    "within float32 tolerance": (_A, _A * (1 + 1e-6)),
    "beyond tolerance": (_A, _A + 1e-2),
    "one leaf off": ({"w": _A, "b": _A[0]}, {"w": _A, "b": _A[0] + 1.0}),
    "NaN where NaN": (np.array([1.0, np.nan], F32), np.array([1.0, np.nan], F32)),
    "NaN where a number": (np.array([1.0, np.nan], F32), np.array([1.0, 2.0], F32)),
    "other shape": (_A, _A.T),
    "other structure": ({"w": _A}, {"w": _A, "b": _A[0]}),
    "tuple vs list": ((_A, _A), [_A, _A]),
    "a jax array against NumPy": (jnp.asarray(_A), _A),
}


@pytest.mark.parametrize("case", CLOSE_CASES)
def test_check_close_agrees_with_chex_assert_trees_all_close(case):
    actual, expected = CLOSE_CASES[case]
    rtol, atol = 1e-4, 1e-5
    try:
        chex.assert_trees_all_close(actual, expected, rtol=rtol, atol=atol)
        chex_accepts = True
    except (AssertionError, ValueError):
        chex_accepts = False
    try:
        ag.check_close(actual, expected, rtol=rtol, atol=atol)
        ours = True
    except ExerciseFailure:
        ours = False
    assert ours == chex_accepts, f"{case}: chex {'accepts' if chex_accepts else 'rejects'}, check_close does not"
