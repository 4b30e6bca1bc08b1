"""Sphinx extension: the site's build fails when a chapter's outputs say a measured claim does
not hold (a ``claim: <what>: does not hold (<evidence>)`` line of ``autograder.claims``), as
``make test`` does. The chapter's cached execution is dropped, so the next build runs it again
rather than failing on the same outputs."""
from __future__ import annotations

import re

import nbformat
from docutils import nodes
from jupyter_cache import get_cache
from sphinx.errors import ExtensionError

FAILED = re.compile(r"^claim: (?P<what>.+): does not hold \(", re.M)


def failed_claims(doctree) -> list[str]:
    """The claims that the notebook's outputs (not its prose) say do not hold."""
    outputs = doctree.findall(lambda n: isinstance(n, nodes.container)
                              and n.get("nb_element") == "cell_code_output")
    return [m["what"] for node in outputs for m in FAILED.finditer(node.astext())]


def forget_execution(env, docname: str) -> None:
    """Remove the notebook's executed copy from myst-nb's jupyter-cache."""
    cache = get_cache(env.mystnb_config.execution_cache_path)
    notebook = nbformat.read(str(env.doc2path(docname)), as_version=4)
    try:
        cache.remove_cache(cache.match_cache_notebook(notebook).pk)
    except KeyError:  # not cached: nothing to forget
        pass


def check(app, doctree) -> None:
    failed = failed_claims(doctree)
    if failed:
        forget_execution(app.env, app.env.docname)
        raise ExtensionError(f"{app.env.docname}: measured claims that do not hold: {failed} "
                             "(its execution is not kept: the next build runs it again)")


def setup(app):
    app.connect("doctree-read", check)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
