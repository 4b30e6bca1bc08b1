"""docs/architecture.md names only files and folders that exist.

Every path the page writes in backticks (a token with a ``/`` or a file's extension) is looked up:
from the checkout's root, else from ``autograder/`` (the page names the grader's rooms as
``grader/cli.py``), else, for a bare file name listed under a room, anywhere in the package.
Placeholders (``NN_slug``, ``<assignment>``, ``*``) stand for many paths and are skipped; a
folder the grader makes when it runs (``.course/``) is one ``.gitignore`` names."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
PATH_LIKE = re.compile(r"/|\.(py|md|toml|ipynb|ya?ml|txt|json|cfg|css|sh|html)$")


def _named_paths(text: str) -> list[str]:
    tokens = re.findall(r"`([^`\n]+)`", text)
    return sorted({t for t in tokens if PATH_LIKE.search(t) and " " not in t and "://" not in t})


def _exists(token: str) -> bool:
    if any(mark in token for mark in ("NN", "<", "*", "...")):
        return True  # a placeholder for many paths
    ignored = {line.strip().strip("/") for line in (ROOT / ".gitignore").read_text().splitlines()}
    if token.strip("/") in ignored:
        return True  # made when a command runs, never in the checkout
    path = token.rstrip("/")
    if (ROOT / path).exists() or (ROOT / "autograder" / path).exists():
        return True
    return "/" not in path and any((ROOT / "autograder").rglob(path))


def test_every_path_the_architecture_page_names_exists():
    named = _named_paths(PAGE.read_text())
    assert len(named) > 30  # the page names the rooms and their files
    missing = [t for t in named if not _exists(t)]
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


def test_a_missing_path_is_caught(tmp_path):
    """The check itself fails on a name that is not there (a removed folder, a renamed file)."""
    assert not _exists("tests/wrong_answers/")
    assert not _exists("sandbox/no_such_module.py")
    assert _exists("sandbox/containment.py") and _exists("autograder/judge/") and _exists("view.py")
