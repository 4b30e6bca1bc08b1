"""An assignment's judge may be split over ``judge.py`` and ``judge_<exercise>.py`` files: the
grader loads them all, and neither release nor the learner's kernel ever sees one."""
from __future__ import annotations

import fnmatch
import runpy

import pytest

from autograder.common.course import data_files
from autograder.judge import judge_tests
from conftest import ROOT


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
