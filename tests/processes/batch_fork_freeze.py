"""A batch freezes the garbage collector for its fork and leaves it as it found it (test_batch_speed):
prints whether each grading process was forked frozen and the freeze count after the batch,
then, for a caller that froze objects of its own, whether they stay frozen."""
import gc

from autograder.common.settings import Settings
from autograder.grader import batch

seen = []
real = batch._Worker.__init__


def spy(self, *args, **kwargs):  # the state the grading processes are forked in
    seen.append(gc.get_freeze_count() > 0)
    real(self, *args, **kwargs)


batch._Worker.__init__ = spy
two = ["/nonexistent/a/01_phases/01_phases.ipynb", "/nonexistent/b/01_phases/01_phases.ipynb"]
batch.grade_many(two, Settings.load(), workers=1)
print(seen, gc.get_freeze_count())
gc.freeze()  # a caller that had frozen objects of its own keeps them frozen
batch.grade_many(two, Settings.load(), workers=1)
print(gc.get_freeze_count() > 0)
