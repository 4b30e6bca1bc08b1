"""Shared helpers for the test suite: paths, filling answers into notebooks, grading."""
from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
COURSE_NOTEBOOKS = sorted((ROOT / "course").glob("*.ipynb"))


def released_notebook(assignment: str) -> Path:
    return ROOT / "exercises" / assignment / f"{assignment}.ipynb"


def solution_notebook(assignment: str) -> Path:
    return ROOT / "solutions" / assignment / f"{assignment}.ipynb"


def fill_answers(src: Path, answers: dict, dest: Path) -> Path:
    """Copy ``src`` to ``dest`` with the answer cells named in ``answers`` (grade_id -> source) replaced,
    the way a learner (or the acceptance tests) fill in a released notebook."""
    nb = nbformat.read(str(src), as_version=4)
    seen = set()
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
            seen.add(gid)
    missing = set(answers) - seen
    assert not missing, f"no answer cells {missing} in {src}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(dest))
    return dest


def wrong_answers(assignment: str) -> dict:
    """``{grade_id: [(source, expected feedback phrase, idea), ...]}`` from tests/wrong_answers/."""
    path = ROOT / "tests" / "wrong_answers" / f"{assignment}.py"
    return runpy.run_path(str(path))["WRONG"] if path.exists() else {}


def run_grader(paths, *extra, timeout=900):
    """Run ``python -m autograder grade PATHS --json`` and return (results, stderr, returncode)."""
    cmd = [sys.executable, "-m", "autograder", "grade", *map(str, paths), "--json", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"grader stdout is not JSON: {proc.stdout[:2000]!r}\nstderr: {proc.stderr[-3000:]}")
    return data, proc.stderr, proc.returncode


def wait_until_serving(proc, url: str, seconds: float, what: str, log=lambda: "") -> None:
    """Poll ``url`` until it answers; fail (with ``log()``) if ``proc`` exits or ``seconds`` pass."""
    import time
    import urllib.request

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}: {log()}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"{what} did not answer on {url} within {seconds:g} s: {log()}")
