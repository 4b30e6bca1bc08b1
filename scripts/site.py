"""Build the course as a static website (`make site`; docs/site.md): Sphinx with myst-nb and
sphinx-book-theme, configured in site/conf.py.

    python scripts/site.py              # _site/html/index.html; prints where to open it
    python scripts/site.py -E           # any further arguments go to sphinx-build

The pages are laid out in _site/src with the repository's paths: site/*.md and site/*.rst, the chapters
(course/*.ipynb), the released exercise notebooks (exercises/*/*.ipynb: never solutions/) and
the instructor guide. A file is copied only when it changed, so Sphinx reads only what changed.

Each chapter that myst-nb's jupyter-cache (_site/.jupyter_cache) has no run of is executed first,
by the notebook runner the test suite uses too (scripts/notebook_runner.py: kernels on Unix
sockets of their own, no widget stall), and its run stored in the cache, where myst-nb then finds every chapter.
"""
from __future__ import annotations

import filecmp
import os
import shutil
import sys
import time
from pathlib import Path

import nbformat
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from nbclient.exceptions import CellExecutionError, CellTimeoutError
from sphinx.cmd.build import build_main

from notebook_runner import execute_notebook  # beside this script

ROOT = Path(__file__).resolve().parent.parent

SITE = ROOT / "_site"
SRC, HTML, DOCTREES = SITE / "src", SITE / "html", SITE / "doctrees"
CACHE = SITE / ".jupyter_cache"  # where myst-nb keeps its runs: beside the HTML folder
TIMEOUT = 300  # seconds a cell may run, as the chapters' tests allow


def pages() -> dict[str, Path]:
    """Path in the site's sources -> the file it comes from."""
    found = {p.name: p for p in sorted((ROOT / "site").glob("*.md")) + sorted((ROOT / "site").glob("*.rst"))}
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


def execute_uncached() -> list[str]:
    """Execute every chapter the cache has no run of and store its run; the chapters whose
    execution failed (an error in a cell not tagged raises-exception, a cell past TIMEOUT)."""
    cache, failed = get_cache(str(CACHE)), []
    for path in sorted((SRC / "course").glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        try:
            cache.match_cache_notebook(nb)
            continue
        except KeyError:
            pass
        print(f"Executing notebook {path.relative_to(SRC)}", flush=True)
        start = time.monotonic()
        try:
            # no timing in the cells' metadata: jupyter-cache's key covers it
            execute_notebook(nb, path.parent, timeout=TIMEOUT, record_timing=False)
        except (CellExecutionError, CellTimeoutError) as exc:
            print(f"{path}: execution failed:\n{exc}", file=sys.stderr, flush=True)
            failed.append(path.relative_to(SRC).as_posix())
            continue
        seconds = time.monotonic() - start
        cache.cache_notebook_bundle(CacheBundleIn(nb, str(path), data={"execution_seconds": seconds}),
                                    check_validity=False, overwrite=True)
        print(f"Executed notebook {path.relative_to(SRC)} in {seconds:.0f} s", flush=True)
    return failed


def main(argv: list[str]) -> int:
    stage()
    # the chapters' kernels import this checkout's autograder, wherever the venv was installed from
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    start = time.monotonic()
    failed = execute_uncached()
    if failed:
        print(f"\nThe site is not built: these chapters failed to execute: {', '.join(failed)}", file=sys.stderr)
        return 1
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
