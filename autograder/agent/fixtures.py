"""Functions the judge passes to exercises that take functions (``primitive_names(f, *args)``,
``honest_time(f, ...)``), by name: ``autograder.wire.Fixture("sin_times_two")``.

Trusted code: the agent resolves a fixture only to a function defined in this module. Add the
functions a judge file needs here (plain JAX, no state).
"""
from __future__ import annotations

import base64
import contextlib
import io
import math
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import export, lax
from jax.sharding import NamedSharding, PartitionSpec as P

from .. import wire
from ..compilation import CompileCounter
from ..device import honest_time
from ..meshes import make_mesh, mesh_devices, mesh_shape
from ..timing import SimulatedDevice
from .config import reset_config


def sin_times_two(x):
    """``sin(x) * 2``: primitives ``sin`` and ``mul``."""
    return jnp.sin(x) * 2


def matmul_tanh(a, b):
    """``tanh(a @ b)``: primitives ``dot_general`` and ``tanh``."""
    return jnp.tanh(a @ b)


# --------------------------------------------------------------------------- 01_phases
# Functions given to ``primitive_names(f, *args)``; the judge traces the same function itself
# (``jax.make_jaxpr``) and compares the top-level primitive names in order.

def sin_sin_plus_cos(x):
    """``sin(sin(x)) + cos(x)``: a primitive applied twice."""
    return jnp.sin(jnp.sin(x)) + jnp.cos(x)


def exp_times_minus(x, y):
    """``exp(x) * y - x`` (two arguments)."""
    return jnp.exp(x) * y - x


def tanh_matmul_transpose(x):
    """``tanh(x) @ x.T``."""
    return jnp.tanh(x) @ x.T


def identity(x):
    """No primitive at all."""
    return x


def _cos_times(x):
    return jnp.cos(x) * x


def nested_jit(x):
    """A jitted inner function called twice: at the top level, each call is one ``jit`` (or
    ``pjit``) equation; its ``cos`` and ``mul`` live in the nested jaxpr."""
    inner = jax.jit(_cos_times)
    return jnp.sin(inner(x)) + inner(x)


def cond_then_exp(x, p):
    """``exp(cond(p > 0, sin, cos, x)) * 2``: the branches are nested jaxprs."""
    return jnp.exp(lax.cond(p > 0, jnp.sin, jnp.cos, x)) * 2


def _cumsum_tanh_step(c, v):
    c = c + v
    return c, jnp.tanh(c)


def scan_cumsum_tanh(xs):
    """A ``lax.scan`` over the rows of ``xs``: the body is a nested jaxpr."""
    total, ys = lax.scan(_cumsum_tanh_step, jnp.zeros_like(xs[0]), xs)
    return ys * total


def with_constants(x):
    """A NumPy constant captured at trace time (a constant, not an equation) and arrays built
    inside (``iota``, ``broadcast_in_dim``); ``x`` has shape (3,)."""
    w = np.linspace(-1.0, 1.0, 3).astype(np.float32)
    return (x * w + jnp.arange(3.0)) @ jnp.ones((3,))


# Kernel-side helpers for claims of 01_phases and 02_static_dynamic.

_JITS: dict = {}


def _jit_once(key, f, make):
    """``make()`` (a jitted ``f``), made on the first call for ``key`` and reused while ``key``
    still names the same ``f`` (keys hold ``id(f)``, which a new object may take)."""
    hit = _JITS.get(key)
    if hit is None or hit[0] is not f:
        hit = _JITS[key] = (f, make())
    return hit[1]


def jit_call(f, *args, **static):
    """``jax.jit`` of a wrapper of ``f`` of its own, made on the first call for this ``f`` (and
    these static names) and reused after it: its first call traces afresh (a Python ``print``
    in ``f`` shows a tracer then) even if ``f`` was jitted before, later calls reuse the
    compiled program. Keyword arguments are static (``static_argnames``: a new value traces
    again), as 04's ``steps`` and 05's ``num_segments``; positional ones are traced."""
    names = tuple(sorted(static))
    jitted = _jit_once(("call", id(f), names), f,
                       lambda: jax.jit(lambda *a, **kw: f(*a, **kw), static_argnames=names or None))
    return jitted(*args, **static)


