"""The data codec of the judge's channel to a learner's kernel (both sides use it).

Only data crosses the channel, as JSON text with tagged nodes; no pickle, no object arrays:

- ``None``, ``bool``, ``int``, ``str`` and finite ``float`` are themselves; a JSON list is a
  Python list; ``{"$": "tuple", "items": [...]}``, ``{"$": "dict", "items": [[key, value], ...]}``
  (string keys only), ``{"$": "float", "v": "nan" | "inf" | "-inf"}``;
- ``{"$": "nd", "dtype", "shape", "data"}``: a numeric NumPy array (base64 of its raw bytes, C
  order, little-endian); ``{"$": "np", "dtype", "data"}``: a NumPy scalar (``np.float32(1)``
  stays a ``np.float32``, not a Python float);
- from the kernel: ``{"$": "jax", "dtype", "shape", "data", "weak_type", "sharding"}`` (a
  ``jax.Array``, decoded as a :class:`KernelArray`), ``{"$": "keys", "impl", "data"}`` (typed
  PRNG keys, :class:`KernelKeys`), ``{"$": "opaque", "type"}`` (anything else, :class:`Opaque`:
  a comparison with it fails and names its type);
- to the kernel only, the *argument markers* (:data:`MARKERS`), which the agent turns into
  objects there: ``{"$": "as_jax" | "key" | "ref" | "fixture" | "sharded" | "spec", ...}``.

Decoding checks sizes before it reads or copies anything (:class:`Limits`); malformed or
oversized input raises :class:`WireError`. This module must import on JAX 0.7.2 too.
"""
from __future__ import annotations

import base64
import json
import math
import sys
from dataclasses import dataclass

import numpy as np

MIME = "application/x-autograder-judge"  # the agent's reply, a display_data of a JSON string

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64", "complex64", "complex128")


class WireError(ValueError):
    """Input the codec refuses: malformed, of a forbidden kind, or over a limit."""


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 64 * 2**20        # JSON text
    max_elements: int = 16 * 2**20     # elements of one array
    max_total_elements: int = 32 * 2**20
    max_depth: int = 48
    max_nodes: int = 200_000
    max_str: int = 1 * 2**20           # characters of one string
    max_ndim: int = 16


DEFAULT_LIMITS = Limits()


# --------------------------------------------------------------------------- judge-side kinds

class KernelArray(np.ndarray):
    """A ``jax.Array`` that came back from the kernel: its values, plus ``weak_type`` and
    ``sharding`` (``None`` or ``{"kind", "spec", "mesh": {"axis_names", "axis_sizes"}}``)."""

    weak_type = None
    sharding = None
    is_jax = True


@dataclass(frozen=True)
class KernelKeys:
    """Typed PRNG keys that came back from the kernel (``impl``: e.g. ``"threefry2x32"``)."""
    impl: str
    data: np.ndarray  # the key data, uint32

    @property
    def shape(self):
        return self.data.shape[: self.data.ndim - 1] if self.data.ndim else ()


@dataclass(frozen=True)
class Opaque:
    """A value the channel does not carry (a function, an object of a learner's class...)."""
    type: str

    def __repr__(self):
        return f"<a {self.type} object>"


# --------------------------------------------------------------------------- argument markers

@dataclass(frozen=True)
class AsJax:
    """``jnp.asarray(value, dtype)`` in the kernel (``dtype`` None: the value's own)."""
    value: object
    dtype: str | None = None


@dataclass(frozen=True)
class Key:
    """``jax.random.key(seed)`` (``impl`` None: the default) in the kernel."""
    seed: int
    impl: str | None = None


@dataclass(frozen=True)
class Ref:
    """The value of ``name`` in the notebook's namespace (e.g. ``BRANCHES``, a given function)."""
    name: str


@dataclass(frozen=True)
class Fixture:
    """The function ``name`` of :mod:`autograder.agent.fixtures`, for exercises that take functions."""
    name: str


@dataclass(frozen=True)
class Sharded:
    """``jax.device_put(value, NamedSharding(mesh, P(*spec)))`` on the 1-D ``"data"`` mesh
    (``devices`` of them, default 8) built by :mod:`autograder.meshes`."""
    value: object
    spec: tuple = ("data",)
    devices: int = 8


@dataclass(frozen=True)
class Spec:
    """``jax.ShapeDtypeStruct(shape, dtype)``: an abstract argument of ``export``."""
    shape: tuple
    dtype: str


