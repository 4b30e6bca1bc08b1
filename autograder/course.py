"""Moved to :mod:`autograder.grader.course`; this name stays for the code that imports it."""
import sys

from .grader import course as _module

sys.modules[__name__] = _module
