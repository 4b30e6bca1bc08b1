"""The grader's containment, as a hostile learner would try it (issue 11: items 3-5).

Each probe below runs in a learner's kernel and writes what it *observed* into a folder the
test shares with it; every case is also run with the sandbox off (a control), where the same
probe must see or reach what it looks for: so each case can fail, and does, without the sandbox.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest

from autograder.common.course import test_cells as source_tests
from autograder.common.settings import Settings
from conftest import (ROOT, course_in_0700, grade_saving, printed, released_notebook, run_grader,
                      solution_notebook)

pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("grading")]

ROOT_WITH_BWRAP = hasattr(os, "geteuid") and os.geteuid() == 0 and bool(shutil.which("bwrap"))
needs_root = pytest.mark.skipif(not ROOT_WITH_BWRAP,
                                reason="a uid and cgroups of its own are the grader's as root, with bubblewrap")
A, P = "01_phases", "03_purity"
TESTS_A = source_tests(solution_notebook(A))  # [(grade_id, points)] of A's source notebook
FULL = sum(points for _, points in TESTS_A)
SANDBOX_UIDS = range(61000, 61184)


def _grade(paths, *extra, env=None, cwd=ROOT, timeout=900):
    data, stderr, code = run_grader(paths, *extra, env=env, cwd=cwd, timeout=timeout)
    return (data if isinstance(data, list) else [data]), stderr, code


def test_the_limits_launcher_sets_its_limits_and_refuses_an_orphan():
    """``launcher limits`` (how every kernel starts): the CPU-time limit and no core dumps are
    set before the command runs; started for a parent that is not its own (that parent ended
    before the death signal was asked for), it runs nothing."""
    launch = [sys.executable, "-m", "autograder.sandbox.launcher", "limits", "--cpu=7"]
    show = [sys.executable, "-c", "import resource as r; "
            "print(r.getrlimit(r.RLIMIT_CPU), r.getrlimit(r.RLIMIT_CORE))"]
    ran = subprocess.run([*launch, f"--parent={os.getpid()}", "--", *show], capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split("\n")[0] == "(7, 12) (0, 0)", ran.stdout
    orphan = subprocess.run([*launch, f"--parent={os.getpid() + 1}", "--", *show],
                            capture_output=True, text=True, timeout=60)
    assert orphan.returncode == 1 and orphan.stdout == "", (orphan.returncode, orphan.stdout)


def _notebook(dest: Path, src: Path, first_cell: str | None = None, answers: dict | None = None) -> Path:
    """``src`` written to ``dest``, with a learner's cell added first and answer cells replaced."""
    nb = nbformat.read(str(src), as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if answers and gid in answers:
            cell.source = answers[gid]
    if first_cell is not None:
        nb.cells.insert(0, nbformat.v4.new_code_cell(first_cell))
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(dest))
    return dest


def _solution(assignment, gid):
    for c in nbformat.read(str(solution_notebook(assignment)), as_version=4).cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == gid:
            return c.source
    raise KeyError(gid)


MARK = f"AUTOGRADER_KERNEL_TAG=sandbox-{secrets.token_hex(6)}"  # in the environment of our kernels


def _sandbox_processes() -> list[str]:
    """Processes of sandbox uids started by this module's gradings (other graders may run
    beside it): their environment holds ``MARK``."""
    out = subprocess.run(["ps", "-eo", "uid=,pid=,args="], capture_output=True, text=True).stdout
    left = []
    for line in out.splitlines():
        uid, pid, *_ = line.split() + ["", ""]
        if not uid.isdigit() or int(uid) not in SANDBOX_UIDS:
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if MARK.encode() in environ:
            left.append(line)
    return left


@pytest.fixture(scope="module")
def run_dir():
    """A folder (in /run) that no deny-list names, holding the test's data: ``world/notes.txt``,
    readable by every uid, which the kernel's allow-listed view must not show."""
    path = Path(tempfile.mkdtemp(prefix="autograder-test-", dir="/run" if os.access("/run", os.W_OK) else None))
    path.chmod(0o755)
    (path / "world").mkdir(mode=0o755)
    (path / "world" / "notes.txt").write_text("readable by every uid\n")
    (path / "world" / "notes.txt").chmod(0o644)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# --------------------------------------------------------------------------- what a kernel can reach

_PROBE = """\
import glob, json, os, socket
seen = {{}}
def look(name, pattern):
    got = []
    for p in glob.glob(pattern):
        try:
            if os.path.isdir(p):
                got.append(["listed", p, len(os.listdir(p))])
            else:
                with open(p, "rb") as f:
                    got.append(["read", p, len(f.read())])
        except OSError:
            pass
    seen[name] = got
def reach(name, fn):
    try:
        fn()
        seen[name] = [["sent"]]
    except OSError as exc:
        seen[name] = []
import autograder
here = os.path.dirname(os.path.dirname(os.path.realpath(autograder.__file__)))
look("source notebook, found through autograder.__file__", here + "/solutions/*/*.ipynb")
look("judge file, found through autograder.__file__", here + "/solutions/*/judge.py")
look("source notebook in the course root", {course!r} + "/solutions/*/*.ipynb")
look("judge file in the course root", {course!r} + "/solutions/*/judge.py")
look("source notebook in the checkout", {checkout!r} + "/solutions/*/*.ipynb")
look("the submission's own gradebook", {tmpdir!r} + "/run-*/gradebook.db")
look("the cached template gradebooks", {cache!r} + "/*.db")
look("the course state's gradebook", {state!r} + "/gradebook.db")
look("another submission of the batch", {other!r})
look("a world-readable file the grader never named", {world!r})
seen["a variable of the grader's environment"] = [[k] for k in os.environ if k == {secret_var!r}]
def tcp():
    s = socket.create_connection(("127.0.0.1", {tcp_port}), timeout=3)
    s.sendall(b"hello")
    s.close()
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"hello", ("127.0.0.1", {udp_port}))
    s.close()
reach("a TCP connection to 127.0.0.1", tcp)
reach("a UDP datagram to 127.0.0.1", udp)
print("probe-report:", json.dumps(seen))
"""