MARKERS = (AsJax, Key, Ref, Fixture, Sharded, Spec)


def _mapped(tree, leaf):
    """``tree`` (tuples, lists and dicts) with ``leaf`` applied to each of its other values."""
    if isinstance(tree, tuple):
        return tuple(_mapped(v, leaf) for v in tree)
    if isinstance(tree, list):
        return [_mapped(v, leaf) for v in tree]
    if isinstance(tree, dict):
        return {k: _mapped(v, leaf) for k, v in tree.items()}
    return leaf(tree)


def as_jax(tree):
    """``tree`` with every NumPy array (or scalar) leaf wrapped in :class:`AsJax`: the kernel
    receives JAX arrays of the same dtypes (to send results back in, e.g. a threaded state)."""
    return _mapped(tree, lambda v: AsJax(np.asarray(v)) if isinstance(v, (np.ndarray, np.generic)) else v)


def values(tree):
    """``tree`` as the judge's references see it: :class:`AsJax` and :class:`Sharded` markers
    replaced by their NumPy values (in the marker's dtype), other leaves unchanged."""
    def value(v):
        if isinstance(v, AsJax):
            return np.asarray(values(v.value), dtype=_np_dtype(v.dtype) if v.dtype else None)
        return np.asarray(values(v.value)) if isinstance(v, Sharded) else v

    return _mapped(tree, value)


def error_data(exc: BaseException) -> dict:
    """A learner's exception as the kernel sends it: ``{"type", "mro", "message"}`` (names and
    text only; the judge rebuilds it from trusted classes, :mod:`autograder.judge.channel`)."""
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a learner exception whose __str__ fails
        message = ""
    return {"type": type(exc).__name__[:200], "mro": [c.__name__[:200] for c in type(exc).__mro__][:12],
            "message": message[:2000]}


# --------------------------------------------------------------------------- encoding

def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _dtype_name(dt: np.dtype) -> str | None:
    name = dt.name
    return name if name in DTYPES and dt.byteorder in "=<|" else None


def _nd(a: np.ndarray, tag="nd") -> dict:
    return {"$": tag, "dtype": a.dtype.name, "shape": list(a.shape), "data": _b64(a.tobytes(order="C"))}


def _sharding_info(s) -> dict | None:
    try:
        kind = type(s).__name__
        info = {"kind": kind, "devices": len(s.device_set)}
        if kind == "NamedSharding":
            info["spec"] = [list(p) if isinstance(p, tuple) else p for p in tuple(s.spec)]
            mesh = s.mesh
            info["mesh"] = {"axis_names": [str(n) for n in mesh.axis_names],
                            "axis_sizes": [int(n) for n in tuple(mesh.axis_sizes)]}
        return info
    except Exception:  # noqa: BLE001 - a description only
        return None


