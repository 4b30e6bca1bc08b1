"""The control for the hostile corpus (tests/attacks.py): every attack there is real.

tests/test_judge.py shows that no attack earns a point on this checkout's grader. Here the same
table, with the same wrong answers, is graded by the grader of commit ``OLD_GRADER`` (hidden
tests inside the notebook, behind an in-kernel guard), extracted from git history: each attack
must earn full marks there, as issue 11 reports, while the wrong answers alone earn nothing.
An attack weakened until the old guard catches it fails here.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from attacks import A, ATTACKS, OLD_GRADER, WRONG, old_grader_table
from conftest import ROOT, fill_answers

CONTAINED = "pid-namespace+uid"  # the old grader's containment when it runs as root
TABLE = old_grader_table()


def _extract_old_grader(dest: Path) -> None:
    """The old grader's package and 03_purity (released and source notebooks) from git history."""
    found = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{OLD_GRADER}^{{commit}}"],
                           capture_output=True, text=True)
    if found.returncode != 0:
        pytest.fail(f"commit {OLD_GRADER} (the old grader this control runs) is not in the "
                    f"checkout's history: a shallow clone? Run `git fetch --unshallow` "
                    f"({found.stderr.strip()})")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", OLD_GRADER,
                              "autograder", f"exercises/{A}", f"solutions/{A}"],
                             capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")


def _python() -> str:
    """This venv's interpreter by a path without links above it (a venv linked into a clone)."""
    return os.path.join(os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable))


def _reachable(old: Path) -> list:
    """As root, the command prefix that runs the old grader where its sandbox uid can reach what
    it needs: the old grader drops its kernel to a uid of its own without a view of its own, so
    the interpreter (a pyenv Python under root's 0700 home, a venv in a 0700 clone) must be
    reachable by every uid. ``launcher.py expose``, in a mount namespace of the old grader's own,
    puts an empty tmpfs on each such 0700 folder on the way and binds the needed folders back
    (nothing is copied, the machine's mounts are untouched). What the control proves is the
    same: the old grader and its containment are those of commit OLD_GRADER."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return []
    need = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                          sys.base_exec_prefix, os.path.dirname(os.path.realpath(sys.executable)))}
    need.add(str(old))
    return ["unshare", "--mount", "--propagation", "private", "--", sys.executable, "-I", "-S",
            str(ROOT / "autograder" / "grader" / "launcher.py"), "expose", *[f"--path={p}" for p in sorted(need)], "--"]


@pytest.fixture(scope="module")
def old_results(tmp_path_factory):
    """``{case: result}``: the table and the wrong answers alone, graded in one batch."""
    # Not under pytest's temporary folder (0700): the old grader's sandbox uid must read its package.
    old = Path(tempfile.mkdtemp(prefix="old-grader-"))
    try:
        os.chmod(old, 0o755)
        _extract_old_grader(old)
        released = old / "exercises" / A / f"{A}.ipynb"
        subs = tmp_path_factory.mktemp("old-grader-submissions")
        cases = {name: attack.answers() for name, attack in TABLE.items()}
        cases["wrong_answers_alone"] = dict(WRONG)
        paths = [fill_answers(released, answers, subs / name / A / f"{A}.ipynb")
                 for name, answers in cases.items()]
        env = {**os.environ, "XDG_CACHE_HOME": str(old / "cache")}  # its gradebook cache stays here
        proc = subprocess.run([*_reachable(old), _python(), "-m", "autograder", "grade", "--json",
                               *map(str, paths)],
                              capture_output=True, text=True, cwd=old, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results = json.loads(proc.stdout)
        assert [r["notebook"] for r in results] == list(map(str, paths))
        return dict(zip(cases, results))
    finally:
        shutil.rmtree(old, ignore_errors=True)


def _points(r) -> dict:
    return {t["grade_id"]: (t["points"], t["feedback"]) for t in r["tests"]}


def test_the_table_covers_every_attack_class_of_the_issue():
    """Issue 11 lists nine attack classes; each has an entry that the old grader is graded on.
    Entries left out of the control are the ones aimed at the new grader only."""
    assert sorted({a.issue for a in TABLE.values()}) == list(range(1, 10))
    assert all(a.issue is None for name, a in ATTACKS.items() if name not in TABLE)
    assert "agent_forges_replies" not in TABLE


@pytest.mark.notebook
@pytest.mark.xdist_group("old-grader-attacks")
def test_the_wrong_answers_alone_earn_nothing_on_the_old_grader(old_results):
    r = old_results["wrong_answers_alone"]
    if os.geteuid() == 0:
        assert r.get("containment") == CONTAINED, r.get("containment_reason")
    assert r["max_score"] == 3.0 and r["score"] == 0.0, _points(r)


@pytest.mark.notebook
@pytest.mark.xdist_group("old-grader-attacks")
@pytest.mark.parametrize("name", list(TABLE))
def test_each_attack_earns_full_marks_on_the_old_grader(old_results, name):
    r = old_results[name]
    assert not r.get("error"), r["error"]
    if os.geteuid() == 0:  # as the issue reports: under the old grader's own containment
        assert r.get("containment") == CONTAINED, r.get("containment_reason")
    assert [t["grade_id"] for t in r["tests"]] == ["test_step", "test_set_diagonal", "test_normalize_batch"]
    assert r["score"] == r["max_score"] == 3.0, _points(r)
