"""``python -m autograder grade``: the command line of the pipeline (:mod:`.pipeline`) and the
batch (:mod:`.batch`); standard output carries the JSON and nothing else."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..common import settings
from ..common.errors import GradingError
from .result import failed_result, format_human, format_progress


class _StdoutGuard:
    """Keep file descriptor 1 for our JSON only: everything else written there goes to stderr."""

    def __enter__(self):
        sys.stdout.flush()
        self.saved = os.dup(1)
        os.dup2(2, 1)
        return os.fdopen(os.dup(self.saved), "w", encoding="utf-8")

    def __exit__(self, *exc):
        sys.stdout.flush()
        os.dup2(self.saved, 1)
        os.close(self.saved)
        return False


def grade_command(args) -> int:
    root = Path(args.root).resolve() if args.root else None
    flags = {"AUTOGRADER_SANDBOX": "off"} if args.no_sandbox else {}  # for settings.get, until the sandbox takes `config`
    ok = True
    with _StdoutGuard() as out, settings.given(**flags):
        from .batch import containment_summary, grade_many  # whatever its imports print: stderr

        try:
            config = settings.Settings.load(sandbox=False if args.no_sandbox else None)
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
        out.flush()
        out.close()
    return 0 if ok else 1
