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


# --------------------------------------------------------------------------- the learner's face

GRADING_ROOMS = ("common", "sandbox", "judge", "grader", "instructor")  # the grader's rooms (the page)
KERNEL_SIDE = "agent"  # the judge's side in the learner's kernel: the learner's face and wire only

LOADED = """\
import importlib, json, sys
rooms = {rooms!r}
seen, found = set(), {{}}
for name in {modules!r}:
    module = importlib.import_module(name)
    for public in getattr(module, "__all__", ()) if name == "autograder" else ():
        getattr(module, public)  # the package's names load on first use
    new = sorted(m for m in sys.modules if m.split(".")[0] == "autograder" and m.split(".")[1:2]
                 and m.split(".")[1] in rooms)
    found[name] = [m for m in new if m not in seen]
    seen.update(new)
print(json.dumps(found))
"""


def _rooms_loaded(modules: list[str], rooms: tuple[str, ...]) -> dict[str, list[str]]:
    """For each of ``modules``, imported one after another in a fresh interpreter, the modules of
    ``rooms`` (``autograder.<room>...``) its import loaded first."""
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", LOADED.format(rooms=rooms, modules=modules)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def _learner_face() -> list[str]:
    """The package's top-level modules (the learner's face, ``import autograder as ag``), the
    command line (``__main__``, which builds its verbs from the rooms' own ``cli``) aside."""
    return ["autograder", *sorted(f"autograder.{p.stem}" for p in (ROOT / "autograder").glob("*.py")
                                  if p.stem not in ("__init__", "__main__"))]


def test_the_learners_face_imports_no_grading_room():
    """The rule the page states (and shared/LAYOUT.md): the top level is the learner's face, each
    grading room a subpackage; importing a top-level module (each public name of ``autograder``
    loaded too) loads no module of a grading room, nor the kernel-side agent."""
    loaded = _rooms_loaded(_learner_face(), (*GRADING_ROOMS, KERNEL_SIDE))
    assert len(loaded) > 15
    assert not any(loaded.values()), {m: r for m, r in loaded.items() if r}


def test_the_kernel_side_imports_no_grading_room():
    """The agent, which runs in the learner's kernel, loads the learner's face and ``wire`` only:
    no grading room (the kernel's box holds the package whole, but nothing of the grader runs there)."""
    fixtures = sorted(f"autograder.agent.fixtures.{p.stem}" for p in (ROOT / "autograder/agent/fixtures").glob("*.py")
                      if p.stem != "__init__")
    loaded = _rooms_loaded(["autograder.agent", "autograder.agent.fixtures", *fixtures], GRADING_ROOMS)
    assert not any(loaded.values()), {m: r for m, r in loaded.items() if r}


def test_a_room_a_module_loads_is_caught():
    """The check itself sees a room loaded: the grader's command line loads its room."""
    loaded = _rooms_loaded(["autograder.wire", "autograder.grader.cli"], GRADING_ROOMS)
    assert loaded["autograder.wire"] == [] and "autograder.grader.cli" in loaded["autograder.grader.cli"]