class _Budget:
    """What one encoding or decoding has used of its :class:`Limits` (values, array elements)."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.nodes = 0
        self.elements = 0

    def count(self, depth: int, elements: int = 0):
        self.nodes += 1
        self.elements += elements
        if depth > self.limits.max_depth:
            raise WireError(f"nested deeper than {self.limits.max_depth} levels")
        if self.nodes > self.limits.max_nodes:
            raise WireError(f"more than {self.limits.max_nodes} values")
        if self.elements > self.limits.max_total_elements:
            raise WireError(f"more than {self.limits.max_total_elements} array elements")


class _Encoder(_Budget):
    def array(self, a: np.ndarray, depth: int, tag="nd", extra=None):
        if _dtype_name(a.dtype) is None:
            return {"$": "opaque", "type": f"array of dtype {str(a.dtype)[:40]}"}
        self.count(depth, a.size)
        node = _nd(a, tag)  # little-endian: _dtype_name refuses the other order
        if extra:
            node.update(extra)
        return node

    def enc(self, x, depth=0):
        """Subclasses of the built-in types are read through the built-in's own methods."""
        if isinstance(x, MARKERS):
            return self.marker(x, depth)
        if isinstance(x, np.generic):  # before float and str: np.float64 and np.str_ subclass them
            dt = np.generic.__getattribute__(x, "dtype")
            if _dtype_name(dt) is None:
                return {"$": "opaque", "type": str(type(x).__name__)[:200]}
            self.count(depth, 1)
            return {"$": "np", "dtype": dt.name, "data": _b64(np.array(x, dtype=dt).tobytes())}
        if isinstance(x, np.ndarray):
            return self.array(np.ndarray.view(x, np.ndarray), depth)
        jax = sys.modules.get("jax")
        if jax is not None and isinstance(x, jax.Array):
            return self.jax_array(x, depth, jax)
        self.count(depth)
        if x is None or isinstance(x, bool):
            return x
        if isinstance(x, int):
            x = int.__index__(x)
            if x.bit_length() > 13_000:  # about 3,900 digits: JSON (Python's int-to-text limit) carries no more
                return {"$": "opaque", "type": f"int of about {int(x.bit_length() * 0.30103)} digits"}
            return x
        if isinstance(x, float):
            x = float.__float__(x)
            return x if math.isfinite(x) else {"$": "float", "v": repr(x)}
        if isinstance(x, str):
            x = str.__str__(x)
            if len(x) > self.limits.max_str:
                raise WireError(f"a string longer than {self.limits.max_str} characters")
            return x
        if isinstance(x, tuple):
            return {"$": "tuple", "items": [self.enc(v, depth + 1) for v in tuple.__iter__(x)]}
        if isinstance(x, list):
            return [self.enc(v, depth + 1) for v in list.__iter__(x)]
        if isinstance(x, dict):
            items = []
            for k, v in dict.items(x):
                if type(k) is not str:
                    return {"$": "opaque", "type": f"dict with a {type(k).__name__} key"}
                items.append([k, self.enc(v, depth + 1)])
            return {"$": "dict", "items": items}
        return {"$": "opaque", "type": str(getattr(type(x), "__qualname__", "object"))[:200]}

    def jax_array(self, x, depth, jax):
        if x.is_deleted():  # donated to a call: its buffer is gone, and saying so is the answer
            self.count(depth)
            return {"$": "opaque", "type": "deleted jax.Array"}
        dt = x.dtype
        if jax.dtypes.issubdtype(dt, jax.dtypes.prng_key):
            data = np.asarray(jax.random.key_data(x))
            self.count(depth, data.size)
            impl = jax.random.key_impl(x)
            return {**_nd(data, "keys"), "impl": getattr(impl, "name", str(impl))}
        try:
            weak = bool(getattr(x, "weak_type", False))
        except Exception:  # noqa: BLE001
            weak = None
        return self.array(np.asarray(x), depth, "jax",
                          {"weak_type": weak, "sharding": _sharding_info(getattr(x, "sharding", None))})

    def marker(self, m, depth):
        self.count(depth)
        if isinstance(m, AsJax):
            return {"$": "as_jax", "value": self.enc(m.value, depth + 1), "dtype": m.dtype}
        if isinstance(m, Key):
            return {"$": "key", "seed": int(m.seed), "impl": m.impl}
        if isinstance(m, Ref):
            return {"$": "ref", "name": str(m.name)}
        if isinstance(m, Fixture):
            return {"$": "fixture", "name": str(m.name)}
        if isinstance(m, Sharded):
            return {"$": "sharded", "value": self.enc(np.asarray(m.value), depth + 1),
                    "spec": [list(p) if isinstance(p, tuple) else p for p in m.spec],
                    "devices": int(m.devices)}
        if isinstance(m, Spec):
            return {"$": "spec", "shape": [int(n) for n in m.shape], "dtype": str(m.dtype)}
        raise WireError(f"unknown marker {type(m).__name__}")


def encode(value, *, limits: Limits = DEFAULT_LIMITS) -> str:
    """``value`` as the channel's JSON text; raises :class:`WireError` over a limit."""
    text = json.dumps(_Encoder(limits).enc(value), allow_nan=False, separators=(",", ":"))
    if len(text) > limits.max_bytes:
        raise WireError(f"{len(text)} bytes, more than the limit of {limits.max_bytes}")
    return text


# --------------------------------------------------------------------------- decoding

def _np_dtype(name) -> np.dtype:
    if not isinstance(name, str) or name not in DTYPES:
        raise WireError(f"dtype {str(name)[:40]!r} is not a numeric dtype the channel carries")
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name).newbyteorder("<")


def _refuse_constant(name):
    raise WireError(f"{name} is not valid JSON here")


