"""Grading many notebooks at once: in parallel over the machine's cores, in order, nothing lost.

Each submission (a :class:`Job`) is graded by :func:`autograder.grader.pipeline.grade_notebook`:
one alone in the command's own process, several in grading processes forked from a warm parent
(nbgrader and the judge's JAX imported once), each grading one notebook at a time; from a process
whose JAX has started its backends (a test, a notebook calling the grader), whose threads a
forked child would not have, they are spawned instead (:func:`start_method`). A submission that
crashes its kernel, times out or cannot be read still gets a row (with the reason and zero for
what could not be graded); in a batch, one that kills its grading process is graded once more in
a fresh one, and after a second death gets a row saying so: it never costs another notebook its
grade, and no submission is silently missing. One whose tests a starved machine left not graded
is graded once more alone, where starved again is its own doing (a zero with the reason).
"""
from __future__ import annotations

import functools
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from ..common.settings import Settings
from .pipeline import Options, grade_notebook
from .result import Result, failed_result
from ..sandbox.containment import NAMESPACE, NONE, PROCESS_GROUP, USER_NAMESPACE
from ..sandbox.judge_memory import limit_judge_memory
from ..sandbox import launcher
from ..sandbox.launch import die_with_parent
from ..sandbox.mounts import private_mounts
from . import startup


def default_workers(n_jobs: int) -> int:
    """One grading process per core, and one more: a grading process often waits (for its
    kernel to start, for a reply), and another one's work fills that time. Never more than
    there are notebooks."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores + 1, n_jobs))


class Job(NamedTuple):
    """One notebook of a batch and how to grade it (a grading process is sent it whole)."""

    path: str
    options: Options


def _grade(job: Job) -> Result:
    try:
        return grade_notebook(job.path, job.options)
    except Exception as exc:  # noqa: BLE001 - the row says why, every test listed at zero
        return _failed(job, f"internal grading error: {type(exc).__name__}: {exc}")


def _failed(job: Job, why: str) -> Result:
    return failed_result(job.path, why, job.options.root or job.options.settings.course_root or None)


def _worker(conn, die_with_parent_now, judge_memory_mb: int) -> None:
    """A grading process: grade the jobs it is sent, one at a time, until it is sent None."""
    die_with_parent_now()
    private_mounts()  # as root: the boxes' tmpfs mounts are this process's, and end with it
    limit_judge_memory(judge_memory_mb)  # a learner's program the judge runs here cannot take the machine's memory
    try:
        while True:
            job = conn.recv()
            if job is None:
                break
            conn.send(_grade(job).as_dict())
    except (EOFError, OSError):
        pass
    finally:
        conn.close()


OVERDUE = ("the grading of this notebook ran {limit:.0f} s, past the notebook's time limit and a "
           "grace period, and was stopped (the grader's own work on it hung, e.g. a program taken "
           "from the notebook that never ends); every other notebook was graded normally")


def job_limit(options: Options) -> float:
    """Seconds a grading process may spend on one notebook before it is killed: the notebook's
    time limit, and as long again, at most a minute, for the grader's work around it. Past that,
    the grading process itself hangs (a judge-side run of a program that never ends cannot be
    interrupted), and only killing it frees the batch."""
    return options.notebook_timeout + min(60.0, options.notebook_timeout)


DIED = ("the grading process died twice while grading this notebook (the submission killed it, "
        "or exhausted the machine's memory or processes); every other notebook was graded normally")


def start_method() -> str:
    """How a batch starts its grading processes: ``"fork"`` (each inherits what the parent imported
    before, :func:`startup.before_fork`), or ``"spawn"`` (a fresh interpreter that imports what it
    needs) where this process's JAX has started its backends. A forked child has its parent's
    memory but only the forking thread: JAX's backends, whose threads and locks stay behind, would
    hang its first computation until the notebook's time limit, and the notebook would end "not
    graded". Importing JAX starts no backend (the batch's parent imports it before forking)."""
    jax = sys.modules.get("jax")
    if jax is None:
        return "fork"
    try:
        from jax._src import xla_bridge

        started = xla_bridge.backends_are_initialized()
    except Exception:  # noqa: BLE001 - a JAX that cannot say: never fork from it
        started = True
    return "spawn" if started else "fork"


