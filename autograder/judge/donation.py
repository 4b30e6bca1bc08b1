"""The caller's arrays (issue 45: no exercise function may delete them, by donation or
otherwise): how the judge marks the arrays of a call of a learner function (:func:`direct_args`:
NumPy values sent as the judge's ``jax.Array``s, :class:`AsNumPy` to keep one NumPy), where each
sits in the call (:func:`judge_arrays`), what the kernel says became of them (:func:`deleted_arrays`:
the agent reads each back after the call, ``autograder.agent._receipts``) and the one direct call
of a function judged by its exported program alone (:class:`DirectCall`). Used by
:class:`autograder.judge.Kernel` for every request that runs learner code.
"""
from __future__ import annotations

import numpy as np

from .. import wire
from .channel import ChannelError, LearnerError

_BUILT = (wire.AsJax, wire.Key, wire.Sharded)  # the markers the kernel turns into the judge's arrays


class AsNumPy:
    """A judge's argument sent as the NumPy array it is (not as a JAX array, as :meth:`Kernel.call`
    sends the others): for a check of what a function does to a NumPy input, such as writing
    into it. ``k.call_keep_args("set_diagonal", AsNumPy(x), 1.0)``."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def direct_args(name, args, kwargs, static_argnums=(), static_argnames=()):
    """The arguments of a call of the notebook's ``name`` with every numeric NumPy array (or
    scalar) as :class:`~autograder.wire.AsJax`: the learner's function gets JAX arrays, the
    judge's, whose deletion the judge then sees. Static arguments (hashed by ``jax.jit``) and a
    fixture's arguments are sent as they are."""
    if isinstance(name, wire.Fixture):
        return tuple(_plain(a) for a in args), {n: _plain(v) for n, v in dict(kwargs).items()}
    nums, names = set(static_argnums), set(static_argnames)
    return (tuple(_plain(a) if i in nums else _as_jax(a) for i, a in enumerate(args)),
            {n: _plain(v) if n in names else _as_jax(v) for n, v in dict(kwargs).items()})


def _plain(value):
    return value.value if isinstance(value, AsNumPy) else value


