"""One notebook is graded in the command's own process, its memory cap given back (test_batch_speed):
prints the forks, whether RLIMIT_DATA is as before and whether the missing notebook's result says
so; then, for two notebooks, whether a grading process was forked."""
import os
import resource

from autograder.common.settings import Settings
from autograder.grader import batch

forks = []
os.register_at_fork(before=lambda: forks.append(1))
before = resource.getrlimit(resource.RLIMIT_DATA)
[result] = batch.grade_many(["/nonexistent/01_phases/01_phases.ipynb"], Settings.load())
print(len(forks), resource.getrlimit(resource.RLIMIT_DATA) == before, "no such file" in result.error)
batch.grade_many(["/nonexistent/a/01_phases/01_phases.ipynb", "/nonexistent/b/01_phases/01_phases.ipynb"],
                 Settings.load())
print(len(forks) > 0)
