"""Grade one batch of submissions several ways, side by side in one run (``make bench-grading``).

Three figures, measured in the same run (issue 32's targets, and issue 20's for (b)):

(a) a learner's one-notebook command, ``python -m autograder grade one.ipynb`` (a solved
    notebook: the batch's assignment, and 03_purity, the issue's example), against a fresh
    process that just executes that notebook (nbclient's ``jupyter-execute``): within 1.5x;
(b) serial grading of the batch (``-j 1``) against bare execution of the same notebooks with
    nbclient (test cells as submitted, in this script's process): within 1.3x;
(c) parallel grading's seconds per submission against the grader at issue 32's starting point
    (commit ``START``, taken from git history, grading its own course's notebooks) and against
    ``nbgrader autograde`` on a temporary nbgrader course: no slower than the first, at least 2x
    faster than the second.

Prints seconds per submission and the ratios, and writes docs/bench-grading.md.
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
START = "1f73c28"  # the grader at issue 32's start (kernel zygote with JAX preloaded, one shared program runner)
NOTES = """Why the figures are what they are:

- (a) compares two commands a learner could type, each a fresh process: the grader pays, once,
  Python's start-up, `import autograder`, the sandbox's probe (a contained Python started and
  checked), a grading process and the program runner (a contained Python that imports JAX, started
  first, at a low priority, while the rest imports); it then starts the notebook's kernel first
  (before nbformat: the file is read as JSON first) and imports nbformat and nbgrader while the
  kernel boots (only the preprocessors it runs: nbgrader's and nbconvert's packages import lazily) and JAX (for the judge) in a thread while the kernel runs
  the notebook. The bare command pays start-up, nbclient and the kernel. Both then run the same
  notebook's cells, except the test cells: the bare command runs them in the kernel, the
  grader's judge decides each test from the learner's exported programs, run in the program
  runner (compiled at LLVM's lowest optimization level: compiling costs far more than running
  the judge's small inputs), two tests side by side (one's program runs while the other's
  requests keep the kernel busy). The grader finds a starting kernel ready as soon as it answers
  (jupyter_client's own wait looks in steps of 1 s and 0.2 s) and kills the sandbox once every
  reply is in instead of a graceful kernel shutdown. On 2 cores the grader's extra CPU (the
  runner's and the judge's JAX, nbgrader, the judge's requests: about 2.5 s) competes with the
  kernel, so the ratio swings with the machine's load.
- (b) per submission, the grader copies a cached gradebook, runs nbgrader's OverwriteCells,
  CheckCellMetadata and SaveAutoGrades; the judge calls the learner's functions through the
  kernel and runs their exported programs in the program runner; bubblewrap builds the kernel's
  view (read-only binds of an allow-list) and, as root, the kernel gets a uid and cgroups of its
  own. Serial grading pays, beyond the floor, each notebook's program runner (a contained
  Python importing JAX) and the judge's requests.
