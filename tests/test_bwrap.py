"""Containment without root (issue 33): graded by an ordinary user (``runuser -u nobody``, as a hub
instructor grades), a submission's kernel runs under bubblewrap. A probe in an answer cell reads no
judge, no source notebook, no gradebook, nothing in the grader's home; reaches no socket of the
grader's network; writes nothing outside its box. The same probe graded with the sandbox turned
off (the control) reaches every one of them, so each check could fail. The correct answers around
the probe keep full marks, and the JSON's ``containment`` names bubblewrap's mode."""
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
from pathlib import Path

import nbformat
import pytest

from conftest import GRADE_SAVING, ROOT, printed, solution_notebook

pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("grading")]

A = "01_phases"
NOBODY = 65534

_PROBE = """
import glob as _glob, json as _json, os as _os, socket as _socket
_seen = {{}}
def _look(name, pattern):
    got = []
    for p in _glob.glob(pattern):
        try:
            if _os.path.isdir(p):
                _os.listdir(p)
            else:
                with open(p, "rb") as f:
                    f.read()
            got.append(p)
        except OSError:
            pass
    _seen[name] = got
import autograder as _ag
_here = _os.path.dirname(_os.path.dirname(_os.path.realpath(_ag.__file__)))
_look("a judge, found through autograder.__file__", _here + "/solutions/*/judge.py")
_look("a judge of the checkout", {root!r} + "/solutions/*/judge.py")
_look("a source notebook of the checkout", {root!r} + "/solutions/*/*.ipynb")
_look("the submission's gradebook", {tmp!r} + "/run-*/gradebook.db")
_look("the course state's gradebook", {state!r} + "/gradebook.db")
_look("a file in the grader's home", {home!r} + "/*")
for _name, _path in {writes!r}.items():
    try:
        with open(_path, "w") as _f:
            _f.write("written by a submission")
    except OSError:
        pass
try:
    _s = _socket.create_connection(("127.0.0.1", {port}), timeout=3)
    _s.sendall(b"hello")
    _s.close()
    _seen["a TCP connection to the grader's 127.0.0.1"] = ["sent"]
except OSError:
    _seen["a TCP connection to the grader's 127.0.0.1"] = []
_os.system("setsid sh -c 'sleep 120 # {daemon}' >/dev/null 2>&1 &")  # a daemon in a new session
print("probe-report: " + _json.dumps(_seen))
"""

READS = ["a judge, found through autograder.__file__", "a judge of the checkout",
         "a source notebook of the checkout", "the submission's gradebook", "the course state's gradebook",
         "a file in the grader's home", "a TCP connection to the grader's 127.0.0.1"]
WRITES = ["the shared temporary folder", "/var/tmp", "/dev/shm", "the grader's home", "the course state",
          "a process that outlives its grading"]


def _as_nobody(args, home: Path, env=None, timeout=900):
    """``args`` run by ``runuser -u nobody`` (an ordinary user, as a hub instructor) in the group
    ``users``, whose gid is not its uid (as jovyan's in Jupyter's images: 1000 and 100), in the checkout."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "JAX_PLATFORMS") if k in os.environ}
    cmd = ["runuser", "-u", "nobody", "-g", "users", "--", "env", "-i", *[f"{k}={v}" for k, v in keep.items()],
           f"HOME={home}", *[f"{k}={v}" for k, v in (env or {}).items()], *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def _others_can_read(path) -> bool:
    path = os.path.realpath(path)
    return all(os.stat(d).st_mode & 0o005 == 0o005 for d in [path, *map(str, Path(path).parents)])


def _python_for_nobody(base: Path) -> str:
    """An interpreter of the course's environment that uid 65534 may run (the .venv's may live
    under root's private pyenv): the one `make hub` gives its users (hub/workshop.py)."""
    sys.path.insert(0, str(ROOT / "hub"))
    import workshop

    state = base / "hub"
    state.mkdir(mode=0o755)
    return str(workshop.server_venv(workshop.paths(state)) / "bin" / "python")


