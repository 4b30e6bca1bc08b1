"""Benchmark the course: notebook run times, compile counts, headline kernels, grading.

    .venv/bin/python scripts/bench.py --out docs/bench-cpu.md            # everything but grading
    .venv/bin/python scripts/bench.py --out docs/bench-gpu.md --grading  # and the grader's figures
    .venv/bin/python scripts/bench.py --only 01 --out /tmp/b.md          # notebooks matching "01"
    OUT=/tmp/out scripts/gpu_run.sh   # on a GPU or TPU machine without Jupyter (docs/bench-gpu.md, bench-tpu.md)

Writes one markdown report: the machine; every notebook (``course/*.ipynb`` and
``solutions/*/*.ipynb``, whatever exists) executed with nbclient in a fresh kernel, one at
a time, against the floor of starting a kernel and importing JAX, with the compiles, traces
and lowerings JAX reported while it ran; the whole course's total; each chapter's headline
kernel (``KERNELS`` below) timed with ``autograder.device.honest_time`` as achieved FLOP/s
or bytes/s, against NumPy on the same work (CPU) or against the device's peak measured in
the same run (GPU/TPU: a large matmul in the fast dtype, a large device-to-device stream);
with ``--grading``, ``python -m autograder grade`` on the released and solution notebooks
against bare execution; and the targets, met or missed, by how much and why.

Run it on an otherwise idle machine: every figure here is a wall-clock time.

This process never opens the accelerator: a TPU can be opened by one process at a time, and the
notebooks' kernels need it. The machine's description and the headline kernels are measured in
a child process (``--measure-device``) that ends before the first notebook starts. Kernels talk
over Unix sockets (``transport="ipc"``, as the grader's do), so a machine that refuses TCP, even
on loopback, runs them too.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Targets the report is judged against.
TARGET_COURSE_S = 120.0      # every notebook of the course, one after another, on 2 CPU cores
# each notebook, alone, above its backend's floor (a kernel with JAX and one op): 15 s on 2 CPU cores; 30 s on
# an accelerator, where a compile costs several times a CPU's (0.19 s a program on a TPU v5e, 0.12 s on an H200)
TARGET_NOTEBOOK_S = {"cpu": 15.0, "gpu": 30.0, "tpu": 30.0}
TARGET_CPU_VS_NUMPY = 0.8    # jitted CPU kernels: at least 0.8x NumPy's throughput
TARGET_GPU_MATMUL = 0.70     # GPU or TPU matmul: at least 70% of the measured peak

# ----------------------------------------------------------------------------- the machine


def cpu_name() -> str:
    """The processor's model name: /proc/cpuinfo's, else lscpu's, else its vendor and family
    (a sandbox such as gVisor can leave the model name out)."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    if fields.get("model name", "unknown") != "unknown":
        return fields["model name"]
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        model = re.search(r"^Model name:\s*(.+)$", lscpu, re.M)
        if model and model.group(1).strip() not in ("", "-", "unknown"):
            return model.group(1).strip()
    except (OSError, subprocess.SubprocessError):
        pass
    if fields.get("vendor_id"):
        return (f"{fields['vendor_id']} family {fields.get('cpu family', '?')} model {fields.get('model', '?')}"
                + (f" ({fields['flags'].count(' ') + 1} flags)" if fields.get("flags") else ""))
    return platform.processor() or platform.machine() or "unknown"


def machine_info() -> dict:
    """The host (this process) and the device (a child process: this one never opens it)."""
    info = {"cpu": cpu_name(), "cores": os.cpu_count()}
    try:
        info["usable_cores"] = len(os.sched_getaffinity(0))
    except AttributeError:
        info["usable_cores"] = os.cpu_count()
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        info["memory_gib"] = kb / 2 ** 20
    except (OSError, AttributeError):
        info["memory_gib"] = None
    info.update(python=platform.python_version(), os=platform.platform())
    return info


def device_info() -> dict:
    """JAX, its backend and devices (opens the device: call it in the child only)."""
    import jax
    import jaxlib
    import numpy as np

    devices = jax.devices()
    memory = (devices[0].memory_stats() or {}).get("bytes_limit")
    return dict(jax=jax.__version__, jaxlib=getattr(jaxlib, "__version__", "?"), numpy=np.__version__,
                backend=jax.default_backend(), device_memory_gib=memory / 2 ** 30 if memory else None,
                devices=f"{len(devices)} x {', '.join(sorted({d.device_kind for d in devices}))}")


def measure_device(kernels: bool, only: str | None) -> dict:
    """Everything that needs the device, in one process: its description, the dispatch floor, the
    peaks (GPU/TPU) and the headline kernels. Run by ``--measure-device`` in a child."""
    out = {"info": device_info(), "dispatch": 0.0, "peaks": {}, "kernels": []}
    if kernels:
        backend = out["info"]["backend"]
        out["dispatch"] = dispatch_floor()
        if backend != "cpu":
            out["peaks"] = measure_peaks()
        out["kernels"] = measure_kernels(backend, only)
    return out


