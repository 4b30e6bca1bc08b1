"""Was a time limit the learner's, or the machine's? Decided by evidence the learner's code
cannot shape: a *canary* of the grader's own, a short process outside the learner's kernel and
program runner (outside their CPU share), asks for one CPU for a moment when a time limit ran
out; the machine was starved when the canary got less than :data:`SHARE` of it.

What the learner's processes did can only take "not graded" away, never grant it: a request
whose process tree (the kernel, the runner) did not wait for a CPU (it slept, blocked, or ran
most of the time) ran out of its own time whatever the canary says. Their accounting is the
Linux scheduler's (``/proc/PID/task/TID/schedstat``: time run on a CPU, time runnable and
waiting for one).

A starved test is not graded (an error, never a zero: :class:`Starved`); the batch grades such
a notebook again alone (:mod:`autograder.grader.batch`), and a test starved again when graded
alone was starved by the submission itself (where its CPU is not capped, its own threads can
take the machine), so it scores zero with that reason (:func:`starved_alone`).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

SHARE = 0.5          # the share of a CPU (or of the wall time) below which a process was starved
SPIN = 0.3           # seconds the canary asks for a CPU
CANARY_LIMIT = 30.0  # a canary that has not answered by then was starved as well
_SCRIPT = Path(__file__).with_name("canary.py")


class Starved(Exception):
    """A time limit ran out while the machine was starved: the test is not graded.
    ``str(err)`` says so, for the learner and the instructor."""


def canary(spin: float = SPIN, limit: float = CANARY_LIMIT) -> tuple[float, float] | None:
    """``(cpu, wall)`` seconds of a canary process that asked for one CPU for ``spin`` seconds
    (its start not counted); ``None`` when it did not answer within ``limit`` (starved too)."""
    try:
        out = subprocess.run([sys.executable, "-S", "-I", str(_SCRIPT), str(spin)], capture_output=True,
                             text=True, timeout=limit, check=True, stdin=subprocess.DEVNULL).stdout
        cpu, wall = (float(v) for v in out.split())
    except (subprocess.TimeoutExpired, subprocess.CalledProcessError, OSError, ValueError):
        return None
    return cpu, wall


def machine_starved() -> bool:
    """Whether the grader's canary was kept from a CPU now (see :func:`canary`)."""
    got = canary()
    return got is None or got[0] < SHARE * max(got[1], 1e-9)


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
    """Started when a timed request starts (``pid``: the process it runs in, if known);
    :meth:`starved` when its time ran out."""

    def __init__(self, pid: int | None = None):
        self.pid = pid
        self.start = time.monotonic()
        self.before = cpu_and_wait(pid) if pid else None

    def waited(self) -> bool:
        """Whether the request's process tree was kept waiting for a CPU: it ran less than
        :data:`SHARE` of the wall time and waited at least as much (False where the scheduler
        does not say: no process known, not Linux)."""
        if self.before is None:
            return False
        now = cpu_and_wait(self.pid)
        wall = time.monotonic() - self.start
        if now is None or wall <= 0:
            return False
        run, wait = now[0] - self.before[0], now[1] - self.before[1]
        return run < SHARE * wall and wait >= SHARE * wall

    def starved(self) -> bool:
        """The machine's verdict (the canary's), once the process's own says it could have been."""
        return self.waited() and machine_starved()

    def message(self, what: str) -> str:
        return (f"Not graded: {what} ran out of time while the grading machine was too busy to run it "
                f"(a process of the grader's own got less than {SHARE:.0%} of a CPU when it asked for one); "
                "grade it again when the machine has CPU to spare.")


def is_starved(feedback: str) -> bool:
    """Whether a test's ``feedback`` is :meth:`Watch.message`'s: not graded, the machine starved."""
    head, tail = Watch().message("\0").split("\0")
    return feedback.startswith(head) and feedback.endswith(tail)


STARVED_ALONE = ("{what} ran out of time again when the notebook was graded alone, and the machine was "
                 "still kept busy: by the submission's own work (threads or processes it started), since "
                 "nothing else was being graded. Its time limit is its own")


def starved_alone(what: str) -> str:
    """The failure of a test starved again when its notebook was graded alone (a zero)."""
    return STARVED_ALONE.format(what=what)


def is_starved_alone(feedback: str) -> bool:
    """Whether a test's ``feedback`` is :func:`starved_alone`'s (a zero the machine's load decided)."""
    head = STARVED_ALONE.split("{what}")[1][:60]
    return head in feedback
