"""Moved to :mod:`autograder.grader.result`; this name stays for the code that imports it."""
import sys

from .grader import result as _module

sys.modules[__name__] = _module
