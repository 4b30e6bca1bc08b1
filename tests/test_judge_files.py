"""An assignment's judge may be split over ``judge.py`` and ``judge_<exercise>.py`` files: the
grader loads them all, and neither release nor the learner's kernel ever sees one. Each holds the
known answers of its exercises as data (``WRONG``, ``RIGHT``), which the tests and release read
without running the file."""
from __future__ import annotations

import fnmatch
import runpy

import pytest

from autograder.common.course import data_files
from autograder.judge import judge_tests
from conftest import ROOT, release_script


def _assignment(tmp_path, **files):
    folder = tmp_path / "07_demo"
    folder.mkdir()
    (folder / "07_demo.ipynb").write_text("{}")
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_every_judge_file_is_loaded(tmp_path):
    folder = _assignment(tmp_path, **{
        "judge.py": "def test_a(k):\n    return 'a'\n",
        "judge_b.py": "from math import sqrt\ndef test_b(k):\n    return 'b'\ndef _helper():\n    pass\n",
        "data.npy": "x"})
    tests = judge_tests(folder)
    assert sorted(tests) == ["test_a", "test_b"]
    assert tests["test_b"](None) == "b"


def test_a_test_in_two_judge_files_is_an_error(tmp_path):
    folder = _assignment(tmp_path, **{"judge.py": "def test_a(k):\n    pass\n",
                                      "judge_a.py": "def test_a(k):\n    pass\n"})
    with pytest.raises(ValueError, match="test_a is defined in two judge files"):
        judge_tests(folder)


def test_judge_files_never_reach_the_kernel_or_the_release(tmp_path):
    folder = _assignment(tmp_path, **{"judge.py": "", "judge_b.py": "", "data.npy": "x"})
    assert [p.name for p in data_files(folder / "07_demo.ipynb")] == ["data.npy"]
    config = runpy.run_path(str(ROOT / "scripts" / "release.py"))
    for patterns in (config["JUDGE_IGNORE"], _nbgrader_ignore()):
        for name in ("judge.py", "judge_b.py", "judge_train_losses.py"):
            assert any(fnmatch.fnmatch(name, p) for p in patterns), (name, patterns)
        assert not any(fnmatch.fnmatch("07_demo.ipynb", p) for p in patterns)


def _nbgrader_ignore():
    from traitlets.config import Config

    c = Config()
    path = ROOT / "nbgrader_config.py"
    exec(compile(path.read_text(), str(path), "exec"), {"get_config": lambda: c, "__file__": str(path)})  # noqa: S102 - the course config
    return list(c.CourseDirectory.ignore)


def _known_answers(folder):
    return release_script()["known_answers"](folder)


def test_known_answers_are_read_as_data_never_run(tmp_path):
    """A judge file's WRONG and RIGHT are read from its text: the judge file is not run (its
    import of a missing module stays unread), and its tests are not called."""
    folder = _assignment(tmp_path, **{
        "judge.py": "import a_module_that_does_not_exist\ndef test_a(k):\n    pass\n"
                    "WRONG = {'a': [('def a(): pass', 'returns None', 'numerics')]}\n",
        "judge_b.py": "def test_b(k):\n    pass\nWRONG = {'b': [('b = 1', 'not a function', 'phases')]}\n"
                      "RIGHT = {'b': ['def b(): return 1']}\n"})
    known = _known_answers(folder)
    assert known == {"WRONG": {"a": [("def a(): pass", "returns None", "numerics")],
                               "b": [("b = 1", "not a function", "phases")]},
                     "RIGHT": {"b": ["def b(): return 1"]}}


def test_known_answers_that_are_code_are_refused(tmp_path):
    folder = _assignment(tmp_path, **{"judge.py": "def test_a(k):\n    pass\nWRONG = {'a': [make_answer()]}\n"})
    with pytest.raises(ValueError, match="WRONG must be a literal"):
        _known_answers(folder)


def test_an_exercises_answers_in_two_judge_files_is_an_error(tmp_path):
    folder = _assignment(tmp_path, **{"judge.py": "WRONG = {'a': []}\n", "judge_a.py": "WRONG = {'a': []}\n"})
    with pytest.raises(ValueError, match=r"WRONG of \['a'\] also in another judge file"):
        _known_answers(folder)