CASES = ["source notebook, found through autograder.__file__", "judge file, found through autograder.__file__",
         "source notebook in the course root", "judge file in the course root",
         "source notebook in the checkout", "the submission's own gradebook",
         "the cached template gradebooks", "the course state's gradebook",
         "another submission of the batch", "a world-readable file the grader never named",
         "a variable of the grader's environment", "a TCP connection to 127.0.0.1",
         "a UDP datagram to 127.0.0.1"]


class _Listeners:
    """A TCP and a UDP socket on 127.0.0.1 that count what reaches them."""

    def __init__(self):
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.tcp.settimeout(0.5)
        self.udp.settimeout(0.5)
        self.got = {"tcp": 0, "udp": 0}
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop:
            for kind, sock in (("tcp", self.tcp), ("udp", self.udp)):
                try:
                    if kind == "tcp":
                        conn, _ = sock.accept()
                        conn.close()
                    else:
                        sock.recvfrom(100)
                    self.got[kind] += 1
                except OSError:
                    pass

    def reset(self):
        self.got = {"tcp": 0, "udp": 0}

    def close(self):
        self.stop = True
        self.thread.join(timeout=5)
        self.tcp.close()
        self.udp.close()


@pytest.fixture(scope="module")
def course_0700(run_dir):
    """A minimal course checkout (the autograder package, 03_purity's source, judge and release)
    in a 0700 temporary folder: the grader runs from there, with ``--root`` there."""
    course = course_in_0700(P)
    yield course
    shutil.rmtree(course, ignore_errors=True)


SECRET_VAR = "AWS_SECRET_ACCESS_KEY"  # as a cloud machine's grader may have in its environment


def _grade_saving(paths, saved: dict, root: Path, jobs: int, env: dict, cwd: Path, out: Path):
    return grade_saving(paths, saved, out, root=root, jobs=jobs, env=env, cwd=cwd)


def _report(saved: Path):
    """What the probe printed in the graded notebook (None if it never ran)."""
    text = printed(saved, "probe-report: ")
    return None if text is None else json.loads(text)


@pytest.fixture(scope="module")
def probed(course_0700, run_dir):
    """One batch graded from the 0700 course: a solved notebook (alice), the probe (bob), a blank
    one; then the probe alone with the sandbox off (the control)."""
    state = run_dir / "state"
    state.mkdir(mode=0o755)
    (state / "gradebook.db").write_text("the course's grades\n")
    (state / "gradebook.db").chmod(0o644)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jax-course-autograder"
    subs = run_dir / "subs"
    alice = _notebook(subs / "alice" / P / f"{P}.ipynb", solution_notebook(P))
    listeners = _Listeners()
    reports = {}
    try:
        probe = _PROBE.format(course=str(course_0700), checkout=str(ROOT), tmpdir=tempfile.gettempdir(),
                              cache=str(cache), state=str(state), other=str(alice),
                              tcp_port=listeners.tcp.getsockname()[1],
                              udp_port=listeners.udp.getsockname()[1],
                              world=str(run_dir / "world" / "notes.txt"), secret_var=SECRET_VAR)
        released = course_0700 / "exercises" / P / f"{P}.ipynb"
        bob = _notebook(subs / "bob" / P / f"{P}.ipynb", released, probe)
        blank = _notebook(subs / "carol" / P / f"{P}.ipynb", released)
        env = {"PYTHONPATH": str(course_0700), "COURSE_STATE": str(state), SECRET_VAR: "s3cr3t"}
        saved = {bob: run_dir / "graded" / "bob.ipynb"}
        results, stderr, code = _grade_saving([alice, bob, blank], saved, course_0700, 2, env, course_0700,
                                              run_dir / "contained.json")
        reached = dict(listeners.got)
        listeners.reset()
        dave = _notebook(subs / "dave" / P / f"{P}.ipynb", released, probe)
        control, control_err, _ = _grade_saving([dave], {dave: run_dir / "graded" / "dave.ipynb"}, course_0700,
                                                1, {**env, "AUTOGRADER_SANDBOX": "off"}, course_0700,
                                                run_dir / "control.json")
        time.sleep(1)
        control_reached = dict(listeners.got)
        reports = {"contained": _report(saved[bob]), "control": _report(run_dir / "graded" / "dave.ipynb")}
    finally:
        listeners.close()
    return dict(results=results or [{}] * 3, stderr=stderr, code=code, reports=reports, reached=reached,
                control=(control or [{}])[0], control_err=control_err, control_reached=control_reached)


