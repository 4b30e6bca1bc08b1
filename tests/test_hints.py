"""Progressive hints (autograder.hints): three per exercise, beside it in the source notebook,
carried by `make release`, offered one at a time after failed attempts (in the kernel and in
JupyterLab), shown in order from the terminal, counted in the instructor's export, and never
the code of a solution: hint 1 the idea and where its chapter teaches it, hint 2 what to look at in
one's own program, hint 3 the approach in words (issue 45)."""
from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import time

import nbformat
import pytest

from autograder import hints
from conftest import ASSIGNMENTS, ROOT, ipc_manager, released_notebook, solution_notebook, wrong_answers
from test_browser import ARTIFACTS, NB, _open, _run_all, _saved_after_run, browser_page, lab, page

__all__ = ["browser_page", "lab", "page"]  # the browser's fixtures, found by name in this module

COURSE_HEADINGS = {line.lstrip("#").strip()
                   for p in (ROOT / "course").glob("*.ipynb")
                   for c in nbformat.read(str(p), as_version=4).cells if c.cell_type == "markdown"
                   for line in c.source.splitlines() if line.startswith("#")}


def _answer_cells(path):
    return [c for c in nbformat.read(str(path), as_version=4).cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")]


def _solution_lines(cell):
    """The lines between BEGIN and END SOLUTION, stripped, that are code (no comments)."""
    inside, out = False, []
    for line in cell.source.splitlines():
        text = line.strip()
        if "### BEGIN SOLUTION" in text:
            inside = True
        elif "### END SOLUTION" in text:
            inside = False
        elif inside and text and not text.startswith(("#", '"""')):
            out.append(text.split("  #")[0].strip())
    return out


def test_no_hint_holds_code_of_a_solution_or_a_hidden_test():
    """No line of any solution (between BEGIN/END SOLUTION) and no line of a judge file appears in
    any hint of the course."""
    every_hint = [(a, gid, h) for a in ASSIGNMENTS for c in _answer_cells(solution_notebook(a))
                  for gid in [c.metadata["nbgrader"]["grade_id"]] for h in c.metadata["course"]["hints"]]
    code = {line for a in ASSIGNMENTS for c in _answer_cells(solution_notebook(a)) for line in _solution_lines(c)}
    for judge in (ROOT / "solutions").glob("*/judge*.py"):
        code |= {line.strip() for line in judge.read_text().splitlines()
                 if len(line.strip()) > 12 and not line.strip().startswith("#")}
    code = {line for line in code if len(line) > 6}
    assert len(code) > 100
    leaks = [(a, gid, line) for a, gid, h in every_hint for line in code if line in h]
    assert not leaks, leaks


def test_release_carries_the_hints_and_nothing_else_of_the_course_metadata(tmp_path):
    """`make release` (scripts/release.py's generate): each released answer cell keeps exactly its
    hints; no other cell keeps course metadata (no starting code, nothing of a test); the package
    ships the same hints. The committed exercises/ and visible_tests/ hold what release made."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import release
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    a = "03_purity"
    release.generate(ROOT, tmp_path / "exercises", only=[a], visible_dest=tmp_path / "visible")
    source = {c.metadata["nbgrader"]["grade_id"]: c.metadata["course"]["hints"] for c in _answer_cells(solution_notebook(a))}
    out = nbformat.read(str(tmp_path / "exercises" / a / f"{a}.ipynb"), as_version=4)
    kept = {c.metadata["nbgrader"]["grade_id"]: c.metadata["course"] for c in out.cells if "course" in c.metadata}
    assert kept == {gid: {"hints": h} for gid, h in source.items()}
    assert json.loads((tmp_path / "visible" / f"{a}.hints.json").read_text()) == source
    for b in ASSIGNMENTS:
        expected = hints.in_notebook(solution_notebook(b))
        assert hints.in_notebook(released_notebook(b)) == expected, f"exercises/{b}: run `make release`"
        assert hints.shipped(b) == expected, f"autograder/visible_tests/{b}.hints.json: run `make release`"


def _learner_copy(tmp_path, assignment="03_purity"):
    folder = tmp_path / assignment
    folder.mkdir(parents=True)
    shutil.copy(released_notebook(assignment), folder)
    return folder / f"{assignment}.ipynb"


def _hint_cli(notebook, exercise):
    return subprocess.run([sys.executable, "-m", "autograder", "hint", str(notebook), exercise],
                          capture_output=True, text=True, cwd=notebook.parent, timeout=120)


def test_cli_prints_the_hints_in_order_and_stops_after_the_third(tmp_path):
    nb = _learner_copy(tmp_path)
    mine = hints.in_notebook(nb)["adam_step"]
    for n in (1, 2, 3):
        proc = _hint_cli(nb, "adam_step")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == f"Hint {n} of 3 for `adam_step`: {mine[n - 1]}"
        assert hints.seen(nb) == {"adam_step": n}
    proc = _hint_cli(nb, "adam_step")
    assert proc.returncode == 0 and proc.stdout.startswith("You have seen all 3 hints for `adam_step`"), proc.stdout
    assert "Hint 4" not in proc.stdout and hints.seen(nb) == {"adam_step": 3}
    assert json.loads((nb.parent / ".hints.json").read_text()) == {"adam_step": 3}
    proc = _hint_cli(nb, "step")  # each exercise has its own count
    assert proc.stdout.startswith("Hint 1 of 3 for `step`") and hints.seen(nb) == {"adam_step": 3, "step": 1}
    proc = _hint_cli(nb, "no_such_exercise")
    assert proc.returncode == 2 and "no hints for 'no_such_exercise'" in proc.stderr and "adam_step" in proc.stderr


def test_seen_reads_the_file_and_the_hints_the_saved_outputs_show(tmp_path):
    nb = _learner_copy(tmp_path)
    saved = nbformat.read(str(nb), as_version=4)
    saved.cells[-1].outputs = [nbformat.v4.new_output(
        "display_data", data={"text/plain": "Hint 2 of 3 for `step`: ..."},
        metadata={"autograder": {"hint": {"exercise": "step", "n": 2}}})]
    nbformat.write(saved, str(nb))
    (nb.parent / ".hints.json").write_text(json.dumps({"step": 1, "set_diagonal": 3}))
    assert hints.seen(nb) == {"step": 2, "set_diagonal": 3}
    (nb.parent / ".hints.json").write_text("not json")
    assert hints.seen(nb) == {"step": 2}


async def _execute(nb, folder):
    from nbclient import NotebookClient

    client = NotebookClient(nb, km=ipc_manager(asynchronous=True), timeout=300, allow_errors=True,
                            resources={"metadata": {"path": str(folder)}})
    await client.async_execute()
    return nb


def _shown(cell):
    """(text of every output, whether a widget is among them)."""
    text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") + o.get("evalue", "")
                   for o in cell.outputs)
    widget = any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell.outputs)
    return text, widget


@pytest.mark.notebook
def test_a_failed_test_or_check_offers_the_next_hint_and_a_pass_none(tmp_path):
    """In a real kernel: the released notebook's setup cell, then `step`'s test cell after a known
    wrong answer (fails: hint 1 offered, with a button, the hint itself not shown), after the
    solution (passes: nothing offered), then "Check my answers" with the other exercises
    unanswered: each failed exercise's next hint is offered (set_diagonal's second, one hint
    already seen), `step`'s none."""
    a = "03_purity"
    folder = tmp_path / a
    folder.mkdir()
    (folder / ".hints.json").write_text(json.dumps({"set_diagonal": 1}))
    released = nbformat.read(str(released_notebook(a)), as_version=4)
    setup = next(c for c in released.cells if "import autograder as ag" in c.source)
    test_step = next(c for c in released.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_step")
    wrong = next(src for src, phrase, _ in wrong_answers(a)["step"] if "changed the global" in phrase)
    right = next(c.source for c in _answer_cells(solution_notebook(a)) if c.metadata["nbgrader"]["grade_id"] == "step")
    cells = [setup.source, wrong, test_step.source, right, test_step.source, released.cells[-1].source]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in cells])
    nb = asyncio.run(_execute(nb, folder))
    mine = hints.shipped(a)

    failed_text, failed_widget = _shown(nb.cells[2])
    assert "ExerciseFailure" in failed_text or "changed the global" in failed_text, failed_text
    assert "Hint 1 of 3 is ready" in failed_text and "`step`" in failed_text and failed_widget, failed_text
    assert mine["step"][0] not in failed_text, "a hint is offered, not shown, until the learner asks"
    assert "Hint 2" not in failed_text

    passed_text, passed_widget = _shown(nb.cells[4])
    assert passed_text.startswith("passed: step") and "Hint" not in passed_text and not passed_widget, passed_text

    check_text, check_widget = _shown(nb.cells[5])
    assert "1/4 exercises pass" in check_text, check_text
    offered = re.findall(r"Stuck on `(\w+)`\? Hint (\d) of 3 is ready", check_text)
    assert sorted(offered) == [("adam_step", "1"), ("normalize_batch", "1"), ("set_diagonal", "2")], check_text
    assert check_widget
    assert not any(h in check_text for hs in mine.values() for h in hs)
    assert json.loads((folder / ".hints.json").read_text()) == {"set_diagonal": 1}, "an offer is not a hint seen"


