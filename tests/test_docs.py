"""docs/instructor-guide.md stays true to the course it describes.

Every §"Heading" the guide cites is a markdown heading of the chapter it is cited for: inside
a chapter's section of the guide (``## 03_purity: ...``) that chapter, unless the reference is
written ``05_shapes §"..."``; elsewhere (the agendas, the slides section) the chapter named
last before it on the same line. Every chapter in course/ has a section, and each section has
learning objectives, live-coding moments, misconceptions that name the chapter's exercises,
and a timing. The agendas add up to their advertised lengths, and every `make` target the
guide mentions exists.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "instructor-guide.md"
CHAPTERS = sorted(p.stem for p in (ROOT / "course").glob("*.ipynb"))

HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
REFERENCE = re.compile(r'§"([^"\n]+)"')
CHAPTER_NAME = re.compile(r"(?<![\w/])(\d\d_[a-z0-9_]+?)(?![a-z0-9_])")
SUBSECTIONS = {
    "objectives": "learning objectives",
    "live": "live-coding moments",
    "misconceptions": "misconceptions",
    "timing": "timing",
}


def _lines_outside_fences(text: str):
    """(line number, line) for every line of markdown ``text`` that is not inside a ``` fence."""
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def notebook_headings(chapter: str) -> set[str]:
    """The text of every markdown heading line (any level) in course/<chapter>.ipynb."""
    nb = nbformat.read(str(ROOT / "course" / f"{chapter}.ipynb"), as_version=4)
    found = set()
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for _, line in _lines_outside_fences(cell.source):
                match = HEADING.match(line)
                if match:
                    found.add(match.group(2).strip())
    return found


def exercise_names(chapter: str) -> list[str]:
    """Names of the exercises of a chapter: the grade_ids of its nbgrader answer cells."""
    path = ROOT / "solutions" / chapter / f"{chapter}.ipynb"
    if not path.exists():
        return []
    nb = nbformat.read(str(path), as_version=4)
    names = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and not meta.get("grade"):
            names.append(meta["grade_id"])
    return names


def guide_sections() -> list[dict]:
    """The guide split at its level-1 and level-2 headings: title, chapter (or None), lines."""
    sections = [{"title": "", "chapter": None, "lines": []}]
    for number, line in _lines_outside_fences(GUIDE.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if match and len(match.group(1)) <= 2:
            title = match.group(2).strip()
            first = title.split()[0].rstrip(":") if title.split() else ""
            sections.append({"title": title, "chapter": first if first in CHAPTERS else None,
                             "lines": []})
        else:
            sections[-1]["lines"].append((number, line))
    return sections


def chapter_sections() -> dict[str, dict]:
    found = {}
    for section in guide_sections():
        if section["chapter"]:
            assert section["chapter"] not in found, f"the guide has two sections for {section['chapter']}"
            found[section["chapter"]] = section
    return found


def subsections(section: dict) -> dict[str, list[str]]:
    """The ``###`` parts of a chapter section, keyed by the SUBSECTIONS they match."""
    parts, current = {}, None
    for _, line in section["lines"]:
        match = HEADING.match(line)
        if match and len(match.group(1)) == 3:
            title = match.group(2).strip().lower()
            current = next((key for key, start in SUBSECTIONS.items() if title.startswith(start)), None)
            if current:
                parts.setdefault(current, [])
            continue
        if current:
            parts[current].append(line)
    return parts


def test_guide_exists_and_the_course_has_chapters():
    assert GUIDE.exists(), "docs/instructor-guide.md is missing"
    assert CHAPTERS, "no chapters in course/"


def test_every_chapter_has_a_section():
    sections = chapter_sections()
    missing = [c for c in CHAPTERS if c not in sections]
    assert not missing, (f"docs/instructor-guide.md has no section for {missing}: add a "
                         "`## NN_slug: ...` heading per chapter")
    assert list(sections) == CHAPTERS, "the chapter sections of the guide are not in course order"


