"""notebook_runner: chapters executed headless side by side, under load, without a stall.

A stall (nbclient issue 312, explained in notebook_runner's docstring) is a cell the kernel has
finished while nbclient has not read its reply: the reply then waits unread until the cell's
timeout. Each test measures, for every executed cell, how long the reply had been sent when
nbclient received it (the reply's header date against the clock at ``on_cell_executed``; kernel
and client share the machine's clock). Unread for STALL_S seconds is a stall; with the runner a
reply waits at most notebook_runner.POLL (0.1 s) plus the machine's scheduling delays."""
from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import nbformat
import pytest

from conftest import COURSE_NOTEBOOKS, import_script

execute_notebook = import_script("notebook_runner").execute_notebook

pytestmark = [pytest.mark.notebook, pytest.mark.slow]

COPIES = 3        # executions of the slider notebook at once
SIDE_BY_SIDE = 2  # chapters executed at once, each beside another one (with one core busy: about 2 minutes on 2 cores)
STALL_S = 20      # a reply unread this long is a stall (a healthy one: well under a second)
TIMEOUT_S = 120   # a cell's limit in these runs: a stall lasts this long before nbclient reads its reply


def _reply_delays(nb, cwd) -> dict:
    """Execute ``nb`` with notebook_runner: ``{cell index: seconds its reply waited unread}``."""
    delays = {}

    def on_cell_executed(cell, cell_index, execute_reply):
        sent = execute_reply["header"]["date"]
        delays[cell_index] = (datetime.now(timezone.utc) - sent).total_seconds()

    execute_notebook(nb, cwd, timeout=TIMEOUT_S, on_cell_executed=on_cell_executed)
    return delays


@pytest.fixture
def busy_core():
    """One core kept busy (``yes`` into /dev/null) while the test runs."""
    hog = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL)
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


def _stalls(runs) -> dict:
    """``{(name, copy): {cell: delay}}`` of the replies that waited STALL_S or longer."""
    found = {}
    for key, delays in runs:
        slow = {cell: round(d, 1) for cell, d in delays.items() if d >= STALL_S}
        if slow:
            found[key] = slow
    return found


def _slider_notebook(moves: int = 40):
    """A slider whose callback prints into an Output widget after clear_output(wait=True), as
    chapter 02's does, moved by ``moves`` cells: the pattern that stalled."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import ipywidgets as widgets\nfrom IPython.display import display\n"
        "slider, status = widgets.IntSlider(), widgets.Output()\n\n"
        "def update(change=None):\n    status.clear_output(wait=True)\n    with status:\n"
        "        print('value', slider.value)\n\n"
        "slider.observe(update, names='value')\ndisplay(widgets.VBox([slider, status]))\nupdate()")]
    nb.cells += [nbformat.v4.new_code_cell(f"for v in range(5):\n    slider.value = ({k} + v) % 100")
                 for k in range(moves)]
    return nb


def test_slider_cells_side_by_side_never_wait_for_their_reply(tmp_path, busy_core):
    """Plain nbclient stalled on about one cell in ten of this notebook run three at once."""
    with ThreadPoolExecutor(COPIES) as pool:
        runs = list(pool.map(lambda i: (("slider notebook", i), _reply_delays(_slider_notebook(), tmp_path)),
                             range(COPIES)))
    assert all(len(delays) == 41 for _, delays in runs), "a cell was not executed"
    assert not _stalls(runs), f"replies unread for {STALL_S} s or more: {_stalls(runs)}"


# on test_course_notebooks' worker, after it: the chapters' measured claims are not timed beside these runs
@pytest.mark.xdist_group("course_notebooks")
def test_every_chapter_side_by_side_under_load_without_a_stall(busy_core):
    """Every chapter executed beside another one, SIDE_BY_SIDE at once (one core busy besides): no
    cell's reply waits unread, and every chapter runs to the end without an error."""
    def run(path):
        return (path.stem, 0), _reply_delays(nbformat.read(str(path), as_version=4), path.parent)

    with ThreadPoolExecutor(SIDE_BY_SIDE) as pool:
        runs = list(pool.map(run, COURSE_NOTEBOOKS))   # raises the first CellExecutionError, if any
    assert len(runs) == len(COURSE_NOTEBOOKS)
    assert not _stalls(runs), f"replies unread for {STALL_S} s or more: {_stalls(runs)}"
