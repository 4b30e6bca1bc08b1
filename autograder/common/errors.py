"""The grader's one error for a person: a notebook (or a setting) that cannot be graded."""


class GradingError(Exception):
    """A notebook that cannot be graded; the message says why, for a person."""