def device_in_child(kernels: bool, only: str | None) -> dict:
    """:func:`measure_device` in a child process, which closes the device when it ends."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--measure-device"]
    cmd += ["--only", only] if only else []
    cmd += [] if kernels else ["--no-kernels"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    sys.stderr.write(proc.stderr)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_DEVICE_MARK)]
    if proc.returncode or not lines:
        raise SystemExit(f"bench: measuring the device failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(lines[-1][len(_DEVICE_MARK):])


_DEVICE_MARK = "__BENCH_DEVICE__ "


# the makers' specified peaks (dense bf16 matmul FLOP/s, memory bytes/s) of the chips a run has met
SPEC_PEAKS = {"TPU v5 lite": (197e12, 819e9),    # Google Cloud's TPU v5e page
              "NVIDIA H200": (989e12, 4.8e12)}   # NVIDIA's H200 datasheet (SXM, without sparsity)


def load_average() -> str:
    try:
        return " / ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "?"


# ----------------------------------------------------------------------------- notebooks

_EVENTS = {"/jax/core/compile/backend_compile_duration": "compile",
           "/jax/core/compile/jaxpr_trace_duration": "trace",
           "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower"}
_MARK = "__BENCH_STATS__"

# Injected after the notebook's first code cell (its setup, which imports JAX), so that JAX
# is never imported earlier than the notebook itself would import it.
_LISTEN = f'''
# injected by scripts/bench.py: count what JAX traces, lowers and compiles (kept on jax.monitoring,
# not in a global of the notebook, whose purity checks would see it change)
import jax.monitoring as _bench_monitoring
def _bench_listen(stats):
    def listener(event, duration, *args, **kwargs):
        key = {_EVENTS!r}.get(event)
        if key:
            stats[key] += 1
            stats[key + "_s"] += float(duration)
    _bench_monitoring.register_event_duration_secs_listener(listener)
    _bench_monitoring.course_bench_stats = stats
_bench_listen({{k: 0 for k in ("trace", "lower", "compile")}} | {{k + "_s": 0.0 for k in ("trace", "lower", "compile")}})
'''
_REPORT = f'''
# injected by scripts/bench.py: JAX's counts, and the CPU seconds this kernel used since it started
import json as _bench_json
import sys as _bench_sys   # (JAX not imported here: the floor's bare kernel stays bare)
_bench_out = dict(getattr(_bench_sys.modules.get("jax.monitoring"), "course_bench_stats", {{}}))
try:
    import resource as _bench_resource
    _bench_out["cpu_s"] = sum(_r.ru_utime + _r.ru_stime for _r in (
        _bench_resource.getrusage(_bench_resource.RUSAGE_SELF),
        _bench_resource.getrusage(_bench_resource.RUSAGE_CHILDREN)))
except Exception:
    pass
print("{_MARK}", _bench_json.dumps(_bench_out))
'''


@dataclass
class NotebookRun:
    path: str
    wall_s: float = 0.0
    ok: bool = False
    error: str = ""
    stats: dict = field(default_factory=dict)
    cells: int = 0
    slowest: tuple = (0.0, "")
    claims: list = field(default_factory=list)   # (claim, verdict, evidence) printed by its cells
    errors: list = field(default_factory=list)   # the names of the errors its cells raised (exercises run on)


def _cell_seconds(cell) -> float:
    t = cell.metadata.get("execution", {})
    try:
        start = _dt.datetime.fromisoformat(t["iopub.execute_input"].replace("Z", "+00:00"))
        end = _dt.datetime.fromisoformat(t["shell.execute_reply"].replace("Z", "+00:00"))
        return (end - start).total_seconds()
    except (KeyError, ValueError):
        return 0.0


def _ipc_kernel_manager():
    """A kernel manager class whose channels are Unix sockets in a fresh folder, not TCP ports."""
    import tempfile

    from jupyter_client.manager import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.transport = "ipc"
            self.ip = os.path.join(tempfile.mkdtemp(prefix="bench-kernel-"), "k")

    return IPCKernelManager


_CLAIM = re.compile(r"^claim: (.*): (holds|does not hold|inconclusive) \((.*)\)$")


def execute_notebook(path: Path, *, instrument=True, timeout=600, keep: Path | None = None) -> NotebookRun:
    """Execute ``path`` in a fresh kernel the way the tests do; time it end to end.

    ``timeout`` is nbclient's limit for one cell; ``keep``, a folder where the executed notebook
    (outputs included, under its path with ``/`` as ``--``) is written, to read its outputs later."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(str(path), as_version=4)
    # a released exercise runs on past its starting code's failures: every other cell must run
    exercise = path.is_relative_to(ROOT / "exercises")
    for cell in nb.cells:  # the notebook as committed: no outputs
        if cell.cell_type == "code":
            cell.outputs = []
    own = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if instrument and own:
        nb.cells.insert(own[0] + 1, nbformat.v4.new_code_cell(_LISTEN))
    nb.cells.append(nbformat.v4.new_code_cell(_REPORT))
    run = NotebookRun(str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
                      cells=len(own))
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=True,
                            kernel_manager_class=_ipc_kernel_manager(), allow_errors=exercise,
                            resources={"metadata": {"path": str(path.parent)}})
    t0 = time.perf_counter()
    try:
        client.execute()
        run.ok = True
    except CellExecutionError as exc:
        run.error = (str(exc).strip().splitlines() or ["error"])[-1][:200]
    except Exception as exc:  # noqa: BLE001 - a timeout or a dead kernel is a result too
        run.error = f"{type(exc).__name__}: {str(exc)[:200]}"
    run.wall_s = time.perf_counter() - t0
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(keep / run.path.replace("/", "--")))
    slowest = (0.0, "")
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        # a line can arrive split over several stream messages: read the cell's stream as one text
        text = "".join(out.get("text", "") for out in cell.get("outputs", []) if out.get("output_type") == "stream")
        if _MARK in text:
            run.stats = json.loads(text.split(_MARK, 1)[1].strip().splitlines()[0])
        run.claims += [m.groups() for m in map(_CLAIM.match, text.splitlines()) if m]
        if exercise:   # (a chapter's cells fail on purpose too)
            run.errors += [out.get("ename", "?") for out in cell.get("outputs", []) if out.get("output_type") == "error"]
        if "scripts/bench.py" in cell.source:
            continue
        s = _cell_seconds(cell)
        if s > slowest[0]:
            first = next((ln for ln in cell.source.splitlines() if ln.strip() and not ln.startswith("#")), "")
            slowest = (s, first.strip()[:60])
    run.slowest = slowest
    unexpected = [e for e in run.errors if e not in _LEARNERS_TO_DO]
    if exercise and run.ok and unexpected:
        run.ok, run.error = False, f"beyond the starting code's own failures: {', '.join(unexpected)}"
    return run


