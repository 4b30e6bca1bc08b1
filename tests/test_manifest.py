"""The course's manifest (autograder/manifest.toml) and the tree agree, both ways: every chapter
has its notebook, solutions and release; every exercise its answer cell, test cell, judge test,
wrong answers and visible tests; every section pointer, bench kernel and README row comes from
the manifest or matches it."""
from __future__ import annotations

import ast
import json
import re
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest

from autograder import manifest as manifest_module
from autograder.feedback import TAUGHT_IN
from autograder.manifest import ManifestError, load, parse
from conftest import known_answers, release_script

ROOT = Path(__file__).resolve().parent.parent
M = load()
CHAPTERS = [c.name for c in M.chapters]


def _cells(chapter):
    return nbformat.read(str(ROOT / "solutions" / chapter / f"{chapter}.ipynb"), as_version=4).cells


def _answer_ids(chapter):
    return [c.metadata["nbgrader"]["grade_id"] for c in _cells(chapter)
            if c.metadata.get("nbgrader", {}).get("solution")]


def _test_ids(chapter):
    return [c.metadata["nbgrader"]["grade_id"] for c in _cells(chapter)
            if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")]


def _judge_tests(chapter):
    """``{test_<name>: [judge files defining it]}`` from the judge files' source (not imported)."""
    found: dict = {}
    folder = ROOT / "solutions" / chapter
    for path in sorted(folder.glob("judge*.py")):
        if path.name != "judge.py" and not path.name.startswith("judge_"):
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found.setdefault(node.name, []).append(path.name)
    return found


def test_chapters_are_the_trees_chapters():
    for where, names in (("course/", sorted(p.stem for p in (ROOT / "course").glob("[0-9][0-9]_*.ipynb"))),
                         ("solutions/", sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())),
                         ("exercises/", sorted(p.name for p in (ROOT / "exercises").iterdir() if p.is_dir()))):
        assert names == sorted(CHAPTERS), f"{where} has {names}, the manifest lists {sorted(CHAPTERS)}"
    assert CHAPTERS == sorted(CHAPTERS), "the manifest lists the chapters in order"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_exercises_are_the_notebooks_answer_cells(chapter):
    listed = [e.name for e in M.exercises_of(chapter)]
    assert listed == _answer_ids(chapter), (f"{chapter}: the manifest lists {listed}, the notebook's answer cells "
                                            f"are {_answer_ids(chapter)} (same names, same order)")
    assert _test_ids(chapter) == [f"test_{n}" for n in listed]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_exercise_has_one_judge_test_and_wrong_answers(chapter):
    listed = {e.name for e in M.exercises_of(chapter)}
    judged = _judge_tests(chapter)
    assert set(judged) == {f"test_{n}" for n in listed}, f"{chapter}: judge tests {sorted(judged)}"
    twice = {t: files for t, files in judged.items() if len(files) > 1}
    assert not twice, f"{chapter}: tests defined in two judge files: {twice}"
    for path in sorted((ROOT / "solutions" / chapter).glob("judge*.py")):
        judged_here = {t.removeprefix("test_") for t, files in judged.items() if path.name in files}
        for name, answers in release_script()["judge_data"](path).items():
            assert set(answers) <= judged_here, (f"{chapter}/{path.name}: {name} holds answers for "
                                                 f"{sorted(set(answers) - judged_here)}, whose tests are not in this file")
    wrong = known_answers(chapter)["WRONG"]
    few = [n for n in listed if len(wrong.get(n, [])) < 2]
    assert not few, f"{chapter}: fewer than two wrong answers for {few}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_visible_tests_shipped_for_every_exercise(chapter):
    shipped = json.loads((ROOT / "autograder" / "visible_tests" / f"{chapter}.json").read_text())
    assert sorted(shipped) == sorted(e.name for e in M.exercises_of(chapter))


def test_each_chapter_has_a_transfer_and_at_most_one_single_token_warm_up():
    for c in M.chapters:
        ex = M.exercises_of(c.name)
        assert any(e.kind == "transfer" for e in ex), f"{c.name} has no transfer exercise"
        single = [e.name for e in ex if e.single_token]
        assert len(single) <= 1, f"{c.name} has several single-token warm-ups: {single}"
        assert all(e.kind == "warm-up" for e in ex if e.single_token), c.name


def test_an_exercises_idea_is_taught_in_its_chapter_or_before():
    for e in M.exercises:
        chapter, _ = TAUGHT_IN[e.idea]
        assert chapter is not None and chapter <= e.chapter, f"{e.name} ({e.chapter}) needs {e.idea}, taught in {chapter}"


def test_feedback_pointers_are_the_manifests():
    assert TAUGHT_IN == M.taught_in()
    for c in M.chapters:
        assert all(TAUGHT_IN[idea][0] == c.name for idea in c.errors.values()), c.name


def test_bench_kernels_are_the_manifests():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import bench
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert [(k.chapter, k.name, k.unit, k.make.__name__, k.why_slow) for k in bench.KERNELS] == \
        [(k.chapter, k.label, k.unit, k.function, k.why_slow) for k in M.kernels()]
    for c in M.chapters:
        assert c.kernels, f"{c.name} has no benchmark kernel"
    for e in M.exercises:
        if e.kernel:
            assert e.kernel in {k.function for k in M.chapter(e.chapter).kernels}, e.name


def _readme_chapters():
    rows = []
    for line in (ROOT / "README.md").read_text().splitlines():
        m = re.match(r"^\| (\d\d) \| \[`course/([^`]+)\.ipynb`\]\(course/([^)]+)\.ipynb\) \| (.+?) \|$", line)
        if m:
            assert m.group(2) == m.group(3), line
            rows.append((m.group(1), m.group(2), m.group(4)))
    return rows


def test_readmes_chapter_table_is_the_manifests():
    want = [(c.name[:2], c.name, c.idea) for c in M.chapters]
    got = _readme_chapters()
    assert got == want, ("README.md's chapter table must be, row by row:\n" + "\n".join(
        f"| {n} | [`course/{name}.ipynb`](course/{name}.ipynb) | {idea} |" for n, name, idea in want))


def test_the_package_ships_the_manifest():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "manifest.toml" in config["tool"]["setuptools"]["package-data"]["autograder"]
    assert Path(manifest_module.__file__).with_name("manifest.toml").is_file()


@pytest.mark.parametrize("text, message", [
    ('[[chapter]]\nname = "01_a"\nidea = "x"\n[chapter.sections]\na = "A"\n[[exercise]]\nname = "f"\n'
     'chapter = "02_b"\nidea = "a"\nkind = "transfer"\n', "unknown chapter '02_b'"),
    ('[[chapter]]\nname = "01_a"\nidea = "x"\n[chapter.sections]\na = "A"\n[[exercise]]\nname = "f"\n'
     'chapter = "01_a"\nidea = "b"\nkind = "transfer"\n', "unknown idea 'b'"),
    ('[[chapter]]\nname = "01_a"\nidea = "x"\nerrors = { concretization = "b" }\n[chapter.sections]\na = "A"\n',
     "not one of its sections"),
    ('[[chapter]]\nname = "01_a"\nidea = "x"\n[chapter.sections]\na = "A"\n[[exercise]]\nname = "f"\n'
     'chapter = "01_a"\nidea = "a"\nkind = "copy"\n', "of kind 'copy'"),
])
def test_a_malformed_manifest_is_named(text, message):
    with pytest.raises(ManifestError, match=re.escape(message)):
        parse(text)
