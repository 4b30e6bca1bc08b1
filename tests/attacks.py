"""The hostile corpus: scoring attacks on 03_purity, each paired with WRONG answers (issue 11).

tests/test_judge.py grades every entry with the grader of this checkout (the judge outside the
kernel, the kernel contained) and asserts that it earns nothing. Each attack once earned full
marks from the course's earlier grader (hidden tests run in the kernel behind a guard), which is
why it is here.

Issue 11's attack classes, and the entry that carries it:

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

``agent_forges_replies`` targets the grader's kernel agent.

Each attack must still leave the grader able to grade (it then scores 0): an attack aimed at the
earlier grader's guard (its builtin, its mark) does nothing harmful where there is none.
"""
from __future__ import annotations

from dataclasses import dataclass

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

    def answers(self) -> dict:
        """``{grade_id: source}`` of the answer cells to fill in the released notebook."""
        base = {"step": STUB_STEP} if self.stubs else dict(WRONG)
        for cell in self.cells:
            base[cell] = base[cell] + self.code if self.after else self.code + base[cell]
        return base


# The earlier grader's guard (autograder/grading.py's _GUARD_SETUP at commit 511c696) is a builtin named
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
        "_agent.serve = _serve\n", issue=None),
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


# --------------------------------------------------------------------------- issue 20, part 6: claims alone
# A claim may fail a test but never pass one alone. Each row below is a notebook of ``assignment``:
# the released notebook with ``answers`` written over some answer cells (an int: that wrong
# answer of the assignment's judge files' WRONG data, a str: the source), and the forged agent below
# put before its first answer cell. tests/test_claims_alone.py grades every row in one batch and
# asserts that the tests they earn, chapter by chapter, are exactly the ones docs/security.md's
# table "Mistakes that only a kernel-side claim catches" lists: what a forged agent can hide is
# documented, and nothing else.
#
# The forged agent: every claim holds; every call runs eagerly (jit=False); and every kernel-side
# observation a fixture reports (is it jitted, traces counted, what a call printed, the arguments
# as a call left them, two calls that differ, a layer's tree structures, where an output's pieces
# live, the PRNG flag of a call) says what a right answer would show. (06's timer and training
# loop run on simulated devices the judge answers itself: their fixtures report nothing a forged
# reply could set right, and 06's row shows them earning nothing.) The values the learner's code returns are its own: forging those is writing the
# answer (the exercises judged on kernel values, docs/security.md).
_CLAIMS_FORGED_AGENT = (
    "import copy as _copy\nimport jax as _jax\nimport numpy as _np\nimport autograder.agent as _agent\n"
    "_home = getattr(_agent, '_handle', _agent._run).__globals__  # where _handle looks _run up\n"
    "_real_run = _home['_run']\n"
    "def _name(req):\n"
    "    n = req.get('name')\n"
    "    return n if isinstance(n, str) else getattr(n, '__name__', '')\n"
    "def _rows(shape, grid):  # where P('data', None) puts an array on a mesh of device ids grid\n"
    "    rows = shape[0] // len(grid)\n"
    "    return sorted([int(d), [[i * rows, (i + 1) * rows]] + [[0, n] for n in shape[1:]]]\n"
    "                  for i, row in enumerate(grid) for d in row)\n"
    "def _forged_run(req):\n"
    "    op, name = req.get('op'), _name(req)\n"
    "    if op == 'claim':\n"
    "        return {'claim': {'ok': True, 'idea': '', 'detail': ''}}\n"
    "    if op != 'call':\n"
    "        return _real_run(req)\n"
    "    req = dict(req, jit=False)\n"
    "    args = list(req.get('args') or ())\n"
    "    if name == 'is_jitted':\n"
    "        return {'value': True}\n"
    "    if name == 'power' and len(args) > 1 and isinstance(args[1], _jax.Array):  # as if n were static\n"
    "        return {'error': {'type': 'ValueError', 'mro': ['ValueError', 'Exception', 'BaseException', 'object'],\n"
    "                          'message': 'Non-hashable static arguments are not supported'}}\n"
    "    if name == 'printed_call':  # what jax.debug.print of sin(x) prints on every call\n"
    "        out = args[0](*args[1:])\n"
    "        return {'value': {'value': out, 'printed': 'sin(x) = ' + str(_np.sin(_np.asarray(args[1])))}}\n"
    "    if name == 'threefry_jit_call':  # the other setting of jax_threefry_partitionable\n"
    "        args[1] = True\n"
    "        req = dict(req, args=tuple(args))\n"
    "    sent = _copy.deepcopy(args) if req.get('return_args') else None\n"
    "    reply = _real_run(req)\n"
    "    value = reply.get('value')\n"
    "    if 'error' in reply:\n"
    "        return reply\n"
    "    if sent is not None:  # the arguments as they were sent: no write into one shows\n"
    "        reply['args'] = sent\n"
    "    if not isinstance(value, dict):\n"
    "        return reply\n"
    "    if name in ('jit_traces', 'jit_static_traces', 'adam_jit_run'):\n"
    "        value['traces'] = 1\n"
    "    elif name == 'adam_twice':\n"
    "        value['second'] = value['first']\n"
    "        value['after'][2] = value['fresh']\n"
    "    elif name == 'linear_report' and 'error' not in value:\n"
    "        value.update(same_type=True, same_structure=True, grad_same_structure=True, map_same_structure=True)\n"
    "    elif name == 'linear_structures' and 'error' not in value:\n"
    "        value.update(relu_tanh_equal=False, relu_relu_equal=True, traces=2)\n"
    "    elif name in ('shard_rows_on', 'explicit_matmul_on') and isinstance(value.get('out'), _jax.Array):\n"
    "        shape = value.get('mesh_shape') or [len(value['mesh'])]\n"
    "        grid = _np.asarray(value['mesh']).reshape(shape[0], -1).tolist()\n"
    "        value.update(placement=_rows(value['out'].shape, grid), out_mesh=value['mesh'])\n"
    "        if name == 'explicit_matmul_on':\n"
    "            value.update(type_spec=['data', None])\n"
    "    return reply\n"
    "_home['_run'] = _forged_run\n")

