"""Sphinx extension: the ``autograder-api`` directive, which documents every public name of the
``autograder`` package (``autograder.__all__``) with autodoc, one section per module that
defines them, in the order of ``__all__``. A name added to the package appears on the reference
page (reference.rst) without editing it.

Each name is documented where a learner calls it, ``autograder.show_phases`` (``ag.show_phases``
in the chapters), so the chapters' links (api_links, sphinx-codeautolink) find it; autodoc also
records the defining module's name (``autograder.show_phases.show_phases``) as its canonical
name."""
from __future__ import annotations

import importlib
import inspect

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles


def by_module() -> dict[str, list[str]]:
    """The defining module of each public name -> those names, in the order of __all__."""
    package = importlib.import_module("autograder")
    grouped: dict[str, list[str]] = {}
    for name in package.__all__:
        grouped.setdefault(getattr(package, name).__module__, []).append(name)
    return grouped


def section(module: str, names: list[str]) -> list[str]:
    summary = (inspect.getdoc(importlib.import_module(module)) or module).split("\n\n")[0]
    title = f"``{module}``"
    lines = [title, "-" * len(title), "", summary, ""]
    package = importlib.import_module("autograder")
    for name in names:
        kind = "autoclass" if inspect.isclass(getattr(package, name)) else "autofunction"
        lines += [f".. {kind}:: autograder.{name}", *(["   :members:"] if kind == "autoclass" else []), ""]
    return lines


class AutograderApi(SphinxDirective):
    """Every name of autograder.__all__, documented from its docstring."""

    def run(self) -> list[nodes.Node]:
        # autodoc notes each module as the page's dependency: an edited docstring is read again
        lines = [line for module, names in by_module().items() for line in section(module, names)]
        content = StringList(lines, source="autograder-api")
        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, content, container)
        return container.children


def setup(app):
    app.setup_extension("sphinx.ext.autodoc")
    app.add_directive("autograder-api", AutograderApi)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