@needs_root
def test_a_checkout_in_a_0700_folder_is_graded_contained(probed):
    alice, bob, blank = probed["results"]
    assert probed["code"] == 0, probed["stderr"][-3000:]
    for r in (alice, bob, blank):
        assert r["containment"] == "namespaces+uid", r
        assert "error" not in r, r["error"]
    assert alice["score"] == alice["max_score"] > 0, alice
    assert blank["score"] == 0 and bob["score"] == 0


@needs_root
@pytest.mark.parametrize("case", CASES)
def test_a_contained_kernel_cannot_reach(probed, case):
    contained, control = probed["reports"]["contained"], probed["reports"]["control"]
    assert contained is not None, "the probe did not run in the sandbox: the test proves nothing"
    assert control is not None, "the probe did not run without the sandbox"
    assert control[case], f"without the sandbox the probe cannot reach {case!r} either: it proves nothing"
    kind = {"a TCP connection to 127.0.0.1": "tcp", "a UDP datagram to 127.0.0.1": "udp"}.get(case)
    if kind:
        assert probed["control_reached"][kind] > 0, "the control's packets never arrived"
        assert probed["reached"][kind] == 0, f"the listener got {kind} from a contained kernel"
    if kind != "udp":  # a datagram is sent into the kernel's own network namespace: it never arrives
        assert contained[case] == [], f"a contained kernel reached {case}: {contained[case]}"


@needs_root
def test_the_control_ran_uncontained_and_says_so(probed):
    c = probed["control"]
    assert c["containment"] == "none" and "turned the sandbox off" in c["containment_reason"], c


# --------------------------------------------------------------------------- crashes and limits

_HOG = "import numpy as np\n_hog = np.ones(4 * 1024**3 // 8)\n_hog[:] = 2.0\n"
_BOMB = """\
import os, time
_children = []
try:
    while True:
        _pid = os.fork()
        if _pid == 0:
            time.sleep(600)
            os._exit(0)
        _children.append(_pid)
except OSError:  # the bomb was stopped: only then is the answer below defined
    for _pid in _children[: len(_children) // 2]:  # half its slots back, for the tests to run;
        os.kill(_pid, 9)                            # the other half must not outlive grading
        os.waitpid(_pid, 0)
"""
_KILL_PARENT = "import os\nos.kill(os.getppid(), 9)\n"
_KILL_ALL = "import os\nos.kill(-1, 9)\n"
_KILL_GROUP = "import os\nos.killpg(os.getpgid(os.getppid() or os.getpid()), 9)\n"


@pytest.fixture(scope="module")
def crashes(tmp_path_factory):
    """A contained batch (-j 2) of correct notebooks around ones that exhaust memory, fork, and
    try to kill their grading process, its group, or every process they may."""
    tmp = tmp_path_factory.mktemp("crashes")
    right = _solution(A, "primitive_names")
    nbs = {"good1": _notebook(tmp / "good1" / A / f"{A}.ipynb", solution_notebook(A)),
           # the answers are right, but come after the hog (the bomb) in the same cell
           "hog": _notebook(tmp / "hog" / A / f"{A}.ipynb", released_notebook(A), None,
                            {"primitive_names": _HOG + right}),
           "bomb": _notebook(tmp / "bomb" / A / f"{A}.ipynb", released_notebook(A), None,
                             {"primitive_names": _BOMB + right}),
           "kill_parent": _notebook(tmp / "kp" / A / f"{A}.ipynb", released_notebook(A), _KILL_PARENT),
           "kill_all": _notebook(tmp / "ka" / A / f"{A}.ipynb", released_notebook(A), _KILL_ALL),
           "kill_group": _notebook(tmp / "kg" / A / f"{A}.ipynb", released_notebook(A), _KILL_GROUP),
           "good2": _notebook(tmp / "good2" / A / f"{A}.ipynb", solution_notebook(A))}
    start = time.time()
    results, stderr, code = _grade(list(nbs.values()), "--jobs", "2",
                                   env={"AUTOGRADER_MEMORY_MB": "1024", "AUTOGRADER_NPROC": "256",
                                        MARK.split("=")[0]: MARK.split("=")[1]})
    took = time.time() - start
    time.sleep(1)
    return dict(results=dict(zip(nbs, results)), stderr=stderr, code=code, took=took,
                left=_sandbox_processes())


@needs_root
def test_crashing_submissions_change_no_other_grade(crashes):
    r = crashes["results"]
    assert crashes["code"] == 0, crashes["stderr"][-3000:]
    for name in ("good1", "good2"):
        assert r[name]["score"] == r[name]["max_score"] == FULL, r[name]
    for name, res in r.items():
        assert "error" not in res, (name, res.get("error"))
        assert res["containment"] == "namespaces+uid", (name, res)
    assert not crashes["left"], f"processes of sandbox uids outlived the batch: {crashes['left']}"