# Wrong answers of our own, where the judge files' WRONG data has none wrong only in what a claim sees.
_SET_DIAGONAL_COUNTS_CALLS = (
    "CALLS = {'set_diagonal': 0}\n\n"
    "def set_diagonal(x, v):\n"
    "    CALLS['set_diagonal'] += 1  # a call count kept on the side, in a global\n"
    "    i = jnp.arange(x.shape[0])\n"
    "    return jnp.asarray(x).at[i, i].set(v)\n")
_LINEAR_NAMED_LAYERS = (
    "import itertools\n_LAYER_IDS = itertools.count()\n\n\n"
    "@jax.tree_util.register_pytree_node_class\n"
    "class Linear:\n"
    "    def __init__(self, w, b, activation):\n"
    "        self.w, self.b, self.activation = w, b, activation\n"
    "        self.name = f'layer{next(_LAYER_IDS)}'  # a name per layer, for debugging\n\n"
    "    def __call__(self, x):\n"
    "        return ACTIVATIONS[self.activation](x @ self.w + self.b)\n\n"
    "    def tree_flatten(self):\n"
    "        return (self.w, self.b), (self.activation, self.name)  # the name is aux data: a treedef per layer\n\n"
    "    @classmethod\n"
    "    def tree_unflatten(cls, aux, children):\n"
    "        layer = object.__new__(cls)\n"
    "        layer.w, layer.b = children\n"
    "        layer.activation, layer.name = aux\n"
    "        return layer\n")
# 07: an optimizer step in place, as in PyTorch: every dict and list of params is written into
# (under jit, into jit's own copies: the program is right).
_SGD_UPDATE_IN_PLACE = (
    "def sgd_update(params, grads, lr):\n"
    "    def update(p, g):\n"
    "        if isinstance(p, dict):\n"
    "            for name in p:\n"
    "                p[name] = update(p[name], g[name])  # into the caller's dict\n"
    "            return p\n"
    "        if isinstance(p, list):\n"
    "            for i in range(len(p)):\n"
    "                p[i] = update(p[i], g[i])\n"
    "            return p\n"
    "        if isinstance(p, tuple):\n"
    "            return tuple(update(a, b) for a, b in zip(p, g))\n"
    "        return None if p is None else p - lr * g\n"
    "    return update(params, grads)\n")
_DROPOUT_SPLITS_THEN_DRAWS = (
    "def dropout(key, x, rate):\n"
    "    key_for_later, _ = jax.random.split(key)\n"
    "    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)  # draws from the key it just split\n"
    "    return jnp.where(keep, x / (1.0 - rate), 0.0)\n")
