"""`make lab`'s JupyterLab: serves the repo root with nbgrader (lab + server) and widgets enabled."""
from __future__ import annotations

import contextlib
import json
import re
import os
import socket
import subprocess
import sys
import urllib.request

import pytest

from conftest import ROOT, fill_answers, released_notebook, solution_notebook, wait_until_serving


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _lab(**env):
    """`make lab`'s server on a free port: (base URL, token); ``env``: variables added."""
    port, token = _free_port(), "course-test-token"
    cmd = [sys.executable, str(ROOT / "scripts" / "lab.py"), "--no-browser", f"--port={port}",
           "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}"]
    env = dict(os.environ, PATH=str(ROOT / ".venv" / "bin") + os.pathsep + os.environ.get("PATH", ""), **env)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, f"{base}/api/status?token={token}", 90, "jupyter lab",
                           lambda: proc.stderr.read().decode()[-2000:] if proc.poll() is not None else "")
        yield base, token
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def lab_server():
    with _lab() as server:
        yield server


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


def test_the_jupyter_news_toast_is_off_by_default(lab_server):
    """JupyterLab asks "Would you like to receive official Jupyter news?" in a toast over the
    notebook on a first start, unless its settings say no: `make lab` says no (a person may
    still turn news on in Settings)."""
    status, body = _get(*lab_server, "/lab/api/settings/@jupyterlab/apputils-extension:notification")
    schema = json.loads(body)["schema"]["properties"]
    assert schema["fetchNews"]["default"] == "false" and schema["checkForUpdates"]["default"] is False, schema


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


HOSTILE_HTML = "<script>window.PWNED=1</script><img src=x onerror=\"window.PWNED=2\">"
LIVE = re.compile(r"<script[^>]*>[^<]*PWNED|<img[^>]*onerror")  # a tag the browser would run


def test_the_formgrader_shows_no_script_of_a_learner(tmp_path):
    """A learner's HTML and JavaScript outputs and Markdown run in the formgrader, in the
    instructor's browser session, where they could change grades. The autograded notebook is
    saved sanitized (outputs and Markdown), and nbgrader_config.py has nbgrader render outputs
    sanitized too (for a notebook autograded otherwise: its formgrade template does not clean
    Markdown, so only outputs are checked there)."""
    import nbformat
    from nbgrader.api import Gradebook

    A = "01_phases"
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source
               for c in nbformat.read(str(solution_notebook(A)), as_version=4).cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    lms = tmp_path / "lms"
    nb = nbformat.read(str(fill_answers(released_notebook(A), answers, lms / "mallory_01.ipynb")), as_version=4)
    nb.cells[1:1] = [
        nbformat.v4.new_markdown_cell(f"my notes {HOSTILE_HTML}"),
        nbformat.v4.new_code_cell("from IPython.display import HTML, Javascript, display\n"
                                  f"display(HTML({HOSTILE_HTML!r}))\ndisplay(Javascript('window.PWNED=3'))")]
    nbformat.write(nb, str(lms / "mallory_01.ipynb"))
    state = tmp_path / "state"
    for args in (["collect", lms, "--assignment", A], ["autograde"]):
        proc = subprocess.run([sys.executable, "-m", "autograder", *map(str, args), "--state", str(state)],
                              capture_output=True, text=True, cwd=ROOT, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    graded = state / "autograded" / "mallory" / A / f"{A}.ipynb"
    saved = nbformat.read(str(graded), as_version=4)
    shown = json.dumps([c.source for c in saved.cells if c.cell_type == "markdown"]
                       + [o.get("data", {}) for c in saved.cells for o in c.get("outputs", [])])
    assert "PWNED" in shown and not LIVE.search(shown), LIVE.findall(shown)
    assert not any("application/javascript" in o.get("data", {}) for c in saved.cells for o in c.get("outputs", []))
    with Gradebook(f"sqlite:///{state / 'gradebook.db'}") as gb:
        submission = gb.find_submission_notebook(A, A, "mallory").id
    page = f"/formgrader/submissions/{submission}/"
    with _lab(COURSE_STATE=str(state)) as server:
        status, body = _get(*server, page)
        assert status == 200 and "my notes" in body and not LIVE.search(body), LIVE.findall(body)
        # the learner's outputs as nbgrader's own autograde would leave them
        saved.cells[2].outputs = [nbformat.v4.new_output("display_data", data={"text/html": HOSTILE_HTML})]
        nbformat.write(saved, str(graded))
        status, body = _get(*server, page)
        assert status == 200 and "PWNED" in body and not LIVE.search(body), LIVE.findall(body)

