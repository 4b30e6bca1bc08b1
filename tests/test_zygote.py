"""The kernel zygote (autograder.grader.sandbox.Zygote, launcher.py's "kernel zygote"): a batch's
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
        first=os.getpid() == 1)
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
        # sys.path (compared as one digest: the feedback's message is short)
        assert zf == ff


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
    from autograder.grader.sandbox import Zygote

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
    from autograder.grader import sandbox

    zygote = sandbox.Zygote.start()
    assert zygote is not None and zygote.ready()
    cmd = [sandbox.sys.executable, "-c", sandbox._NO_DEBUGGER, "-f", "k.json"]
    assert zygote.makes(cmd) and not zygote.makes(["python3", "-m", "ipykernel_launcher"])
    zygote.stop()
    assert not zygote.makes(cmd)
