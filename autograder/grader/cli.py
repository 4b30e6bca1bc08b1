"""``python -m autograder grade``: the command line of the pipeline (:mod:`.pipeline`) and the
batch (:mod:`.batch`); standard output carries the JSON and nothing else."""
from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from ..common.errors import GradingError
from ..common.settings import Settings
from .result import failed_result, format_human, format_progress


def add_parsers(sub) -> None:
    """``grade`` and ``settings``, subcommands of ``python -m autograder``."""
    grade = sub.add_parser("grade", help="grade notebooks as an instructor's autograde would",
                           description="Grade learner notebooks: test cells are restored from "
                                       "solutions/, each notebook runs in a fresh kernel with a "
                                       "time limit. The assignment is the notebook's folder name. "
                                       "Each kernel is contained (its own mount, PID and network "
                                       "namespaces and a memory limit; as root an unprivileged uid "
                                       "of its own, otherwise bubblewrap's user namespace; the "
                                       "course and other submissions out of its sight); a sandbox "
                                       "that cannot be set up is a refusal. The JSON's "
                                       "'containment' says how each notebook ran.")
    grade.add_argument("notebooks", nargs="+", metavar="NOTEBOOK")
    grade.add_argument("--json", action="store_true", help="print JSON (one object, or a list for several)")
    grade.add_argument("--root", help="course root holding solutions/ (default: found automatically)")
    add_limits(grade)
    grade.add_argument("--progress", action="store_true", help="show a progress bar on stderr")
    grade.add_argument("--no-sandbox", action="store_true",
                       help="run kernels uncontained (only for code you trust; the same as "
                            "AUTOGRADER_SANDBOX=off; the JSON's containment then says 'none')")
    grade.add_argument("--mine", action="store_true",
                       help="the notebooks are your own exercises (make check): where no kernel can be "
                            "contained, files you own in the course's exercises/ run uncontained, said once")
    sub.add_parser("settings", help="list the settings (AUTOGRADER_*, COURSE_*), their defaults and values",
                   description="Every environment variable the grader and the instructor's commands "
                               "read, with its default, its value now and a line of help.")


def positive_int(text: str) -> int:
    """An argument that must be a whole number of at least 1 (argparse's ``type``): 0 or less
    was taken as given (``--jobs -1`` crashed with no JSON; a cell time limit of 0 graded two
    copies of one notebook differently)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


def add_limits(parser) -> None:
    """A grading command's limits: ``--cell-timeout``, ``--notebook-timeout``, ``--jobs``."""
    parser.add_argument("--cell-timeout", type=positive_int, default=120, help="seconds per cell (default 120)")
    parser.add_argument("--notebook-timeout", type=positive_int, default=600,
                        help="seconds per notebook (default 600)")
    parser.add_argument("--jobs", "-j", type=positive_int, default=None,
                        help="notebooks graded in parallel (default: one per core, and one more)")


@contextmanager
def _stdout_for_json_only():
    """Keep file descriptor 1 for our JSON only (yields a stream writing there): everything else
    written there goes to stderr."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with os.fdopen(os.dup(saved), "w", encoding="utf-8") as out:
            yield out
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def grade_command(args) -> int:
    root = Path(args.root).resolve() if args.root else None
    ok = True
    with _stdout_for_json_only() as out:
        from .batch import containment_summary, grade_many  # whatever its imports print: stderr

        try:
            if root is not None and not (root / "solutions").is_dir():
                raise GradingError(f"--root {args.root} is not a course's root: it has no solutions/ folder")
            config = Settings.load(sandbox=False if args.no_sandbox else None)
            if args.mine and config.sandbox:
                from ..sandbox.containment import own_exercises_uncontained

                notice = own_exercises_uncontained(args.notebooks, root)
                if notice:
                    print(f"autograder: {notice}", file=sys.stderr)
                    config = Settings.load(sandbox=False)
        except GradingError as exc:  # every row says which setting, and nothing is run
            results = [failed_result(nb, str(exc), root) for nb in args.notebooks]
        else:
            results = grade_many(args.notebooks, config, workers=args.jobs, progress=args.progress, root=root,
                                 cell_timeout=args.cell_timeout, notebook_timeout=args.notebook_timeout)
        for nb, result in zip(args.notebooks, results):
            if result.error:
                ok = False
                print(f"autograder: cannot grade {nb}: {result.error}", file=sys.stderr)
        if len(results) > 1 or args.progress:
            line = containment_summary(results)
            if line:
                print(f"autograder: {line}", file=sys.stderr)
        if args.json:
            payload = results[0].as_dict() if len(results) == 1 else [r.as_dict() for r in results]
            out.write(json.dumps(payload, indent=2) + "\n")
        else:
            blocks = [format_human(r) for r in results]
            if len(results) > 1:
                blocks.append(format_progress(results))
            out.write("\n\n".join(blocks) + "\n")
    return 0 if ok else 1
