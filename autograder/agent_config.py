"""Moved to :mod:`autograder.agent.config`; this name stays for the code that imports it."""
import sys

from .agent import config as _module

sys.modules[__name__] = _module
