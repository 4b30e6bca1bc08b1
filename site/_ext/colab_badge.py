"""Sphinx extension: the "Open in Colab" badge of a notebook's first cell is drawn by the site
itself, so no page loads an image from colab.research.google.com (offline, or behind a
firewall, every page would start with a broken picture). The badge's link stays; its image
becomes the words "Open in Colab" in a badge styled by site.css, with the Colab logo the theme
already ships for its launch button."""
from __future__ import annotations

from docutils import nodes

BADGE = "https://colab.research.google.com/assets/colab-badge.svg"


def local_badges(app, doctree) -> None:
    for image in list(doctree.findall(nodes.image)):
        if image["uri"] == BADGE:
            image.replace_self(nodes.inline("", image.get("alt") or "Open in Colab", classes=["colab-badge"]))


def setup(app):
    app.connect("doctree-read", local_badges, priority=400)  # before Sphinx collects the images
    return {"parallel_read_safe": True, "parallel_write_safe": True}
