"""``python -m autograder``: grade notebooks (and more, see ``--help``)."""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder",
                                     description="JAX-aware grading for the course's exercises.")
    sub = parser.add_subparsers(dest="command", required=True)
    from .grader.cli import add_parsers as add_grader_parsers
    from .instructor.cli import add_parsers as add_instructor_parsers

    add_grader_parsers(sub)
    add_instructor_parsers(sub)
    add_review_parser(sub)
    from .hints import add_parser as add_hint_parser

    add_hint_parser(sub)
    return parser


def add_review_parser(sub):
    """Add the ``review`` subcommand (:func:`autograder.review.review_command`): defined here, so
    that building the parser does not import NumPy."""
    rev = sub.add_parser("review", help="answer the code-review questions for a function",
                         description="Ask the six review questions of MODULE:FUNCTION called at "
                                     "the example arguments, and answer them from what JAX "
                                     "observes (see autograder.review).")
    rev.add_argument("target", metavar="MODULE:FUNCTION",
                     help="e.g. mymodule:train (the module is imported from the current folder)")
    rev.add_argument("--args", default="", help="example arguments as a Python expression, "
                     "e.g. \"jax.random.key(0), jnp.ones(3), 5\" (jax, jnp, np and the "
                     "module's names in scope)")
    rev.add_argument("--static", default="", help="comma-separated static argument names")
    rev.add_argument("--json", action="store_true", help="print the report as JSON")


def _without_cwd_on_path() -> None:
    """``python -m`` puts the current folder first on ``sys.path``: run beside a notebook, a
    learner's ``timeit.py`` or ``sqlite3.py`` would shadow the standard library inside the grader
    (the package itself is imported by now; kernels get it through ``PYTHONPATH``, and
    ``review`` puts the current folder back for the module it reviews). Kept when it is where
    the package was found (a checkout used without installing it): spawned workers need it."""
    import os

    cwd = os.path.realpath(os.getcwd())
    home = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    if sys.path and os.path.realpath(sys.path[0] or os.curdir) == cwd and cwd != home:
        del sys.path[0]


# the module and the function that run each command (imported only for it)
_RUN = {"grade": ("grader.cli", "grade_command"), "hint": ("hints", "hint_command"),
        "review": ("review", "review_command"),
        **dict.fromkeys(("collect", "autograde", "feedback", "export", "report"), ("instructor.cli", "run"))}


def main(argv=None) -> int:
    import importlib
    import warnings

    warnings.filterwarnings("ignore", message=".*not in session.*")  # nbgrader's SQLAlchemy noise
    args = build_parser().parse_args(argv)
    if args.command == "settings":
        from .common.settings import describe

        print(describe())
        return 0
    module, function = _RUN[args.command]
    return getattr(importlib.import_module(f".{module}", __package__), function)(args)


if __name__ == "__main__":
    _without_cwd_on_path()
    code = main()
    # Everything is about to be released: frozen out of the garbage collector's reach, it is
    # spared a last collection over all of it at exit (about 0.4 s once nbgrader and JAX are in).
    import gc

    gc.freeze()
    sys.exit(code)
