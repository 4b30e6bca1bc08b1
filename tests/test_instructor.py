"""The instructor walk-through of the README: collect -> autograde -> feedback -> export."""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
import zipfile
from pathlib import Path

import pytest

from autograder.common.course import test_cells as source_tests
from conftest import PROCESSES, ROOT, STARVED_REGRADES, released_notebook, solution_notebook, starved

pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("instructor")]
A = "01_phases"
FORMGRADER_AUTOGRADE = PROCESSES / "formgrader_autograde.py"  # the formgrader's Autograde button
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
    graded = subprocess.run([sys.executable, "-m", "autograder", "autograde", "--state", state],
                            capture_output=True, text=True, cwd=ROOT, timeout=900)
    _cli("feedback", "--state", state)
    _cli("export", "--state", state)
    return state, collected, graded


def test_autograde_exits_non_zero_naming_a_file_that_is_no_notebook(course):
    """carol's file is not a notebook: she is recorded at zero, everyone else is graded, and the
    exit status says not everything was graded, naming her and the reason."""
    _, _, proc = course
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert f"not a notebook (zero): carol/{A}" in proc.stdout, proc.stdout
    assert f"carol/{A}: " in proc.stderr and "not valid JSON" in proc.stderr, proc.stderr[-3000:]
    assert "autograded 5 submission(s)" in proc.stdout and "alice" not in proc.stdout, proc.stdout


def test_collect_uses_student_ids_and_skips_strangers(course):
    state, proc, _ = course
    students = sorted(p.name for p in (state / "submitted").iterdir())
    assert students == ["alice", "alicetwin", "bob", "carol", "dave"]
    assert "notes.txt" in proc.stderr


def test_export_has_every_student_and_exercise(course):
    state, *_ = course
    rows = list(csv.DictReader((state / "grades.csv").open()))
    totals = {}
    for r in rows:
        totals.setdefault(r["student"], 0.0)
        totals[r["student"]] += float(r["points"])
    tests = source_tests(solution_notebook(A))
    full = sum(points for _, points in tests)
    assert full > 0
    assert totals == {"alice": full, "alicetwin": full, "bob": 0.0, "carol": 0.0, "dave": full}
    assert len(rows) == 5 * len(tests)


def test_export_writes_a_summary_row_per_student(course):
    """grades-summary.csv beside grades.csv: one row per student, a column per assignment, a total,
    agreeing with the long form."""
    state, *_ = course
    long = list(csv.DictReader((state / "grades.csv").open()))
    with (state / "grades-summary.csv").open() as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    assert reader.fieldnames == ["student", A, "total"], reader.fieldnames
    assert [r["student"] for r in rows] == sorted({r["student"] for r in long})
    for r in rows:
        points = sum(float(x["points"]) for x in long if x["student"] == r["student"])
        assert float(r[A]) == points == float(r["total"]), r


def test_grading_is_deterministic(course):
    state, *_ = course
    import json

    a = json.loads((state / "autograded" / "alice" / A / "result.json").read_text())
    b = json.loads((state / "autograded" / "alicetwin" / A / "result.json").read_text())
    assert a["tests"] == b["tests"]


def test_feedback_pages_show_messages_not_hidden_tests(course):
    state, *_ = course
    page = (state / "feedback" / "bob" / A / f"{A}.html").read_text()
    assert "not answered yet" in page
    judge = (ROOT / "solutions" / A / "judge.py").read_text()  # the hidden tests: the trusted judge
    hidden = [line.strip() for line in judge.splitlines() if len(line.strip()) > 30 and "fail(" not in line]
    assert hidden and not [line for line in hidden if line in page]
    assert "not valid JSON" in (state / "feedback" / "carol" / A / f"{A}.html").read_text()


def test_autograded_notebooks_for_the_formgrader(course):
    state, *_ = course
    assert (state / "autograded" / "alice" / A / f"{A}.ipynb").exists()


def test_gradebook_keeps_nbgraders_submission_timestamp(course):
    """The formgrader counts a submission as autograded only when the gradebook's timestamp is
    the one in submitted/<student>/<assignment>/timestamp.txt."""
    from nbgrader.api import Gradebook
    from nbgrader.utils import parse_utc

    state, *_ = course
    with Gradebook(f"sqlite:///{state / 'gradebook.db'}") as gb:
        stamp = gb.find_submission(A, "alice").timestamp
    assert stamp is not None and parse_utc(stamp) == parse_utc(TIMESTAMP)


def test_feedback_pages_carry_what_release_feedback_needs(course):
    state, *_ = course
    folder = state / "feedback" / "alice" / A
    assert (folder / "timestamp.txt").read_text() == TIMESTAMP
    assert (folder / "submission_secret.txt").read_text() == "s3cret"


def test_export_to_standard_output(course):
    state, *_ = course
    out = _cli("export", "--state", state, "--out", "/dev/stdout").stdout
    rows = list(csv.DictReader(out.splitlines()))
    assert {r["student"] for r in rows} == {"alice", "alicetwin", "bob", "carol", "dave"}


def test_collect_never_reads_more_than_the_grader_would(tmp_path, monkeypatch, capsys):
    """A zip member that expands to 3 MB (a zip bomb, in small) and a corrupt zip, with the
    grader's limit at 1 MB: collect unzips at most the limit and a byte (never the whole member
    into memory) and says so, and grading says the notebook is too large; a 3 MB notebook file
    is copied as it is (grading names its size); the corrupt zip is kept as is and graded as not
    a notebook."""
    from autograder.grader.pipeline import Options, grade_notebook
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
        r = grade_notebook(got[student], Options(course.settings, root=ROOT))
        assert r.score == 0 and "more than the 1 MB the grader reads" in r.error, r.error
    assert "is 3 MB" in grade_notebook(got["frank"], Options(course.settings, root=ROOT)).error
    assert "gina_bad.zip cannot be unzipped" in err
    assert "not valid JSON" in grade_notebook(got["gina"], Options(course.settings, root=ROOT)).error



