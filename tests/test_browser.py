"""End to end in a real browser: JupyterLab started as `make lab` does, driven by Playwright with
Debian's Chromium (installed by tests/browser_setup.sh when missing; Playwright never downloads a
browser). Works on a scratch copy of the course so the checkout never gets outputs.

What is checked comes from what the page and the kernel produced, not from prompts alone: after
Run All each notebook is saved (in the scratch copy) and its outputs are read back from the
server, so an error in a cell that is not tagged ``raises-exception`` fails the test, and so
does a tagged cell that raised nothing. Screenshots (after every test, passed or failed) and the
server's log land in artifacts/ (git-ignored)."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, wait_until_serving

pytestmark = [pytest.mark.notebook, pytest.mark.slow, pytest.mark.slow_env, pytest.mark.xdist_group("browser")]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = ROOT / "artifacts"
TIMEOUT_MS = 240_000
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook in the visible tab
NB = f"{PANEL} .jp-Notebook"
RAISES = "raises-exception"


def _playwright():
    """Playwright is a pinned requirement of the course: missing, it is a failure, not a skip."""
    try:
        from playwright import sync_api
    except ImportError as exc:
        pytest.fail(f"Playwright is not installed ({exc}); it is pinned in requirements.txt: "
                    "run `make env` (or pip install -r requirements.txt)", pytrace=False)
    return sync_api


def _ensure_browser():
    if not Path(CHROMIUM).exists():
        subprocess.run(["bash", str(ROOT / "tests" / "browser_setup.sh")], check=True)
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing and tests/browser_setup.sh did not install it"


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
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "jupyterlab.log", "w")  # noqa: SIM115 - open while the server runs
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "lab.py"), "--no-browser",
                             f"--port={port}", "--ServerApp.ip=127.0.0.1",
                             f"--IdentityProvider.token={token}",
                             f"--LabApp.workspaces_dir={copy / '.workspaces'}",
                             f"--LabApp.user_settings_dir={settings}"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, f"{base}/api/status?token={token}", 120, "JupyterLab",
                           lambda: f"see {ARTIFACTS / 'jupyterlab.log'}")
        yield base, token, copy
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def browser_page():
    sync_api = _playwright()
    _ensure_browser()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            pg = browser.new_page(viewport={"width": 1400, "height": 1000})
            pg.set_default_timeout(TIMEOUT_MS)
            yield pg
        finally:
            browser.close()


@pytest.fixture
def page(browser_page, request):
    """The shared page; whatever happens in the test, a screenshot of the end state is kept."""
    try:
        yield browser_page
    finally:
        try:
            browser_page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True,
                                    timeout=30_000)
        except Exception as exc:  # noqa: BLE001 - a failed screenshot must not hide the test's result
            print(f"no screenshot for {request.node.name}: {exc}", file=sys.stderr)


def _api(lab, path):
    base, token, _ = lab
    with urllib.request.urlopen(f"{base}/api/{path}{'&' if '?' in path else '?'}token={token}",
                                timeout=30) as r:
        return json.load(r)


def _kernel_idle(lab, path):
    """True once the notebook's session has a started kernel that is idle (asked of the server,
    not the page: the page's indicator reads idle before the kernel has connected)."""
    return any(s.get("path") == path and (s.get("kernel") or {}).get("execution_state") == "idle"
               for s in _api(lab, "sessions"))


