"""Was a time limit the learner's, or the machine's? A test that ran out of time while its
process (the learner's kernel, a program runner) was starved by others is not graded (an error,
never a zero); one that ran out of time with the CPU it asked for is the learner's.

Read from the Linux scheduler's own accounting of the process tree's threads
(``/proc/PID/task/TID/schedstat``: time run on a CPU, time spent runnable but waiting for one):
starved means it got less than :data:`SHARE` of the wall time on a CPU while it waited to run
for at least as much. Code that sleeps or blocks waits for no CPU (its timeout is its own); code
that runs many threads of its own gets CPU (its timeout is its own as well).
"""
from __future__ import annotations

import os
import time

SHARE = 0.5  # the share of the wall time below which a process that waited to run was starved


class Starved(Exception):
    """A time limit ran out while the machine was starved: the test is not graded.
    ``str(err)`` says so, for the learner and the instructor."""


# The kernel lists each thread's children where it is built with CONFIG_PROC_CHILDREN.
_CHILDREN_LISTED = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants: from each thread's ``children`` list (no scan of every
    process), else from psutil's scan."""
    if not _CHILDREN_LISTED:
        try:
            import psutil

            return [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
        except Exception:  # noqa: BLE001 - psutil missing, or the process gone
            return [pid]
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return found


def cpu_and_wait(pid: int) -> tuple[float, float] | None:
    """``(run, wait)`` seconds of every thread of the process tree at ``pid`` (on a CPU,
    runnable and waiting for one), or None where the scheduler does not say (not Linux)."""
    run = wait = 0
    seen = False
    for p in _tree(pid):
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/schedstat") as f:
                    fields = f.read().split()
                run, wait, seen = run + int(fields[0]), wait + int(fields[1]), True
            except (OSError, ValueError, IndexError):
                continue
    return (run / 1e9, wait / 1e9) if seen else None


class Watch:
    """Started when a timed request starts; :meth:`starved` when its time ran out."""

    def __init__(self, pid: int | None):
        self.pid = pid
        self.start = time.monotonic()
        self.before = cpu_and_wait(pid) if pid else None

    def starved(self) -> bool:
        if self.before is None:
            return False
        now = cpu_and_wait(self.pid)
        wall = time.monotonic() - self.start
        if now is None or wall <= 0:
            return False
        run, wait = now[0] - self.before[0], now[1] - self.before[1]
        return run < SHARE * wall and wait >= SHARE * wall

    def message(self, what: str) -> str:
        return (f"Not graded: {what} ran out of time while the grading machine was too busy to run it "
                f"(it ran on a CPU for less than {SHARE:.0%} of the time, waiting for one instead); "
                "grade it again when the machine has CPU to spare.")
