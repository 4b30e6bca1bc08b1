"""Progressive hints: three per exercise, offered one at a time after failed attempts.

The hints are written beside their exercise, in the answer cell's metadata of the source
notebook (``solutions/NN_slug/NN_slug.ipynb``, ``metadata.course.hints``): 1. the idea and where
the chapter teaches it (its section), 2. what to look at in one's own program (a jaxpr, a compile
count, an error, a trace), 3. the approach, in words; never the code of a fix, an argument value or
the function to call (tests/test_hints.py refuses a code token of the solution the learner was
not shown).
``make release`` keeps them in the released answer cell and ships them with the package
(``autograder/visible_tests/NN_slug.hints.json``, beside the visible tests), because a learner's
kernel cannot read its own notebook (on Colab there is no file to read).

When a hint is offered. ``import autograder`` in an IPython kernel (JupyterLab, Colab) registers
:func:`after_cell` to run after every cell. After a failed run of an exercise's visible test
cell (recognised by its source: the same code as the shipped visible test), or of "Check my
answers" (:mod:`autograder.selfcheck` notes which exercises failed), the *next* hint of each
failed exercise is offered: a printed line, and where ipywidgets is installed a button "Show
hint 2 of 3" that replaces the line with the hint. Never more than the next one; a pass offers
nothing. From a terminal, ``python -m autograder hint NOTEBOOK EXERCISE`` shows the next one.

Where "how many hints seen" is kept. The kernel cannot write the notebook file (the frontend
owns it and saves over it), so the count lives in a small JSON file beside the notebook,
``.hints.json`` (``{exercise: hints seen}``): the kernel writes the one in its working folder,
which JupyterLab sets to the notebook's, the terminal command the one beside NOTEBOOK, and
nbgrader's submit copies the folder with it. A hint shown in the notebook is also an output
with the count in its metadata (``{"autograder": {"hint": {"exercise": ..., "n": ...}}}``),
which the saved notebook keeps: :func:`seen` reads both, so a notebook that travels without
its folder still says how many hints its learner saw. Hints never touch a grade: the grader's
judge reads none of this; the instructor's export shows the counts beside the points.
"""
from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

STATE_FILE = ".hints.json"
HINTS_SUFFIX = ".hints.json"  # autograder/visible_tests/<assignment>.hints.json
MARK = "autograder"  # the key of a shown hint's output metadata

_failed_in_check: list = []  # (assignment, exercise) pairs "Check my answers" just failed
_hooked = False  # after_cell runs after every cell of this process's IPython kernel


# --------------------------------------------------------------------------- the hints

def shipped(assignment: str) -> dict:
    """``{exercise: [hint, hint, hint]}`` of an assignment, as ``make release`` shipped them with
    the package (``{}`` when it shipped none)."""
    from importlib import resources

    try:
        text = resources.files(__package__).joinpath("visible_tests", assignment + HINTS_SUFFIX).read_text()
    except (FileNotFoundError, OSError):
        return {}
    return json.loads(text)


def in_notebook(notebook) -> dict:
    """``{exercise: [hints]}`` from the answer cells of a notebook (a path or a parsed dict)."""
    nb = notebook if isinstance(notebook, dict) else json.loads(Path(notebook).read_text(encoding="utf-8"))
    out = {}
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {})
        hints = meta.get("course", {}).get("hints")
        if hints and meta.get("nbgrader", {}).get("solution"):
            out[meta["nbgrader"]["grade_id"]] = list(hints)
    return out


# --------------------------------------------------------------------------- what was seen

