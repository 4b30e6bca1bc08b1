"""Sphinx extension: in the instructor guide, every section reference §"Heading" becomes a link
to that heading of its chapter's page, so an instructor can send a link to a section.

A reference names its chapter as tests/test_docs.py reads it: ``05_shapes §"..."`` names it
outright; inside a chapter's section of the guide (``## 03_purity: ...``) it is that chapter;
elsewhere it is the chapter named last before it on the same line. A reference to no known
chapter stays text."""
from __future__ import annotations

import re

from myst_parser.slugs import github_slugify

GUIDE = "instructor-guide"
REFERENCE = re.compile(r'(?:(?P<named>\d\d_[a-z0-9_]+) )?§"(?P<heading>[^"\n]+)"')
CHAPTER_NAME = re.compile(r"(?<![\w/])(\d\d_[a-z0-9_]+?)(?![a-z0-9_])")
SECTION = re.compile(r"^#{1,2} (\d\d_[a-z0-9_]+):")


def link(chapter: str, heading: str) -> str:
    text = f'§"{heading}"'.replace("[", r"\[").replace("]", r"\]")
    return f"[{text}](course/{chapter}.ipynb#{github_slugify(heading.replace('`', ''))})"


def with_links(text: str, chapters: set[str]) -> str:
    lines, section, fenced = [], None, False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            heading = re.match(r"^(#{1,2}) ", line)
            if heading:
                found = SECTION.match(line)
                section = found[1] if found and found[1] in chapters else None
            else:
                line = _link_line(line, section, chapters)
        lines.append(line)
    return "\n".join(lines) + "\n"


def _link_line(line: str, section: str | None, chapters: set[str]) -> str:
    def replace(match):
        before = [m for m in CHAPTER_NAME.findall(line[:match.start()]) if m in chapters]
        chapter = match["named"] or section or (before[-1] if before else None)
        if chapter not in chapters:
            return match[0]
        prefix = f"{match['named']} " if match["named"] else ""
        return prefix + link(chapter, match["heading"])
    return REFERENCE.sub(replace, line)


def add_links(app, docname: str, source: list[str]) -> None:
    if docname == GUIDE:
        chapters = {name.removeprefix("course/") for name in app.env.found_docs if name.startswith("course/")}
        source[0] = with_links(source[0], chapters)


def setup(app):
    app.connect("source-read", add_links)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
