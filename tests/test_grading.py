"""The grader's command line and its rules, against a corpus of broken and hostile submissions.

Each submission starts from the released 01_phases notebook (which scores zero) and tries to
earn points without correct answers, or to break the grader; none may succeed.
"""
from __future__ import annotations

import copy
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from autograder.common.course import test_cells as source_tests
from conftest import ROOT, fill_answers, grade_saving, printed, released_notebook, run_grader, solution_notebook

pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("grading")]
A = "01_phases"
TESTS = [gid for gid, _ in source_tests(solution_notebook(A))]  # its source notebook's, in order
FULL = sum(points for _, points in source_tests(solution_notebook(A)))
SOLUTIONS = {c.metadata["nbgrader"]["grade_id"]: c.source
             for c in nbformat.read(str(solution_notebook(A)), as_version=4).cells
             if c.metadata.get("nbgrader", {}).get("solution")}


def _released():
    return nbformat.read(str(released_notebook(A)), as_version=4)


def _gid(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _write(tmp_path, name, nb):
    path = tmp_path / name / A / f"{A}.ipynb"
    path.parent.mkdir(parents=True)
    if isinstance(nb, (str, bytes)):
        path.write_bytes(nb if isinstance(nb, bytes) else nb.encode())
    else:
        nbformat.write(nb, str(path))
    return path


def _with_answer(nb, gid, source):
    for c in nb.cells:
        if _gid(c) == gid:
            c.source = source
    return nb


def _hostile_corpus():
    """name -> notebook that must score 0 on every test."""
    corpus = {}
    nb = _released()
    for c in nb.cells:
        if _gid(c) in TESTS:
            c.source = ""
    corpus["tests_emptied"] = nb
    nb = _released()
    nb.cells = [c for c in nb.cells if _gid(c) not in TESTS]
    corpus["tests_deleted"] = nb
    nb = _released()
    for i, c in enumerate(nb.cells):
        if _gid(c) in TESTS:
            nb.cells[i] = nbformat.v4.new_markdown_cell(c.source, metadata=c.metadata)
    corpus["tests_turned_markdown"] = nb
    nb = _released()
    for i, c in enumerate(list(nb.cells)):
        if _gid(c) in TESTS:
            c.source = "pass  # edited to do nothing"
    nb.cells = nb.cells + [copy.deepcopy(c) for c in nb.cells if _gid(c) in TESTS]
    corpus["tests_edited_and_duplicated"] = nb
    nb = _released()
    for c in nb.cells:
        if _gid(c) in TESTS:
            c.metadata = {}
            c.source = "print('ok')"
    corpus["cells_without_metadata"] = nb
    nb = _released()  # nbgrader metadata forged: points claimed, tests made answers, a made-up test
    for c in nb.cells:
        if _gid(c) in TESTS:
            c.metadata["nbgrader"].update(solution=True, points=100, schema_version=99)
            c.source = "pass"
        elif c.metadata.get("nbgrader", {}).get("solution"):
            c.metadata["nbgrader"].update(grade=True, points=100)
    nb.cells.append(nbformat.v4.new_code_cell("pass", metadata={"nbgrader": {
        "grade": True, "grade_id": "test_bonus", "points": 10, "solution": False, "locked": True,
        "schema_version": 3}}))
    corpus["nbgrader_metadata_forged"] = nb
    corpus["checks_monkeypatched"] = _with_answer(_released(), "primitive_names", (
        "import autograder as ag, autograder.numerics, numpy as np, jax.numpy as jnp\n"
        "for _m in (ag, autograder.numerics):\n"
        "    for _n in dir(_m):\n"
        "        if _n.startswith(('check', 'call', 'fail')):\n"
        "            setattr(_m, _n, lambda *a, **k: None)\n"
        "np.allclose = lambda *a, **k: True\nnp.array_equal = lambda *a, **k: True\n"
        "jnp.allclose = lambda *a, **k: True\n"
        "def primitive_names(f, *args):\n    return []\n"))
    corpus["checks_patched_while_called"] = _with_answer(_released(), "primitive_names", (
        "def primitive_names(f, *args):\n"
        "    import autograder as ag, autograder.numerics as agn, numpy as np\n"
        "    for m in (ag, agn):\n"
        "        for n in list(vars(m)):\n"
        "            if n.startswith('check'):\n"
        "                vars(m)[n] = lambda *a, **k: None\n"
        "    np.allclose = lambda *a, **k: True\n"
        "    return []\n"))
    corpus["checks_setattr_while_called"] = _with_answer(_released(), "runtime_print", (
        "def runtime_print(x):\n"
        "    import autograder as ag\n"
        "    ag.check_prints_values = lambda *a, **k: None\n"
        "    return x\n"))
    # IPython's own machinery: rewrite the test cells before they run
    clear_hooks = ("ip = get_ipython()\n"
                   "for _event in ip.events.callbacks.values():\n    _event.clear()\n")
    for name, attack in [
            ("input_transformer",
             "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])\n"),
            ("hooks_cleared_then_transformer",
             clear_hooks + "ip.input_transformers_cleanup.append(lambda lines: ['pass\\n'])\n"),
            ("transformer_keeps_first_line",
             clear_hooks + "ip.input_transformers_cleanup.append(lambda lines: lines[:1])\n"),
            ("transformer_list_replaced",
             clear_hooks + "ip.input_transformer_manager.cleanup_transforms = [lambda lines: lines[:1]]\n"),
            ("hook_reinstalls_transformer",
             "ip = get_ipython()\n"
             "def _again(*_):\n    ip.input_transformers_cleanup.append(lambda lines: lines[:1])\n"
             "ip.events.register('post_run_cell', _again)\n"),
            ("transform_cell_shadowed", clear_hooks + "ip.transform_cell = lambda raw: 'pass\\n'\n")]:
        corpus[name] = _with_answer(_released(), "primitive_names", attack + (
            "def primitive_names(f, *args):\n    return []\n"))
    corpus["functions_rewritten_in_place"] = _with_answer(_released(), "primitive_names", (
        "import sys, types\n"
        "_noop = (lambda *a, **k: None).__code__\n"
        "for _n, _m in list(sys.modules.items()):\n"
        "    if _n.startswith('autograder') or _n in ('numpy', 'jax.numpy'):\n"
        "        for _v in list(vars(_m).values()):\n"
        "            if isinstance(_v, types.FunctionType):\n"
        "                try:\n                    _v.__code__ = _noop\n"
        "                except Exception:\n                    pass\n"
        "def primitive_names(f, *args):\n    return []\n"))
    corpus["answer_lies_about_equality"] = _with_answer(_released(), "primitive_names", (
        "class _Names(list):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "def primitive_names(f, *args):\n    return _Names()\n"))
    corpus["fake_results_printed"] = _with_answer(_released(), "primitive_names", (
        "import os, json\n"
        "print(json.dumps({'score': 4.0, 'max_score': 4.0}))\n"
        "os.system('echo {\\\"score\\\": 4.0}')\n"
        "os.write(1, b'{\"score\": 4.0}')\n"
        "def primitive_names(f, *args):\n    return []\n"))
    nb = _released()
    for c in nb.cells:
        if _gid(c) in TESTS:
            c.outputs = [nbformat.v4.new_output("stream", name="stdout", text="all tests passed")]
            c.execution_count = 1
    corpus["outputs_prefilled"] = nb
    corpus["sys_exit"] = _with_answer(_released(), "primitive_names", "import sys\nsys.exit(0)\n")
    corpus["keyboard_interrupt"] = _with_answer(_released(), "primitive_names", "raise KeyboardInterrupt\n")
    corpus["huge_output"] = _with_answer(_released(), "primitive_names", "print('x' * 20_000_000)\n")
    corpus["os_exit"] = _with_answer(_released(), "runtime_print", "import os\nos._exit(3)\n")
    return corpus


def _grading_detector():
    """A correct answer that turns wrong when it can tell it is being graded: its points say what
    it observed (graded in the hostile batch, scored on its own)."""
    return _with_answer(_released(), "primitive_names", (
        "import os, sys\n"
        "GRADING = (bool(os.environ.get('NBGRADER_EXECUTION')) or 'nbgrader' in sys.modules\n"
        "           or 'autograder.grader.pipeline' in sys.modules or 'autograder.grader' in sys.modules)\n" + SOLUTIONS["primitive_names"] + "\n"
        "if GRADING:\n    def primitive_names(f, *args):\n        return []\n"))


@pytest.fixture(scope="module")
def hostile_results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    corpus = {**_hostile_corpus(), "grading_detected": _grading_detector()}
    paths = [_write(tmp, name, nb) for name, nb in corpus.items()]
    results, stderr, code = run_grader(paths)
    return dict(zip(corpus, results)), stderr, code


def test_a_submission_cannot_tell_it_is_being_graded(hostile_results):
    results, _, _ = hostile_results
    passed = {t["exercise"]: t["passed"] for t in results["grading_detected"]["tests"]}
    assert passed["primitive_names"], "the submission detected the grader (its answer turned wrong)"


@pytest.mark.parametrize("name", list(_hostile_corpus()))
def test_hostile_submission_earns_nothing(hostile_results, name):
    results, _, _ = hostile_results
    r = results[name]
    assert [t["grade_id"] for t in r["tests"]] == TESTS, "every test appears once, in order"
    assert r["max_score"] == FULL
    assert r["score"] == 0.0, {t["exercise"]: t["feedback"] for t in r["tests"] if t["points"]}
    assert all(not t["passed"] and t["feedback"] for t in r["tests"])


def test_stdout_is_only_json(hostile_results):
    results, _, code = hostile_results
    assert code == 0
    assert len(results) == len(_hostile_corpus()) + 1


NOISY_WRAPPER = """
import logging as _logging, sys as _sys, warnings as _warnings

def {name}(*args, **kwargs):
    _sys.stderr.write("{name}: some diagnostics on stderr\\n")
    _sys.stderr.flush()
    _warnings.warn("{name}: a RuntimeWarning while it is tested", RuntimeWarning)
    _logging.getLogger("jax._src.xla_bridge").warning(
        "An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not "
        "installed. Falling back to cpu.")
    return _{name}(*args, **kwargs)
"""


def test_correct_answers_with_warnings_and_foreign_metadata_get_full_marks(tmp_path):
    noisy = {gid: "import sys, warnings\nsys.stderr.write('a warning on stderr\\n')\n"
                  "warnings.warn('deprecated thing')\n" + src for gid, src in SOLUTIONS.items()}
    # a correct answer that prints a lot while tested: the cell's output is cut, its points stay
    noisy["scaled"] = noisy["scaled"].replace("def scaled(", "def _scaled(") + (
        "\ndef scaled(*args, **kwargs):\n    print('.' * 600_000)\n    return _scaled(*args, **kwargs)\n")
    # correct answers that write to stderr *while the test cell calls them*, so the TEST cell's
    # output holds stderr (which nbgrader's own scoring zeroes): text, a RuntimeWarning, and a
    # warning logged the way JAX logs its own
    for gid in ("primitive_names", "matmul_flops"):
        noisy[gid] = noisy[gid].replace(f"def {gid}(", f"def _{gid}(") + NOISY_WRAPPER.format(name=gid)
    path = fill_answers(released_notebook(A), noisy, tmp_path / "noisy" / A / f"{A}.ipynb")
    nb = nbformat.read(str(path), as_version=4)
    nb.metadata["kernelspec"] = {"name": "no-such-kernel", "display_name": "x", "language": "python"}
    nbformat.write(nb, str(path))
    results, stderr, code = run_grader([path])
    assert code == 0, stderr[-2000:]
    assert results["score"] == results["max_score"] == FULL, results


def test_unreadable_notebooks_get_a_clear_message_and_do_not_stop_others(tmp_path):
    good = fill_answers(released_notebook(A), SOLUTIONS, tmp_path / "good" / A / f"{A}.ipynb")
    not_json = _write(tmp_path, "notjson", "this is { not json")
    empty = _write(tmp_path, "empty", nbformat.v4.new_notebook())
    v3 = _write(tmp_path, "v3", json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {},
                                             "worksheets": [{"cells": []}]}))
    unknown = tmp_path / "nope" / "99_unknown" / "99_unknown.ipynb"
    unknown.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), str(unknown))
    missing = tmp_path / "typo" / "exercises" / "0l_phases.ipynb"  # a mistyped path
    missing_here = tmp_path / "gone" / A / f"{A}.ipynb"              # an assignment's folder, no file
    missing_here.parent.mkdir(parents=True)
    paths = [not_json, good, empty, v3, unknown, missing, missing_here]
    results, stderr, code = run_grader(paths)
    assert code != 0
    assert "not valid JSON" in stderr and "unknown assignment" in stderr
    assert [r["notebook"] for r in results] == list(map(str, paths))
    assert results[1]["score"] == FULL
    for r in (results[0], results[2], results[3], results[6]):
        assert r["score"] == 0.0 and r["max_score"] == FULL and [t["grade_id"] for t in r["tests"]] == TESTS
    assert results[4]["tests"] == [] and "unknown assignment" in results[4]["error"]
    for r, path in ((results[5], missing), (results[6], missing_here)):
        assert r["error"] == f"no such file: {path}", r["error"]
        assert f"cannot grade {path}: no such file" in stderr
    assert "unknown assignment '0l_phases'" not in stderr and "unknown assignment 'exercises'" not in stderr


