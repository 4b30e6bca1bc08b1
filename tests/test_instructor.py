"""The instructor walk-through of the README: collect -> autograde -> feedback -> export."""
from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT, released_notebook, solution_notebook

pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("instructor")]
A = "01_phases"
TIMESTAMP = "2026-11-30 17:05:09.123456 UTC"


def _cli(*args):
    proc = subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("class")
    lms = tmp / "lms"
    lms.mkdir()
    shutil.copy(solution_notebook(A), lms / "alice_01_phases_final.ipynb")
    shutil.copy(solution_notebook(A), lms / "alicetwin_copy.ipynb")
    shutil.copy(released_notebook(A), lms / "bob_attempt.ipynb")
    (lms / "carol_broken.ipynb").write_text("{ this is not a notebook")
    with zipfile.ZipFile(lms / "dave_upload.zip", "w") as zf:
        zf.write(solution_notebook(A), f"{A}.ipynb")
    (lms / "notes.txt").write_text("not a submission")
    state = tmp / "state"
    collected = _cli("collect", lms, "--assignment", A, "--state", state)
    # what nbgrader's exchange collect leaves beside a submission
    (state / "submitted" / "alice" / A / "timestamp.txt").write_text(TIMESTAMP)
    (state / "submitted" / "alice" / A / "submission_secret.txt").write_text("s3cret")
    _cli("autograde", "--state", state)
    _cli("feedback", "--state", state)
    _cli("export", "--state", state)
    return state, collected


def test_collect_uses_student_ids_and_skips_strangers(course):
    state, proc = course
    students = sorted(p.name for p in (state / "submitted").iterdir())
    assert students == ["alice", "alicetwin", "bob", "carol", "dave"]
    assert "notes.txt" in proc.stderr


def test_export_has_every_student_and_exercise(course):
    state, _ = course
    rows = list(csv.DictReader((state / "grades.csv").open()))
    totals = {}
    for r in rows:
        totals.setdefault(r["student"], 0.0)
        totals[r["student"]] += float(r["points"])
    assert totals == {"alice": 4.0, "alicetwin": 4.0, "bob": 0.0, "carol": 0.0, "dave": 4.0}
    assert len(rows) == 5 * 4


def test_grading_is_deterministic(course):
    state, _ = course
    import json

    a = json.loads((state / "autograded" / "alice" / A / "result.json").read_text())
    b = json.loads((state / "autograded" / "alicetwin" / A / "result.json").read_text())
    assert a["tests"] == b["tests"]


def test_feedback_pages_show_messages_not_hidden_tests(course):
    state, _ = course
    page = (state / "feedback" / "bob" / A / f"{A}.html").read_text()
    assert "not answered yet" in page
    judge = (ROOT / "solutions" / A / "judge.py").read_text()  # the hidden tests: the trusted judge
    hidden = [line.strip() for line in judge.splitlines() if len(line.strip()) > 30 and "fail(" not in line]
    assert hidden and not [line for line in hidden if line in page]
    assert "not valid JSON" in (state / "feedback" / "carol" / A / f"{A}.html").read_text()


def test_autograded_notebooks_for_the_formgrader(course):
    state, _ = course
    assert (state / "autograded" / "alice" / A / f"{A}.ipynb").exists()


def test_gradebook_keeps_nbgraders_submission_timestamp(course):
    """The formgrader counts a submission as autograded only when the gradebook's timestamp is
    the one in submitted/<student>/<assignment>/timestamp.txt."""
    from nbgrader.api import Gradebook
    from nbgrader.utils import parse_utc

    state, _ = course
    with Gradebook(f"sqlite:///{state / 'gradebook.db'}") as gb:
        stamp = gb.find_submission(A, "alice").timestamp
    assert stamp is not None and parse_utc(stamp) == parse_utc(TIMESTAMP)


def test_feedback_pages_carry_what_release_feedback_needs(course):
    state, _ = course
    folder = state / "feedback" / "alice" / A
    assert (folder / "timestamp.txt").read_text() == TIMESTAMP
    assert (folder / "submission_secret.txt").read_text() == "s3cret"


def test_export_to_standard_output(course):
    state, _ = course
    out = _cli("export", "--state", state, "--out", "/dev/stdout").stdout
    rows = list(csv.DictReader(out.splitlines()))
    assert {r["student"] for r in rows} == {"alice", "alicetwin", "bob", "carol", "dave"}


def test_collect_never_reads_more_than_the_grader_would(tmp_path, monkeypatch, capsys):
    """A zip member that expands to 3 MB (a zip bomb, in small) and a corrupt zip, with the
    grader's limit at 1 MB: collect unzips at most the limit and a byte (never the whole member
    into memory) and says so, and grading says the notebook is too large; a 3 MB notebook file
    is copied as it is (grading names its size); the corrupt zip is kept as is and graded as not
    a notebook."""
    from autograder.grading import grade_notebook
    from autograder.instructor import Course, collect

    monkeypatch.setenv("AUTOGRADER_MAX_NOTEBOOK_MB", "1")
    lms = tmp_path / "lms"
    lms.mkdir()
    big = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5, "pad": "' + b" " * 3 * 2**20 + b'"}'
    with zipfile.ZipFile(lms / "erin_bomb.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{A}.ipynb", big)
    assert (lms / "erin_bomb.zip").stat().st_size < 2**16
    (lms / "frank_big.ipynb").write_bytes(big)
    (lms / "gina_bad.zip").write_bytes(b"PK\x03\x04 truncated")
    course = Course(root=ROOT, state=tmp_path / "state")
    got = dict(collect(lms, A, course))
    err = capsys.readouterr().err
    assert sorted(got) == ["erin", "frank", "gina"]
    assert got["erin"].stat().st_size == 2**20 + 1 and got["frank"].stat().st_size == len(big)
    assert "erin_bomb.zip holds a notebook over 1 MB" in err and "frank" not in err
    for student in ("erin", "frank"):
        r = grade_notebook(got[student], root=ROOT)
        assert r.score == 0 and "more than the 1 MB the grader reads" in r.error, r.error
    assert "is 3 MB" in grade_notebook(got["frank"], root=ROOT).error
    assert "gina_bad.zip cannot be unzipped" in err
    assert "not valid JSON" in grade_notebook(got["gina"], root=ROOT).error

