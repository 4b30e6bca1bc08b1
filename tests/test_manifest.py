"""The course's manifest (autograder/manifest.toml) and the tree agree, both ways: every chapter
has its notebook, solutions and release; every exercise its answer cell, test cell, judge test,
wrong answers and visible tests; every section pointer, bench kernel and README row comes from
the manifest or matches it."""
from __future__ import annotations

import ast
import json
import re
import shutil
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


def test_the_manifests_exercises_and_the_guides_lists_are_what_release_writes():
    """The manifest's [[exercise]] entries (from the answer cells' metadata.course) and the
    instructor guide's exercise lists (from the judge files' WRONG data) are what `make release`
    writes now: a notebook or judge file changed without `make release` fails here."""
    diffs = release_script()["course_text_differences"](ROOT)
    assert not diffs, "run `make release`: " + "; ".join(diffs)


CHAPTER = "02_static_dynamic"


@pytest.fixture
def course_copy(tmp_path):
    """A course copy: one chapter's solutions, the manifest and the guide, as release writes them
    for it (the manifest then lists that chapter's exercises only)."""
    release = release_script()
    root = tmp_path / "course"
    shutil.copytree(ROOT / "solutions" / CHAPTER, root / "solutions" / CHAPTER)
    for path in (release["MANIFEST"], release["GUIDE"]):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, root / path)
    for path, text in release["course_texts"](root).items():
        (root / path).write_text(text)
    assert release["course_text_differences"](root) == []
    return root


def _edit_answer_cell(root, name, change):
    path = root / "solutions" / CHAPTER / f"{CHAPTER}.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    change(next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == name).metadata["course"])
    nbformat.write(nb, str(path))


def test_an_exercises_facts_come_from_its_answer_cell(course_copy):
    release = release_script()
    _edit_answer_cell(course_copy, "scale_by", lambda course: course.update(idea="static", kernel="_k_power"))
    assert "autograder/manifest.toml: differs from what release writes" in release["course_text_differences"](course_copy)
    entry = next(e for e in parse(release["manifest_text"](course_copy)).exercises if e.name == "scale_by")
    assert (entry.chapter, entry.idea, entry.kind, entry.kernel) == (CHAPTER, "static", "transfer", "_k_power")


@pytest.mark.parametrize("change, message", [
    (lambda course: course.pop("kind"), "scale_by needs 'kind'"),
    (lambda course: course.update(idea="no_such_idea"), "scale_by needs the unknown idea 'no_such_idea'"),
    (lambda course: course.update({"single-token": True}), "scale_by's metadata.course holds ['single-token']"),
])
def test_an_answer_cells_wrong_facts_are_named(course_copy, change, message):
    _edit_answer_cell(course_copy, "scale_by", change)
    with pytest.raises(ValueError, match=re.escape(message)):
        release_script()["course_texts"](course_copy)


def test_the_guides_list_comes_from_the_judges_wrong_answers(course_copy):
    release = release_script()
    judge = course_copy / "solutions" / CHAPTER / "judge_apply_layer.py"
    judge.write_text(judge.read_text().replace('"It computes the exact gelu"', '"a mistake named for the test"'))
    assert release["course_text_differences"](course_copy) == ["docs/instructor-guide.md: differs from what release writes"]
    listed = next(line for line in release["course_texts"](course_copy)[release["GUIDE"]].splitlines()
                  if line.startswith("- `apply_layer`"))
    assert "\u201ca mistake named for the test\u201d" in listed and "exact gelu" not in listed


def test_a_guide_without_a_chapters_markers_is_named(course_copy):
    release = release_script()
    guide = course_copy / release["GUIDE"]
    begin, _ = release["_guide_marks"](CHAPTER)
    guide.write_text(guide.read_text().replace(begin + "\n", ""))
    with pytest.raises(ValueError, match=f"in {CHAPTER}'s \"Misconceptions to expect\" subsection"):
        release_script()["course_texts"](course_copy)


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
