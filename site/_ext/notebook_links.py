"""Sphinx extension: a notebook's path written as inline code (`course/03_purity.ipynb`,
`exercises/03_purity/03_purity.ipynb`), as the chapters, exercises and guide name each other,
becomes a link to that notebook's page when the site has one (the code look is kept)."""
from __future__ import annotations

from docutils import nodes


def link_paths(app, doctree, docname: str) -> None:
    found = app.env.found_docs
    for literal in list(doctree.findall(nodes.literal)):
        path = literal.astext().strip()
        target = path.removesuffix(".ipynb")
        if not path.endswith(".ipynb") or target not in found or isinstance(literal.parent, nodes.reference):
            continue
        link = nodes.reference("", "", internal=True, refuri=app.builder.get_relative_uri(docname, target))
        literal.replace_self(link)
        link += literal


def setup(app):
    app.connect("doctree-resolved", link_paths)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
