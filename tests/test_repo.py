"""The repository's own rules: pins agree, notebooks carry no outputs, exercises/ is generated."""
from __future__ import annotations

import re
import shutil
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


def _script(name, *args, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_notebooks_have_no_outputs():
    proc = _script("clean_outputs.py", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_clean_outputs_check_fails_on_outputs_and_execution_counts(tmp_path):
    """On a copy: --check flags a notebook with an output, or with only an execution count;
    without --check the script strips both and keeps the nbgrader metadata."""
    source = ROOT / "solutions" / "01_phases" / "01_phases.ipynb"
    for folder in ("course", "solutions", "exercises"):
        (tmp_path / folder).mkdir()
    nb_path = tmp_path / "solutions" / "01_phases" / "01_phases.ipynb"
    nb_path.parent.mkdir()
    shutil.copy(source, nb_path)
    shutil.copy(ROOT / "course" / "01_phases.ipynb", tmp_path / "course")
    proc = _script("clean_outputs.py", "--check", "--root", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    def edit(change):
        nb = nbformat.read(str(nb_path), as_version=4)
        cell = next(c for c in nb.cells if c.cell_type == "code" and "nbgrader" in c.metadata)
        change(cell)
        nbformat.write(nb, str(nb_path))
        return nb

    output = nbformat.v4.new_output("stream", name="stdout", text="hello\n")
    for change in (lambda c: c.outputs.append(output), lambda c: c.__setitem__("execution_count", 7)):
        edit(lambda c: (c.__setitem__("outputs", []), c.__setitem__("execution_count", None)))
        edited = edit(change)
        proc = _script("clean_outputs.py", "--check", "--root", tmp_path)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "solutions/01_phases/01_phases.ipynb" in proc.stdout
        assert "course/01_phases.ipynb" not in proc.stdout
        assert nbformat.read(str(nb_path), as_version=4) == edited, "--check must not change the notebook"
    proc = _script("clean_outputs.py", "--root", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cleaned = nbformat.read(str(nb_path), as_version=4)
    assert all(not c.outputs and c.execution_count is None for c in cleaned.cells if c.cell_type == "code")
    assert [c.metadata.get("nbgrader") for c in cleaned.cells] == \
        [c.metadata.get("nbgrader") for c in nbformat.read(str(source), as_version=4).cells]
    assert _script("clean_outputs.py", "--check", "--root", tmp_path).returncode == 0
    assert _script("clean_outputs.py", "--check", "--root", tmp_path / "nowhere").returncode != 0


@pytest.mark.xdist_group("release")
def test_exercises_are_generated_from_solutions():
    proc = _script("release.py", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _released(root, assignment="01_phases"):
    return root / "exercises" / assignment / f"{assignment}.ipynb"


@pytest.fixture(scope="module")
def release():
    """scripts/release.py's main(), in this process (nbgrader starts once for all the calls)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("release_script", ROOT / "scripts" / "release.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return lambda *args: module.main([str(a) for a in args])


@pytest.fixture(scope="module")
def released_copy(release, tmp_path_factory):
    """A course copy holding one assignment's solutions/ and its release, made with the CLI."""
    root = tmp_path_factory.mktemp("release-copy")
    shutil.copytree(ROOT / "solutions" / "01_phases", root / "solutions" / "01_phases")
    proc = _script("release.py", "--root", root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root


def test_release_tags_cells_that_raise_and_is_reproducible(release, released_copy, tmp_path):
    """Release tags every answer and visible test cell raises-exception (so Run All goes on to
    "Check my answers") and nothing else; a second release is byte-for-byte the same."""
    shutil.copytree(released_copy, tmp_path, dirs_exist_ok=True)
    first = _released(tmp_path).read_bytes()
    nb = nbformat.read(str(_released(tmp_path)), as_version=4)
    expected = 0
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        tagged = "raises-exception" in cell.metadata.get("tags", [])
        expected += bool(meta.get("solution") or meta.get("grade"))
        assert tagged == bool(meta.get("solution") or meta.get("grade")), (meta.get("grade_id"), cell.source[:80])
    assert expected == 10, "01_phases has five answer cells and five test cells"
    assert "check-my-answers" in nb.cells[-1].metadata["tags"]
    assert release("--root", tmp_path) == 0
    assert _released(tmp_path).read_bytes() == first


def test_release_check_fails_when_exercises_differ(release, released_copy, tmp_path, capsys):
    """--check passes on a fresh release and fails, naming the file, on a hand-edited cell (through
    the command line), a removed tag, a file release does not make and a missing notebook."""
    shutil.copytree(released_copy, tmp_path, dirs_exist_ok=True)
    assert release("--check", "--root", tmp_path) == 0
    path, pristine = _released(tmp_path), _released(tmp_path).read_bytes()
    name = "exercises/01_phases/01_phases.ipynb"

    def hand_edit(change):
        path.write_bytes(pristine)
        nb = nbformat.read(str(path), as_version=4)
        change(next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")))
        nbformat.write(nb, str(path))

    hand_edit(lambda cell: setattr(cell, "source", "def primitive_names(f, *args):\n    return []"))
    proc = _script("release.py", "--check", "--root", tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{name}: differs" in proc.stdout, proc.stdout

    hand_edit(lambda cell: cell.metadata["tags"].remove("raises-exception"))
    capsys.readouterr()
    assert release("--check", "--root", tmp_path) == 1
    assert f"{name}: differs" in capsys.readouterr().out

    path.write_bytes(pristine)
    (path.parent / "notes.txt").write_text("mine")
    assert release("--check", "--root", tmp_path) == 1
    assert "exercises/01_phases/notes.txt" in capsys.readouterr().out
    (path.parent / "notes.txt").unlink()

    path.unlink()
    assert release("--check", "--root", tmp_path) == 1
    assert f"{name}: missing" in capsys.readouterr().out
    path.write_bytes(pristine)
    assert release("--check", "--root", tmp_path) == 0
    assert release("--check", "--root", tmp_path / "nowhere") != 0


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
