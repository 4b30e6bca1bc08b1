"""The repository's own rules: pins agree, notebooks carry no outputs, exercises/ is generated."""
from __future__ import annotations

import re
import subprocess
import sys

import nbformat
import pytest
import yaml

from conftest import ROOT


def _pins_from_requirements():
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.lower()] = version
    return pins


def _pins_from_environment():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return {n.lower(): v for n, _, v in (p.partition("==") for p in pip_section)}


def test_requirements_are_pinned():
    for name, version in _pins_from_requirements().items():
        assert re.fullmatch(r"[0-9][0-9A-Za-z.]*", version), f"{name} is not pinned to one version"


def test_environment_yml_matches_requirements():
    assert _pins_from_environment() == _pins_from_requirements()


def test_notebooks_have_no_outputs():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "clean_outputs.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.xdist_group("release")
def test_exercises_are_generated_from_solutions():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "release.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_notebook_is_valid_and_named_by_its_folder():
    for folder in ("solutions", "exercises"):
        for path in (ROOT / folder).rglob("*.ipynb"):
            nbformat.validate(nbformat.read(str(path), as_version=4))
            assert path.stem == path.parent.name, f"{path} should be {path.parent.name}.ipynb"
    for path in (ROOT / "course").glob("*.ipynb"):
        assert re.fullmatch(r"\d\d_[a-z_]+", path.stem), f"{path.name} is not NN_slug.ipynb"


def test_colab_badges_and_install_cells_are_generated():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "colab.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for path in (ROOT / "exercises").glob("*/*.ipynb"):
        first = nbformat.read(str(path), as_version=4).cells[0]
        assert "colab.research.google.com/github/" in first.source and f"exercises/{path.parent.name}/" in first.source


def test_chapters_have_slideshow_metadata_and_rise_is_installed():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "slides.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    exts = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"],
                          capture_output=True, text=True)
    assert "jupyterlab-rise" in exts.stdout + exts.stderr
