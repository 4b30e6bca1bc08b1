"""Generate exercises/ from solutions/ with nbgrader (``make release``), or check it is in sync.

    python scripts/release.py            # regenerate exercises/
    python scripts/release.py --check    # exit 1 if the committed exercises/ differs
    python scripts/release.py --check 03_purity   # only that assignment's exercises/03_purity

Publishing checks it too: nbgrader's release_assignment (the formgrader's Release button) runs
through nbgrader_config.py's CheckedReleaseAssignment (autograder/instructor/formgrader.py), which refuses
an exercises/<assignment>/ that is not what this script generates, naming the files.

nbgrader's ``generate_assignment`` clears solutions and hidden tests; then every answer
cell whose source cell carries ``metadata.course.starting_code`` gets that broken or
impure starting code instead of nbgrader's ``raise NotImplementedError()`` stub, and every
answer cell and visible test cell gets the ``raises-exception`` cell tag: an unanswered exercise
raises, yet JupyterLab's Run All (and nbclient) carries on past it, with the error shown in its
cell, to the "Check my answers" table at the end. Grading ignores the tag. Of a cell's
``metadata.course`` only an answer cell's ``hints`` stay (autograder.hints), shipped with the
package too (``autograder/visible_tests/<assignment>.hints.json``).

Release also writes what the rest of the course reads of an exercise's two files (its cells in
``solutions/NN_slug/NN_slug.ipynb``, its judge file): the manifest's ``[[exercise]]`` entries from
the answer cells' ``metadata.course`` (idea, kind, single_token, kernel) and each chapter's
exercise list in docs/instructor-guide.md from the judge files' known wrong answers (``WRONG``,
read as data), and ``--check`` compares them too.

    python scripts/release.py --root DIR [--check]   # work on the course copy in DIR instead
"""
from __future__ import annotations

import argparse
import ast
import json
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

from autograder.common.course import CHECK_TAG  # the grader drops these cells: they only re-run visible tests

ROOT = Path(__file__).resolve().parent.parent
RAISES_TAG = "raises-exception"  # Run All continues past the error of a cell with this tag


def _expects_error(cell) -> bool:
    """An answer cell (solution) or a visible test cell (graded, not a solution) of a release."""
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and bool(meta.get("solution") or meta.get("grade"))


def _tag(cell, tag: str) -> None:
    tags = list(cell.metadata.get("tags", []))
    if tag not in tags:
        cell.metadata["tags"] = tags + [tag]


# nbgrader's default ignore list, plus the trusted judge files (solutions/<a>/judge.py, judge_<exercise>.py)
JUDGE_IGNORE = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "judge.py", "judge_*.py"]


KNOWN = ("WRONG", "RIGHT")  # a judge file's known answers: data at its top level


def judge_data(path: Path) -> dict:
    """The known answers of one judge file, ``{"WRONG": {exercise: [(answer source, feedback
    phrase, idea), ...]}, "RIGHT": {exercise: [answer source, ...]}}``, read as data (the literal
    ``WRONG = {...}`` and ``RIGHT = {...}`` at its top level): a judge file is never run to read them."""
    found = {name: {} for name in KNOWN}
    for node in ast.parse(Path(path).read_text(), str(path)).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(target, ast.Name) and target.id in KNOWN:
            try:
                found[target.id] = ast.literal_eval(node.value)
            except ValueError as exc:
                raise ValueError(f"{path}: {target.id} must be a literal (data, never code): {exc}") from None
    return found


def known_answers(folder: Path) -> dict:
    """The known answers of an assignment (``solutions/NN_slug``), merged over its judge files as
    :func:`judge_data` gives them; an exercise's answers in two judge files is an error."""
    from autograder.judge import judge_paths

    merged = {name: {} for name in KNOWN}
    for path in judge_paths(folder):
        for name, answers in judge_data(path).items():
            twice = set(answers) & set(merged[name])
            if twice:
                raise ValueError(f"{path}: {name} of {sorted(twice)} also in another judge file of {Path(folder).name}")
            merged[name].update(answers)
    return merged


# What an answer cell's ``metadata.course`` may hold: the manifest facts of its exercise (its
# [[exercise]] entry, less the name and chapter, which are its grade_id and its notebook), its
# hints, its starting code.
FACTS = ("idea", "kind", "single_token", "kernel")
COURSE_KEYS = (*FACTS, "hints", "starting_code")
MANIFEST = Path("autograder") / "manifest.toml"  # under the course root; its exercise entries are written here
GUIDE = Path("docs") / "instructor-guide.md"  # its per-chapter exercise lists are written here
MANIFEST_MARK = "# ----------------------------------------------------------------------------- exercises"
MANIFEST_HEAD = """\
# Written by `make release` from the answer cells' metadata.course in solutions/NN_slug/NN_slug.ipynb
# (never by hand: tests/test_manifest.py compares it with what release writes). kind: "transfer"
# (the chapter's idea on a problem the chapter does not show), "warm-up" (fix one marked habit; at
# most one single-token warm-up per chapter, marked single_token). idea: a key of the chapter's
# sections (or an earlier chapter's): where the feedback points. kernel: its benchmark kernel.
"""