def test_collect_refuses_a_zip_without_a_notebook_by_name_and_loses_nothing_else(tmp_path):
    """An LMS upload that is a zip holding no notebook (or a notebook whose name has no student
    id) is refused: named, nothing of it written (no empty submission to grade as zero, and the
    learner's earlier submission kept as it was), everyone else collected, and the exit status 1."""
    lms, state = tmp_path / "lms", tmp_path / "state"
    lms.mkdir()
    shutil.copy(solution_notebook(A), lms / "alice_final.ipynb")
    with zipfile.ZipFile(lms / "hana_upload.zip", "w") as zf:
        zf.writestr("notes/answers.txt", "I forgot the notebook")
    with zipfile.ZipFile(lms / "ivan_upload.zip", "w") as zf:
        zf.writestr("README.md", "nothing here")
    shutil.copy(solution_notebook(A), lms / "nostudentid.ipynb")
    earlier = state / "submitted" / "ivan" / A / f"{A}.ipynb"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("ivan's earlier submission")
    proc = subprocess.run([sys.executable, "-m", "autograder", "collect", lms, "--assignment", A, "--state", state],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "collected 1 submission(s)" in proc.stdout and "3 file(s) refused" in proc.stdout, proc.stdout
    for name in ("hana_upload.zip", "ivan_upload.zip", "nostudentid.ipynb"):
        assert f"collect: refused {name}: " in proc.stderr, proc.stderr
    assert "holds no notebook" in proc.stderr and "no student id" in proc.stderr, proc.stderr
    assert (state / "submitted" / "alice" / A / f"{A}.ipynb").read_bytes() == solution_notebook(A).read_bytes()
    assert not (state / "submitted" / "hana").exists(), "a refused zip left a submission folder"
    assert earlier.read_text() == "ivan's earlier submission"


# --------------------------------------------------------------------------- no grade lost

NOBODY = 65534


def _python_for_everyone(base: Path) -> str:
    """An interpreter of the course's environment that uid 65534 may run (the .venv's may live
    under root's private pyenv): the one `make hub` gives its users."""
    sys.path.insert(0, str(ROOT / "hub"))
    import workshop

    state = base / "hub"
    state.mkdir(mode=0o755)
    return str(workshop.server_venv(workshop.paths(state)) / "bin" / "python")


def _as_nobody(args, home, env=None, timeout=900):
    """``args`` run as uid/gid 65534 (an instructor who is not root: file modes apply to them),
    with ``home`` as HOME."""
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env=dict(os.environ, HOME=str(home), **(env or {})))


def _others_can_read(path) -> bool:
    path = os.path.realpath(path)
    return all(os.stat(d).st_mode & 0o005 == 0o005 for d in [path, *map(str, Path(path).parents)])


def _grades(state):
    """``{student: [score per grade, in order]}`` of A in the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{state / 'gradebook.db'}") as gb:
        return {s.student.id: [(g.name, g.score) for nb in s.notebooks for g in sorted(nb.grades, key=lambda g: g.name)]
                for s in gb.find_assignment(A).submissions}


def test_nbgraders_autograde_first_then_ours_loses_no_grade(tmp_path):
    """An instructor who is not root presses nbgrader's own Autograde (stock nbgrader: it leaves
    read-only graded notebooks and its own scores), with a half-written gradebook submission
    left before; then the formgrader's button with the course's configuration; then runs the
    course's `autograde` and `--regrade`: every submission keeps the course grader's grade."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("runs the instructor as another user: needs root and setpriv")
    if not _others_can_read(ROOT):
        pytest.skip(f"{ROOT} cannot be read by other users (a private checkout): the instructor "
                    "here is uid 65534")
    base = Path(tempfile.mkdtemp(prefix="nograde-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        lms, state, home = base / "lms", base / "state", base / "home"
        for d in (lms, home):
            d.mkdir()
        shutil.copy(solution_notebook(A), lms / "alice_done.ipynb")
        shutil.copy(released_notebook(A), lms / "bob_start.ipynb")
        _cli("collect", lms, "--assignment", A, "--state", state)
        # A half-written gradebook row: alice's submission recorded before the assignment's
        # notebook was (nbgrader's collect and formgrader make submissions early).
        from nbgrader.api import Gradebook

        from autograder.grader.gradebook import ensure_tools_on_path

        ensure_tools_on_path()  # nbgrader runs `alembic` for a new gradebook
        with Gradebook(f"sqlite:///{state / 'gradebook.db'}") as gb:
            gb.update_or_create_assignment(A)
            gb.update_or_create_student("alice")
            gb.update_or_create_submission(A, "alice")
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(state), str(home)], check=True)
        env = {"COURSE_STATE": str(state)}
        python = _python_for_everyone(base)
        autograde = [python, "-m", "autograder", "autograde", "--state", state]

        first = _as_nobody(autograde, home, env)
        assert first.returncode == 0, first.stderr[-3000:]
        expected = _grades(state)
        full = sum(points for _, points in source_tests(solution_notebook(A)))
        assert sum(s for _, s in expected["alice"]) == full and sum(s for _, s in expected["bob"]) == 0

        pressed = _as_nobody([python, FORMGRADER_AUTOGRADE, ROOT, "stock", A, "alice", "bob"], home, env)
        assert pressed.stdout.count("SUCCESS") == 2, pressed.stdout[-3000:] + pressed.stderr[-3000:]
        graded = state / "autograded" / "alice" / A / f"{A}.ipynb"
        assert graded.stat().st_mode & 0o222 == 0, "nbgrader's autograde no longer leaves its files read-only"
        assert "Autograding" in pressed.stdout and "course's grader" not in pressed.stdout, pressed.stdout[-3000:]

        again = _as_nobody(autograde, home, env)
        assert again.returncode == 0, again.stderr[-3000:]
        assert _grades(state) == expected, again.stderr[-3000:]
        result = json.loads((state / "autograded" / "alice" / A / "result.json").read_text())
        assert result["score"] == full and not result.get("error"), result

        # the formgrader's button, with the course's configuration: the course's grader
        pressed = _as_nobody([python, FORMGRADER_AUTOGRADE, ROOT, "course", A, "alice", "bob"], home, env)
        assert pressed.stdout.count("SUCCESS") == 2, pressed.stdout[-3000:] + pressed.stderr[-3000:]
        assert pressed.stdout.count("graded by the course's grader") == 2, pressed.stdout[-3000:]
        # nbgrader removed the submission's autograded folder first: the course's grader wrote it again
        for student in ("alice", "bob"):
            result = json.loads((state / "autograded" / student / A / "result.json").read_text())
            assert result["tests"] and not result.get("error"), result
            # an ordinary user's grading: the box a tmpfs all the same, never the disk
            assert "files limited to 1024 MiB (a tmpfs)" in result["containment_reason"], result
        assert _grades(state) == expected
        regrade = _as_nobody([*autograde, "--regrade"], home, env)
        assert regrade.returncode == 0, regrade.stderr[-3000:]
        assert _grades(state) == expected
        assert json.loads((state / "autograded" / "bob" / A / "result.json").read_text())["tests"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_formgraders_button_grades_in_a_process_of_its_own_and_says_why_it_could_not(course):
    """The formgrader's Autograde button (nbgrader's API, in the instructor's server) runs the
    course's grader as a command of its own: it grades alice as `autograde` does, and where the
    grader cannot grade (here a setting it cannot use) the button fails with the reason, never a
    success with a stale grade."""
    state, *_ = course
    env = dict(os.environ, COURSE_STATE=str(state))
    pressed = subprocess.run([sys.executable, FORMGRADER_AUTOGRADE, ROOT, "course", A, "alice"], capture_output=True,
                             text=True, cwd=ROOT, timeout=900, env=env)
    assert pressed.stdout.startswith("alice SUCCESS") and "graded by the course's grader" in pressed.stdout, (
        pressed.stdout[-3000:] + pressed.stderr[-3000:])
    broken = subprocess.run([sys.executable, FORMGRADER_AUTOGRADE, ROOT, "course", A, "alice"], capture_output=True,
                            text=True, cwd=ROOT, timeout=900, env=dict(env, AUTOGRADER_MEMORY_MB="lots"))
    assert broken.stdout.startswith("alice FAILED"), broken.stdout[-3000:] + broken.stderr[-3000:]
    assert "AUTOGRADER_MEMORY_MB='lots'" in broken.stdout, broken.stdout[-3000:]


def test_the_formgraders_button_fails_naming_why_its_grading_command_did_not_grade(course, monkeypatch):
    """The button's grading command left the submission not graded (its summary names it, its
    stderr gives the reason): the button fails with that reason, whatever result.json an earlier
    grading left."""
    from traitlets.config import Config

    from autograder.instructor.formgrader import CourseAutograde

    state, *_ = course
    told = subprocess.CompletedProcess([], 1, stdout=f"autograded 0 submission(s) into x; 1 NOT graded: alice/{A}\n",
                                       stderr=f"autograde: 1 submission(s) NOT graded ...:\n  alice/{A}: the machine broke\n")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: told)
    step = CourseAutograde(config=Config({"CourseDirectory": {"root": str(ROOT),
                                                              "submitted_directory": str(state / "submitted")}}))
    earlier = state / "autograded" / "alice" / A / "result.json"  # an earlier grade is there
    kept = earlier.read_bytes() if earlier.exists() else None
    earlier.parent.mkdir(parents=True, exist_ok=True)
    earlier.write_text(json.dumps({"student": "alice", "score": 5.0, "max_score": 5.0, "tests": []}))
    try:
        with pytest.raises(RuntimeError, match=f"could not grade alice/{A} .*: alice/{A}: the machine broke"):
            step.preprocess({}, {"nbgrader": {"student": "alice", "assignment": A,
                                              "db_url": f"sqlite:///{state / 'gradebook.db'}"}})
    finally:
        if kept is None:
            earlier.unlink()
        else:
            earlier.write_bytes(kept)


