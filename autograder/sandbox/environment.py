"""The contained kernel's environment: an allow-list of the grader's variables."""
from __future__ import annotations

import os
from pathlib import Path

from .launch import interpreter, with_package

# The kernel's environment is an allow-list: these, where the grader has them, and nothing else
# (no cloud credentials, no pip index, no grader's paths). HOME, TMPDIR and PATH are the kernel's own.
KERNEL_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH",
              # JAX and XLA: which backend and devices, the memory of an accelerator, log levels
              "JAX_PLATFORMS", "JAX_PLATFORM_NAME", "JAX_ENABLE_X64", "JAX_NUM_CPU_DEVICES",
              "JAX_TRACEBACK_FILTERING", "XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE",
              "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR", "TF_CPP_MIN_LOG_LEVEL",
              "CUDA_VISIBLE_DEVICES", "TPU_VISIBLE_CHIPS",
              "AUTOGRADER_KERNEL_TAG")  # the operator's tag, to find the kernels' processes (ps e)


# JAX's import sets TF_CPP_MIN_LOG_LEVEL in its process's environment where it is unset: a kernel
# gets the operator's value (as this module found it), not one the grader's own JAX set since
_SET_BY_JAX = {"TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL")}


def kernel_env(home: Path, contained: bool = True) -> dict:
    """The kernel's environment. Contained: the allow-list :data:`KERNEL_ENV` of the grader's
    variables, ``HOME`` and ``TMPDIR`` in the box's home, ``PATH`` the interpreter's folder and
    the system's, nothing else. Uncontained (a learner's laptop, or the sandbox turned off), the
    grader's own, less what would point the kernel at the grader's files: such a kernel runs as
    the grader's uid and could read the grader's environment anyway (``/proc/PID/environ``).
    Either way ``JAX_PLATFORMS=cpu``: a graded kernel never opens an accelerator, so a grade is
    the same on any host, also while another process holds the chip (a TPU opens for one)."""
    return {**_kernel_env(home, contained), "JAX_PLATFORMS": "cpu"}


def _kernel_env(home: Path, contained: bool) -> dict:
    if contained:
        env = {k: os.environ[k] for k in KERNEL_ENV if k in os.environ}
        for name, value in _SET_BY_JAX.items():
            env.pop(name, None) if value is None else env.__setitem__(name, value)
        env.setdefault("LANG", "C.UTF-8")
        env["HOME"] = str(home)
        env["TMPDIR"] = str(home / "tmp")
        env["PATH"] = os.path.dirname(interpreter()) + ":/usr/local/bin:/usr/bin:/bin"
        return with_package(env)
    env = dict(os.environ)
    for name in ("NBGRADER_EXECUTION", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                 "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR",
                 "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR", "COURSE_DB_URL"):
        env.pop(name, None)
    env["HOME"] = str(home)
    env["TMPDIR"] = str(home / "tmp")
    return with_package(env)
