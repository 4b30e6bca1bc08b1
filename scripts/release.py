"""Generate exercises/ from solutions/ with nbgrader (``make release``), or check it is in sync.

    python scripts/release.py            # regenerate exercises/
    python scripts/release.py --check    # exit 1 if the committed exercises/ differs

nbgrader's ``generate_assignment`` clears solutions and hidden tests; then every answer
cell whose source cell carries ``metadata.course.starting_code`` gets that broken or
impure starting code instead of nbgrader's ``raise NotImplementedError()`` stub.
"""
from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
CHECK_TAG = "check-my-answers"  # the grader drops these cells: they only re-run visible tests


def assignments(root: Path = ROOT) -> list[str]:
    return sorted(p.name for p in (root / "solutions").iterdir() if p.is_dir() and not p.name.startswith("."))


def _quoted(src: str) -> str:
    if "'''" not in src and not src.endswith("\\"):
        return "r'''\n" + src + "\n'''"
    return repr(src)


def _selfcheck_source(visible: dict) -> str:
    """The last cell of a released notebook: the visible tests, readable, run as a table."""
    parts = ["from autograder.selfcheck import check_my_answers", "",
             "# The visible tests of each exercise (copied from its test cell by `make release`).",
             "VISIBLE_TESTS = {}"]
    for name, src in visible.items():
        parts.append(f"VISIBLE_TESTS[{name!r}] = {_quoted(src)}")
    parts += ["", "check_my_answers(VISIBLE_TESTS)"]
    return "\n".join(parts)


def _postprocess(source_dir: Path, release_dir: Path) -> None:
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
            cell.metadata.pop("course", None)
            if cell.cell_type == "code":
                cell.outputs = []
                cell.execution_count = None
        if visible:
            rel.cells.append(nbformat.v4.new_markdown_cell(
                "## Check my answers\n\nRuns the visible tests of every exercise above and shows "
                "which pass. The grader also runs hidden tests, so a pass here is a good sign, "
                "not a guarantee.", metadata={"tags": [CHECK_TAG]}))
            rel.cells.append(nbformat.v4.new_code_cell(_selfcheck_source(visible),
                                                       metadata={"tags": [CHECK_TAG]}))
        if visible:  # deterministic ids, so a second release is byte-for-byte the same
            rel.cells[-2]["id"], rel.cells[-1]["id"] = "check-my-answers-intro", "check-my-answers"
        nbformat.write(rel, str(out_path))


def _generate_with_nbgrader(course: Path, names) -> None:
    """nbgrader's generate_assignment, in-process (one nbgrader start for all assignments)."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    config = Config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.source_directory = "solutions"
    config.CourseDirectory.release_directory = "exercises"
    config.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    config.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    bindir = str(Path(sys.executable).parent)  # nbgrader's gradebook runs `alembic`
    os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    for a in names:
        result = api.generate_assignment(a, force=True, create=True)
        if not result["success"]:
            raise SystemExit(f"nbgrader generate_assignment {a} failed:\n{result.get('error')}\n{result.get('log')}")


def generate(root: Path, dest: Path, only=None) -> None:
    """Generate the assignments of ``root/solutions`` (all, or ``only``) into ``dest`` (an exercises/ folder)."""
    names = list(only) if only else assignments(root)
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        tmp = Path(tmp)
        shutil.copytree(root / "solutions", tmp / "solutions")
        _generate_with_nbgrader(tmp, names)
        for a in names:
            _postprocess(tmp / "solutions" / a, tmp / "exercises" / a)
        if only:
            for a in names:
                if (dest / a).exists():
                    shutil.rmtree(dest / a)
                shutil.copytree(tmp / "exercises" / a, dest / a)
            return
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(tmp / "exercises", dest)


def differences(a: Path, b: Path) -> list[str]:
    cmp = filecmp.dircmp(a, b)
    out = [f"only in {cmp.left}: {n}" for n in cmp.left_only] + [f"only in {cmp.right}: {n}" for n in cmp.right_only]
    out += [f"differs: {n}" for n in cmp.diff_files]
    for sub in cmp.common_dirs:
        out += differences(a / sub, b / sub)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that exercises/ is in sync")
    parser.add_argument("assignments", nargs="*", help="only these assignments (default: all)")
    args = parser.parse_args(argv)
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = Path(tmp) / "exercises"
            generate(ROOT, fresh)
            diffs = differences(ROOT / "exercises", fresh) if (ROOT / "exercises").exists() else ["exercises/ missing"]
        if diffs:
            print("exercises/ is not what `make release` generates from solutions/:\n  " + "\n  ".join(diffs))
            return 1
        print("exercises/ is in sync with solutions/")
        return 0
    generate(ROOT, ROOT / "exercises", only=args.assignments)
    print(f"released {', '.join(args.assignments or assignments())} into exercises/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