@pytest.fixture(scope="module")
def rlimit_batch(tmp_path_factory):
    """Where no memory cgroup can be made: a correct notebook (JAX under RLIMIT_DATA) and a hog."""
    tmp = tmp_path_factory.mktemp("rlimit")
    nbs = [_notebook(tmp / "good" / A / f"{A}.ipynb", solution_notebook(A)),
           _notebook(tmp / "hog" / A / f"{A}.ipynb", released_notebook(A), None,
                     {"primitive_names": _HOG + _solution(A, "primitive_names")})]
    results, stderr, code = _grade(nbs, "--jobs", "2",
                                   env={"AUTOGRADER_MEMORY_MB": "2048", "AUTOGRADER_MEMORY_CGROUP": "off"})
    return dict(zip(["good", "hog"], results))


MEMORY = [("cgroup", "crashes", "memory limit 1024 MiB (a memory cgroup"),
          ("rlimit", "rlimit_batch", "memory limit 2048 MiB per process (RLIMIT_DATA")]


@needs_root
@pytest.mark.parametrize("how,batch,reason", MEMORY, ids=[m[0] for m in MEMORY])
def test_a_memory_hog_is_stopped_and_loses_only_its_grade(request, how, batch, reason):
    results = request.getfixturevalue(batch)
    results = results["results"] if "results" in results else results
    hog = results["hog"]
    assert reason in hog["containment_reason"], hog
    passed = {t["exercise"]: t["passed"] for t in hog["tests"]}
    # its answer is right, but defined only after the 4 GiB it never got
    assert passed["primitive_names"] is False, hog
    assert hog["score"] == 0.0
    good = results.get("good") or results["good1"]
    assert good["score"] == good["max_score"] == FULL and reason in good["containment_reason"], good


_FILLER = ("with open('fill', 'wb') as _f:  # 32 MiB into the box, the notebook's own folder\n"
           "    for _ in range(32):\n        _f.write(b'0' * 2**20)\n        _f.flush()\n")


@needs_root
def test_a_submission_cannot_fill_the_disk(tmp_path):
    """A contained kernel writes only in its box (and private temporary folders), a tmpfs of
    AUTOGRADER_BOX_MB in its grading process's own mount namespace: a notebook writing past it
    gets "No space left on device" (its answer defined after the write never is), its other
    answers keep their marks, and so does the notebook graded beside it."""
    nbs = [_notebook(tmp_path / "good" / A / f"{A}.ipynb", solution_notebook(A)),
           _notebook(tmp_path / "filler" / A / f"{A}.ipynb", solution_notebook(A), None,
                     {"primitive_names": _FILLER + _solution(A, "primitive_names")})]
    results, stderr, code = _grade(nbs, "--jobs", "2", env={"AUTOGRADER_BOX_MB": "8"})
    good, filler = results
    assert good["score"] == good["max_score"] == FULL, good
    passed = {t["exercise"]: t["passed"] for t in filler["tests"]}
    assert passed == {gid.removeprefix("test_"): gid != "test_primitive_names" for gid, _ in TESTS_A}
    assert "files limited to 8 MiB (a tmpfs)" in filler["containment_reason"], filler
    assert not [line for line in Path("/proc/mounts").read_text().splitlines() if "/run-" in line]


@needs_root
def test_a_fork_bomb_is_stopped(crashes):
    bomb = crashes["results"]["bomb"]
    passed = {t["exercise"]: t["passed"] for t in bomb["tests"]}
    # its answer is defined only once fork() failed: the bomb met the process cap
    assert passed["primitive_names"] is True, bomb
    assert crashes["took"] < 600


@pytest.fixture(scope="module")
def crashes_uncontained(tmp_path_factory):
    """Without the sandbox the kernel can reach its grading process: it kills it."""
    tmp = tmp_path_factory.mktemp("uncontained")
    nbs = {"good1": _notebook(tmp / "good1" / A / f"{A}.ipynb", solution_notebook(A)),
           "kill_parent": _notebook(tmp / "kp" / A / f"{A}.ipynb", released_notebook(A), _KILL_PARENT),
           "blank": _notebook(tmp / "blank" / A / f"{A}.ipynb", released_notebook(A)),
           "good2": _notebook(tmp / "good2" / A / f"{A}.ipynb", solution_notebook(A))}
    results, stderr, code = _grade(list(nbs.values()), "--jobs", "2", env={"AUTOGRADER_SANDBOX": "off"})
    return dict(results=dict(zip(nbs, results)), stderr=stderr, code=code)


def test_a_submission_that_kills_its_grading_process_loses_only_its_own_grade(crashes_uncontained):
    r = crashes_uncontained["results"]
    assert [res["notebook"].split(os.sep)[-3] for res in r.values()] == ["good1", "kp", "blank", "good2"]
    for name in ("good1", "good2"):
        assert r[name]["score"] == FULL and "error" not in r[name], r[name]
    assert r["blank"]["score"] == 0.0 and "error" not in r["blank"]
    killer = r["kill_parent"]
    assert "grading process died twice" in killer["error"], killer  # it did kill it, twice
    assert [t["points"] for t in killer["tests"]] == [0.0] * len(TESTS_A)
    assert all("died twice" in t["feedback"] for t in killer["tests"])
    assert crashes_uncontained["code"] != 0
    assert "cannot grade" in crashes_uncontained["stderr"] and "died twice" in crashes_uncontained["stderr"]


# --------------------------------------------------------------------------- failing closed

NOT_PERMITTED = "bwrap: Creating new namespace failed: Operation not permitted"


