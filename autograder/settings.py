"""Moved to :mod:`autograder.grader.settings`; this name stays for the code that imports it."""
import sys

from .grader import settings as _module

sys.modules[__name__] = _module