def test_export_shows_the_hints_each_learner_saw(tmp_path):
    """The instructor's export: a hints_seen column per exercise, from the submitted notebook's
    folder (.hints.json) and the hints its outputs show; points unchanged by hints."""
    import csv

    from autograder.instructor import Course, course_gradebook, export

    a = "03_purity"
    course = Course(root=ROOT, state=tmp_path / "state")
    with course_gradebook(course.db_url) as gb:
        gb.add_assignment(a)
        gb.add_notebook(a, a)
        for gid in ("test_step", "test_set_diagonal"):
            gb.add_grade_cell(gid, a, a, max_score=1, cell_type="code")
        for student in ("alice", "bob"):
            gb.add_student(student)
            gb.add_submission(a, student)
            for g in gb.find_submission_notebook(a, a, student).grades:
                g.auto_score = 1
        gb.db.commit()
    for student, state in (("alice", {"step": 3, "set_diagonal": 1}), ("bob", None)):
        folder = course.submitted / student / a
        folder.mkdir(parents=True)
        shutil.copy(released_notebook(a), folder)
        if state:
            (folder / ".hints.json").write_text(json.dumps(state))
    out = export(course, tmp_path / "grades.csv")
    rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(out.open())}
    assert {k: int(r["hints_seen"]) for k, r in rows.items()} == {
        ("alice", "set_diagonal"): 1, ("alice", "step"): 3, ("bob", "set_diagonal"): 0, ("bob", "step"): 0}
    assert all(r["points"] == r["max_points"] == "1" for r in rows.values())


