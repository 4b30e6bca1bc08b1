"""Grade one batch of submissions several ways, side by side in one run (``make bench-grading``).

Each way's CPU is measured per run tree: the way runs in a cgroup of its own (cgroup v1's
``cpuacct``, or v2's ``cpu.stat``), so every process it starts counts, the contained kernels and
program runners that bubblewrap reaps included, and nobody else's. Where no cgroup can be made,
this process's and its reaped children's rusage is used instead, which misses what bubblewrap
reaps (the report says which meter ran). The machine's other work during each way (its
``/proc/stat`` less the way's own) is reported beside it.

The targets (issue 42), each with its verdict:

(1) CPU seconds per submission of a parallel batch at most 1.25x ``nbgrader autograde``'s for
    the same submissions;
(2) on N cores a batch at least 0.8·N times faster than one-by-one grading (``-j 1``);
(3) a learner's one-notebook ``python -m autograder grade`` within 1.5x the wall time of
    ``jupyter execute`` of the same notebook, on a quiet machine;
(4) no fork server, no zygote, no compile cache shared between submissions.

Where the machine allows it (root: BSD process accounting), one more run of the parallel batch
says where a submission's CPU goes, process kind by process kind (:class:`Breakdown`), outside
the meter's group and its figures.

Writes docs/bench-grading.md, keeping its hand-written section on what the figures show pays.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
ONCE = "once per command (a missing notebook)"
BUSY = 0.25  # cores others kept busy above which a wall-time verdict is not a quiet machine's


# --------------------------------------------------------------------------- the meter

class Meter:
    """CPU seconds of everything one way starts (see the module's docstring): :meth:`run` moves
    this process into a new cgroup for the way's duration (the children it starts are born
    there and stay there: nothing else moves processes in the accounting hierarchy), reads the
    cgroup's total, and moves back."""

    def __init__(self):
        self.kind, self.base = self._find()

    @staticmethod
    def _own(controller: str) -> str:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(",") or (not controller and controllers == ""):
                return path
        raise OSError(f"no {controller or 'v2'} cgroup")

    def _find(self) -> tuple[str, Path | None]:
        for kind, mount, controller in (("cgroup v1 cpuacct", Path("/sys/fs/cgroup/cpuacct"), "cpuacct"),
                                        ("cgroup v2", Path("/sys/fs/cgroup"), "")):
            try:
                if kind == "cgroup v2" and not (mount / "cgroup.controllers").exists():
                    continue
                base = mount / self._own(controller).lstrip("/")
                probe = base / f"bench-grading-{os.getpid()}-probe"
                probe.mkdir()
                probe.rmdir()
                return kind, base
            except OSError:
                continue
        return "rusage of this process and its reaped children (misses what bubblewrap reaps)", None

    def _usage(self, group: Path) -> float:
        if self.kind.startswith("cgroup v1"):
            return int((group / "cpuacct.usage").read_text()) / 1e9
        stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6

    def run(self, fn, *args) -> tuple[float, float, float]:
        """``fn(*args)`` (it returns its wall seconds): (wall seconds, the run tree's CPU
        seconds, the other work's CPU seconds on the machine meanwhile)."""
        machine = _machine_cpu()
        if self.base is None:
            before = _rusage()
            wall = fn(*args)
            cpu = _rusage() - before
        else:
            group = self.base / f"bench-grading-{os.getpid()}-{time.monotonic_ns()}"
            group.mkdir()
            try:
                (group / "cgroup.procs").write_text(str(os.getpid()))
                try:
                    wall = fn(*args)
                finally:
                    (self.base / "cgroup.procs").write_text(str(os.getpid()))
                cpu = self._usage(group)
            finally:
                for _ in range(100):  # its last processes are gone once their reaper saw them
                    try:
                        group.rmdir()
                        break
                    except OSError:
                        time.sleep(0.05)
        return wall, cpu, max(0.0, _machine_cpu() - machine - cpu)


