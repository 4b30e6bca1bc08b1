"""The probe: before the first kernel of a process starts in a sandbox, a check that a kernel can
start there (:func:`check_sandbox`), and the refusal's words with the fix when it cannot."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..common.course import package_root
from .containment import Sandbox, refusal
from .environment import kernel_env
from .launch import LAUNCHER, limited
from .view import NAMESPACES_FIX, USERNS_FIX

_CHECKED: dict = {}


def check_sandbox(box: Sandbox, home: Path, workdir: Path, secrets=()) -> str:
    """'' if a kernel can start in ``box``: the sandbox uid, in its view of the files, imports
    ipykernel and the autograder package, writes its home, and cannot see ``secrets``; else
    what went wrong. A success is kept per process, temporary folder and ``bwrap`` (the view's
    allow-list is the same for every uid and notebook, so later notebooks reuse it); a failure
    is probed again by the next notebook (a busy machine's timeout refuses only its own)."""
    import subprocess

    key = (sys.executable, str(home.parent.parent.parent), box.mode, box.bwrap)
    if key in _CHECKED:
        return _CHECKED[key]
    probe = box.wrap([*LAUNCHER, "check", f"--home={home}", f"--package={package_root() / 'autograder'}",
                      *[f"--secret={s}" for s in secrets]])
    try:
        proc = subprocess.run(limited(probe, 60, box), stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=60, cwd=workdir, env=kernel_env(home))
        err = proc.stderr.decode(errors="replace").strip()
        err = err.splitlines()[-1] if err else f"exit status {proc.returncode}"
        problem = f"a kernel could not start in the sandbox ({err})" if proc.returncode else ""
    except (OSError, subprocess.SubprocessError) as exc:
        problem = f"the sandbox could not start: {exc}"
    if not problem:
        _CHECKED[key] = problem
    return problem


def probe_refusal(problem: str) -> str:
    """The refusal's words for a failed :func:`check_sandbox`, with the fix for its real cause:
    a file the sandbox uid cannot read (named, with its mode), a mount or namespace refused (the
    machine's permissions), or what the kernel's view lacks."""
    if "cannot read" in problem:
        fix = "make the files it names readable by other users"
    elif "bwrap" in problem or "bubblewrap" in problem or "not permitted" in problem:
        fix = NAMESPACES_FIX if os.geteuid() == 0 else USERNS_FIX
    else:
        fix = ("report it: the kernel's view (bwrap_command in autograder/sandbox/view.py) lacks "
               "a file the kernel needs; its error says which")
    return refusal(problem, fix)
