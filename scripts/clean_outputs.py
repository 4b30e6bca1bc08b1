"""Strip outputs and execution counts from every notebook in course/, solutions/ and exercises/
(nbgrader cell metadata is kept). ``--check`` only lists notebooks that carry outputs."""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("course", "solutions", "exercises")


def notebooks():
    for folder in FOLDERS:
        yield from sorted((ROOT / folder).rglob("*.ipynb"))


def dirty(nb) -> bool:
    return any(c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)
               for c in nb.cells)


def main(argv=None) -> int:
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    found = []
    for path in notebooks():
        nb = nbformat.read(str(path), as_version=4)
        if dirty(nb):
            found.append(path.relative_to(ROOT))
            if not check:
                for c in nb.cells:
                    if c.cell_type == "code":
                        c.outputs, c.execution_count = [], None
                nbformat.write(nb, str(path))
    if check and found:
        print("notebooks with outputs:", *found, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