def measure_floors(repeats=2, gap=0.0) -> dict:
    """Kernel start alone, and kernel start plus importing JAX and running one tiny op."""
    import tempfile

    import nbformat

    floors = {}
    sources = {"kernel": "pass",
               "kernel_jax": "import jax, jax.numpy as jnp\njnp.ones(1).block_until_ready()"}
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in sources.items():
            path = Path(tmp) / f"floor_{name}.ipynb"
            nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), str(path))
            done = []
            for _ in range(repeats):
                time.sleep(gap)
                done.append(execute_notebook(path, instrument=False))
            floors[name] = min(r.wall_s for r in done)
            floors[name + "_cpu"] = min(r.stats.get("cpu_s", 0.0) for r in done)
    return floors


DEFAULT_NOTEBOOKS = r"^(course|solutions)/"


def find_notebooks(only: str | None, pattern: str = DEFAULT_NOTEBOOKS) -> list[Path]:
    """The chapters, the solutions and the released exercises whose path matches ``pattern`` (a
    regular expression; by default the chapters and the solutions) and contains ``only``."""
    from autograder.common.course import source_notebooks

    paths = (sorted((ROOT / "course").glob("*.ipynb")) + source_notebooks(ROOT)
             + sorted((ROOT / "exercises").glob("*/*.ipynb")))
    paths = [p for p in paths if ".ipynb_checkpoints" not in p.parts]
    return [p for p in paths if re.search(pattern, str(p.relative_to(ROOT)))
            and (not only or only in str(p.relative_to(ROOT)))]


# what a released exercise's starting code raises by design: its visible tests' feedback, its stubs
_LEARNERS_TO_DO = ("ExerciseFailure", "NotImplementedError")


def chapter_of(path: str) -> str:
    m = re.search(r"(\d\d_[A-Za-z0-9_]+?)(?:\.ipynb|/)", path)
    return m.group(1) if m else path


# ----------------------------------------------------------------------------- kernels


@dataclass
class Kernel:
    """A chapter's headline kernel: ``make(backend)`` returns ``(jax_fn, args, np_fn, np_args, work)``.

    ``work`` is the FLOPs or bytes one call does (counted by hand, the same for both sides);
    ``np_fn`` is ``None`` when NumPy has no sensible equivalent.
    """
    chapter: str
    name: str
    unit: str  # "FLOP/s" or "B/s"
    make: Callable
    why_slow: str = ""  # the known reason when it falls short of NumPy on a CPU


def _size(cpu, gpu):
    import autograder as ag

    return ag.problem_size(cpu=cpu, gpu=gpu)


def _fast_dtype():
    import jax.numpy as jnp

    return _size(jnp.float32, jnp.bfloat16)


def _rng():
    import numpy as np

    return np.random.default_rng(0)


def _k_layer():
    import jax
    import jax.numpy as jnp
    import numpy as np

    # 1024 on CPU: below that XLA's CPU GEMM does not use both cores well (512: ~0.45x NumPy's
    # OpenBLAS on an idle 2-core machine; 1024: ~0.85x).
    n = _size(1024, 8192)
    rng, dt = _rng(), _fast_dtype()
    x, w = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    b = rng.standard_normal(n, dtype=np.float32)

    def layer_np(x, w, b):
        h = x @ w + b
        return 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))

    fn = jax.jit(lambda x, w, b: jax.nn.gelu(x @ w + b))
    return fn, [jnp.asarray(a, dt) for a in (x, w, b)], layer_np, (x, w, b), 2.0 * n ** 3


def _k_matmul():
    import jax
    import jax.numpy as jnp
    import numpy as np

    # 1024 on CPU: below that XLA's CPU GEMM does not use both cores well (512: ~0.45x NumPy's
    # OpenBLAS on an idle 2-core machine; 1024: ~0.85x).
    n = _size(1024, 8192)
    rng, dt = _rng(), _fast_dtype()
    x, w = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    return jax.jit(jnp.matmul), [jnp.asarray(a, dt) for a in (x, w)], np.matmul, (x, w), 2.0 * n ** 3


def _k_power():
    import jax
    import jax.numpy as jnp
    import numpy as np

    size = _size(2 ** 20, 2 ** 28)
    x = _rng().uniform(0.5, 1.5, size).astype(np.float32)

    def power(x, n):
        y = x
        for _ in range(n - 1):
            y = y * x
        return y

    return (jax.jit(power, static_argnums=1), [jnp.asarray(x), 8], power, (x, 8), 2.0 * x.nbytes)


def _k_normalize():
    import jax
    import jax.numpy as jnp
    import numpy as np

    shape = _size((4096, 256), (65536, 4096))
    x = _rng().standard_normal(shape, dtype=np.float32)

    def normalize(x, xp):
        mean = x.mean(axis=0)
        var = ((x - mean) ** 2).mean(axis=0)
        return (x - mean) / xp.sqrt(var + 1e-5)

    return (jax.jit(lambda x: normalize(x, jnp)), [jnp.asarray(x)], lambda x: normalize(x, np), (x,),
            2.0 * x.nbytes)


