"""JAX-aware checks for the course's exercises, the grader, and helpers the chapters share.

One module per idea of the mental model:

- :mod:`autograder.numerics`: outputs against a reference on fresh random inputs
- :mod:`autograder.phases`: what runs at trace time and what runs every call
- :mod:`autograder.compilation`: traces and compilations counted
- :mod:`autograder.jaxprs`: primitives in the jaxpr, jaxpr size
- :mod:`autograder.purity`: same inputs same outputs, globals untouched, jit == eager, no leaks
- :mod:`autograder.transfers`: no host transfer in the hot path
- :mod:`autograder.randomness`: typed keys, no key reuse
- :mod:`autograder.sharding`: an output's sharding
- :mod:`autograder.device`: device report, problem sizes, an honest timer
- :mod:`autograder.review`: ``review(f, *args)``, the code-review questions answered from what JAX observes
- :mod:`autograder.shapes`, :mod:`autograder.timing`, :mod:`autograder.pytrees`: chapter-specific checks
- :mod:`autograder.claims`: the verdict lines of the chapters' measured claims
- :mod:`autograder.selfcheck`: the "check my answers" table

Only graders run the rest, in rooms whose imports go one way (instructor -> grader -> judge ->
sandbox -> common: docs/architecture.md). The kernel-side agent :mod:`autograder.agent` answers
the judge inside the learner's kernel; :mod:`autograder.wire` is the channel's data format, used
by both sides.

Every check raises :class:`ExerciseFailure`, whose message is learner-facing feedback.
"""
import importlib
import sys
import types

# The module defining each public name (``__all__``). ``import autograder`` imports none of them: each is
# imported when first used (``__getattr__``), so that the grader's own processes (the sandbox's
# launcher, started several times a notebook, is ``python -m autograder.sandbox.launcher``) do
# not load NumPy for nothing; a learner's notebook, which imports JAX, loads the same either way.
_HOMES = {
    "feedback": ("ExerciseFailure", "call", "explained", "fail"),
    "device": ("device_report", "honest_time", "problem_size", "use_virtual_cpu_devices"),
    "numerics": ("check_close", "check_equal", "check_matches_reference", "tolerance"),
    "compilation": ("Call", "CompileCounter", "check_compiles", "check_compiles_at_most", "count_compiles",
                    "count_traces"),
    "jaxprs": ("check_jaxpr_size_constant", "check_primitive_absent", "check_primitive_present",
               "jaxpr_size"),
    "purity": ("check_input_unchanged", "check_no_tracer_leak", "check_pure"),
    "transfers": ("check_no_host_transfer", "check_traceable"),
    "randomness": ("check_no_key_reuse", "check_typed_key", "is_typed_key"),
    "phases": ("captured_stdout", "check_prints_values"),
    "sharding": ("check_sharding", "check_spec_in_type"),
    "review": ("Review", "review"),
    "show_phases": ("show_phases",),
    "selfcheck": ("check_my_answers", "passed"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}
__all__ = list(_HOME)


def __getattr__(name):
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """``autograder.review`` (and ``show_phases``) is a module and the function of that name
    this package exports: importing the module must not replace the function."""

    def __setattr__(self, name, value):
        if name in _HOME and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__version__ = "0.1.0"

from .hints import register as _register_hints  # noqa: E402

_register_hints()  # in an IPython kernel: a failed test offers the exercise's next hint (autograder.hints)