def _read_state(folder: Path) -> dict:
    try:
        data = json.loads((Path(folder) / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and _count(v)} if isinstance(data, dict) else {}


def _count(n) -> bool:
    """``n`` is a number of hints seen: a whole number above 0 (not a bool)."""
    return isinstance(n, int) and not isinstance(n, bool) and n > 0


def _record(folder: Path, exercise: str, n: int) -> None:
    """Hint ``n`` of ``exercise`` seen: the count in ``folder/.hints.json`` rises to ``n``. A
    folder that cannot be written keeps no count (the hint is shown all the same)."""
    state = _read_state(folder)
    if state.get(exercise, 0) >= n:
        return
    state[exercise] = n
    path = Path(folder) / STATE_FILE
    tmp = path.with_name(f"{STATE_FILE}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def seen(notebook_path) -> dict:
    """``{exercise: number of hints seen}`` for a learner's notebook: the larger of the count in
    the ``.hints.json`` beside it and the hints its saved outputs show. Both are the learner's
    files: whatever they hold (a notebook that is no JSON, a mark of another shape), this reads
    what it can and never raises."""
    path = Path(notebook_path)
    out = dict(_read_state(path.parent))
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return out
    cells = nb.get("cells") if isinstance(nb, dict) else None
    for cell in cells if isinstance(cells, list) else []:
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        for output in outputs if isinstance(outputs, list) else []:
            mark = _get(_get(_get(output, "metadata"), MARK), "hint")
            exercise, n = _get(mark, "exercise"), _get(mark, "n")
            if isinstance(exercise, str) and _count(n):
                out[exercise] = max(out.get(exercise, 0), n)
    return out


def _get(d, key):
    return d.get(key) if isinstance(d, dict) else None


def _line(exercise: str, n: int, hints: list) -> str:
    return f"Hint {n} of {len(hints)} for `{exercise}`: {hints[n - 1]}"


# --------------------------------------------------------------------------- the terminal

def find_notebook(given) -> Path:
    """The notebook ``given`` names: that path when it exists; else, for a name typed in another
    folder (``03_purity.ipynb`` or ``03_purity``), the notebook of that name where a learner
    keeps it, looked for in this order: the current folder; their home's
    ``<course>/<assignment>/`` (nbgrader's fetch) or ``<assignment>/``; the checkout's
    ``exercises/<assignment>/``. Raises ValueError naming where it looked, or the notebooks it
    found when one place holds several."""
    path = Path(given).expanduser()
    if path.exists():
        if not path.is_file():  # a folder, a pipe, a device: reading one could block for ever
            raise ValueError(f"{given} is not a notebook file")
        return path
    name = path.name if path.suffix == ".ipynb" else f"{path.name}.ipynb"
    stem = name.removesuffix(".ipynb")
    home = Path.home()
    checkout = Path(__file__).resolve().parent.parent  # the folder holding the package
    tiers = [[Path.cwd()], [home / stem, *sorted(home.glob(f"*/{stem}"))], [checkout / "exercises" / stem]]
    for tier in tiers:
        found = []
        for folder in tier:
            candidate = folder / name
            if candidate.is_file() and candidate.resolve() not in {f.resolve() for f in found}:
                found.append(candidate)
        if len(found) == 1:
            return found[0]
        if found:
            raise ValueError(f"several notebooks named {name}: " + ", ".join(map(str, found))
                             + "; give the one you mean by its path")
    raise ValueError(f"no notebook {given} here, in {home}/*/{stem}/ or in {tiers[-1][0]}: give its path")


def next_hint(notebook, exercise: str) -> tuple[int, str]:
    """Show the next hint of ``exercise`` in ``notebook`` (a path, or a name
    :func:`find_notebook` finds): ``(n, text)``, recorded beside the notebook; when all are
    seen, ``(0, text)`` saying so and repeating them. Raises ValueError for a notebook it cannot
    find or read, or an exercise the notebook has no hints for."""
    notebook = find_notebook(notebook)
    try:
        hints = in_notebook(notebook)
    except (OSError, ValueError, AttributeError, TypeError, RecursionError) as exc:
        raise ValueError(f"cannot read {notebook}: {exc}") from None
    hints = hints or shipped(notebook.resolve().parent.name)
    if exercise not in hints:
        known = ", ".join(sorted(hints)) or "none"
        raise ValueError(f"no hints for {exercise!r} in {notebook} (exercises with hints: {known})")
    mine = hints[exercise]
    n = seen(notebook).get(exercise, 0) + 1
    if n > len(mine):
        shown = "\n".join(_line(exercise, i, mine) for i in range(1, len(mine) + 1))
        return 0, f"You have seen all {len(mine)} hints for `{exercise}`:\n{shown}"
    _record(notebook.resolve().parent, exercise, n)
    return n, _line(exercise, n, mine)


def add_parser(sub):
    """The ``hint`` subcommand of ``python -m autograder``."""
    p = sub.add_parser("hint", help="the next hint for an exercise (three per exercise, one at a time)",
                       description="Print the next hint for EXERCISE of NOTEBOOK (first the idea, "
                                   "then the chapter's section, then the approach) and record it in "
                                   f"{STATE_FILE} beside the notebook. Hints never count against the grade.")
    p.add_argument("notebook", metavar="NOTEBOOK", help="its path, or its name (03_purity.ipynb) from any "
                                                         "folder: found in exercises/ or nbgrader's fetched folder")
    p.add_argument("exercise", metavar="EXERCISE", help="the exercise's name, e.g. step")
    return p


def hint_command(args) -> int:
    try:
        _, text = next_hint(args.notebook, args.exercise)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(text)
    return 0


# --------------------------------------------------------------------------- in the notebook

def note_failures(assignment: str, exercises) -> None:
    """"Check my answers" failed these exercises: offer their next hints after the cell (in an
    IPython kernel; elsewhere nothing is offered)."""
    if _hooked:
        _failed_in_check.extend((assignment, e) for e in exercises)


def _visible_tests() -> dict:
    """``{visible test source: (assignment, exercise)}`` of every shipped assignment."""
    from importlib import resources

    out = {}
    folder = resources.files(__package__).joinpath("visible_tests")
    for entry in folder.iterdir():
        if entry.name.endswith(".json") and not entry.name.endswith(HINTS_SUFFIX):
            for exercise, source in json.loads(entry.read_text()).items():
                out[source] = (entry.name.removesuffix(".json"), exercise)
    return out


def offer(assignment: str, exercise: str, folder=".") -> bool:
    """Offer the next hint of ``exercise``: a line, and a button that shows it where ipywidgets
    is installed (without ipywidgets the line says how to see it from a terminal). False when
    there is none to offer (no hints shipped, or all seen)."""
    from IPython.display import display, update_display

    hints = shipped(assignment).get(exercise)
    if not hints:
        return False
    n = _read_state(Path(folder)).get(exercise, 0) + 1
    if n > len(hints):
        return False
    here = Path(folder).resolve() / f"{assignment}.ipynb"  # the notebook's own folder (JupyterLab's cwd)
    terminal = f"python -m autograder hint {shlex.quote(str(here) if here.is_file() else here.name)} {exercise}"
    try:
        import ipywidgets
    except ImportError:
        print(f"Stuck on `{exercise}`? Hint {n} of {len(hints)} is ready: run `{terminal}` in a terminal.")
        return True
    handle = display({"text/plain": f"Stuck on `{exercise}`? Hint {n} of {len(hints)} is ready: press "
                                    f"the button (or run `{terminal}` in a terminal)."},
                     raw=True, display_id=True)
    button = ipywidgets.Button(description=f"Show hint {n} of {len(hints)} for {exercise}",
                               layout=ipywidgets.Layout(width="auto"))

    def show(_):
        button.disabled = True
        _record(Path(folder), exercise, n)
        update_display({"text/plain": _line(exercise, n, hints)}, raw=True, display_id=handle.display_id,
                       metadata={MARK: {"hint": {"exercise": exercise, "n": n}}})

    button.on_click(show)
    display(button)
    return True


def after_cell(result) -> None:
    """IPython's ``post_run_cell`` hook: after a failed visible test cell, or a "Check my answers"
    with failures, offer the next hint of each failed exercise."""
    failed, _failed_in_check[:] = list(_failed_in_check), []
    if not result.success:
        source = getattr(getattr(result, "info", None), "raw_cell", None)
        if source:
            try:
                found = _visible_tests().get(source)
            except (OSError, ValueError):
                found = None
            if found and found not in failed:
                failed.append(found)
    for assignment, exercise in failed:
        try:
            offer(assignment, exercise)
        except Exception as exc:  # noqa: BLE001 - a hint must never get in the way of the lesson
            print(f"(no hint for `{exercise}`: {type(exc).__name__}: {exc})")


def register() -> None:
    """Run :func:`after_cell` after every cell of this IPython kernel (once); nothing elsewhere."""
    global _hooked
    if "IPython" not in sys.modules:
        return
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return
    callbacks = shell.events.callbacks.get("post_run_cell", [])
    if not any(getattr(cb, "__qualname__", "") == "after_cell" and getattr(cb, "__module__", "") == __name__
               for cb in callbacks):
        shell.events.register("post_run_cell", after_cell)
    _hooked = True
