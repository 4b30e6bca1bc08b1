"""The kernel zygote (autograder.sandbox.containment.Zygote, launcher.py's "kernel zygote"): a batch's
contained kernels are forks of one Python with ipykernel imported, and each is contained exactly
as a kernel started fresh is; the zygote serves nothing but a sandbox's first process."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import fill_answers, released_notebook, run_grader, solution_notebook

A = "01_phases"
ROOT_WITH_UNSHARE = hasattr(os, "geteuid") and os.geteuid() == 0 and bool(shutil.which("unshare"))
pytestmark = pytest.mark.skipif(not ROOT_WITH_UNSHARE, reason="contained kernels are root's")

# What a kernel can observe of its containment, written by the learner's answer into its error
# (the judge calls primitive_names first; its feedback carries the message).
PROBE = r'''
import os, sys, resource, socket, re
def _facts():
    def masked(text):
        return re.sub(r"run-[a-z0-9_]+", "run-X", re.sub(r"autograder-\d+-\d+", "autograder-U", text))
    try:
        socket.create_connection(("10.255.255.1", 9), timeout=0.5)
        net = "reached"
    except OSError as exc:
        net = type(exc).__name__
    limits = [resource.getrlimit(getattr(resource, n)) for n in
              ("RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_NPROC", "RLIMIT_NOFILE")]
    return dict(
        uid=os.getuid(), euid=os.geteuid(), groups=os.getgroups(), sid=os.getsid(0) == os.getpid(),
        pids=sorted(int(p) for p in os.listdir("/proc") if p.isdigit()) == [os.getpid()],
        root=sorted(os.listdir("/")), cwd=masked(os.getcwd()), env=sorted(os.environ),
        home=masked(os.environ.get("HOME", "")), tmp=masked(__import__("tempfile").gettempdir()),
        limits=limits, nice=os.getpriority(os.PRIO_PROCESS, 0), umask=os.umask(0o022),
        cgroup=masked(open("/proc/self/cgroup").read()), net=net, argv=[masked(a) for a in sys.argv[1:]],
        path=sys.path, nnp=open("/proc/self/status").read().split("NoNewPrivs:")[1].split()[0],
        caps=open("/proc/self/status").read().split("CapEff:")[1].split()[0],
        jax=sorted((k, repr(v)) for k, v in __import__("jax").config.values.items()),
        meta_path=[type(f).__name__ for f in sys.meta_path], first=os.getpid() == 1)
def primitive_names(f, *args):
    import hashlib, json
    facts = _facts()
    shown = {k: facts.pop(k) for k in ("uid", "euid", "groups", "first", "pids", "net", "nnp", "caps", "sid")}
    shown["cgroup"] = "autograder-U" in facts["cgroup"]
    shown["digest"] = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    raise ValueError("FACTS" + json.dumps(shown) + "END")
'''


def _probes(tmp: Path, n: int) -> list[Path]:
    return [fill_answers(released_notebook(A), {"primitive_names": PROBE}, tmp / f"s{i}" / A / f"{A}.ipynb")
            for i in range(n)]


def _facts(result) -> dict:
    feedback = next(t["feedback"] for t in result["tests"] if t["exercise"] == "primitive_names")
    found = re.search(r"FACTS(\{.*\})END", feedback, re.S)
    assert found, feedback[:2000]
    return json.loads(found.group(1))


def test_a_batchs_kernels_are_the_zygotes_forks_and_contained_as_fresh_ones(tmp_path):
    paths = _probes(tmp_path, 2)
    forked, _, code = run_grader(paths, "--jobs", "2")
    assert code == 0
    fresh, _, code = run_grader(paths, "--jobs", "2", env={"AUTOGRADER_KERNEL_ZYGOTE": "off"})
    assert code == 0
    for z, f in zip(forked, fresh):
        assert z["containment"] == f["containment"] == "namespaces+uid"
        zf, ff = _facts(z), _facts(f)
        # a fork of the zygote is not its namespace's first process (the launcher is), and sees no
        # other process (proc's hidepid=2); a fresh kernel is that first process
        assert zf.pop("first") is False and ff.pop("first") is True
        assert zf.pop("sid") is True  # a session of its own (not the zygote's)
        ff.pop("sid")
        assert zf["pids"] is True and ff["pids"] is True
        assert 61000 <= zf["uid"] == zf["euid"] and zf["groups"] == []
        assert zf["net"] != "reached" and zf["nnp"] == "1" and int(zf["caps"], 16) == 0
        assert zf["cgroup"] is True  # its memory cgroup joined
        zf.pop("uid"), ff.pop("uid"), zf.pop("euid"), ff.pop("euid")
        # everything else it can see of its containment is the same: the view, its folder, its
        # environment's names, HOME and TMPDIR, its limits, nice value, umask, cgroup, sys.argv,
        # sys.path, JAX's options, sys.meta_path (the preloaded modules' finder gone once JAX is
        # imported) (compared as one digest: the feedback's message is short)
        assert zf == ff


# jax_enable_x64 as the notebook's cells left it (the judge's requests run with JAX's defaults)
X64_CELL = "import jax\n_X64 = bool(jax.config.jax_enable_x64)"
X64_PROBE = "def primitive_names(f, *args):\n    raise ValueError('X64=%s END' % globals().get('_X64'))\n"


def test_a_notebook_that_sets_jaxs_variables_before_importing_it_is_graded_as_on_a_fresh_kernel(tmp_path):
    """The zygote imported JAX before this notebook set JAX_ENABLE_X64: its kernel stops at
    ``import jax`` (launcher.py's "preloaded modules") and the notebook is graded again on a
    fresh kernel, which honours the variable; the batch's other kernel keeps the zygote's JAX."""
    import nbformat

    plain = fill_answers(released_notebook(A), {"primitive_names": X64_PROBE}, tmp_path / "plain" / A / f"{A}.ipynb")
    x64 = fill_answers(solution_notebook(A), {"primitive_names": X64_PROBE}, tmp_path / "x64" / A / f"{A}.ipynb")
    for path in (plain, x64):
        nb = nbformat.read(str(path), as_version=4)
        if path == x64:
            nb.cells.insert(0, nbformat.v4.new_code_cell('import os\nos.environ["JAX_ENABLE_X64"] = "1"'))
        nb.cells.append(nbformat.v4.new_code_cell(X64_CELL))
        nbformat.write(nb, str(path))

    def x64_seen(result):
        feedback = next(t["feedback"] for t in result["tests"] if t["exercise"] == "primitive_names")
        found = re.search(r"X64=(\w+) END", feedback)
        assert found, feedback[:2000]
        return found.group(1)

    def passed(result):
        return {t["exercise"]: t["passed"] for t in result["tests"]}

    (z_plain, z_x64), stderr, code = run_grader([plain, x64], "--jobs", "2")
    assert code == 0, stderr[-2000:]
    again = [line for line in stderr.splitlines() if "graded again on a fresh kernel" in line]
    assert len(again) == 1 and str(x64) in again[0], stderr[-2000:]  # the plain one used the zygote's JAX
    assert "JAX_ENABLE_X64 changed before the import of jax" in again[0]
    (f_plain, f_x64), _, code = run_grader([plain, x64], "--jobs", "2", env={"AUTOGRADER_KERNEL_ZYGOTE": "off"})
    assert code == 0
    assert x64_seen(z_x64) == x64_seen(f_x64) == "True"
    assert x64_seen(z_plain) == x64_seen(f_plain) == "False"
    assert passed(z_x64) == passed(f_x64) and passed(z_plain) == passed(f_plain)
    assert z_x64["score"] == f_x64["score"] > 0 and z_x64.get("error") is None


def test_a_submission_that_forges_the_fresh_kernel_mark_is_graded_again_once_and_normally(tmp_path):
    """The mark a kernel leaves to be graded again (launcher.py's "preloaded modules") is in the
    learner's reach: forged, it costs one more grading on a fresh kernel, whose own mark is not
    read, and nothing else."""
    import nbformat

    forged = tmp_path / "forged" / A / f"{A}.ipynb"
    forged.parent.mkdir(parents=True)
    nb = nbformat.read(str(solution_notebook(A)), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import os\nwith open(os.path.join(os.environ['HOME'], '.autograder-fresh-kernel'), 'w') as f:\n"
        "    f.write('forged by the learner\\x1b[2J')"))
    nbformat.write(nb, str(forged))
    plain = _probes(tmp_path, 1)[0]
    (r_forged, _), stderr, code = run_grader([forged, plain], "--jobs", "2")
    assert code == 0, stderr[-2000:]
    again = [line for line in stderr.splitlines() if "graded again on a fresh kernel" in line]
    assert len(again) == 1 and again[0].endswith("forged by the learner[2J"), stderr[-2000:]  # no escape
    assert r_forged["score"] == r_forged["max_score"] > 0 and r_forged.get("error") is None


def test_a_kernel_of_the_zygote_is_interrupted_when_a_call_hangs_and_grading_goes_on(tmp_path):
    """The judge interrupts a request that ran past its time (SIGINT to the kernel's process
    group: the launcher passes it on to the fork); the kernel is then idle and the other tests
    are judged as usual."""
    hangs = "def primitive_names(f, *args):\n    import time\n    time.sleep(600)\n"
    hung = fill_answers(solution_notebook(A), {"primitive_names": hangs}, tmp_path / "hung" / A / f"{A}.ipynb")
    other = _probes(tmp_path, 1)[0]
    (r_hung, r_other), stderr, code = run_grader([hung, other], "--jobs", "2", "--cell-timeout", "8")
    assert code == 0, stderr[-2000:]
    assert _facts(r_other)["first"] is False  # a kernel of the zygote
    passed = {t["exercise"]: t["passed"] for t in r_hung["tests"]}
    assert passed.pop("primitive_names") is False
    assert all(passed.values()), r_hung["tests"]


def _ask(zygote, request: dict, fds=(0, 1, 2)) -> dict:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    conn.connect(zygote.socket)
    socket.send_fds(conn, [json.dumps(request).encode()], list(fds))
    conn.settimeout(30)
    try:
        return json.loads(conn.recv(1 << 16))
    finally:
        conn.close()


def test_the_zygote_serves_only_a_sandboxs_first_process():
    from autograder.sandbox.containment.containment import Zygote

    zygote = Zygote.start()
    assert zygote is not None and zygote.ready()
    try:
        assert oct(os.stat(zygote.folder).st_mode & 0o777) == "0o700"
        assert os.stat(zygote.socket).st_mode & 0o077 == 0 and os.stat(zygote.socket).st_uid == 0
        request = {"uid": 61000, "cwd": "/", "env": {}, "argv": ["-f", "/nonexistent.json"], "paths": []}
        # this process: root, but in the machine's namespaces and not a namespace's first process
        assert "outside a sandbox" in _ask(zygote, request)["error"]
        assert "not a sandbox uid" in _ask(zygote, {**request, "uid": 0})["error"]
        assert "not a sandbox uid" in _ask(zygote, {**request, "uid": 1000})["error"]
        assert "malformed" in _ask(zygote, {"cwd": "/"})["error"]
        # the first process of a new PID namespace, but in the zygote's own mount, network and
        # IPC namespaces (no view, the machine's network): refused too
        asker = textwrap.dedent(f"""
            import json, socket
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            conn.connect({zygote.socket!r})
            socket.send_fds(conn, [json.dumps({request!r}).encode()], [0, 1, 2])
            print(conn.recv(65536).decode())
        """)
        proc = subprocess.run([shutil.which("unshare"), "--pid", "--fork", "--kill-child", sys.executable,
                               "-c", asker], capture_output=True, text=True, timeout=60)
        assert "the zygote's own namespaces" in json.loads(proc.stdout)["error"], proc.stderr
        assert zygote.alive()
    finally:
        zygote.stop()
    assert not zygote.alive() and not os.path.exists(zygote.folder)


def test_kernels_start_fresh_when_the_zygote_is_gone():
    from autograder.sandbox import containment as sandbox

    zygote = sandbox.Zygote.start()
    assert zygote is not None and zygote.ready()
    cmd = [sandbox.sys.executable, "-c", sandbox._NO_DEBUGGER, "-f", "k.json"]
    assert zygote.makes(cmd) and not zygote.makes(["python3", "-m", "ipykernel_launcher"])
    zygote.stop()
    assert not zygote.makes(cmd)