def _guide_marks(chapter: str) -> tuple[str, str]:
    return (f"<!-- {chapter}'s exercises: `make release` writes this list from the judge files' WRONG data -->",
            f"<!-- end of {chapter}'s exercises -->")


def _answer_cells(notebook: Path):
    nb = nbformat.read(str(notebook), as_version=4)
    return [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")]


def exercise_entries(root: Path) -> list[dict]:
    """Every exercise of ``root/solutions`` in course order, as its manifest entry: ``name`` (the
    answer cell's grade_id), ``chapter`` (its notebook) and the facts of its ``metadata.course``."""
    entries = []
    for a in assignments(root):
        notebook = root / "solutions" / a / f"{a}.ipynb"
        for cell in _answer_cells(notebook):
            gid, course = cell.metadata["nbgrader"]["grade_id"], cell.metadata.get("course", {})
            unknown = sorted(set(course) - set(COURSE_KEYS))
            if unknown:
                raise ValueError(f"{notebook.relative_to(root)}: {gid}'s metadata.course holds {unknown}, "
                                 f"none of {list(COURSE_KEYS)}")
            entries.append({"name": gid, "chapter": a, **{k: course[k] for k in FACTS if k in course}})
    return entries


def _toml_value(value) -> str:
    return "true" if value is True else "false" if value is False else json.dumps(value)


def manifest_text(root: Path) -> str:
    """``autograder/manifest.toml`` as release writes it: the hand-written chapters up to
    :data:`MANIFEST_MARK`, then an ``[[exercise]]`` entry per answer cell (:func:`exercise_entries`),
    checked as the package reads it (``autograder.manifest.parse``)."""
    from autograder.manifest import ManifestError, parse

    current = (root / MANIFEST).read_text(encoding="utf-8")
    head, mark, _ = current.partition(MANIFEST_MARK + "\n")
    if not mark:
        raise ValueError(f"{MANIFEST}: no line {MANIFEST_MARK!r} before the exercises release writes")
    tables = ["[[exercise]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in e.items()
                                         if v is not False and v != "")
              for e in exercise_entries(root)]
    text = head + mark + MANIFEST_HEAD + "\n" + "\n".join(tables)
    try:
        parse(text)
    except ManifestError as exc:
        raise ValueError(f"{exc} (an exercise's facts are its answer cell's metadata.course in "
                         "solutions/NN_slug/NN_slug.ipynb)") from None
    return text


def _guide_list(root: Path, manifest, chapter: str) -> list[str]:
    """The guide's list of ``chapter``'s exercises (``manifest``: an ``autograder.manifest.Manifest``):
    each name, its kind, the section its idea is taught in, and the mistakes its feedback names
    (the phrases of its judge's WRONG answers)."""
    taught = manifest.taught_in()
    wrong = known_answers(root / "solutions" / chapter)["WRONG"]
    lines = ["The exercises, and the mistakes their feedback names (from their known wrong answers):", ""]
    for e in manifest.exercises_of(chapter):
        home, section = taught[e.idea]
        needs = f'§"{section}"' if home == chapter else f'{home} §"{section}"'
        phrases = list(dict.fromkeys(phrase for _, phrase, _ in wrong.get(e.name, [])))
        kind = e.kind + (", one token" if e.single_token else "")
        lines.append(f"- `{e.name}` ({kind}; {needs}): " + "; ".join(f"\u201c{p}\u201d" for p in phrases) + ".")
    return lines


def guide_text(root: Path, manifest) -> str:
    """``docs/instructor-guide.md`` with each chapter's exercise list (:func:`_guide_list`, between
    its two marker lines, :func:`_guide_marks`) as release writes it."""
    lines = (root / GUIDE).read_text(encoding="utf-8").splitlines()
    for chapter in assignments(root):
        begin, end = _guide_marks(chapter)
        if begin not in lines or end not in lines[lines.index(begin):]:
            raise ValueError(f"{GUIDE}: no lines {begin!r} and {end!r} in {chapter}'s \"Misconceptions to expect\" "
                             "subsection, between which release writes its exercise list")
        i = lines.index(begin)
        lines[i + 1:lines.index(end, i)] = _guide_list(root, manifest, chapter)
    return "\n".join(lines) + "\n"


