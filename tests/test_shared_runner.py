"""One program runner for every grading process of a command (autograder.judge.runner.SharedRunner).

The command's process starts it before its grading processes fork; they take turns on it. A
program that crashes it, a grading process that dies holding it, or a reply out of step
loses only that one call: every process then goes on with a runner of its own.
"""
from __future__ import annotations

import multiprocessing
import os
import time

import numpy as np
import pytest

from autograder import judge
from autograder.judge import runner as runner_mod
from autograder.judge.runner import ProgramFailure

# the forked processes use the runner's pipes only, never JAX
pytestmark = pytest.mark.filterwarnings("ignore:.*fork.*:RuntimeWarning", "ignore:.*fork.*:DeprecationWarning")

judge.ensure_judge_devices()
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import export  # noqa: E402


def _blob(f, *shapes):
    exp = export.export(jax.jit(f), platforms=("cpu",))(*[jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes])
    return bytes(exp.serialize())


def _crash_blob():
    def f(a):  # a LAPACK call whose declared result is far smaller than what LAPACK writes
        out = jax.ffi.ffi_call("lapack_sgetrf_ffi", (jax.ShapeDtypeStruct((1, 1), jnp.float32),
                                                      jax.ShapeDtypeStruct((512,), jnp.int32),
                                                      jax.ShapeDtypeStruct((), jnp.int32)))(a)
        return out[0]
    return _blob(f, (512, 512))


@pytest.fixture
def shared():
    s = runner_mod.share(timeout=20)
    assert s is not None, "the shared runner could not start"
    try:
        yield s
    finally:
        runner_mod.unshare(s)
    assert not runner_mod._SHARED


def _in_forks(n, target, *args):
    """Run ``target(conn, *args)`` in ``n`` forked processes at once; their answers."""
    ctx = multiprocessing.get_context("fork")
    pipes, procs = [], []
    for i in range(n):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=target, args=(child, i, *args))
        p.start()
        pipes.append(parent)
        procs.append(p)
    out = [c.recv() if c.poll(120) else None for c in pipes]
    for p in procs:
        p.join(30)
    return out


def _three_runs(conn, i, blob):
    r = runner_mod.process_runner()  # what a grading process's judge takes
    got = []
    for k in range(3):
        x = np.full(3, float(10 * i + k), np.float32)
        reply = r.run(blob, [x])
        got.append((float(np.asarray(reply["outputs"][0])[0]), float(x[0]) * 3 + 1, r.proc.pid))
    conn.send(got)


def test_grading_processes_take_turns_on_one_runner(shared):
    answers = _in_forks(3, _three_runs, _blob(lambda x: x * 3 + 1, (3,)))
    assert all(a is not None for a in answers), answers
    runs = [run for a in answers for run in a]
    assert all(got == want for got, want, _ in runs), runs
    assert {pid for _, _, pid in runs} == {shared.inner.proc.pid}  # one child answered them all
    assert shared.inner.starts == 1 and shared._state.value == 1


def test_a_crash_loses_only_its_own_call_and_everyone_goes_on_with_their_own(shared):
    double = _blob(lambda x: x * 2, (3,))
    first = shared.inner.proc.pid
    assert float(np.asarray(shared.run(double, [np.ones(3, np.float32)])["outputs"][0])[0]) == 2.0
    # a corrupted heap ends the runner with a crash or, now and then under load, a hang in
    # the allocator: either way that call alone fails and the runner is replaced
    with pytest.raises(ProgramFailure, match="crashed|ran out of time"):
        shared.run(_crash_blob(), [np.ones((512, 512), np.float32)])
    assert shared._state.value == 2  # given up, for every process
    out = shared.run(double, [np.full(3, 4.0, np.float32)])
    assert float(np.asarray(out["outputs"][0])[0]) == 8.0 and shared.proc.pid != first
    answers = _in_forks(2, _three_runs, _blob(lambda x: x * 3 + 1, (3,)))
    assert all(a is not None and all(g == w for g, w, _ in a) for a in answers), answers
    assert all(pid != first for a in answers for _, _, pid in a)


def _die_holding_the_lock(conn, i, shared):
    assert shared._acquire()  # its turn, as a run takes it
    conn.send("holding")
    os._exit(0)  # killed mid-run, as a grading process a submission kills


def _hold_the_turn(conn, i, shared, seconds):
    assert shared._acquire()
    conn.send("holding")
    time.sleep(seconds)
    shared._holder.value = 0
    shared._lock.release()