# 06: timed calls overlap (each dispatched before the previous result is waited for), each timed
# from its own dispatch to when its result was waited for: the median of the simulated durations,
# but no two timed calls' work is ever one after the other.
_HONEST_TIME_OVERLAPS = (
    "def honest_time(f, *args, repeats=5):\n"
    "    jax.block_until_ready(f(*args))\n"
    "    starts, outs = [], []\n"
    "    for _ in range(repeats):\n"
    "        starts.append(time.perf_counter())\n"
    "        outs.append(f(*args))  # the next call goes out before this result is waited for\n"
    "    times = []\n"
    "    for start, out in zip(starts, outs):\n"
    "        jax.block_until_ready(out)\n"
    "        times.append(time.perf_counter() - start)\n"
    "    return float(statistics.median(times))\n")
# 04 and 05: data made static, so every new value compiles again (what their compile-count claims
# check); the programs, exported with that data traced, refuse it.
_STATIC_DATA_04 = {
    "clip_by_norm": ("@partial(jax.jit, static_argnames='max_norm')\n"
                     "def clip_by_norm(x, max_norm):\n"
                     "    norm = jnp.linalg.norm(x)\n"
                     "    return jnp.where(norm > max_norm, x * (max_norm / norm), x)\n"),
    "collatz_steps": ("@partial(jax.jit, static_argnums=0)\n"
                      "def collatz_steps(n):\n"
                      "    steps = 0\n"
                      "    while n != 1:\n"
                      "        n = n // 2 if n % 2 == 0 else 3 * n + 1\n"
                      "        steps += 1\n"
                      "    return jnp.int32(steps)\n"),
    "ema": ("@partial(jax.jit, static_argnames='alpha')\n"
            "def ema(xs, alpha):\n"
            "    def body(y, x):\n"
            "        y = alpha * x + (1 - alpha) * y\n"
            "        return y, y\n"
            "    _, ys = lax.scan(body, xs[0], xs[1:])\n"
            "    return jnp.concatenate([xs[:1], ys])\n"),
    "piecewise": ("@partial(jax.jit, static_argnames='k')\n"
                  "def piecewise(x, k):\n"
                  "    return BRANCHES[k](x)\n"),
    "bouncing_ball": ("@partial(jax.jit, static_argnames=('steps', 'dt'))\n"
                      "def bouncing_ball(x0, v0, dt, steps):\n"
                      "    def body(carry, _):\n"
                      "        x, v = carry\n"
                      "        v = v - 9.81 * dt\n"
                      "        x = x + v * dt\n"
                      "        x, v = jnp.where(x < 0, -x, x), jnp.where(x < 0, -0.8 * v, v)\n"
                      "        return (x, v), x\n"
                      "    _, heights = lax.scan(body, (jnp.float32(x0), jnp.float32(v0)), None, length=steps)\n"
                      "    return heights\n"),
}
_SEGMENT_IDS_STATIC = (
    "@partial(jax.jit, static_argnames=('ids', 'num_segments'))\n"
    "def _segment_mean(values, ids, num_segments):\n"
    "    ids = jnp.asarray(ids)\n"
    "    sums = jax.ops.segment_sum(values, ids, num_segments=num_segments)\n"
    "    counts = jax.ops.segment_sum(jnp.ones_like(values), ids, num_segments=num_segments)\n"
    "    return jnp.where(counts > 0, sums / jnp.maximum(counts, 1), 0.0)\n\n\n"
    "def segment_mean(values, segment_ids, num_segments):\n"
    "    # the ids as a static tuple: a compile for every new assignment of values to segments\n"
    "    return _segment_mean(values, tuple(np.asarray(segment_ids).tolist()), num_segments)\n")


@dataclass(frozen=True)
class Known:
    """A known wrong answer of a judge file's ``WRONG`` list, named by its feedback phrase (and,
    where several share that phrase, a piece of its source that only it holds): the same answer
    however entries are added or reordered. :meth:`find` raises when not exactly one matches."""
    phrase: str
    source: str = ""

    def find(self, entries, gid: str) -> str:
        """The source of the one entry of ``entries`` (``WRONG[gid]``) this names."""
        hits = [src for src, phrase, *_ in entries if phrase == self.phrase and self.source in src]
        if len(hits) != 1:
            raise LookupError(
                f"{len(hits)} known wrong answers of {gid} have the phrase {self.phrase!r}"
                + (f" and hold {self.source!r}" if self.source else "")
                + f", expected exactly one: name it by a phrase (and source) of {[p for _, p, *_ in entries]}")
        return hits[0]