def test_a_notebook_nbformat_rejects_gets_a_clear_message_and_the_batch_goes_on(tmp_path):
    """Valid JSON with an ``nbformat`` field is read as a notebook once its kernel has started
    (pipeline's read_notebook): rejected then, the result says why and the others are graded."""
    bad = _write(tmp_path, "schema", json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": 7}))
    good = fill_answers(released_notebook(A), SOLUTIONS, tmp_path / "good" / A / f"{A}.ipynb")
    results, stderr, code = run_grader([bad, good], timeout=600)
    assert code != 0
    assert results[0]["score"] == 0.0 and [t["grade_id"] for t in results[0]["tests"]] == TESTS
    assert "is not a notebook nbformat can read" in results[0]["error"], results[0]["error"]
    assert results[1]["score"] == FULL


def test_deleted_cells_and_edited_nbgrader_metadata_cost_only_what_they_touch(tmp_path):
    """nbgrader puts a deleted test cell back after the cell before it in the source, and fails
    (KeyError) when that one was deleted too; it refuses a notebook whose nbgrader flags were
    edited. Either way the whole notebook was "not graded", its correct answers included. Each
    exercise whose cells are gone now scores zero on its own, and edited flags are put back."""
    def solved_without(*exercises):
        nb = nbformat.read(str(fill_answers(released_notebook(A), SOLUTIONS,
                                            tmp_path / "src" / secrets.token_hex(4) / f"{A}.ipynb")),
                           as_version=4)
        gone = {g for e in exercises for g in (e, f"test_{e}")}
        nb.cells = [c for c in nb.cells if _gid(c) not in gone]
        return nb

    def solved_with(**flags):  # grade_id -> nbgrader flags changed in that cell
        nb = solved_without()
        for c in nb.cells:
            c.metadata.get("nbgrader", {}).update(flags.get(_gid(c), {}))
        return nb

    FIRST, LAST = (gid.removeprefix("test_") for gid in (TESTS[0], TESTS[-1]))
    reordered = solved_without()
    reordered.cells = [c for c in reordered.cells if _gid(c) not in TESTS][::-1]  # tests gone, order reversed
    cases = {
        "one": (solved_without("runtime_print"), {"runtime_print"}),
        "first_and_last": (solved_without(FIRST, LAST), {FIRST, LAST}),
        "reversed": (reordered, set()),
        "flags_edited": (solved_with(runtime_print={"grade": True, "points": 5},
                                     test_scaled={"solution": True},
                                     test_matmul_flops={"schema_version": 99, "locked": False}), set()),
        "empty": (nbformat.v4.new_notebook(), set(SOLUTIONS) | {"scaled"}),
        "v3_empty": (json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {},
                                 "worksheets": [{"cells": []}]}), set(SOLUTIONS) | {"scaled"}),
    }
    paths = [_write(tmp_path, name, nb) for name, (nb, _) in cases.items()]
    results, stderr, code = run_grader(paths)
    assert code == 0, stderr[-3000:]
    for (name, (_, missing)), r in zip(cases.items(), results):
        assert not r.get("error"), (name, r.get("error"))
        assert [t["grade_id"] for t in r["tests"]] == TESTS, name
        for t in r["tests"]:
            if t["exercise"] in missing:
                assert t["points"] == 0 and "is not defined" in t["feedback"], (name, t)
            else:
                assert t["points"] == t["max_points"], (name, t)


