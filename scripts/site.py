"""Build the course as a static website (`make site`; docs/site.md): Sphinx with myst-nb and
sphinx-book-theme, configured in site/conf.py.

    python scripts/site.py              # _site/html/index.html; prints where to open it
    python scripts/site.py -E           # any further arguments go to sphinx-build

The pages are laid out in _site/src with the repository's paths: site/*.md, the chapters
(course/*.ipynb), the released exercise notebooks (exercises/*/*.ipynb: never solutions/) and
the instructor guide. A file is copied only when it changed, so Sphinx and myst-nb's
jupyter-cache (_site/.jupyter_cache) read and execute only what changed since the last build.
"""
from __future__ import annotations

import filecmp
import os
import shutil
import sys
import time
from pathlib import Path

from sphinx.cmd.build import build_main

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_site"
SRC, HTML, DOCTREES = SITE / "src", SITE / "html", SITE / "doctrees"


def pages() -> dict[str, Path]:
    """Path in the site's sources -> the file it comes from."""
    found = {p.name: p for p in sorted((ROOT / "site").glob("*.md"))}
    found |= {f"course/{p.name}": p for p in sorted((ROOT / "course").glob("*.ipynb"))}
    found |= {p.relative_to(ROOT).as_posix(): p for p in sorted((ROOT / "exercises").glob("*/*.ipynb"))}
    found["instructor-guide.md"] = ROOT / "docs" / "instructor-guide.md"
    return found


def stage() -> None:
    """Make _site/src hold exactly pages(), leaving unchanged files (and their times) alone."""
    wanted = pages()
    for name, source in wanted.items():
        target = SRC / name
        if not target.exists() or not filecmp.cmp(source, target, shallow=False):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    for stale in [p for p in SRC.rglob("*") if p.is_file() and p.relative_to(SRC).as_posix() not in wanted]:
        stale.unlink()


def main(argv: list[str]) -> int:
    stage()
    # the chapters' kernels import this checkout's autograder, wherever the venv was installed from
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    start = time.monotonic()
    status = build_main(["-b", "html", "-c", str(ROOT / "site"), "-d", str(DOCTREES), *argv, str(SRC), str(HTML)])
    if status:
        return status
    index = HTML / "index.html"
    print(f"\nThe site is built ({time.monotonic() - start:.0f} s). Open it:\n"
          f"  file://{index}\n"
          f"or serve it (search works either way):\n"
          f"  python3 -m http.server -d {os.path.relpath(HTML)} 8000   # http://localhost:8000")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
