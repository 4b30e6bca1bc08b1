"""Write site/jax-objects.inv: the Sphinx inventory (intersphinx's objects.inv) of JAX's API
reference, so the course's website links JAX's names to docs.jax.dev without downloading
JAX's own inventory while building (docs/site.md).

    python scripts/jax_inventory.py PATH/TO/jax/docs     # a checkout of github.com/jax-ml/jax

How it is made: JAX's documentation sources (the docs/jax.*.rst files of the jax-ml/jax
repository) say which page documents each name, as docs.jax.dev builds them:

- a name in an ``autosummary`` table with ``:toctree: _autosummary`` has a page of its own,
  ``_autosummary/jax.lax.scan.html#jax.lax.scan``;
- a name given by ``autoclass``/``autofunction``/``autodata`` is on its module's page,
  ``jax.sharding.html#jax.sharding.NamedSharding``, with the ``:members:`` its directive lists
  (``jax.stages.html#jax.stages.Compiled.memory_analysis``);
- a module (``automodule``) is ``jax.lax.html#module-jax.lax``.

Only the names the installed jax package has are kept (the learner's JAX, as
``requirements.txt`` pins it), each with the object type it has there, and every other public
name of a documented module that is the same object is added as an alias with the same page
(``jax.NamedSharding`` is ``jax.sharding.NamedSharding``; ``jax.P`` is ``PartitionSpec``). The
inventory's version is the jax version (the links' titles say "in JAX v0.12.0.1"); the script
prints the docs' commit when the docs are a git checkout: docs/site.md records the one used.
Sphinx reads the file as any objects.inv (``intersphinx_mapping`` in site/conf.py).
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import re
import subprocess
import sys
import types
import warnings
import zlib
from pathlib import Path

import jax

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "site" / "jax-objects.inv"
BASE_URL = "https://docs.jax.dev/en/latest/"  # site/conf.py's intersphinx target

DIRECTIVE = re.compile(r"^\.\. (?P<kind>currentmodule|module|automodule|autosummary|autoclass|autofunction|"
                       r"autodata|automethod|autoattribute|py:function|py:class|py:data)::\s*(?P<arg>\S*)")
OPTION = re.compile(r"^\s+:(?P<name>[\w-]+):\s*(?P<value>.*)$")
ENTRY = re.compile(r"^\s+~?(?P<name>[A-Za-z_][\w.]*)\s*$")


def documented(docs: Path) -> dict[str, str]:
    """Each name JAX's docs document -> its page and anchor, relative to BASE_URL."""
    found: dict[str, str] = {}
    for rst in sorted(docs.glob("jax*.rst")):
        page, module, block = rst.stem + ".html", None, None  # block: (kind, name, options)
        for line in rst.read_text(encoding="utf-8").splitlines():
            if m := DIRECTIVE.match(line):
                kind, arg = m["kind"], m["arg"]
                block = (kind, arg, {})
                if kind in ("currentmodule", "module", "automodule"):
                    module = arg
                    if kind != "currentmodule":
                        found.setdefault(arg, f"{page}#module-{arg}")
                elif kind != "autosummary":
                    name = arg if arg.startswith("jax") or module is None else f"{module}.{arg}"
                    found.setdefault(name, f"{page}#{name}")
                    block = (kind, name, {})
                continue
            if block is None:
                continue
            kind, name, options = block
            if m := OPTION.match(line):
                options[m["name"]] = m["value"]
                if kind == "autoclass" and m["name"] == "members":
                    for member in filter(None, re.split(r"[\s,]+", m["value"])):
                        found.setdefault(f"{name}.{member}", f"{page}#{name}.{member}")
            elif kind == "autosummary" and (m := ENTRY.match(line)) and module:
                full = m["name"] if m["name"].startswith("jax.") else f"{module}.{m['name']}"
                if "toctree" in options:
                    found.setdefault(full, f"_autosummary/{full}.html#{full}")
            elif line.strip() and not line[0].isspace():
                block = None
    return found


def lookup(name: str):
    """The installed jax's object of that dotted name, or None."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:  # not a module (or one whose optional dependencies are missing)
            continue
        try:
            for part in parts[split:]:
                obj = getattr(obj, part)
        except AttributeError:
            return None
        return obj
    return None


def role(obj, member: bool) -> str:
    if isinstance(obj, types.ModuleType):
        return "py:module"
    if inspect.isclass(obj):
        return "py:class"
    if isinstance(obj, property):
        return "py:property"
    if callable(obj):
        return "py:method" if member else "py:function"
    return "py:attribute" if member else "py:data"


def entries(docs: Path) -> dict[str, tuple[str, str]]:
    """name -> (role, uri) for the installed jax: documented names, then their aliases."""
    kept: dict[str, tuple[str, str]] = {}
    by_object: dict[int, str] = {}
    for name, uri in documented(docs).items():
        obj = lookup(name)
        if obj is None:
            continue
        owner = lookup(name.rpartition(".")[0])
        kept[name] = (role(obj, inspect.isclass(owner)), uri)
        if not isinstance(obj, (int, float, str, bool, type(None))):
            by_object.setdefault(id(obj), name)
    modules = ["jax", *(name for name, (kind, _) in kept.items() if kind == "py:module")]
    for module in modules:
        namespace = lookup(module)
        for attr in getattr(namespace, "__all__", None) or dir(namespace):
            alias = f"{module}.{attr}"
            obj = getattr(namespace, attr, None)
            if attr.startswith("_") or alias in kept or obj is None or isinstance(obj, types.ModuleType):
                continue
            if (target := by_object.get(id(obj))) is not None:
                kept[alias] = (kept[target][0], kept[target][1])
    return kept


def write(path: Path, found: dict[str, tuple[str, str]], version: str) -> None:
    """Sphinx's inventory format, version 2: a header, then zlib-compressed lines."""
    lines = "".join(f"{name} {kind} 1 {uri} -\n" for name, (kind, uri) in sorted(found.items()))
    header = f"# Sphinx inventory version 2\n# Project: JAX\n# Version: {version}\n" \
             "# The remainder of this file is compressed using zlib.\n"
    path.write_bytes(header.encode() + zlib.compress(lines.encode()))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("docs", type=Path, help="the docs/ folder of a jax-ml/jax checkout")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if not list(args.docs.glob("jax.*.rst")):
        parser.error(f"{args.docs} has no jax.*.rst: give the docs/ folder of a jax-ml/jax checkout")
    commit = subprocess.run(["git", "-C", str(args.docs), "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    with warnings.catch_warnings():  # looking names up touches deprecated ones
        warnings.simplefilter("ignore")
        found = entries(args.docs)
    write(args.out, found, jax.__version__)
    print(f"{args.out}: {len(found)} names of jax {jax.__version__}"
          + (f", pages as JAX's docs at jax-ml/jax@{commit} make them" if commit else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
