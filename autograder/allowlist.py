"""Moved to :mod:`autograder.judge.allowlist`; this name stays for the code that imports it."""
import sys

from .judge import allowlist as _module

sys.modules[__name__] = _module
