"""The suite's own scheduling (tests/xdist_groups.py, taken by tests/conftest.py): under ``make test``'s ``--dist loadgroup``, the
tests that share a module's fixture run on one worker, which makes the fixture once."""
from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

SHARED = """\
import os, time, pytest

@pytest.fixture(scope="module")
def made():
    with open("made.txt", "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")

@pytest.mark.parametrize("i", range(4))
def test_uses_it(made, i):
    time.sleep(0.3)
    with open("ran.txt", "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")

@pytest.mark.parametrize("i", range(4))
def test_other(i):
    time.sleep(0.3)
"""

# the suite's hook (tests/conftest.py takes it from tests/xdist_groups.py)
HOOK = f"""\
import sys
sys.path.insert(0, {str(ROOT / "tests")!r})
from xdist_groups import pytest_collection_modifyitems
"""


def _run(tmp_path, conftest: str) -> tuple[list[str], list[str]]:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "test_shared.py").write_text(SHARED)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q",
                           "-p", "no:cacheprovider", "test_shared.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return (tmp_path / "made.txt").read_text().split(), (tmp_path / "ran.txt").read_text().split()


def test_a_module_scoped_fixture_is_made_once_and_its_tests_run_on_one_worker(tmp_path):
    made, ran = _run(tmp_path, HOOK)
    assert len(made) == 1, f"the module's fixture was made on workers {made}"
    assert len(ran) == 4 and set(ran) == set(made), ran


def test_without_the_hook_each_worker_makes_it(tmp_path):
    """The control: plain ``--dist loadgroup`` hands the same tests to both workers, each of which
    makes the fixture (what the hook above prevents)."""
    made, ran = _run(tmp_path, "")
    assert len(ran) == 4
    assert len(made) == 2, f"the module's fixture was made on workers {made}"
