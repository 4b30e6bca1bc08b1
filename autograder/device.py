"""Helpers the chapters share: what we run on, how big to make the kernels, an honest timer."""
from __future__ import annotations

import os
import statistics
import time


def use_virtual_cpu_devices(n: int = 8) -> None:
    """Ask for ``n`` virtual CPU devices when there is no accelerator with that many.

    Must run before JAX creates its backends (before the first JAX operation).
    Harmless on a GPU or TPU: it only affects the CPU platform.
    """
    flag = f"--xla_force_host_platform_device_count={n}"
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " " + flag).strip()
    import jax

    try:  # JAX >= 0.4.38 has the config option; setting it after backends exist raises
        jax.config.update("jax_num_cpu_devices", n)
    except Exception:  # noqa: BLE001 - the XLA flag above covers older JAX or late calls
        pass


def backend() -> str:
    """``"cpu"``, ``"gpu"`` or ``"tpu"``."""
    import jax

    return jax.default_backend()


def device_report() -> str:
    """One line: JAX version, backend, and the devices it sees."""
    import jax

    devices = jax.devices()
    kinds = sorted({d.device_kind for d in devices})
    return (f"JAX {jax.__version__} on {jax.default_backend().upper()}: "
            f"{len(devices)} device(s) [{', '.join(kinds)}]")


def problem_size(cpu, gpu=None, tpu=None, *, platform=None):
    """Pick a problem size for the backend: small on CPU, larger on GPU/TPU.

    ``gpu`` defaults to ``cpu`` and ``tpu`` to ``gpu``. ``platform`` (``"cpu"``, ``"gpu"``,
    ``"tpu"``) is the one the work runs on when it is not the default backend's: chapter 09 on
    a single GPU computes on 8 virtual CPU devices, and sizes its problems for them.
    """
    gpu = cpu if gpu is None else gpu
    tpu = gpu if tpu is None else tpu
    return {"cpu": cpu, "gpu": gpu, "tpu": tpu}.get(platform or backend(), cpu)


class Timing(dict):
    """Result of :func:`honest_time`: ``median``, ``min``, ``times`` and ``compile_s`` (seconds)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


def honest_time(f, *args, repeats: int = 5, warmup: int = 1) -> Timing:
    """Time ``f(*args)`` honestly: untimed warm-up, every call blocked, the median reported.

    Nothing but ``jax.block_until_ready(f(*args))`` between two ``time.perf_counter()`` calls,
    repeated: what ``%timeit f(x).block_until_ready()`` measures in IPython. For where the time
    goes, use ``jax.profiler.trace`` (chapter 06).

    The first warm-up call includes tracing and compilation; it is reported
    separately as ``compile_s`` (its time minus the median), never mixed into
    the run time.
    """
    import jax

    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    first = None
    for i in range(max(1, warmup)):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        if i == 0:
            first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    return Timing(median=med, min=min(times), times=times, compile_s=max(0.0, first - med))


def matmul_flops(n: int, m: int | None = None, k: int | None = None) -> float:
    """FLOPs of an ``(n, k) @ (k, m)`` matmul: ``2 n m k``."""
    m = n if m is None else m
    k = n if k is None else k
    return 2.0 * n * m * k