def test_autograde_refuses_a_setting_it_cannot_use_and_changes_nothing(course):
    """An operator setting that does not parse (checked once, before anything is done): the
    command names it and what it must be, exits non-zero, and no result or grade changes."""
    state, *_ = course
    before = {p: p.read_bytes() for p in (state / "autograded").glob("*/*/result.json")}
    grades = _grades(state)
    proc = subprocess.run([sys.executable, "-m", "autograder", "autograde", "--state", state, "--regrade"],
                          capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env=dict(os.environ, AUTOGRADER_MEMORY_MB="lots"))
    assert proc.returncode == 2, proc.stdout + proc.stderr[-3000:]
    assert "autograde: AUTOGRADER_MEMORY_MB='lots' is not a positive whole number of MiB" in proc.stderr, proc.stderr
    assert {p: p.read_bytes() for p in (state / "autograded").glob("*/*/result.json")} == before
    assert _grades(state) == grades


def _export_rows(state):
    return list(csv.DictReader(_cli("export", "--state", state, "--out", "/dev/stdout").stdout.splitlines()))


def test_autograde_that_cannot_grade_marks_them_not_graded_and_exits_non_zero(course, monkeypatch, capsys):
    """The grader fails for every submission (its batch replaced by one that fails each), after a
    first grading gave alice full marks: the summary names each submission, the exit status is
    1, and each stays visible where grades are read: in the gradebook its tests have no
    automatic score and need a manual grade (the formgrader shows them so), in the export every
    row of theirs says 'not graded' with no points and the summary says it for the assignment
    and the total. No earlier grade stands for them and no learner is missing. A later
    autograde that works grades them again."""
    from autograder.__main__ import main
    from autograder.grader import batch
    from autograder.grader.result import failed_result
    from nbgrader.api import Gradebook

    def failing(paths, settings, **kwargs):
        return [failed_result(p, "internal grading error: the grader broke", kwargs.get("root")) for p in paths]

    state, *_ = course
    graded_before = _grades(state)
    assert sum(score for _, score in graded_before["alice"]) > 0
    monkeypatch.setattr(batch, "grade_many", failing)
    monkeypatch.setenv("PATH", os.environ["PATH"])  # autograde puts the venv's bin on it
    try:
        assert main(["autograde", "--state", str(state), "--regrade"]) == 1
        out, err = capsys.readouterr()
        for student in ("alice", "alicetwin", "bob", "dave"):
            assert f"{student}/{A}: internal grading error: the grader broke" in err and f"{student}/{A}" in out, err
        assert "NOT graded" in out and "marked 'not graded' in the gradebook" in err, out + err
        with Gradebook(f"sqlite:///{state / 'gradebook.db'}") as gb:
            marks = {s.student.id: [(g.auto_score, g.needs_manual_grade) for nb in s.notebooks for g in nb.grades]
                     for s in gb.find_assignment(A).submissions}
        for student in ("alice", "alicetwin", "bob", "dave"):
            assert marks[student] and all(m == (None, True) for m in marks[student]), (student, marks[student])
        rows = _export_rows(state)
        assert {r["student"] for r in rows} == {"alice", "alicetwin", "bob", "carol", "dave"}
        for r in rows:
            if r["student"] == "carol":  # no notebook the grader can read: a zero, graded
                assert (r["points"], r["status"]) == ("0", "graded"), r
            else:
                assert (r["points"], r["status"]) == ("", "not graded"), r
        subprocess.run([sys.executable, "-m", "autograder", "export", "--state", state], cwd=ROOT, check=True,
                       capture_output=True, timeout=600)
        summary = {r["student"]: r for r in csv.DictReader((state / "grades-summary.csv").open())}
        assert summary["alice"][A] == summary["alice"]["total"] == "not graded", summary["alice"]
        assert summary["carol"][A] == summary["carol"]["total"] == "0", summary["carol"]
        result = json.loads((state / "autograded" / "alice" / A / "result.json").read_text())
        assert result["not_graded"] == "all" and "the grader broke" in result["error"], result
    finally:
        monkeypatch.undo()
        regraded = subprocess.run([sys.executable, "-m", "autograder", "autograde", "--state", state],
                                  capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert _grades(state) == graded_before, regraded.stderr[-3000:]
    assert {r["status"] for r in _export_rows(state)} == {"graded"}


def test_autograde_marks_only_the_tests_left_not_graded(course, monkeypatch, capsys):
    """A result whose judge left one test not graded (a starved machine, the grader's own check):
    that test is 'not graded' in the gradebook and the export, every other test keeps the points
    this grading gave, and the exit status is 1 naming the submission."""
    from autograder.__main__ import main
    from autograder.grader import batch

    real = batch.grade_many

    def each_here(paths, settings, **kwargs):
        # one notebook a call, graded in this process. The real batch from this worker no longer
        # hangs (batch.start_method spawns where JAX has started), but it is not faster: run side
        # by side on a busy 2-core machine, the test took 164 s with it against 142 s with this
        # (spawned grading processes import nbgrader and JAX again; audit helper, 2026-12-06)
        return [r for p in paths for r in real([p], settings, **kwargs)]

    def one_left(paths, settings, **kwargs):
        results = each_here(paths, settings, **kwargs)
        for _ in range(STARVED_REGRADES):  # what a busy machine left not graded, graded again (run_grader's rule)
            again = [i for i, r in enumerate(results) if starved({"tests": r.tests})]
            if not again:
                break
            for i, r in zip(again, each_here([paths[i] for i in again], settings, **kwargs)):
                results[i] = r
        for r in results:
            if Path(r.notebook).parent.parent.name == "dave":
                t = r.tests[0]
                t["points"], t["passed"] = 0.0, False
                t["feedback"] = "Not graded: the grading machine was too busy (a test)."
                r.error = f"not graded: {t['grade_id']}: {t['feedback']}"
                r.score = sum(x["points"] for x in r.tests)
        return results

    state, *_ = course
    monkeypatch.setattr(batch, "grade_many", one_left)
    monkeypatch.setenv("PATH", os.environ["PATH"])
    try:
        assert main(["autograde", "--state", str(state), "--regrade", A]) == 1
        out, err = capsys.readouterr()
        assert f"NOT graded: dave/{A}" in out, out
        first = source_tests(solution_notebook(A))
        rows = [r for r in _export_rows(state) if r["student"] == "dave"]
        status = {r["exercise"]: (r["status"], r["points"]) for r in rows}
        not_graded = [e for e, (st, _) in status.items() if st == "not graded"]
        assert len(not_graded) == 1 and status[not_graded[0]][1] == "", status
        points = dict(first)
        for e, (st, p) in status.items():
            if st == "graded":
                assert float(p) == points[f"test_{e}"], (e, p)
        assert all(r["status"] == "graded" for r in _export_rows(state) if r["student"] == "alice")
    finally:
        monkeypatch.undo()
        subprocess.run([sys.executable, "-m", "autograder", "autograde", "--state", state],
                       capture_output=True, text=True, cwd=ROOT, timeout=900)


# --------------------------------------------------------------------------- release

def _nbgrader_release(root, state):
    nbgrader = Path(sys.executable).parent / "nbgrader"
    return subprocess.run([str(nbgrader), "release_assignment", A], capture_output=True, text=True, cwd=root,
                          timeout=600, env=dict(os.environ, COURSE_STATE=str(state),
                                                PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"))


def test_release_refuses_a_tampered_exercises_folder(tmp_path):
    """nbgrader's release_assignment through the course's configuration (the formgrader's Release
    button) and `release.py --check A`: a solved notebook in exercises/ is refused and named,
    nothing reaches the exchange; the generated folder is released."""
    root = tmp_path / "course"
    root.mkdir()
    for name in ("solutions", "exercises", "autograder", "scripts"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "nbgrader_config.py", root)
    state = tmp_path / "state"
    shutil.copy(solution_notebook(A), root / "exercises" / A / f"{A}.ipynb")  # a learner's solved copy
    (root / "exercises" / A / "notes.txt").write_text("left here")

    proc = _nbgrader_release(root, state)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert f"not releasing {A}" in out and f"exercises/{A}/{A}.ipynb: differs" in out, out[-3000:]
    assert f"exercises/{A}/notes.txt: not generated by release" in out, out[-3000:]
    outbound = state / "exchange" / "jax-mental-model" / "outbound" / A
    assert not outbound.exists(), "a tampered assignment reached the exchange"
    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "release.py"), "--root", root, "--check", A],
                           capture_output=True, text=True, timeout=600)
    assert check.returncode == 1 and f"exercises/{A}/{A}.ipynb" in check.stdout, check.stdout + check.stderr

    shutil.rmtree(root / "exercises" / A)
    shutil.copytree(ROOT / "exercises" / A, root / "exercises" / A)
    proc = _nbgrader_release(root, state)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "CRITICAL" not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]  # nothing alarming
    assert (outbound / f"{A}.ipynb").read_bytes() == (ROOT / "exercises" / A / f"{A}.ipynb").read_bytes()


