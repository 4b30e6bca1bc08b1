"""Moved to :mod:`autograder.judge.runner`; this name stays for the code that imports it."""
import sys

from .judge import runner as _module

sys.modules[__name__] = _module
