"""Sphinx extension: an API name written as inline code in the prose (`jax.lax.scan`,
`lax.scan(f, init, xs)`, `jnp.where`, `ag.show_phases`) becomes a cross-reference, as the JAX
docs link every name: to JAX's reference through intersphinx (site/jax-objects.inv), or to the
course's reference page (reference.rst, autodoc) for the autograder's helpers. The code look is
kept; a name that neither knows stays plain code, without a warning.

The chapters' import names are spelled out first (``ABBREVIATIONS``: ``jnp`` is ``jax.numpy``,
``ag`` is ``autograder``). Code cells are linked by sphinx-codeautolink, which reads their
imports itself."""
from __future__ import annotations

import re

from docutils import nodes
from sphinx import addnodes

# how the chapters import what they name: `import jax.numpy as jnp`, `from jax import lax`,
# `import autograder as ag`, `from autograder import claims`
ABBREVIATIONS = {"jnp": "jax.numpy", "lax": "jax.lax", "ag": "autograder", "claims": "autograder.claims"}
# a dotted name, maybe called: `jax.jit`, `lax.scan(f, init, xs)`, `jnp.nonzero(..., size=...)`
NAME = re.compile(r"(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(.*\))?")


def target(text: str) -> str | None:
    """The full dotted name an inline code names, or None when it is not a name."""
    m = NAME.fullmatch(text.strip())
    if m is None:
        return None
    head, _, rest = m["name"].partition(".")
    return f"{ABBREVIATIONS.get(head, head)}.{rest}"


def link_names(app, doctree) -> None:
    for literal in list(doctree.findall(nodes.literal)):
        if isinstance(literal.parent, (nodes.reference, addnodes.pending_xref, nodes.title)):
            continue  # already a link, or a heading (its table-of-contents entry stays plain)
        name = target(literal.astext())
        if name is None:
            continue
        xref = addnodes.pending_xref("", refdomain="py", reftype="obj", reftarget=name,
                                     refexplicit=True, refwarn=False, refdoc=app.env.docname)
        literal.replace_self(xref)
        xref += literal


def setup(app):
    app.connect("doctree-read", link_names)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
