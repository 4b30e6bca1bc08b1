"""No shared fate (issue 33, item 3): one submission's programs never run in a process that
runs another's. Each notebook's judge starts a program runner of its own and stops it when its
tests are judged; a batch of three notebooks starts three."""
from __future__ import annotations

import time

import pytest


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
                # the runner itself (``python -s -P -m autograder.judge.runner_child serve``), not the
                # sandbox's launcher or bwrap before it, whose command lines end the same way
                if line[-2:] == ["autograder.judge.runner_child", "serve"] and \
                        not any(a == "autograder.sandbox.launcher" or a.endswith("bwrap") for a in line):
                    seen.add(p.pid)
            time.sleep(0.02)
        code = proc.wait()
        stdout.seek(0)
        return code, stdout.read(), seen


@pytest.mark.notebook
@pytest.mark.slow
def test_a_parallel_batch_starts_a_program_runner_per_notebook_and_a_missing_notebook_none(tmp_path):
    import json
    import sys

    from conftest import ROOT, fill_answers, solution_notebook

    a = "01_phases"
    paths = [fill_answers(solution_notebook(a), {}, tmp_path / f"s{i}" / a / f"{a}.ipynb") for i in range(3)]
    code, out, runners = _runners_while([sys.executable, "-m", "autograder", "grade", *map(str, paths),
                                         "--json", "--jobs", "2"], cwd=ROOT)
    results = json.loads(out)
    assert code == 0 and all(r["score"] == r["max_score"] > 0 for r in results), results
    assert len(runners) == 3, runners  # one per submission, though two grading processes graded them
    code, out, runners = _runners_while([sys.executable, "-m", "autograder", "grade",
                                         str(tmp_path / "nowhere" / a / f"{a}.ipynb"), "--json"], cwd=ROOT)
    assert not runners, runners  # nothing to judge: no runner started
    assert "no such file" in json.loads(out)["error"], out