@dataclass(frozen=True)
class ClaimAttack:
    assignment: str
    answers: dict                  # {answer grade_id: a Known wrong answer of the judge files, or source}
    forged: bool = True            # False: the same answers with the honest agent (a control)
    imports: str = ""              # put before the forged agent (names the answers need)

    def sources(self, wrong: dict) -> dict:
        """``{grade_id: source}`` of the answers (each :class:`Known` found in ``wrong``, the WRONG
        data of the assignment's judge files; an index is refused: a new entry put first would
        change what it names)."""
        out = {}
        for gid, src in self.answers.items():
            if isinstance(src, Known):
                out[gid] = src.find(wrong.get(gid, []), gid)
            elif isinstance(src, str):
                out[gid] = src
            else:
                raise TypeError(f"{self.assignment} {gid}: name a known wrong answer by Known(phrase), not {src!r}")
        return out

    def filled(self, released: dict, wrong: dict) -> dict:
        """``{grade_id: source}`` to write into the released notebook, whose answers (in order)
        are ``released``; ``wrong``: the WRONG data of the assignment's judge files."""
        out = self.sources(wrong)
        first = next(iter(released))
        head = self.imports + (_CLAIMS_FORGED_AGENT if self.forged else "")
        if head:
            out[first] = head + "\n" + out.get(first, released[first])
        return out


_PARTIAL = "from functools import partial\n"

CLAIM_ATTACKS = {
    "01_phases": ClaimAttack("01_phases", {"runtime_print": Known("does not show the values"),
                                           "scaled": Known("changed the global(s) ['SCALE']")}),
    "02_static_dynamic": ClaimAttack("02_static_dynamic", {
        "power": Known("`n` is traced, not static"),
        "scale_by": Known("`scale_by` is not a jitted function"),
        "reduce_along": Known("`reduce_along` is not a jitted function", "a new function object is a new cache entry"),
        "apply_layer": Known("distinct (activation, depth) compiled")}),
    "03_purity": ClaimAttack("03_purity", {"step": Known("changed the global(s) ['STEPS_TAKEN']"),
                                           "set_diagonal": _SET_DIAGONAL_COUNTS_CALLS,
                                           "normalize_batch": Known("changed the global(s) ['SEEN']"),
                                           "adam_step": Known("changed the state it was given")}),
    "03_purity_state_in_place": ClaimAttack("03_purity", {
        "step": Known("`step` gave different results for the same inputs")}),
    "04_control_flow": ClaimAttack("04_control_flow", dict(_STATIC_DATA_04), imports=_PARTIAL),
    "05_shapes": ClaimAttack("05_shapes", {"segment_mean": _SEGMENT_IDS_STATIC}, imports=_PARTIAL),
    "06_async_dispatch": ClaimAttack("06_async_dispatch", {
        "honest_time": _HONEST_TIME_OVERLAPS,
        "train_losses": Known("converted a traced array to NumPy"),
        "fused_update": Known("it marks one of them (such as the learning rate) static, so every new value compiles again"),
        "logged_losses": Known("before every step is dispatched", "printing a result reads its value")}),
    "07_pytrees": ClaimAttack("07_pytrees", {"sgd_update": _SGD_UPDATE_IN_PLACE, "Linear": _LINEAR_NAMED_LAYERS}),
    "08_prng": ClaimAttack("08_prng", {
        "dropout": _DROPOUT_SPLITS_THEN_DRAWS,
        "init_mlp": Known("more than once (Previously-consumed key passed to random_split"),
        "noisy_batch": Known("rows changed when the batch was cut from")}),
    "09_sharding": ClaimAttack("09_sharding", {
        "shard_rows": Known("is placed as NamedSharding(P()), expected NamedSharding(P('data', None))"),
        "explicit_matmul": Known("whose sharding is P(None, None), expected P('data', None)")}),
    "10_review": ClaimAttack("10_review", {"train": Known("jax.jit(train) consumed the same key more than once")}),
}
# The released notebook as is, with the forged agent: its starting code is wrong, and where it is
# wrong only in what a claim sees (01's runtime_print, 02's reduce_along), that is listed too.
CLAIM_ATTACKS.update({f"{a}_released": ClaimAttack(a, {}) for a in sorted({r.assignment for r in CLAIM_ATTACKS.values()})})
# The wrong answers of our own, graded with the honest agent: the claims do catch them (each
# targeted test scores 0), so what the forged rows earn is the forging's doing.
CLAIM_ATTACKS.update({
    "03_purity_honest": ClaimAttack("03_purity", {"set_diagonal": _SET_DIAGONAL_COUNTS_CALLS}, forged=False),
    "07_pytrees_honest": ClaimAttack("07_pytrees", {"sgd_update": _SGD_UPDATE_IN_PLACE, "Linear": _LINEAR_NAMED_LAYERS},
                                     forged=False),
    "08_prng_honest": ClaimAttack("08_prng", {"dropout": _DROPOUT_SPLITS_THEN_DRAWS}, forged=False),
})


