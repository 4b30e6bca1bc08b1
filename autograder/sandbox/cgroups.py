"""The cgroups of a contained kernel or program runner, as root (v1 or v2): its memory limit
(:func:`memory_cgroup`), its CPU share and thread cap (:func:`share_cgroups`)."""
from __future__ import annotations

import os
from pathlib import Path

def _own_cgroup(controller: str) -> str | None:
    """This process's cgroup path in the hierarchy of ``controller`` ('' for cgroup v2)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (controller and controller in controllers.split(",")) or (not controller and controllers == ""):
            return path
    return None


def _new_cgroup(parent: Path, uid: int) -> Path:
    """A new cgroup for ``uid`` below ``parent``, once the empty ones a grader that died left
    there for it are removed (the uid is locked by this process now)."""
    for old in parent.glob(f"autograder-{uid}-*"):
        try:
            old.rmdir()
        except OSError:
            pass
    folder = parent / f"autograder-{uid}-{os.getpid()}"
    folder.mkdir(exist_ok=True)
    return folder


def memory_cgroup(uid: int, mb: int, cgroups: bool = True) -> tuple[str | None, str]:
    """A new memory cgroup (v1, or v2 with the memory controller) below the grader's own, limited
    to ``mb`` MiB; returns (its folder or None, how memory is limited). ``cgroups``: False where
    the operator turned them off (``AUTOGRADER_MEMORY_CGROUP``)."""
    if not cgroups:
        return None, f"memory limit {mb} MiB per process (RLIMIT_DATA: memory cgroups turned off)"
    limit = str(mb << 20)
    v1 = Path("/sys/fs/cgroup/memory")
    try:
        own = _own_cgroup("memory")
        if own is not None and (v1 / "memory.limit_in_bytes").exists():
            folder = _new_cgroup(v1 / own.lstrip("/"), uid)
            (folder / "memory.limit_in_bytes").write_text(limit)
            if (folder / "memory.memsw.limit_in_bytes").exists():
                (folder / "memory.memsw.limit_in_bytes").write_text(limit)
            return str(folder), f"memory limit {mb} MiB (a memory cgroup, v1)"
        v2 = Path("/sys/fs/cgroup")
        own = _own_cgroup("")
        if own is not None and "memory" in (v2 / "cgroup.controllers").read_text().split():
            parent = v2 / own.lstrip("/")
            if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                (parent / "cgroup.subtree_control").write_text("+memory")
            folder = _new_cgroup(parent, uid)
            (folder / "memory.max").write_text(limit)
            if (folder / "memory.swap.max").exists():
                (folder / "memory.swap.max").write_text("0")
            return str(folder), f"memory limit {mb} MiB (a memory cgroup, v2)"
    except OSError:
        pass
    return None, f"memory limit {mb} MiB per process (RLIMIT_DATA: no memory cgroup could be made)"


def thread_cap(nproc: int) -> int:
    """Processes and threads one kernel or program runner may have (``pids.max``, and
    ``RLIMIT_NPROC``), never more than ``nproc`` (``AUTOGRADER_NPROC``): enough for JAX's thread
    pools here, far from the hundreds of busy threads that would starve its neighbours."""
    return min(nproc, max(256, 16 * (os.cpu_count() or 1)))


def cpu_quota_cores() -> int:
    """The CPUs one kernel or program runner may use at once (``cpu.max``/``cfs_quota_us``):
    all but one where there are several, so that a submission never takes the whole machine."""
    return max(1, (os.cpu_count() or 1) - 1)


def share_cgroups(uid: int, threads: int, memory: str | None = None, cgroups: bool = True) -> tuple[list[str], str]:
    """New cgroups below the grader's own giving a kernel (or program runner) of ``uid`` an
    equal CPU share, at most :func:`cpu_quota_cores` CPUs and ``threads`` threads: ``(their
    folders, how CPU and threads are limited)``. cgroup v1 (the cpu and pids hierarchies) or v2
    (set on ``memory``, the memory cgroup, where there is one: a process is in one cgroup of
    v2); none where they cannot be made (``RLIMIT_NPROC`` alone then caps threads)."""
    if not cgroups:
        return [], "no CPU share (cgroups turned off)"
    cores = cpu_quota_cores()
    made: list[str] = []
    try:
        v1 = {c: Path("/sys/fs/cgroup") / c for c in ("cpu", "pids")}
        if (v1["cpu"] / "cpu.shares").exists() and (v1["pids"] / "cgroup.procs").exists():
            for controller, root in v1.items():
                own = _own_cgroup(controller)
                if own is None:
                    raise OSError(f"no {controller} cgroup")
                folder = _new_cgroup(root / own.lstrip("/"), uid)
                made.append(str(folder))
                if controller == "cpu":
                    period = int((folder / "cpu.cfs_period_us").read_text())
                    (folder / "cpu.cfs_quota_us").write_text(str(cores * period))
                else:
                    (folder / "pids.max").write_text(str(threads))
            return made, f"{cores} CPU(s) and {threads} threads at most, an equal CPU share (cgroups v1)"
        v2 = Path("/sys/fs/cgroup")
        own = _own_cgroup("")
        if own is not None and {"cpu", "pids"} <= set((v2 / "cgroup.controllers").read_text().split()):
            parent = v2 / own.lstrip("/")
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            for controller in ("cpu", "pids"):
                if controller not in enabled:
                    (parent / "cgroup.subtree_control").write_text(f"+{controller}")
            if memory:  # one cgroup per process in v2: the memory cgroup's, where there is one
                folder = Path(memory)
            else:
                folder = _new_cgroup(parent, uid)
                made.append(str(folder))
            (folder / "cpu.weight").write_text("100")
            (folder / "cpu.max").write_text(f"{cores * 100000} 100000")
            (folder / "pids.max").write_text(str(threads))
            return made, f"{cores} CPU(s) and {threads} threads at most, an equal CPU share (cgroups v2)"
    except OSError:
        pass
    for folder in reversed(made):
        try:
            os.rmdir(folder)
        except OSError:
            pass
    return [], f"no CPU share (no cgroup could be made); {threads} threads at most (RLIMIT_NPROC)"