class _Worker:
    """A grading process (forked: nbgrader, the judge and JAX imported; or spawned) and its one job."""

    def __init__(self, ctx, judge_memory_mb: int):
        self.conn, child = ctx.Pipe()
        # a forked child calls a function prepared here (it must load nothing); a spawned one loads
        # what it needs itself (its arguments are pickled: a partial of a module's function)
        dies = (die_with_parent() if ctx.get_start_method() == "fork"
                else functools.partial(launcher.die_with_parent, os.getpid()))
        self.proc = ctx.Process(target=_worker, args=(child, dies, judge_memory_mb), daemon=True)
        self.proc.start()
        child.close()
        self.job = None  # the index of the job it is grading
        self.overdue_at = None  # time.monotonic() past which it is killed

    def give(self, i, job):
        import time

        self.job = i
        self.overdue_at = time.monotonic() + job_limit(job.options)
        self.conn.send(job)

    def ask_to_stop(self):
        try:
            self.conn.send(None)
        except OSError:
            pass

    def stop(self):
        self.ask_to_stop()  # again, harmless: a stopping process reads no more
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()
        self.conn.close()


def grade_many(paths, settings: Settings, *, workers: int | None = None, progress: bool = False,
               per_job=None, **options) -> list[Result]:
    """Grade ``paths`` with the command's ``settings`` and ``options`` (:class:`~.pipeline.Options`'
    fields) and return their results in the same order: one in this process (:func:`grade_here`),
    several by ``workers`` grading processes (see the module's docstring). ``per_job(path) -> dict``
    may change options for one path (e.g. ``save_graded``)."""
    paths = [str(p) for p in paths]
    folders = {f for p in paths for f in (Path(p).resolve().parent, Path(p).resolve().parent.parent)}
    options = Options(settings, **{"hide": tuple(sorted(map(str, folders))), **options})  # out of every kernel's sight
    jobs = [_job(p, options, per_job) for p in paths]
    if len(jobs) == 1:
        results = [grade_here(jobs[0], progress)]
    else:
        results = _grade_in_processes(jobs, min(workers or default_workers(len(jobs)), len(jobs)), progress)
    return _starved_graded_alone(jobs, results)


def _job(path: str, options: Options, per_job) -> Job:
    """``path``'s job: the batch's ``options``, with what ``per_job(path)`` changes for it."""
    return Job(path, replace(options, **per_job(path)) if per_job else options)


def _starved_graded_alone(jobs, results: list) -> list:
    """``results`` with each notebook a starved machine left not graded graded once more, alone
    (one at a time, nothing else graded beside it, ``Options.alone``): a test starved again then
    was starved by the submission's own work, and scores zero with that reason
    (:mod:`autograder.judge.starvation`). "Not graded" is never the submission's choice."""
    from ..judge.starvation import is_starved

    for i, r in enumerate(results):
        if any(is_starved(str(t.get("feedback", ""))) for t in r.tests if isinstance(t, dict)):
            job = Job(jobs[i].path, replace(jobs[i].options, alone=True))
            results[i] = grade_here(job) if len(jobs) == 1 else _grade_in_processes([job], 1, False)[0]
    return results


def grade_here(job: Job, progress: bool = False) -> Result:
    """Grade one notebook in this process (a learner's one-notebook command: nothing to fork
    for). As in a grading process, as root its boxes' tmpfs mounts are made in a mount
    namespace of this process's own (before any thread starts), and its data memory is capped
    while it grades (:func:`~autograder.sandbox.judge_memory.limit_judge_memory`), then given back."""
    import resource

    private_mounts()
    bar = _progress(1) if progress else None
    memory = resource.getrlimit(resource.RLIMIT_DATA)
    limit_judge_memory(job.options.settings.judge_memory_mb)
    try:
        result = _grade(job)
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, memory)
    if bar:
        bar.advance()
        bar.close()
    return result


