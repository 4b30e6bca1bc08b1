"""A time limit that ran out while the machine was starved is not graded (issue 33, item 3):
read from the scheduler's accounting of the process tree (autograder.judge.starvation)."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from autograder import judge
from autograder.judge import starvation

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the scheduler's accounting is Linux's")


def test_a_sleeping_process_is_never_starved():
    """Code that sleeps or blocks waits for no CPU: its time limit is its own."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        watch = starvation.Watch(proc.pid)
        assert watch.before is not None
        subprocess.run([sys.executable, "-c", "import time; time.sleep(0.3)"], check=True)
        assert not watch.starved()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("run, wait, starved", [
    (0.1, 9.0, True),    # waited to run nearly all the time: the machine's fault
    (9.0, 9.0, False),   # ran most of the time (its own threads competing): its own time
    (0.1, 0.2, False),   # neither ran nor waited: it slept
])
def test_starved_means_little_cpu_while_waiting_for_one(monkeypatch, run, wait, starved):
    samples = iter([(1.0, 1.0), (1.0 + run, 1.0 + wait)])
    monkeypatch.setattr(starvation, "cpu_and_wait", lambda pid: next(samples))
    watch = starvation.Watch(123)
    watch.start -= 10.0  # ten seconds of wall time
    assert watch.starved() is starved


def test_a_starved_timeout_is_not_graded_and_says_so():
    class Starving:
        def request(self, payload):
            raise judge.channel.KernelStarved(starvation.Watch(None).message("the code under test"))

    v = judge.verdict(lambda k: k.call("f", 1), judge.Kernel(channel=Starving()), "test_f")
    assert not v.passed and not v.graded and v.feedback.startswith("Not graded: the code under test ran out")


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
