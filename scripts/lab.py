"""Start JupyterLab on the course the way `make lab` does (extra arguments are passed through).

Serves the repository root (the formgrader needs the course root inside the server root),
with nbgrader's exchange in the git-ignored .course/exchange, and --allow-root only as root.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

# COURSE_LAB_ROOT serves another copy of the course (the browser test uses a scratch copy).
ROOT = Path(os.environ.get("COURSE_LAB_ROOT") or Path(__file__).resolve().parent.parent).resolve()


def command(extra=()):
    state = ROOT / ".course"
    (state / "exchange").mkdir(parents=True, exist_ok=True)
    os.chmod(state / "exchange", 0o777)
    args = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={ROOT}",
            "--ServerApp.preferred_dir=" + str(ROOT / "course")]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--allow-root")
    return args + list(extra)


def main() -> None:
    os.chdir(ROOT)  # nbgrader reads nbgrader_config.py from the server's working directory
    bindir = str(Path(sys.executable).parent)
    os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    args = command(sys.argv[1:])
    os.execv(args[0], args)


if __name__ == "__main__":
    main()