@pytest.fixture(scope="module")
def fake_bwrap(tmp_path_factory):
    """A PATH whose ``bwrap`` fails as bubblewrap does where namespaces are not permitted."""
    bindir = tmp_path_factory.mktemp("fakebin")
    _fake_bwrap(bindir, NOT_PERMITTED)
    return f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.mark.skipif(not (hasattr(os, "geteuid") and os.geteuid() == 0), reason="the refusal is root's")
def test_root_without_a_sandbox_refuses_with_cause_and_fix(tmp_path, fake_bwrap):
    """Where bubblewrap cannot create namespaces (here a fake bwrap failing as it does), root's
    grader refuses: bubblewrap's own words, the fix, and how to grade anyway; nothing runs."""
    cause = "Operation not permitted"
    path = _notebook(tmp_path / "s" / A / f"{A}.ipynb", solution_notebook(A))
    results, stderr, code = _grade([path], env={"PATH": fake_bwrap}, timeout=300)
    r = results[0]
    assert code != 0
    assert "the sandbox cannot be set up" in stderr and cause in stderr, stderr[-2000:]
    assert "Fix:" in stderr and "--no-sandbox" in stderr and "AUTOGRADER_SANDBOX=off" in stderr
    assert "CAP_SYS_ADMIN" in stderr  # root's fix: namespaces for root, not for ordinary users
    assert r["score"] == 0.0 and r["max_score"] == FULL and "containment" not in r, r
    assert cause in r["error"]
    assert all(t["points"] == 0.0 and cause in t["feedback"] for t in r["tests"]), r["tests"]


UNCONTAINED = [("--no-sandbox", ["--no-sandbox"], {}), ("AUTOGRADER_SANDBOX=off", [], {"AUTOGRADER_SANDBOX": "off"})]


@pytest.mark.parametrize("case,args,env", UNCONTAINED, ids=[c[0] for c in UNCONTAINED])
def test_the_operator_may_grade_uncontained_and_the_json_says_so(tmp_path, fake_bwrap, case, args, env):
    path = _notebook(tmp_path / "s" / A / f"{A}.ipynb", solution_notebook(A))
    results, stderr, code = _grade([path], *args, env={"PATH": fake_bwrap, **env}, timeout=600)
    r = results[0]
    assert code == 0, stderr[-2000:]
    assert r["score"] == FULL, r
    assert r["containment"] == "none" and "--no-sandbox" in r["containment_reason"], r


def _fake_bwrap(folder: Path, line: str) -> str:
    """A ``bwrap`` that fails as bubblewrap does where user namespaces are refused."""
    path = folder / "bwrap"
    path.write_text(f"#!/bin/sh\necho {line!r} >&2\nexit 1\n")
    path.chmod(0o755)
    return str(path)


NO_USERNS = "bwrap: No permissions to create new namespace"

OPENS = [  # (case, the grader's euid, find_bwrap's answer: None, a failing fake or the real one; the mode,
    # words of its reason)
    ("bubblewrap works", 1000, "real", "user-namespace", "bubblewrap: user, mount, PID and network namespaces"),
    ("bubblewrap is not installed", 1000, None, "refused",
     "bubblewrap is not installed. Fix: install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap"),
    ("user namespaces refused", 1000, "fake", "refused",
     f"bubblewrap cannot create namespaces here ({NO_USERNS}). Fix: let ordinary users create user namespaces"),
    ("as root, bubblewrap is not installed", 0, None, "refused",
     "bubblewrap is not installed. Fix: install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap"),
    ("as root, namespaces refused", 0, "fake", "refused",
     f"bubblewrap cannot create namespaces here ({NO_USERNS}). Fix: run the grader where root may create mount"),
]


@pytest.mark.parametrize("case,euid,bwrap,mode,reason", OPENS, ids=[c[0] for c in OPENS])
def test_the_kernel_is_contained_by_bubblewrap_or_refused_naming_why(monkeypatch, tmp_path, case, euid, bwrap,
                                                                     mode, reason):
    from autograder.sandbox import containment, view

    if bwrap == "real" and not (shutil.which("bwrap") and view.bwrap_problem(shutil.which("bwrap")) == ("", "")):
        pytest.skip("bubblewrap is not installed, or cannot create namespaces here")
    found = {"real": shutil.which("bwrap"), "fake": _fake_bwrap(tmp_path, NO_USERNS), None: None}[bwrap]
    monkeypatch.setattr(view, "_BWRAP_PROBED", {})
    monkeypatch.setattr(containment, "find_bwrap", lambda: found)
    monkeypatch.setattr(containment.os, "geteuid", lambda: euid)
    box = containment.open_sandbox(time.monotonic() + 5, Settings.load({}))
    assert box.mode == mode and reason in box.reason, box
    assert box.contained == (mode == "user-namespace") and box.refused == (mode == "refused")
    if box.refused:
        assert "--no-sandbox" in box.reason  # how to grade anyway, for code one trusts


def test_without_root_the_operator_may_still_turn_the_sandbox_off(monkeypatch):
    from autograder.sandbox import containment

    monkeypatch.setattr(containment, "find_bwrap", lambda: None)
    monkeypatch.setattr(containment.os, "geteuid", lambda: 1000)
    box = containment.open_sandbox(time.monotonic() + 5, Settings.load({"AUTOGRADER_SANDBOX": "off"}))
    assert box.mode == "none" and not box.contained and not box.refused


