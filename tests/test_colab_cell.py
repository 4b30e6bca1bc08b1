"""The Colab install cell (first code cell of every notebook, written by scripts/colab.py from
``[tool.course] github``/``branch`` in pyproject.toml) is executed here, as it stands on disk:

- with ``google.colab`` imported (a stub module) it runs exactly one pip command, which installs
  the package from the configured repository and branch with the kernel's own Python;
- anywhere else it does nothing.

``subprocess.run`` is replaced by a recorder, so nothing is installed.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
import types

import nbformat
import pytest

from conftest import ROOT

TAG = "colab-setup"
NOTEBOOKS = [ROOT / "course" / "01_phases.ipynb", ROOT / "course" / "09_sharding.ipynb",
             ROOT / "exercises" / "03_purity" / "03_purity.ipynb",
             ROOT / "solutions" / "10_review" / "10_review.ipynb"]


def _settings():
    course = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]
    return course["github"], course.get("branch", "main")


def _install_cell(path):
    nb = nbformat.read(str(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and TAG in code[0].metadata.get("tags", []), f"{path.name}: first code cell is not the install cell"
    return code[0].source


@pytest.fixture
def recorded_runs(monkeypatch):
    calls = []

    def fake_run(*args, **kwargs):
        calls.append((args, kwargs))
        return subprocess.CompletedProcess(args[0] if args else kwargs.get("args"), 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    return calls


def _run_cell(source):
    exec(compile(source, "<colab install cell>", "exec"), {"__name__": "__main__"})  # noqa: S102 - the cell under test, ours


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_install_cell_installs_the_configured_repo_on_colab(path, recorded_runs, monkeypatch):
    repo, branch = _settings()
    colab = types.ModuleType("google.colab")
    google = sys.modules.get("google") or types.ModuleType("google")
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    _run_cell(_install_cell(path))
    assert len(recorded_runs) == 1, recorded_runs
    args, kwargs = recorded_runs[0]
    assert list(args[0]) == [sys.executable, "-m", "pip", "install", "-q", f"git+https://github.com/{repo}@{branch}"]
    assert kwargs == {"check": True}, "a failed install must stop the notebook, not pass silently"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_install_cell_does_nothing_outside_colab(path, recorded_runs, monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    _run_cell(_install_cell(path))
    assert recorded_runs == []


def test_install_cell_follows_the_setting(recorded_runs, monkeypatch):
    """The generator writes whatever repository/branch pyproject names (not a hard-coded one)."""
    spec = importlib.util.spec_from_file_location("_colab_generator", ROOT / "scripts" / "colab.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    monkeypatch.setattr(generator, "settings", lambda: ("someone/fork", "dev"))
    badge, cell = generator.cells_for(ROOT / "solutions" / "03_purity" / "03_purity.ipynb")
    assert "github/someone/fork/blob/dev/exercises/03_purity/03_purity.ipynb" in badge.source
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    _run_cell(cell.source)
    assert recorded_runs[0][0][0][-1] == "git+https://github.com/someone/fork@dev"
    # and the cell on disk is what the generator writes for the real setting
    monkeypatch.undo()
    assert generator.cells_for(NOTEBOOKS[0])[1].source == _install_cell(NOTEBOOKS[0])
