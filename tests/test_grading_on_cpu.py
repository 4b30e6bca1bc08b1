"""Grading never opens an accelerator (issue 44): graded kernels, the judge and the runner compute
on the CPU, so a grade is the same on a laptop, a GPU or TPU host, and from a Colab cell while the
learner's notebook holds the chip (a TPU opens for one process at a time).

On this CPU machine ``JAX_PLATFORMS=tpu`` stands in for such a host: a process that opens JAX's
backend there fails as one does beside a held chip ("Unable to initialize backend 'tpu'")."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.sandbox.environment import kernel_env
from conftest import solution_notebook

ROOT = Path(__file__).resolve().parent.parent
HELD = {**os.environ, "JAX_PLATFORMS": "tpu"}   # an accelerator this host cannot open


@pytest.mark.parametrize("contained", [True, False])
def test_the_grading_kernel_computes_on_the_cpu_whatever_the_host_says(monkeypatch, tmp_path, contained):
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    env = kernel_env(tmp_path, contained)
    assert env["JAX_PLATFORMS"] == "cpu"
    # the kernel's Python, in exactly that environment, opens the CPU and nothing else
    probe = subprocess.run([sys.executable, "-c", "import jax; print(jax.default_backend(), len(jax.devices()))"],
                           env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0 and probe.stdout.split()[0] == "cpu", probe.stderr[-1500:]


@pytest.mark.notebook
@pytest.mark.xdist_group("grading")
def test_a_solution_grades_full_marks_on_a_host_whose_accelerator_cannot_be_opened(tmp_path):
    nb = solution_notebook("01_phases")
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(nb), "--json"],
                          capture_output=True, text=True, cwd=ROOT, env=HELD, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    failed = [(t["exercise"], t["feedback"][:300]) for t in result["tests"] if not t["passed"]]
    assert result["score"] == result["max_score"] > 0, failed


def test_review_falls_back_to_the_cpu_with_a_note(tmp_path):
    (tmp_path / "reviewed_cpu.py").write_text("import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x) * 2\n")
    proc = subprocess.run([sys.executable, "-m", "autograder", "review", "reviewed_cpu:f", "--args", "jnp.ones(3)",
                           "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**HELD, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "reviewing on the CPU instead" in proc.stderr and "Unable to initialize backend 'tpu'" in proc.stderr
    json.loads(proc.stdout)   # the review itself, whole


@pytest.mark.notebook
@pytest.mark.xdist_group("grading")
def test_a_solution_grades_full_marks_where_the_packages_come_from_pythonpath(tmp_path):
    """The TPU machines' layout: the interpreter has no JAX of its own; JAX and Jupyter's packages
    are folders on PYTHONPATH (the machine's JAX, and the wheels gpu_run.sh installs in /tmp/site).
    Every grading process (kernel, judge, program runner) must find them there, with the
    accelerator unopenable as beside a held chip. Uncontained, as on those machines (no bubblewrap)."""
    import sysconfig

    bare = tmp_path / "bare"   # this Python with its standard library only
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    python = bare / "bin" / "python"
    assert subprocess.run([str(python), "-c", "import jax"], capture_output=True).returncode != 0
    packages = os.pathsep.join(dict.fromkeys([str(ROOT), sysconfig.get_paths()["purelib"],
                                              sysconfig.get_paths()["platlib"]]))
    proc = subprocess.run([str(python), "-m", "autograder", "grade", str(solution_notebook("01_phases")), "--json",
                           "--no-sandbox"], capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**HELD, "PYTHONPATH": packages})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    failed = [(t["exercise"], t["feedback"][:300]) for t in result["tests"] if not t["passed"]]
    assert result["containment"] == "none" and result["score"] == result["max_score"] > 0, failed