class _Decoder(_Budget):
    def __init__(self, limits: Limits, markers):
        super().__init__(limits)
        self.markers = markers  # None (the judge): markers are refused

    def raw(self, node, shape) -> np.ndarray:
        dtype = _np_dtype(node.get("dtype"))
        if not isinstance(shape, list) or len(shape) > self.limits.max_ndim or not all(
                type(n) is int and 0 <= n <= self.limits.max_elements for n in shape):
            raise WireError(f"bad array shape {str(shape)[:80]}")
        n = math.prod(shape)
        if n > self.limits.max_elements:
            raise WireError(f"an array of {n} elements, more than {self.limits.max_elements}")
        self.elements += n
        if self.elements > self.limits.max_total_elements:
            raise WireError(f"more than {self.limits.max_total_elements} array elements in all")
        data = node.get("data")
        nbytes = n * dtype.itemsize
        if not isinstance(data, str) or len(data) != 4 * ((nbytes + 2) // 3):
            raise WireError(f"array data of the wrong length for shape {shape} and dtype {dtype.name}")
        try:
            raw = base64.b64decode(data, validate=True)
        except ValueError as exc:  # binascii.Error is one
            raise WireError(f"array data is not base64: {exc}") from None
        if len(raw) != nbytes:
            raise WireError("array data of the wrong length")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))

    def dec(self, node, depth=0):
        self.count(depth)
        if node is None or isinstance(node, (bool, int, float)):
            return node
        if isinstance(node, str):
            if len(node) > self.limits.max_str:
                raise WireError(f"a string longer than {self.limits.max_str} characters")
            return node
        if isinstance(node, list):
            return [self.dec(v, depth + 1) for v in node]
        if not isinstance(node, dict) or not isinstance(node.get("$"), str):
            raise WireError("an untagged JSON object")
        tag = node["$"]
        if tag == "tuple":
            return tuple(self.dec(v, depth + 1) for v in self.items(node))
        if tag == "dict":
            out = {}
            for pair in self.items(node):
                if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], str):
                    raise WireError("a dict entry that is not a [str key, value] pair")
                out[pair[0]] = self.dec(pair[1], depth + 1)
            return out
        if tag == "float":
            v = node.get("v")
            if v not in ("nan", "inf", "-inf"):
                raise WireError("a bad special float")
            return float(v)
        if tag == "nd":
            return self.raw(node, node.get("shape"))
        if tag == "np":
            return self.raw(node, [])[()]
        if tag == "jax":
            a = self.raw(node, node.get("shape")).view(KernelArray)
            a.weak_type = node.get("weak_type") if isinstance(node.get("weak_type"), bool) else None
            a.sharding = self.plain(node.get("sharding"), depth + 1)
            return a
        if tag == "keys":
            impl = node.get("impl")
            return KernelKeys(impl if isinstance(impl, str) else "", self.raw(node, node.get("shape")))
        if tag == "opaque":
            return Opaque(str(node.get("type", "object"))[:200])
        if self.markers is not None and tag in self.markers:
            return self.markers[tag](self, node, depth)
        raise WireError(f"unknown node kind {tag[:40]!r}")

    def items(self, node):
        items = node.get("items")
        if not isinstance(items, list):
            raise WireError("a container without items")
        return items

    def plain(self, node, depth):
        """A JSON description (the sharding of an array): plain JSON, counted, depth-capped."""
        self.count(depth)
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.plain(v, depth + 1) for v in node]
        if isinstance(node, dict):
            return {str(k): self.plain(v, depth + 1) for k, v in node.items()}
        raise WireError("a bad description")


def decode(text, *, limits: Limits = DEFAULT_LIMITS, markers=None):
    """The value encoded in ``text``. ``markers`` (kernel side only) maps a marker's tag to a
    builder ``(decoder, node, depth) -> object``; the judge passes none, so a reply holding a
    marker is refused. Raises :class:`WireError`, never anything else, for bad input."""
    if not isinstance(text, str):
        raise WireError(f"expected JSON text, got {type(text).__name__}")
    if len(text) > limits.max_bytes:
        raise WireError(f"{len(text)} bytes, more than the limit of {limits.max_bytes}")
    try:
        return _Decoder(limits, markers).dec(json.loads(text, parse_constant=_refuse_constant))
    except WireError:
        raise
    except RecursionError:
        raise WireError("nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise WireError(f"not valid JSON: {str(exc)[:200]}") from None
    except (ValueError, TypeError, KeyError, AttributeError, MemoryError) as exc:
        raise WireError(f"malformed: {type(exc).__name__}: {str(exc)[:200]}") from None
