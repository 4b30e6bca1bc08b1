"""`check_prints_values` explains a Python `print` under jit even when the function was already
compiled for those shapes (an earlier cell, or the self-check cell running the tests again)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autograder as ag
from autograder.feedback import ExerciseFailure


def test_a_python_print_is_shown_as_a_tracer_even_after_an_earlier_compile(capsys):
    def runtime_print(x):
        y = jnp.sin(x)
        print("sin(x) =", y)  # the anti-pattern: runs only while tracing
        return y * 2

    x = jnp.array([0.5, 1.0])
    jax.jit(runtime_print)(x)  # an earlier cell compiled it for this shape
    capsys.readouterr()
    with pytest.raises(ExerciseFailure) as err:
        ag.check_prints_values(jax.jit(runtime_print), [(x,)], lambda v: np.sin(np.asarray(v)))
    assert err.value.idea == "runtime_values"
    assert "printed a tracer" in str(err.value)


def test_jax_debug_print_passes_after_an_earlier_compile():
    def runtime_print(x):
        y = jnp.sin(x)
        jax.debug.print("sin(x) = {}", y)
        return y * 2

    x = jnp.array([0.5, 1.0])
    jax.block_until_ready(jax.jit(runtime_print)(x))
    jax.effects_barrier()
    ag.check_prints_values(jax.jit(runtime_print), [(x,), (x + 1,)], lambda v: np.sin(np.asarray(v)))
