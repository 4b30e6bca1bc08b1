"""``python -m autograder grade`` against submissions found by an audit of ../shared/DESIGN.md's
"The grader's command line" (log: the audit's notes): a cell that never ends, and paths that are
not plain notebook files (a FIFO, a device, a folder, JSON nested past Python's parser, a link).

Each notebook is a copy of the released 01_phases, solved with the solution's answer cells where
the case needs answers to keep.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

from autograder.common.course import test_cells as source_tests
from conftest import fill_answers, released_notebook, run_grader, solution_notebook

pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("grading")]
A = "01_phases"
TESTS = [gid for gid, _ in source_tests(solution_notebook(A))]
FULL = sum(points for _, points in source_tests(solution_notebook(A)))
SOLUTIONS = {c.metadata["nbgrader"]["grade_id"]: c.source
             for c in nbformat.read(str(solution_notebook(A)), as_version=4).cells
             if c.metadata.get("nbgrader", {}).get("solution")}


def _solved(dest: Path, **extra) -> Path:
    """01_phases solved, with ``extra`` (exercise -> code) appended to those answer cells."""
    answers = {gid: src + ("\n" + extra[gid] if gid in extra else "") for gid, src in SOLUTIONS.items()}
    return fill_answers(released_notebook(A), answers, dest)


@pytest.mark.parametrize("sandbox", ["contained", "uncontained"])
def test_a_cell_past_its_time_limit_is_stopped_and_every_other_answer_is_graded(tmp_path, sandbox):
    """DESIGN: a test that did not finish scores 0 and the notebook still gets its result. A cell
    that sleeps forever after defining its answer is interrupted at the cell's time limit and
    the notebook goes on: its tests, which call answers already defined, all pass. Before: the
    interrupt never reached a contained kernel (its own session and PID namespace), and a
    timed-out cell's reply raised KeyError in nbgrader's Execute; either way the run ended as if
    the kernel had died, and every answer of the notebook scored 0."""
    path = _solved(tmp_path / "learner" / A / f"{A}.ipynb",
                   matmul_flops="import time\ntime.sleep(10**6)  # never returns")
    # 40 s: far above what any other cell of the notebook takes on a busy machine (its imports: a
    # few seconds), so only the sleeping cell reaches it
    extra = ("--cell-timeout", "40", "--notebook-timeout", "400") + (("--no-sandbox",) if sandbox == "uncontained" else ())
    result, stderr, code = run_grader([path], *extra)
    assert code == 0, stderr[-2000:]
    assert [t["grade_id"] for t in result["tests"]] == TESTS
    assert result["score"] == result["max_score"] == FULL, \
        {t["exercise"]: t["feedback"][:200] for t in result["tests"] if not t["passed"]}


@pytest.fixture(scope="module")
def odd_paths(tmp_path_factory):
    """One call of the command: a FIFO, a link to /dev/zero, an assignment's folder, JSON nested
    past Python's parser, a solved notebook linked into an assignment folder from a folder of
    another name, and a solved notebook, in that order."""
    tmp = tmp_path_factory.mktemp("odd")
    fifo = tmp / "fifo" / A / f"{A}.ipynb"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    zero = tmp / "zero" / A / f"{A}.ipynb"
    zero.parent.mkdir(parents=True)
    zero.symlink_to("/dev/zero")
    folder = tmp / "folder" / A
    folder.mkdir(parents=True)
    deep = tmp / "deep" / A / f"{A}.ipynb"
    deep.parent.mkdir(parents=True)
    deep.write_text('{"nbformat": 4, "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elsewhere = _solved(tmp / "drive" / "My Drive" / "copy of notebook.ipynb")
    linked = tmp / "linked" / A / f"{A}.ipynb"
    linked.parent.mkdir(parents=True)
    linked.symlink_to(elsewhere)
    good = _solved(tmp / "good" / A / f"{A}.ipynb")
    paths = [fifo, zero, folder, deep, linked, good]
    results, stderr, code = run_grader(paths, "--notebook-timeout", "120", timeout=600)
    return dict(zip(["fifo", "zero", "folder", "deep", "linked", "good"], results)), paths, stderr, code


@pytest.mark.parametrize("name, message", [
    ("fifo", "is not a notebook file (a device, a pipe or a socket)"),
    ("zero", "is not a notebook file (a device, a pipe or a socket)"),
    ("folder", "is a folder, not a notebook file"),
    ("deep", "is not a notebook: its JSON nests too deeply to be read"),
])
def test_a_path_that_is_not_a_notebook_file_gets_a_clear_message_and_the_rest_is_graded(odd_paths, name, message):
    """DESIGN: a notebook that cannot be graded gets a clear message on stderr and a non-zero
    exit, and never stops the other notebooks of the call. Before: a FIFO blocked the grader
    for ever (opened and read without a writer), /dev/zero was read until memory ran out, a
    folder was an 'unknown assignment' named after the folder above it, and JSON nested deeper
    than Python's parser was an internal grading error (RecursionError)."""
    results, paths, stderr, code = odd_paths
    assert code != 0
    assert results["good"]["score"] == FULL, results["good"]
    r = results[name]
    given = str(paths[["fifo", "zero", "folder", "deep"].index(name)])
    assert r["notebook"] == given and r["score"] == 0.0
    assert r["error"] == f"{given} {message}", r["error"]
    assert f"cannot grade {given}: {given} {message}" in stderr
    assert "internal grading error" not in stderr and "Traceback" not in stderr, stderr[-2000:]
    if name != "folder":  # its notebook's tests are listed, at zero
        assert [t["grade_id"] for t in r["tests"]] == TESTS and r["max_score"] == FULL


