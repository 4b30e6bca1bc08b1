"""The course's manifest (``autograder/manifest.toml``): every chapter and exercise in one file.

Shipped with the package, so a learner's installed copy (Colab's wheel) reads the same file as
the grader. The chapters are written by hand; the exercise entries by ``make release``, from each
answer cell's ``metadata.course`` in ``solutions/NN_slug/NN_slug.ipynb`` (scripts/release.py). :func:`load` parses it once and checks its form; the accessors give what the rest
of the package reads from it: the section that teaches each idea (``feedback.TAUGHT_IN``), the
errors each chapter teaches (feedback's per-chapter pointers), the chapters and exercises (the
tests that the tree agrees), the benchmark kernels (``scripts/bench.py``).
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field
from importlib import resources

KINDS = ("transfer", "warm-up")


class ManifestError(ValueError):
    """The manifest does not have the form this module reads; the message says where."""


@dataclass(frozen=True)
class Kernel:
    chapter: str
    label: str
    unit: str
    function: str
    why_slow: str = ""


@dataclass(frozen=True)
class Chapter:
    name: str
    idea: str
    sections: dict  # idea -> section title
    errors: dict = field(default_factory=dict)  # error kind -> idea (a key of sections)
    kernels: tuple = ()


@dataclass(frozen=True)
class Exercise:
    name: str
    chapter: str
    idea: str
    kind: str
    single_token: bool = False
    kernel: str = ""


@dataclass(frozen=True)
class Manifest:
    general: dict
    chapters: tuple
    exercises: tuple

    def chapter(self, name: str) -> Chapter | None:
        return next((c for c in self.chapters if c.name == name), None)

    def exercises_of(self, chapter: str) -> list:
        return [e for e in self.exercises if e.chapter == chapter]

    def taught_in(self) -> dict:
        """``{idea: (chapter, section title)}``; ideas no chapter teaches have chapter None."""
        out = {}
        for c in self.chapters:
            for idea, title in c.sections.items():
                out[idea] = (c.name, title)
        for idea, where in self.general.items():
            out[idea] = (None, where or None)
        return out

    def kernels(self) -> list:
        return [k for c in self.chapters for k in c.kernels]


def _need(table, key, kind, where):
    value = table.get(key)
    if not isinstance(value, kind):
        raise ManifestError(f"manifest: {where} needs {key!r} ({kind.__name__})")
    return value


def parse(text: str) -> Manifest:
    """The manifest in ``text``, its form checked (names unique, ideas known, kinds known)."""
    data = tomllib.loads(text)
    general = data.get("general", {})
    chapters = []
    for i, c in enumerate(data.get("chapter", [])):
        where = f"chapter #{i + 1}"
        name = _need(c, "name", str, where)
        sections = dict(_need(c, "sections", dict, name))
        errors = dict(c.get("errors", {}))
        for kind, idea in errors.items():
            if idea not in sections:
                raise ManifestError(f"manifest: {name}'s error {kind!r} points to {idea!r}, not one of its sections")
        kernels = tuple(Kernel(name, _need(k, "label", str, f"{name}'s kernel"), _need(k, "unit", str, name),
                               _need(k, "function", str, name), k.get("why_slow", ""))
                        for k in c.get("kernels", []))
        chapters.append(Chapter(name, _need(c, "idea", str, name), sections, errors, kernels))
    names = [c.name for c in chapters]
    if len(set(names)) != len(names):
        raise ManifestError("manifest: a chapter is listed twice")
    ideas = [i for c in chapters for i in c.sections] + list(general)
    if len(set(ideas)) != len(ideas):
        raise ManifestError("manifest: an idea is taught in two places")
    exercises = []
    for i, e in enumerate(data.get("exercise", [])):
        name = _need(e, "name", str, f"exercise #{i + 1}")
        ex = Exercise(name, _need(e, "chapter", str, name), _need(e, "idea", str, name),
                      _need(e, "kind", str, name), bool(e.get("single_token", False)), e.get("kernel", ""))
        if ex.chapter not in names:
            raise ManifestError(f"manifest: exercise {name} names the unknown chapter {ex.chapter!r}")
        if ex.idea not in ideas:
            raise ManifestError(f"manifest: exercise {name} needs the unknown idea {ex.idea!r}")
        if ex.kind not in KINDS:
            raise ManifestError(f"manifest: exercise {name} is of kind {ex.kind!r}, not one of {KINDS}")
        exercises.append(ex)
    keys = [(e.chapter, e.name) for e in exercises]
    if len(set(keys)) != len(keys):
        raise ManifestError("manifest: an exercise is listed twice")
    return Manifest(dict(general), tuple(chapters), tuple(exercises))


@functools.lru_cache(maxsize=1)
def load() -> Manifest:
    """The package's manifest (parsed once per process)."""
    return parse(resources.files(__package__).joinpath("manifest.toml").read_text(encoding="utf-8"))
