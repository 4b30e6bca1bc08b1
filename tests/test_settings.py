"""The grader's settings: declared once (autograder.common.settings.Settings), listed with their
help by ``python -m autograder settings``, built once per command from the environment and the
command's flags, every value checked."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

from autograder.common.errors import GradingError
from autograder.common.settings import SETTINGS, Settings
from conftest import ROOT


def test_every_setting_is_listed_with_its_help_default_and_value():
    env = {**os.environ, "AUTOGRADER_BOX_MB": "8", "COURSE_REPORTS": "/somewhere"}
    out = subprocess.run([sys.executable, "-m", "autograder", "settings"], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=60, check=True).stdout
    for s in SETTINGS:
        assert f"{s.name}  [default " in out and s.help in " ".join(out.split()), s.name
    assert "AUTOGRADER_BOX_MB  [default 1024; now '8']" in out, out
    assert "COURSE_REPORTS  [default (none); now '/somewhere']" in out, out


def test_the_settings_read_elsewhere_are_declared_too():
    names = {s.name for s in SETTINGS}
    assert {"COURSE_STATE", "COURSE_DB_URL", "COURSE_REPORTS"} <= names
    assert all(s.help for s in SETTINGS)


def test_one_attribute_per_setting_read_from_the_environment():
    s = Settings.load({"AUTOGRADER_SANDBOX": "OFF", "AUTOGRADER_SANDBOX_UIDS": "62000-62009",
                       "AUTOGRADER_HIDE": "/a:/b", "AUTOGRADER_MAX_NOTEBOOK_MB": "0.5",
                       "COURSE_DB_URL": "sqlite:///x.db"})
    assert s.sandbox is False and s.sandbox_uids == range(62000, 62010) and s.hide == ("/a", "/b")
    assert s.memory_mb == 4096 and s.memory_cgroup is True  # unset: the defaults
    assert s.max_notebook_bytes == 2**19 and s.course_db_url == "sqlite:///x.db" and s.course_state == ""


def test_a_commands_flags_go_over_the_environment_and_never_into_it(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_SANDBOX", "on")
    monkeypatch.setenv("COURSE_STATE", "/from/env")
    s = Settings.load(sandbox=False, course_state=None, course_reports="/flag")
    assert s.sandbox is False and s.course_state == "/from/env" and s.course_reports == "/flag"
    assert os.environ["AUTOGRADER_SANDBOX"] == "on" and "COURSE_REPORTS" not in os.environ
    with pytest.raises(TypeError, match="not_a_setting"):
        Settings.load(not_a_setting=1)


def test_the_object_is_frozen_and_travels_to_a_grading_process():
    s = Settings.load({}, memory_mb=2048)
    with pytest.raises(AttributeError):
        s.memory_mb = 1
    assert pickle.loads(pickle.dumps(s)) == s


@pytest.mark.parametrize("name, value, what", [
    ("AUTOGRADER_JUDGE_MEMORY_MB", "512", "a whole number of MiB, at least 1024"),
    ("AUTOGRADER_MEMORY_MB", "4GB", "a positive whole number of MiB"),
    ("AUTOGRADER_NPROC", "0", "a positive whole number of processes"),
    ("AUTOGRADER_MAX_NOTEBOOK_MB", "lots", "a positive number of MB"),
    ("AUTOGRADER_SANDBOX_UIDS", "61000-60000", "a range of user ids like 61000-61183"),
])
def test_a_value_that_does_not_parse_is_named_with_what_it_must_be(name, value, what):
    with pytest.raises(GradingError) as caught:
        Settings.load({name: value})
    assert str(caught.value).startswith(f"{name}={value!r} is not {what}"), caught.value


def test_a_bad_flag_is_checked_as_the_environment_would_be():
    with pytest.raises(GradingError, match="AUTOGRADER_BOX_MB='0' is not"):
        Settings.load({}, box_mb=0)
