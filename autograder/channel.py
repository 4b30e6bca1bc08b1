"""Moved to :mod:`autograder.judge.channel`; this name stays for the code that imports it."""
import sys

from .judge import channel as _module

sys.modules[__name__] = _module