# --------------------------------------------------------------------------- JupyterLab, Chromium

@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.slow_env
@pytest.mark.xdist_group("browser")
def test_in_jupyterlab_a_failing_check_offers_a_hint_and_its_button_shows_it(page, lab):
    """A learner opens the released 03_purity, runs all (nothing answered: "Check my answers"
    fails), and sees a "Show hint 1 of 3" button below the table; pressing it shows the hint in
    that cell and records it beside the notebook, and the saved notebook shows it too."""
    path = "exercises/03_purity/03_purity.ipynb"
    _, _, copy = lab
    state = copy / "exercises" / "03_purity" / ".hints.json"
    state.unlink(missing_ok=True)
    _open(page, lab, path)
    _run_all(page)
    last = page.locator(f"{NB} .jp-CodeCell").last
    last.locator(".jp-OutputArea-output table").wait_for(state="visible", timeout=60_000)
    button = last.locator("button", has_text="Show hint 1 of 3 for step")
    button.wait_for(state="visible", timeout=60_000)
    button.scroll_into_view_if_needed()
    assert "Stuck on `step`? Hint 1 of 3 is ready" in last.locator(".jp-OutputArea").inner_text()
    first = hints.shipped("03_purity")["step"][0]
    assert first not in last.locator(".jp-OutputArea").inner_text()
    button.click()
    try:
        page.wait_for_function("([el, want]) => el.innerText.includes(want)",
                               arg=[last.locator(".jp-OutputArea").element_handle(), first], timeout=60_000)
    except Exception:  # noqa: BLE001 - Playwright's timeout, said in the course's terms
        pytest.fail("pressing 'Show hint 1 of 3 for step' showed no hint: "
                    + last.locator(".jp-OutputArea").inner_text()[-1500:])
    page.screenshot(path=str(ARTIFACTS / "hint.png"))
    assert "Hint 1 of 3 for `step`" in last.locator(".jp-OutputArea").inner_text()
    deadline = time.monotonic() + 30
    while not state.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert json.loads(state.read_text()) == {"step": 1}
    saved = _saved_after_run(page, lab, path)  # elsewhere than beside its .hints.json:
    (copy / "saved.ipynb").write_text(json.dumps(saved))  # only its outputs can tell
    assert hints.seen(copy / "saved.ipynb") == {"step": 1}, "the saved notebook records the hint it shows"