def test_students_have_a_name_in_the_formgrader(course):
    """The formgrader lists students as 'last name, first name': never 'None, None'."""
    from nbgrader.api import Gradebook

    state, *_ = course
    with Gradebook(f"sqlite:///{state / 'gradebook.db'}") as gb:
        names = {s.id: (s.last_name, s.first_name) for s in gb.students}
    assert names["alice"] == ("alice", "") and all(None not in n for n in names.values()), names


# --------------------------------------------------------------------------- nothing lost

def test_release_feedback_goes_on_past_a_bad_submission(tmp_path):
    """`python hub/workshop.py release-feedback A` with three collected submissions: alice's as
    nbgrader's exchange leaves it, bob's without submission_secret.txt (nbgrader's
    release_feedback stops at such a page), carol's result unreadable. alice's feedback is
    released, the exit status is not zero and bob and carol are named with the reason."""
    from nbgrader.utils import notebook_hash

    from autograder.grader.result import zero_result

    state = tmp_path / "state"
    for student in ("alice", "bob", "carol"):
        sub = state / "submitted" / student / A
        sub.mkdir(parents=True)
        shutil.copy(released_notebook(A), sub / f"{A}.ipynb")
        (sub / "timestamp.txt").write_text(TIMESTAMP)
        if student != "bob":
            (sub / "submission_secret.txt").write_text(f"secret-of-{student}")
        out = state / "autograded" / student / A
        out.mkdir(parents=True)
        result = zero_result(str(sub / f"{A}.ipynb"), A, solution_notebook(A), "not answered").as_dict()
        (out / "result.json").write_text("{ truncated" if student == "carol" else json.dumps(result))
    (state / "exchange").mkdir(mode=0o777)  # as `make hub` makes it
    proc = subprocess.run([sys.executable, str(ROOT / "hub" / "workshop.py"), "release-feedback", A],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600,
                          env=dict(os.environ, COURSE_STATE=str(state)))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "released 1 feedback page(s)" in out and "Traceback" not in out, out
    assert re.search(r"NOT released for bob: .*submission_secret\.txt", out), out
    assert re.search(rf"carol/{A}: no feedback page: .*result\.json", out), out
    assert "got no feedback: bob, carol" in out, out
    released = state / "exchange" / "jax-mental-model" / "feedback"
    assert sorted(p.name for p in released.iterdir()) == [f"{notebook_hash(secret='secret-of-alice', notebook_id=A)}.html"]
    assert "Student: <b>alice</b>" in next(released.iterdir()).read_text()


# --------------------------------------------------------------------------- submissions bound to their makers

