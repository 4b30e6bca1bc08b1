"""The three ways to install agree: requirements.txt (pins), environment.yml (conda, the same
pins), and pyproject.toml (the `autograder` package, loose ranges that must also admit Colab's
JAX 0.7.2 on Python 3.13)."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from conftest import ROOT

COLAB = {"python": "3.13", "jax": "0.7.2", "jaxlib": "0.7.2", "numpy": "2.0.2"}


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            pins[req.name.lower()] = spec.version
    return pins


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _package_requirements() -> list[Requirement]:
    project = _pyproject()["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project.get("optional-dependencies", {}).values():
        reqs += [Requirement(r) for r in extra]
    return reqs


def test_conda_level_pins_agree_with_requirements():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pins = _pins()
    for dep in conda:
        name, version = (part.strip() for part in re.fullmatch(r"([A-Za-z0-9_.-]+)\s*=*\s*(.*)", dep).groups())
        name = name.lower()
        if name == "python":
            assert SpecifierSet(_pyproject()["project"]["requires-python"]).contains(version), (
                f"environment.yml's python={version} is outside pyproject's requires-python")
        elif name != "pip":
            assert name in pins, f"environment.yml installs {name} with conda, but requirements.txt does not pin it"
            assert version == pins[name], f"{name}: conda {version} vs requirements {pins[name]}"


@pytest.mark.parametrize("req", _package_requirements(), ids=str)
def test_package_ranges_admit_the_pinned_versions(req):
    pinned = _pins().get(req.name.lower())
    assert pinned is not None, f"pyproject needs {req.name}, but requirements.txt does not pin it"
    assert req.specifier.contains(pinned, prereleases=True), f"pyproject's {req} excludes the pin {pinned}"


def test_package_installs_on_colab():
    project = _pyproject()["project"]
    assert SpecifierSet(project["requires-python"]).contains(COLAB["python"])
    for req in (Requirement(r) for r in project["dependencies"]):
        if req.name.lower() in COLAB:
            assert req.specifier.contains(COLAB[req.name.lower()]), (
                f"pyproject's {req} excludes Colab's {req.name} {COLAB[req.name.lower()]}")
    assert Version(_pins()["jax"]) >= Version(COLAB["jax"]), "the pinned JAX is older than Colab's"


def test_xdist_groups_keep_their_tests_on_one_worker(tmp_path):
    """`make test` relies on `--dist loadgroup`: a module's shared fixture (a JupyterLab server,
    the Colab venv, one grading of an assignment) must run once, on one worker. With pytest 9
    and pytest-xdist 3.8 the groups were silently ignored, and two workers built the same venv."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "tests" / "test_grouped.py").write_text(
        "import os, time, pytest\n"
        "pytestmark = pytest.mark.xdist_group('shared')\n"
        "@pytest.mark.parametrize('i', range(4))\n"
        "def test_one(i):\n"
        "    time.sleep(0.3)\n"
        "    open('workers.txt', 'a').write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n")
    (tmp_path / "tests" / "test_other.py").write_text(
        "import time, pytest\n"
        "@pytest.mark.parametrize('i', range(4))\n"
        "def test_other(i):\n"
        "    time.sleep(0.3)\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q",
                           "-p", "no:cacheprovider", "tests"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 4 and len(set(workers)) == 1, f"one xdist group ran on workers {workers}"
