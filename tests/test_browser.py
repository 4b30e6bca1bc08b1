"""End to end in a real browser: JupyterLab started as `make lab` does, driven by Playwright with
Debian's Chromium (installed by tests/browser_setup.sh when missing; Playwright never downloads a
browser). Works on a scratch copy of the course so the checkout never gets outputs.
Screenshots land in artifacts/ (git-ignored)."""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import json
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = [pytest.mark.notebook, pytest.mark.slow, pytest.mark.xdist_group("browser")]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = ROOT / "artifacts"
TIMEOUT_MS = 240_000
NB = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"  # the notebook in the visible tab


def _ensure_browser():
    if not Path(CHROMIUM).exists():
        subprocess.run(["bash", str(ROOT / "tests" / "browser_setup.sh")], check=True)
    return pytest.importorskip("playwright.sync_api")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    copy = tmp_path_factory.mktemp("lab-course")
    for name in ("course", "exercises", "solutions"):
        shutil.copytree(ROOT / name, copy / name)
    shutil.copy(ROOT / "nbgrader_config.py", copy)
    port, token = _free_port(), "browser-test"
    # Test-only user settings: render every cell (JupyterLab's windowing would leave cells that
    # are scrolled away out of the DOM, so prompts and widgets could not be inspected) and no
    # news pop-up over the notebook.
    settings = copy / ".settings"
    for ext, name, values in [("notebook-extension", "tracker", {"windowingMode": "none"}),
                              ("apputils-extension", "notification", {"fetchNews": "false"})]:
        target = settings / "@jupyterlab" / ext / f"{name}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    env = dict(os.environ, COURSE_LAB_ROOT=str(copy), PYTHONPATH=str(ROOT),
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "lab.py"), "--no-browser",
                             f"--port={port}", "--ServerApp.ip=127.0.0.1",
                             f"--IdentityProvider.token={token}",
                             f"--LabApp.workspaces_dir={copy / '.workspaces'}",
                             f"--LabApp.user_settings_dir={settings}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    for _ in range(180):
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        os.killpg(proc.pid, 9)
        pytest.fail("JupyterLab did not start")
    yield base, token
    os.killpg(proc.pid, 15)
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def page(lab):
    sync_api = _ensure_browser()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.set_default_timeout(TIMEOUT_MS)
        yield pg
        browser.close()


def _kernel_idle(lab, path):
    """True once the notebook's session has a started kernel that is idle (asked of the server,
    not the page: the page's indicator reads idle before the kernel has connected)."""
    base, token = lab
    with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=10) as r:
        sessions = json.load(r)
    return any(s.get("path") == path and (s.get("kernel") or {}).get("execution_state") == "idle"
               for s in sessions)


def _open(page, lab, path):
    base, token = lab
    page.goto(f"{base}/lab/tree/{urllib.parse.quote(path)}?reset&token={token}")
    page.wait_for_selector(f"{NB} .jp-Cell")
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while not _kernel_idle(lab, path):
        assert time.monotonic() < deadline, f"the kernel of {path} never became idle"
        time.sleep(0.5)
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator[data-status='idle']")


_STARTED = (f"() => [...document.querySelectorAll('{NB} .jp-CodeCell .jp-InputPrompt')]"
            r".some(e => /\[(\d+|\*)\]/.test(e.textContent))")


def _run_all(page):
    for attempt in range(3):  # a click that lands before the kernel is wired up is lost: retry
        page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
        try:
            page.wait_for_function(_STARTED, timeout=30_000)
            break
        except Exception:
            if attempt == 2:
                raise
    page.wait_for_function(
        f"() => ![...document.querySelectorAll('{NB} .jp-InputPrompt')]"
        ".some(e => e.textContent.includes('*'))", timeout=TIMEOUT_MS)
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator[data-status='idle']")


def _unrun_code_cells(page):
    prompts = page.eval_on_selector_all(f"{NB} .jp-CodeCell .jp-InputPrompt",
                                        "els => els.map(e => e.textContent.trim())")
    return [i for i, t in enumerate(prompts) if not re.search(r"\[\d+\]", t)]


def test_chapter_runs_in_jupyterlab_with_a_plot(page, lab):
    _open(page, lab, "course/01_phases.ipynb")
    _run_all(page)
    page.screenshot(path=str(ARTIFACTS / "chapter01.png"), full_page=True)
    assert not _unrun_code_cells(page), "Run All stopped at an unexpected error"
    assert page.locator(f"{NB} .jp-RenderedImage img").count() >= 1, "no plot rendered"


def test_widget_changes_its_output(page, lab):
    _open(page, lab, "course/02_static_dynamic.ipynb")
    _run_all(page)
    assert not _unrun_code_cells(page), "Run All stopped at an unexpected error"
    widget = page.locator(f"{NB} .jupyter-widgets.widget-slider, {NB} .jupyter-widgets.widget-dropdown").first
    widget.wait_for(state="attached")
    widget.scroll_into_view_if_needed()
    area = widget.locator("xpath=ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' jp-Cell ')][1]")
    before = area.inner_text()
    handle = widget.locator(".noUi-handle, .slider-container input, select").first
    if widget.locator("select").count():
        options = widget.locator("option").all_inner_texts()
        widget.locator("select").select_option(label=options[-1])
    else:
        handle.focus()
        for _ in range(3):
            page.keyboard.press("ArrowRight")
    page.wait_for_function("([el, b]) => el.innerText !== b", arg=[area.element_handle(), before],
                           timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "widget.png"))
    assert area.inner_text() != before


def test_exercise_notebook_validate_and_formgrader(page, lab):
    _open(page, lab, "exercises/01_phases/01_phases.ipynb")
    _run_all(page)
    errors = page.locator(f"{NB} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert "not answered yet" in " ".join(errors.all_inner_texts()), \
        "the unanswered exercise should stop with its feedback"
    page.click(".validate-button")
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function("() => /fail|error|success|pass/i.test("
                           "document.querySelector('.jp-Dialog').innerText)", timeout=TIMEOUT_MS)
    page.screenshot(path=str(ARTIFACTS / "validate.png"))
    assert re.search(r"fail|error", dialog.inner_text(), re.I)
    page.keyboard.press("Escape")
    base, token = lab
    page.goto(f"{base}/formgrader?token={token}")
    page.wait_for_selector("text=01_phases")
    page.screenshot(path=str(ARTIFACTS / "formgrader.png"))
