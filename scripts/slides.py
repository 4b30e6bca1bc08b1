"""Give every course notebook slideshow metadata, so a chapter can be presented as slides with
the RISE extension (jupyterlab-rise, installed by `make lab`: "Render as slides" in the
notebook toolbar, or Alt-R).

Rules: a markdown cell starting with a `#`/`##` heading opens a new slide; a `###` heading
opens a sub-slide; every other cell is a fragment of the current slide if short, or
continues it. ``--check`` exits 1 if a notebook's metadata is not what the rules give.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent


def slide_type(cell, first: bool) -> str:
    text = cell.source.lstrip()
    if first:
        return "slide"
    if cell.cell_type == "markdown":
        if text.startswith("# ") or text.startswith("## "):
            return "slide"
        if text.startswith("### "):
            return "subslide"
    if "colab-setup" in cell.metadata.get("tags", []):
        return "skip"
    return "-"


def main(argv=None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    check = "--check" in args
    only = [a for a in args if not a.startswith("--")]  # optional: paths containing these strings
    stale = []
    for path in sorted((ROOT / "course").glob("*.ipynb")):
        if only and not any(o in path.as_posix() for o in only):
            continue
        nb = nbformat.read(str(path), as_version=4)
        changed = False
        for i, cell in enumerate(nb.cells):
            want = slide_type(cell, first=(i == 0 or (i == 1 and "colab-setup" in nb.cells[0].metadata.get("tags", []))
                                           and cell.cell_type == "markdown" and "colab-setup" not in cell.metadata.get("tags", [])))
            if cell.metadata.get("slideshow", {}).get("slide_type") != want:
                cell.metadata["slideshow"] = {"slide_type": want}
                changed = True
        if changed:
            stale.append(path.name)
            if not check:
                nbformat.write(nb, str(path))
    if check and stale:
        print("notebooks without up-to-date slideshow metadata (`make colab` rewrites them):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
