"""The judge decides two tests side by side (``run_judge``), one at a time where a judge asks.

No kernel here: the tests of a small judge file sleep and record how many of them run at once;
the kernel is a :class:`autograder.judge.Kernel` whose channel is never used.
"""
from __future__ import annotations

import textwrap

from autograder.judge import Kernel, run_judge

JUDGE = textwrap.dedent('''
    import threading
    import time

    import autograder as ag

    SERIAL_TESTS = {serial}
    RUNNING, PEAK, DRAWS, LOCK = [0], [0], {{}}, threading.Lock()


    def _work(k, name):
        with LOCK:
            RUNNING[0] += 1
            PEAK[0] = max(PEAK[0], RUNNING[0])
        DRAWS[name] = int(k.rng.integers(0, 2**62))
        time.sleep(0.3)
        with LOCK:
            RUNNING[0] -= 1


    def test_a(k):
        _work(k, "a")


    def test_b(k):
        _work(k, "b")
        ag.fail("state", "b is wrong")


    def test_c(k):
        _work(k, "c")
''')


def _judge(tmp_path, serial: bool, seed: int):
    from autograder.judge import judge_path, load_judge

    folder = tmp_path / ("serial" if serial else "side-by-side") / "07_x"
    folder.mkdir(parents=True, exist_ok=True)
    judge_path(folder).write_text(JUDGE.format(serial=serial))
    verdicts = run_judge(folder, kernel=Kernel(channel=object(), seed=seed))
    return verdicts, load_judge(judge_path(folder))


def test_tests_are_judged_two_at_a_time_with_their_own_verdicts_and_draws(tmp_path):
    verdicts, module = _judge(tmp_path, serial=False, seed=7)
    assert module.PEAK[0] == 2
    assert list(verdicts) == ["test_a", "test_b", "test_c"]
    assert verdicts["test_a"].passed and verdicts["test_c"].passed and "b is wrong" in verdicts["test_b"].feedback
    draws = dict(module.DRAWS)
    assert len(set(draws.values())) == 3  # each test its own generator
    again, module2 = _judge(tmp_path / "again", serial=False, seed=7)
    assert module2.DRAWS == draws  # seeded in test order: the same seed, the same draws


def test_a_judge_that_asks_for_it_is_run_one_test_at_a_time(tmp_path):
    verdicts, module = _judge(tmp_path, serial=True, seed=7)
    assert module.PEAK[0] == 1
    assert verdicts["test_a"].passed and verdicts["test_c"].passed and "b is wrong" in verdicts["test_b"].feedback


# --------------------------------------------------------------------------- one test's hang is not the other's time

HANG_AND_STEADY = textwrap.dedent('''
    def test_hangs(k):
        k.fn("sleepy")(60.0)  # learner code that never returns in time


    def test_steady(k):
        for _ in range(2):  # 3 s of the test's 4: each call longer than the 1 s a late request still gets
            assert k.fn("sleepy")(1.5) == 1.5
''')


def test_a_test_whose_code_hangs_costs_the_test_beside_it_none_of_its_time(tmp_path):
    """Two tests judged side by side share the kernel: while one's request hangs until its time
    limit, the other's waits. That wait is not the waiting test's time: it keeps its whole limit
    for its own requests (otherwise it would fail for the other's hang)."""
    import os

    from autograder.judge import judge_path

    from conftest import ROOT, start_ipc_kernel

    folder = tmp_path / "07_x"
    folder.mkdir()
    judge_path(folder).write_text(HANG_AND_STEADY)
    km, kc = start_ipc_kernel(cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        kc.execute_interactive("import time\ndef sleepy(s):\n    time.sleep(s)\n    return s\n", timeout=60)
        kernel = Kernel(kc, timeout=4, alive=km.is_alive, interrupt=km.interrupt_kernel, seed=1)
        verdicts = run_judge(folder, kernel=kernel)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert not verdicts["test_hangs"].passed and "time limit" in verdicts["test_hangs"].feedback, verdicts
    assert verdicts["test_steady"].passed, verdicts
