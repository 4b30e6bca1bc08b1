"""The JAX configuration the judge's requests run with, in the learner's kernel.

A module of its own, beside the dispatcher (:mod:`autograder.agent`), so that
:mod:`autograder.agent.fixtures` (which the dispatcher calls) can reset it without importing the
dispatcher: no import cycle.
Must run on JAX 0.7.2 too.
"""
from __future__ import annotations

import contextlib
import sys

import jax
import numpy as np

# JAX flags a learner cell could flip to fool a kernel-side check, and the values claims need.
CONFIG = {"jax_disable_jit": False, "jax_debug_nans": False, "jax_debug_infs": False,
          "jax_enable_checks": False, "jax_log_compiles": False, "jax_explain_cache_misses": False}

# JAX's own defaults for the flags that change what a program computes (dtypes, promotion, the
# PRNG): the judge computes its references with them, so every request runs with them (a
# learner who left float64 on, as 02 shows how to, is graded as the course's programs run),
# and the notebook's own values are put back after it.
SEMANTICS = {"jax_enable_x64": False, "jax_numpy_rank_promotion": "allow",
             "jax_numpy_dtype_promotion": "standard", "jax_default_matmul_precision": None,
             "jax_default_prng_impl": "threefry2x32", "jax_threefry_partitionable": True}

# NumPy's default print options: what ``jax.debug.print`` shows is read back by the judge
NUMPY_PRINT = {"precision": 8, "threshold": 1000, "edgeitems": 3, "linewidth": 75,
               "suppress": False, "floatmode": "maxprec", "sign": "-", "formatter": None}


def reset_config() -> list[str]:
    """Put the flags of :data:`CONFIG` back to the values claims need; the names that did not
    take the value (a patched ``jax.config``) are returned."""
    wrong = []
    for flag, value in CONFIG.items():
        try:
            jax.config.update(flag, value)
            if getattr(jax.config, flag) != value:
                wrong.append(flag)
        except AttributeError:  # a flag this JAX version does not have
            continue
        except Exception:  # noqa: BLE001
            wrong.append(flag)
    return wrong


@contextlib.contextmanager
def course_semantics():
    """:data:`SEMANTICS`, :data:`NUMPY_PRINT` and Python's default recursion limit (at least) in
    force (the flags this JAX has), the notebook's values put back after."""
    depth = sys.getrecursionlimit()  # a notebook that lowered it could not decode a request
    sys.setrecursionlimit(max(depth, 1000))
    changed = {}
    for flag, value in SEMANTICS.items():
        try:
            current = getattr(jax.config, flag)
            if getattr(current, "value", current) != value:
                jax.config.update(flag, value)
                changed[flag] = current
        except Exception:  # noqa: BLE001 - a flag this JAX does not have, or a patched config
            continue
    try:
        with np.printoptions(**NUMPY_PRINT):
            yield
    finally:
        sys.setrecursionlimit(depth)
        for flag, value in changed.items():
            try:
                jax.config.update(flag, getattr(value, "value", value))
            except Exception:  # noqa: BLE001
                pass