def _submission(inbound: Path, student: str, stamp: str, notebook: bytes, owner: str, *, name_stamp=None,
                mode=0o755) -> Path:
    """``inbound/<student>+A+<stamp>+<random>`` as nbgrader's submit leaves it, owned by ``owner``."""
    folder = inbound / f"{student}+{A}+{name_stamp or stamp}+{uuid.uuid4().hex[:12]}"
    folder.mkdir()
    (folder / f"{A}.ipynb").write_bytes(notebook)
    (folder / "timestamp.txt").write_text(stamp)
    (folder / "submission_secret.txt").write_text(uuid.uuid4().hex)
    subprocess.run(["chown", "-R", f"{owner}:{owner}", str(folder)], check=True)
    os.chmod(folder, mode)
    return folder


def test_collect_takes_only_submissions_made_by_the_learner_they_name(tmp_path):
    """nbgrader's collect through the course's configuration, run by an instructor who is not
    root (uid 65534, owner of inbound, as after their release): daemon submitted twice and gets
    the later; a folder in daemon's name with a future time, made by bin (mode 0700), is refused
    (not collected, named with the reason) and set aside by the instructor; so are bin's own
    truncated notebook, bin's submission with a time in the future and a file with no
    submission name. Every other submission is collected."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("makes files of other users: needs root and setpriv")
    if not _others_can_read(ROOT):
        pytest.skip(f"{ROOT} cannot be read by other users (a private checkout)")
    base = Path(tempfile.mkdtemp(prefix="owned-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        state, home = base / "state", base / "home"
        inbound = state / "exchange" / "jax-mental-model" / "inbound"
        inbound.mkdir(parents=True)
        home.mkdir()
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(state), str(home)], check=True)
        os.chmod(state / "exchange", 0o777)
        os.chmod(inbound, 0o2733)  # nbgrader's release makes it so
        solved, started = solution_notebook(A).read_bytes(), released_notebook(A).read_bytes()
        _submission(inbound, "daemon", "2026-11-30 10:00:00.000000 UTC", started, "daemon")
        _submission(inbound, "daemon", "2026-11-30 11:00:00.000000 UTC", solved, "daemon")
        planted = _submission(inbound, "daemon", "2099-01-01 00:00:00.000000 UTC", started, "bin", mode=0o700)
        truncated = _submission(inbound, "bin", "2026-11-30 10:30:00.000000 UTC", solved[:200], "bin")
        future = _submission(inbound, "bin", "2099-01-01 00:00:00.000000 UTC", solved, "bin")
        stray = inbound / f"bin+{A}+not a time"
        loose = inbound / f"bin+{A}+2026-11-30 10:40:00.000000 UTC+x"  # a file, not a folder
        for path in (stray, loose):
            path.write_text("hello")
            subprocess.run(["chown", "bin:bin", str(path)], check=True)
        python = _python_for_everyone(base)
        env = {"COURSE_STATE": str(state), "PATH": f"{Path(python).parent}:/usr/bin:/bin"}  # nbgrader runs alembic
        proc = _as_nobody([python, "-m", "nbgrader", "collect", A], home, env)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0 and "Traceback" not in out, out[-3000:]  # it refused some
        got = state / "submitted" / "daemon" / A
        assert (got / f"{A}.ipynb").read_bytes() == solved, "daemon's later submission was not the one collected"
        assert (got / "timestamp.txt").read_text() == "2026-11-30 11:00:00.000000 UTC"
        assert not (state / "submitted" / "bin").exists(), "a refused submission of bin's was collected"
        for name, why in [(planted.name, "owned by bin, not by daemon"),
                          (truncated.name, f"{A}.ipynb is not a whole notebook"),
                          (future.name, "is in the future"),
                          (stray.name, "its name is not nbgrader's"),
                          (loose.name, "not a submission folder")]:
            assert re.search(rf"Refused a submission of {A} for \w+ \({re.escape(name)}\): .*{why}", out), (name, out)
            assert not (inbound / name).exists(), f"{name} was not set aside"
        assert "5 submission(s) of 01_phases refused" in out, out
        assert inbound.stat().st_mode & stat.S_ISVTX, "collect did not make inbound sticky"
        assert not list(inbound.glob(f"*+{A}+*")) or all(
            p.name.startswith("daemon+") for p in inbound.glob(f"*+{A}+*")), list(inbound.iterdir())
        # a second collect: nothing refused is there any more, daemon's stays collected
        again = _as_nobody([python, "-m", "nbgrader", "collect", A], home, env)
        assert again.returncode == 0 and "Refused" not in again.stdout + again.stderr, again.stderr[-3000:]
        assert (got / f"{A}.ipynb").read_bytes() == solved
    finally:
        shutil.rmtree(base, ignore_errors=True)


# A learner's swapping loop, run as that learner: the notebook of their entry becomes a link to
# a file they cannot read and back, and the entry itself a link to a folder they cannot read and
# back, as fast as it can, until it is killed.
SYSTEM_PYTHON = "/usr/bin/python3"  # any user may run it (the .venv's may be private)
SWAPPER = """
import os, sys
entry, work, secret_file, secret_folder = sys.argv[1:5]
notebook = os.path.join(entry, "01_phases.ipynb")
mine = open(os.path.join(work, "mine.ipynb"), "rb").read()
aside, link, real = (os.path.join(work, n) for n in ("aside", "link", "real"))
while True:
    try:
        os.symlink(secret_file, link)
        os.replace(link, notebook)
        with open(real, "wb") as fh:
            fh.write(mine)
        os.replace(real, notebook)
        os.rename(entry, aside)
        os.symlink(secret_folder, entry)
        os.unlink(entry)
        os.rename(aside, entry)
    except OSError:
        for leftover in (link, real):
            if os.path.lexists(leftover):
                os.unlink(leftover)
        if os.path.lexists(aside) and not os.path.lexists(entry):
            os.rename(aside, entry)
