"""Every ``AUTOGRADER_*`` setting, read here and nowhere else: its default and a line of help.

An operator sets them in the grader's environment; ``python -m autograder settings`` lists them
with their values. A setting that does not parse is a :class:`~autograder.common.errors.GradingError`
naming it and what it must be (:func:`check`: once per command, before anything is graded).
Kernels never see them (their environment is an allow-list: :data:`autograder.sandbox.containment.KERNEL_ENV`),
except ``AUTOGRADER_KERNEL_TAG``.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from .errors import GradingError

_OFF = ("0", "off", "no", "false")


@dataclass(frozen=True)
class Setting:
    name: str
    default: object
    help: str
    kind: str = "int"  # int, number (positive), flag (on/off), range (of uids), path, paths, text
    what: str = "a positive whole number"
    minimum: int | None = None


SETTINGS = [
    Setting("AUTOGRADER_SANDBOX", "on", "'off' grades without containment (only code you trust; "
            "--no-sandbox sets it); on, a sandbox that cannot be set up (as root: namespaces and a uid "
            "of its own; otherwise bubblewrap) is a refusal", "flag"),
    Setting("AUTOGRADER_UNSHARE", "", "util-linux's unshare to use (default: the one on PATH)", "path"),
    Setting("AUTOGRADER_SANDBOX_UIDS", "61000-61183", "the user ids lent to contained kernels and "
            "program runners, one per process at a time (never a real account's)", "range"),
    Setting("AUTOGRADER_MEMORY_MB", 4096, "memory of one contained kernel or program runner, MiB",
            what="a positive whole number of MiB"),
    Setting("AUTOGRADER_MEMORY_CGROUP", "on", "'off' limits a kernel's memory by RLIMIT_DATA "
            "instead of a memory cgroup", "flag"),
    Setting("AUTOGRADER_NPROC", 4096, "processes and threads of one sandbox uid (a fork bomb stops there)",
            what="a positive whole number of processes"),
    Setting("AUTOGRADER_BOX_MB", 1024, "what one contained kernel may write in its box (a tmpfs), MiB",
            what="a positive whole number of MiB"),
    Setting("AUTOGRADER_JUDGE_MEMORY_MB", 4096, "data memory of one grading process (RLIMIT_DATA), MiB; "
            "it uses about 600 MiB judging any chapter", what="a whole number of MiB, at least 1024",
            minimum=1024),
    Setting("AUTOGRADER_MAX_NOTEBOOK_MB", 100, "a submission larger than this is not read (nor "
            "unzipped past it by collect), MB", "number", what="a positive number of MB"),
    Setting("AUTOGRADER_COURSE_ROOT", "", "the course root (the folder holding solutions/), when it "
            "is not found from the notebook's folder, the current one or the package's", "path"),
    Setting("AUTOGRADER_HIDE", "", "more folders no kernel may see, separated by ':' (the kernel's "
            "view is an allow-list: needed only for a folder inside the interpreter's)", "paths"),
    Setting("AUTOGRADER_KERNEL_TAG", "", "a string put in every contained kernel's environment, to "
            "find its processes (ps e)", "text"),
]
BY_NAME = {s.name: s for s in SETTINGS}


_GIVEN: dict = {}  # the command's own values (its flags), over the environment's: see given()


@contextlib.contextmanager
def given(**values):
    """Within it, settings have the values given (a command line's flags: ``--no-sandbox`` is
    ``given(AUTOGRADER_SANDBOX="off")``) instead of the environment's, in this process and the
    grading processes it forks; no environment variable is written for them."""
    for name in values:
        if name not in BY_NAME:
            raise KeyError(f"{name} is not a setting of autograder.common.settings")
    saved = dict(_GIVEN)
    _GIVEN.update({name: str(value) for name, value in values.items()})
    try:
        yield
    finally:
        _GIVEN.clear()
        _GIVEN.update(saved)


def raw(name: str) -> str:
    """The setting as the command gives it (:func:`given`) or its environment, stripped ('' when
    unset)."""
    if name not in BY_NAME:
        raise KeyError(f"{name} is not a setting of autograder.common.settings")
    return _GIVEN[name].strip() if name in _GIVEN else os.environ.get(name, "").strip()


def get(name: str):
    """The setting's value (its default when unset), checked: an int, a bool for a flag (True
    for on), a ``range`` of uids, a path (''), a list of paths or a text."""
    s = BY_NAME[name]
    text = raw(name)
    if s.kind == "flag":
        return (text or str(s.default)).lower() not in _OFF
    if s.kind in ("path", "text"):
        return text or s.default
    if s.kind == "paths":
        return [p for p in text.split(os.pathsep) if p]
    if s.kind == "range":
        lo, _, hi = (text or s.default).partition("-")
        try:
            uids = range(int(lo), int(hi or lo) + 1)
        except ValueError:
            uids = range(0)
        if not uids or uids.start <= 0:
            raise GradingError(f"{name}={text!r} is not a range of user ids like {s.default}: set it "
                               f"to one, or unset it for the default")
        return uids
    if not text:
        return s.default
    try:
        value = float(text) if s.kind == "number" else int(text)
    except ValueError:
        value = None
    if value is None or value <= 0 or (s.minimum is not None and value < s.minimum):
        raise GradingError(f"{name}={text!r} is not {s.what}: set it to one, or unset it for the "
                           f"default ({s.default})")
    return value


def check() -> None:
    """Every setting parses (else :class:`GradingError` naming the first that does not)."""
    for s in SETTINGS:
        get(s.name)


def describe() -> str:
    """The settings as ``python -m autograder settings`` prints them."""
    lines = []
    for s in SETTINGS:
        now = raw(s.name)
        value = f"{now!r}" if now else "unset"
        default = s.default if s.default != "" else "(none)"
        lines.append(f"{s.name}  [default {default}; now {value}]\n    {s.help}")
    return "\n".join(lines)
