"""A time limit that ran out while the machine was starved is not graded, decided by evidence
the learner's code cannot shape (issue 43, item 3): a canary of the grader's own
(autograder.judge.starvation); the learner's process tree can only take "not graded" away (a
process that slept was not starved); a test starved again when its notebook is graded alone
scores zero, with the reason."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from autograder import judge
from autograder.judge import starvation


def test_the_canary_gets_a_cpu_on_a_machine_with_one_to_spare():
    cpu, wall = starvation.canary(spin=0.2)
    assert wall >= 0.2 and 0 < cpu <= wall + 0.05


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_the_canary_is_starved_when_the_machine_is_kept_busy():
    """Three busy processes and the canary on one CPU: the canary gets about a quarter of it."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})  # inherited by the processes started below
    hogs = []
    try:
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
        assert starvation.machine_starved()
    finally:
        os.sched_setaffinity(0, before)
        for h in hogs:
            h.kill()
            h.wait()


@pytest.mark.parametrize("got, starved", [
    ((0.05, 0.3), True),   # kept from a CPU most of the time: the machine's fault
    (None, True),          # no answer within its limit: starved as well
    ((0.29, 0.3), False),  # a CPU when it asked: the time limit was the learner's own
])
def test_starved_is_the_canarys_share_of_a_cpu(monkeypatch, got, starved):
    monkeypatch.setattr(starvation, "canary", lambda *a, **k: got)
    samples = iter([(1.0, 1.0), (1.1, 10.0)])  # a process kept waiting: the canary decides
    monkeypatch.setattr(starvation, "cpu_and_wait", lambda pid: next(samples))
    watch = starvation.Watch(123)
    watch.start -= 10.0
    assert watch.starved() is starved


def test_the_learners_processes_can_only_take_not_graded_away(monkeypatch):
    """Starved needs the canary's verdict: a kernel whose own threads wait for a CPU (contention
    inside its own share, children that exit) shapes nothing while the canary got its CPU; and
    a process that slept was not starved, whatever the canary says."""
    samples = {"busy": [(1.0, 1.0), (1.1, 10.0)], "asleep": [(1.0, 1.0), (1.1, 1.2)]}
    for canary, tree, starved in [((0.3, 0.3), "busy", False), ((0.01, 0.3), "busy", True),
                                  ((0.01, 0.3), "asleep", False)]:
        monkeypatch.setattr(starvation, "canary", lambda *a, _c=canary, **k: _c)
        it = iter(samples[tree])
        monkeypatch.setattr(starvation, "cpu_and_wait", lambda pid, _it=it: next(_it))
        watch = starvation.Watch(123)
        watch.start -= 10.0  # ten seconds of wall time
        assert watch.starved() is starved, (canary, tree)


def test_a_sleeping_process_is_never_starved():
    """Code that sleeps or blocks waits for no CPU: its time limit is its own."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; print(flush=True); time.sleep(30)"],
                            stdout=subprocess.PIPE)
    try:
        proc.stdout.readline()  # started (its start may wait for a CPU on a busy machine): asleep now
        watch = starvation.Watch(proc.pid)
        assert watch.before is not None
        subprocess.run([sys.executable, "-c", "import time; time.sleep(0.3)"], check=True)
        assert not watch.waited() and not watch.starved()
    finally:
        proc.kill()
        proc.wait()


def test_the_tree_counts_a_grandchilds_cpu():
    """A kernel runs below bubblewrap and the launcher: the CPU that counts is a descendant's."""
    proc = subprocess.Popen(["bash", "-c", f"'{sys.executable}' -c 'while True: pass' & wait"])
    try:
        deadline = time.monotonic() + 120
        while (starvation.cpu_and_wait(proc.pid) or (0, 0))[0] < 0.2:
            assert time.monotonic() < deadline, "the busy grandchild's CPU was never counted"
            time.sleep(0.05)
    finally:
        subprocess.run(["pkill", "-P", str(proc.pid)])
        proc.kill()
        proc.wait()


def test_without_children_lists_the_tree_comes_from_psutil(monkeypatch):
    """A kernel built without CONFIG_PROC_CHILDREN lists no thread's children: the tree is then
    psutil's, and a busy grandchild still counts."""
    monkeypatch.setattr(starvation, "_CHILDREN_LISTED", False)
    test_the_tree_counts_a_grandchilds_cpu()


class _Starving:
    def request(self, payload):
        raise judge.channel.KernelStarved(starvation.Watch(None).message("the code under test"))


def test_a_starved_timeout_is_not_graded_and_says_so():
    v = judge.verdict(lambda k: k.call("f", 1), judge.Kernel(channel=_Starving()), "test_f")
    assert not v.passed and not v.graded and v.feedback.startswith("Not graded: the code under test ran out")


def test_starved_again_when_graded_alone_is_a_zero_with_the_reason():
    v = judge.verdict(lambda k: k.call("f", 1), judge.Kernel(channel=_Starving()), "test_f", alone=True)
    assert not v.passed and v.graded
    assert "ran out of time again when the notebook was graded alone" in v.feedback
    assert "submission's own work" in v.feedback
