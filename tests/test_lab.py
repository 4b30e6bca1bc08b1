"""`make lab`'s JupyterLab: serves the repo root with nbgrader (lab + server) and widgets enabled."""
from __future__ import annotations

import json
import re
import os
import socket
import subprocess
import sys
import urllib.request

import pytest

from conftest import ROOT, wait_until_serving


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab_server():
    port, token = _free_port(), "course-test-token"
    cmd = [sys.executable, str(ROOT / "scripts" / "lab.py"), "--no-browser", f"--port={port}",
           "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}"]
    env = dict(os.environ, PATH=str(ROOT / ".venv" / "bin") + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, f"{base}/api/status?token={token}", 90, "jupyter lab",
                           lambda: proc.stderr.read().decode()[-2000:] if proc.poll() is not None else "")
    except BaseException:
        proc.kill()
        raise
    yield base, token
    os.killpg(proc.pid, 15)
    proc.wait(timeout=30)


def _get(base, token, path):
    with urllib.request.urlopen(f"{base}{path}{'&' if '?' in path else '?'}token={token}", timeout=20) as r:
        return r.status, r.read().decode()


def test_lab_serves_the_repository_root(lab_server):
    status, body = _get(*lab_server, "/api/contents/")
    names = {item["name"] for item in json.loads(body)["content"]}
    assert {"course", "exercises", "solutions", "nbgrader_config.py"} <= names


def test_lab_extensions_enabled(lab_server):
    status, body = _get(*lab_server, "/lab/api/extensions")
    exts = {e["name"]: e for e in json.loads(body)}  # names come back normalised: no "@", "/" -> "-"
    for name in ("jupyter-nbgrader", "jupyter-widgets-jupyterlab-manager", "jupyterlab-rise"):
        assert name in exts and exts[name]["enabled"], f"{name} is not enabled"
        assert exts[name].get("status", "ok") == "ok", f"{name}: {exts[name].get('status')}"


def test_a_chapter_opens_as_a_slideshow(lab_server):
    """RISE's server extension serves the chapter as a reveal.js page (what Alt-R opens)."""
    status, body = _get(*lab_server, "/rise/course/01_phases.ipynb")
    assert status == 200
    config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                  body, re.S).group(1))
    assert config["appName"] == "Rise" and config["notebookPath"].strip("/") == "course/01_phases.ipynb", config
    loaded = {e["name"] for e in config["federated_extensions"]}
    assert "jupyterlab-rise" in loaded, loaded


def test_nbgrader_server_extensions_respond(lab_server):
    status, body = _get(*lab_server, "/formgrader/api/assignments")
    assert status == 200
    assert "01_phases" in body
    assert (ROOT / ".course" / "exchange").is_dir()
