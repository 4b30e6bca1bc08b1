"""Grade one batch of submissions three ways, side by side in one run (``make bench-grading``).

1. the floor: bare execution of each filled notebook with nbclient (test cells as submitted);
2. ``nbgrader autograde`` on a temporary nbgrader course;
3. this project's batch grading (``python -m autograder grade``), serial (-j 1) and parallel.

Prints seconds per submission and the ratios, and writes docs/bench-grading.md.
Targets: <= 1.3x the bare execution per submission, >= 2x faster than nbgrader autograde,
>= 1.7x speed-up from serial to parallel on 2 cores.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTES = """Why the figures are what they are:

- The floor runs in this script's own process, with nbclient already imported; every other way
  is a command of its own. Once per command, grading pays Python's start-up, `import autograder`
  (NumPy, about 0.3 s of CPU) and nbgrader's import (about 2.5-2.8 s of CPU with jsonschema
  pinned to 4.24.1; it was 7 s with jsonschema 4.25, as nbformat's import alone took 3 s): a
  batch of 6 spreads that over 6 submissions, a class of 300 makes it vanish.
- Per submission, the grader copies a cached gradebook, runs nbgrader's OverwriteCells,
  CheckCellMetadata and SaveAutoGrades (about 0.3 s of CPU); the judge (01_phases is judged)
  calls the learner's functions through the kernel and computes its references in the grading
  process; as root, it sets up the sandbox (mount, PID and network namespaces, a uid and a
  memory cgroup of its own: `unshare`, a launcher and a dozen `mount` calls, tens of
  milliseconds; the sandbox is probed once per command). It saves what the floor spends on a
  graceful kernel shutdown: once every reply is in, it kills the sandbox (or the kernel) at once.
- In parallel, nbgrader, the judge and JAX are imported once, in the parent, before the grading
  processes fork; each then grades one notebook at a time (a process a submission kills costs
  only that notebook).
