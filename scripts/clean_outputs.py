"""Strip outputs and execution counts from every notebook in course/, solutions/ and exercises/
(nbgrader cell metadata is kept). ``--check`` only lists notebooks that carry outputs.

    python scripts/clean_outputs.py [--check] [--root DIR]   # DIR: a copy of the course (default: this checkout)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("course", "solutions", "exercises")


def notebooks(root: Path = ROOT):
    for folder in FOLDERS:
        yield from sorted((root / folder).rglob("*.ipynb"))


def dirty(nb) -> bool:
    return any(c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)
               for c in nb.cells)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 listing the notebooks that carry outputs")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the course folder holding course/, solutions/, exercises/ (default: this checkout)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not any((root / folder).is_dir() for folder in FOLDERS):
        print(f"no {', '.join(FOLDERS)} folder in {root}", file=sys.stderr)
        return 2
    found = []
    for path in notebooks(root):
        nb = nbformat.read(str(path), as_version=4)
        if dirty(nb):
            found.append(path.relative_to(root))
            if not args.check:
                for c in nb.cells:
                    if c.cell_type == "code":
                        c.outputs, c.execution_count = [], None
                nbformat.write(nb, str(path))
    if args.check and found:
        print("notebooks with outputs or execution counts (run `make clean-outputs`):", *found, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