def test_every_section_reference_is_a_heading_of_its_chapter():
    headings = {c: notebook_headings(c) for c in CHAPTERS}
    problems, checked = [], 0
    for section in guide_sections():
        for number, line in section["lines"]:
            matches = list(REFERENCE.finditer(line))
            if line.count("§") != len(matches):
                problems.append(f"line {number}: a § not followed by a quoted heading on the same "
                                f"line: {line.strip()!r}")
            for match in matches:
                before = line[:match.start()]
                named = [m.group(1) for m in CHAPTER_NAME.finditer(before) if m.group(1) in CHAPTERS]
                just_before = re.search(r"(\d\d_[a-z0-9_]+)\s*$", before)
                if just_before and just_before.group(1) in CHAPTERS:
                    chapter = just_before.group(1)
                elif section["chapter"]:
                    chapter = section["chapter"]
                elif named:
                    chapter = named[-1]
                else:
                    problems.append(f"line {number}: §\"{match.group(1)}\" is outside a chapter section "
                                    "and no chapter (NN_slug) is named before it on its line")
                    continue
                checked += 1
                if match.group(1) not in headings[chapter]:
                    problems.append(f"line {number}: §\"{match.group(1)}\" is not a heading of "
                                    f"course/{chapter}.ipynb")
    assert not problems, "docs/instructor-guide.md cites missing sections:\n  " + "\n  ".join(problems)
    assert checked >= len(CHAPTERS), "the guide cites almost no chapter sections"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_section_is_complete(chapter):
    section = chapter_sections().get(chapter)
    assert section is not None, f"no section for {chapter} in docs/instructor-guide.md"
    parts = subsections(section)
    for key, title in SUBSECTIONS.items():
        assert key in parts, f"the {chapter} section has no `### {title.capitalize()}` subsection"
        assert "".join(parts[key]).strip(), f"the {chapter} section's {title} subsection is empty"

    objectives = [ln for ln in parts["objectives"] if re.match(r"\s*(\d+\.|[-*])\s+\S", ln)]
    assert 3 <= len(objectives) <= 5, (f"{chapter}: {len(objectives)} learning objectives; "
                                       "give 3 to 5 concrete ones")
    assert REFERENCE.search("\n".join(parts["live"])), \
        f"{chapter}: the live-coding moments name no chapter section (§\"Heading\")"
    misconceptions = "\n".join(parts["misconceptions"])
    unnamed = [name for name in exercise_names(chapter) if f"`{name}`" not in misconceptions]
    assert not unnamed, (f"{chapter}: the misconceptions subsection does not name the exercise(s) "
                         f"{unnamed}: run `make release`, which writes each chapter's exercise list there")
    assert re.search(r"\d+\s*min", "\n".join(parts["timing"])), f"{chapter}: the timing gives no minutes"


def _minutes(clock: str) -> int:
    hours, minutes = clock.split(":")
    return int(hours) * 60 + int(minutes)


@pytest.mark.parametrize("agenda, total", [("half-day", 210), ("full-day", 420)])
def test_agenda_is_a_contiguous_table_of_the_advertised_length(agenda, total):
    lines = GUIDE.read_text(encoding="utf-8").splitlines()
    start = next((i for i, ln in enumerate(lines)
                  if HEADING.match(ln) and ln.lstrip("#").strip().lower().startswith(agenda)), None)
    assert start is not None, f"the guide has no `### {agenda.capitalize()} workshop` agenda"
    slots = []
    for line in lines[start + 1:]:
        if HEADING.match(line):
            break
        match = re.match(r"\|\s*(\d{1,2}:\d\d)\s*[–-]\s*(\d{1,2}:\d\d)\s*\|", line)
        if match:
            slots.append((_minutes(match.group(1)), _minutes(match.group(2))))
    assert slots, f"the {agenda} agenda has no table rows with times"
    for (_, end), (begin, _) in zip(slots, slots[1:]):
        assert end == begin, f"the {agenda} agenda has a gap or overlap at {end // 60}:{end % 60:02d}"
    assert all(b > a for a, b in slots), f"the {agenda} agenda has a slot that ends before it starts"
    assert slots[-1][1] - slots[0][0] == total, \
        f"the {agenda} agenda lasts {slots[-1][1] - slots[0][0]} min, not {total}"


def test_make_targets_in_the_guide_exist():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", makefile, flags=re.M))
    used = set(re.findall(r"`make ([a-z][\w-]*)", GUIDE.read_text(encoding="utf-8")))
    assert used, "the guide mentions no make targets"
    assert not used - targets, f"the guide mentions make targets the Makefile lacks: {sorted(used - targets)}"