"""


def _swapping(entry: Path, work: Path, secret_file: Path, secret_folder: Path, learner="daemon"):
    """The :data:`SWAPPER` loop on ``entry``, run as ``learner`` (``work``: a folder of theirs on
    the same filesystem, holding their own notebook as mine.ipynb)."""
    return subprocess.Popen(["setpriv", f"--reuid={learner}", f"--regid={learner}", "--clear-groups",
                             SYSTEM_PYTHON, "-c", SWAPPER, entry, work, secret_file, secret_folder],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _race_setup(base: Path, instructor: str, stamp: str):
    """An inbound (3733, the instructor's) holding daemon's entry, daemon's work folder, and a
    notebook and a submission folder only the instructor can read (SECRET inside)."""
    inbound = base / "inbound"
    inbound.mkdir(parents=True)
    private = base / "private"
    private.mkdir()
    secret = json.loads(released_notebook(A).read_text())
    secret["metadata"]["SECRET"] = "the instructor's"
    for path in (private / f"{A}.ipynb", base / "secret.ipynb"):
        path.write_text(json.dumps(secret))
        os.chmod(path, 0o600)
    (private / "timestamp.txt").write_text(stamp)
    (private / "submission_secret.txt").write_text("x")
    subprocess.run(["chown", "-R", f"{instructor}:{instructor}", str(inbound), str(private),
                    str(base / "secret.ipynb")], check=True)
    os.chmod(private, 0o700)
    os.chmod(inbound, 0o3733)
    entry = _submission(inbound, "daemon", stamp, released_notebook(A).read_bytes(), "daemon")
    work = base / "work"
    work.mkdir()
    shutil.copy(released_notebook(A), work / "mine.ipynb")
    subprocess.run(["chown", "-R", "daemon:daemon", str(work)], check=True)
    return inbound, entry, work, base / "secret.ipynb", private


def _stop(proc):
    proc.kill()
    proc.wait(timeout=30)


def test_collect_copies_what_it_checks_while_the_learner_swaps_links(tmp_path):
    """A learner (daemon) swaps their entry's notebook for a link to a file only root can read,
    and the entry for a link to a folder only root can read, in a loop. nbgrader's way (check,
    then ``copytree``) collects root's secret; the collect's snapshot, run thousands of times
    against the same loop, only ever copies daemon's own notebook or refuses the entry."""
    from autograder.instructor.exchange import Refused, refusal, snapshot

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("makes files of other users: needs root and setpriv")
    stamp = "2026-11-30 10:00:00.000000 UTC"
    base = Path(tempfile.mkdtemp(prefix="race-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        inbound, entry, work, secret_file, secret_folder = _race_setup(base, "root", stamp)
        mine = released_notebook(A).read_bytes()
        swapper = _swapping(entry, work, secret_file, secret_folder)
        try:
            control = None  # nbgrader's copy, which follows links: the race is on
            for i in range(20000):
                try:
                    shutil.copytree(entry, base / "control" / str(i))
                except (OSError, shutil.Error):
                    continue
                if b"SECRET" in (base / "control" / str(i) / f"{A}.ipynb").read_bytes():
                    control = i
                    break
            assert control is not None, "the swapping loop never won against copytree: the test proves nothing"
            fd = os.open(inbound, os.O_RDONLY | os.O_DIRECTORY)
            taken, refused = 0, []
            try:
                for i in range(20000):
                    copy = base / "copies" / str(i)
                    copy.parent.mkdir(exist_ok=True)
                    try:
                        snapshot(fd, entry.name, str(copy), "daemon", 2**24, 2**26)
                    except Refused as exc:
                        refused.append(str(exc))
                        shutil.rmtree(copy, ignore_errors=True)
                        if len(refused) >= 50 and taken >= 5:
                            break
                        continue
                    for path in (p for p in copy.rglob("*") if p.is_file()):
                        assert b"SECRET" not in path.read_bytes(), f"the snapshot copied root's file as {path}"
                    assert refusal(str(copy), parse_time(stamp)) is None
                    assert (copy / f"{A}.ipynb").read_bytes() == mine
                    taken += 1
                    shutil.rmtree(copy)
            finally:
                os.close(fd)
        finally:
            _stop(swapper)
        assert refused and taken, (taken, refused[:5])  # both sides of the race were seen
        assert all(re.search(r"a link|not a submission folder|changed while|cannot be read", r) for r in refused), \
            set(refused)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def parse_time(stamp: str):
    from nbgrader.utils import parse_utc

    return parse_utc(stamp)


def test_nbgrader_collect_never_collects_what_the_learner_could_not_read(tmp_path):
    """`nbgrader collect` as the instructor (uid 65534), three times, each against daemon's
    swapping loop aimed at a notebook and a folder only the instructor can read: each time
    daemon's own notebook is collected or the entry is refused and named (exit status not 0);
    the instructor's secret never reaches submitted/."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("makes files of other users: needs root and setpriv")
    if not _others_can_read(ROOT):
        pytest.skip(f"{ROOT} cannot be read by other users (a private checkout)")
    base = Path(tempfile.mkdtemp(prefix="race-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        state, home = base / "state", base / "home"
        home.mkdir()
        course = state / "exchange" / "jax-mental-model"
        python = _python_for_everyone(base)
        env = {"COURSE_STATE": str(state), "PATH": f"{Path(python).parent}:/usr/bin:/bin"}
        seen = []
        for round_ in range(3):
            stamp = f"2026-11-30 10:0{round_}:00.000000 UTC"
            shutil.rmtree(course / "private", ignore_errors=True)
            (course / "secret.ipynb").unlink(missing_ok=True)
            shutil.rmtree(course / "work", ignore_errors=True)
            if (course / "inbound").exists():
                shutil.rmtree(course / "inbound")
            inbound, entry, work, secret_file, secret_folder = _race_setup(course, f"{NOBODY}", stamp)
            subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(state), str(home)], check=True)
            subprocess.run(["chown", "-R", "daemon:daemon", str(entry), str(work)], check=True)
            os.chmod(state / "exchange", 0o1777)
            swapper = _swapping(entry, work, secret_file, secret_folder)
            try:
                proc = _as_nobody([python, "-m", "nbgrader", "collect", A], home, env)
            finally:
                _stop(swapper)
            out = proc.stdout + proc.stderr
            got = state / "submitted" / "daemon" / A
            if proc.returncode == 0:
                assert (got / "timestamp.txt").read_text() == stamp, out[-3000:]
                seen.append("collected")
            else:
                assert re.search(rf"Refused a submission of {A} for daemon .*(a link|not a submission folder"
                                 r"|changed while|cannot be read)", out), out[-3000:]
                seen.append("refused")
            for path in (state / "submitted").rglob("*"):
                if path.is_file():
                    assert b"SECRET" not in path.read_bytes(), f"collected the instructor's file as {path}"
            if got.exists():
                assert (got / f"{A}.ipynb").read_bytes() == released_notebook(A).read_bytes()
        print(seen)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_learners_submission_cannot_be_moved_or_changed_by_another(tmp_path):
    """nbgrader's submit as daemon with the course's PrivateSubmit, into an inbound the
    instructor (uid 65534) released and made sticky: the entry is mode 755; bin can neither
    rename it nor write into it; the instructor can set it aside."""
    from autograder.instructor.exchange import INBOUND_MODE

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("makes files of other users: needs root and setpriv")
    if not _others_can_read(ROOT):
        pytest.skip(f"{ROOT} cannot be read by other users (a private checkout)")
    base = Path(tempfile.mkdtemp(prefix="entry-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        exchange = base / "exchange"
        course = exchange / "jax-mental-model"
        (course / "outbound" / A).mkdir(parents=True)
        shutil.copy(released_notebook(A), course / "outbound" / A / f"{A}.ipynb")
        (course / "inbound").mkdir()
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(course)], check=True)
        os.chmod(exchange, 0o1777)
        os.chmod(course / "inbound", INBOUND_MODE)
        learner = base / "learner"
        (learner / "jax-mental-model" / A).mkdir(parents=True)
        shutil.copy(released_notebook(A), learner / "jax-mental-model" / A / f"{A}.ipynb")
        subprocess.run(["chown", "-R", "daemon:daemon", str(learner)], check=True)
        python = _python_for_everyone(base)
        submit = subprocess.run(
            ["setpriv", "--reuid=daemon", "--regid=daemon", "--clear-groups", python, "-m", "nbgrader",
             "submit", A, "--course", "jax-mental-model", f"--Exchange.root={exchange}",
             "--Exchange.path_includes_course=True",
             "--ExchangeFactory.submit=autograder.instructor.exchange.PrivateSubmit"],
            capture_output=True, text=True, cwd=learner, timeout=600, env=dict(os.environ, HOME=str(learner)))
        assert submit.returncode == 0, submit.stderr[-3000:]
        (entry,) = (course / "inbound").iterdir()
        assert stat.S_IMODE(entry.stat().st_mode) == 0o755, oct(entry.stat().st_mode)
        other = ["setpriv", "--reuid=bin", "--regid=bin", "--clear-groups", SYSTEM_PYTHON, "-c"]
        moved = subprocess.run([*other, f"import os; os.rename({str(entry)!r}, {str(entry)!r} + 'x')"],
                               capture_output=True, text=True)
        assert moved.returncode != 0 and "PermissionError" in moved.stderr, moved.stderr
        wrote = subprocess.run([*other, f"open({str(entry / 'planted.txt')!r}, 'w').write('x')"],
                               capture_output=True, text=True)
        assert wrote.returncode != 0 and "PermissionError" in wrote.stderr, wrote.stderr
        control = subprocess.run(["setpriv", "--reuid=daemon", "--regid=daemon", "--clear-groups", SYSTEM_PYTHON,
                                  "-c", f"open({str(entry / 'mine.txt')!r}, 'w').write('x')"], capture_output=True)
        assert control.returncode == 0, control.stderr  # its owner still may
        aside = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                                python, "-c", "from autograder.instructor.exchange import "
                                f"set_aside; print(set_aside({str(course / 'inbound')!r}, {entry.name!r}))"],
                               capture_output=True, text=True, cwd=ROOT)
        assert aside.returncode == 0 and aside.stdout.startswith(".refused+"), aside.stderr[-2000:]
    finally:
        shutil.rmtree(base, ignore_errors=True)


# --------------------------------------------------------------------------- what the instructor sees

def test_failed_tests_show_their_feedback_in_the_formgrader(course):
    """bob's graded notebook: each failed test cell's error output has a traceback holding its
    feedback (the formgrader shows an error by its traceback), and the formgrader's list of
    submissions says his tests failed and alice's did not."""
    import nbformat
    from nbgrader.api import Gradebook

    state, *_ = course
    result = json.loads((state / "autograded" / "bob" / A / "result.json").read_text())
    feedback = {t["grade_id"]: t["feedback"] for t in result["tests"] if not t["passed"]}
    nb = nbformat.read(str(state / "autograded" / "bob" / A / f"{A}.ipynb"), as_version=4)
    shown = {c.metadata["nbgrader"]["grade_id"]: "\n".join(o.traceback) for c in nb.cells
             if c.metadata.get("nbgrader", {}).get("grade") for o in c.get("outputs", []) if o.output_type == "error"}
    assert feedback and set(shown) == set(feedback), (shown, feedback)
    for gid, text in feedback.items():
        assert text in shown[gid], (gid, shown[gid])
    with Gradebook(f"sqlite:///{state / 'gradebook.db'}") as gb:
        failed = {d["student"]: d["failed_tests"] for d in gb.notebook_submission_dicts(A, A)}
    assert failed["bob"] and not failed["alice"], failed


def test_one_bad_submission_never_stops_export_report_or_feedback(tmp_path):
    """A class of three with the gradebook's points: bob's notebook has an output whose
    metadata.autograder is a string (valid nbformat: export stopped on it for everyone), carol's
    .hints.json claims 99999 hints and her result.json is truncated. export writes everyone's rows
    (bob's hints read as none, carol's at most the exercise's hints, every count marked as the
    learner's report) and says both files it wrote; report and feedback write everyone else's and
    exit 1 naming carol."""
    from autograder.grader.result import zero_result
    from autograder.hints import shipped
    from autograder.instructor import Course, course_gradebook

    state = tmp_path / "state"
    course = Course(root=ROOT, state=state)
    tests = source_tests(solution_notebook(A))
    with course_gradebook(course.db_url) as gb:
        gb.add_assignment(A)
        gb.add_notebook(A, A)
        for gid, points in tests:
            gb.add_grade_cell(gid, A, A, max_score=points, cell_type="code")
        for student in ("alice", "bob", "carol"):
            gb.add_student(student)
            gb.add_submission(A, student)
            for g in gb.find_submission_notebook(A, A, student).grades:
                g.auto_score = 0
    exercise = tests[0][0].removeprefix("test_")
    most = len(shipped(A)[exercise])
    for student in ("alice", "bob", "carol"):
        folder = state / "submitted" / student / A
        folder.mkdir(parents=True)
        nb = json.loads(released_notebook(A).read_text())
        if student == "bob":
            cell = next(c for c in nb["cells"] if c["cell_type"] == "code")
            cell["outputs"] = [{"output_type": "display_data", "data": {"text/plain": "x"},
                                "metadata": {"autograder": "a string"}}]
        (folder / f"{A}.ipynb").write_text(json.dumps(nb))
        (folder / ".hints.json").write_text(json.dumps({exercise: 99999 if student == "carol" else 1}))
        out = state / "autograded" / student / A
        out.mkdir(parents=True)
        result = zero_result(str(folder / f"{A}.ipynb"), A, solution_notebook(A), "not answered").as_dict()
        del result["error"]  # graded: every test failed
        (out / "result.json").write_text("{ truncated" if student == "carol" else json.dumps(result))

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "autograder", *args, "--state", str(state)],
                              capture_output=True, text=True, cwd=ROOT, timeout=600)

    exported = cli("export")
    assert exported.returncode == 0 and "Traceback" not in exported.stderr, exported.stderr[-3000:]
    assert f"wrote {state / 'grades.csv'} and {state / 'grades-summary.csv'}" in exported.stderr, exported.stderr
    rows = list(csv.DictReader((state / "grades.csv").open()))
    assert {r["student"] for r in rows} == {"alice", "bob", "carol"}
    seen = {r["student"]: r["hints_seen"] for r in rows if r["exercise"] == exercise}
    assert seen == {"alice": "1", "bob": "1", "carol": str(most)}, seen
    assert {r["hints_from"] for r in rows} == {"learner"}
    report = cli("report")
    assert report.returncode == 1 and "Traceback" not in report.stderr, report.stderr[-3000:]
    assert re.search(rf"report: carol/{A}: its result cannot be read", report.stderr), report.stderr
    page = (state / "class-report.html").read_text()
    full = sum(points for _, points in tests)
    assert "3 learner(s) graded" in page and f"<td>alice</td><td>0 / {full:g}</td>" in page, page[:600]
    fed = cli("feedback")
    assert fed.returncode == 1 and f"carol/{A}: no feedback page" in fed.stderr, fed.stderr[-3000:]
    assert {p.parent.parent.name for p in (state / "feedback").glob(f"*/{A}/{A}.html")} == {"alice", "bob"}


