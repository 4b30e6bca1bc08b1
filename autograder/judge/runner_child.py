"""The program runner's contained child: the process that runs learner programs, never the grader.

:class:`autograder.judge.runner.ProgramRunner` starts it
(``python -s -P -m autograder.judge.runner_child serve``, contained as that module's docstring
says) and talks to it over its standard input and output, framed by :mod:`.runner_frames` (as :mod:`.runner` frames them):
each request holds a serialized ``jax.export`` program and its inputs as flat arrays, each reply
the output arrays only, both :mod:`autograder.wire` data (nothing is pickled). :func:`serve`
places the inputs on the program's mesh of virtual CPU devices
(:data:`autograder.judge.runner.JUDGE_CPU_DEVICES`) and runs it with JAX on CPU.
"""
from __future__ import annotations

import base64
import os
import sys

from .runner import ensure_judge_devices
from .runner_frames import HEADER, frame, limits  # the frames both ends read and write
from .runner_frames import wire as codec


def _mesh_of(jax, exp):
    """The concrete mesh of the program's devices (its abstract mesh, on the first CPU devices),
    or None for a program of one device."""
    if exp.nr_devices <= 1:
        return None
    abstract = None
    for s in list(getattr(exp, "_in_named_shardings", ()) or ()) + list(getattr(exp, "_out_named_shardings", ()) or ()):
        if s is not None and getattr(s, "mesh", None) is not None:
            abstract = s.mesh
            break
    devices = jax.devices("cpu")[:exp.nr_devices]
    if abstract is None or len(devices) < exp.nr_devices:
        return None
    kw = {"axis_types": tuple(abstract.axis_types)} if hasattr(abstract, "axis_types") else {}
    return jax.make_mesh(tuple(abstract.axis_sizes), tuple(abstract.axis_names), devices=devices, **kw)


COLLECTIVES = {"all-reduce": ("kAllReduce", "kAllReduceStart"), "all-gather": ("kAllGather", "kAllGatherStart"),
               "reduce-scatter": ("kReduceScatter",), "all-to-all": ("kAllToAll", "kRaggedAllToAll"),
               "collective-permute": ("kCollectivePermute", "kCollectivePermuteStart")}


def _compiled_collectives(compiled) -> dict:
    """``{collective: count}`` in a compiled program, from its HLO instructions' opcodes."""
    counts = dict.fromkeys(COLLECTIVES, 0)
    for module in compiled.runtime_executable().hlo_modules():
        for computation in module.computations():
            for instruction in computation.instructions():
                opcode = str(instruction.opcode).split(".")[-1]
                for name, opcodes in COLLECTIVES.items():
                    if opcode in opcodes:
                        counts[name] += 1
    return counts


def _spec(jax, spec):
    from jax.sharding import PartitionSpec

    if not isinstance(spec, (list, tuple)) or not all(
            p is None or isinstance(p, str) or (isinstance(p, (list, tuple)) and all(isinstance(q, str) for q in p))
            for p in spec):
        raise _Refused("a placement is not a partition spec")
    return PartitionSpec(*[tuple(p) if isinstance(p, (list, tuple)) else p for p in spec])


def _run_one(jax, exp, leaves, placements=None, facts=False):
    import contextlib

    from jax.sharding import NamedSharding, PartitionSpec

    args, kwargs = exp.in_tree.unflatten(leaves)
    mesh = _mesh_of(jax, exp)
    scope = jax.set_mesh(mesh) if mesh is not None and hasattr(jax, "set_mesh") else contextlib.nullcontext()
    with scope:
        if mesh is not None:
            if placements is not None:
                if not isinstance(placements, list) or len(placements) != len(leaves):
                    raise _Refused("the placements do not match the program's inputs")
                shardings = [NamedSharding(mesh, _spec(jax, p)) for p in placements]
            else:
                shardings = exp.in_shardings_jax(mesh)
            placed = [jax.device_put(a, s if s is not None else NamedSharding(mesh, PartitionSpec()))
                      for a, s in zip(leaves, shardings)]
            args, kwargs = exp.in_tree.unflatten(placed)
        found = None
        if facts:
            compiled = jax.jit(exp.call).lower(*args, **kwargs).compile()
            found = {"collectives": _compiled_collectives(compiled)}
            out = compiled(*args, **kwargs)
        else:
            out = exp.call(*args, **kwargs)
        out = jax.block_until_ready(out)
        flat = jax.tree_util.tree_leaves(out)
        types = []
        for o in flat:
            aval = jax.typeof(o) if hasattr(jax, "typeof") else None
            spec = getattr(getattr(aval, "sharding", None), "spec", None)
            types.append({"type": None if aval is None else str(aval.str_short() if hasattr(aval, "str_short") else aval),
                          "type_spec": None if spec is None else [list(p) if isinstance(p, tuple) else p for p in spec]})
    return flat, types, found


def serve() -> int:
    """The child's loop: read a request, answer it, until its input ends."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what JAX or XLA print never reaches the channel
    inp = os.fdopen(os.dup(0), "rb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    wire = codec()
    bounds = limits()

    def send(payload):
        out.write(frame(payload))
        out.flush()

    import jax
    from jax import export

    ensure_judge_devices()

    import hashlib

    cache: dict = {}
    send({"ready": {"pid": os.getpid(), "uid": os.getuid(), "devices": len(jax.devices("cpu"))}})
    while True:
        head = inp.read(HEADER.size)
        if len(head) < HEADER.size:
            return 0
        (n,) = HEADER.unpack(head)
        if n > bounds.max_bytes:
            return 1
        text = inp.read(n).decode("utf-8")
        try:
            req = wire.decode(text, limits=bounds)
            blob = base64.b64decode(req["program"], validate=True)
            key = hashlib.sha256(blob).hexdigest()
            exp = cache.get(key)
            if exp is None:
                exp = export.deserialize(bytearray(blob))
                if tuple(exp.platforms) != ("cpu",):
                    raise _Refused(f"it was exported for {', '.join(exp.platforms)}, not for cpu alone")
                cache[key] = exp
            flat, types, found = _run_one(jax, exp, list(req["args"]), req.get("placements"),
                                          bool(req.get("facts")))
            reply = {"outputs": flat, "types": types, "pid": os.getpid(), "uid": os.getuid()}
            if found is not None:
                reply["facts"] = found
            try:
                send(reply)
            except wire.WireError as exc:
                send({"error": {"type": "refused", "message": f"its outputs are too large ({exc})"}})
        except _Refused as exc:
            send({"error": {"type": "refused", "message": str(exc)[:500]}})
        except Exception as exc:  # noqa: BLE001 - XLA's errors differ across versions
            message = str(exc).strip().splitlines()[0][:500] if str(exc).strip() else ""
            kind = "memory" if "RESOURCE_EXHAUSTED" in str(exc) or isinstance(exc, MemoryError) else type(exc).__name__
            send({"error": {"type": kind, "message": message}})


class _Refused(Exception):
    pass


if __name__ == "__main__":
    if sys.argv[1:] != ["serve"]:
        sys.exit("usage: python -m autograder.judge.runner_child serve "
                 "(started by autograder.judge.runner.ProgramRunner)")
    sys.exit(serve())
