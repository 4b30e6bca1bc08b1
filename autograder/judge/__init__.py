"""The judge: trusted code, in the grader's process, that decides every test's points.

After the notebook's own cells have run in the learner's kernel, the judge reaches the
learner's functions through a narrow data channel (the kernel's Jupyter messaging,
:mod:`autograder.wire` data only). Where an answer can be traced, it takes the learner's
*program*: ``k.program(name, *specs)`` is one ``jax.export`` per function and input signature
(exported for CPU alone, and checked against :mod:`.allowlist`),
whose structure is read as a parsed module (:mod:`.mlir`) and whose values come
from running that same program on the judge's inputs in the contained program runner
(:mod:`.runner`: no learner program runs in the grading process); a structural requirement
holds by its effect on that program (:mod:`.effect`). Otherwise it calls the functions in the
kernel. Either way its inputs come from a seed fixed per course secret, learner and test
(:mod:`.seeding`: a regrade draws the same), and it compares what comes back with references it
computes itself. Kernel-side observations (globals touched,
compile counts, key reuse...) are *claims*: a failing claim fails a test, a passing one never
earns points alone.

One trusted file per assignment, ``solutions/<assignment>/judge.py``, holds one function
``test_<name>(k)`` per graded test cell; ``k`` is a :class:`Kernel`::

    import numpy as np
    from autograder.judge import AsJax, check_close, check_matches_reference

    def test_double(k):
        double = k.fn("double")                      # a RemoteFunction
        x = k.rng.normal(size=(3, 4)).astype(np.float32)
        check_close(double(AsJax(x)), 2 * x, what="double(x)")
        check_matches_reference(double, lambda x: 2 * np.asarray(x), lambda rng: (AsJax(
            rng.normal(size=5).astype(np.float32)),), seed=k.seed(), jit=True)

:func:`run_judge` loads that file by path (never from a folder the kernel can write) and turns
each test's outcome into a :class:`Verdict`; :class:`JudgeStep` plugs it into grading. The
modules (channel, kernel, donation, step, outcome, mlir, programs, allowlist, runner) are described in
docs/architecture.md. Every name a judge file imports is here: ``from autograder.judge import
programs, Ref, Spec, fail`` (the channel's data markers of :mod:`autograder.wire`, the
fixtures of :mod:`autograder.agent.fixtures` and the learner's checks a judge uses included;
the submodules ``programs`` and ``mlir`` are imported as such).
"""
import importlib

# The module defining each public name, imported when the name is first used (``__getattr__``):
# the program runner's child (``python -m autograder.judge.runner_child``) imports this package
# without the channel's, the kernel's and the step's own imports.
_HOMES = {
    "channel": ("Channel", "ChannelError", "LearnerError"),
    "kernel": ("Exported", "Kernel", "RemoteFunction"),
    "donation": ("AsNumPy",),
    "step": ("JUDGE_THREADS", "JudgeStep", "is_test_cell", "judge_path", "judge_paths",
             "judge_tests", "load_judge", "run_judge", "verdict"),
    "runner": ("JUDGE_CPU_DEVICES", "ProgramFailure", "ensure_judge_devices"),
    "outcome": ("PASSED", "Verdict", "learner_text"),
    "autograder.wire": ("AsJax", "Fixture", "Key", "Opaque", "Ref", "Sharded", "Spec", "as_jax", "values"),
    "autograder.agent": ("fixtures",),
    # the learner's checks a judge uses too (the same messages and tolerances)
    "autograder.feedback": ("ExerciseFailure", "call", "explain_error", "fail"),
    "autograder.numerics": ("check_close", "check_equal", "check_matches_reference", "tolerance"),
    "autograder.device": ("honest_time",),
    "autograder.compilation": ("CompileCounter",),
    "autograder.jaxprs": ("primitives_in",),
    "autograder.meshes": ("make_mesh", "mesh_shape"),
    "autograder.phases": ("numbers_in",),
    "autograder.pytrees": ("call_on_tree", "describe"),
    "autograder.shapes": ("data_dependent_shape",),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}
__all__ = list(_HOME)


def __getattr__(name):
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    where = module if module.startswith("autograder.") else f".{module}"
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value
