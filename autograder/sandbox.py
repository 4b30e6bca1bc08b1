"""Moved to :mod:`autograder.grader.sandbox`; this name stays for the code that imports it."""
import sys

from .grader import sandbox as _module

sys.modules[__name__] = _module