def _grade_in_processes(jobs, workers: int, progress: bool) -> list[Result]:
    import gc
    import multiprocessing
    import time
    from multiprocessing.connection import wait

    results: list[Result | None] = [None] * len(jobs)
    bar = _progress(len(jobs)) if progress else None
    method = start_method()
    if method == "fork":
        # Before the processes fork, once: the imports. Each grading process probes the sandbox
        # while its first kernel boots (pipeline's check_box).
        startup.before_fork(parallel=workers > 1)
    # What the parent holds now is shared with every grading process, page for page, until one
    # writes to it, and a collection of the cyclic garbage collector writes to every object it
    # visits: frozen (moved out of its reach, as the gc module's documentation advises before a
    # fork), those pages stay shared, and no process spends CPU copying them. Unfrozen after the
    # batch (unless the caller had frozen objects of its own), as the caller left it.
    thaw = gc.get_freeze_count() == 0
    gc.freeze()
    ctx = multiprocessing.get_context(method)
    queue = list(range(len(jobs)))
    attempts = [0] * len(jobs)
    pool: list[_Worker] = []

    def finish(i, result):
        results[i] = result
        if bar:
            bar.advance()

    try:
        while queue or any(w.job is not None for w in pool):
            idle = [w for w in pool if w.job is None]
            while len(idle) < len(queue) and len(pool) < workers:
                pool.append(_Worker(ctx, jobs[0].options.settings.judge_memory_mb))
                idle.append(pool[-1])
            for w in idle[:len(queue)]:
                i = queue.pop(0)
                attempts[i] += 1
                w.give(i, jobs[i])
            busy = [w for w in pool if w.job is not None]
            ready = set(wait([w.conn for w in busy] + [w.proc.sentinel for w in busy],
                             timeout=max(0.0, min(w.overdue_at for w in busy) - time.monotonic())))
            for w in busy:
                if w.conn not in ready and w.proc.sentinel not in ready and time.monotonic() > w.overdue_at:
                    i, w.job = w.job, None  # hung: killed, and not graded again (it would hang again)
                    pool.remove(w)
                    w.proc.kill()
                    w.proc.join(timeout=5)
                    w.conn.close()
                    finish(i, _failed(jobs[i], OVERDUE.format(limit=job_limit(jobs[i].options))))
                    continue
                if w.conn not in ready and w.proc.sentinel not in ready:
                    continue
                try:
                    got = w.conn.recv() if w.conn.poll() else None
                except (EOFError, OSError):
                    got = None
                if got is None and w.proc.is_alive():
                    continue  # the result is on its way
                i, w.job = w.job, None
                if got is not None:
                    finish(i, Result.from_dict(got))
                    continue
                pool.remove(w)  # it died grading job i
                w.proc.join(timeout=5)
                w.conn.close()
                if attempts[i] < 2:
                    queue.insert(0, i)  # once more, in a fresh process
                else:
                    finish(i, _failed(jobs[i], DIED))
    finally:
        for w in pool:  # all asked to stop first: each ends its own runners and boxes meanwhile
            w.ask_to_stop()
        for w in pool:
            w.stop()
        if thaw:
            gc.unfreeze()
    bar and bar.close()
    return results  # type: ignore[return-value]


class _progress:
    """A rich progress bar on stderr (plain counts when rich is missing)."""

    def __init__(self, total):
        self.total, self.done = total, 0
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self.p = Progress("grading", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                              console=Console(file=sys.stderr))
            self.p.start()
            self.task = self.p.add_task("grading", total=total)
        except ImportError:
            self.p = None

    def advance(self):
        self.done += 1
        if self.p:
            self.p.advance(self.task)
        else:
            print(f"graded {self.done}/{self.total}", file=sys.stderr)

    def close(self):
        if self.p:
            self.p.stop()


def summary(results) -> str:
    """One paragraph for a person: how many graded, how many could not be, the mean score."""
    graded = [r for r in results if not r.error]
    failed = [r for r in results if r.error]
    lines = [f"{len(results)} notebook(s): {len(graded)} graded, {len(failed)} with problems."]
    if graded:
        mean = sum(r.score for r in graded) / len(graded)
        top = max(r.max_score for r in graded)
        lines.append(f"mean score {mean:.2f} / {top:g}")
    lines.append(containment_summary(results))
    for r in failed:
        lines.append(f"  {r.notebook}: {r.error}")
    return "\n".join(l for l in lines if l)


# how each containment mode ran a kernel, in words (autograder.sandbox.containment's modes)
_HOW = {
    NAMESPACE: "in its own mount, PID and network namespaces under its own unprivileged uid",
    USER_NAMESPACE: "in bubblewrap's unprivileged user, mount, PID and network namespaces",
    NONE: "without any sandbox, as the operator asked",
    PROCESS_GROUP: "with the grader's uid in its own process group only",
}
_CONTAINED = (NAMESPACE, USER_NAMESPACE)


def containment_summary(results) -> str:
    """One line: how the kernels that ran were contained (and why not, where they were not)."""
    ran = [r for r in results if r.containment]
    if not ran:
        return ""
    parts = []
    for mode, how in _HOW.items():
        some = [r for r in ran if r.containment == mode]
        if some:
            reasons = sorted({r.containment_reason for r in some} - {""})
            who = "every kernel" if len(some) == len(ran) else f"{len(some)} of {len(ran)} kernel(s)"
            parts.append(f"{who} ran {how} ({mode}" + (f": {'; '.join(reasons)}" if reasons else "") + ")")
    line = "containment: " + "; ".join(parts)
    if any(r.containment not in _CONTAINED for r in ran):
        line += "; files they write, their network and processes they start in a new session are not contained"
    return line
