"""The kernel side of the judge's channel: runs one request in the learner's kernel.

A package of three modules: this one (the dispatcher: :func:`serve`, :func:`handle`, ``_run``),
:mod:`.config` (the JAX configuration requests run with) and :mod:`.fixtures` (the trusted
functions a judge names with :class:`~autograder.wire.Fixture`).

The judge (:mod:`autograder.judge`) sends an ``execute_request`` of one fixed expression,
``__import__("autograder.agent").agent.serve(<JSON string literal>)``, and reads back one
``display_data`` of MIME type :data:`autograder.wire.MIME` whose value is the JSON reply.
Requests and replies are :mod:`autograder.wire` data; nothing is pickled.

Operations (``op``):

- ``call``: call the notebook's ``name`` on the decoded ``args``/``kwargs``; with ``jit`` the
  agent applies ``jax.jit`` itself (with ``static_argnums``/``static_argnames``), cached per
  function object and statics, so repeated calls do not retrace. Reply: ``{"value": ...}``.
  ``name`` may instead be a :class:`~autograder.wire.Fixture` marker: a function of
  :mod:`autograder.agent.fixtures` that calls learner code itself (given as :class:`~autograder.wire.Ref`
  arguments) where the call needs kernel-side objects (a mesh, ``jax.set_mesh``) or compares
  kernel-side values that are not data (arbitrary hashable keys);
- ``get``: the value of the notebook's global ``name``;
- ``export``: ``jax.export.export(jax.jit(fn), platforms=("cpu",))`` (the judge's platform) at
  the given :class:`~autograder.wire.Spec` arguments; reply: ``{"exported": <base64 of the
  serialized module>}``;
- ``claim``: run one of the package's checks (:data:`CLAIMS`) on ``name`` and ``args``, after
  resetting and checking the JAX configuration; reply ``{"claim": {"ok", "idea", "detail"}}``.

An exception raised by learner code comes back as ``{"error": {"type", "mro", "message"}}``.
Everything here runs on learner-controlled ground: the judge treats each reply as data to
check, never as a verdict. Must run on JAX 0.7.2 too.
"""
from __future__ import annotations

import base64
import json
import traceback
import types

import jax
import jax.numpy as jnp
import numpy as np
from jax import export
from jax.sharding import NamedSharding, PartitionSpec

from .. import wire
from ..feedback import ExerciseFailure, call, fail
from ..meshes import make_mesh
from ..purity import changed_globals, snapshot_globals
from . import fixtures, watch
from .fixtures.calls import jit_once
from .config import course_semantics, reset_config

# The checks a claim may run: the kernel alone can observe what they look at.
CLAIMS = ("check_globals_unchanged", "check_pure", "check_input_unchanged", "check_no_tracer_leak", "check_compiles",
          "check_compiles_at_most", "check_no_key_reuse", "check_no_host_transfer",
          "check_traceable", "check_prints_values", "check_primitive_present",
          "check_primitive_absent", "check_fixed_shapes", "check_input_tree_unchanged",
          "check_single_dispatch", "check_uses_collective")
_CLAIM_MODULES = ("autograder", "autograder.pytrees", "autograder.shapes", "autograder.timing",
                  "autograder.meshes")

MESSAGE_LIMIT = 2000


def _ns() -> dict:
    from IPython import get_ipython

    ip = get_ipython()
    if ip is None:
        raise RuntimeError("the judge's agent runs only in an IPython kernel")
    return ip.user_ns


def _lookup(name):
    ns = _ns()
    if not isinstance(name, str) or name not in ns:
        raise NameError(f"name {name!r} is not defined")
    return ns[name]


def _is_fixture(f) -> bool:
    return (isinstance(f, types.FunctionType) and f.__name__ in fixtures.__all__
            and getattr(fixtures, f.__name__) is f)


def _callee(name):
    """The notebook's ``name``, or a fixture function (a decoded ``Fixture`` marker)."""
    return name if _is_fixture(name) else _lookup(name)


def _as_jax_array(value, dtype=None):
    """``jnp.asarray(value, dtype)``, without its cost for a NumPy array: on JAX 0.12
    ``jnp.asarray`` compiles a conversion for every new shape (about 6 ms each, and the judge's
    inputs are fresh shapes), where ``jax.device_put`` of the same array makes the same array
    (dtype canonicalized alike, not weakly typed, uncommitted, on the default device). Under a
    mesh set with ``jax.set_mesh``, or for Python scalars (weakly typed), ``jnp.asarray``
    itself."""
    if isinstance(value, (np.ndarray, np.generic)) and _no_mesh():
        return jax.device_put(np.asarray(value, dtype=dtype))
    return jnp.asarray(value, dtype=dtype)


