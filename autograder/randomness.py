"""Explicit randomness: typed keys, and no key consumed twice (JAX's key-reuse checker)."""
from __future__ import annotations

import contextlib

from .feedback import ExerciseFailure, call, fail


def is_typed_key(key) -> bool:
    """True for a new-style typed key array (``jax.random.key``)."""
    import jax

    try:
        return jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    except AttributeError:
        return False


def is_legacy_key(x) -> bool:
    """True for a legacy ``jax.random.PRNGKey``: a uint32 array of shape ``(2,)``."""
    return getattr(x, "shape", None) == (2,) and str(getattr(x, "dtype", "")) == "uint32"


def check_typed_key(key, *, what="the key"):
    """Check that ``key`` is a typed key (``jax.random.key``).

    A legacy ``PRNGKey`` uint32 array is rejected with an explanation (the key-reuse
    checker cannot follow it); anything else is rejected as not a key at all.
    """
    if is_typed_key(key):
        return
    if str(getattr(key, "dtype", "")) == "uint32" and getattr(key, "shape", (None,))[-1:] == (2,):
        fail("prng", f"{what} is a legacy uint32 `PRNGKey` array, not a typed key; use "
                     "`jax.random.key(seed)`: only typed keys are tracked by the key-reuse checker.")
    fail("prng", f"{what} is not a PRNG key (it is {type(key).__name__} "
                 f"{getattr(key, 'dtype', '')}".rstrip() + "); randomness in JAX comes from an "
                 "explicit typed key: make one with `jax.random.key(seed)` and split it.")


def fresh_keys(tree):
    """``tree`` with every typed key replaced by an unconsumed copy of itself.

    The key-reuse checker marks a key object as consumed when eager code uses it; giving
    each run its own copies keeps the eager run from spoiling the jitted one, and leaves
    the caller's keys usable afterwards.
    """
    import jax

    def copy(x):
        if is_typed_key(x):
            return jax.random.wrap_key_data(jax.random.key_data(x), impl=jax.random.key_impl(x))
        return x

    return jax.tree_util.tree_map(copy, tree)


@contextlib.contextmanager
def key_reuse_checking():
    """Turn on JAX's key-reuse checker inside the block.

    On JAX before 0.10 the checker's setting is not part of the compile cache key: a program
    compiled earlier without the checker would be reused and the reuse go unseen (JAX 0.7.2
    misses it both eagerly and under jit). There JAX's caches are cleared first; newer JAX
    needs no clearing, which spares every later cell its recompiles.
    """
    import jax

    if jax.__version_info__ < (0, 10):
        jax.clear_caches()
    with jax.debug_key_reuse(True):
        yield


def _reuse_failure(exc, label):
    import jax

    if not isinstance(exc, jax.errors.KeyReuseError):
        return None
    # JAX's own line says which call consumed the key again ("... passed to random_split"); it
    # says "passed to jit-compiled function" of every eager random call too, so that is quoted
    # only for a jitted run.
    line = (str(exc).strip().splitlines() or [""])[0][:160]
    quoted = "" if not line or ("jit-compiled function" in line and not label.startswith("jax.jit")) else f" ({line})"
    return ExerciseFailure("key_reuse", f"{label} consumed the same key more than once{quoted}: a key "
                                        "stands for one draw; split it with `jax.random.split` (or "
                                        "`fold_in`) and use each key once.")


def check_no_key_reuse(f, args, *, what=None, jit=True, static_argnums=(), static_argnames=(), kwargs=None):
    """Check that ``f(*args)`` consumes no key twice, eagerly and (with ``jit``) under ``jax.jit``.

    Keys among ``args`` must be typed keys; a legacy key is rejected with an explanation.
    Each run gets its own copies of the keys, so the same (correct) ``f`` passes both runs.
    A failure says that a key was consumed twice and how to split it.
    """
    import jax

    label = what or f"`{getattr(f, '__name__', 'f')}`"
    kwargs = kwargs or {}
    for leaf in jax.tree_util.tree_leaves(args):
        if is_legacy_key(leaf):
            check_typed_key(leaf)
    runs = [("", f)]
    if jit:
        runs.append(("jax.jit of ", jax.jit(f, static_argnums=static_argnums or None, static_argnames=static_argnames or None)))
    for prefix, fn in runs:
        run_args, run_kwargs = fresh_keys((tuple(args), kwargs))
        with key_reuse_checking():
            jax.block_until_ready(call(fn, *run_args, what=prefix + label, translate=_reuse_failure,
                                       **run_kwargs))