def _rusage() -> float:
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def _machine_cpu() -> float:
    """CPU seconds the whole machine has spent (``/proc/stat``)."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq = map(int, f.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _load() -> str:
    try:
        return ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


class Breakdown:
    """A command's CPU seconds by process kind (the grading command, its grading processes, the
    kernels, the program runners, the sandbox's launcher steps, bubblewrap): BSD process
    accounting (``acct(2)``: root only) writes each process's own CPU when it ends, by pid; a
    poller of ``/proc`` meanwhile notes each pid's parent and command line. Every process
    descending from the command counts, whoever reaps it."""

    RECORD = struct.Struct("<BBHIIIIIIf8H16s")  # struct acct_v3 (linux/acct.h)

    def __init__(self, folder: Path):
        self.file = folder / "pacct"

    def run(self, cmd: list[str], **kw) -> dict[str, tuple[float, int]] | None:
        """``{kind: (CPU seconds, processes)}`` of ``cmd``'s run, or None where accounting cannot
        be turned on (not root)."""
        import ctypes
        import threading

        libc = ctypes.CDLL(None, use_errno=True)
        self.file.write_bytes(b"")
        if libc.acct(str(self.file).encode()) != 0:
            return None
        parent, command, stop = {}, {}, threading.Event()
        poller = threading.Thread(target=self._poll, args=(stop, parent, command), daemon=True)
        poller.start()
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
            proc.wait()
            time.sleep(0.5)  # the last processes of its sandboxes, killed, are written
        finally:
            libc.acct(None)
            stop.set()
            poller.join()
        kinds: dict[str, tuple[float, int]] = {}
        for pid, ppid, cpu, comm in self._records():
            parent.setdefault(pid, ppid)  # seen alive: its parent before any reparenting
            if self._descends(pid, proc.pid, parent):
                kind = self.kind(command.get(pid, ""), comm, pid == proc.pid)
                seconds, n = kinds.get(kind, (0.0, 0))
                kinds[kind] = (seconds + cpu, n + 1)
        return kinds

    @staticmethod
    def kind(cmdline: str, comm: str, is_command: bool) -> str:
        """A process's kind from its last command line (a launcher's ``limits`` executes what it
        starts: the kernel's process is the inner launcher's)."""
        words = cmdline.split()
        module = words[words.index("-m") + 1] if "-m" in words[:-1] else ""
        if is_command:
            return "the grading command (imports, forks, results)"
        if module == "autograder":
            return "grading processes (pipeline, judge)"
        if module == "autograder.sandbox.kernel_launcher":
            return "kernels (the notebook, the judge's requests)"
        if module == "autograder.judge.runner_child":
            return "program runners (JAX, the programs)"
        if module == "autograder.sandbox.launcher" and len(words) > words.index("-m") + 2:
            return f"launcher `{words[words.index('-m') + 2]}` steps" + (" (then bubblewrap)" if comm == "bwrap" else "")
        if comm == "bwrap" or (words and words[0].endswith("bwrap")):
            return "bubblewrap"
        return "other"

    def _records(self):
        data = self.file.read_bytes()
        for at in range(0, len(data) - self.RECORD.size + 1, self.RECORD.size):
            f = self.RECORD.unpack_from(data, at)
            if f[1] == 3:  # version 3 records
                yield f[6], f[7], (_comp(f[10]) + _comp(f[11])) / 100.0, f[18].split(b"\0")[0].decode(errors="replace")

    @staticmethod
    def _descends(pid: int, root: int, parent: dict) -> bool:
        for _ in range(64):
            if pid == root:
                return True
            pid = parent.get(pid, 0)
            if pid <= 1:
                return False
        return False

    @staticmethod
    def _poll(stop, parent: dict, command: dict) -> None:
        while not stop.is_set():
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                        cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
                    with open(f"/proc/{entry.name}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                pid = int(entry.name)
                parent.setdefault(pid, ppid)
                if cmdline:
                    command[pid] = cmdline
            stop.wait(0.02)


def _comp(value: int) -> int:
    """acct's comp_t: 13 bits of mantissa, 3 of base-8 exponent (ticks of 1/100 s)."""
    return (value & 0x1FFF) << (3 * ((value >> 13) & 7))


# --------------------------------------------------------------------------- the ways

