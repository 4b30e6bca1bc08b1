"""Moved to :mod:`autograder.grader.launcher`; this name stays for the code that imports it."""
import sys

from .grader import launcher as _module

sys.modules[__name__] = _module