def _k_ema():
    import jax
    import jax.numpy as jnp
    import numpy as np

    shape = _size((512, 1024), (1024, 2 ** 18))
    xs = _rng().standard_normal(shape, dtype=np.float32)

    @jax.jit
    def ema(xs, alpha):
        def step(y, x):
            y = alpha * x + (1 - alpha) * y
            return y, y
        _, ys = jax.lax.scan(step, xs[0], xs[1:])
        return jnp.concatenate([xs[:1], ys])

    def ema_np(xs, alpha):
        ys = np.empty_like(xs)
        ys[0] = xs[0]
        for t in range(1, len(xs)):
            ys[t] = alpha * xs[t] + (1 - alpha) * ys[t - 1]
        return ys

    return ema, [jnp.asarray(xs), 0.1], ema_np, (xs, np.float32(0.1)), 2.0 * xs.nbytes


def _k_masked_sum():
    import jax
    import jax.numpy as jnp
    import numpy as np

    batch, max_len = _size((1024, 512), (16384, 8192))
    rng = _rng()
    tokens = rng.standard_normal((batch, max_len), dtype=np.float32)
    lengths = rng.integers(1, max_len + 1, batch).astype(np.int32)

    def masked(tokens, lengths, xp):
        mask = xp.arange(tokens.shape[1])[None, :] < lengths[:, None]
        return xp.where(mask, tokens, 0.0).sum(axis=1)

    return (jax.jit(lambda t, n: masked(t, n, jnp)), [jnp.asarray(tokens), jnp.asarray(lengths)],
            lambda t, n: masked(t, n, np), (tokens, lengths), float(tokens.nbytes))


def _k_sgd_step():
    import jax
    import jax.numpy as jnp
    import numpy as np

    n, d = _size((4096, 256), (65536, 4096))
    rng = _rng()
    x = rng.standard_normal((n, d), dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    w = np.zeros(d, np.float32)

    @jax.jit
    def fused_update(w, x, y, lr):
        g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        return w - lr * g

    def update_np(w, x, y, lr):
        r = x @ w - y
        return w - lr * (2.0 / len(y)) * (x.T @ r)

    return (fused_update, [jnp.asarray(a) for a in (w, x, y)] + [0.01], update_np, (w, x, y, np.float32(0.01)),
            4.0 * n * d)


def _k_tree_sgd():
    import jax
    import jax.numpy as jnp
    import numpy as np

    sizes = _size((1024, 1024, 1024, 10), (8192, 8192, 8192, 1000))
    rng = _rng()
    params = [{"w": rng.standard_normal((a, b), dtype=np.float32), "b": np.zeros(b, np.float32)}
              for a, b in zip(sizes[:-1], sizes[1:])]
    grads = jax.tree_util.tree_map(np.ones_like, params)
    nbytes = sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(params))

    def update(p, g, lr):
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, p, g)

    to_dev = lambda t: jax.tree_util.tree_map(jnp.asarray, t)  # noqa: E731
    return (jax.jit(update), [to_dev(params), to_dev(grads), 0.01], update, (params, grads, np.float32(0.01)),
            3.0 * nbytes)


def _k_dropout():
    import jax
    import jax.numpy as jnp
    import numpy as np

    size = _size(2 ** 20, 2 ** 28)
    x = _rng().standard_normal(size, dtype=np.float32)

    @jax.jit
    def dropout(key, x):
        keep = jax.random.bernoulli(key, 0.9, x.shape)
        return jnp.where(keep, x / 0.9, 0.0)

    gen = np.random.default_rng(1)

    def dropout_np(x):
        return np.where(gen.random(x.shape, dtype=np.float32) < 0.9, x / 0.9, 0.0)

    return dropout, [jax.random.key(0), jnp.asarray(x)], dropout_np, (x,), 2.0 * x.nbytes


def _k_mean():
    import jax
    import jax.numpy as jnp
    import numpy as np

    x = _rng().standard_normal(_size((4096, 1024), (65536, 8192)), dtype=np.float32)
    return jax.jit(jnp.mean), [jnp.asarray(x)], np.mean, (x,), float(x.nbytes)


def _k_train():
    import jax
    import jax.numpy as jnp
    import numpy as np

    n, d, steps, batch = _size((4096, 64, 200, 128), (1 << 20, 512, 1000, 8192))
    rng = _rng()
    xs = rng.standard_normal((n, d), dtype=np.float32)
    ys = xs @ rng.standard_normal(d, dtype=np.float32)
    idx = rng.integers(0, n, (steps, batch))

    def grad(w, x, y):
        return (2.0 / len(y)) * (x.T @ (x @ w - y))

    @jax.jit
    def train(w, xs, ys, idx, lr):
        def step(w, i):
            x, y = xs[i], ys[i]
            loss = jnp.mean((x @ w - y) ** 2)
            return w - lr * grad(w, x, y), loss
        return jax.lax.scan(step, w, idx)

    def train_np(w, xs, ys, idx, lr):
        losses = np.empty(len(idx), np.float32)
        for t, i in enumerate(idx):
            x, y = xs[i], ys[i]
            losses[t] = np.mean((x @ w - y) ** 2)
            w = w - lr * grad(w, x, y)
        return w, losses

    w = np.zeros(d, np.float32)
    return (train, [jnp.asarray(a) for a in (w, xs, ys, idx)] + [0.01], train_np,
            (w, xs, ys, idx, np.float32(0.01)), 6.0 * steps * batch * d)


def _manifest_kernels() -> list:
    """The chapters' headline kernels, in the course's manifest (autograder/manifest.toml):
    each names its chapter, label, unit and the maker function ``_k_*`` above."""
    from autograder.manifest import load

    kernels = []
    for k in load().kernels():
        make = globals().get(k.function)
        if not callable(make) or not k.function.startswith("_k_"):
            raise SystemExit(f"autograder/manifest.toml: {k.chapter}'s kernel {k.label!r} names {k.function!r}, "
                             "which is no kernel maker (_k_...) of scripts/bench.py")
        kernels.append(Kernel(k.chapter, k.label, k.unit, make, why_slow=k.why_slow))
    return kernels


