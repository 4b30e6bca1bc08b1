"""What grading does to be quick, checked by behaviour (the speed itself is measured by
``make bench-grading``, docs/bench-grading.md, never timed here)."""
from __future__ import annotations

import asyncio
import os
import subprocess
import time
import sys

import pytest

from conftest import PROCESSES, ROOT

PY = sys.executable


def _run(program: str) -> str:
    """What tests/processes/``program`` printed, run in a fresh process."""
    proc = subprocess.run([PY, str(PROCESSES / program)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


# --------------------------------------------------------------------------- what a kernel prints

async def _printed_by(kc, code: str, timeout: float = 60) -> str:
    """What running ``code`` on the asynchronous client ``kc`` printed (an error's value too)."""
    msg_id = kc.execute(code)
    text = ""
    while True:
        msg = await kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] in ("stream", "error"):
            text += msg["content"].get("text", "") + str(msg["content"].get("evalue", ""))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return text


def test_one_grading_process_per_core_and_one_more_never_more_than_notebooks():
    from autograder.grader.batch import default_workers

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert default_workers(1000) == cores + 1
    assert default_workers(1) == 1
    assert default_workers(cores) == cores


# --------------------------------------------------------------------------- a judge file loaded once per version

def test_a_judge_file_is_loaded_once_per_process_and_again_when_it_changes(tmp_path):
    from autograder.judge import load_judge

    path = tmp_path / "07_x" / "judge.py"
    path.parent.mkdir()
    path.write_text("LOADS = []\nLOADS.append(1)\ndef test_a(k):\n    pass\n")
    first = load_judge(path)
    assert load_judge(path) is first and first.LOADS == [1]
    path.write_text("LOADS = ['changed']\ndef test_a(k):\n    pass\n")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    second = load_judge(path)
    assert second is not first and second.LOADS == ["changed"]


# --------------------------------------------------------------------------- the garbage collector around the fork

def test_a_batch_freezes_the_parent_for_its_fork_and_leaves_the_collector_as_it_found_it():
    out = _run("batch_fork_freeze.py")
    assert out.split("\n")[:2] == ["[True] 0", "True"], out


def test_one_notebook_is_graded_in_the_commands_own_process_and_its_memory_cap_given_back():
    """No grading process is forked for one notebook; the judge's memory cap it grades under is
    lifted again afterwards (the caller's own limit, as it was)."""
    out = _run("batch_one_notebook.py")
    assert out.split("\n")[:2] == ["0 True True", "True"], out


# --------------------------------------------------------------------------- the benchmark runs

# acct(2) is one switch for the whole machine: the tests that turn process accounting on (the
# bench's breakdown run, the breakdown's own test) run one after the other, on one worker.
PROCESS_ACCOUNTING = pytest.mark.xdist_group("process-accounting")


@pytest.mark.notebook
@PROCESS_ACCOUNTING
def test_make_bench_grading_measures_its_targets_in_one_run(tmp_path):
    """scripts/bench_grading.py (``make bench-grading``) runs end to end on a small batch and
    reports the issue's four targets, each with its figure and verdict, which meter measured
    CPU, the machine's other load, and every way it ran (the figures themselves are the
    report's, never asserted here)."""
    import re

    out = tmp_path / "bench-grading.md"
    proc = subprocess.run([PY, "scripts/bench_grading.py", "-n", "2", "--rounds", "1", "--one-rounds", "1",
                           "--one", "01_phases", "--out", str(out)], capture_output=True, text=True, cwd=ROOT,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = out.read_text()
    assert re.search(r"Meter: \*\*(cgroup v1 cpuacct|cgroup v2|rusage .*)\*\*", report), report[:600]
    assert re.search(r"other work kept \*\*\d+\.\d\d cores\*\* busy", report), report[:600]
    for target, figure in ((r"\(1\) CPU per submission, parallel batch <= 1\.25x nbgrader", r"\d+\.\d\dx"),
                           (r"\(2\) on \d+ cores, parallel >= ", r"\d+\.\d\dx"),
                           (r"\(3\) `python -m autograder grade` of solved `01_phases` <= 1\.5x", r"\d+\.\d\dx"),
                           (r"\(4\) no fork server", r"kernels run .*")):
        row = next((l for l in report.splitlines() if re.search(target, l)), None)
        assert row is not None, (target, report[:2000])
        assert re.search(rf"\| {figure} \| (met|not met.*) \|$", row), row
    for way in ("bare nbclient execution (floor)", "nbgrader autograde", "autograder grade -j 1 (one by one)",
                "autograder grade (parallel)"):
        assert re.search(rf"^\| {re.escape(way)} \| \d+\.\d\d \| \d+\.\d\d \|", report, re.M), way


def _bench_grading():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_grading", ROOT / "scripts" / "bench_grading.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_rewritten_report_keeps_its_hand_written_section(tmp_path):
    """What was changed or tried, with its figures, is written by hand below the measured part:
    rewriting the report carries it over, and a report without it gets none."""
    bench_grading = _bench_grading()
    out = tmp_path / "bench-grading.md"
    assert bench_grading.kept_notes(out) == ""
    notes = f"\n{bench_grading.NOTES}\n\n- a trial: 0.12 s, not kept.\n"
    out.write_text("# Grading benchmark\n\n| old | figures |\n" + notes)
    assert bench_grading.kept_notes(out) == notes
    out.write_text("# Grading benchmark\n\n| no notes |\n")
    assert bench_grading.kept_notes(out) == ""


def test_the_meter_counts_a_way_s_whole_tree_and_nothing_else():
    """The bench's meter charges a way with the CPU of every process it starts (a child's busy
    loop counts) and not the machine's other work (a busy loop running beside it is not
    charged), where a cgroup can be made."""
    meter = _bench_grading().Meter()
    if meter.base is None:
        pytest.skip(f"no cgroup can be made here ({meter.kind})")
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < {}: pass\n"
    beside = subprocess.Popen([sys.executable, "-c", spin.format(3.0)])  # others' work, not the way's
    try:
        def way():
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", spin.format(0.6)], check=True)
            return time.perf_counter() - start

        wall, cpu, others = meter.run(way)
    finally:
        beside.kill()
        beside.wait()
    assert 0.6 <= cpu < 0.6 + 0.5, cpu  # the child's 0.6 s (and a Python's start-up), not the neighbour's
    assert others > 0.1, others  # the neighbour, seen as the machine's other work


@PROCESS_ACCOUNTING
def test_the_breakdown_charges_each_process_of_a_command_by_its_kind(tmp_path):
    """The report's breakdown (process accounting, root only) charges a command's processes each
    with its own CPU, by kind, whoever reaps them: a grandchild whose parent ended before it (its
    busy loop counts) is the command's; a neighbour's busy loop is not. (Accounting counts CPU
    by ticks without stolen time: on a busy virtual machine it reads below the cgroup meter.)"""
    breakdown = _bench_grading().Breakdown(tmp_path)
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < {}: pass\n"
    done = tmp_path / "done"
    grandchild = spin.format(1.0) + f"open({str(done)!r}, 'w').close()\n"
    child = f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {grandchild!r}])\ntime.sleep(0.3)\n"
    command = (f"import os, subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {child!r}])\n"
               f"while not os.path.exists({str(done)!r}): time.sleep(0.05)\ntime.sleep(0.2)\n")
    beside = subprocess.Popen([sys.executable, "-c", spin.format(6.0)])
    try:
        kinds = breakdown.run([sys.executable, "-c", command])
    finally:
        beside.kill()
        beside.wait()
    if kinds is None:
        pytest.skip("no process accounting here (acct(2) needs root)")
    assert kinds["the grading command (imports, forks, results)"][1] == 1, kinds
    cpu, processes = kinds["other"]
    # the child and the grandchild's 1 s (ticks, without what a busy VM's host stole: 0.8 s and more); not
    # the neighbour's 6 s
    assert processes == 2 and 0.5 <= cpu < 2.5, kinds
    assert breakdown.kind("python -s -P -m autograder.judge.runner_child serve", "python", False).startswith("program runners")
    assert breakdown.kind("python -m autograder.sandbox.kernel_launcher -f k.json", "ZMQbg/1", False).startswith("kernels")
    assert breakdown.kind("python -s -P -m autograder.sandbox.launcher kill 61000", "python", False) == "launcher `kill` steps"