def course_texts(root: Path) -> dict:
    """``{path under root: text}``: what release writes from the exercises' two files besides
    exercises/ and the visible tests: the manifest's exercise entries and the guide's lists (of a
    course copy that has them: a copy of solutions/ alone has neither)."""
    from autograder.manifest import parse

    texts = {}
    if (root / MANIFEST).is_file():
        texts[MANIFEST] = manifest_text(root)
        if (root / GUIDE).is_file():
            texts[GUIDE] = guide_text(root, parse(texts[MANIFEST]))
    return texts


def course_text_differences(root: Path) -> list[str]:
    """The files of :func:`course_texts` that differ from what release writes, as messages."""
    return [f"{path.as_posix()}: differs from what release writes" for path, text in course_texts(root).items()
            if (root / path).read_text(encoding="utf-8") != text]


def assignments(root: Path = ROOT) -> list[str]:
    from autograder.common.course import assignments as course_assignments

    return course_assignments(root)


VISIBLE_DIR = Path("autograder") / "visible_tests"  # under the course root; shipped with the package


def _selfcheck_source(assignment: str) -> str:
    """The last cell of a released notebook: a few lines that run the visible tests (shipped
    with the package as ``autograder/visible_tests/<assignment>.json``) as a table."""
    return ("# Runs the visible test of every exercise above (the same code as its test cell) and\n"
            "# shows a table. The grader also runs hidden tests: a pass here is a good sign.\n"
            "import autograder as ag\n\n"
            f"ag.check_my_answers({assignment!r})")


def _postprocess(source_dir: Path, release_dir: Path) -> tuple[dict, dict]:
    """Starting code into the answer cells, tags, the self-check cell; returns the visible tests
    and the hints (``{exercise: [hints]}``)."""
    visible_tests, hints = {}, {}
    for src_path in sorted(source_dir.glob("*.ipynb")):
        out_path = release_dir / src_path.name
        src = nbformat.read(str(src_path), as_version=4)
        rel = nbformat.read(str(out_path), as_version=4)
        starting = {c.metadata["nbgrader"]["grade_id"]: c.metadata["course"]["starting_code"]
                    for c in src.cells
                    if "nbgrader" in c.metadata and "starting_code" in c.metadata.get("course", {})}
        visible = {}
        for cell in rel.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid in starting:
                cell.source = starting[gid]
            if cell.metadata.get("nbgrader", {}).get("grade") and gid.startswith("test_"):
                visible[gid.removeprefix("test_")] = cell.source
            kept = cell.metadata.pop("course", {}).get("hints")
            if kept and cell.metadata.get("nbgrader", {}).get("solution"):
                cell.metadata["course"] = {"hints": kept}  # beside the exercise, as in its source
                hints[gid] = kept
            if _expects_error(cell):
                _tag(cell, RAISES_TAG)
            if cell.cell_type == "code":
                cell.outputs = []
                cell.execution_count = None
        if visible:
            rel.cells.append(nbformat.v4.new_markdown_cell(
                "## Check my answers\n\nRuns the visible tests of every exercise above and shows "
                "which pass. The grader also runs hidden tests, so a pass here is a good sign, "
                "not a guarantee.", metadata={"tags": [CHECK_TAG]}))
            rel.cells.append(nbformat.v4.new_code_cell(_selfcheck_source(source_dir.name),
                                                       metadata={"tags": [CHECK_TAG]}))
            visible_tests.update(visible)
        if visible:  # deterministic ids, so a second release is byte-for-byte the same
            rel.cells[-2]["id"], rel.cells[-1]["id"] = "check-my-answers-intro", "check-my-answers"
        nbformat.write(rel, str(out_path))
    return visible_tests, hints