def compiles_per_call(f, calls):
    """``f(*args)`` for each of ``calls`` (tuples of positional arguments), called directly,
    JAX's caches cleared first: how many XLA compiles each call made (a list of ints). A
    function that builds a new ``jax.jit`` at every call compiles on every call; one that
    reuses its program compiles on the first call only."""
    jax.clear_caches()
    counts = []
    for args in calls:
        with CompileCounter(fresh=False) as counter:
            jax.block_until_ready(f(*args))
        counts.append(counter.compiles)
    return counts


def is_jitted(f):
    """Whether ``f`` is a jitted function (it has ``lower``)."""
    return bool(callable(getattr(f, "lower", None)))


def printed_call(f, *args):
    """``jit_call(f, *args)`` with what it printed: ``{"value": result, "printed": text}``, the
    text including ``jax.debug`` callbacks (waited for). The judge reads the numbers in the text
    itself: the first call of a wrapper traces (a Python ``print`` shows a tracer), later ones
    run the compiled program only (only a run-time print shows anything)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        out = jit_call(f, *args)
        jax.block_until_ready(out)
        jax.effects_barrier()
    return {"value": out, "printed": buf.getvalue()[-20000:]}


# --------------------------------------------------------------------------- 09_sharding
# Fixtures that call a learner function themselves (the agent calls a fixture in place of a
# notebook function when the judge sends ``Fixture(name)`` as the callee): they build the
# kernel-side objects the call needs (meshes, ``jax.set_mesh``) and return data only: the
# output, and where its pieces live as device ids and index ranges, for the judge to check.

def _mesh(shape, names, kind="auto", order=None):
    """A mesh of the first ``prod(shape)`` mesh devices, in ``order`` (indices) if given."""
    devices = list(mesh_devices(math.prod(shape)))
    if order is not None:
        devices = [devices[int(i)] for i in order]
    return make_mesh(tuple(shape), tuple(names), kind, devices=devices)


def _ids(mesh) -> list:
    return [int(d.id) for d in mesh.devices.flat]


def placement(a):
    """Where the pieces of ``a`` live: ``[[device id, [[start, stop] per dimension]], ...]``
    sorted by device id (``None`` for a value that is not a ``jax.Array``)."""
    if not isinstance(a, jax.Array):
        return None
    out = []
    for device, index in a.sharding.devices_indices_map(a.shape).items():
        ranges = [[int(s.indices(n)[0]), int(s.indices(n)[1])] for s, n in zip(index, a.shape)]
        out.append([int(device.id), ranges])
    return sorted(out)


def _described(out, mesh):
    """The output with its placement, the mesh's device ids and the ids of the output's own
    mesh (when it has a ``NamedSharding``)."""
    own = getattr(getattr(out, "sharding", None), "mesh", None)
    return {"out": out, "placement": placement(out), "mesh": _ids(mesh),
            "out_mesh": _ids(own) if hasattr(own, "devices") else None}


def shard_rows_on(f, x, order):
    """``f(x, mesh)`` for the 1-D ``"data"`` mesh (automatic axis) of 8 devices in ``order``."""
    mesh = _mesh((8,), ("data",), "auto", order)
    return _described(f(x, mesh), mesh)


def explicit_matmul_on(f, x, w, jit, exported=False):
    """Under ``jax.set_mesh`` of the 2-D explicit mesh ``("data", "model")`` of 8 devices:
    ``x`` placed as P("data", "model"), ``w`` as P("model", None), then ``f(x, w)`` (or
    ``jax.jit(f)(x, w)``). Also returns the sharding spec in the output's type, and with
    ``exported`` the ``jax.export`` of ``jax.jit(f)`` at those arguments (base64), which the judge
    runs on its own explicit mesh."""
    mesh = _mesh(mesh_shape(8, 2), ("data", "model"), "explicit")
    with jax.set_mesh(mesh):
        xs = jax.device_put(x, NamedSharding(mesh, P("data", "model")))
        ws = jax.device_put(w, NamedSharding(mesh, P("model", None)))
        out = (jax.jit(f) if jit else f)(xs, ws)
        blob = _export_cpu(jax.jit(f), xs, ws) if exported else None
    result = _described(out, mesh)
    if blob is not None:
        result["exported"] = blob
    aval = jax.typeof(out) if isinstance(out, jax.Array) else None
    spec = getattr(getattr(aval, "sharding", None), "spec", None)
    result["type_spec"] = None if spec is None else [list(p) if isinstance(p, tuple) else p for p in spec]
    result["type"] = None if aval is None else str(aval.str_short() if hasattr(aval, "str_short") else aval)
    result["mesh_shape"] = [int(n) for n in mesh.devices.shape]
    return result


def global_mean_on(f, x, jit, exported):
    """``f(x, mesh)`` (or ``jax.jit`` of it) for ``x`` placed with its rows over the 1-D
    ``"data"`` mesh of 8 devices; with ``exported``, also ``jax.export`` of
    ``jax.jit(lambda a: f(a, mesh))`` at that ``x`` (base64 of the serialized module), for the
    judge to read (``shard_map``, collectives) and run on its own devices."""
    mesh = _mesh((8,), ("data",), "auto")
    xs = jax.device_put(x, NamedSharding(mesh, P("data")))
    out = jax.jit(lambda a: f(a, mesh))(xs) if jit else f(xs, mesh)
    result = {"out": out}
    if exported:
        result["exported"] = _export_cpu(jax.jit(lambda a: f(a, mesh)), xs)
    return result


def tp_mlp_on(f, x, w1, w2, exported):
    """``f(x, w1, w2, mesh)`` on the 2 x 4 mesh ``("data", "model")`` of automatic axes, with
    ``x`` placed as P("data", None), ``w1`` as P(None, "model") and ``w2`` as P("model", None)
    (09's ``tp_mlp``); with ``exported``, also ``jax.export`` of ``jax.jit(lambda x, w1, w2:
    f(x, w1, w2, mesh))`` at those arguments (base64), which the judge reads, compiles and runs
    on its own mesh."""
    mesh = _mesh(mesh_shape(8, 2), ("data", "model"), "auto")
    args = [jax.device_put(a, NamedSharding(mesh, spec))
            for a, spec in ((x, P("data", None)), (w1, P(None, "model")), (w2, P("model", None)))]
    out = f(*args, mesh)
    result = _described(out, mesh)
    result["mesh_shape"] = [int(n) for n in mesh.devices.shape]
    if exported:
        # the arguments' placements are part of the program, so the judge's runner places them alike
        result["exported"] = _export_cpu(jax.jit(lambda a, b, c: f(a, b, c, mesh),
                                                 in_shardings=tuple(a.sharding for a in args)), *args)
    return result


def _export_cpu(jitted, *args) -> str:
    """``jax.export`` of ``jitted`` at ``args``, lowered for CPU (where the judge runs it,
    whatever devices the kernel's mesh has), as base64 of the serialized module."""
    reset_config()
    exp = export.export(jitted, platforms=("cpu",))(*args)
    return base64.b64encode(bytes(exp.serialize())).decode("ascii")


def keys_equal(f, xs):
    """``f`` applied to each of ``xs``; ``{"equal": [[f(a) == f(b)]], "same_hash": [[hash(f(a))
    == hash(f(b))]]}`` for every pair, compared here because the keys may be any hashable
    objects (a dtype, a sharding...) that the channel does not carry."""
    keys = [f(x) for x in xs]
    hashes = [hash(k) for k in keys]
    return {"equal": [[bool(a == b) for b in keys] for a in keys],
            "same_hash": [[ha == hb for hb in hashes] for ha in hashes]}


# --------------------------------------------------------------------------- 06_async_dispatch
# Fixtures that drive a learner's timer (``honest_time(f, *args, repeats)``) with functions
# whose true cost is known here, and return what happened as data: the number the timer
# reported, every call it made, when each result was first waited for, the time it took.

def honest_timer_on(timer, args, repeats, first_s, cycle_s, compile_s):
    """``timer(sim, *args[, repeats=repeats])`` for a fresh :class:`autograder.timing.
    SimulatedDevice` (results ready only ``cycle_s`` seconds after the call returns, the first
    call slow like a compile). Returns ``{"seconds": what the timer returned, "calls": repr of
    each call's (args, kwargs), "waited": for each call, how many calls had been made when its
    result was first waited for (None: never), "durations": each call's work in seconds,
    "course_timer": whether the course's ``ag.honest_time`` made any of the calls}``."""
    sim = SimulatedDevice(float(first_s), [float(c) for c in cycle_s], float(compile_s))
    helper = []

    def timed(*a, **kw):
        helper.append(_in_course_timer())
        return sim(*a, **kw)

    kwargs = {} if repeats is None else {"repeats": repeats}
    seconds = timer(timed, *args, **kwargs)
    if type(seconds).__module__.startswith("autograder"):  # e.g. f's own result handed back
        seconds = f"a {type(seconds).__name__}"
    return {"seconds": seconds, "calls": [repr(c)[:200] for c in sim.calls],
            "waited": [r.waited_after_calls for r in sim.results],
            "durations": [sim.duration(k) for k in range(len(sim.calls))],
            "course_timer": any(helper)}


def _in_course_timer() -> bool:
    """Whether the course's own ``ag.honest_time`` is on the call stack (by its code object,
    however the learner reached or renamed it): a timer that hands its job to it."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is honest_time.__code__:
            return True
        frame = frame.f_back
    return False


def logged_on(fn, n_steps, every):
    """``fn(step, params, batches, every)`` with a simulated jitted ``step``: each call returns
    ``(params, loss)`` at once, the loss a :class:`autograder.timing.SimulatedResult` worth its
    call's index and ready 5 ms later. Returns ``{"params": what fn returned as params,
    "losses": its losses, "calls": the batch each call got, "waited": for each call's loss,
    how many calls had been made when it was first waited for (None: never)}``."""
    sim = SimulatedDevice(0.005, [0.005])

    def step(params, batch):
        return params + 1, sim(batch)

    params, losses = fn(step, 0, list(range(100, 100 + int(n_steps))), every)
    if isinstance(losses, (list, tuple)):
        losses = [v if isinstance(v, (int, float)) else f"a {type(v).__name__}" for v in losses]
    return {"params": params, "losses": losses, "calls": [c[0][0] for c in sim.calls],
            "waited": [r.waited_after_calls for r in sim.results]}


def slow_compile_timed(timer, x, repeats, trace_s):
    """``timer(jax.jit(work), x, repeats=repeats)`` for a fresh ``work`` (``sin(x) * 2``) that
    sleeps ``trace_s`` seconds each time it is traced, a stand-in for a long compile.
    Returns ``{"seconds": the timer's result, "traces": how often work was traced,
    "course_timer": whether the course's ``ag.honest_time`` traced it}``."""
    traced = []
    helper = []

    def work(a):
        traced.append(1)
        helper.append(_in_course_timer())
        time.sleep(float(trace_s))  # runs only while tracing
        return jnp.sin(a) * 2

    seconds = timer(jax.jit(work), x, repeats=repeats)
    return {"seconds": seconds, "traces": len(traced), "course_timer": any(helper)}


def jit_traces(f, calls):
    """:func:`jit_static_traces` with nothing static, ``calls`` tuples of positional arguments."""
    return jit_static_traces(f, (), [(args, {}) for args in calls])


# --------------------------------------------------------------------------- 07_pytrees
# A learner's pytree class (``Linear``) cannot cross the channel, so these fixtures build the
# instances in the kernel from data (``Ref("Linear")`` and arrays) and return data: outputs,
# leaves (a non-array leaf comes back as itself or as an opaque object), and treedef equality
# compared here (treedefs do not cross the channel). A learner exception at a step is returned
# as ``{"failed_at": step, "error": {type, mro, message}}`` with the steps done before it.

def linear_report(cls, w, b, activation, x, keyword):
    """Build ``cls(w, b, activation)`` (by keyword if ``keyword``) and report, step by step:
    ``out`` (layer(x)); ``leaves`` and ``self_leaf`` (the layer is its own only leaf: not
    registered); ``structure`` (its treedef as text); the flatten/unflatten round trip
    (``same_type``, ``same_structure``, ``back_out``); ``jit_out`` (a jitted apply);
    the gradient of ``sum(layer(x) ** 2)`` under jit (``grad_leaves``, ``grad_same_structure``,
    ``grad_structure``); ``map_same_structure`` (``jax.tree.map`` keeps the structure)."""
    report = {}
    step = "build"
    try:
        layer = cls(w=w, b=b, activation=activation) if keyword else cls(w, b, activation)
        step = "out"
        report["out"] = layer(x)
        step = "leaves"
        leaves, treedef = jax.tree.flatten(layer)
        report["self_leaf"] = len(leaves) == 1 and leaves[0] is layer
        report["leaves"] = leaves
        report["structure"] = str(treedef)[:300]
        step = "round_trip"
        back = jax.tree.unflatten(treedef, leaves)
        report["same_type"] = type(back) is type(layer)
        report["same_structure"] = bool(jax.tree.structure(back) == treedef)
        report["back_out"] = back(x)
        step = "jit"
        report["jit_out"] = jax.jit(lambda l, a: l(a))(layer, x)
        step = "grad"
        g = jax.jit(jax.grad(lambda l, a: jnp.sum(l(a) ** 2)))(layer, x)
        report["grad_same_structure"] = bool(jax.tree.structure(g) == treedef)
        report["grad_structure"] = str(jax.tree.structure(g))[:300]
        report["grad_leaves"] = jax.tree.leaves(g)
        step = "tree_map"
        zero = jax.tree.map(lambda a: a * 0, layer)
        report["map_same_structure"] = bool(jax.tree.structure(zero) == treedef)
    except Exception as exc:  # noqa: BLE001 - learner code raised: data for the judge
        report["failed_at"] = step
        report["error"] = wire.error_data(exc)
    return report


def linear_structures(cls, w, b, x):
    """Four layers: relu (w, b), relu (2w, b+1), tanh (w, b), tanh (w, 3b). Returns
    ``relu_tanh_equal`` and ``relu_relu_equal`` (treedef equality), ``outs`` (each layer
    through one jitted apply, in that order) and ``traces`` (how often that apply traced)."""
    report = {}
    step = "build"
    try:
        layers = [cls(w, b, "relu"), cls(w * 2, b + 1, "relu"), cls(w, b, "tanh"), cls(w, b * 3, "tanh")]
        step = "structure"
        s = [jax.tree.structure(layer) for layer in layers]
        report["relu_tanh_equal"] = bool(s[0] == s[2])
        report["relu_relu_equal"] = bool(s[0] == s[1])
        step = "jit"
        traced = []

        def apply(layer, a):
            traced.append(1)
            return layer(a)

        jitted = jax.jit(apply)
        report["outs"] = [jax.block_until_ready(jitted(layer, x)) for layer in layers]
        report["traces"] = len(traced)
    except Exception as exc:  # noqa: BLE001
        report["failed_at"] = step
        report["error"] = wire.error_data(exc)
    return report


def linear_program(cls, activation, keyword, w, b, x):
    """Traced, never called: the judge exports it (``cls``, ``activation`` and ``keyword``
    static; ``w``, ``b`` and ``x`` traced) and runs the program on its own arrays. The layer is
    built from the traced ``w`` and ``b`` (by keyword if ``keyword``); returns ``out``
    (``layer(x)``), ``leaves`` (``jax.tree.leaves(layer)``: its children, which must be ``w``
    and ``b``), ``back_out`` (the layer rebuilt by ``jax.tree.unflatten``, applied to ``x``),
    ``jit_out`` (a jitted apply) and ``grad_leaves`` (the leaves of the gradient of
    ``sum(layer(x) ** 2)`` with respect to the layer)."""
    layer = cls(w=w, b=b, activation=activation) if keyword else cls(w, b, activation)
    leaves, treedef = jax.tree.flatten(layer)
    grads = jax.grad(lambda l, a: jnp.sum(l(a) ** 2))(layer, x)
    return {"out": layer(x), "leaves": leaves, "back_out": jax.tree.unflatten(treedef, leaves)(x),
            "jit_out": jax.jit(lambda l, a: l(a))(layer, x), "grad_leaves": jax.tree.leaves(grads)}


def linear_structures_program(cls, w, b, x):
    """Traced, never called (``cls`` static): four layers, relu (w, b), relu (2w, b+1), tanh
    (w, b), tanh (w, 3b), each applied to ``x`` by ONE ``jax.jit`` of ``layer(x)``, made here;
    returns the four outputs. A jitted function called inside a traced one is a call of a
    function of the program, one function per trace: the judge reads which function each of
    the four calls calls (a tree structure per activation: two functions, the relu layers
    sharing one and the tanh layers the other) and what each is given (the layer's leaves and
    ``x``), from the program (:meth:`autograder.judge.programs.Program.calls`)."""
    layers = [cls(w, b, "relu"), cls(w * 2, b + 1, "relu"), cls(w, b, "tanh"), cls(w, b * 3, "tanh")]
    apply = jax.jit(lambda layer, a: layer(a))
    return [apply(layer, x) for layer in layers]


# --------------------------------------------------------------------------- 05_shapes

def call_each(f, args_list):
    """``[f(*args) for args in args_list]`` in one request (05's ``bucket_length`` over every
    length 1..256: one round trip instead of 256). The judge still checks every value."""
    return [f(*args) for args in args_list]


# --------------------------------------------------------------------------- 08_prng, 10_review

def threefry_jit_call(f, partitionable, *args):
    """``jax.jit(f)(*args)`` with ``jax_threefry_partitionable`` set to ``partitionable`` for this
    call only (put back after): ``jax.random.split(key, n)[i]`` depends on ``n`` when the flag is
    off, so a function whose row keys come from one split shows it there. One jit wrapper per
    ``f`` (the flag is part of its cache key: each setting traces once)."""
    jitted = _jit_once(("threefry", id(f)), f, lambda: jax.jit(lambda *a: f(*a)))
    old = jax.config.jax_threefry_partitionable
    jax.config.update("jax_threefry_partitionable", bool(partitionable))
    try:
        return jax.block_until_ready(jitted(*args))
    finally:
        jax.config.update("jax_threefry_partitionable", old)


def jit_static_traces(f, static_argnames, calls):
    """``jax.jit`` (``static_argnames`` static) of a counting wrapper of ``f``, called on each of
    ``calls`` (``(args, kwargs)`` pairs): ``{"outs": [each result], "traces": how often f's body
    ran}`` (a new key or a new traced value must not trace again)."""
    traced = []

    def counted(*args, **kwargs):
        traced.append(1)
        return f(*args, **kwargs)

    jitted = jax.jit(counted, static_argnames=tuple(str(n) for n in static_argnames) or None)
    outs = [jax.block_until_ready(jitted(*args, **kwargs)) for args, kwargs in calls]
    return {"outs": outs, "traces": len(traced)}


def trace_static(f, static_argnames, *args, **kwargs):
    """Trace ``jax.jit(f, static_argnames=...)`` on the arguments, without compiling (JAX's
    key-reuse checker inspects the program while it is traced). Returns nothing."""
    jax.jit(f, static_argnames=tuple(str(n) for n in static_argnames) or None).trace(*args, **kwargs)


# --------------------------------------------------------------------------- 01_phases: count_primitives
# Functions given to ``count_primitives(f, *args)`` (judge_count_primitives.py traces the same
# function itself and counts every nested jaxpr's equations): jit, cond, while_loop, fori_loop,
# scan and custom_jvp, nested up to three levels. Only traced, never run; every loop ends.

def _cp_softclip():
    """A ``custom_jvp`` function (``2 tanh(x / 2)`` with its own derivative rule)."""
    @jax.custom_jvp
    def softclip(x):
        return 2.0 * jnp.tanh(x / 2.0)

    @softclip.defjvp
    def _softclip_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        y = softclip(x)
        return y, t * (1.0 - y * y / 4.0)

    return softclip


def cp_jit_cond(x, p):
    """A jitted function whose body is a ``cond`` with two different branches, then ``+ x``."""
    inner = jax.jit(lambda v, q: lax.cond(q > 0, lambda u: jnp.sin(u) * 2.0, lambda u: jnp.exp(u) - u, v))
    return inner(x, p) + x


def cp_scan_while_cond(xs):
    """A ``scan`` over the rows of ``xs`` whose body runs a ``while_loop`` (three trips) whose
    body is a ``cond``: three levels."""
    def while_body(state):
        i, v = state
        v = lax.cond(jnp.sum(v) > 0, lambda u: u * 0.5, lambda u: jnp.abs(u) + 1.0, v)
        return i + 1, v

    def scan_body(carry, row):
        _, v = lax.while_loop(lambda s: s[0] < 3, while_body, (0, row + carry))
        return carry + jnp.mean(v), jnp.tanh(v)

    total, ys = lax.scan(scan_body, jnp.zeros((), xs.dtype), xs)
    return ys * total


def cp_jit_fori_custom_jvp(x):
    """A jitted function with a ``fori_loop`` (fixed trip count) whose body calls a
    ``custom_jvp`` function: three levels, the custom_jvp's own jaxpr a fourth."""
    softclip = _cp_softclip()

    @jax.jit
    def inner(v):
        return lax.fori_loop(0, 4, lambda i, u: softclip(u * 1.5) + jnp.cos(u), v)

    return inner(x) * 2.0


def cp_while_fori_traced(x, n):
    """A ``while_loop`` whose condition has primitives of its own and whose body runs a
    ``fori_loop`` to a traced bound ``n`` (a while loop itself) calling a jitted function."""
    step = jax.jit(lambda u: jnp.sin(u) + 0.5)

    def body(state):
        i, v = state
        return i + 1, lax.fori_loop(0, n, lambda j, u: step(u) * 0.9, v)

    def cond(state):
        i, v = state
        return jnp.logical_and(i < 2, jnp.max(jnp.abs(v)) < 100.0)

    return lax.while_loop(cond, body, (0, x))[1]


def cp_shared_branches(x, p):
    """The same jitted function in both branches of a ``cond`` and once more outside: one
    nested jaxpr held in three places."""
    g = jax.jit(lambda u: jnp.exp(-u * u))
    return lax.cond(p > 0, lambda v: g(v) + 1.0, lambda v: g(v) * v, x) + g(x)


def cp_custom_jvp_in_cond_in_scan(xs, p):
    """A ``scan`` whose body has a ``cond`` whose first branch calls a ``custom_jvp``
    function and a jitted one: three levels and more."""
    softclip = _cp_softclip()
    h = jax.jit(lambda u: u * u - 1.0)

    def body(c, row):
        y = lax.cond(p > 0, lambda r: softclip(h(r)), lambda r: r - c, row)
        return c + jnp.sum(y), y

    return lax.scan(body, jnp.zeros((), xs.dtype), xs)[1]


# --------------------------------------------------------------------------- 02_static_dynamic: apply_layer

def layer_with_config(f, x, scale, shift, activation, depth):
    """``f(x, config)`` with the config built here: ``scale`` and ``shift`` traced when this is
    traced (``activation`` and ``depth`` static), for exporting ``apply_layer``."""
    return f(x, {"activation": activation, "depth": depth, "scale": scale, "shift": shift})


# --------------------------------------------------------------------------- 03_purity: adam_step
# The optimizer state is whatever adam_init returns (any pytree, NamedTuples included): it never
# leaves the kernel; these chain it there. Traced (exported) or called; each returns data.

def leaves_of(f, *args):
    """The leaves of ``f(*args)`` (``jax.tree_util.tree_leaves``, a list): a learner's own pytree
    class, which cannot cross the channel, stays in the kernel and its arrays come back."""
    return jax.tree_util.tree_leaves(f(*args))


def adam_run(init, step, params, grads, lrs):
    """``state = init(params)``, then ``params, state = jax.jit(step)(params, g, state, lr)``
    for each ``g, lr`` of ``grads, lrs``: the params after every step (a list). Exported by the
    judge (``init`` and ``step`` static) and run on its own inputs; the inner jit traces ``step``
    once for steps of one signature, as a training loop would (a step count kept in a global is
    then baked in)."""
    jitted = jax.jit(step)
    state = init(params)
    out = []
    for g, lr in zip(grads, lrs):
        params, state = jitted(params, g, state, lr)
        out.append(params)
    return out


def adam_jit_run(init, step, params, grads, lrs):
    """:func:`adam_run` with a counting wrapper of ``step``: ``{"outs": the params after every
    step, "traces": how often step's body was traced}``."""
    traced = []

    def counted(*args):
        traced.append(1)
        return step(*args)

    outs = jax.block_until_ready(adam_run(init, counted, params, grads, lrs))
    return {"outs": outs, "traces": len(traced)}


def adam_twice(init, step, params, grads, lr):
    """``step`` called twice, unjitted, on the same inputs (the state from ``init``):
    ``{"first", "second"}``: each call's ``(new params, new state leaves)``; ``"after"``: the
    inputs as the calls left them (params, grads, the state's leaves) and ``"fresh"``: the
    leaves of a new ``init(params)``, to see writes into an input."""
    state = init(params)
    first = step(params, grads, state, lr)
    second = step(params, grads, state, lr)
    leaves = jax.tree_util.tree_leaves
    return {"first": [first[0], leaves(first[1])], "second": [second[0], leaves(second[1])],
            "after": [params, grads, leaves(state)], "fresh": leaves(init(params))}
