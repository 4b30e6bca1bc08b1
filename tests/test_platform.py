"""The platform: the interpreter `make` builds on, `make help`, and the linter."""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys

import pytest

from conftest import ROOT

FIND = ROOT / "scripts" / "find_python.sh"


def test_the_venv_runs_on_the_newest_python_jax_supports():
    import jax

    assert sys.version_info[:2] >= (3, 12)
    assert tuple(int(p) for p in jax.__version__.split(".")[:2]) >= (0, 12)


def test_find_python_prefers_3_13_then_3_12(tmp_path):
    """A fake PATH: only a 3.12 that runs and a 3.13 shim that does not (pyenv's when another
    version is selected) -> 3.12; both -> 3.13; neither -> exit 1 and a message saying what to
    install."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()

    def fake(name, works=True):
        """An interpreter that passes the finder's version check (exit 0), or a shim that fails."""
        path = bin_ / name
        path.write_text("#!/bin/sh\nexit 0\n" if works else "#!/bin/sh\necho 'pyenv: not selected' >&2\nexit 127\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)

    env = {"PATH": f"{bin_}:/usr/bin:/bin", "HOME": str(tmp_path), "PYENV_ROOT": str(tmp_path / "nopyenv")}

    def run():
        return subprocess.run(["/bin/sh", str(FIND)], capture_output=True, text=True, env=env)

    fake("python3.13", works=False)
    fake("python3.12")
    out = run()
    assert out.returncode == 0 and out.stdout.strip().endswith("bin/python3.12"), out
    fake("python3.13")
    out = run()
    assert out.returncode == 0 and out.stdout.strip().endswith("bin/python3.13"), out
    for name in ("python3.13", "python3.12"):
        (bin_ / name).unlink()
    if any(os.access(f"/usr/bin/python{v}", os.X_OK) for v in ("3.13", "3.12")):
        pytest.skip("this machine has a system python3.13/3.12, so 'neither' cannot be staged")
    out = run()
    assert out.returncode == 1 and not out.stdout
    assert "needs Python 3.13 or 3.12" in out.stderr and "pyenv install 3.13" in out.stderr


def test_make_help_lists_every_documented_target():
    text = (ROOT / "Makefile").read_text()
    documented = re.findall(r"^## ([a-z-]+):", text, flags=re.M)
    assert {"lab", "test", "lint", "release", "hub", "help"} <= set(documented)
    out = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "help"], capture_output=True,
                         text=True, check=True).stdout
    listed = re.findall(r"^  ([a-z-]+) ", out, flags=re.M)
    assert listed == documented, out
    assert "$${" not in out


def test_lint_is_clean():
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "ruff"), "check", "--no-cache", str(ROOT)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-4000:]
