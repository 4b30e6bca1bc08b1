"""Moved to :mod:`autograder.grader.execution`; this name stays for the code that imports it."""
import sys

from .grader import execution as _module

sys.modules[__name__] = _module
