"""Grade notebooks in one batch, keeping the executed notebook of some of them, and write the
results as JSON: the process behind ``conftest.grade_saving`` (and test_bwrap's grading as an
ordinary user).

    python tests/processes/grade_saving.py '[PATHS, {PATH: SAVED}, ROOT or null, JOBS, OUT]'

``PATHS``: the notebooks; ``{PATH: SAVED}``: where the executed notebook of each of those paths is
kept (the instructor's copy, as ``autograde`` keeps it); ``ROOT``: the course root (``--root``);
``JOBS``: grading processes; ``OUT``: where the list of results (``Result.as_dict()``) is written.
The settings are the environment's (``Settings.load()``).
"""
import json
import sys
from pathlib import Path

from autograder.common.settings import Settings
from autograder.grader.batch import grade_many


def main(argv: list[str]) -> None:
    paths, saved, root, jobs, out = json.loads(argv[0])
    results = grade_many(paths, Settings.load(), workers=jobs, root=Path(root) if root else None,
                         per_job=lambda p: {"save_graded": saved[p]} if p in saved else {})
    Path(out).write_text(json.dumps([r.as_dict() for r in results]))


if __name__ == "__main__":
    main(sys.argv[1:])
