"""The three phases: what runs at trace time and what runs every call."""
from __future__ import annotations

import contextlib
import io
import re

import numpy as np

from .feedback import call, fail

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def captured_stdout(f, *args, what=None, **kwargs):
    """Run ``f(*args)``, wait for the result and for pending ``jax.debug`` callbacks,
    and return ``(result, printed_text)``."""
    import jax

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        out = call(f, *args, what=what, **kwargs)
        jax.block_until_ready(out)
        jax.effects_barrier()
    return out, buf.getvalue()


def numbers_in(text: str) -> np.ndarray:
    """Every number written in ``text``."""
    return np.array([float(m) for m in _NUMBER.findall(text)], dtype=np.float64)


def check_prints_values(f, args_list, expected_fn, *, what=None, decimals=3):
    """Check that each call ``f(*args)`` prints the concrete numbers ``expected_fn(*args)``.

    Used with a jitted ``f``: a Python ``print`` runs only while tracing and
    shows a tracer; ``jax.debug.print`` runs on every call with real values.
    The learner sees that a tracer was printed, or which call did not show which values.
    """
    label = what or f"`{getattr(f, '__name__', 'f')}`"
    # Trace afresh: if `f` (or another jit of the same function, e.g. from an earlier cell)
    # was already compiled for these shapes, a Python `print` would simply print nothing,
    # and the learner would not see the tracer that explains why.
    clear = getattr(f, "clear_cache", None)
    if callable(clear):
        clear()
    for i, args in enumerate(args_list):
        _, text = captured_stdout(f, *args, what=label)
        if "Traced<" in text or "Tracer" in text:
            fail("runtime_values", f"{label} printed a tracer ({text.strip()[:120]!r}): Python's "
                                   "`print` runs at trace time, when there is no value yet; use "
                                   "`jax.debug.print`, which runs with the concrete values.")
        want = np.ravel(np.asarray(expected_fn(*args), dtype=np.float64))
        seen = numbers_in(text)
        tol = 10.0 ** (-decimals)
        missing = [float(v) for v in want if not np.any(np.abs(seen - v) <= tol + tol * abs(v))]
        if missing:
            shown = text.strip()[:160] or "nothing"
            fail("runtime_values", f"on call #{i + 1}, {label} printed {shown!r}, which does not "
                                   f"show the values {np.round(missing, decimals).tolist()}. Under "
                                   "jit, only `jax.debug.print` prints on every call with the "
                                   "values of that call.")
