"""How the grading process starts a contained process: the command of a module of this package
(:func:`package_module`, :data:`LAUNCHER`), and the launcher's ``limits`` around a kernel's or a
program runner's command (:func:`limited`)."""
from __future__ import annotations

import os
import sys

from ..common.course import package_root

DEFAULT_CPU_LIMIT = 1800      # CPU seconds for one kernel (all its threads)


def interpreter(path: str | None = None) -> str:
    """This interpreter's path (or ``path``), its folders resolved and its own name kept: a path
    typed with ``..`` (``../../.venv/bin/python``) names folders the kernel's view does not
    have, and a venv's ``python``, a link, must stay itself (the venv is found beside it)."""
    path = path or sys.executable
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def package_module(module: str) -> list:
    """The command that runs ``module``, a module of this package, as root or in a sandbox:
    ``python -s -P -m MODULE`` (no user site, not the current folder: nothing a submission
    wrote can stand in for a module), with an environment of :func:`with_package`."""
    return [interpreter(), "-s", "-P", "-m", module]


def with_package(env: dict) -> dict:
    """``env`` with the folder holding this package first on ``PYTHONPATH``: a process it starts
    imports this package, wherever this process found it (a checkout, a venv, a wheel)."""
    rest = env.get("PYTHONPATH")
    return {**env, "PYTHONPATH": str(package_root()) + (os.pathsep + rest if rest else "")}


LAUNCHER = package_module("autograder.sandbox.launcher")


def die_with_parent():
    """A function for a child of this process to call right after the fork: the launcher's
    :func:`~autograder.sandbox.launcher.die_with_parent`, so a grader stopped by Ctrl-C or killed
    leaves no grading process running on. Prepared here: the child loads nothing (an import in a
    forked child can wait forever on a lock another thread held at the fork), and exits if this
    process ended before its request took effect. Elsewhere than Linux, a function that does nothing."""
    import functools

    from . import launcher as launch

    try:
        prctl = launch.libc().prctl
    except (OSError, AttributeError):  # not Linux: no prctl(2)
        return lambda: None
    return functools.partial(launch.die_with_parent, os.getpid(), prctl)


def limited(cmd: list, cpu_seconds: int, box=None, nice: int = 0) -> list:
    """``cmd`` (the kernel's, already wrapped in ``box``, a :class:`~.containment.Sandbox`) started by the launcher's
    ``limits``, which sets on itself a CPU-time limit, no core dumps, death with this process
    and, in a sandbox, the memory limit (its cgroup joined, else ``RLIMIT_DATA``) and, as root,
    its CPU share and thread cap (cgroups joined), then executes it. A command rather than
    ``preexec_fn``: no Python runs between the fork and the exec of a grading process in which
    JAX's threads run, and the process is started with ``vfork``, not a copy of that large one.
    ``nice``: added to its nice value (the program runner starts below the kernel)."""
    prefix = [*LAUNCHER, "limits", f"--cpu={cpu_seconds}",
              f"--parent={os.getpid()}", *([f"--nice={nice}"] if nice else [])]
    if box is not None and box.contained:
        prefix.append(f"--memory={box.memory_mb << 20}")
        if box.cgroup:
            prefix.append(f"--cgroup={box.cgroup}")
        prefix += [f"--join={folder}" for folder in box.cgroups]  # its CPU share and thread cap
    return [*prefix, "--", *cmd]
