"""Start JupyterLab on the course the way `make lab` does (extra arguments are passed through).

Serves the repository root (the formgrader needs the course root inside the server root),
with nbgrader's exchange in the git-ignored .course/exchange, JupyterLab's news toast off, and
--allow-root only as root. JupyterLab listens on its own default port, 8888 (the next free one
when taken); `scripts/lab.py --port 9999` picks another.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# COURSE_LAB_ROOT serves another copy of the course (the browser test uses a scratch copy).
ROOT = Path(os.environ.get("COURSE_LAB_ROOT") or Path(__file__).resolve().parent.parent).resolve()


# JupyterLab's "Would you like to receive official Jupyter news?" toast covers the notebook on a
# first start: no news and no update checks unless a person turns them on (as hub/workshop.py).
LAB_OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false",
                                                                   "checkForUpdates": False}}


def lab_settings(state: Path) -> Path:
    """A JupyterLab settings folder (LabApp.app_settings_dir) holding LAB_OVERRIDES."""
    folder = state / "lab-settings"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "overrides.json").write_text(json.dumps(LAB_OVERRIDES, indent=2) + "\n")
    return folder


def command(extra=()):
    state = ROOT / ".course"
    (state / "exchange").mkdir(parents=True, exist_ok=True)
    os.chmod(state / "exchange", 0o777)
    args = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={ROOT}",
            "--ServerApp.preferred_dir=" + str(ROOT / "course"),
            f"--LabApp.app_settings_dir={lab_settings(state)}"]
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