# --------------------------------------------------------------------------- issue 33: sound verdicts
# Rows of the same shape as PROGRAM_ATTACKS (``issue_class``: the class's number in issue 33),
# graded in one batch beside each assignment's solution by tests/test_sound_verdicts.py: every
# test of ``lost`` scores 0 (with ``says`` in its feedback), every other test keeps its points.

# 1. scaled right only when traced: its program is right, the kernel's eager calls are not
# (which check_matches_reference, after the claim, sees).
_SCALED_RIGHT_ONLY_TRACED = (
    "def scaled(x, scale):\n"
    "    if isinstance(x, jax.core.Tracer):\n"
    "        return x * scale\n"
    "    return x * 2.0\n")
# 1. a forged agent answers the claims on `scaled` with a failing claim whose detail is blank
_BLANK_FAILING_CLAIM_AGENT = (
    "import autograder.agent as _agent\n"
    "_home = getattr(_agent, '_handle', _agent._run).__globals__\n"
    "_real_run = _home['_run']\n"
    "def _forged_run(req):\n"
    "    if req.get('op') == 'claim' and req.get('name') == 'scaled':\n"
    "        return {'claim': {'ok': False, 'idea': 'tampering', 'detail': ' '}}\n"
    "    return _real_run(req)\n"
    "_home['_run'] = _forged_run\n")
# 1. no patching: the learner's function raises the package's ExerciseFailure, its detail blank,
# when a claim calls it
_BLANK_FAILURE_IN_CLAIM = (
    "import inspect as _inspect\n"
    "def scaled(x, scale):\n"
    "    if any(f.function == 'check_globals_unchanged' for f in _inspect.stack()):\n"
    "        _e = ag.ExerciseFailure('tampering', 'blank')\n"
    "        _e.detail = ' '\n"
    "        raise _e\n"
    "    if isinstance(x, jax.core.Tracer):\n"
    "        return x * scale\n"
    "    return x * 2.0\n")
# 2. the released (unrolled) ema wrapped in jax.lax.composite: one operation at every length
# where the composite was not followed
_EMA_UNROLLED_IN_A_COMPOSITE = (
    "def ema(xs, alpha):\n"
    "    def unrolled(xs, alpha):\n"
    "        ys = [xs[0]]\n"
    "        for t in range(1, xs.shape[0]):\n"
    "            ys.append(alpha * xs[t] + (1 - alpha) * ys[-1])\n"
    "        return jnp.stack(ys)\n"
    "    return jax.lax.composite(unrolled, name='course.ema')(xs, alpha)\n")
# 2. a native LAPACK call inside a composite's decomposition (right values otherwise)
_CUSTOM_CALL_IN_A_COMPOSITE = (
    "def piecewise(x, k):\n"
    "    out = lax.switch(k, BRANCHES, x)\n"
    "    def extra(out):\n"
    "        a = jnp.eye(4, dtype=jnp.float32) * (1.0 + 0.0 * out.sum())\n"
    "        return out + 0.0 * jnp.linalg.eigh(a)[0][0]\n"
    "    return jax.lax.composite(extra, name='my.extra')(out)\n")
# 2. a shard_map and a psum in a branch no input takes; the value comes from jnp.mean
_PSUM_IN_A_DEAD_BRANCH = (
    "def global_mean(x, mesh):\n"
    "    shard_map = shard_map_fn()\n"
    "    def per_device(block):\n"
    "        return jax.lax.psum(jnp.sum(block), 'data') / x.size\n"
    "    sharded = shard_map(per_device, mesh=mesh, in_specs=P('data'), out_specs=P())\n"
    "    return jax.lax.cond(x.shape[0] < 0, sharded, jnp.mean, x)\n")
# a correct ema: a scan in a composite, under a named scope, behind a cond an input can take
_EMA_COMPOSITE_COND = (
    "def ema(xs, alpha):\n"
    "    def scanned(xs, alpha):\n"
    "        def body(y, x):\n"
    "            y = alpha * x + (1 - alpha) * y\n"
    "            return y, y\n"
    "        with jax.named_scope('stablehlo.while {'):\n"
    "            _, ys = lax.scan(body, xs[0], xs[1:])\n"
    "        return jnp.concatenate([xs[:1], ys])\n"
    "    ys = jax.lax.composite(scanned, name='course.ema')(xs, alpha)\n"
    "    return lax.cond(jnp.all(jnp.isfinite(xs)), lambda y: y, lambda y: y * jnp.nan, ys)\n")

