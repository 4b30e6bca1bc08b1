"""`import autograder as ag`: every name the notebooks and judges use is public, behind an
explicit ``__all__``, and ``__all__`` names nothing that is not there."""
from __future__ import annotations

import json
import re

import autograder as ag
from conftest import PROCESSES, ROOT


def _sources():
    for path in sorted(ROOT.glob("*/**/*.ipynb")):
        if ".venv" in path.parts or ".ipynb_checkpoints" in path.parts:
            continue
        nb = json.loads(path.read_text())
        yield path, "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    for path in sorted(ROOT.glob("solutions/*/judge*.py")):
        yield path, path.read_text()


def test_all_is_explicit_and_complete():
    assert isinstance(ag.__all__, list) and len(ag.__all__) == len(set(ag.__all__))
    missing = [n for n in ag.__all__ if not hasattr(ag, n)]
    assert not missing, missing


def test_every_name_the_notebooks_use_is_in_all():
    used = {}
    for path, text in _sources():
        for name in re.findall(r"\bag\.([A-Za-z_]\w*)", text):
            used.setdefault(name, path.relative_to(ROOT).as_posix())
    assert len(used) > 10
    not_public = {n: where for n, where in used.items() if n not in ag.__all__ and n != "__version__"
                  and not hasattr(getattr(ag, n, None), "__file__")}   # submodules (ag.device, ...) are fine
    assert not not_public, not_public


def _imports(path, module, modules):
    """The package modules that ``module`` (at ``path``) imports, at any depth of its code."""
    import ast

    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in modules else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found & set(modules) - {module}


def test_no_import_cycles():
    """No two modules of the package import each other, directly or through others (imports
    inside functions count too): the package is a layered set of rooms."""
    modules = {}
    for path in (ROOT / "autograder").rglob("*.py"):
        name = ".".join(path.with_suffix("").relative_to(ROOT).parts)
        modules[name.removesuffix(".__init__")] = path
    graph = {m: _imports(p, m, modules) - {"autograder"} for m, p in modules.items()}
    # a cycle is a strongly connected component of more than one module (Tarjan)
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert len(graph) > 30 and any(graph.values())
    assert not cycles, cycles


def test_every_subpackage_is_in_the_wheel():
    """Each folder of the package that is a package itself (``grader/``, ``agent/``, ``judge/``...)
    is listed in pyproject.toml's packages: setuptools leaves out a subpackage it is not told
    of, and an installed grader (Colab's wheel, a deploy image) would then fail to import it."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "autograder").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    assert {"autograder", "autograder.grader", "autograder.agent", "autograder.judge"} <= found
    assert found <= listed, sorted(found - listed)


def test_the_kernels_request_goes_through_the_agent_packages_run(monkeypatch):
    """The judge's one fixed request (the code a Channel executes) reaches
    ``autograder.agent.serve``, whose dispatcher looks ``_run`` up in the package itself: an
    attack that patches ``autograder.agent._run`` (tests/attacks.py) replaces what every request
    goes through, so the attack table tests what it says. Judged through a Channel over a
    stand-in client that runs the code it is sent, in this process."""
    import queue

    import IPython.display

    import autograder.agent as agent
    from autograder.judge import Channel

    shown, messages, seen = [], queue.Queue(), []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw=False: shown.append(data))
    monkeypatch.setattr(agent, "_run", lambda req: seen.append(req) or {"value": 41.5})

    class Client:
        def execute(self, code, **kw):
            eval(compile(code, "<request>", "eval"), {"__builtins__": __builtins__})  # noqa: S307 - the judge's own request
            parent = {"msg_id": "m1"}
            for data in shown:
                messages.put({"parent_header": parent, "msg_type": "display_data", "content": {"data": data}})
            messages.put({"parent_header": parent, "msg_type": "status", "content": {"execution_state": "idle"}})
            return "m1"

        def get_iopub_msg(self, timeout=None):
            return messages.get(timeout=timeout)

    reply = Channel(Client(), timeout=30).request({"op": "get", "name": "anything"})
    assert reply["value"] == 41.5 and [r["op"] for r in seen] == ["get"]


def test_fixtures_a_judge_names_are_the_agents_own():
    """``wire.Fixture(name)``, decoded by the agent, is a function of ``autograder.agent.fixtures``'s
    ``__all__``, the package judges import as ``autograder.judge.fixtures``; a name that is not one of
    them is refused, and so are its modules' helpers and the modules themselves."""
    import pytest

    import autograder.agent as agent
    from autograder.agent import fixtures
    from autograder import wire

    assert fixtures is agent.fixtures and fixtures.__name__ == "autograder.agent.fixtures"
    got = wire.decode(wire.encode([wire.Fixture("jit_call")]), markers=agent._markers())
    assert got == [fixtures.jit_call] and agent._callee(got[0]) is fixtures.jit_call
    import importlib
    import pkgutil

    helpers = sorted({n for m in pkgutil.iter_modules(fixtures.__path__)
                      for n, f in vars(importlib.import_module(f"{fixtures.__name__}.{m.name}")).items()
                      if callable(f) and n not in fixtures.__all__})
    assert "_mesh" in helpers and "jit_once" in helpers  # its modules' helpers, which a request must not reach
    for name in ("reset_config", "jit_static", "os", "calls", "examples", *helpers):
        with pytest.raises(wire.WireError):
            wire.decode(wire.encode([wire.Fixture(name)]), markers=agent._markers())


def test_the_packages_names_load_on_first_use_and_are_the_modules_own():
    """``import autograder`` and ``autograder.judge`` import none of their checks (nor NumPy) until
    a name is used (PEP 562): a grading process starts its kernel without them. Each name of
    either ``__all__`` is then the object its module defines (and ``__all__`` is exactly the names it loads); ``ag.review`` stays the function
    once the module ``autograder.review`` is imported; an unknown name is an AttributeError."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(PROCESSES / "package_names.py")], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "[]", lines[0]
    assert lines[1] == "True"
    assert lines[2] == "[] True autograder.numerics"
    assert lines[3].startswith("AttributeError") and "no_such_name" in lines[3]
    assert lines[4] == "[]", "a package whose __all__ differs from the names it loads: " + lines[4]


def test_judge_files_import_only_the_judges_public_names():
    """A judge file (``solutions/*/judge*.py``) takes every course name from one place,
    ``autograder.judge``: a name of its ``__all__`` or one of its public submodules, never a
    private one, never another module of the package."""
    import ast

    import autograder.judge as judge

    files = sorted(ROOT.glob("solutions/*/judge*.py"))
    assert files
    modules = {p.stem for p in (ROOT / "autograder" / "judge").glob("*.py") if not p.stem.startswith("_")}
    wrong = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                wrong += [f"{path.name}: import {a.name}" for a in node.names if a.name.split(".")[0] == "autograder"]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "autograder":
                if node.module != "autograder.judge":
                    wrong.append(f"{path.name}: from {node.module}")
                    continue
                wrong += [f"{path.name}: {a.name}" for a in node.names
                          if a.name not in judge.__all__ and a.name not in modules or a.name.startswith("_")]
                for a in node.names:  # each name resolves to what the judge package exports
                    assert getattr(judge, a.name, None) is not None or a.name in modules, a.name
    assert not wrong, wrong
