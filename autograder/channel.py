"""The two ways a judge's request to the learner's kernel can fail, as exceptions of their own
module, so that the judge (:mod:`autograder.judge`) and the program reader
(:mod:`autograder.programs`) share them without importing each other."""
from __future__ import annotations


class ChannelError(Exception):
    """The kernel's reply cannot be used (none, several, malformed, too big, too late, or the
    kernel died). ``str(err)`` is learner-facing."""


class LearnerError(Exception):
    """Mixed into the judge-side copy of an exception raised by learner code in the kernel.

    The copy is an instance of a class named as the original, derived from the trusted class of
    that name (a built-in exception or one of ``jax.errors``), so :func:`autograder.feedback`'s
    classifier (the one ``ag.call`` uses) names the idea. ``label``: the call that raised.
    """

    label = "the function"
    kernel_mro: list = []