def _as_jax(tree):
    """``tree`` (tuples, lists, dicts) with its numeric NumPy leaves as :class:`~autograder.wire.AsJax`
    (an :class:`AsNumPy` one as its NumPy value)."""
    if isinstance(tree, AsNumPy):
        return tree.value
    if isinstance(tree, (np.ndarray, np.generic)):
        dt = np.asarray(tree).dtype
        return wire.AsJax(np.asarray(tree)) if dt.kind in "biufc" and dt.name in wire.DTYPES else tree
    if isinstance(tree, dict):
        return {k: _as_jax(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_as_jax(v) for v in tree]
    if isinstance(tree, tuple) and type(tree) is tuple:
        return tuple(_as_jax(v) for v in tree)
    return tree


def judge_arrays(args, kwargs) -> list:
    """``[(argument, path), ...]``: where each array the kernel builds for a request sits (an
    :class:`~autograder.wire.AsJax`, :class:`~autograder.wire.Key` or :class:`~autograder.wire.
    Sharded` marker), in the order the kernel builds them: the request's order, positional
    arguments (by index) before keyword ones (by name); ``path``: the entries inside it, such as
    ``("['w']",)``."""
    out: list = []

    def walk(value, top, path, depth=0):
        if isinstance(value, _BUILT):
            out.append((top, path))
        elif depth < wire.DEFAULT_LIMITS.max_depth and isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                walk(v, top, (*path, f"[{i}]"), depth + 1)
        elif (depth < wire.DEFAULT_LIMITS.max_depth and isinstance(value, dict)
              and all(type(key) is str for key in value)):  # as the codec sends it (else opaque)
            for key, v in value.items():
                walk(v, top, (*path, f"[{key!r}]"), depth + 1)

    for i, value in enumerate(args):
        walk(value, i, ())
    for key, value in dict(kwargs).items():
        walk(value, str(key), ())
    return out


def deleted_arrays(reply, sites, payload, label) -> str:
    """'' when every array the judge passed (``sites``, :func:`judge_arrays`) is still readable in
    the kernel after the call (the agent's ``kept``, one flag per array, read by reading it,
    not by asking it), else the learner-facing message naming the first one the call deleted.
    A reply that does not say, where the judge passed arrays, is the kernel's machinery changed
    (:class:`ChannelError`), unless it is an error that came before any call (building the
    arguments failed: a ``Ref`` to a name the notebook does not define), raised as such next."""
    kept = reply.get("kept")
    watched = reply.get("watched") if isinstance(reply.get("watched"), list) else []
    placed = [str(p[0])[:40] for p in watched if isinstance(p, list) and len(p) == 2 and p[1] is False]
    if placed and isinstance(payload.get("name"), wire.Fixture):  # an array a fixture placed for the call
        shown = f"`{placed[0]}`" if placed[0].isidentifier() else "argument"
        return (f"after {label} called the notebook's function on arrays it placed for it, the caller's "
                f"{shown} was deleted: the call gave an input buffer to its result (donation) or deleted "
                "it, a side effect on the caller, which still holds the array and whose next use of it "
                "raises 'Array has been deleted'.")
    if not sites:
        return ""
    if kept is None and "error" in reply:  # the request failed before the call (a Ref not defined...)
        return ""
    if not isinstance(kept, list) or len(kept) != len(sites) or not all(type(k) is bool for k in kept):
        raise ChannelError("The kernel's reply does not say what became of the arrays the grader passed; "
                           "was the kernel's machinery changed by a cell?")
    gone = [site for site, ok in zip(sites, kept) if not ok]
    if not gone:
        return ""
    top, path = gone[0]
    fixture = isinstance(payload.get("name"), wire.Fixture)
    params = reply.get("params") if isinstance(reply.get("params"), list) else []
    if isinstance(top, str):
        shown = f"`{top[:40]}`" if top.isidentifier() else "keyword argument"
    elif not fixture and top < len(params) and isinstance(params[top], str) and params[top].isidentifier():
        shown = f"`{params[top]}`"
    else:
        shown = f"argument {top + 1}"
    entry = f" (its entry {''.join(path)[:80]})" if path else ""
    more = f"; {len(gone)} of the {len(sites)} arrays passed in were deleted" if len(gone) > 1 else ""
    if payload.get("op") == "claim":
        how = f"after a check made in the kernel ran {label} on the grader's arrays"
    elif fixture:
        how = f"after {label} called the notebook's function on the grader's arrays"
    elif payload.get("jit"):
        how = f"after a call of {label}"
    else:
        how = f"after a direct call of {label} (not under jax.jit)"
    return (f"{how}, the caller's {shown} was deleted{entry}{more}: the call gave an input buffer to its "
            "result (donation) or deleted it, a side effect on the caller, which still holds the array "
            "and whose next use of it raises 'Array has been deleted'.")


class DirectCall:
    """The one direct call (in the kernel, not under ``jax.jit``) of a notebook function whose
    values the judge takes from its exported program (:meth:`.Kernel.export`, :meth:`.Kernel.program`): under the jit of
    an export, a donation inside the function does nothing, so only a direct call shows that it
    deletes its caller's arrays. Made once per function and grading, after its program's first
    run, on that run's inputs (valid ones: the judge drew them for it), unless the judge calls
    the function directly itself. Its result and errors are not read (the program's values are
    judged); an array it deleted fails the test (:meth:`.Kernel.call`)."""

    def __init__(self, kernel, name, specs, static_argnums, static_argnames, kwargs):
        self.kernel, self.name, self.specs = kernel, name, tuple(specs)
        self.static_argnums, self.static_argnames = set(static_argnums), set(static_argnames)
        self.kwargs = dict(kwargs)

    def once(self, args, kwargs) -> None:
        if self.kernel.called_directly(self.name):
            return
        dynamic = iter(args)
        full = [spec if i in self.static_argnums else next(dynamic, None) for i, spec in enumerate(self.specs)]
        named = {n: v if n in self.static_argnames else kwargs.get(n) for n, v in self.kwargs.items()}
        try:
            full, named = _kernel_values(full), _kernel_values(named)
        except ValueError:  # an input the kernel cannot be sent (a key of another kind): no call
            return
        try:
            self.kernel.call(self.name, *full, **named)
        except LearnerError:  # judged from its program; what matters here is the arguments
            pass
        except wire.WireError:  # inputs the channel does not carry (over its limits): no call
            pass


def _kernel_values(tree):
    """A tree of the program's inputs as the kernel takes them: JAX arrays of the judge (a typed
    threefry key as the :class:`~autograder.wire.Key` of its seed) as NumPy values; raises
    ValueError for one that cannot be sent."""
    if isinstance(tree, dict):
        return {k: _kernel_values(v) for k, v in tree.items()}
    if isinstance(tree, list) or type(tree) is tuple:
        return type(tree)(_kernel_values(v) for v in tree)
    import sys

    jax = sys.modules.get("jax")
    if jax is not None and isinstance(tree, jax.Array):
        if jax.dtypes.issubdtype(tree.dtype, jax.dtypes.prng_key):
            data = np.asarray(jax.random.key_data(tree))
            impl = getattr(jax.random.key_impl(tree), "name", "")
            if tree.shape != () or impl != "threefry2x32" or data.shape != (2,) or int(data[0]) != 0:
                raise ValueError("a key the kernel cannot rebuild")
            return wire.Key(int(data[1]))
        return np.asarray(tree)
    return tree