def test_the_hint_command_finds_the_notebook_from_any_folder(tmp_path):
    """`python -m autograder hint 01_phases.ipynb EXERCISE`, typed in a folder that is not the
    notebook's (a hub terminal opens in the home): the notebook nbgrader fetched into
    ~/<course>/01_phases/ is found and its hint recorded beside it; with a second copy elsewhere
    in the home the command names both and asks for a path."""
    from autograder.hints import shipped

    exercise = next(iter(shipped(A)))
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    fetched = home / "jax-mental-model" / A
    fetched.mkdir(parents=True)
    elsewhere.mkdir()
    shutil.copy(released_notebook(A), fetched)

    def hint(name):
        return subprocess.run([sys.executable, "-m", "autograder", "hint", name, exercise], capture_output=True,
                              text=True, cwd=elsewhere, timeout=300, env=dict(os.environ, HOME=str(home)))

    found = hint(f"{A}.ipynb")
    assert found.returncode == 0 and "Hint 1 of" in found.stdout, found.stderr
    assert json.loads((fetched / ".hints.json").read_text()) == {exercise: 1}
    assert hint(A).returncode == 0 and json.loads((fetched / ".hints.json").read_text()) == {exercise: 2}
    (home / "copy" / A).mkdir(parents=True)
    shutil.copy(released_notebook(A), home / "copy" / A)
    both = hint(f"{A}.ipynb")
    assert both.returncode == 2 and "several notebooks" in both.stderr and str(fetched) in both.stderr, both.stderr