- Since the hidden tests left the kernel for the judge, the notebooks themselves run in about
  half the time they did, so what a command pays once, serially, in the parent (Python's start,
  nbgrader's import) weighs more: on 2 cores it caps a batch of 6 near a 1.6x parallel speed-up,
  below the 1.7x and 2x targets (a larger batch spreads those costs thinner; not measured here).
- `nbgrader autograde` pays its import once too, and per submission a gradebook update, its
  own preprocessors and a graceful kernel shutdown. Being 2x faster than it on 2 cores needs
  a parallel speed-up of about 2x over a grader that is itself near the floor: the ceiling on
  2 cores. The grader earns its margin on more cores (`--jobs` defaults to one per core).
- Parallel grading runs one kernel per core; JAX's compiler threads of two kernels then share
  the two cores, which keeps the speed-up below 2x even on an idle machine.
- Wall times on a machine shared with other work swing by 50% or more between runs; CPU seconds do
  hardly, so compare those when the load average is near or above the number of cores.
"""
BIN = Path(sys.executable).parent


def _cpu() -> float:
    """CPU seconds of this process and of every child it has waited for (kernels included)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _measured(fn, *args) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``fn(*args)``: CPU time does not grow when the machine is
    shared, so it is the figure to compare on a busy machine."""
    cpu = _cpu()
    wall = fn(*args)
    return wall, _cpu() - cpu


def _load() -> str:
    try:
        return ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def _batch(tmp: Path, assignment: str, n: int) -> list[Path]:
    """``n`` submissions alternating the solution and the released notebook."""
    from autograder.course import released_notebook, source_notebook

    sources = [source_notebook(assignment, ROOT), released_notebook(assignment, ROOT)]
    paths = []
    for i in range(n):
        p = tmp / "batch" / f"student{i:03d}" / assignment / f"{assignment}.ipynb"
        p.parent.mkdir(parents=True)
        shutil.copy(sources[i % 2], p)
        paths.append(p)
    return paths


def bare(paths) -> float:
    import nbformat
    from nbclient import NotebookClient

    start = time.perf_counter()
    for p in paths:
        nb = nbformat.read(str(p), as_version=4)
        NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=600,
                       resources={"metadata": {"path": str(p.parent)}}).execute()
    return time.perf_counter() - start


def nbgrader_autograde(tmp: Path, assignment: str, paths) -> float:
    course = tmp / "nbgrader-course"
    (course / "source").mkdir(parents=True)
    shutil.copytree(ROOT / "solutions" / assignment, course / "source" / assignment)
    env = dict(os.environ, PATH=str(BIN) + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=str(ROOT))
    common = [f"--CourseDirectory.root={course}", "--log-level=ERROR"]
    subprocess.run([str(BIN / "nbgrader"), "generate_assignment", assignment, "--create", *common],
                   cwd=course, env=env, check=True, capture_output=True)
    for i, p in enumerate(paths):
        dest = course / "submitted" / f"student{i:03d}" / assignment / f"{assignment}.ipynb"
        dest.parent.mkdir(parents=True)
        shutil.copy(p, dest)
    start = time.perf_counter()
    subprocess.run([str(BIN / "nbgrader"), "autograde", assignment, "--create", *common],
                   cwd=course, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def ours(paths, jobs: int | None) -> float:
    """``python -m autograder grade``: ``jobs`` grading processes (None: the grader's default)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "autograder", "grade", *map(str, paths), "--json",
                    *(["--jobs", str(jobs)] if jobs else [])], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def _median(pairs):
    """The run of median wall time among ``pairs`` of (wall, CPU)."""
    return sorted(pairs)[len(pairs) // 2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="01_phases")
    parser.add_argument("-n", type=int, default=6, help="submissions in the batch")
    parser.add_argument("--jobs", type=int, default=None,
                        help="grading processes of the parallel run (default: the grader's own)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of every way, interleaved; the median round is reported")
    parser.add_argument("--out", default=str(ROOT / "docs" / "bench-grading.md"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = _batch(tmp, args.assignment, args.n)
        ours(paths[:1], 1)  # warm the gradebook cache, as a second run would find it
        from autograder.batch import default_workers

        jobs = args.jobs or default_workers(len(paths))
        par = f"autograder grade -j {jobs} (parallel)" if args.jobs else \
            f"autograder grade (parallel: its default, {jobs} processes)"
        ways = {"bare nbclient execution (floor)": (bare, paths),
                "nbgrader autograde": (nbgrader_autograde, tmp, args.assignment, paths),
                "autograder grade -j 1 (serial)": (ours, paths, 1),
                par: (ours, paths, args.jobs)}
        load_before = _load()
        runs = {k: [] for k in ways}
        for r in range(args.rounds):  # interleaved: a burst of load hits every way alike
            for k, (fn, *fargs) in ways.items():
                if k == "nbgrader autograde" and r:
                    shutil.rmtree(tmp / "nbgrader-course")  # autograde again from scratch
                runs[k].append(_measured(fn, *fargs))
        m = {k: _median(v) for k, v in runs.items()}
        load_after = _load()
    n = args.n
    t = {k: wall for k, (wall, _) in m.items()}
    cpu = {k: c / n for k, (_, c) in m.items()}
    per = {k: v / n for k, v in t.items()}
    cpu_floor = cpu["bare nbclient execution (floor)"]
    floor = per["bare nbclient execution (floor)"]
    serial = per["autograder grade -j 1 (serial)"]
    parallel = per[par]
    nbg = per["nbgrader autograde"]
    lines = [
        "# Grading benchmark", "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {platform.system()}; batch of {n} submissions of "
        f"`{args.assignment}` (half solved, half released as is), measured in one run of "
        f"{args.rounds} interleaved rounds (each way's median round); "
        f"load average (1, 5, 15 min) {load_before} before and {load_after} after.", "",
        "| way | seconds per submission | vs floor | CPU seconds per submission | vs floor |",
        "| --- | ---: | ---: | ---: | ---: |",
        *[f"| {k} | {v:.2f} | {v / floor:.2f}x | {cpu[k]:.2f} | {cpu[k] / cpu_floor:.2f}x |"
          for k, v in per.items()], "",
        "CPU seconds count every process of the run (grader, workers, kernels); the bare run's "
        "include its kernels and the client, already imported.", "",
        "| target | measured | met |", "| --- | ---: | --- |",
        f"| serial grading <= 1.3x bare execution | {serial / floor:.2f}x | {'yes' if serial / floor <= 1.3 else 'no'} |",
        f"| >= 2x faster than nbgrader autograde (parallel) | {nbg / parallel:.2f}x | {'yes' if nbg / parallel >= 2 else 'no'} |",
        f"| >= 1.7x speed-up serial -> parallel | {serial / parallel:.2f}x | {'yes' if serial / parallel >= 1.7 else 'no'} |",
        "",
        NOTES,
    ]
    report = "\n".join(lines)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
