"""A test's outcome, typed: :class:`Verdict`.

A test passes only when its judge returned normally after checking all its evidence, and no
claim of the kernel failed; never because a message came back empty. Every failure carries a
fixed, non-empty message that the judge chose; text that came from the learner's kernel may
follow it, made safe by :func:`learner_text` (terminal control sequences removed, other
control and direction-changing characters escaped). A verdict that is not ``graded`` is the
grader's fault or the machine's (a judge's bug, a starved machine): an error, never a zero.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# ANSI/VT escape sequences (CSI ..., OSC ... BEL or ST, and two-character escapes), then any
# C0/C1 control character but newline and tab, and the Unicode marks that reorder shown text
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]|\x9b[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")

LEARNER_TEXT_LIMIT = 2000


def learner_text(text, limit: int = LEARNER_TEXT_LIMIT) -> str:
    """``text`` (from the learner's kernel) safe to show after a judge's message: terminal
    escape sequences removed, other control characters shown escaped (``\\x07``), at most
    ``limit`` characters, surrounding blanks stripped."""
    text = _ESCAPES.sub("", str(text)[: 4 * limit])
    text = _CONTROL.sub(lambda m: ascii(m.group())[1:-1], text)
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


@dataclass(frozen=True)
class Verdict:
    """``passed``: the test earns its points. ``feedback``: empty exactly when it passed.
    ``graded``: False when the test could not be graded (an error of the grader's, or of the
    machine's: reported as such, never a silent zero)."""

    passed: bool
    feedback: str = ""
    graded: bool = True

    def __post_init__(self):
        if self.passed and (self.feedback or not self.graded):
            raise ValueError("a passing verdict carries no message and is graded")
        if not self.passed and not self.feedback.strip():
            raise ValueError("a failing verdict carries a message")


PASSED = Verdict(True)


def failed(message: str, learner: str = "") -> Verdict:
    """A failure: the judge's fixed ``message`` (non-empty), then the learner's text, if any,
    made safe (:func:`learner_text`)."""
    fixed = learner_text(message, 4 * LEARNER_TEXT_LIMIT)
    if not fixed:
        raise ValueError("a judge's failure message is never empty")
    extra = learner_text(learner) if learner else ""
    return Verdict(False, f"{fixed}: {extra}" if extra else fixed)


def not_graded(message: str) -> Verdict:
    """A test that could not be graded, with why (non-empty)."""
    text = learner_text(message, 4 * LEARNER_TEXT_LIMIT)
    return Verdict(False, text or "Not graded.", graded=False)
