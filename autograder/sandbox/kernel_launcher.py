"""What a graded kernel runs instead of ``python -m ipykernel_launcher``: the same launcher,
without ipykernel's debugger (it imports debugpy and pydevd when the kernel starts, about 0.1 s
of CPU per kernel; nobody debugs a graded kernel). ``debugpy`` is importable again for the
notebook. Started by :func:`autograder.sandbox.kernel_manager.without_debugger`'s command."""
import runpy
import sys

sys.modules["debugpy"] = None  # ipykernel.debugger then finds no debugpy, and loads nothing of it
import ipykernel.debugger  # noqa: E402,F401

del sys.modules["debugpy"]
runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