def _batch(tmp: Path, assignment: str, n: int, name: str = "batch") -> list[Path]:
    """``n`` submissions alternating the solution and the released notebook."""
    sources = [ROOT / "solutions" / assignment / f"{assignment}.ipynb",
               ROOT / "exercises" / assignment / f"{assignment}.ipynb"]
    paths = []
    for i in range(n):
        p = tmp / name / f"student{i:03d}" / assignment / f"{assignment}.ipynb"
        p.parent.mkdir(parents=True)
        shutil.copy(sources[i % 2], p)
        paths.append(p)
    return paths


def bare(paths) -> float:
    """nbclient executing each notebook in this process (test cells as submitted): the floor."""
    import nbformat
    from nbclient import NotebookClient

    start = time.perf_counter()
    for p in paths:
        nb = nbformat.read(str(p), as_version=4)
        NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=600,
                       resources={"metadata": {"path": str(p.parent)}}).execute()
    return time.perf_counter() - start


def nbgrader_autograde(tmp: Path, assignment: str, paths) -> float:
    """``nbgrader autograde`` of the batch on a fresh nbgrader course (its source: the solution):
    the course is made first, outside the meter's group (:func:`nbgrader_course`)."""
    course, env, common = _nbgrader_course
    start = time.perf_counter()
    subprocess.run([str(BIN / "nbgrader"), "autograde", assignment, "--create", *common],
                   cwd=course, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


_nbgrader_course: tuple = ()


def nbgrader_course(tmp: Path, assignment: str, paths) -> None:
    """A fresh nbgrader course whose ``submitted/`` holds the batch (``generate_assignment`` run):
    what :func:`nbgrader_autograde` grades, made before each of its runs and not counted."""
    global _nbgrader_course
    course = tmp / "nbgrader-course"
    shutil.rmtree(course, ignore_errors=True)
    (course / "source").mkdir(parents=True)
    shutil.copytree(ROOT / "solutions" / assignment, course / "source" / assignment)
    env = dict(os.environ, PATH=str(BIN) + os.pathsep + os.environ.get("PATH", ""), PYTHONPATH=str(ROOT))
    common = [f"--CourseDirectory.root={course}", "--log-level=ERROR"]
    subprocess.run([str(BIN / "nbgrader"), "generate_assignment", assignment, "--create", *common],
                   cwd=course, env=env, check=True, capture_output=True)
    for i, p in enumerate(paths):
        dest = course / "submitted" / f"student{i:03d}" / assignment / f"{assignment}.ipynb"
        dest.parent.mkdir(parents=True)
        shutil.copy(p, dest)
    _nbgrader_course = (course, env, common)


def ours(paths, jobs: int | None) -> float:
    """``python -m autograder grade --json`` of ``paths`` with ``jobs`` grading processes (None:
    the grader's default)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "autograder", "grade", *map(str, paths), "--json",
                    *(["--jobs", str(jobs)] if jobs else [])], cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True, capture_output=True)
    return time.perf_counter() - start


def once(missing: Path) -> float:
    """What a command pays whatever its batch: grading one notebook that does not exist."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "autograder", "grade", str(missing), "--json", "--jobs", "1"],
                   cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True)
    return time.perf_counter() - start


def execute_one(path: Path) -> float:
    """``jupyter execute``: nbclient's own command, a fresh process executing ``path``."""
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


# --------------------------------------------------------------------------- target (4): read from the code

def no_shared_process() -> tuple[bool, str]:
    """Target (4), from what the grader starts: each kernel and each program runner is a fresh
    ``python -m`` process of its own (a command line, never a fork of a warm template), and no
    JAX compilation cache reaches a kernel (its environment is an allow-list without one; the
    runner's is written out whole in autograder/judge/runner.py)."""
    from autograder.sandbox import environment, kernel_manager

    cache = {"JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"}
    kernel = kernel_manager.without_debugger([sys.executable, "-m", "ipykernel_launcher", "-f", "c.json"])
    fresh = kernel[1:3] == ["-m", "autograder.sandbox.kernel_launcher"]
    leaks = sorted(cache & set(environment.KERNEL_ENV))
    ok = fresh and not leaks
    return ok, ("kernels run `python -m autograder.sandbox.kernel_launcher`, runners `python -m "
                "autograder.judge.runner_child serve`, each exec'd by the sandbox's launcher; no compilation-cache "
                "variable in the kernel's environment" if ok else
                f"kernel command {kernel[:3]}, cache variables passed: {leaks}")