- (c) in parallel, the imports are paid once, in the parent, before the grading processes fork;
  its objects are frozen out of the garbage collector's reach first (`gc.freeze()`), so their
  pages stay shared. Each grading process grades one notebook at a time (a process a submission
  kills costs only that notebook); there is one grading process per core and one more. Each
  contained kernel is a fresh Python, placed in its sandbox by the launcher. Each notebook's
  exported programs run in a contained program runner of its own (a Python that imports JAX:
  about 1.3 s of CPU per notebook; one submission's programs never share a process with
  another's, issue 33), where the grader at issue 32's start ran every grading process's programs
  in one runner per command and started each kernel from a zygote that had imported JAX already
  (a root-only fork server). The batch is CPU-bound on 2 cores, so that CPU is wall time. Most of
  a submission's CPU is its kernel's (starting, importing JAX, the notebook's cells, the judge's
  requests).
- `nbgrader autograde` pays its import once too (with its server extensions), and per
  submission a gradebook update, its own preprocessors, the test cells in the kernel and a
  graceful kernel shutdown.
- The package's modules run from bytecode (compiled first, as pip does for an installed package
  and a checkout's first run does unless PYTHONDONTWRITEBYTECODE is set), as the bare command's
  nbclient and Jupyter do; so does the launcher (`python -I -m autograder.sandbox.launcher`),
  which starts several times a notebook.
- Wall times on a machine shared with other work swing by 50% or more between runs; CPU seconds
  hardly do. Each way runs several times, interleaved, and its median round is reported; (a)'s
  two commands run in pairs, back to back (three pairs a round), and its figure is the median of
  the pairs' ratios: a burst of load then slows both runs of a pair.
"""
BIN = Path(sys.executable).parent
ONCE = "once per command"
START_PARALLEL = f"grader at issue 32's start ({START}), parallel (its default)"


def _cpu() -> float:
    """CPU seconds the whole machine has spent (Linux's ``/proc/stat``): every process, the
    contained kernels and program runners included (bubblewrap reaps them, so their time never
    reaches this process's rusage). Others' work counts too: :func:`_background` says how much."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq = map(int, f.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _background(seconds: float = 3.0) -> float:
    """Cores the machine keeps busy while this script waits (others' work, charged to every way's
    CPU seconds in proportion to its wall time)."""
    cpu = _cpu()
    time.sleep(seconds)
    return (_cpu() - cpu) / seconds


def _measured(fn, *args) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``fn(*args)``: the machine's CPU, so on a shared machine
    it counts the others' work too (the report gives the load average)."""
    cpu = _cpu()
    wall = fn(*args)
    return wall, _cpu() - cpu


def _load() -> str:
    try:
        return ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def _batch(tmp: Path, assignment: str, n: int, root: Path = ROOT, name: str = "batch") -> list[Path]:
    """``n`` submissions alternating the solution and the released notebook of the course at
    ``root``."""
    sources = [root / "solutions" / assignment / f"{assignment}.ipynb",
               root / "exercises" / assignment / f"{assignment}.ipynb"]
    paths = []
    for i in range(n):
        p = tmp / name / f"student{i:03d}" / assignment / f"{assignment}.ipynb"
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


def ours(paths, jobs: int | None, root: Path = ROOT) -> float:
    """``python -m autograder grade``: ``jobs`` grading processes (None: the grader's default);
    ``root``: the checkout whose grader runs (``python -m`` imports it from the current folder)."""
    env = dict(os.environ, PYTHONPATH=str(root))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "autograder", "grade", *map(str, paths), "--json",
                    *(["--jobs", str(jobs)] if jobs else [])], cwd=root, env=env, check=True,
                   capture_output=True)
    return time.perf_counter() - start


def once(missing: Path) -> float:
    """``python -m autograder grade`` of one notebook that does not exist: what a command pays
    once whatever its batch (start-up, imports, the parent's preparation, a grading process,
    exit), nearly all on one core."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "autograder", "grade", str(missing), "--json", "--jobs", "1"],
                   cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True)
    return time.perf_counter() - start


def execute_one(path: Path) -> float:
    """nbclient's own command, a fresh Python process that executes ``path`` (outputs kept in
    memory): what a learner's one-notebook command is compared with."""
    start = time.perf_counter()
    subprocess.run([str(BIN / "jupyter-execute"), "--allow-errors", str(path)], cwd=path.parent,
                   check=True, capture_output=True)
    return time.perf_counter() - start