# --------------------------------------------------------------------------- no hint or message gives the fix
# Issue 45, item 4: a hint teaches the idea (hint 1: the idea and where the chapter teaches it;
# hint 2: what to look at in one's own program; hint 3: the approach in words), and a failing
# test names the idea and what it observed. Neither gives a code token of the solution that the
# learner was not already shown: an API name, a keyword, an argument value.

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _solution_source(cell) -> str:
    return "\n".join(line for line in cell.source.splitlines() if "### BEGIN SOLUTION" not in line
                     and "### END SOLUTION" not in line)


def _api_tokens(code: str) -> set[str]:
    """What a solution asks of an API: attribute names, names it calls, keyword argument names,
    and the constants (strings, numbers) it passes as arguments. Its own local names are not
    tokens: a learner chooses those."""
    import ast

    tokens = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Attribute):
            tokens.add(node.attr)
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                tokens.add(node.func.id)
            tokens |= {kw.arg for kw in node.keywords if kw.arg}
            for arg in [*node.args, *(kw.value for kw in node.keywords)]:
                for const in ast.walk(arg):
                    if isinstance(const, ast.Constant) and isinstance(const.value, (str, int, float)) \
                            and not isinstance(const.value, bool) and " " not in str(const.value):
                        tokens.add(repr(const.value) if isinstance(const.value, str) else str(const.value))
    return tokens


def _shown_to_the_learner(text: str) -> set[str]:
    """Every identifier, number and quoted string of a text the learner already has."""
    return (set(_IDENT.findall(text)) | set(re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", text))
            | {repr(s) for s in re.findall(r"[\"']([^\"'\s]+)[\"']", text)})


def _code_spans(text: str) -> list[str]:
    """The parts of a text that are code: backticked spans, and outside them identifiers that
    only code writes (with an underscore, a dot, a call's parenthesis or a keyword's `=`).
    A chapter section named in curly quotes is a pointer to the chapter, not code."""
    text = re.sub("\u201c.*?\u201d", " ", text)
    spans = re.findall(r"`([^`]*)`", text)
    prose = re.sub(r"`[^`]*`", " ", text)
    spans += re.findall(r"\b[A-Za-z0-9]*_[A-Za-z0-9_]*\b", prose)
    spans += re.findall(r"\.([A-Za-z_]\w*)\b", prose)
    spans += re.findall(r"\b([A-Za-z_]\w*)\(", prose) + re.findall(r"\b([A-Za-z_]\w*)=", prose)
    return spans


def _leaks(text: str, forbidden: set[str]) -> list[str]:
    found = []
    for span in _code_spans(text):
        words = _shown_to_the_learner(span)
        found += sorted(words & forbidden)
    return found


def _exercises():
    """(assignment, grade_id, forbidden tokens, hints, prompt) of every exercise."""
    for a in ASSIGNMENTS:
        cells = nbformat.read(str(solution_notebook(a)), as_version=4).cells
        for i, cell in enumerate(cells):
            if not (cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution")):
                continue
            course = cell.metadata.get("course", {})
            prompt = "\n".join(c.source for c in cells[max(0, i - 2):i])  # its heading and given code
            shown = _shown_to_the_learner(course.get("starting_code", "") + "\n" + prompt)
            forbidden = _api_tokens(_solution_source(cell)) - shown
            yield a, cell.metadata["nbgrader"]["grade_id"], forbidden, course.get("hints", [])


def _messages(assignment: str) -> dict[str, list[str]]:
    """{exercise: the fixed text of every failure message its tests can give}: the string parts
    of each `fail(...)`, `ExerciseFailure(...)` and `why=` in its test cell and in the judge's
    functions that its `test_<name>` reaches."""
    import ast

    def texts(node):
        return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]

    def message_nodes(tree):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in ("fail", "ExerciseFailure"):
                    yield from node.args[1:]
                yield from (kw.value for kw in node.keywords if kw.arg in ("why", "detail"))

    out: dict[str, list[str]] = {}
    for cell in nbformat.read(str(solution_notebook(assignment)), as_version=4).cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if gid.startswith("test_"):
            source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith("%"))
            out.setdefault(gid[5:], []).extend(t for n in message_nodes(ast.parse(source)) for t in texts(n))
    for judge in sorted((ROOT / "solutions" / assignment).glob("judge*.py")):
        module = ast.parse(judge.read_text())
        functions = {f.name: f for f in module.body if isinstance(f, ast.FunctionDef)}
        # Module-level texts a message is built from (`fail(idea, detail + _HINT)`, a table of
        # mistakes and their messages): the strings of every module-level assignment that a
        # reached function names, the known answers (WRONG, RIGHT) aside.
        constants = {t.id: node.value for node in module.body if isinstance(node, ast.Assign)
                     for t in node.targets if isinstance(t, ast.Name) and t.id not in ("WRONG", "RIGHT")}
        for name, fn in functions.items():
            if not name.startswith("test_"):
                continue
            reached, todo = set(), [name]
            while todo:
                here = todo.pop()
                if here in reached:
                    continue
                reached.add(here)
                todo += [n.id for n in ast.walk(functions[here]) if isinstance(n, ast.Name) and n.id in functions]
            out.setdefault(name[5:], []).extend(t for f in reached for n in message_nodes(functions[f]) for t in texts(n))
            named = {n.id for f in reached for n in ast.walk(functions[f]) if isinstance(n, ast.Name)}
            out[name[5:]].extend(t for c in sorted(named & set(constants)) for t in texts(constants[c]))
    return out