def _write_visible(folder: Path, assignment: str, tests: dict, hints: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{assignment}.json").write_text(json.dumps(tests, indent=1, sort_keys=True) + "\n")
    if hints:
        (folder / f"{assignment}.hints.json").write_text(json.dumps(hints, indent=1, sort_keys=True) + "\n")


def _generate_with_nbgrader(course: Path, names) -> None:
    """nbgrader's generate_assignment, in-process (one nbgrader start for all assignments)."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    from autograder.grader.gradebook import ensure_tools_on_path, alembic_version_once

    config = Config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.source_directory = "solutions"
    config.CourseDirectory.release_directory = "exercises"
    config.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    config.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    config.CourseDirectory.ignore = JUDGE_IGNORE  # the judge never reaches a learner
    ensure_tools_on_path()  # nbgrader's gradebook runs `alembic` ...
    alembic_version_once()  # ... for every new gradebook, unless asked once
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    for a in names:
        result = api.generate_assignment(a, force=True, create=True)
        if not result["success"]:
            raise SystemExit(f"nbgrader generate_assignment {a} failed:\n{result.get('error')}\n{result.get('log')}")


def generate(root: Path, dest: Path, only=None, visible_dest: Path | None = None) -> None:
    """Generate the assignments of ``root/solutions`` (all, or ``only``) into ``dest`` (an exercises/
    folder), and their visible tests into ``visible_dest`` (default ``root/autograder/visible_tests``)."""
    names = list(only) if only else assignments(root)
    visible_dest = visible_dest or root / VISIBLE_DIR
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        tmp = Path(tmp)
        shutil.copytree(root / "solutions", tmp / "solutions")
        _generate_with_nbgrader(tmp, names)
        if not only and visible_dest.exists():
            shutil.rmtree(visible_dest)
        for a in names:
            _write_visible(visible_dest, a, *_postprocess(tmp / "solutions" / a, tmp / "exercises" / a))
        if only:
            for a in names:
                if (dest / a).exists():
                    shutil.rmtree(dest / a)
                shutil.copytree(tmp / "exercises" / a, dest / a)
            return
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(tmp / "exercises", dest)


def differences(a: Path, b: Path, prefix: str = "exercises") -> list[str]:
    """What differs between the folders ``a`` (committed) and ``b`` (generated), as paths under ``prefix``."""
    cmp = filecmp.dircmp(a, b)
    out = [f"{prefix}/{n}: not generated by release (only in the committed folder)" for n in sorted(cmp.left_only)]
    out += [f"{prefix}/{n}: missing (release generates it)" for n in sorted(cmp.right_only)]
    changed = [n for n in cmp.common_files if not filecmp.cmp(a / n, b / n, shallow=False)]
    out += [f"{prefix}/{n}: differs from what release generates" for n in sorted(changed + cmp.common_funny + cmp.funny_files)]
    for sub in sorted(cmp.common_dirs):
        out += differences(a / sub, b / sub, f"{prefix}/{sub}")
    return out


def check(root: Path, only=None) -> list[str]:
    """What differs between ``root``'s exercises/ (all of it, or the assignments ``only``), the
    visible tests shipped in the package, the manifest's exercise entries and the guide's exercise
    lists (:func:`course_texts`), and what `make release` generates from its solutions/ now; ``[]``
    when nothing does."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh, visible = Path(tmp) / "exercises", Path(tmp) / "visible_tests"
        fresh.mkdir()
        generate(root, fresh, only=only, visible_dest=visible)
        diffs = []
        for a in (list(only) if only else [None]):
            mine, theirs = (root / "exercises" / a, fresh / a) if a else (root / "exercises", fresh)
            prefix = f"exercises/{a}" if a else "exercises"
            diffs += differences(mine, theirs, prefix) if mine.is_dir() else [f"{prefix}/ missing"]
            shipped = root / VISIBLE_DIR
            for name in ([f"{a}.json", f"{a}.hints.json"] if a else []):
                if not (visible / name).is_file():
                    if (shipped / name).is_file():
                        diffs.append(f"{VISIBLE_DIR.as_posix()}/{name}: not generated by release")
                elif not (shipped / name).is_file():
                    diffs.append(f"{VISIBLE_DIR.as_posix()}/{name}: missing (release generates it)")
                elif not filecmp.cmp(shipped / name, visible / name, shallow=False):
                    diffs.append(f"{VISIBLE_DIR.as_posix()}/{name}: differs from what release generates")
            if not a:
                diffs += (differences(shipped, visible, VISIBLE_DIR.as_posix()) if shipped.exists()
                          else [f"{VISIBLE_DIR.as_posix()} missing"])
    return diffs + course_text_differences(root)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that exercises/ is in sync")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the course folder holding solutions/ and exercises/ (default: this checkout)")
    parser.add_argument("assignments", nargs="*", help="only these assignments (default: all)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / "solutions").is_dir():
        print(f"no solutions/ folder in {root}", file=sys.stderr)
        return 2
    if args.check:
        diffs = check(root, args.assignments or None)
        if diffs:
            print("exercises/ (or the visible tests shipped in the package, the manifest's exercises, the guide's "
                  "exercise lists) is not what `make release` generates from solutions/ (run `make release`, "
                  "never edit them by hand):\n  " + "\n  ".join(diffs))
            return 1
        checked = ", ".join(f"exercises/{a}" for a in args.assignments) or "exercises/"
        print(f"{checked} is in sync with solutions/")
        return 0
    texts = course_texts(root)  # first: an exercise's facts that the manifest refuses stop the release
    generate(root, root / "exercises", only=args.assignments)
    for path, text in texts.items():
        if (root / path).read_text(encoding="utf-8") != text:
            (root / path).write_text(text, encoding="utf-8")
            print(f"wrote {path.as_posix()}")
    print(f"released {', '.join(args.assignments or assignments(root))} into {root / 'exercises'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