@pytest.fixture(scope="module")
def nobody(tmp_path_factory):
    """(interpreter, base folder): what grading as uid 65534 needs, or the reason it cannot here."""
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip("grades as uid 65534: needs root and runuser")
    if not shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed (make test installs it as root: "
                    "scripts/ensure_system_packages.sh)")
    if not _others_can_read(ROOT):
        pytest.skip(f"{ROOT} cannot be read by other users (a private checkout): the grader here is uid 65534")
    base = Path(tempfile.mkdtemp(prefix="bwrap-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        python = _python_for_nobody(base)
        home = base / "home"
        home.mkdir()
        os.chown(home, NOBODY, NOBODY)
        ran = _as_nobody([python, "-c", "import autograder, ipykernel"], home, timeout=300)
        if ran.returncode != 0:
            pytest.skip(f"no interpreter of the course uid 65534 can run here: {ran.stderr[-500:]}")
        ran = _as_nobody(["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"], home)
        if ran.returncode != 0:
            pytest.skip(f"bubblewrap cannot create namespaces for uid 65534 here: {ran.stderr.strip()}")
        yield python, base
    finally:
        shutil.rmtree(base, ignore_errors=True)


class _Listener:
    """A TCP socket on the grader's 127.0.0.1 that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.5)
        self.got, self.stop = 0, False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                conn.close()
                self.got += 1
            except OSError:
                pass

    def close(self):
        self.stop = True
        self.thread.join(timeout=5)
        self.sock.close()


def _with_probe(dest: Path, probe: str) -> Path:
    """The solution notebook with ``probe`` added to its first answer cell (still a right answer)."""
    nb = nbformat.read(str(solution_notebook(A)), as_version=4)
    answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    answer.source += "\n" + probe
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(dest))
    return dest


def _grade_as_nobody(python, base: Path, name: str, env: dict):
    """One probed submission graded by uid 65534: (result, probe's report, files it wrote, stderr)."""
    run = base / name
    home, state = run / "home", run / "state"
    for d in (home, state):
        d.mkdir(parents=True)
    (home / "secret.txt").write_text("the grader's own\n")
    (state / "gradebook.db").write_text("the course's grades\n")
    marker = f"pwned-{secrets.token_hex(6)}"
    writes = {"the shared temporary folder": f"{tempfile.gettempdir()}/{marker}", "/var/tmp": f"/var/tmp/{marker}",
              "/dev/shm": f"/dev/shm/{marker}", "the grader's home": f"{home}/{marker}",
              "the course state": f"{state}/{marker}"}
    listener = _Listener()
    try:
        probe = _PROBE.format(root=str(ROOT), tmp=tempfile.gettempdir(), state=str(state), home=str(home),
                              writes=writes, port=listener.sock.getsockname()[1], daemon=marker)
        path = _with_probe(run / "subs" / "alice" / A / f"{A}.ipynb", probe)
        saved, out = run / "graded.ipynb", run / "results.json"
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(run)], check=True)
        args = json.dumps([[str(path)], {str(path): str(saved)}, None, 1, str(out)])
        proc = _as_nobody([python, GRADE_SAVING, args], home, {"COURSE_STATE": str(state), **env})
        results = json.loads(out.read_text()) if out.exists() else None
        report = printed(saved, "probe-report: ")
        reached = listener.got
        left = _processes_named(marker, wait=10)
    finally:
        for pid in _processes_named(marker):
            os.kill(pid, 9)
        listener.close()
        written = {what: os.path.exists(p) for what, p in writes.items()}
        for p in writes.values():
            Path(p).unlink(missing_ok=True)
    assert results, proc.stderr[-3000:]
    report = None if report is None else json.loads(report)
    if report is not None:
        report["a TCP connection to the grader's 127.0.0.1"] += ["accepted"] * reached
    written["a process that outlives its grading"] = bool(left)
    return results[0], report, written, proc.stderr


def _processes_named(marker: str, wait: float = 0) -> list[int]:
    """The processes whose command line holds ``marker``, once there are none or ``wait`` seconds
    passed (a killed sandbox's last processes may take a moment to go, on a loaded machine)."""
    import time

    end = time.monotonic() + wait
    while True:
        ran = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        pids = [int(pid) for pid in ran.stdout.split()]
        if not pids or time.monotonic() >= end:
            return pids
        time.sleep(0.5)


@pytest.fixture(scope="module")
def graded(nobody):
    python, base = nobody
    return {"contained": _grade_as_nobody(python, base, "contained", {}),
            "control": _grade_as_nobody(python, base, "control", {"AUTOGRADER_SANDBOX": "off"})}


def test_an_ordinary_user_grades_contained_by_bubblewrap_at_full_marks(graded):
    result, report, _, stderr = graded["contained"]
    assert "error" not in result, result["error"]
    assert result["containment"] == "user-namespace", result
    assert "bubblewrap" in result["containment_reason"], result
    # its box a tmpfs of the grading process's own user and mount namespace, never the disk
    assert "files limited to 1024 MiB (a tmpfs)" in result["containment_reason"], result["containment_reason"]
    assert result["score"] == result["max_score"] > 0, [t["feedback"] for t in result["tests"]]
    assert report is not None, f"the probe did not run: the test proves nothing\n{stderr[-2000:]}"


def test_the_control_ran_uncontained_and_says_so(graded):
    result, report, _, _ = graded["control"]
    assert result["containment"] == "none", result
    assert result["score"] == result["max_score"], [t["feedback"] for t in result["tests"]]
    assert report is not None


@pytest.mark.parametrize("case", READS)
def test_a_probe_graded_by_an_ordinary_user_cannot_reach(graded, case):
    contained, control = graded["contained"][1], graded["control"][1]
    assert contained is not None and control is not None, "a probe did not run"
    assert control[case], f"even uncontained the probe cannot reach {case!r}: it proves nothing"
    assert contained[case] == [], f"a kernel contained by bubblewrap reached {case}: {contained[case]}"


@pytest.mark.parametrize("case", WRITES)
def test_a_probe_graded_by_an_ordinary_user_writes_nothing_outside_its_box(graded, case):
    assert graded["control"][2][case], f"even uncontained the probe did not write {case}: it proves nothing"
    assert not graded["contained"][2][case], f"a kernel contained by bubblewrap wrote into {case}"


_THREADS = """\
import subprocess, sys
from pathlib import Path
from autograder.common.settings import Settings
from autograder.sandbox.containment import open_sandbox
from autograder.sandbox.environment import kernel_env
from autograder.sandbox.launch import limited
box = open_sandbox(0, Settings.load())
cap = box.threads
code = ("import threading, time\\nn = 0\\ntry:\\n    while n < %d:\\n"
        "        threading.Thread(target=time.sleep, args=(20,), daemon=True).start()\\n"
        "        n += 1\\nexcept RuntimeError:\\n    pass\\nprint(n)\\n" % (cap + 50))
for contained in (True, False):
    cmd = [sys.executable, "-c", code]
    cmd = limited(box.wrap(cmd), 60, box) if contained else cmd
    ran = subprocess.run(cmd, env=kernel_env(Path("/tmp"), True), capture_output=True, text=True,
                         cwd="/", timeout=300)
    print(box.mode if contained else "none", cap, ran.stdout.strip() or ran.stderr[-300:])
box.close()
"""


def test_a_kernel_contained_by_bubblewrap_has_a_thread_cap_of_its_own(nobody):
    """Without root there is no cgroup: the cap on threads is RLIMIT_NPROC set inside the
    sandbox's user namespace, where it counts that sandbox's processes only (the grader's own,
    and its other kernels', do not count). The same code uncontained starts every thread."""
    python, base = nobody
    ran = _as_nobody([python, "-c", _THREADS], base / "home")
    lines = [line.split() for line in ran.stdout.splitlines()]
    assert len(lines) == 2, ran.stdout + ran.stderr[-2000:]
    (mode, cap, contained), (_, _, control) = lines
    assert mode == "user-namespace"
    assert control == str(int(cap) + 50), "uncontained, every thread should start: the test proves nothing"
    assert int(contained) < int(cap), f"a contained kernel started {contained} threads, over the cap of {cap}"


_CAPS_CHILD = """\
import json, os, sys
tag, box = sys.argv[1], sys.argv[2]
got = {}
def fill(name, folder, files, mib):
    done = 0
    try:
        for i in range(files):
            with open(os.path.join(folder, f"{tag}-{name}-{i}"), "wb") as f:
                for _ in range(mib):
                    f.write(b"x" * 2**20)
                    done += 1
    except OSError:
        pass
    got[name] = done
fill("shm", "/dev/shm", 24, 1)  # many small files in memory
fill("tmp", "/tmp", 24, 1)
fill("box", box, 24, 1)  # many files, each under any per-file limit: only a limit on the box in all stops them
try:
    os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNS)
    got["userns"] = True
except OSError:
    got["userns"] = False
for folder in ("/dev/shm", "/tmp", box):
    for name in os.listdir(folder):
        if name.startswith(tag):
            os.unlink(os.path.join(folder, name))
print(json.dumps(got))
"""

_CAPS = """\
import json, subprocess, sys
from pathlib import Path
from autograder.common.settings import Settings
from autograder.sandbox import mounts
from autograder.sandbox.containment import open_sandbox
from autograder.sandbox.environment import kernel_env
from autograder.sandbox.launch import limited
child, box_dir, tag = sys.argv[1:4]
box = open_sandbox(0, Settings.load())
def run(contained):
    cmd = [sys.executable, "-c", child, tag, box_dir]
    cmd = limited(box.wrap(cmd), 60, box) if contained else cmd
    ran = subprocess.run(cmd, env=kernel_env(Path("/tmp"), True), capture_output=True, text=True,
                         cwd="/", timeout=300)
    return ran.stdout.strip() or ran.stderr[-300:]
control = run(False)  # first: the box is still the folder on disk
mounts.private_mounts()  # as a grading process does, then its box as the pipeline makes it
limit = box.mount_box(Path(box_dir))
box.keep_rw = [box_dir]
print(json.dumps([box.mode, limit, run(True)]))
print(json.dumps(["none", "", control]))
box.close()
"""


def test_an_ordinary_users_sandbox_caps_memory_files_and_user_namespaces(nobody):
    """Graded by an ordinary user (no cgroup, no root), a contained process with a box of 8 MiB
    (AUTOGRADER_BOX_MB) writes at most a quarter of it in /dev/shm and half in /tmp (tmpfs pages
    that no memory limit counts), at most 8 MiB in all into its box, however many files (the
    grading process's box is a tmpfs of that size, mounted in a user and mount namespace of its
    own: never the machine's disk), and cannot make a user namespace of its own (bubblewrap's
    --disable-userns). The same code uncontained, as the same user, does all of it, the box a
    folder on disk."""
    python, base = nobody
    box = base / "caps-box"
    box.mkdir()
    os.chown(box, NOBODY, NOBODY)
    tag = f"caps-{secrets.token_hex(4)}"
    try:
        ran = _as_nobody([python, "-c", _CAPS, _CAPS_CHILD, box, tag], base / "home", {"AUTOGRADER_BOX_MB": "8"})
    finally:
        for folder in ("/dev/shm", "/tmp", str(box)):
            for leftover in Path(folder).glob(f"{tag}-*"):
                leftover.unlink()
    lines = [json.loads(line) for line in ran.stdout.splitlines()]
    assert len(lines) == 2, ran.stdout + ran.stderr[-2000:]
    (mode, limit, contained), (_, _, control) = lines
    assert mode == "user-namespace"
    assert limit == "files limited to 8 MiB (a tmpfs)", limit
    contained, control = json.loads(contained), json.loads(control)
    assert control == {"shm": 24, "tmp": 24, "box": 24, "userns": True}, (
        f"uncontained, every write and the user namespace should succeed: the test proves nothing ({control})")
    assert contained["shm"] <= 2 and contained["tmp"] <= 4, contained
    assert contained["box"] <= 8, contained
    assert contained["userns"] is False, contained


def test_make_check_of_ones_own_exercises_runs_without_bubblewrap_and_no_one_elses(tmp_path, monkeypatch):
    """`make check` (grade --mine): where bubblewrap is missing, a learner's own notebooks in the
    course's exercises/ run uncontained, said in one line; a notebook another user owns, one
    outside exercises/ or a link there does not (its grading refuses as before), and where
    bubblewrap works nothing changes."""
    from autograder.sandbox import containment

    root = tmp_path / "course"
    (root / "solutions" / A).mkdir(parents=True)
    mine = root / "exercises" / A / f"{A}.ipynb"
    mine.parent.mkdir(parents=True)
    mine.write_text("{}")
    outside = tmp_path / f"{A}.ipynb"
    outside.write_text("{}")
    link = root / "exercises" / A / "link.ipynb"
    link.symlink_to(outside)
    monkeypatch.setattr(containment, "find_bwrap", lambda: None)
    notice = containment.own_exercises_uncontained([mine], root)
    assert notice and "bubblewrap is not installed" in notice and "uncontained" in notice, notice
    assert containment.own_exercises_uncontained([mine, outside], root) is None
    assert containment.own_exercises_uncontained([link], root) is None
    if os.geteuid() == 0:
        theirs = root / "exercises" / A / "theirs.ipynb"
        theirs.write_text("{}")
        os.chown(theirs, NOBODY, NOBODY)
        assert containment.own_exercises_uncontained([mine, theirs], root) is None
    if shutil.which("bwrap"):
        monkeypatch.undo()
        if not containment.bwrap_problem(containment.find_bwrap(), os.geteuid() == 0)[0]:
            assert containment.own_exercises_uncontained([mine], root) is None