def test_one_grading_process_judges_every_chapter_with_jax_defaults(tmp_path):
    """One grading process (-j 1) judges a correct 01 that left float64 on and rank promotion
    raising (the judge calls it with JAX's defaults), then a correct 09, whose judge needs 8 CPU
    devices: JAX fixes that count when the first judge starts it, so it is set before."""
    nb = nbformat.read(str(fill_answers(released_notebook(A), SOLUTIONS, tmp_path / "src" / f"{A}.ipynb")),
                       as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(first + 1, nbformat.v4.new_code_cell(
        "import jax\njax.config.update('jax_enable_x64', True)\n"
        "jax.config.update('jax_numpy_rank_promotion', 'raise')"))
    sharding = "09_sharding"
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source
               for c in nbformat.read(str(solution_notebook(sharding)), as_version=4).cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    paths = [_write(tmp_path, "x64", nb),
             fill_answers(released_notebook(sharding), answers, tmp_path / "s09" / sharding / f"{sharding}.ipynb")]
    results, stderr, code = run_grader(paths, "--jobs", "1")
    assert code == 0, stderr[-3000:]
    for r in results:
        assert r["score"] == r["max_score"] > 0, [(t["grade_id"], t["feedback"]) for t in r["tests"] if not t["passed"]]


def test_a_program_the_judge_runs_cannot_take_the_machines_memory():
    """A program exported from learner code that builds a 3.6 GB array never runs in the grading
    process (whose data memory is capped too, AUTOGRADER_JUDGE_MEMORY_MB): the judge hands it to
    the program runner, which refuses or fails it with a message for the learner, and the
    grading process goes on."""
    code = (
        "import os, jax, jax.numpy as jnp\n"
        "from autograder.sandbox.judge_memory import limit_judge_memory\n"
        "from autograder.judge import ChannelError, Exported\n"
        "from autograder.judge.runner import ProgramFailure\n"
        "limit_judge_memory(1536)\n"
        "f = jax.jit(lambda x: jnp.zeros((30000, 30000), jnp.float32) + x[0])\n"
        "exp = jax.export.export(f)(jax.ShapeDtypeStruct((3,), jnp.float32))\n"
        "try:\n    Exported(exp).call(jnp.ones(3))\n    print('allocated')\n"
        "except (ChannelError, ProgramFailure) as exc:\n    print('refused:', exc)\n"
        "print('after it', float(jax.jit(lambda x: x.sum())(jnp.ones(3))))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "refused:" in proc.stdout and "allocated" not in proc.stdout, proc.stdout
    assert "too large" in proc.stdout or "ran out of memory" in proc.stdout, proc.stdout
    assert "after it 3.0" in proc.stdout, proc.stdout  # the grading process goes on


def test_grading_processes_have_the_judges_memory_cap_and_kernels_do_not(tmp_path):
    """A grading process starts under the cap (a soft RLIMIT_DATA); a correct notebook whose kernel
    holds 2 GiB before it defines an answer keeps full marks under a 1536 MiB cap: kernels are not
    held to it (the limits launcher lifts it)."""
    # a grading process of a fresh command (this one has JAX's threads: it must not fork)
    code = ("import multiprocessing, resource, types\n"
            "from autograder.grader import batch\n"
            "batch._grade = lambda job: types.SimpleNamespace(\n"
            "    as_dict=lambda: {'data': resource.getrlimit(resource.RLIMIT_DATA)[0]})\n"
            "from autograder.common.settings import Settings\n"
            "from autograder.grader.pipeline import Options\n"
            "settings = Settings.load()\n"
            "w = batch._Worker(multiprocessing.get_context('fork'), settings.judge_memory_mb)\n"
            "w.give(0, batch.Job('unused', Options(settings)))\n"
            "print(w.conn.recv()['data'] if w.conn.poll(60) else 'no answer')\n"
            "w.stop()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "AUTOGRADER_JUDGE_MEMORY_MB": "1536"})
    assert proc.stdout.split() == [str(1536 << 20)], (proc.stdout, proc.stderr[-2000:])
    ballast = {"primitive_names": "import numpy as np\n_ballast = np.ones(2**31, np.uint8)  # 2 GiB\n"
                                  + SOLUTIONS["primitive_names"]}
    heavy = fill_answers(released_notebook(A), {**SOLUTIONS, **ballast}, tmp_path / "heavy" / A / f"{A}.ipynb")
    results, stderr, code = run_grader([heavy], env={"AUTOGRADER_JUDGE_MEMORY_MB": "1536"})
    assert code == 0 and results["score"] == results["max_score"] == FULL, results


STARTED_THEN_BATCH = """\
import json, sys
import jax
from jax._src import xla_bridge
from autograder.common.settings import Settings
from autograder.grader import batch, startup

startup.before_fork(parallel=True)  # what a batch's parent imports before it forks: no backend
print("after the imports:", batch.start_method(), xla_bridge.backends_are_initialized(), file=sys.stderr)
assert batch.start_method() == "fork" and not xla_bridge.backends_are_initialized()
float(jax.numpy.ones(3).sum())  # JAX's backend and its threads started, as in a test process
print("after a computation:", batch.start_method(), file=sys.stderr)
results = batch.grade_many(sys.argv[1:], Settings.load(), workers=2, notebook_timeout=60)
print(json.dumps([r.as_dict() for r in results]))
"""


def test_a_batch_from_a_process_whose_jax_has_started_grades_every_notebook(tmp_path):
    """grade_many forks its grading processes; a child forked from a process whose JAX backend
    runs would have JAX's state without its threads, hang on its first computation and end "not
    graded" past its time limit. From such a process the batch spawns them instead: both
    notebooks are graded (full marks and zero), within their time. Importing JAX (what a batch's
    parent does before it forks) starts no backend: there it still forks."""
    solved = fill_answers(released_notebook(A), SOLUTIONS, tmp_path / "solved" / A / f"{A}.ipynb")
    released = _write(tmp_path, "released", _released())
    proc = subprocess.run([sys.executable, "-c", STARTED_THEN_BATCH, str(solved), str(released)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "after a computation: spawn" in proc.stderr, proc.stderr[-3000:]
    from autograder.grader.batch import DIED, OVERDUE
    from autograder.judge.starvation import is_starved

    for result, score in zip(json.loads(proc.stdout.splitlines()[-1]), (FULL, 0)):
        error = result.get("error") or ""
        assert not error.startswith((OVERDUE.split("{")[0], DIED[:40])), error  # a forked child's hang, or its death
        if any(is_starved(str(t.get("feedback", ""))) for t in result["tests"]):
            continue  # a busy machine left a test not graded: this grading's own load, not the fork's
        assert not error and result["score"] == score and len(result["tests"]) == len(TESTS), result


def test_a_notebook_too_large_to_read_gets_a_clear_message_and_others_are_graded(tmp_path):
    """A submission over the size the grader reads (AUTOGRADER_MAX_NOTEBOOK_MB, 100 MB by
    default; 1 MB here) is not read at all: zero, and what to do about it."""
    big = _released()
    big.cells.append(nbformat.v4.new_markdown_cell("x" * (2 * 2**20)))
    big = fill_answers(_write(tmp_path, "big", big), SOLUTIONS, tmp_path / "big2" / A / f"{A}.ipynb")
    good = fill_answers(released_notebook(A), SOLUTIONS, tmp_path / "good" / A / f"{A}.ipynb")
    results, stderr, code = run_grader([big, good], env={"AUTOGRADER_MAX_NOTEBOOK_MB": "1"})
    assert code != 0
    r, ok = results
    assert ok["score"] == FULL
    assert r["score"] == 0.0 and [t["grade_id"] for t in r["tests"]] == TESTS
    assert "is 2 MB, more than the 1 MB the grader reads: clear its outputs" in r["error"], r["error"]


@pytest.mark.parametrize("name, value", [("AUTOGRADER_MEMORY_MB", "4GB"), ("AUTOGRADER_NPROC", "0"),
                                         ("AUTOGRADER_SANDBOX_UIDS", "61000-60000"),
                                         ("AUTOGRADER_MAX_NOTEBOOK_MB", "lots"), ("AUTOGRADER_BOX_MB", "1GB"),
                                         ("AUTOGRADER_JUDGE_MEMORY_MB", "64")])
def test_an_operator_setting_that_does_not_parse_is_named_and_nothing_is_run(tmp_path, name, value):
    """A mistyped setting in the grader's environment: every row of the batch says which one and
    what it must be (no traceback, no "internal error"), and no notebook is run with a guess."""
    good = fill_answers(released_notebook(A), SOLUTIONS, tmp_path / "good" / A / f"{A}.ipynb")
    results, stderr, code = run_grader([good, good], env={name: value})
    assert code != 0
    for r in results:
        assert r["score"] == 0.0 and [t["grade_id"] for t in r["tests"]] == TESTS
        assert r["error"].startswith(f"{name}={value!r} is not "), r["error"]
        assert not r.get("containment"), r  # no kernel ran
    assert "Traceback" not in stderr and "internal grading error" not in stderr, stderr[-2000:]


def test_an_internal_grading_error_still_lists_every_test_at_zero(tmp_path):
    """nbgrader itself failing while a notebook is graded (here its Execute preprocessor cannot
    even be created): the notebook still gets its result, every test of the source at zero.
    (A grader of its own, patched: this process has started JAX, which a fork must not copy.)"""
    path = fill_answers(released_notebook(A), SOLUTIONS, tmp_path / "solved" / A / f"{A}.ipynb")
    script = (
        "import sys, nbgrader.preprocessors\n"
        "class Broken:\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        raise RuntimeError(\"nbgrader's Execute could not be created\")\n"
        "nbgrader.preprocessors.Execute = Broken\n"
        "from autograder.__main__ import main\n"
        "sys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.run([sys.executable, "-c", script, "grade", str(path), "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    code, err = proc.returncode, proc.stderr
    result = json.loads(proc.stdout)
    assert code != 0
    assert result["error"] == ("internal grading error: RuntimeError: nbgrader's Execute could "
                               "not be created"), result
    assert f"cannot grade {path}: internal grading error" in err
    assert [t["grade_id"] for t in result["tests"]] == TESTS
    assert [t["max_points"] for t in result["tests"]] == [1.0] * len(TESTS)
    assert result["score"] == 0.0 and result["max_score"] == FULL
    for t in result["tests"]:
        assert t["points"] == 0.0 and t["passed"] is False
        assert "internal grading error" in t["feedback"] and "could not be created" in t["feedback"]


def test_modules_beside_the_notebook_do_not_shadow_the_graders(tmp_path):
    """Run from the notebook's folder (``python -m`` puts it first on sys.path), a learner's
    ``timeit.py`` and ``sqlite3.py`` must not replace the standard library inside the grader."""
    path = fill_answers(released_notebook(A), SOLUTIONS, tmp_path / A / f"{A}.ipynb")
    for name in ("timeit", "sqlite3", "codeop"):
        (path.parent / f"{name}.py").write_text(f"raise ImportError('the learner\\'s own {name}.py')\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", path.name, "--json"],
                          capture_output=True, text=True, cwd=path.parent, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert "error" not in result, result["error"]
    assert result["score"] == result["max_score"] == FULL, result


def test_infinite_loop_and_background_process_are_stopped(tmp_path):
    marker = "317.25"
    nb = _with_answer(_released(), "primitive_names",
                      f"import subprocess\nsubprocess.Popen(['sleep', '{marker}'])\n"
                      "def primitive_names(f, *args):\n    return []\n")
    nb = _with_answer(nb, "matmul_flops", "while True:\n    pass\n")
    path = _write(tmp_path, "loop", nb)
    start = time.time()
    results, _, _ = run_grader([path], "--cell-timeout", "5", "--notebook-timeout", "60")
    assert time.time() - start < 90
    assert results["score"] == 0.0
    flops = {t["exercise"]: t for t in results["tests"]}["matmul_flops"]
    assert not flops["passed"]
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True).stdout
    assert not left.strip(), "a process started by the submission outlived its grading"


# Written by other tools (git, pip's in-tree builds, pytest, the Colab venv), never by grading.
_NOT_CHECKOUT = {".git", "artifacts", "build", "__pycache__", ".pytest_cache", ".ruff_cache"}  # tools, not grading


def _checkout_snapshot():
    """{relative path: (kind, size, mtime_ns)} of everything in the checkout (.course/ included)."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in _NOT_CHECKOUT and not d.startswith(".venv")
                       and not d.endswith(".egg-info")]
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            kind = "dir" if name in dirnames else "file"
            snap[os.path.relpath(full, ROOT)] = (kind, None if kind == "dir" else st.st_size,
                                                 None if kind == "dir" else st.st_mtime_ns)
    return snap


@pytest.fixture(scope="module")
def make_check(tmp_path_factory):
    """``make check``'s command (human output, several notebooks, run in the checkout) on a
    solution-filled 01_phases and the blank released 03_purity of the checkout itself, as an
    ordinary learner runs it (no sandbox, a gradebook cache of its own), with the checkout
    snapshotted around it."""
    tmp = tmp_path_factory.mktemp("check")
    solved = fill_answers(released_notebook(A), SOLUTIONS, tmp / "solved" / A / f"{A}.ipynb")
    blank = Path("exercises") / "03_purity" / "03_purity.ipynb"
    env = dict(os.environ, AUTOGRADER_SANDBOX="0", XDG_CACHE_HOME=str(tmp / "cache"))
    before = _checkout_snapshot()
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(solved), str(blank)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    after = _checkout_snapshot()
    return proc, before, after


def _source_tests(assignment):
    nb = nbformat.read(str(solution_notebook(assignment)), as_version=4)
    meta = [c.metadata.get("nbgrader", {}) for c in nb.cells if c.cell_type == "code"]
    return [float(m.get("points", 0)) for m in meta if m.get("grade") and not m.get("solution")]


def test_human_output_of_several_notebooks_ends_with_progress_by_chapter(make_check):
    proc, _, _ = make_check
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "[PASS] primitive_names" in out and "[FAIL] step" in out
    assert out.index("03_purity): 0/") < out.index("Progress by chapter")
    n = len(_source_tests("03_purity"))
    m = sum(_source_tests("03_purity"))
    summary = out[out.index("Progress by chapter"):].splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in summary[2:] if line.split() and "-" * 8 not in line}
    k, f = len(TESTS), FULL
    assert rows == {"01_phases": [f"{k}/{k}", f"{f:g}/{f:g}"], "03_purity": [f"0/{n}", f"0/{m:g}"],
                    "total": [f"{k}/{k + n}", f"{f:g}/{f + m:g}"]}, "\n".join(summary)
    assert summary[-1].split()[0] == "total"


def test_grading_writes_nothing_into_the_checkout(make_check):
    proc, before, after = make_check
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert any(p.startswith("exercises" + os.sep) for p in before), "the snapshot saw no checkout"
    new = sorted(set(after) - set(before))
    changed = sorted(p for p in set(before) & set(after) if before[p] != after[p])
    gone = sorted(set(before) - set(after))
    assert not new and not changed and not gone, dict(new=new, changed=changed, gone=gone)


def test_human_readable_output(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(released_notebook(A))],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0
    assert "[FAIL] primitive_names" in proc.stdout and f"0/{FULL:g}" in proc.stdout


# --------------------------------------------------------------------------- containment

CAN_SANDBOX = hasattr(os, "geteuid") and os.geteuid() == 0 and bool(shutil.which("unshare"))
needs_sandbox = pytest.mark.skipif(
    not CAN_SANDBOX, reason="the grader contains files and processes only when it runs as root "
                            "with util-linux's unshare (otherwise it falls back to a process "
                            "group, which cannot stop these submissions)")

_WRITER = """\
import glob, os, time
report = []
def attempt(what, fn):
    try:
        fn()
        report.append("DONE " + what)
    except Exception as exc:
        report.append(f"refused {{what}}: {{type(exc).__name__}}")
def write(path, text="pwned"):
    with open(path, "w") as f:
        f.write(text)
own = os.path.realpath(os.path.join(os.getcwd(), "..", "..", ".."))
attempt("overwrite a file of the checkout", lambda: write({sentinel!r}))
attempt("delete a file of the checkout", lambda: os.remove({doomed!r}))
attempt("create a file in the checkout", lambda: write({checkout!r} + "/pwned.txt"))
attempt("overwrite the gradebook", lambda: write({gradebook!r}))
attempt("create a file in the real checkout", lambda: write({root_probe!r}))
attempt("overwrite its own gradebook", lambda: write(os.path.join(own, "gradebook.db")))
attempt("create a file in its own run folder", lambda: write(os.path.join(own, "pwned.txt")))
end = time.time() + 8
while time.time() < end:
    for d in set(glob.glob({tmpdir!r} + "/run-*") + glob.glob({tmpdir!r} + "/run-*/box/work/*")):
        if not os.path.realpath(d).startswith(own):
            report.append("SAW another run folder " + d)
            attempt("write in another run folder " + d, lambda: write(d + "/pwned.txt"))
    time.sleep(0.5)
report.append("saw its own run folder" if os.path.isdir(own + "/box/work") else "own run folder not found")
print("writer-report: " + " | ".join(report))
def primitive_names(f, *args):
    return []
"""

_DAEMONS = """\
import os
os.system("setsid sh -c 'while true; do touch {first}; sleep 0.2; done # {marker}' >/dev/null 2>&1 &")
if os.fork() == 0:  # a double fork into a new session
    os.setsid()
    if os.fork() == 0:
        os.execvp("sh", ["sh", "-c", "while true; do touch {second}; sleep 0.2; done # {marker}"])
    os._exit(0)
os.wait()
try:
    os.setsid()  # and the kernel itself leaves its process group
except OSError:
    pass
import time
time.sleep(1.5)
print("daemons-alive: " + str(os.path.exists("{first}") and os.path.exists("{second}")))
def primitive_names(f, *args):
    return []
"""


@pytest.fixture(scope="module")
def contained(tmp_path_factory):
    """One batch (-j 2): a submission that writes and deletes files around it, a correct one graded
    beside it, and one that leaves daemons behind (and answers one exercise right)."""
    tmp = tmp_path_factory.mktemp("contained")
    checkout = Path(tempfile.mkdtemp(prefix="fake-checkout-"))  # permissions of a real checkout
    root_probe = ROOT / f"pwned-{secrets.token_hex(6)}.txt"
    try:
        checkout.chmod(0o755)
        (checkout / ".course").mkdir(mode=0o755)
        files = {"sentinel": checkout / "README.md", "doomed": checkout / "keep.txt",
                 "gradebook": checkout / ".course" / "gradebook.db"}
        for name, f in files.items():
            f.write_text(f"original {name}\n")
            f.chmod(0o644)
        marker = f"daemon-{secrets.token_hex(6)}"
        # the daemons touch files in the kernel's own folder (it can write nowhere else)
        writer = _with_answer(_released(), "primitive_names", _WRITER.format(
            **{k: str(v) for k, v in files.items()}, checkout=str(checkout), root_probe=str(root_probe),
            tmpdir=tempfile.gettempdir()))
        daemons = _with_answer(_with_answer(_released(), "primitive_names", _DAEMONS.format(
            first="daemon-first", second="daemon-second", marker=marker)), "scaled", SOLUTIONS["scaled"])
        paths = [_write(tmp, "writer", writer),
                 fill_answers(released_notebook(A), SOLUTIONS, tmp / "good" / A / f"{A}.ipynb"),
                 _write(tmp, "daemons", daemons)]
        saved = {paths[0]: tmp / "graded" / "writer.ipynb", paths[2]: tmp / "graded" / "daemons.ipynb"}
        results, stderr, code = grade_saving(paths, saved, tmp / "results.json")
        time.sleep(1.5)
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.strip()
        yield dict(results=dict(zip(["writer", "good", "daemons"], results or [{}] * 3)), stderr=stderr,
                   code=code, files=files, checkout=checkout, root_probe=root_probe,
                   alive=printed(saved[paths[2]], "daemons-alive: ") == "True", left=left,
                   report=printed(saved[paths[0]], "writer-report: "))
    finally:
        root_probe.unlink(missing_ok=True)
        shutil.rmtree(checkout, ignore_errors=True)


@needs_sandbox
def test_a_submission_cannot_change_the_checkout_the_gradebook_or_another_result(contained):
    c = contained
    assert c["code"] == 0, c["stderr"][-2000:]
    assert c["report"] is not None, "the writing submission did not run"
    assert "DONE" not in c["report"], c["report"]
    assert "SAW another run folder" not in c["report"], c["report"]  # other runs are out of sight
    assert "saw its own run folder" in c["report"], c["report"]      # ... and the glob could see
    for name, f in c["files"].items():
        assert f.read_text() == f"original {name}\n", f"{f} was changed"
    assert sorted(p.name for p in c["checkout"].iterdir()) == [".course", "README.md", "keep.txt"]
    assert not c["root_probe"].exists(), "the submission wrote into the real checkout"
    writer, good = c["results"]["writer"], c["results"]["good"]
    assert writer["score"] == 0.0 and [t["grade_id"] for t in writer["tests"]] == TESTS
    assert good["score"] == good["max_score"] == FULL, good
    assert writer["containment"] == good["containment"] == "namespaces+uid"


@needs_sandbox
def test_no_process_a_submission_starts_outlives_its_grading(contained):
    c = contained
    assert c["alive"], "the daemons never ran: the test proves nothing"
    assert not c["left"], f"processes started by the submission outlived its grading: {c['left']}"
    r = c["results"]["daemons"]
    assert r["containment"] == "namespaces+uid"
    passed = {t["exercise"]: t["passed"] for t in r["tests"]}
    # the released notebook as is, but for the daemons: only its `scaled` is right as released
    assert passed == {gid.removeprefix("test_"): gid == "test_scaled" for gid in TESTS}, r
    assert r["score"] == 1.0


def test_results_say_how_the_kernel_was_contained(hostile_results):
    results, stderr, _ = hostile_results
    modes = {r.get("containment") for r in results.values()}
    assert modes == {"namespaces+uid" if CAN_SANDBOX else "user-namespace"}, modes
    assert "containment:" in stderr