# --------------------------------------------------------------------------- the report

def _median(runs):
    """The run of median wall time."""
    return sorted(runs)[len(runs) // 2]


def _verdict(ok: bool, wall_based: bool, others: float) -> str:
    if ok:
        return "met"
    if wall_based and others > BUSY:
        return f"not met here (the machine was busy: others kept {others:.2f} cores busy)"
    return "not met"


NOTES = "## What the figures show pays"  # a section written by hand, kept when the report is rewritten


def kept_notes(out: Path) -> str:
    """The hand-written section of the report at ``out`` (from :data:`NOTES` to its end: what was
    changed or tried, each with its figures), carried into the new report; empty if it has none."""
    text = out.read_text() if out.exists() else ""
    at = text.find("\n" + NOTES)
    return text[at:] if at >= 0 else ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="01_phases")
    parser.add_argument("--one", nargs="*", default=None,
                        help="assignments whose solved notebook target (3) grades alone (default: the "
                             "batch's and 03_purity)")
    parser.add_argument("-n", type=int, default=6, help="submissions in the batch")
    parser.add_argument("--jobs", type=int, default=None,
                        help="grading processes of the parallel run (default: the grader's own)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of every way, interleaved; the median round is reported")
    parser.add_argument("--one-rounds", type=int, default=2,
                        help="pairs of target (3)'s two commands (back to back) in every round")
    parser.add_argument("--only", choices=("batch", "one"), default=None,
                        help="measure only the batch's ways or only the one-notebook pairs")
    parser.add_argument("--out", default=str(ROOT / "docs" / "bench-grading.md"))
    args = parser.parse_args(argv)
    import compileall

    # The package's bytecode, as pip writes it for an installed package: else every process of
    # every run compiles the modules it imports.
    compileall.compile_dir(str(ROOT / "autograder"), quiet=1)
    meter = Meter()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = _batch(tmp, args.assignment, args.n)
        ours(paths[:1], 1)  # warm the gradebook cache, as a second run would find it
        ways = {}
        if args.only != "one":
            ways = {"bare nbclient execution (floor)": (bare, paths),
                    "nbgrader autograde": (nbgrader_autograde, tmp, args.assignment, paths),
                    "autograder grade -j 1 (one by one)": (ours, paths, 1),
                    "autograder grade (parallel)": (ours, paths, args.jobs),
                    ONCE: (once, tmp / "missing" / args.assignment / f"{args.assignment}.ipynb")}
        ones = [] if args.only == "batch" else (
            args.one if args.one is not None else list(dict.fromkeys([args.assignment, "03_purity"])))
        singles = {a: _batch(tmp, a, 1, name=f"one-{a}")[0] for a in ones}
        load_before = _load()
        runs = {k: [] for k in ways}
        pairs = {a: [] for a in ones}  # (grade's run, jupyter execute's run), back to back
        for _ in range(args.rounds):  # interleaved: a burst of load hits every way alike
            for k, (fn, *fargs) in ways.items():
                if fn is nbgrader_autograde:
                    nbgrader_course(*fargs)  # its course made afresh, outside the meter
                runs[k].append(meter.run(fn, *fargs))
            for _ in range(max(1, args.one_rounds)):
                for a, one in singles.items():
                    pairs[a].append((meter.run(grade_one, one), meter.run(execute_one, one)))
        load_after = _load()
        breakdown = None
        if ways:  # one more parallel run, accounted process by process (outside the meter)
            breakdown = Breakdown(tmp).run([sys.executable, "-m", "autograder", "grade", *map(str, paths), "--json",
                                            *(["--jobs", str(args.jobs)] if args.jobs else [])],
                                           cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    n = args.n
    m = {k: _median(v) for k, v in runs.items()}
    others_total = sum(o for v in runs.values() for _, _, o in v) + sum(
        g[2] + e[2] for p in pairs.values() for g, e in p)
    wall_total = sum(w for v in runs.values() for w, _, _ in v) + sum(
        g[0] + e[0] for p in pairs.values() for g, e in p)
    others = others_total / wall_total if wall_total else 0.0
    targets = []
    if ways:
        par, nbg, serial = (m["autograder grade (parallel)"], m["nbgrader autograde"],
                            m["autograder grade -j 1 (one by one)"])
        cpu_ratio = par[1] / nbg[1]
        targets.append((f"(1) CPU per submission, parallel batch <= 1.25x nbgrader autograde's "
                        f"({par[1] / n:.2f} s against {nbg[1] / n:.2f} s)", f"{cpu_ratio:.2f}x",
                        _verdict(cpu_ratio <= 1.25, False, others)))
        speedup = serial[0] / par[0]
        targets.append((f"(2) on {cores} cores, parallel >= {0.8 * cores:.1f}x faster than one by one "
                        f"({par[0]:.2f} s against {serial[0]:.2f} s for {n} submissions)", f"{speedup:.2f}x",
                        _verdict(speedup >= 0.8 * cores, True, others)))
    for a, p in pairs.items():
        ratios = sorted(g[0] / e[0] for g, e in p)
        ratio = ratios[len(ratios) // 2]
        g, e = _median([g for g, _ in p]), _median([e for _, e in p])
        targets.append((f"(3) `python -m autograder grade` of solved `{a}` <= 1.5x `jupyter execute` "
                        f"(median of {len(p)} pairs back to back: {g[0]:.2f} s against {e[0]:.2f} s; CPU "
                        f"{g[1]:.2f} s against {e[1]:.2f} s)", f"{ratio:.2f}x", _verdict(ratio <= 1.5, True, others)))
    ok, why = no_shared_process()
    targets.append(("(4) no fork server, no zygote, no compile cache shared between submissions", why,
                    "met" if ok else "not met"))
    lines = [
        "# Grading benchmark", "",
        f"Machine: {platform.processor() or platform.machine()}, {cores} cores, Python "
        f"{platform.python_version()}, {platform.system()}. Meter: **{meter.kind}**, one group per "
        f"run of a way. While the ways ran, the machine's other work kept **{others:.2f} cores** busy "
        f"on average ({'a busy machine: wall-time verdicts are not a quiet machine' + chr(39) + 's' if others > BUSY else 'a quiet machine'}); "
        f"load average (1, 5, 15 min) {load_before} before, {load_after} after. "
        f"{args.rounds} interleaved rounds, each way's median round.", "",
        "| target | measured | verdict |", "| --- | --- | --- |",
        *[f"| {t} | {v} | {ok} |" for t, v, ok in targets], "",
    ]
    if ways:
        floor = m["bare nbclient execution (floor)"]
        lines += [
            f"Batch: {n} submissions of `{args.assignment}` (half solved, half released as is).", "",
            "| way | wall s per submission | CPU s per submission (run tree) | CPU vs floor | others' cores busy meanwhile |",
            "| --- | ---: | ---: | ---: | ---: |",
            *[f"| {k} | {w / n:.2f} | {c / n:.2f} | {c / floor[1]:.2f}x | {o / w:.2f} |"
              for k, (w, c, o) in m.items() if k != ONCE],
            f"| {ONCE}, whole | {m[ONCE][0]:.2f} | {m[ONCE][1]:.2f} | | {m[ONCE][2] / m[ONCE][0]:.2f} |", "",
            "The floor executes the notebooks in the benchmark's own process (nbclient imported once), "
            "test cells as submitted; nbgrader autograde runs no containment and no program checks.", "",
        ]
        if breakdown:
            total = sum(c for c, _ in breakdown.values())
            lines += [
                f"Where a submission's CPU goes: one more parallel run of the batch, each process's own CPU "
                f"from process accounting ({total / n:.2f} s per submission in all, against the meter's "
                f"{par[1] / n:.2f} s: accounting counts by ticks, without what a busy virtual machine's host "
                f"stole).", "",
                "| processes | CPU s per submission | share | processes per submission |",
                "| --- | ---: | ---: | ---: |",
                *[f"| {k} | {c / n:.2f} | {c / total:.0%} | {p / n:.1f} |"
                  for k, (c, p) in sorted(breakdown.items(), key=lambda item: -item[1][0])], "",
            ]
    report = "\n".join(lines) + kept_notes(Path(args.out))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