KERNELS = _manifest_kernels()


def measure_peaks() -> dict:
    """The device's own best: a large matmul in the fast dtype, a large device-to-device stream."""
    import jax
    import jax.numpy as jnp

    from autograder.device import honest_time

    dt = _fast_dtype()
    best_mm = 0.0
    for n in _size((1024,), (8192, 16384)):
        a = jnp.ones((n, n), dt)
        t = honest_time(jax.jit(jnp.matmul), a, a, repeats=10)
        best_mm = max(best_mm, 2.0 * n ** 3 / t.median)
        del a
    x = jnp.ones(_size(2 ** 24, 2 ** 28), jnp.float32)  # 64 MiB / 1 GiB
    t = honest_time(jax.jit(lambda x: x + 1), x, repeats=10)
    return {"matmul": best_mm, "stream": 2.0 * x.nbytes / t.median, "dtype": jnp.dtype(dt).name}


def dispatch_floor() -> float:
    """Seconds for one call of a trivial jitted function: below this, no kernel can go."""
    import jax
    import jax.numpy as jnp

    from autograder.device import honest_time

    return honest_time(jax.jit(lambda x: x + 1), jnp.float32(1.0), repeats=50).median


def measure_kernels(backend: str, only: str | None = None) -> list[dict]:
    from autograder.device import honest_time

    rows = []
    for k in KERNELS:
        if only and only not in k.chapter and k.chapter not in only:
            continue
        row = {"chapter": k.chapter, "name": k.name, "unit": k.unit, "why_slow": k.why_slow}
        try:
            fn, args, np_fn, np_args, work = k.make()
            t = honest_time(fn, *args, repeats=10)
            row.update(jax_s=t.median, jax_rate=work / t.median, compile_s=t.compile_s)
            if np_fn is not None and backend == "cpu":
                tn = honest_time(np_fn, *np_args, repeats=5)
                row.update(np_s=tn.median, np_rate=work / tn.median)
            del fn, args, np_args
        except Exception as exc:  # noqa: BLE001 - one broken kernel must not hide the rest
            row["error"] = f"{type(exc).__name__}: {str(exc)[:150]}"
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- grading


def measure_grading(only: str | None) -> list[dict]:
    rows = []
    from autograder.common.course import released_notebook, source_notebooks

    for src in source_notebooks(ROOT):
        assignment = src.parent.name
        if only and only not in assignment:
            continue
        released = released_notebook(assignment, ROOT)
        row = {"assignment": assignment}
        for label, path in (("released", released), ("solution", src)):
            if not path.exists():
                continue
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), "--json"],
                                  capture_output=True, text=True, cwd=ROOT, timeout=1200)
            row[f"{label}_s"] = time.perf_counter() - t0
            try:
                data = json.loads(proc.stdout)
                row[f"{label}_score"] = f"{data['score']:g}/{data['max_score']:g}"
            except (json.JSONDecodeError, KeyError, TypeError):
                row[f"{label}_score"] = f"error (exit {proc.returncode})"
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- the report


def _rate(value, unit):
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.2f} {unit}"


def _status(run) -> str:
    if not run.ok:
        return "FAILED: " + run.error.replace("|", "/")
    return f"ok (the starting code's {len(run.errors)} failures)" if run.errors else "ok"


def _s(x):
    return "—" if x is None else f"{x:.2f}"