# --------------------------------------------------------------------------- a graded kernel starts without ipykernel's debugger

def _with_graded_kernel(box_dir, body):
    """``body(km, kc)`` (a coroutine) on a kernel of :func:`~autograder.sandbox.kernel_manager.kernel_manager_class`
    (uncontained; ``box_dir``, its box, as the grading gives it), started and shut down here."""
    async def go():
        from autograder.sandbox.kernel_manager import kernel_manager_class

        km = kernel_manager_class(None, box_dir, 120)(kernel_name="python3")
        await km.start_kernel(env=dict(os.environ, PYTHONPATH=str(ROOT)))
        kc = km.client()
        try:
            kc.start_channels()
            await kc.wait_for_ready(timeout=60)
            return await body(km, kc)
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    return asyncio.run(go())


def test_a_graded_kernel_starts_without_the_debugger_and_the_notebook_can_still_import_debugpy(tmp_path):
    code = ("import sys, ipykernel.debugger as d\n"
            "print(d._is_debugpy_available, 'pydevd' in sys.modules, sys.argv[1])\n"
            "import debugpy\nprint(debugpy.__name__, '' not in sys.path[:1])")
    out = _with_graded_kernel(tmp_path, lambda km, kc: _printed_by(kc, code)).split()
    assert out[:2] == ["False", "False"] and out[2] == "-f", out  # no debugger; ipykernel's own arguments
    assert out[3:] == ["debugpy", "True"], out  # importable for the notebook; sys.path as ipykernel_launcher leaves it


def test_a_graded_kernel_outside_a_sandbox_talks_on_unix_sockets_in_its_own_box(tmp_path):
    """TCP ports are picked by the parent, freed, then bound by the kernel: in a parallel batch
    another process can take one in between and the kernel dies before it answers (jupyter_client
    issue 154). A kernel given its box uses Unix sockets in it, contained or not."""
    box = tmp_path / "box"
    box.mkdir()

    async def body(km, kc):
        sockets = sorted(p.name for p in box.iterdir() if p.is_socket())
        return km.get_connection_info(), sockets, await _printed_by(kc, "print(6 * 7)")

    info, sockets, out = _with_graded_kernel(box, body)
    assert info["transport"] == "ipc" and info["ip"] == str(box / "k"), info
    assert len(sockets) == 5 and all(s.startswith("k-") for s in sockets), sockets  # its five channels
    assert out.split() == ["42"], out