def _no_mesh() -> bool:
    """No mesh is set (``jax.set_mesh``): then arrays are made on the default device."""
    try:
        return bool(jax.sharding.get_abstract_mesh().empty)
    except Exception:  # noqa: BLE001 - an older JAX: jnp.asarray decides
        return False


def _markers(built=None):
    """The builders of the argument markers; each array one builds (``as_jax``, ``key``,
    ``sharded``: the judge's own arrays) is also appended to ``built``, in the order the request
    holds them (see :func:`_receipts`)."""
    made = built if built is not None else []

    def as_jax(d, node, depth):
        value = d.dec(node.get("value"), depth + 1)
        dtype = node.get("dtype")
        out = _as_jax_array(value, wire._np_dtype(dtype) if dtype else None)
        made.append(out)
        return out

    def key(d, node, depth):
        seed = node.get("seed")
        if type(seed) is not int:
            raise wire.WireError("a key's seed must be an int")
        out = jax.random.key(seed, impl=node.get("impl") or None)
        made.append(out)
        return out

    def ref(d, node, depth):
        return _lookup(node.get("name"))

    def fixture(d, node, depth):
        name = node.get("name")
        # a name of the package's __all__: its modules' helpers (a mesh builder...) are not fixtures
        f = getattr(fixtures, name) if isinstance(name, str) and name in fixtures.__all__ else None
        if not _is_fixture(f):
            raise wire.WireError(f"no fixture {str(name)[:40]!r}")
        return f

    def sharded(d, node, depth):
        value = d.dec(node.get("value"), depth + 1)
        n = node.get("devices")
        if type(n) is not int or n < 1:
            raise wire.WireError("a bad device count")
        spec = [tuple(p) if isinstance(p, list) else p for p in node.get("spec") or []]
        out = jax.device_put(value, NamedSharding(make_mesh((n,), ("data",)), PartitionSpec(*spec)))
        made.append(out)
        return out

    def spec(d, node, depth):
        return jax.ShapeDtypeStruct(tuple(node.get("shape")), wire._np_dtype(node.get("dtype")))

    return {"as_jax": as_jax, "key": key, "ref": ref, "fixture": fixture, "sharded": sharded,
            "spec": spec}


def _statics(req) -> dict:
    """``jax.jit``'s static arguments, as the request names them."""
    nums = tuple(req.get("static_argnums") or ())
    names = tuple(req.get("static_argnames") or ())
    if not all(type(n) is int for n in nums) or not all(isinstance(n, str) for n in names):
        raise wire.WireError("bad static arguments")
    return {"static_argnums": nums or None, "static_argnames": names or None}


def check_globals_unchanged(f, *args, namespace, what=None, **kwargs):
    """A claim: calling ``f(*args, **kwargs)`` changes none of the notebook's public globals.
    (``check_pure``'s globals part alone: no cache clearing, no jit, one call.)"""
    label = what or f"`{getattr(f, '__name__', 'f')}`"
    before = snapshot_globals(namespace)
    call(f, *args, what=label, **kwargs)
    changed = changed_globals(before, snapshot_globals(namespace))
    if changed:
        fail("purity", f"calling {label} changed the global(s) {changed}; a pure function "
                       "communicates only through its arguments and return value.")


def _claim(req, fn, args, kwargs):
    check = req.get("check")
    if check not in CLAIMS:
        raise wire.WireError(f"{str(check)[:40]!r} is not a claim the agent runs")
    f = check_globals_unchanged if check == "check_globals_unchanged" else None
    for module in _CLAIM_MODULES if f is None else ():
        f = getattr(__import__(module, fromlist=["_"]), check, None)
        if f is not None:
            break
    wrong = reset_config()
    if wrong:
        return {"ok": False, "idea": "tampering",
                "detail": f"the kernel's JAX configuration could not be reset ({', '.join(wrong)})."}
    if check in ("check_pure", "check_globals_unchanged"):  # the notebook's globals, not the fixture's
        kwargs.setdefault("namespace", _ns())
    try:
        f(fn, *args, **kwargs)
    except ExerciseFailure as exc:
        return {"ok": False, "idea": str(exc.idea), "detail": str(exc.detail)[:MESSAGE_LIMIT]}
    return {"ok": True, "idea": "", "detail": ""}


def _nonce_of(text: str):
    """The request's nonce, read without building its arguments (for a reply to a request
    whose arguments could not be built)."""
    try:
        items = json.loads(text).get("items", [])
        return next((v for k, v in items if k == "nonce" and isinstance(v, str)), None)
    except Exception:  # noqa: BLE001
        return None


