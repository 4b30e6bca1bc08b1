"""Put an "Open in Colab" badge and a Colab-only install cell at the top of every course and
solutions notebook, from one setting: ``[tool.course] github`` in pyproject.toml.

    python scripts/colab.py          # (re)write the cells; make release carries them to exercises/
    python scripts/colab.py --check  # exit 1 if any notebook's cells are missing or stale
    python scripts/colab.py 03_      # only notebooks whose path contains "03_"
"""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
TAG = "colab-setup"


def settings():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]
    return data["github"], data.get("branch", "main")


def cells_for(path: Path):
    repo, branch = settings()
    rel = path.relative_to(ROOT).as_posix()
    if rel.startswith("solutions/"):
        rel = "exercises/" + rel.removeprefix("solutions/")  # learners open the released copy
    badge = (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
             f"(https://colab.research.google.com/github/{repo}/blob/{branch}/{rel})")
    install = (
        "# On Colab only: install the course's `autograder` helpers (does nothing elsewhere).\n"
        "import sys\n"
        "if \"google.colab\" in sys.modules:\n"
        "    import subprocess\n"
        f"    subprocess.run([sys.executable, \"-m\", \"pip\", \"install\", \"-q\",\n"
        f"                    \"git+https://github.com/{repo}@{branch}\"], check=True)")
    return [nbformat.v4.new_markdown_cell(badge, metadata={"tags": [TAG]}),
            nbformat.v4.new_code_cell(install, metadata={"tags": [TAG]})]


def notebooks():
    yield from sorted((ROOT / "course").glob("*.ipynb"))
    yield from sorted((ROOT / "solutions").glob("*/*.ipynb"))


def apply(path: Path, write: bool) -> bool:
    """Return True if the notebook already had up-to-date cells."""
    nb = nbformat.read(str(path), as_version=4)
    kept = [c for c in nb.cells if TAG not in c.metadata.get("tags", [])]
    wanted = cells_for(path)
    current = [c for c in nb.cells if TAG in c.metadata.get("tags", [])]
    fresh = [c.source for c in current] == [c.source for c in wanted] and nb.cells[:2] == current
    if write and not fresh:
        for i, c in enumerate(wanted):
            c["id"] = f"colab-{i}"
        nb.cells = wanted + kept
        nbformat.write(nb, str(path))
    return fresh


def main(argv=None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    check = "--check" in args
    only = [a for a in args if not a.startswith("--")]  # optional: paths containing these strings
    chosen = [p for p in notebooks() if not only or any(o in p.as_posix() for o in only)]
    stale = [p.relative_to(ROOT) for p in chosen if not apply(p, write=not check)]
    if check and stale:
        print("notebooks without an up-to-date Colab badge and install cell (`make colab` rewrites them):",
              *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