def _open(page, lab, path):
    base, token, _ = lab
    page.goto(f"{base}/lab/tree/{urllib.parse.quote(path)}?reset&token={token}")
    page.wait_for_selector(f"{NB} .jp-Cell")
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while not _kernel_idle(lab, path):
        assert time.monotonic() < deadline, f"the kernel of {path} never became idle"
        time.sleep(0.5)
    page.wait_for_selector(f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']")


_STARTED = (f"() => [...document.querySelectorAll('{NB} .jp-CodeCell .jp-InputPrompt')]"
            r".some(e => /\[(\d+|\*)\]/.test(e.textContent))")


def _menu(page, menu, item):
    page.click(f".lm-MenuBar-itemLabel:text-is('{menu}')")
    page.click(f".lm-Menu-itemLabel:text-is('{item}')")


def _run_all(page):
    for attempt in range(3):  # a click that lands before the kernel is wired up is lost: retry
        _menu(page, "Run", "Run All Cells")
        try:
            page.wait_for_function(_STARTED, timeout=30_000)
            break
        except Exception:
            if attempt == 2:
                raise
    page.wait_for_function(
        f"() => ![...document.querySelectorAll('{NB} .jp-InputPrompt')]"
        ".some(e => e.textContent.includes('*'))", timeout=TIMEOUT_MS)
    page.wait_for_selector(f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']")


def _unrun_code_cells(page):
    prompts = page.eval_on_selector_all(f"{NB} .jp-CodeCell .jp-InputPrompt",
                                        "els => els.map(e => e.textContent.trim())")
    return [i for i, t in enumerate(prompts) if not re.search(r"\[\d+\]", t)]


def _read(path):
    """The notebook file as the checkout has it (the browser works on a copy of it)."""
    return nbformat.read(str(ROOT / path), as_version=4)


_TAB = ".lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-current"


def _saved_after_run(page, lab, path):
    """Save the notebook from the page and read it back from the server: the outputs the browser
    received, cell by cell. (Read only once the save is done: a read during the server's atomic
    write would find a half-written file and make the server restore the old one.)"""
    page.wait_for_selector(f"{_TAB}.jp-mod-dirty", timeout=30_000)  # Run All changed it
    _menu(page, "File", "Save Notebook")
    page.wait_for_selector(f"{_TAB}:not(.jp-mod-dirty)", timeout=60_000)
    model = _api(lab, f"contents/{urllib.parse.quote(path)}?content=1&type=notebook")
    return nbformat.from_dict(model["content"])


def _check_cells_ran_and_errors(saved, path, *, must_raise):
    """Compare the saved run with the notebook file's tags: every code cell ran; no error output in
    an untagged cell; an error in every tagged cell for which ``must_raise(cell)`` holds."""
    original = _read(path)
    assert [c.cell_type for c in saved.cells] == [c.cell_type for c in original.cells], \
        f"the notebook {path} in the browser does not have the file's cells"
    unrun, unexpected, silent = [], [], []
    for i, (cell, source) in enumerate(zip(saved.cells, original.cells)):
        if cell.cell_type != "code":
            continue
        if cell.get("execution_count") is None:
            unrun.append(i)
        errors = [o for o in cell.outputs if o.output_type == "error"]
        tagged = RAISES in source.metadata.get("tags", [])
        if errors and not tagged:
            unexpected.append(f"cell {i}: {errors[0].get('ename')}: {errors[0].get('evalue')}")
        if tagged and must_raise(source) and not errors:
            silent.append(i)
    assert not unrun, f"Run All did not run code cells {unrun} of {path}"
    assert not unexpected, f"unexpected errors in {path}: " + "; ".join(unexpected)
    assert not silent, f"cells {silent} of {path} are tagged {RAISES} but raised nothing"


def test_chapter_runs_in_jupyterlab_with_a_plot(page, lab):
    path = "course/01_phases.ipynb"
    _open(page, lab, path)
    _run_all(page)
    assert not _unrun_code_cells(page), "Run All stopped before the end"
    _check_cells_ran_and_errors(_saved_after_run(page, lab, path), path, must_raise=lambda c: True)
    tagged = [i for i, c in enumerate(_read(path).cells)
              if c.cell_type == "code" and RAISES in c.metadata.get("tags", [])]
    cells = page.locator(f"{NB} .jp-Cell")
    assert cells.count() == len(_read(path).cells)
    for i in tagged:  # and the page shows each expected error in its cell
        assert cells.nth(i).locator(
            ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count(), \
            f"cell {i} raised, but the page shows no traceback"
    assert page.locator(f"{NB} .jp-RenderedImage img").count() >= 1, "no plot rendered"


_STATUS = re.compile(r"length=(\d+), n=(\d+): (compiled|cache hit); (\d+) calls, (\d+) compiles so far")


def test_widget_changes_its_output(page, lab):
    """Course 02: moving the `length` slider runs its callback, which rewrites the status widget
    with the new length, one more call and (a new shape) one more compile."""
    path = "course/02_static_dynamic.ipynb"
    _open(page, lab, path)
    _run_all(page)
    assert not _unrun_code_cells(page), "Run All stopped before the end"
    slider = page.locator(f"{NB} .widget-slider:has(.widget-label:text-is('length'))")
    slider.wait_for(state="attached")
    slider.scroll_into_view_if_needed()
    box = slider.locator("xpath=..")  # the VBox of the two sliders and the status they drive
    # an HTML widget, or an Output widget the callback prints into (the chapter's own choice)
    status = box.locator(":scope > .widget-html .widget-html-content, :scope > .widget-output")
    assert status.count() == 1, "the status widget of the `length` slider is missing"
    before = _STATUS.search(status.inner_text())
    assert before, f"the status widget shows {status.inner_text()!r}"
    readout = slider.locator(".widget-readout")
    assert readout.inner_text().strip() == before.group(1), "the status does not match the slider"
    length_before = int(before.group(1))
    assert length_before < 8, "the `length` slider is already at its maximum"

    slider.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("([el, b]) => el.innerText.trim() !== b",
                           arg=[readout.element_handle(), before.group(1)], timeout=30_000)
    new_length = int(readout.inner_text().strip())
    assert new_length == length_before + 1
    try:
        page.wait_for_function("([el, want]) => el.innerText.includes(want)",
                               arg=[status.element_handle(), f"length={new_length},"], timeout=60_000)
    except Exception:  # noqa: BLE001 - Playwright's timeout, said in the course's terms
        pytest.fail(f"the slider moved to length={new_length} but its callback's status widget "
                    f"still shows {status.inner_text()!r}")
    after = _STATUS.search(status.inner_text())
    page.screenshot(path=str(ARTIFACTS / "widget.png"))
    assert after, f"the status widget shows {status.inner_text()!r}"
    assert int(after.group(1)) == new_length and after.group(2) == before.group(2)
    assert int(after.group(4)) == int(before.group(4)) + 1, "the callback should have run once more"
    assert after.group(3) == "compiled" and int(after.group(5)) == int(before.group(5)) + 1, \
        "a length never seen before is a new shape: one more compile"


def test_exercise_notebook_runs_to_the_end_validate_and_formgrader(page, lab):
    path = "exercises/01_phases/01_phases.ipynb"
    tests = [c for c in _read(path).cells if c.metadata.get("nbgrader", {}).get("grade")]
    _open(page, lab, path)
    _run_all(page)
    assert not _unrun_code_cells(page), "Run All stopped before the end"
    saved = _saved_after_run(page, lab, path)
    # Unanswered exercises: every visible test fails (its cell is tagged, so Run All goes on).
    _check_cells_ran_and_errors(saved, path,
                                must_raise=lambda c: c.metadata.get("nbgrader", {}).get("grade"))
    errors = page.locator(f"{NB} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert "not answered yet" in " ".join(errors.all_inner_texts()), \
        "the unanswered exercise should fail with its feedback"
    # ... and the last cell, "Check my answers", shows its table: nothing passes yet.
    last = page.locator(f"{NB} .jp-CodeCell").last
    table = last.locator(".jp-OutputArea-output table")
    table.wait_for(state="visible", timeout=30_000)
    table.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "exercise01.png"))
    summary = f"0/{len(tests)} exercises pass their visible tests"
    assert summary in last.locator(".jp-OutputArea").inner_text()
    rows = table.locator("tr").all_inner_texts()[1:]
    assert len(rows) == len(tests) and all("failed" in r for r in rows), rows
    assert any(summary in (o.get("data", {}).get("text/html", "")) for o in saved.cells[-1].outputs)

    page.click(".validate-button")
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function("() => /fail|error|success|pass/i.test("
                           "document.querySelector('.jp-Dialog').innerText)", timeout=TIMEOUT_MS)
    page.screenshot(path=str(ARTIFACTS / "validate.png"))
    assert re.search(r"fail|error", dialog.inner_text(), re.I)
    page.keyboard.press("Escape")
    base, token, _ = lab
    page.goto(f"{base}/formgrader?token={token}")
    page.wait_for_selector("text=01_phases")
    page.screenshot(path=str(ARTIFACTS / "formgrader.png"))