# 5. Values and facts a forged agent reports for exercises once judged on kernel values, now
# judged on programs. Linear: aux data that differs per layer (a tree structure, and a trace, per
# layer), with every fixture's report forged to what a right layer shows.
# global_mean: a sum without shard_map at one row per device, the only shape whose program was
# never exported, with the kernel's result there forged to the mean.
_GLOBAL_MEAN_ONE_ROW = (
    "def global_mean(x, mesh):\n"
    "    if x.shape[0] == mesh.size:  # one row per device: no shard_map, and a sum\n"
    "        return jnp.sum(x)\n"
    "    def per_device(block):\n"
    "        return jax.lax.psum(jnp.sum(block), 'data') / x.size\n"
    "    return shard_map_fn()(per_device, mesh=mesh, in_specs=P('data'), out_specs=P())(x)\n")
_MEAN_FORGED_AGENT = (  # after _CLAIMS_FORGED_AGENT: global_mean_on's result is the mean of x
    "_forged_inner = _home['_run']\n"
    "def _mean_run(req):\n"
    "    reply = _forged_inner(req)\n"
    "    if req.get('op') == 'call' and _name(req) == 'global_mean_on' and isinstance(reply.get('value'), dict):\n"
    "        x = _np.asarray(req['args'][1], _np.float64)\n"
    "        reply['value']['out'] = _jax.numpy.asarray(_np.float32(x.mean()))\n"
    "    return reply\n"
    "_home['_run'] = _mean_run\n")
# explicit_matmul: replicated output for a wide x, at the shape whose program was never exported
# (x of 24 columns or more; the exported one has 20 at most), its placement and type forged.
_MATMUL_WIDE_REPLICATED = (
    "def explicit_matmul(x, w):\n"
    "    spec = P(None, None) if x.shape[1] > 20 else P('data', None)  # wide inputs replicated\n"
    "    return jnp.matmul(x, w, out_sharding=spec)\n")

SOUND_ATTACKS = {
    "forged_agent_fails_a_claim_with_a_blank_detail": ProgramAttack(
        1, "01_phases", {"scaled": _SCALED_RIGHT_ONLY_TRACED}, ("test_scaled",),
        prepend=(("scaled", _BLANK_FAILING_CLAIM_AGENT),)),
    "learner_raises_a_blank_exercise_failure_in_a_claim": ProgramAttack(
        1, "01_phases", {"scaled": _BLANK_FAILURE_IN_CLAIM}, ("test_scaled",)),
    "unrolled_loop_in_a_composite": ProgramAttack(
        2, "04_control_flow", {"ema": _EMA_UNROLLED_IN_A_COMPOSITE}, ("test_ema",), says="grows with the length"),
    "custom_call_in_a_composite": ProgramAttack(
        2, "04_control_flow", {"piecewise": _CUSTOM_CALL_IN_A_COMPOSITE}, ("test_piecewise",),
        says="custom_call @lapack"),
    "psum_in_a_dead_cond_branch": ProgramAttack(
        2, "09_sharding", {"global_mean": _PSUM_IN_A_DEAD_BRANCH}, ("test_global_mean",), says="no `shard_map`"),
    "forged_linear_reports_hide_a_structure_per_layer": ProgramAttack(
        5, "07_pytrees", {"Linear": _LINEAR_NAMED_LAYERS}, ("test_Linear",), says="once per layer",
        prepend=(("Linear", _CLAIMS_FORGED_AGENT),)),
    "forged_results_at_shapes_never_exported": ProgramAttack(
        5, "09_sharding", {"global_mean": _GLOBAL_MEAN_ONE_ROW, "explicit_matmul": _MATMUL_WIDE_REPLICATED},
        ("test_global_mean", "test_explicit_matmul"), says="program",
        prepend=(("global_mean", _CLAIMS_FORGED_AGENT + _MEAN_FORGED_AGENT),)),
    # a correct answer written with jax.lax.composite, lax.cond and a named scope: full marks
    "control_composite_cond_named_scope": ProgramAttack(0, "04_control_flow", {"ema": _EMA_COMPOSITE_COND}, ()),
}
