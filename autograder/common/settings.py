"""Every setting an operator gives the grader through its environment, declared once: its
variable, its default and a line of help (the fields of :class:`Settings`).

A command builds one :class:`Settings` (:meth:`Settings.load`: the environment, then the
command's own flags over it, every value checked) and passes it down to what needs it: a
grading process forked by a batch receives it as an argument. No environment variable is
written to carry a setting. ``python -m autograder settings`` lists them with their values
(:func:`describe`). A value that does not parse is a :class:`~autograder.common.errors.GradingError`
naming it and what it must be. Kernels never see them (their environment is an allow-list:
:data:`autograder.sandbox.environment.KERNEL_ENV`), except ``AUTOGRADER_KERNEL_TAG``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields

from .errors import GradingError

_OFF = ("0", "off", "no", "false")


@dataclass(frozen=True)
class Setting:
    """How one setting is read: its environment variable, its default (as it would be written
    there), its help and its kind: int, number (positive), flag (on/off), range (of uids), path,
    paths (separated by ':'), text."""

    name: str
    default: str
    help: str
    kind: str = "int"
    what: str = "a positive whole number"
    minimum: int | None = None

    def parse(self, text: str):
        """The value of ``text`` ('' for unset: the default), checked."""
        text = text.strip()
        if self.kind == "flag":
            return (text or self.default).lower() not in _OFF
        if self.kind in ("path", "text"):
            return text or self.default
        if self.kind == "paths":
            return tuple(p for p in text.split(os.pathsep) if p)
        if self.kind == "range":
            lo, _, hi = (text or self.default).partition("-")
            try:
                uids = range(int(lo), int(hi or lo) + 1)
            except ValueError:
                uids = range(0)
            if not uids or uids.start <= 0:
                raise GradingError(f"{self.name}={text!r} is not a range of user ids like {self.default}: "
                                   "set it to one, or unset it for the default")
            return uids
        if not text:
            text = self.default
        try:
            value = float(text) if self.kind == "number" else int(text)
        except ValueError:
            value = None
        if value is None or value <= 0 or (self.minimum is not None and value < self.minimum):
            raise GradingError(f"{self.name}={text!r} is not {self.what}: set it to one, or unset it "
                               f"for the default ({self.default})")
        return value


def _declare(name: str, default, help: str, kind: str = "int", what: str = "a positive whole number",
             minimum: int | None = None):
    return field(metadata={"setting": Setting(name, str(default), help, kind, what, minimum)})


@dataclass(frozen=True)
class Settings:
    """The settings of one command, checked; one attribute per setting (its variable's name,
    lower case, without ``AUTOGRADER_``)."""

    sandbox: bool = _declare(
        "AUTOGRADER_SANDBOX", "on", "'off' grades without containment (only code you trust; "
        "--no-sandbox sets it); on, a sandbox that cannot be set up (bubblewrap's, and as root a uid "
        "of its own) is a refusal", "flag")
    sandbox_uids: range = _declare(
        "AUTOGRADER_SANDBOX_UIDS", "61000-61183", "the user ids lent to contained kernels and program "
        "runners, one per process at a time (never a real account's)", "range")
    memory_mb: int = _declare("AUTOGRADER_MEMORY_MB", 4096, "memory of one contained kernel or program "
                              "runner, MiB", what="a positive whole number of MiB")
    memory_cgroup: bool = _declare("AUTOGRADER_MEMORY_CGROUP", "on", "'off' limits a kernel's memory by "
                                   "RLIMIT_DATA instead of a memory cgroup", "flag")
    nproc: int = _declare("AUTOGRADER_NPROC", 4096, "processes and threads of one sandbox uid (a fork "
                          "bomb stops there)", what="a positive whole number of processes")
    box_mb: int = _declare("AUTOGRADER_BOX_MB", 1024, "what one contained kernel may write in its box "
                           "(a tmpfs), MiB", what="a positive whole number of MiB")
    judge_memory_mb: int = _declare(
        "AUTOGRADER_JUDGE_MEMORY_MB", 4096, "data memory of one grading process (RLIMIT_DATA), MiB; it "
        "uses about 600 MiB judging any chapter", what="a whole number of MiB, at least 1024", minimum=1024)
    max_notebook_mb: float = _declare(
        "AUTOGRADER_MAX_NOTEBOOK_MB", 100, "a submission larger than this is not read (nor unzipped "
        "past it by collect), MB", "number", what="a positive number of MB")
    course_root: str = _declare(
        "AUTOGRADER_COURSE_ROOT", "", "the course root (the folder holding solutions/), when it is not "
        "found from the notebook's folder, the current one or the package's", "path")
    hide: tuple[str, ...] = _declare(
        "AUTOGRADER_HIDE", "", "more folders no kernel may see, separated by ':' (the kernel's view is "
        "an allow-list: needed only for a folder inside the interpreter's)", "paths")
    kernel_tag: str = _declare("AUTOGRADER_KERNEL_TAG", "", "a string put in every contained kernel's "
                               "environment, to find its processes (ps e)", "text")
    course_state: str = _declare(
        "COURSE_STATE", "", "the instructor's course-state folder: submissions, graded notebooks, "
        "feedback (default: .course/ in the course root; --state)", "path")
    course_db_url: str = _declare(
        "COURSE_DB_URL", "", "the gradebook's SQLAlchemy URL, e.g. postgresql://user:password@host/db "
        "(default: sqlite in the state folder; --db-url)", "text")
    course_reports: str = _declare(
        "COURSE_REPORTS", "", "where export and report write the grade CSVs and the class report "
        "(default: the state folder; --reports)", "path")

    @classmethod
    def load(cls, environ=None, **flags) -> Settings:
        """The settings of ``environ`` (default: this process's environment), with ``flags`` (a
        command's own, by attribute name, read as the environment's text would be: ``False`` is
        off; ``None`` for a flag not given) over it; GradingError naming the first value that
        does not parse."""
        environ = os.environ if environ is None else environ
        unknown = set(flags) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"not settings: {', '.join(sorted(unknown))}")
        values = {}
        for f in fields(cls):
            s = f.metadata["setting"]
            given = flags.get(f.name)
            values[f.name] = s.parse(environ.get(s.name, "") if given is None else str(given))
        return cls(**values)

    @property
    def max_notebook_bytes(self) -> int:
        return int(self.max_notebook_mb * 2**20)


SETTINGS = [f.metadata["setting"] for f in fields(Settings)]


def without_password(text: str) -> str:
    """``text`` as it may be printed: the password of a URL in it (``scheme://user:password@``)
    replaced by ``***``."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", text)


def describe(environ=None) -> str:
    """The settings as ``python -m autograder settings`` prints them."""
    environ = os.environ if environ is None else environ
    lines = []
    for s in SETTINGS:
        now = without_password(environ.get(s.name, "").strip())
        value = f"{now!r}" if now else "unset"
        default = s.default or "(none)"
        lines.append(f"{s.name}  [default {default}; now {value}]\n    {s.help}")
    return "\n".join(lines)
