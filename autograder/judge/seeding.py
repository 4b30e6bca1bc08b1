"""Where the judge's hidden inputs come from: a seed fixed per course secret, test and learner.

A regrade of the same submission draws the same inputs, so it gives the same verdicts (a
borderline answer cannot pass one regrade and fail the next), and no learner can predict the
inputs: the seed is an HMAC of the assignment, the learner and the test under the course's
grading secret, a random file kept in the instructor's course-state folder (``.course/`` in
the course root, or ``COURSE_STATE``), which no kernel can see. The file is made on first use
(owner-only); graders that share one gradebook share it by copying it.

The learner is the folder above the assignment's (nbgrader's ``submitted/<learner>/<assignment>/``).
A judge draws from ``k.rng`` (this seed's generator) and lists the inputs that are always
among the hidden ones with :meth:`autograder.judge.Kernel.cases`: the visible test's inputs and
the edges the exercise's contract names (even and odd widths, k > n, an empty tree, ties, zeros).
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

SECRET_FILE = "grading-secret"


def secret_path(course_root: Path, course_state: str = "") -> Path:
    """The grading secret's file: in ``course_state`` (the setting), else ``<root>/.course/``."""
    return Path(course_state or Path(course_root) / ".course") / SECRET_FILE


def course_secret(path: Path) -> bytes:
    """The course's grading secret, kept in ``path``; made there (owner-only, written whole
    before it appears, so graders starting at once agree on one) if there is none."""
    path = Path(path)
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secrets.token_hex(32).encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails if another grader made it first: theirs is the one
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return _read(path)


def _read(path: Path) -> bytes:
    text = path.read_bytes().strip()
    if len(text) < 32:
        raise ValueError(f"the course's grading secret {path} is too short (at least 32 characters)")
    return text


def learner_of(notebook: Path) -> str:
    """The learner a submitted notebook is graded for: the folder above its assignment's."""
    return Path(notebook).resolve().parent.parent.name


def submission_key(secret: bytes, assignment: str, learner: str) -> bytes:
    """The key of one learner's grading of one assignment (see :func:`seed_for`)."""
    return hmac.new(secret, f"{assignment}\0{learner}".encode(), hashlib.sha256).digest()


def seed_for(key: bytes, grade_id: str) -> int:
    """The seed of one test's hidden inputs under a submission's ``key`` (128 bits)."""
    return int.from_bytes(hmac.new(key, grade_id.encode(), hashlib.sha256).digest()[:16], "big")