def grade_one(path: Path) -> float:
    """``python -m autograder grade one.ipynb`` as a learner types it, beside the notebook."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "autograder", "grade", str(path)], cwd=path.parent,
                   env=dict(os.environ, AUTOGRADER_COURSE_ROOT=str(ROOT), PYTHONPATH=str(ROOT)),
                   check=True, capture_output=True)
    return time.perf_counter() - start


def old_grader(tmp: Path, commit: str = START) -> Path | None:
    """The checkout of ``commit`` (``git archive``), or None outside a git clone holding it."""
    import io
    import tarfile

    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit],
                                 capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    dest = tmp / "old-grader"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _median(pairs):
    """The run of median wall time among ``pairs`` of (wall, CPU)."""
    return sorted(pairs)[len(pairs) // 2]


def _median_ratio(pairs) -> float:
    """The median of ``grader wall / bare wall`` over pairs run back to back: a burst of load
    that slows one pair slows both of its runs, where medians taken apart can each fall in a
    different burst."""
    ratios = sorted(o[0] / b[0] for o, b in pairs)
    mid = len(ratios) // 2
    return ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="01_phases")
    parser.add_argument("--one", nargs="*", default=None,
                        help="assignments whose solved notebook figure (a) grades alone (default: the "
                             "batch's and 03_purity, the issue's example)")
    parser.add_argument("-n", type=int, default=6, help="submissions in the batch")
    parser.add_argument("--jobs", type=int, default=None,
                        help="grading processes of the parallel run (default: the grader's own)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of every way, interleaved; the median round is reported")
    parser.add_argument("--one-rounds", type=int, default=3,
                        help="pairs of figure (a)'s two commands (back to back) in every round; "
                             "(a) is the median of the pairs' ratios")
    parser.add_argument("--out", default=str(ROOT / "docs" / "bench-grading.md"))
    parser.add_argument("--no-start", action="store_true",
                        help=f"leave out the grader at issue 32's start (commit {START})")
    args = parser.parse_args(argv)
    import compileall

    # The package's bytecode, as pip writes it for an installed package and a checkout's first
    # run does (unless PYTHONDONTWRITEBYTECODE is set): else every process of every run compiles
    # the modules it imports (about 0.2 s of CPU per one-notebook command). The bare runs'
    # nbclient has its bytecode from pip; the grader at issue 32's start gets it here too.
    compileall.compile_dir(str(ROOT / "autograder"), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = _batch(tmp, args.assignment, args.n)
        ours(paths[:1], 1)  # warm the gradebook cache, as a second run would find it
        from autograder.grader.batch import default_workers

        jobs = args.jobs or default_workers(len(paths))
        par = f"autograder grade -j {jobs} (parallel)" if args.jobs else \
            f"autograder grade (parallel: its default, {jobs} processes)"
        ways = {"bare nbclient execution (floor)": (bare, paths),
                "nbgrader autograde": (nbgrader_autograde, tmp, args.assignment, paths),
                "autograder grade -j 1 (serial)": (ours, paths, 1),
                par: (ours, paths, args.jobs)}
        old = None if args.no_start else old_grader(tmp)
        if old is not None:
            compileall.compile_dir(str(old / "autograder"), quiet=1)
        if old is not None:
            old_paths = _batch(tmp, args.assignment, args.n, old, "start-batch")
            ours(old_paths[:1], 1, old)
            ways[START_PARALLEL] = (ours, old_paths, None, old)
        ones = args.one if args.one is not None else list(dict.fromkeys([args.assignment, "03_purity"]))
        pairs = {}  # assignment -> its solved notebook, for figure (a)
        for a in ones:  # a solved notebook of each, in a folder of its own
            pairs[a] = _batch(tmp, a, 1, name=f"one-{a}")[0]
        ways[ONCE] = (once, tmp / "batch" / "missing" / args.assignment / f"{args.assignment}.ipynb")
        load_before, background = _load(), _background()
        runs = {k: [] for k in ways}
        paired = {a: [] for a in ones}  # (grader's (wall, CPU), bare's (wall, CPU)) back to back
        for r in range(args.rounds):  # interleaved: a burst of load hits every way alike
            for k, (fn, *fargs) in ways.items():
                if k == "nbgrader autograde" and r:
                    shutil.rmtree(tmp / "nbgrader-course")  # autograde again from scratch
                runs[k].append(_measured(fn, *fargs))
            for _ in range(max(1, args.one_rounds)):
                for a, one in pairs.items():
                    paired[a].append((_measured(grade_one, one), _measured(execute_one, one)))
        m = {k: _median(v) for k, v in runs.items()}
        load_after = _load()
    n = args.n
    fixed, fixed_cpu = m.pop(ONCE)
    singles = {a: (_median([o for o, _ in p]), _median([b for _, b in p]), _median_ratio(p), len(p))
               for a, p in paired.items()}
    t = {k: wall for k, (wall, _) in m.items()}
    cpu = {k: c / n for k, (_, c) in m.items()}
    per = {k: v / n for k, v in t.items()}
    cpu_floor = cpu["bare nbclient execution (floor)"]
    floor = per["bare nbclient execution (floor)"]
    serial = per["autograder grade -j 1 (serial)"]
    parallel = per[par]
    nbg = per["nbgrader autograde"]

    def met(ok):
        return "yes" if ok else "no"

    lines = [
        "# Grading benchmark", "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {platform.system()}; batch of {n} submissions of "
        f"`{args.assignment}` (half solved, half released as is), measured in one run of "
        f"{args.rounds} interleaved rounds (each way's median round); "
        f"load average (1, 5, 15 min) {load_before} before and {load_after} after.", "",
        "| target | measured | met |", "| --- | ---: | --- |",
        *[f"| (a) a learner's `python -m autograder grade one.ipynb` <= 1.5x a fresh process executing "
          f"it: `{a}`, solved (median of {k} pairs run back to back: {ow:.2f} s against {bw:.2f} s; "
          f"CPU {oc:.2f} s against {bc:.2f} s; the figure is the pairs' median ratio) | "
          f"{ratio:.2f}x | {met(ratio <= 1.5)} |"
          for a, ((ow, oc), (bw, bc), ratio, k) in singles.items()],
        f"| (b) serial grading <= 1.3x bare execution of the same notebooks | {serial / floor:.2f}x | "
        f"{met(serial / floor <= 1.3)} |",
        *([f"| (c) parallel grading no slower than the grader at issue 32's start "
           f"({per[START_PARALLEL]:.2f} s per submission) | {parallel:.2f} s | "
           f"{met(parallel <= per[START_PARALLEL])} |"] if START_PARALLEL in per else []),
        f"| (c) parallel grading >= 2x faster than nbgrader autograde | {nbg / parallel:.2f}x | "
        f"{met(nbg / parallel >= 2)} |", "",
        "| way | seconds per submission | vs floor | CPU seconds per submission | vs floor |",
        "| --- | ---: | ---: | ---: | ---: |",
        *[f"| {k} | {v:.2f} | {v / floor:.2f}x | {cpu[k]:.2f} | {cpu[k] / cpu_floor:.2f}x |"
          for k, v in per.items()], "",
        "CPU seconds are the whole machine's while a way ran (`/proc/stat`): every process of the run "
        "(grader, workers, contained kernels and program runners), and on a shared machine others' "
        f"work too (before the rounds, the machine kept {background:.2f} cores busy while this "
        "script waited); the bare run's include its kernels and the client, already imported."
        + (f" The grader at issue 32's start (commit {START}, from git history) grades its own "
           f"course's `{args.assignment}` as it stood then (graders and their notebooks go "
           "together)." if START_PARALLEL in per else ""), "",
        f"What a command pays once (grading one missing notebook: start-up, imports, the "
        f"parent's preparation, a grading process, exit): {fixed:.2f} s, {fixed_cpu:.2f} s of CPU.", "",
        NOTES,
    ]
    report = "\n".join(lines)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
