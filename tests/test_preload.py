"""The kernel zygote's preloaded modules (launcher.py's "preloaded modules"): a batch's kernels,
forks of a Python that imported JAX once, find JAX imported at their own first import of it,
as a fresh kernel would have imported it, or stop there and ask to be graded again on a fresh
kernel when it would not be the same (a variable JAX reads at import set before, a module of
the submission's that a fresh kernel would import instead).

Each case runs in a fork of one Python that has preloaded JAX as the zygote does, with the
environment the zygote had (no root needed: what a kernel does with the preloaded modules does
not depend on its containment)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

LAUNCHER = Path(__file__).resolve().parent.parent / "autograder" / "grader" / "launcher.py"

# Preloads JAX as the zygote does (the launcher loaded by path: nothing of the grader imported),
# then runs each case's code in a fork with the zygote's environment, the finder armed, and
# prints one JSON line per case: its exit status, the mark's text, what the case printed.
HARNESS = r'''
import importlib.util, json, os, sys, tempfile
spec = importlib.util.spec_from_file_location("_zygote_under_test", sys.argv[1])
launcher = importlib.util.module_from_spec(spec)
spec.loader.exec_module(launcher)
preloaded = launcher.preload(["jax"])
env = dict(preloaded.env)
ids = {"jax": id(preloaded.groups["jax"]["jax"]), "numpy": id(preloaded.groups[""]["numpy"])}
cases = json.loads(sys.argv[2])
for name, code in cases.items():
    home = tempfile.mkdtemp()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.environ.clear()
        os.environ.update(env)
        class Out(dict):  # each entry sent at once: a case may stop the process
            def __setitem__(self, key, value):
                os.write(write, (json.dumps({key: value}) + "\n").encode())
        out = Out()
        out["before"] = sorted(m for m in ("jax", "numpy", "jaxlib") if m in sys.modules)
        preloaded.arm(home)
        try:
            exec(code, {"out": out, "ids": ids, "finder": preloaded})
        except BaseException as exc:
            out["raised"] = f"{type(exc).__name__}: {exc}"
        os._exit(0)
    os.close(write)
    printed = {}
    with os.fdopen(read) as f:
        for line in f:
            printed.update(json.loads(line))
    _, status = os.waitpid(pid, 0)
    mark = os.path.join(home, launcher.FRESH_KERNEL_MARK)
    print(json.dumps({"case": name, "status": os.waitstatus_to_exitcode(status),
                      "mark": open(mark).read().strip() if os.path.exists(mark) else None,
                      "out": printed}))
'''


def _run(cases: dict, cwd: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_", "TF_CPP_"))}
    proc = subprocess.run([sys.executable, "-c", HARNESS, str(LAUNCHER), json.dumps(cases)], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {r["case"]: r for r in map(json.loads, proc.stdout.splitlines())}


FRESH_CONFIG = "import jax, json; print(json.dumps({k: repr(v) for k, v in jax.config.values.items()}))"

CASES = {
    # a notebook that imports JAX as the zygote did: the zygote's modules, handed back as they were
    "imported": textwrap.dedent("""
        import importlib.machinery, sys
        import jax, jax.numpy as jnp
        out["same"] = id(jax) == ids["jax"] and id(sys.modules["numpy"]) == ids["numpy"]
        out["loader"] = type(jax.__spec__.loader).__name__
        out["origin"] = jax.__spec__.origin == jax.__file__
        out["finder_gone"] = finder not in sys.meta_path
        out["jit"] = jax.jit(lambda x: x * 2 + 1)(jnp.arange(3.0)).tolist()
        out["tf_cpp"] = __import__("os").environ.get("TF_CPP_MIN_LOG_LEVEL")  # as JAX's import sets it
        out["config"] = {k: repr(v) for k, v in jax.config.values.items()}
    """),
    "submodule_first": textwrap.dedent("""
        from jax import numpy as jnp
        import jax
        out["same"] = id(jax) == ids["jax"]
        out["sum"] = float(jnp.arange(4.0).sum())
    """),
    # XLA_FLAGS is read when the first backend starts, not at import: it may be set before
    "xla_flags": textwrap.dedent("""
        import os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
        import jax
        out["same"] = id(jax) == ids["jax"]
        out["devices"] = len(jax.devices())
    """),
    # a variable JAX reads at import, set before it: a fresh kernel would honour it
    "x64_before": "import os\nos.environ['JAX_ENABLE_X64'] = '1'\nimport jax\nout['reached'] = True\n",
    "x64_after": textwrap.dedent("""
        import jax, os
        os.environ["JAX_ENABLE_X64"] = "1"
        out["same"] = id(jax) == ids["jax"]
        out["x64"] = bool(jax.config.jax_enable_x64)
    """),
    # NumPy is handed back alone; JAX's variables are still checked at JAX's own import
    "numpy_then_jax": textwrap.dedent("""
        import os, sys
        import numpy
        out["numpy"] = float(numpy.arange(4).sum())
        out["jax_hidden"] = "jax" in sys.modules
        os.environ["JAX_PLATFORMS"] = "cpu"
        import jax
        out["reached"] = True
    """),
    # a variable the libraries' C code reads (OpenBLAS's threads)
    "threads_before": "import os\nos.environ['OMP_NUM_THREADS'] = '1'\nimport numpy\nout['reached'] = True\n",
    # the submission's own jax.py, which a fresh kernel would import
    "shadowed": textwrap.dedent("""
        import os, sys, tempfile
        folder = tempfile.mkdtemp()
        with open(os.path.join(folder, "jax.py"), "w") as f:
            f.write("mine = True\\n")
        sys.path.insert(0, folder)
        import jax
        out["reached"] = True
    """),
    "never": "import json\nout['reached'] = True\n",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("preload")
    fresh = subprocess.run([sys.executable, "-c", FRESH_CONFIG], capture_output=True, text=True, check=True,
                           env={k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))})
    return _run(CASES, cwd), json.loads(fresh.stdout)


def test_a_kernel_that_imports_jax_gets_the_zygotes_modules_as_a_fresh_import_would_leave_them(results):
    got, fresh_config = results
    r = got["imported"]
    assert r["status"] == 0 and r["mark"] is None, r
    out = r["out"]
    assert out["before"] == []  # nothing of JAX, NumPy or jaxlib in sys.modules before its import
    assert out["same"] is True and out["loader"] == "SourceFileLoader" and out["origin"] is True
    assert out["finder_gone"] is True
    assert out["jit"] == [1.0, 3.0, 5.0]
    assert out["tf_cpp"] == "1"
    assert out["config"] == fresh_config  # every JAX option as a fresh process's import sets it
    assert got["submodule_first"]["out"] == {"before": [], "same": True, "sum": 6.0}
    assert got["xla_flags"]["out"]["devices"] == 8 and got["xla_flags"]["out"]["same"] is True
    assert got["x64_after"]["out"]["x64"] is False  # as in any kernel: read at import
    assert got["never"]["status"] == 0 and got["never"]["mark"] is None


@pytest.mark.parametrize("case, why", [
    ("x64_before", "JAX_ENABLE_X64 changed before the import of jax"),
    ("numpy_then_jax", "JAX_PLATFORMS changed before the import of jax"),
    ("threads_before", "OMP_NUM_THREADS changed before the import of"),
    ("shadowed", "jax would be imported from /"),
])
def test_a_kernel_whose_import_would_differ_stops_there_and_asks_for_a_fresh_kernel(results, case, why):
    from autograder.sandbox import launcher

    r = results[0][case]
    assert r["status"] == launcher.FRESH_KERNEL_STATUS and "reached" not in r["out"], r  # stopped at the import
    assert r["mark"] is not None and why in r["mark"], r


def test_numpy_imported_first_is_handed_back_alone_and_jaxs_variables_are_checked_at_its_import(results):
    out = results[0]["numpy_then_jax"]["out"]
    assert out["numpy"] == 6.0 and out["jax_hidden"] is False  # then JAX_PLATFORMS stopped it (above)


def test_a_package_that_reads_the_whole_environment_is_not_preloaded(tmp_path):
    (tmp_path / "greedy").mkdir()
    (tmp_path / "greedy" / "__init__.py").write_text("import os\nSEEN = dict(os.environ)\n")
    code = (f"import importlib.util, sys; sys.path.insert(0, {str(tmp_path)!r}); "
            f"s = importlib.util.spec_from_file_location('_z', {str(LAUNCHER)!r}); "
            "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); m.preload(['greedy'])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "reads the whole environment" in proc.stderr


@pytest.mark.parametrize("operator, expected", [(None, None), ("3", "3")])
def test_a_kernels_tf_cpp_min_log_level_is_the_operators_whether_or_not_the_grader_imported_jax(operator, expected):
    """JAX's import sets TF_CPP_MIN_LOG_LEVEL in its own process where it is unset: a contained
    kernel's environment does not change once the grading process has imported JAX (the zygote's
    JAX was imported with the environment kernels get)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if operator is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = operator
    code = ("import json, os; from pathlib import Path; from autograder.grader import sandbox; "
            "before = sandbox.kernel_env(Path('/nonexistent')).get('TF_CPP_MIN_LOG_LEVEL'); import jax; "
            "print(json.dumps([before, os.environ.get('TF_CPP_MIN_LOG_LEVEL'), "
            "sandbox.kernel_env(Path('/nonexistent')).get('TF_CPP_MIN_LOG_LEVEL')]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=Path(__file__).resolve().parent.parent, check=True)
    before, grader_own, after = json.loads(proc.stdout)
    assert grader_own == (operator or "1")  # JAX set it in the grading process
    assert before == after == expected