def write_report(out: Path, *, info, floors, runs, kernels, peaks, dispatch, grading, argv,
                 load_before, load_after, elapsed):
    backend = info["backend"]
    lines = [f"# Benchmarks: {backend.upper()}", "",
             f"Written by `scripts/bench.py` ({' '.join(argv) or 'no arguments'}) on "
             f"{_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC; the run took {elapsed / 60:.1f} min. "
             "Every figure is wall-clock time on the machine below; regenerate with "
             + (f"`.venv/bin/python scripts/bench.py --out docs/bench-{backend}.md`." if backend == "cpu" else
                "`OUT=/tmp/out scripts/gpu_run.sh` on the machine (it opens the device only in child "
                "processes: this script's measuring child, then each notebook's kernel)."), "",
             "## Machine", "", "| | |", "| --- | --- |",
             f"| CPU | {info['cpu']} |",
             f"| cores | {info['cores']} logical, {info['usable_cores']} usable by this process |",
             f"| memory | {info['memory_gib']:.1f} GiB |" if info.get("memory_gib") else "| memory | ? |",
             f"| load average (1/5/15 min) | {load_before} before, {load_after} after |",
             f"| Python / NumPy | {info['python']} / {info['numpy']} |",
             f"| JAX / jaxlib | {info['jax']} / {info['jaxlib']} |",
             f"| backend, devices | {backend}: {info['devices']}"
             + (f", {info['device_memory_gib']:.2f} GiB each |" if info.get("device_memory_gib") else " |"),
             f"| OS | {info['os']} |", ""]
    ncores = info["usable_cores"] or 1
    first = lambda text: float((re.findall(r"[\d.]+", text) or ["0"])[0])  # noqa: E731 - 1-minute load
    # before the run nothing of ours ran; during it, the benchmark itself keeps about one core busy
    busy = first(load_before) > max(1.0, 0.5 * ncores) or first(load_after) > ncores + 1.0
    if busy:
        lines += [f"> The machine was busy while this ran (see the load average, for {ncores} cores): "
                  "other processes shared the CPU, so the wall times below are upper bounds of what an "
                  "idle machine gives. The *kernel CPU s* column (CPU seconds the notebook's kernel "
                  "process used, all threads) depends much less on the load: on an idle machine a "
                  "notebook's wall time is close to it (most of a notebook is one Python thread).", ""]
    cpu_of = lambda r: r.stats.get("cpu_s")  # noqa: E731
    target_nb = TARGET_NOTEBOOK_S.get(backend, TARGET_NOTEBOOK_S["cpu"])

    # --- targets
    ok_runs = [r for r in runs if r.ok]
    total = sum(r.wall_s for r in runs)
    floor = floors.get("kernel_jax", 0.0)
    rows = []
    if runs:
        n = len(runs)
        why = (f"{n} notebook(s) x {floor:.1f} s floor (kernel start + JAX import) = {n * floor:.0f} s "
               f"of it; the notebooks' own work is {total - n * floor:.0f} s, of which compiling "
               f"({sum(r.stats.get('compile', 0) for r in runs)} programs) took "
               f"{sum(r.stats.get('compile_s', 0.0) for r in runs):.0f} s")
        verdict = "met" if total <= TARGET_COURSE_S and len(ok_runs) == n else "**missed**"
        by = TARGET_COURSE_S - total
        if len(ok_runs) < n:
            why = f"{n - len(ok_runs)} notebook(s) failed, so the course does not run through; " + why
        total_cpu = sum(cpu_of(r) or 0.0 for r in runs)
        if busy and total_cpu:
            why += (f". The machine was busy: the kernels used {total_cpu:.0f} s of CPU in all, "
                    f"{'within' if total_cpu <= TARGET_COURSE_S else 'over'} the target, a better "
                    "estimate of an idle run")
        rows.append(("whole course (all notebooks, one after another)", f"<= {TARGET_COURSE_S:.0f} s",
                     f"{total:.1f} s", verdict,
                     (f"{abs(by):.1f} s {'under' if by >= 0 else 'over'}; " + why)))
        floor_cpu = floors.get("kernel_jax_cpu", 0.0)
        slow = [r for r in runs if r.wall_s - floor > target_nb]
        slow_cpu = [r for r in runs if (cpu_of(r) or 0.0) - floor_cpu > target_nb]
        worst = max(runs, key=lambda r: r.wall_s)
        detail = (f"slowest: `{worst.path}` {worst.wall_s:.1f} s "
                  f"({worst.stats.get('compile_s', 0):.1f} s compiling, slowest cell {worst.slowest[0]:.1f} s: "
                  f"`{worst.slowest[1]}`)")
        if busy and slow:
            detail += (f"; by kernel CPU time above its floor {len(runs) - len(slow_cpu)}/{len(runs)} are within"
                       + (f" (over: {', '.join(f'`{r.path}` {cpu_of(r) - floor_cpu:.1f} s' for r in slow_cpu)})"
                          if slow_cpu else ""))
        rows.append(("each notebook, above the floor", f"<= {target_nb:.0f} s + {floor:.1f} s floor",
                     f"{len(runs) - len(slow)}/{len(runs)} within", "met" if not slow else "**missed**",
                     (f"over: {', '.join(f'`{r.path}` +{r.wall_s - floor - target_nb:.1f} s' for r in slow)}; "
                      if slow else "") + detail))
        failed = [r for r in runs if not r.ok]
        if failed:
            rows.append(("every notebook executes", "no errors", f"{len(failed)} failed", "**missed**",
                         "; ".join(f"`{r.path}`: {r.error.replace('|', '/')}" for r in failed)))
    if kernels and backend == "cpu":
        cmp = [k for k in kernels if "np_rate" in k]
        good = [k for k in cmp if k["jax_rate"] >= TARGET_CPU_VS_NUMPY * k["np_rate"]]
        bad = [k for k in cmp if k not in good]
        def reason(k):
            if dispatch and k["jax_s"] < 10 * dispatch:
                return (f"a call takes {k['jax_s'] * 1e6:.0f} us, under 10x the {dispatch * 1e6:.0f} us "
                        "dispatch floor: too small a problem for jit's fixed cost")
            return k.get("why_slow") or "XLA's CPU code for this kernel is slower than NumPy's here"

        why = "; ".join(f"{k['chapter']} {k['jax_rate'] / k['np_rate']:.2f}x, "
                        f"short by {TARGET_CPU_VS_NUMPY - k['jax_rate'] / k['np_rate']:.2f}x ({reason(k)})"
                        for k in bad)
        rows.append(("jitted CPU kernels vs NumPy", f">= {TARGET_CPU_VS_NUMPY}x each",
                     f"{len(good)}/{len(cmp)} kernels", "met" if not bad else "**missed**",
                     f"missed by: {why}" if bad else
                     f"lowest {min(k['jax_rate'] / k['np_rate'] for k in cmp):.2f}x" if cmp else ""))
    if kernels and peaks and backend != "cpu":
        mm = next((k for k in kernels if k["name"].startswith("matmul") and "jax_rate" in k), None)
        if mm:
            frac = mm["jax_rate"] / peaks["matmul"]
            rows.append((f"{backend.upper()} matmul vs measured peak", f">= {TARGET_GPU_MATMUL:.0%}", f"{frac:.0%}",
                         "met" if frac >= TARGET_GPU_MATMUL else "**missed**",
                         f"{_rate(mm['jax_rate'], 'FLOP/s')} of {_rate(peaks['matmul'], 'FLOP/s')} "
                         f"({peaks['dtype']})"))
    if rows:
        lines += ["## Targets", "", "| target | goal | measured | verdict | by how much, and why |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows]
        lines += [""]

    # --- notebooks
    if runs:
        lines += ["## Notebooks", "",
                  f"Each notebook executed with nbclient in a fresh `python3` kernel, one at a time, from its "
                  f"own folder (as `tests/test_course_notebooks.py` and the grader do). The **floor** is "
                  f"what any notebook pays before its first line of work: starting a kernel takes "
                  f"{floors.get('kernel', 0):.2f} s, starting one and importing JAX (plus one tiny op) "
                  f"{floor:.2f} s (best of two; {floors.get('kernel_jax_cpu', 0):.2f} s of kernel CPU). "
                  "*Above floor* is the notebook's own work. Compiles, "
                  "traces and lowerings are the events JAX itself reported while the notebook ran "
                  "(`jax.monitoring`, a listener injected after the setup cell), with the seconds spent "
                  "in them.", "",
                  "| notebook | wall s | kernel CPU s | above floor s | compiles | compile s | traces "
                  "| trace s | lower s | slowest cell | status |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
        for r in runs:
            st = r.stats
            flag = f" (over {target_nb:.0f} s above floor)" if r.wall_s - floor > target_nb else ""
            lines.append(
                f"| `{r.path}` | {r.wall_s:.2f}{flag} | {_s(cpu_of(r))} | {r.wall_s - floor:.2f} "
                f"| {st.get('compile', '—')} "
                f"| {_s(st.get('compile_s'))} | {st.get('trace', '—')} | {_s(st.get('trace_s'))} "
                f"| {_s(st.get('lower_s'))} | {r.slowest[0]:.2f} s `{r.slowest[1]}` "
                f"| {_status(r)} |")
        lines.append(f"| **total** | **{total:.1f}** | {sum(cpu_of(r) or 0.0 for r in runs):.1f} "
                     f"| **{total - floor * len(runs):.1f}** "
                     f"| {sum(r.stats.get('compile', 0) for r in runs)} "
                     f"| {sum(r.stats.get('compile_s', 0) for r in runs):.2f} "
                     f"| {sum(r.stats.get('trace', 0) for r in runs)} "
                     f"| {sum(r.stats.get('trace_s', 0) for r in runs):.2f} "
                     f"| {sum(r.stats.get('lower_s', 0) for r in runs):.2f} | | |")
        lines += [""]

        chapters = {}
        for r in runs:
            chapters.setdefault(chapter_of(r.path), []).append(r)
        lines += ["### Per chapter", "", "Teaching notebook plus exercise (solution) notebook.", "",
                  "| chapter | notebooks | wall s | kernel CPU s | above floor s | compiles | compile s |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for ch, rs in sorted(chapters.items()):
            w = sum(r.wall_s for r in rs)
            lines.append(f"| {ch} | {len(rs)} | {w:.2f} | {sum(cpu_of(r) or 0.0 for r in rs):.2f} "
                         f"| {w - floor * len(rs):.2f} "
                         f"| {sum(r.stats.get('compile', 0) for r in rs)} "
                         f"| {sum(r.stats.get('compile_s', 0) for r in rs):.2f} |")
        lines += [""]

    # --- claims
    if any(r.claims for r in runs):
        tally = {v: sum(1 for r in runs for _, verdict, _ in r.claims if verdict == v)
                 for v in ("holds", "inconclusive", "does not hold")}
        lines += ["## Claims", "",
                  "Every `claim:` line the notebooks printed (`autograder.claims`: a sentence of a chapter "
                  f"backed by a measurement of its own cells), on {backend.upper()}: "
                  + ", ".join(f"{n} {v}" for v, n in tally.items()) + ". Those that did not hold outright:", ""]
        rest = [(r.path, c) for r in runs for c in r.claims if c[1] != "holds"]
        lines += [f"- `{path}`: {text}: **{verdict}** ({evidence})" for path, (text, verdict, evidence) in rest] \
            or ["- none"]
        lines += [""]

    # --- kernels
    if kernels:
        lines += ["## Headline kernels", "",
                  "One representative jitted kernel per chapter (the registry `KERNELS` in "
                  "`scripts/bench.py`), timed with `autograder.device.honest_time` (a warm-up call, "
                  "then every call blocked on its result; the median of 10). The work per call is "
                  "counted by hand (FLOPs of the matmuls, or the bytes that must cross memory at "
                  "least once) and is the same for JAX and for NumPy. "
                  f"A trivial jitted call (`x + 1` on a scalar) takes {dispatch * 1e6:.1f} us here: "
                  "the dispatch floor no kernel can go below.", ""]
        if backend == "cpu":
            lines += ["| chapter | kernel | JAX time | JAX rate | NumPy time | NumPy rate | JAX / NumPy | >= 0.8x |",
                      "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
            for k in kernels:
                if "error" in k:
                    lines.append(f"| {k['chapter']} | {k['name']} | error: {k['error']} | | | | | |")
                    continue
                ratio = k["jax_rate"] / k["np_rate"] if "np_rate" in k else None
                lines.append(
                    f"| {k['chapter']} | {k['name']} | {k['jax_s'] * 1e3:.3f} ms | {_rate(k['jax_rate'], k['unit'])} "
                    f"| {k['np_s'] * 1e3:.3f} ms | {_rate(k['np_rate'], k['unit'])} | {ratio:.2f}x "
                    f"| {'yes' if ratio >= TARGET_CPU_VS_NUMPY else '**no**'} |" if ratio is not None else
                    f"| {k['chapter']} | {k['name']} | {k['jax_s'] * 1e3:.3f} ms | {_rate(k['jax_rate'], k['unit'])} "
                    "| — | — | — | — |")
        else:
            lines += [f"Measured peak in this run: matmul {_rate(peaks['matmul'], 'FLOP/s')} ({peaks['dtype']}), "
                      f"device-to-device stream {_rate(peaks['stream'], 'B/s')} (`x + 1` on 1 GiB, read + write). "
                      "FLOP/s kernels are compared with the matmul peak (even those in float32, so theirs "
                      "is a lower bound), B/s kernels with the stream peak."
                      + "".join(f" The maker's peak of a {kind}: {_rate(mm, 'FLOP/s')} (bf16), {_rate(bw, 'B/s')}; "
                                f"measured, {peaks['matmul'] / mm:.0%} and {peaks['stream'] / bw:.0%} of them."
                                for kind, (mm, bw) in SPEC_PEAKS.items() if kind in info["devices"]),
                      "", "| chapter | kernel | time | rate | of measured peak |", "| --- | --- | ---: | ---: | ---: |"]
            for k in kernels:
                if "error" in k:
                    lines.append(f"| {k['chapter']} | {k['name']} | error: {k['error']} | | |")
                    continue
                peak = peaks["matmul"] if k["unit"] == "FLOP/s" else peaks["stream"]
                lines.append(f"| {k['chapter']} | {k['name']} | {k['jax_s'] * 1e3:.3f} ms "
                             f"| {_rate(k['jax_rate'], k['unit'])} | {k['jax_rate'] / peak:.0%} |")
        lines += [""]

    # --- grading
    if grading:
        bare = {chapter_of(r.path): r.wall_s for r in runs if r.path.startswith("solutions/")}
        lines += ["## Grading", "",
                  "`python -m autograder grade NOTEBOOK --json` (a new process: Python start, nbgrader's "
                  "gradebook, the sandbox as root, executing the notebook in a fresh kernel, then the judge of `solutions/<a>/judge.py` on fresh inputs) on "
                  "the released notebook and on the solution notebook, against bare nbclient execution of "
                  "the solution notebook (above).", "",
                  "| assignment | released: s (score) | solution: s (score) | bare execution s | grading overhead s |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for g in grading:
            b = bare.get(g["assignment"])
            over = f"{g['solution_s'] - b:.2f}" if b is not None and "solution_s" in g else "—"
            lines.append(f"| {g['assignment']} | {_s(g.get('released_s'))} ({g.get('released_score', '—')}) "
                         f"| {_s(g.get('solution_s'))} ({g.get('solution_score', '—')}) | {_s(b)} | {over} |")
        lines += [""]

    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="markdown report (default docs/bench-<backend>.md)")
    parser.add_argument("--only", default=None, help="only notebooks, kernels and assignments whose path or chapter contains this")
    parser.add_argument("--grading", action="store_true", help="also time the grader on every assignment")
    parser.add_argument("--no-notebooks", action="store_true", help="skip executing notebooks")
    parser.add_argument("--no-kernels", action="store_true", help="skip the headline kernels")
    parser.add_argument("--cell-timeout", type=float, default=600,
                        help="seconds one notebook cell may run before its notebook counts as failed")
    parser.add_argument("--executed", type=Path, default=None,
                        help="folder to write each executed notebook into, outputs included")
    parser.add_argument("--notebooks", default=DEFAULT_NOTEBOOKS,
                        help="regular expression over the notebooks' paths (course/, solutions/, exercises/); "
                             f"default {DEFAULT_NOTEBOOKS!r}")
    parser.add_argument("--gap", type=float, default=0.0,
                        help="seconds to wait before each kernel starts, not timed (a TPU can refuse a process "
                             "that opens it just after another closed it)")
    parser.add_argument("--floor-repeats", type=int, default=2, help="kernel starts per floor (the best counts)")
    parser.add_argument("--floors", type=json.loads, default=None,
                        help="floors measured by an earlier run on the same machine (JSON, as this script prints "
                             "them), instead of measuring them again")
    parser.add_argument("--measure-device", action="store_true",
                        help="(the child's part) print the device's description and kernels as JSON, and exit")
    args = parser.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    if args.measure_device:
        print(_DEVICE_MARK + json.dumps(measure_device(not args.no_kernels, args.only)))
        return 0

    start = time.perf_counter()
    load_before = load_average()
    os.chdir(ROOT)
    device = device_in_child(not args.no_kernels, args.only)   # the kernels first: a minute or two
    info = machine_info() | device["info"]
    out = Path(args.out or ROOT / "docs" / f"bench-{info['backend']}.md")
    print(f"bench: {info['backend']} ({info['devices']}), {info['cpu']}, load {load_before}", file=sys.stderr)

    floors, runs, grading = {}, [], []
    kernels, peaks, dispatch = device["kernels"], device["peaks"], device["dispatch"]

    def report():  # rewritten after every step: a run stopped early still leaves what it measured
        write_report(out, info=info, floors=floors, runs=runs, kernels=kernels, peaks=peaks,
                     dispatch=dispatch, grading=grading, argv=argv, load_before=load_before,
                     load_after=load_average(), elapsed=time.perf_counter() - start)

    for k in kernels:
        print(f"bench: kernel {k['chapter']}: {k.get('error') or _rate(k['jax_rate'], k['unit'])}",
              file=sys.stderr)
    report()

    if not args.no_notebooks:
        floors = args.floors or measure_floors(args.floor_repeats, args.gap)
        print(f"bench: floors {json.dumps(floors)}", file=sys.stderr)
        for path in find_notebooks(args.only, args.notebooks):
            time.sleep(args.gap)
            runs.append(run := execute_notebook(path, timeout=args.cell_timeout, keep=args.executed))
            print(f"bench: {run.path}: {run.wall_s:.2f} s, {run.stats.get('compile', '?')} compiles"
                  f"{'' if run.ok else ' FAILED: ' + run.error}", file=sys.stderr)
            report()

    if args.grading:
        grading = measure_grading(args.only)
    report()
    print(f"bench: wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