def test_a_notebook_linked_into_an_assignment_folder_is_graded_as_that_assignment(odd_paths):
    """DESIGN: a notebook's assignment is the name of its parent folder. A notebook linked into
    01_phases/ from a folder of another name is 01_phases' (before: the link was followed, and
    the grade was an 'unknown assignment' named after the target's folder)."""
    results, _, _, _ = odd_paths
    r = results["linked"]
    assert r["assignment"] == A and not r.get("error"), r.get("error")
    assert r["score"] == r["max_score"] == FULL, json.dumps(r)[:2000]


def test_cell_metadata_of_the_wrong_type_costs_nothing_else(tmp_path):
    """A solved notebook whose answer cells carry metadata of the wrong type (``tags`` a number,
    ``nbgrader`` null: hand edits, other tools) keeps full marks: such a cell is an ordinary cell,
    its tags none. Before: tags of 5 was an internal grading error (TypeError) and a null
    nbgrader made the whole notebook 'unusable', every answer scored 0 and the call exited 1."""
    def edited(name, gid, key, value):
        path = _solved(tmp_path / name / A / f"{A}.ipynb")
        data = json.loads(path.read_text())
        cell = next(c for c in data["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == gid)
        cell["metadata"][key] = value
        path.write_text(json.dumps(data))
        return path

    paths = [edited("tags", "scaled", "tags", 5), edited("nbgrader", "primitive_names", "nbgrader", None)]
    results, stderr, code = run_grader(paths)
    assert code == 0, stderr[-2000:]
    for r in results:
        assert not r.get("error"), r["error"]
        assert [t["grade_id"] for t in r["tests"]] == TESTS and r["score"] == FULL, r


@pytest.mark.parametrize("flag, value", [("--jobs", "-1"), ("--jobs", "0"), ("--cell-timeout", "0"),
                                         ("--notebook-timeout", "-5"), ("--cell-timeout", "ten")])
def test_a_limit_below_one_is_refused_naming_the_option(flag, value):
    """The command's limits are whole numbers of at least 1. Before: ``--jobs -1`` crashed with a
    traceback and no JSON, ``--cell-timeout 0`` graded two copies of one solved notebook 0 and 1
    of 5, ``--notebook-timeout -5`` stopped every notebook as 'ran -10 s, past the time limit'."""
    import subprocess
    import sys

    from conftest import ROOT

    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(released_notebook(A)), flag, value,
                           "--json"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stdout[:500])
    assert f"argument {flag}" in proc.stderr and repr(value) in proc.stderr, proc.stderr[-1000:]
    assert "Traceback" not in proc.stderr


def test_a_root_without_solutions_is_named_and_nothing_is_run(tmp_path):
    """``--root`` names the course whose solutions/ restores the tests: a folder without one is
    said so for every notebook, and no kernel runs. Before: 'internal grading error:
    FileNotFoundError: ... /solutions' for each."""
    import subprocess
    import sys

    from conftest import ROOT

    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(released_notebook(A)), "--root",
                           str(tmp_path), "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["error"] == f"--root {tmp_path} is not a course's root: it has no solutions/ folder", result
    assert result["score"] == 0.0 and not result.get("containment"), result
    assert "internal grading error" not in proc.stderr


def test_a_cell_that_prints_without_end_is_kept_to_the_output_limit_while_it_runs():
    """The grading process keeps at most the output limit of a cell's output while the cell runs,
    and the graded copy says how much was cut. Before: every message was kept until the cell
    ended and only then cut, so a cell writing 1 MB at a time until its time limit grew the
    grading process by about 40 MB a second (1.2 GB at a 30 s limit, measured on the command
    line). Here: 200 stream messages of 100,000 characters given to the notebook client as
    nbclient gives them while a cell runs (no kernel)."""
    import time

    from nbclient import NotebookClient

    from autograder.grader.execution import DEFAULT_OUTPUT_LIMIT, make_client

    client = make_client(60, time.monotonic() + 60)
    NotebookClient.__init__(client, nbformat.v4.new_notebook())
    client.reset_execution_trackers()
    client.clear_before_next_output = False  # as nbclient sets it when a cell starts
    outs = []
    msg = {"msg_type": "stream", "parent_header": {"msg_id": "m"}, "header": {"msg_type": "stream"},
           "content": {"name": "stdout", "text": "x" * 100_000}}
    for _ in range(200):
        client.output(outs, msg, None, 3)
    kept = sum(len(o.get("text", "")) for o in outs)
    assert kept <= DEFAULT_OUTPUT_LIMIT, f"{kept} characters of output kept while the cell ran"
    cell = nbformat.v4.new_code_cell("print('x' * 100_000) forever")
    cell.outputs = outs
    client.on_cell_executed(cell=cell, cell_index=3, execute_reply={"content": {"status": "ok"}})
    [note] = cell.outputs
    removed = int(note["text"].split()[0].strip("["))
    assert removed >= 200 * 100_000 and "removed by the grader" in note["text"], note


def test_the_hint_command_refuses_a_path_that_is_not_a_notebook_file(tmp_path):
    """`python -m autograder hint` given a FIFO (or a folder) names it, instead of blocking for
    ever on the read (found by the audit)."""
    from autograder.hints import find_notebook

    fifo = tmp_path / f"{A}.ipynb"
    os.mkfifo(fifo)
    for given in (fifo, tmp_path):
        with pytest.raises(ValueError, match="is not a notebook file"):
            find_notebook(str(given))


def test_a_value_that_is_not_plain_is_named_with_its_article():
    from autograder.feedback import ExerciseFailure
    from autograder.numerics import check_equal

    class Opaque:
        pass

    class Box:
        pass

    for value, phrase in ((Opaque(), "is an Opaque,"), (Box(), "is a Box,")):
        with pytest.raises(ExerciseFailure, match=phrase):
            check_equal(value, [1])