def test_while_it_starts_a_process_waits_for_its_turn_and_once_ready_only_so_long(shared, monkeypatch):
    """A runner that starts slowly (JAX's import on a busy machine) is waited for, however much
    longer than SHARED_WAIT that takes: its holder only waits for the ready message. Once it is
    ready, a process waits SHARED_WAIT for its turn, then goes on with a runner of its own."""
    import threading

    monkeypatch.setattr(runner_mod, "SHARED_WAIT", 0.3)
    for state, want in ((0, True), (1, False)):
        shared._state.value = state
        holder = threading.Thread(target=lambda: _in_forks(1, _hold_the_turn, shared, 2.0))
        holder.start()
        while not shared._holder.value:
            time.sleep(0.01)
        start = time.monotonic()
        got = shared._acquire()
        took = time.monotonic() - start
        if got:
            shared._holder.value = 0
            shared._lock.release()
        holder.join()
        assert got is want, (state, took)
        assert (took > 1.0) if want else (took < 1.5), (state, took)


def test_a_grading_process_that_dies_holding_it_costs_the_others_a_wait(shared, monkeypatch):
    assert _in_forks(1, _die_holding_the_lock, shared) == ["holding"]
    monkeypatch.setattr(runner_mod, "SHARED_WAIT", 0.5)
    start = time.monotonic()
    out = shared.run(_blob(lambda x: x - 1, (2,)), [np.ones(2, np.float32)])
    assert float(np.asarray(out["outputs"][0])[0]) == 0.0
    assert time.monotonic() - start < 30 and shared.proc.pid != shared.inner.proc.pid
    assert shared._state.value == 2  # the dead holder never gives it back: stopped for every process


def test_a_reply_out_of_step_is_never_taken_for_the_answer(shared):
    seven, nine = _blob(lambda x: x * 0 + 7, (1,)), _blob(lambda x: x * 0 + 9, (1,))
    shared.run(seven, [np.ones(1, np.float32)])  # ready
    shared.inner._send({"op": "run", "id": 1, "program": __import__("base64").b64encode(seven).decode(),
                        "args": [np.ones(1, np.float32)], "placements": None, "facts": False})
    with pytest.raises(ProgramFailure):  # the first reply in the pipe answers the stray request
        shared.run(nine, [np.ones(1, np.float32)])
    out = shared.run(nine, [np.ones(1, np.float32)])  # then a runner of its own
    assert float(np.asarray(out["outputs"][0])[0]) == 9.0


def test_a_shared_runner_that_never_became_ready_says_so_and_the_next_call_runs(shared):
    shared.inner.proc.kill()  # before its ready message was read
    if shared.inner.box is not None and shared.inner.box.contained:
        shared.inner.box.kill_all()
    blob = _blob(lambda x: x + 2, (1,))
    with pytest.raises(ProgramFailure, match="could not start"):
        shared.run(blob, [np.ones(1, np.float32)])
    assert float(np.asarray(shared.run(blob, [np.ones(1, np.float32)])["outputs"][0])[0]) == 3.0


# --------------------------------------------------------------------------- a real batch

def _runners_while(cmd, **kw):
    """Run ``cmd`` and return (its exit status, output, the pids of the program runners it
    started, seen every 20 ms among its descendants)."""
    import subprocess
    import tempfile

    import psutil

    with tempfile.TemporaryFile("w+") as stdout:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.DEVNULL, text=True, **kw)
        me, seen = psutil.Process(proc.pid), set()
        while proc.poll() is None:
            try:
                kids = me.children(recursive=True)
            except psutil.Error:
                break
            for p in kids:
                try:
                    line = p.cmdline()
                except psutil.Error:
                    continue
                # the runner itself (``python -I -m autograder.judge.runner serve``), not the
                # sandbox's launcher or unshare before it, whose command lines end the same way
                if line[-2:] == ["autograder.judge.runner", "serve"] and \
                        not any(a == "autograder.sandbox.launcher" or a.endswith("unshare") for a in line):
                    seen.add(p.pid)
            time.sleep(0.02)
        code = proc.wait()
        stdout.seek(0)
        return code, stdout.read(), seen


@pytest.mark.notebook
@pytest.mark.slow
def test_a_parallel_batch_starts_one_program_runner_and_a_missing_notebook_none(tmp_path):
    import json
    import sys

    from conftest import ROOT, fill_answers, solution_notebook

    a = "01_phases"
    paths = [fill_answers(solution_notebook(a), {}, tmp_path / f"s{i}" / a / f"{a}.ipynb") for i in range(3)]
    code, out, runners = _runners_while([sys.executable, "-m", "autograder", "grade", *map(str, paths),
                                         "--json", "--jobs", "3"], cwd=ROOT)
    results = json.loads(out)
    assert code == 0 and all(r["score"] == r["max_score"] > 0 for r in results), results
    assert len(runners) == 1, runners  # three grading processes, one runner, every program run in it
    code, out, runners = _runners_while([sys.executable, "-m", "autograder", "grade",
                                         str(tmp_path / "nowhere" / a / f"{a}.ipynb"), "--json"], cwd=ROOT)
    assert not runners, runners  # nothing to judge: no runner started
    assert "no such file" in json.loads(out)["error"], out
