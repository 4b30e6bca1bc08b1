"""Moved to :mod:`autograder.judge.programs`; this name stays for the code that imports it."""
import sys

from .judge import programs as _module

sys.modules[__name__] = _module