def handle(text: str) -> dict:
    """Run one request (its JSON text) with the course's JAX semantics in force
    (:mod:`.config`) and return the reply (a dict of wire data)."""
    with course_semantics():
        built: list = []  # the judge's arrays, as the markers built them
        try:
            req = wire.decode(text, markers=_markers(built))
        except wire.WireError as exc:
            return {"refused": str(exc)[:MESSAGE_LIMIT], "nonce": _nonce_of(text)}
        except Exception as exc:  # noqa: BLE001 - a Ref not defined, building an argument (device_put...) failed
            return {"error": wire.error_data(exc), "nonce": _nonce_of(text)}
        if not isinstance(req, dict):
            return {"refused": "a request must be a dict"}
        watch.take()  # nothing a cell watched counts for this request
        reply = _run(req)
        if req.get("op") in ("call", "claim"):  # learner code ran on the judge's arrays
            reply.update(_receipts(built, req.get("name")))
            placed = watch.take()  # and on the arrays a fixture placed for it
            if placed:
                reply["watched"] = [[name, _readable(a)] for name, a in placed]
        return {**reply, "nonce": req.get("nonce")}


def _readable(a) -> bool:
    """Whether every buffer of the array ``a`` can still be read. A read, not ``is_deleted()``
    (which a cell could replace): a deleted (donated) buffer refuses every read."""
    try:
        if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            a = jax.random.key_data(a)
        shards = list(a.addressable_shards)
        for shard in shards:
            np.asarray(shard.data)
        return bool(shards)
    except Exception:  # noqa: BLE001 - deleted, or not an array any more
        return False


def _receipts(built, name) -> dict:
    """What became of the judge's arrays after learner code ran on them: ``{"kept": [bool, ...]}``
    (one per array the request's markers built, in their order: still readable), and where one
    is not, ``"params"``: the names of the callee's positional parameters (for the judge's
    message). The judge decides from it (:meth:`autograder.judge.Kernel.call`)."""
    kept = [_readable(a) for a in built]
    out: dict = {"kept": kept}
    if not all(kept):
        out["params"] = _param_names(name)
    return out


def _param_names(name) -> list:
    import inspect

    try:
        names = []
        for p in inspect.signature(_callee(name)).parameters.values():
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                break
            names.append(str(p.name)[:40])
        return names[:32]
    except Exception:  # noqa: BLE001 - no signature: the judge names the argument by position
        return []


def _run(req) -> dict:
    op = req.get("op")
    args = req.get("args") or ()
    kwargs = dict(req.get("kwargs") or {})
    try:
        if op == "get":
            return {"value": _lookup(req.get("name"))}
        fn = _callee(req.get("name"))
        statics = _statics(req)
        if op == "call":
            jax.config.update("jax_disable_jit", False)
            target = fn
            if req.get("jit"):  # cached: repeated calls do not retrace
                target = jit_once(("agent", req["name"], id(fn), *statics.values()), fn,
                                  lambda: jax.jit(fn, **statics))
            value = target(*args, **kwargs)
            reply = {"value": jax.block_until_ready(value) if _has_arrays(value) else value}
            if req.get("return_args"):  # the arguments as the call left them (in-place writes)
                reply["args"] = args
            return reply
        if op == "export":
            reset_config()
            try:
                # lowered for CPU, where the judge runs it
                exp = export.export(jax.jit(fn, **statics), platforms=("cpu",))(*args, **kwargs)
            except NotImplementedError as exc:  # JAX refuses to export host callbacks
                if "callback" in str(exc):
                    return {"callback": str(exc)[:MESSAGE_LIMIT]}
                raise
            try:
                blob = exp.serialize()
            except ImportError as exc:  # the grader's environment, not the learner's code
                return {"refused": f"jax.export cannot serialize here ({exc})"}
            return {"exported": base64.b64encode(bytes(blob)).decode("ascii")}
        if op == "claim":
            return {"claim": _claim(req, fn, args, kwargs)}
        return {"refused": f"unknown operation {str(op)[:40]!r}"}
    except wire.WireError as exc:
        return {"refused": str(exc)[:MESSAGE_LIMIT]}
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - learner code raised (exit() too): data for the judge
        return {"error": wire.error_data(exc)}


def _has_arrays(value) -> bool:
    try:
        return any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(value))
    except Exception:  # noqa: BLE001
        return False


def serve(text: str) -> None:
    """Run the request ``text`` and display the reply (JSON) under the private MIME type."""
    from IPython.display import display

    try:
        reply = handle(text)
        try:
            out = wire.encode(reply)
        except wire.WireError as exc:
            out = wire.encode({"nonce": reply.get("nonce"), "refused": f"the result is too big: {exc}"})
    except BaseException as exc:  # noqa: BLE001 - the judge always gets a reply
        out = wire.encode({"refused": f"the agent failed: {type(exc).__name__}: "
                                      f"{''.join(traceback.format_exception_only(exc))[:500]}"})
    display({wire.MIME: out}, raw=True)
