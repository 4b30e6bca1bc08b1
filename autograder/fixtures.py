"""Functions the judge passes to exercises that take functions (``primitive_names(f, *args)``,
``honest_time(f, ...)``), by name: ``autograder.wire.Fixture("sin_times_two")``.

Trusted code: the agent resolves a fixture only to a function defined in this module. Add the
functions a judge file needs here (plain JAX, no state).
"""
from __future__ import annotations


def sin_times_two(x):
    """``sin(x) * 2``: primitives ``sin`` and ``mul``."""
    import jax.numpy as jnp

    return jnp.sin(x) * 2


def matmul_tanh(a, b):
    """``tanh(a @ b)``: primitives ``dot_general`` and ``tanh``."""
    import jax.numpy as jnp

    return jnp.tanh(a @ b)