def _user_namespace_works() -> bool:
    try:
        return subprocess.run(["unshare", "--user", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _bwrap_fails_there() -> str:
    """bubblewrap's error inside ``unshare --user`` (no uid mapped: it cannot nest its own), '' if none."""
    try:
        ran = subprocess.run(["unshare", "--user", "bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return ran.stderr.strip().splitlines()[-1] if ran.returncode != 0 and ran.stderr.strip() else ""


@pytest.mark.skipif(not (_user_namespace_works() and shutil.which("bwrap") and _bwrap_fails_there()),
                    reason="needs util-linux's unshare --user and a bubblewrap that fails inside it")
def test_without_root_where_bubblewrap_fails_grading_refuses_naming_why_unless_turned_off(tmp_path):
    """A grader that is not root (here: a user namespace, in which this machine's root is uid
    65534) where bubblewrap cannot create namespaces: every notebook is refused with bubblewrap's
    own words and the fix, and nothing runs; with --no-sandbox the batch grades uncontained,
    says so, and a submission that ends its kernel loses only its own grade."""
    paths = [_notebook(tmp_path / "solved" / A / f"{A}.ipynb", solution_notebook(A)),
             _notebook(tmp_path / "released" / A / f"{A}.ipynb", released_notebook(A)),
             _notebook(tmp_path / "exits" / A / f"{A}.ipynb", solution_notebook(A), "import os\nos._exit(3)")]
    results, stderr, code = run_grader(paths, env={"AUTOGRADER_SANDBOX": ""}, prefix=("unshare", "--user"))
    assert code != 0
    why = _bwrap_fails_there()
    for r in results:
        assert r["score"] == 0 and why in r["error"] and "the sandbox cannot be set up" in r["error"], r
        assert "containment" not in r or not r["containment"], r  # no kernel ran
    results, stderr, code = run_grader(paths, "--no-sandbox", prefix=("unshare", "--user"))
    assert code == 0, stderr[-3000:]
    assert [r["score"] for r in results] == [FULL, 0.0, 0.0], [r.get("error") for r in results]
    assert all(r["containment"] == "none" for r in results), results
    assert all("kernel died" in t["feedback"] for t in results[2]["tests"]), results[2]["tests"]


# --------------------------------------------------------------------------- a long temporary folder

@needs_root
def test_a_temporary_folder_with_a_long_path_still_grades_contained(tmp_path):
    """A kernel's Unix sockets live in its grading folder; under a TMPDIR too long for a socket
    address (108 bytes) the kernel could not start and a correct answer scored zero. The
    grading folder then goes to a short shared temporary folder (hidden from kernels too)."""
    long_tmp = Path("/tmp") / ("t" * 110)
    long_tmp.mkdir(exist_ok=True)
    try:
        path = _notebook(tmp_path / "s" / A / f"{A}.ipynb", solution_notebook(A))
        results, stderr, code = _grade([path], env={"TMPDIR": str(long_tmp)}, timeout=600)
        r = results[0]
        assert code == 0, stderr[-2000:]
        assert r["containment"] == "namespaces+uid", r
        assert r["score"] == r["max_score"] == FULL, [t["feedback"] for t in r["tests"]]
        assert not list(long_tmp.iterdir())  # nothing was left there, or graded there
    finally:
        shutil.rmtree(long_tmp, ignore_errors=True)


def test_no_short_temporary_folder_is_a_clear_message(monkeypatch):
    from autograder.sandbox import kernel_manager
    from autograder.common.course import GradingError

    monkeypatch.setattr(kernel_manager.tempfile, "gettempdir", lambda: "/" + "d" * 120)
    monkeypatch.setattr(kernel_manager.os, "access", lambda *a, **k: False)
    with pytest.raises(GradingError, match=r"too long for the kernel's sockets .*set TMPDIR"):
        kernel_manager.run_dir_base()
    monkeypatch.setattr(kernel_manager.tempfile, "gettempdir", lambda: "/tmp")
    assert kernel_manager.run_dir_base() is None  # a short one is used as it is


# --------------------------------------------------------------------------- the kernel's view

_VIEW = """\
import json, os, sys
print(json.dumps({"root": sorted(os.listdir("/")), "env": sorted(os.environ),
                  "solutions": os.path.exists(sys.argv[1]), "package": os.path.isdir(sys.argv[2]),
                  "etc": sorted(os.listdir("/etc")), "dev": sorted(os.listdir("/dev"))}))
"""


def _in_view(tmp_path, cmd, monkeypatch=None, extra_ro=()):
    """Run ``cmd`` the way a contained kernel starts (the sandbox's wrap, the kernel's environment),
    in a box under ``tmp_path`` (pytest's 0700 temporary folder)."""
    from autograder.sandbox import containment, environment, launch, view

    box = containment.open_sandbox(time.monotonic() + 60, Settings.load())
    assert box.contained, box.reason
    try:
        box_dir = tmp_path / "box"
        home = box_dir / "home"
        (home / "tmp").mkdir(parents=True)
        containment.chown_tree(box_dir, box.uid)
        box.keep_rw = [str(box_dir)]
        if extra_ro and monkeypatch is not None:
            paths = view.kernel_paths()
            for module in (containment, view):  # the view's binds, and what the uid must read
                monkeypatch.setattr(module, "kernel_paths", lambda: [*paths, *extra_ro])
        env = environment.kernel_env(home)
        return subprocess.run(launch.limited(box.wrap(cmd), 60, box), capture_output=True, text=True,
                              timeout=60, cwd=box_dir, env=env)
    finally:
        box.close()


# bubblewrap's own /dev (--dev): a few devices, a pseudo-terminal's, links to /proc
BWRAP_DEV = {"null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "shm", "fd", "stdin", "stdout",
             "stderr", "core", "console"}


@needs_root
def test_a_contained_kernel_sees_an_allow_list_of_files_and_variables(tmp_path, monkeypatch):
    """The kernel's root is built empty: the system's folders, a few files of /etc, a few devices,
    its interpreter, the package and its box; its environment is KERNEL_ENV and its own HOME,
    TMPDIR and PATH. The same program run uncontained sees the course's solutions/ and the
    grader's variables (the control)."""
    from autograder.sandbox import environment, view
    from autograder.sandbox.view import ETC, SYSTEM

    monkeypatch.setenv(SECRET_VAR, "s3cr3t")
    cmd = [sys.executable, "-c", _VIEW, str(ROOT / "solutions"), str(ROOT / "autograder")]
    control = json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout)
    assert control["solutions"] and SECRET_VAR in control["env"]
    ran = _in_view(tmp_path, cmd)
    assert ran.returncode == 0, ran.stderr[-2000:]
    seen = json.loads(ran.stdout)
    assert not seen["solutions"] and seen["package"], seen
    kept_tops = {p.split("/")[1] for p in [*view.kernel_paths(), str(tmp_path)]}
    kept_tops |= {os.path.realpath(p).split("/")[1] for p in [*view.kernel_paths(), str(tmp_path)]}
    allowed = {p.strip("/") for p in SYSTEM} | {"etc", "dev", "proc", "tmp", "var"} | kept_tops
    assert set(seen["root"]) <= allowed, set(seen["root"]) - allowed
    assert set(seen["etc"]) <= set(ETC), set(seen["etc"]) - set(ETC)
    assert "shadow" not in seen["etc"] and "hostname" not in seen["etc"]
    # its own HOME, TMPDIR and PATH, and PWD (its working folder: bubblewrap sets it)
    assert set(seen["env"]) <= set(environment.KERNEL_ENV) | {"HOME", "TMPDIR", "PATH", "PWD"}, seen["env"]
    assert SECRET_VAR not in seen["env"]
    assert {"null", "urandom", "shm"} <= set(seen["dev"]) and "vda" not in seen["dev"]
    assert set(seen["dev"]) <= {*BWRAP_DEV, "nvidia", "dri", "kfd", "accel", "vfio"} | {
        d for d in seen["dev"] if d.startswith(("nvidia", "accel"))}


@needs_root
def test_a_file_the_sandbox_uid_cannot_read_is_named(tmp_path, monkeypatch):
    """Where the kernel's view cannot work (here a kept folder of mode 0700, as a Python installed
    with umask 077 would be), the launcher says which path, its mode and the fix, not 'namespaces'."""
    from autograder.sandbox import probe

    private = Path(tempfile.mkdtemp(prefix="private-python-", dir="/run" if os.access("/run", os.W_OK) else None))
    try:
        (private / "lib").mkdir()
        private.chmod(0o700)
        ran = _in_view(tmp_path, [sys.executable, "-c", "print('ran')"], monkeypatch, [str(private)])
        assert ran.returncode != 0 and "ran" not in ran.stdout
        message = ran.stderr.strip().splitlines()[-1]
        assert f"the sandbox uid cannot read {private} (mode 0700, owner uid 0)" in message, message
        assert "chmod -R o+rX" in message
        refusal = probe.probe_refusal(f"a kernel could not start in the sandbox ({message})")
        assert "readable by other users" in refusal and "namespaces" not in refusal, refusal
    finally:
        shutil.rmtree(private, ignore_errors=True)


@needs_root
def test_kill_all_kills_every_process_of_the_sandbox_uid_and_no_other():
    """``Sandbox.kill_all`` (``launcher kill``, as that uid): a process of the uid in a session of
    its own dies, one of another uid does not; with none left it still says the sandbox ended."""
    from autograder.sandbox.containment import Sandbox

    uid, other = 64993, 64992
    mine = subprocess.Popen(["sleep", "60"], user=uid, group=uid, extra_groups=[], start_new_session=True)
    theirs = subprocess.Popen(["sleep", "60"], user=other, group=other, extra_groups=[])
    try:
        time.sleep(0.2)
        box = Sandbox("namespaces+uid", "", uid, ended=False)
        box.kill_all()
        assert mine.wait(timeout=10) == -9 and box.ended
        assert theirs.poll() is None
        again = Sandbox("namespaces+uid", "", uid, ended=False)
        again.kill_all()
        assert again.ended
        for bad in (0, -1):  # never as root, never "every uid"
            refused = Sandbox("namespaces+uid", "", bad, ended=False)
            refused.kill_all()
            assert not refused.ended and theirs.poll() is None
    finally:
        for p in (mine, theirs):
            p.kill()
            p.wait()


@needs_root
def test_a_contained_process_has_a_cpu_share_and_a_thread_cap_of_its_own(tmp_path):
    """No shared fate (issue 33, item 3): a kernel (or program runner) is in cgroups of its own
    that cap its CPUs below the machine's and its threads at the sandbox's cap, where the
    machine has the cpu and pids controllers; they are gone when its box is closed."""
    from autograder.sandbox import cgroups, containment, launch

    box = containment.open_sandbox(time.monotonic() + 60, Settings.load())
    assert box.contained, box.reason
    try:
        if not box.cgroups and "cgroups v2" not in box.reason:
            pytest.skip(f"no cpu and pids cgroups here: {box.reason}")
        cmd = [sys.executable, "-c", "print(open('/proc/self/cgroup').read())"]
        out = subprocess.run(launch.limited(box.wrap(cmd), 60, box), capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        for folder in box.cgroups or [box.cgroup]:
            assert f"autograder-{box.uid}-" in folder
            assert folder.split("/sys/fs/cgroup/", 1)[1].split("/", 1)[1] in out.stdout  # joined
        limits = {}
        for folder in box.cgroups or [box.cgroup]:
            for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.max", "pids.max"):
                if os.path.exists(os.path.join(folder, name)):
                    limits[name] = Path(folder, name).read_text().split()
        assert limits["pids.max"] == [str(box.threads)]
        if "cpu.max" in limits:
            quota, period = map(int, limits["cpu.max"])
        else:
            quota, period = int(limits["cpu.cfs_quota_us"][0]), int(limits["cpu.cfs_period_us"][0])
        assert quota == cgroups.cpu_quota_cores() * period
        assert cgroups.cpu_quota_cores() < (os.cpu_count() or 1) or os.cpu_count() == 1
        folders = list(box.cgroups)
    finally:
        box.close()
    assert not any(os.path.exists(f) for f in folders)


@needs_root
def test_the_probe_refuses_a_secret_the_kernel_can_see_and_keeps_no_failure(tmp_path, monkeypatch):
    """check_sandbox: a path the kernel can still see is a refusal (the box itself stands in for a
    leak), the course's solutions/ are unseen; a failure is probed again by the next notebook, a
    success is kept."""
    from autograder.sandbox import containment, probe

    monkeypatch.setattr(probe, "_CHECKED", {})
    box = containment.open_sandbox(time.monotonic() + 60, Settings.load())
    assert box.contained, box.reason
    try:
        box_dir = tmp_path / "run" / "box"
        home, work = box_dir / "home", box_dir / "work"
        (home / "tmp").mkdir(parents=True)
        work.mkdir()
        containment.chown_tree(box_dir, box.uid)
        box.keep_rw = [str(box_dir)]
        leak = probe.check_sandbox(box, home, work, [str(ROOT / "solutions"), str(work)])
        assert f"can still see {work}" in leak and "solutions" not in leak, leak
        assert probe._CHECKED == {}
        assert probe.check_sandbox(box, home, work, [str(ROOT / "solutions")]) == ""
        assert list(probe._CHECKED.values()) == [""]
    finally:
        box.close()


def test_the_interpreter_path_is_resolved_folder_by_folder_and_keeps_its_own_name(tmp_path):
    """A grader started as ``../../.venv/bin/python`` (Python keeps the ``..`` in
    ``sys.executable``) names its interpreter by folders the kernel's view has: the folders are
    resolved, links included, and the interpreter's own name, a venv's link, is kept."""
    from autograder.sandbox import launch

    real = tmp_path / "base" / "bin"
    real.mkdir(parents=True)
    (real / "python3").write_text("")
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "bin").symlink_to(real)
    (real / "python").symlink_to(real / "python3")
    typed = str(tmp_path / "venv" / "sub" / ".." / "bin" / "python")
    (tmp_path / "venv" / "sub").mkdir()
    assert launch.interpreter(typed) == str(real / "python")  # the link itself, not python3
    assert ".." not in launch.package_module("autograder.sandbox.launcher")[0]


@needs_root
def test_as_root_a_contained_process_cannot_make_a_user_namespace():
    """As root bubblewrap makes no user namespace (its --disable-userns needs one), so the sandbox
    uid could make one of its own, where it would hold every capability (mount, unshare again):
    a seccomp filter set last by the launcher refuses it. The control: the same command run as
    the same sandbox uid, without the sandbox, makes one (unprivileged user namespaces are
    allowed here, or the test proves nothing and says so)."""
    from autograder.sandbox import containment, launch

    unshare = shutil.which("unshare")
    if not unshare:
        pytest.skip("util-linux's unshare is not installed")
    box = containment.open_sandbox(time.monotonic() + 60, Settings.load())
    assert box.mode == containment.NAMESPACE, box.reason
    cmd = [unshare, "--user", "--mount", "true"]
    try:
        contained = subprocess.run(launch.limited(box.wrap(cmd), 60, box), capture_output=True, text=True,
                                   timeout=120, cwd="/")
        uid = box.uid

        def as_sandbox_uid():
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)

        control = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd="/",
                                 preexec_fn=as_sandbox_uid)
    finally:
        box.close()
    assert control.returncode == 0, (
        f"uncontained, the sandbox uid should make a user namespace: the test proves nothing ({control})")
    assert contained.returncode != 0 and "Operation not permitted" in contained.stderr, contained
    assert "no user namespace of its own" in box.reason, box.reason