def test_no_hint_gives_a_code_token_of_the_solution():
    """Hints teach the idea: none holds, as code, an API name, keyword or argument value that the
    solution uses and that neither the starting code nor the prompt shows."""
    leaks = [(a, gid, n + 1, _leaks(h, forbidden)) for a, gid, forbidden, mine in _exercises()
             for n, h in enumerate(mine)]
    assert not [leak for leak in leaks if leak[3]], [leak for leak in leaks if leak[3]]


def test_hints_go_idea_and_section_then_what_to_look_at_then_the_approach():
    """Hint 1 names the idea and where its chapter teaches it (a section of the exercise's own
    chapter, in curly quotes); hints 2 and 3 add no new chapter pointer but say what to look at
    and how to proceed."""
    for a, gid, _, mine in _exercises():
        assert len(mine) == 3, f"{a}/{gid}"
        titles = re.findall("\u201c(.*?)\u201d", mine[0])
        assert titles and all(t in COURSE_HEADINGS for t in titles), f"{a}/{gid}: hint 1 names {titles}"
        assert f"course/{a}.ipynb" in mine[0], f"{a}/{gid}: hint 1 must point to its own chapter"
        for later in mine[1:]:
            assert "course/" not in later, f"{a}/{gid}: only hint 1 points to the chapter"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_failure_message_gives_a_code_token_of_the_solution(assignment):
    """A failing test names the idea and what it observed, never the fix: no fixed text of a
    message that an exercise's tests can give holds, as code, a token that its solution uses and
    that neither its starting code nor its prompt shows."""
    forbidden = {gid: tokens for a, gid, tokens, _ in _exercises() if a == assignment}
    messages = _messages(assignment)
    assert set(forbidden) <= set(messages), f"{assignment}: exercises with no message found: " \
                                            f"{set(forbidden) - set(messages)}"
    leaks = [(gid, text, _leaks(text, tokens)) for gid, tokens in forbidden.items()
             for text in messages[gid] if _leaks(text, tokens)]
    assert not leaks, leaks
    orders = [(gid, text) for gid in forbidden for text in messages[gid] if re.search(r"\b[Uu]se `", text)]
    assert not orders, f"a message that tells the learner which code to use: {orders}"


@pytest.mark.parametrize("assignment, gid, text", [
    ("04_control_flow", "piecewise", "a Python `if` on a traced value: pick the branch with `lax.switch(k, BRANCHES, x)`"),
    ("01_phases", "runtime_print", "print it with `jax.debug.print` instead"),
    ("09_sharding", "explicit_matmul", "give the product out_sharding=P('data', None)"),
])
def test_the_code_token_check_refuses_a_text_that_gives_the_fix(assignment, gid, text):
    """The check above could fail: a text that names the solution's code is refused, and the texts
    a judge builds its messages from (module-level ones too) are read."""
    forbidden = next(tokens for a, g, tokens, _ in _exercises() if (a, g) == (assignment, gid))
    assert _leaks(text, forbidden), (text, sorted(forbidden))


def test_the_failure_messages_read_include_the_judges_module_level_texts():
    import ast

    judge = ROOT / "solutions" / "09_sharding" / "judge.py"
    hint = next(node.value.value if isinstance(node.value, ast.Constant) else ast.literal_eval(node.value)
                for node in ast.parse(judge.read_text()).body
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_HINT")
    assert hint in _messages("09_sharding")["explicit_matmul"]
