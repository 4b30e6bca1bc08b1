"""The grader's side: what only a grader runs, never a learner's kernel.

- :mod:`.cli`: ``python -m autograder grade``;
- :mod:`.batch`: many notebooks in parallel grading processes, nothing lost;
- :mod:`.pipeline`: one notebook, as a list of steps on one :class:`~.pipeline.Grading`;
- :mod:`.course`: the course root, assignments, source notebooks;
- :mod:`.submission`: a submission read and sanitized as nbgrader's ``autograde`` does;
- :mod:`.execution`: the notebook run in a fresh, contained kernel (nbclient's loop);
- :mod:`.sandbox` and :mod:`.launcher`: the kernel's containment (namespaces, a uid, an
  allow-listed view of the files and of the environment, limits);
- :mod:`.result`: the JSON contract and its human forms;
- :mod:`.settings`: every ``AUTOGRADER_*`` setting, its default and help.

The judge (:mod:`autograder.judge`, a folder beside this one, with its program runner
:mod:`autograder.judge.runner`) and the kernel-side agent (:mod:`autograder.agent`, another
folder beside it) are their own packages; the instructor's verbs in :mod:`autograder.instructor`.
Nothing here is imported by ``import autograder``.
"""