def test_report_files_each_failure_under_the_idea_its_judge_names(monkeypatch):
    """The class report: a learner's own ValueError is "raised an error" (not the classifier's
    fallback idea), a traced value in an `if` the idea its feedback names, a stub "unanswered";
    an ungradable submission is listed apart and counted as no learner; hints seen per exercise;
    the learners-per-idea axis has whole numbers only."""
    import html

    import matplotlib.figure

    from autograder.feedback import explain_error
    from autograder.instructor.report import RAISED, idea_of, render

    own = str(explain_error(["ValueError", "Exception"], "bad input", "`step`"))
    traced = str(explain_error(["TracerBoolConversionError", "ConcretizationTypeError"], "x", "`step`"))
    stub = str(explain_error(["NotImplementedError"], "", "`step`"))
    assert idea_of({"feedback": own}) == RAISED, own
    assert idea_of({"feedback": traced}) not in (RAISED, "no idea named", "numerics"), traced
    assert idea_of({"feedback": stub}) == "unanswered"
    assert idea_of({"feedback": "This test did not run."}) == "did not run"

    ticks = []

    def savefig(fig, *args, **kwargs):
        ticks.append([t.get_text() for t in fig.axes[0].get_xticklabels()])
        return original(fig, *args, **kwargs)

    original = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    points = {("ann", A): {"step": (1.0, 1.0), "loop": (0.0, 1.0)},
              ("ben", A): {"step": (0.0, 1.0), "loop": (0.0, 1.0)},
              ("cat", A): {"step": (0.0, 1.0), "loop": (0.0, 1.0)}}  # cat's file was no notebook
    page = html.unescape(render(points, {RAISED: {"ben"}, "unanswered": {"ann", "ben"}}, "sqlite:///x",
                                not_graded={("cat", A): "it is not JSON"},
                                hints={("ann", A): {"step": 2, "loop": "99999"}, ("ben", A): {"step": 1}}))
    assert "2 learner(s) graded" in page and "1 submission(s) could not be graded" in page, page[:500]
    assert f"<td>{A}</td><td>step</td><td>1 / 2</td><td>50%</td><td>2 / 2</td><td>3</td>" in page, page
    assert f"<td>{A}</td><td>loop</td><td>0 / 2</td><td>0%</td><td>0 / 2</td><td>0</td>" in page, page
    assert f"<td>cat</td><td>{A}</td><td>it is not JSON</td>" in page
    assert "<td>cat</td><td>0 / 2</td>" not in page, "an ungradable submission counted as a learner's result"
    assert f"<td>{RAISED}</td><td></td><td>1</td><td>ben</td>" in page
    idea_axis = ticks[1]
    assert idea_axis and all(re.fullmatch(r"[0-9]+", t.replace("\u2212", "-")) for t in idea_axis if t), idea_axis


def test_export_and_report_go_where_the_instructor_opens_them(course, tmp_path):
    """With COURSE_REPORTS set (the hub sets it to a folder of the instructor's JupyterLab), export
    writes its CSVs there and `report` writes one HTML page: pass rate per exercise, learners per
    idea they tripped on, progress per learner, each with a PNG plot inside the page."""
    import base64
    import html

    state, *_ = course
    reports = tmp_path / "reports"
    env = dict(os.environ, COURSE_REPORTS=str(reports))
    for verb in ("export", "report"):
        proc = subprocess.run([sys.executable, "-m", "autograder", verb, "--state", state], capture_output=True,
                              text=True, cwd=ROOT, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in reports.iterdir()) == ["class-report.html", "grades-summary.csv", "grades.csv"]
    ungradable = {p.parent.parent.name for p in state.glob(f"autograded/*/{A}/result.json")
                  if json.loads(p.read_text()).get("error")}
    assert ungradable == {"carol"}, ungradable  # her file is no notebook: listed apart in the report
    rows = [r for r in csv.DictReader((reports / "grades.csv").open()) if r["student"] not in ungradable]
    page = html.unescape((reports / "class-report.html").read_text())
    assert re.search(rf"<td>carol</td><td>{A}</td><td>[^<]+</td>", page), page[-2000:]
    students = {r["student"] for r in rows}
    for exercise in {r["exercise"] for r in rows}:
        mine = [r for r in rows if r["exercise"] == exercise]
        passed = sum(float(r["points"]) >= float(r["max_points"]) for r in mine)
        assert f"<td>{A}</td><td>{exercise}</td><td>{passed} / {len(mine)}</td>" in page, exercise
    for student in students:
        got = sum(float(r["points"]) for r in rows if r["student"] == student)
        full = sum(float(r["max_points"]) for r in rows if r["student"] == student)
        assert re.search(rf"<td>{student}</td><td>{got:g} / {full:g}</td>", page), student
    # bob left every stub: he tripped on 'unanswered'; carol's file was not graded: no idea tested
    unanswered = re.search(r"<td>unanswered</td><td></td><td>(\d+)</td><td>([^<]*)</td>", page)
    assert unanswered and unanswered.group(2) == "bob", page[-3000:]
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 3 and all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
