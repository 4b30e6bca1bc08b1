"""The grader's side: what only a grader runs, never a learner's kernel.

- :mod:`.cli`: ``python -m autograder grade``;
- :mod:`.batch`: many notebooks in parallel grading processes, nothing lost;
- :mod:`.pipeline`: one notebook, as a list of steps on one :class:`~.pipeline.Grading`;
- :mod:`.submission`: a submission read and sanitized as nbgrader's ``autograde`` does;
- :mod:`.execution`: the notebook run in a fresh, contained kernel (nbclient's loop);
- :mod:`.result`: the JSON contract and its human forms;
- :mod:`.gradebook`: nbgrader's gradebook, scratch and shared; :mod:`.startup`: warm-up imports.

Every command builds one :class:`autograder.common.settings.Settings` and passes it down.
Nothing here is imported by ``import autograder``.
"""
