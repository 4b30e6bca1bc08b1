"""Moved to :mod:`autograder.grader.submission`; this name stays for the code that imports it."""
import sys

from .grader import submission as _module

sys.modules[__name__] = _module
