"""`make hub` end to end, on loopback: one instructor and two learners, real system users.

The module starts `make hub` (as root: it creates the users, their homes and the course's
folders) with a course file of its own, and plays the workshop of docs/instructor-guide.md in
Debian's Chromium driven by Playwright, where a person would click: a learner logs in, reads a
chapter in their own ~/course, fetches and submits in the Assignments panel and reads their
feedback; the instructor's Formgrader tab renders inside JupyterLab; the guide's commands run
verbatim in the instructor's terminal (the hub's terminal API, as File > New > Terminal). The
other learner submits the solution through the contents API (tests/conftest.py's fill_answers
pattern).

Checked besides: the gradebook holds full marks and zero, grades.csv and its per-student
summary agree; each learner's feedback is about themselves only; a learner cannot read
solutions/ (their `cat` of a judge fails), tests/, .git, another's home, the gradebook or the
exchange's feedback folder. Users, homes, processes and the hub's state are removed at the end.
The hub's log lands in artifacts/hub.log, screenshots beside it.
"""
from __future__ import annotations

import contextlib
import getpass
import http.cookiejar
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, solution_notebook, wait_until_serving

pytestmark = [pytest.mark.slow, pytest.mark.slow_env, pytest.mark.xdist_group("hub")]

ASSIGNMENT = "01_phases"  # small and quick to grade
COURSE_ID = "jax-mental-model"
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = "/usr/bin/chromium"
sys.path.insert(0, str(ROOT / "hub"))
import workshop  # noqa: E402


def _ports_free(port: int) -> bool:
    for p in (port, port + 1, port + 2):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                return False
    return True


def _free_port() -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 65000 and _ports_free(port):
            return port
    raise RuntimeError("no three free consecutive ports on loopback")


class Hub:
    """A running `make hub` and the calls the test makes on it."""

    def __init__(self, base, admin_token, names, state, log_path):
        self.base, self.admin, self.state, self.log_path = base, admin_token, state, log_path
        self.instructor, self.learners = names["instructor"], names["learners"]
        self.tokens: dict[str, str] = {}

    def log_tail(self, n=4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]

    def request(self, method, path, token=None, data=None, form=False, timeout=600):
        headers = {"Authorization": f"token {token or self.admin}"}
        body = None
        if data is not None:
            if form:
                body = urllib.parse.urlencode(data).encode()
                headers["Content-Type"] = "application/x-www-form-urlencoded"
            else:
                body = json.dumps(data).encode()
                headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def json(self, method, path, token=None, data=None, form=False, expect=(200, 201)):
        status, text = self.request(method, path, token, data, form)
        assert status in expect, f"{method} {path}: HTTP {status}: {text[:2000]}\nhub log:\n{self.log_tail()}"
        return json.loads(text) if text else None

    def user(self, user, method, path, data=None, form=False):
        """A call on ``user``'s own server, with a token the hub issued to that user."""
        path = urllib.parse.quote(path.lstrip("/"), safe="/?=&")  # feedback folders have spaces
        return self.json(method, f"/user/{user}/{path}", self.token(user), data, form)

    def token(self, user) -> str:
        if user not in self.tokens:
            got = self.json("POST", f"/hub/api/users/{user}/tokens",
                            data={"note": "test_hub", "expires_in": 3600})
            self.tokens[user] = got["token"]
        return self.tokens[user]

    def start_servers(self, users, timeout=300):
        for user in users:
            self.json("POST", f"/hub/api/users/{user}/server", expect=(201, 202, 400))
        deadline = time.time() + timeout
        waiting = set(users)
        while waiting and time.time() < deadline:
            for user in sorted(waiting):
                model = self.json("GET", f"/hub/api/users/{user}")
                if model["server"] and not model["pending"]:
                    waiting.discard(user)
            time.sleep(1)
        assert not waiting, f"servers of {sorted(waiting)} did not start\nhub log:\n{self.log_tail()}"

    def run_in_kernel(self, user, code, timeout=600) -> str:
        """Run ``code`` in a fresh kernel of ``user``'s server; return its output (fails on error)."""
        import websocket  # websocket-client, a dependency of jupyter_server

        kernel = self.user(user, "POST", "api/kernels", {"name": "python3"})
        ws_url = self.base.replace("http://", "ws://") + f"/user/{user}/api/kernels/{kernel['id']}/channels"
        ws = websocket.create_connection(ws_url, header=[f"Authorization: token {self.token(user)}"],
                                         timeout=timeout)
        msg_id = uuid.uuid4().hex
        try:
            ws.send(json.dumps({
                "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": user,
                           "session": uuid.uuid4().hex, "version": "5.3", "date": ""},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": code, "silent": False, "store_history": False,
                            "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
            out, status, deadline = [], None, time.time() + timeout
            while status is None and time.time() < deadline:
                msg = json.loads(ws.recv())
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "stream":
                    out.append(msg["content"]["text"])
                elif msg["msg_type"] == "error":
                    out.append("\n".join(msg["content"]["traceback"]))
                elif msg["msg_type"] == "execute_reply":
                    status = msg["content"]["status"]
        finally:
            ws.close()
            self.request("DELETE", f"/user/{user}/api/kernels/{kernel['id']}", self.token(user))
        text = "".join(out)
        assert status == "ok", f"code in {user}'s kernel ended with {status}:\n{text[-4000:]}"
        return text

    def terminal(self, user, commands, timeout=900) -> list[tuple[str, int, str]]:
        """Type each of ``commands`` in a new terminal of ``user``'s server (as a person does, in
        File > New > Terminal); return ``[(command, exit status, output)]``."""
        import websocket

        name = self.user(user, "POST", "api/terminals", {})["name"]
        ws = websocket.create_connection(
            self.base.replace("http://", "ws://") + f"/user/{user}/terminals/websocket/{name}",
            header=[f"Authorization: token {self.token(user)}"], timeout=timeout)
        results = []
        try:
            ws.send(json.dumps(["set_size", 50, 200, 1000, 2000]))
            for cmd in commands:
                marker = uuid.uuid4().hex[:10]
                ws.send(json.dumps(["stdin", f'{cmd}; echo "@@{marker} $?@@"\r']))
                text, found, deadline = "", None, time.time() + timeout
                while found is None and time.time() < deadline:
                    msg = json.loads(ws.recv())
                    if msg[0] == "stdout":
                        text += msg[1]
                        found = re.search(rf"@@{marker} (\d+)@@", text)
                assert found, f"`{cmd}` did not finish in {user}'s terminal:\n{text[-3000:]}"
                clean = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\r", "", text[:found.start()])
                results.append((cmd, int(found.group(1)), clean))
        finally:
            ws.close()
            self.request("DELETE", f"/user/{user}/api/terminals/{name}", self.token(user))
        return results

    def assignments(self, learner):
        got = self.user(learner, "GET", f"assignments?course_id={COURSE_ID}")
        assert got["success"], got
        return got["value"]


def _remove_user(name):
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    pids = subprocess.run(["ps", "-o", "pid=", "-u", str(uid)], capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["userdel", "--remove", name], capture_output=True)


@contextlib.contextmanager
def _make_hub(names, state: Path, log_name: str, root: Path = ROOT, make_args=(), **env):
    """`make hub` in ``root`` on a free port with ``env`` added; stopped (with every server) on exit."""
    assert shutil.which("npm") and shutil.which("node"), "node and npm are needed for configurable-http-proxy"
    port, token = _free_port(), secrets.token_hex(16)
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / log_name
    log = open(log_path, "w")  # noqa: SIM115 - open while the hub runs
    env = dict(os.environ, HUB_STATE=str(state), HUB_PORT=str(port), HUB_API_TOKEN=token, **env)
    proc = subprocess.Popen(["make", "--no-print-directory", "hub", *make_args], cwd=root, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    the_hub = Hub(f"http://127.0.0.1:{port}", token, names, state, log_path)
    the_hub.root = root
    try:
        wait_until_serving(proc, f"{the_hub.base}/hub/api", 300, "make hub", lambda: "\n" + the_hub.log_tail())
        yield the_hub
    finally:
        pid_file = state / "private" / "jupyterhub.pid"
        if proc.poll() is None and pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGTERM)  # the hub stops every server it started
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def hub():
    if os.geteuid() != 0:
        pytest.skip("the hub round trip creates system users: run the suite as root (as CI does)")
    tag = secrets.token_hex(3)
    names = {"instructor": f"hubt{tag}-ta", "learners": [f"hubt{tag}-l1", f"hubt{tag}-l2"],
             "group": f"hubt{tag}-inst"}
    state = Path(tempfile.mkdtemp(prefix="hubtest-", dir="/tmp"))
    os.chmod(state, 0o755)  # learners pass through to the exchange inside it
    course = state / "course.toml"
    course.write_text(f'[course]\ncourse_id = "{COURSE_ID}"\ninstructor_group = "{names["group"]}"\n'
                      f'[users]\ninstructors = ["{names["instructor"]}"]\n'
                      f'learners = {json.dumps(names["learners"])}\n')
    try:
        root = course_copy(state / "checkout")
        venv = learner_venv(state / "venv", root)
        with _make_hub(names, state / "hub", "hub.log", root, _use_venv(venv), HUB_COURSE=str(course)) as the_hub:
            yield the_hub
    finally:
        for name in [names["instructor"], *names["learners"]]:
            _remove_user(name)
        subprocess.run(["groupdel", names["group"]], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)


def _use_venv(venv: Path) -> list[str]:
    """make's arguments to run with ``venv`` (built already: make must not build or update it)."""
    return [f"VENV={venv}", "-o", str(venv / ".installed-stamp")]


def learner_venv(dest: Path, root: Path) -> Path:
    """The suite's own venv, when learners may reach it; else (a checkout in a private folder, a
    clone under /root: the hub refuses to serve from it, saying why) a copy of it in ``dest``
    (hard links where the file system allows) with its commands pointed at the copy and the
    course's package imported from ``root``."""
    venv = Path(sys.prefix)
    if workshop._private_folder(venv / "lib") is None:
        return venv
    if subprocess.run(["cp", "-al", str(venv), str(dest)], capture_output=True).returncode:
        shutil.rmtree(dest, ignore_errors=True)
        subprocess.run(["cp", "-a", str(venv), str(dest)], check=True)
    old = {f"#!{venv / 'bin' / n}".encode() for n in ("python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}")}
    for script in (dest / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            first, _, rest = script.read_bytes().partition(b"\n")
            if first.strip() in old:
                script.unlink()  # a hard link: never write through it
                script.write_bytes(f"#!{dest / 'bin' / 'python'}".encode() + b"\n" + rest)
                script.chmod(0o755)
    for site in dest.glob("lib/python*/site-packages"):
        for editable in site.glob("__editable__*"):
            editable.unlink()
        (site / "course-checkout.pth").write_text(f"{root}\n")
    return dest


def course_copy(dest: Path) -> Path:
    """The working tree's files (tracked, and untracked but not ignored) copied into ``dest``,
    with their times (so that make sees .venv as built for them), and exercises/ of ASSIGNMENT
    released afresh from the copy's solutions/ (the release refuses anything else; in a shared
    checkout, solutions/ may be ahead of exercises/). The room serves this copy: the hub makes
    its solutions/ and .git private to the instructors, which must not happen to the checkout
    the suite runs in, and a checkout in a private folder (a clone under /root) could not be
    served at all. The copy uses the checkout's .venv and configurable-http-proxy."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    (dest / ".git").mkdir()  # private in a room, like a real checkout's
    (dest / ".hub").mkdir()
    (dest / ".hub" / "node_modules").symlink_to(ROOT / ".hub" / "node_modules")
    subprocess.run(["make", "--no-print-directory", ".hub/node_modules/.bin/configurable-http-proxy"],
                   cwd=ROOT, check=True, capture_output=True)
    subprocess.run([sys.executable, str(dest / "scripts" / "release.py"), "--root", str(dest), ASSIGNMENT],
                   check=True, capture_output=True)
    for folder in [dest, *(d for d in dest.rglob("*") if d.is_dir() and not d.is_symlink())]:
        os.chmod(folder, 0o755)
    return dest


@pytest.fixture(scope="module")
def released(hub):
    hub.start_servers([hub.instructor])
    got = hub.user(hub.instructor, "POST", f"formgrader/api/assignment/{ASSIGNMENT}/release", {})
    assert got["success"], got
    assert "Released as" in got["log"], got["log"]
    assert "CRITICAL" not in got["log"] and "ERROR" not in got["log"], got["log"]
    return hub


def _run(args, **env):
    proc = subprocess.run([sys.executable, str(ROOT / "hub" / "workshop.py"), *args],
                          capture_output=True, text=True, env=dict(os.environ, **env), timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("text, message", [
    ('[course]\ncourse_id = "c"\n[users]\ninstructors = ["ada"]\nlearners = ["ada"]\n',
     "listed both as instructors and as learners"),
    ('[course]\ncourse_id = "c"\n[users]\ninstructors = ["Not A Name"]\n', "are not valid user names"),
    ('[course]\ncourse_id = "c"\n[users]\nlearners = ["alan"]\n', "a room needs at least one instructor"),
    ('[course]\ncourse_id = ""\n', "course_id must be a name"),
    ("[course\n", "is not valid TOML"),
])
def test_a_bad_course_file_is_named_and_explained(tmp_path, text, message):
    course = tmp_path / "course.toml"
    course.write_text(text)
    rc, out = _run(["serve"], HUB_COURSE=str(course), HUB_STATE=str(tmp_path / "state"))
    assert rc != 0 and message in out and str(course) in out, out
    assert not (tmp_path / "state").exists(), "a bad course file must stop the hub before it touches anything"


def test_missing_course_file_and_bad_port():
    rc, out = _run(["serve"], HUB_COURSE="/nonexistent/course.toml")
    assert rc != 0 and "no course file at /nonexistent/course.toml" in out, out
    rc, out = _run(["serve"], HUB_PORT="http")
    assert rc != 0 and "HUB_PORT='http' is not a port number" in out, out


def test_the_committed_course_file_is_the_alone_default():
    course = workshop.load_course(ROOT / "hub" / "course.toml")
    assert course["mode"] == "alone" and course["course_id"] == COURSE_ID


def test_grading_material_and_the_test_suite_are_closed_to_learners(tmp_path, monkeypatch):
    """close_grading_material on a checkout: solutions/ and tests/ (whose attacks and program
    tests hold working answers) become the instructor group's without access for others; the
    chapters and exercises stay open."""
    for name in ("solutions", "tests", "course", "exercises"):
        (tmp_path / name).mkdir(mode=0o755)
        os.chmod(tmp_path / name, 0o755)
    monkeypatch.setattr(workshop, "REPO", tmp_path)
    gid = os.getgid() + 1 if os.geteuid() == 0 else os.getgid()
    closed = workshop.close_grading_material(gid)
    assert {p.name for p in closed} == {"solutions", "tests"}, closed
    for name in ("solutions", "tests"):
        st = (tmp_path / name).stat()
        assert st.st_mode & 0o007 == 0 and st.st_gid == gid, (name, oct(st.st_mode))
    for name in ("course", "exercises"):
        assert (tmp_path / name).stat().st_mode & 0o005 == 0o005, name


def test_make_in_an_instructors_terminal_runs_with_the_servers_environment(tmp_path):
    """An instructor's terminal (its bash start-up file) runs every make verb with the servers'
    environment when it is not the checkout's .venv (whose interpreter may be root's alone):
    `make -n feedback` there names that environment's python and builds no venv; with the
    checkout's own .venv, make is left as it is."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    rc = tmp_path / "bashrc"
    rc.write_text(workshop._shell_rc(venv / "bin", ROOT))
    shown = subprocess.run(["bash", "-c", f"source {rc}; cd {ROOT}; make -n feedback"], capture_output=True,
                           text=True, cwd=ROOT, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    assert shown.returncode == 0, shown.stderr
    assert f"{venv}/bin/python -m autograder feedback" in shown.stdout, shown.stdout
    assert "pip install" not in shown.stdout and "-m venv" not in shown.stdout, shown.stdout
    assert "make()" not in workshop._shell_rc(ROOT / ".venv" / "bin", ROOT)


def test_unknown_user_and_missing_assignment_get_clear_messages(released):
    hub = released
    status, text = hub.request("GET", "/hub/api/users/nobody-here")
    assert status == 404, (status, text)
    status, text = hub.request("POST", "/hub/api/users/nobody-here/server")
    assert status == 404, (status, text)
    got = hub.user(hub.instructor, "POST", "formgrader/api/assignment/no_such_assignment/release", {})
    assert not got["success"] and "Assignment not found" in got["log"] and "no_such_assignment" in got["log"], got
    out = hub.run_in_kernel(hub.instructor, (
        "import subprocess, sys\n"
        f"r = subprocess.run([sys.executable, {str(hub.root / 'hub' / 'workshop.py')!r}, 'release-feedback',"
        " 'no_such_assignment'], capture_output=True, text=True)\n"
        "print(r.returncode, r.stderr)\n"))
    assert "unknown assignment 'no_such_assignment'" in out and ASSIGNMENT in out, out
    assert not out.startswith("0 "), out


def jax_version() -> str:
    from importlib.metadata import version

    return version("jax")


def _solution_answers() -> dict[str, str]:
    nb = nbformat.read(str(solution_notebook(ASSIGNMENT)), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution") and not c.metadata["nbgrader"].get("grade")}


def guide_commands() -> list[str]:
    """The commands of docs/instructor-guide.md's hub section (its ```bash blocks), as written."""
    text = (ROOT / "docs" / "instructor-guide.md").read_text()
    section = text[text.index("## Running a workshop on a hub"):]
    section = section[:section.index("\n## ", 5)]
    blocks = re.findall(r"```bash\n(.*?)\n\s*```", section, re.S)
    return [line.strip() for block in blocks for line in block.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def _chromium(p):
    try:
        from playwright.sync_api import sync_playwright  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"Playwright is pinned in requirements.txt but missing ({exc}): run `make env`")
    if not Path(CHROMIUM).exists():
        subprocess.run(["bash", str(ROOT / "tests" / "browser_setup.sh")], check=True)
    return p.chromium.launch(executable_path=CHROMIUM, headless=True,
                             args=["--headless", "--no-sandbox", "--disable-gpu",
                                   "--disable-background-networking", "--no-first-run"])


def _log_in(browser, hub, user, password=None):
    """A page of ``user``'s JupyterLab, logged in through the hub's login form."""
    if password is None:
        password = secrets.token_urlsafe(12)
        subprocess.run(["chpasswd"], input=f"{user}:{password}\n", text=True, check=True)
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.set_default_timeout(240_000)
    page.goto(f"{hub.base}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url(f"**/user/{user}/lab**")
    page.wait_for_selector(".lm-MenuBar-itemLabel:text-is('Nbgrader')")
    return page


def _nbgrader_menu(page, item):
    page.click(".lm-MenuBar-itemLabel:text-is('Nbgrader')")
    labels = [t.strip() for t in page.locator(".lm-Menu-itemLabel").all_inner_texts() if t.strip()]
    page.click(f".lm-Menu-itemLabel:text-is('{item}')")
    return labels


def test_the_workshop_in_chromium(released):
    """The whole round as docs/instructor-guide.md tells it, in Chromium where a person clicks:
    a learner logs in, reads a chapter in their home, fetches, submits; another submits the
    solution; the instructor's Formgrader tab renders inside JupyterLab; the guide's commands
    run verbatim in the instructor's terminal; the gradebook and CSVs hold full marks and zero;
    each learner fetches and reads feedback about themselves only; learners cannot read the
    grading material, another's home or the gradebook."""
    from playwright.sync_api import sync_playwright

    hub = released
    solver, idle = hub.learners
    hub.start_servers(hub.learners)
    args = {"course_id": COURSE_ID, "assignment_id": ASSIGNMENT}
    screenshots = []
    with sync_playwright() as p:
        browser = _chromium(p)
        try:
            # An unknown user is turned away at the door.
            door = browser.new_page()
            door.goto(f"{hub.base}/hub/login")
            door.fill("#username_input", "nobody-here")
            door.fill("#password_input", "whatever")
            door.click("#login_submit")
            door.wait_for_selector("text=Invalid username or password")

            # The learner: a chapter of their own, in their home, then fetch and submit.
            page = _log_in(browser, hub, idle)
            screenshots.append((page, "hub-learner.png"))
            chapter = nbformat.read(str(ROOT / "course" / "01_phases.ipynb"), as_version=4)
            heading = next(c.source for c in chapter.cells if c.cell_type == "markdown"
                           and c.source.startswith("# ")).splitlines()[0].lstrip("# ").strip()
            page.goto(f"{hub.base}/user/{idle}/lab/tree/course/01_phases.ipynb")
            page.wait_for_selector(f".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell:has-text({json.dumps(heading)})")
            assert not page.get_by_text("official Jupyter news").count(), "the news toast is shown"
            labels = _nbgrader_menu(page, "Assignment List")
            assert labels == ["Assignment List"], f"a learner's Nbgrader menu offers {labels}"
            page.click(f"#released_assignments_list .list_item:has-text('{ASSIGNMENT}') button:text-is('Fetch')")
            fetched = page.locator(f"#fetched_assignments_list .list_item:has-text('{ASSIGNMENT}')").first
            fetched.locator("a.assignment-notebooks-link").click()
            page.click(f"#nbgrader-{COURSE_ID}-{ASSIGNMENT} .nested_list_item a:text-is('{ASSIGNMENT}')")
            page.wait_for_selector(f".lm-TabBar-tab.lm-mod-current:has-text('{ASSIGNMENT}.ipynb')")
            page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")
            _nbgrader_menu(page, "Assignment List")
            fetched = page.locator(f"#fetched_assignments_list .list_item:has-text('{ASSIGNMENT}')").first
            fetched.locator("button:text-is('Submit')").click()
            page.wait_for_selector(f"#submitted_assignments_list .list_item:has-text('{ASSIGNMENT}')")
            home = Path(pwd.getpwnam(idle).pw_dir)
            mine = home / COURSE_ID / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
            assert mine.exists() and mine.stat().st_uid == pwd.getpwnam(idle).pw_uid
            assert (home / "course" / "01_phases.ipynb").stat().st_uid == pwd.getpwnam(idle).pw_uid
            # ... and plants a submission in the solver's name, dated in the future to win
            # (nbgrader's inbound is writable by every learner, nbgrader issue 1225).
            inbound = hub.state / "course" / "exchange" / COURSE_ID / "inbound"
            planted = f"{solver}+{ASSIGNMENT}+2099-01-01 00:00:00.000000 UTC+planted"
            hub.run_in_kernel(idle, (
                "import os, shutil\n"
                f"dest = os.path.join({str(inbound)!r}, {planted!r})\n"
                "os.mkdir(dest)\n"
                f"shutil.copy({str(mine)!r}, dest)\n"
                "open(os.path.join(dest, 'timestamp.txt'), 'w').write('2099-01-01 00:00:00.000000 UTC')\n"
                "open(os.path.join(dest, 'submission_secret.txt'), 'w').write('forged')\n"
                "os.chmod(dest, 0o700)\n"))
            assert (inbound / planted).stat().st_uid == pwd.getpwnam(idle).pw_uid
            news = hub.user(idle, "GET", "lab/api/settings/@jupyterlab/apputils-extension:notification")
            assert news["schema"]["properties"]["fetchNews"]["default"] == "false", news["schema"]

            # The solver fills in every answer cell (the fill_answers pattern, through the contents API).
            got = hub.user(solver, "POST", "assignments/fetch", args, form=True)
            assert (ASSIGNMENT, "fetched") in {(a["assignment_id"], a["status"]) for a in got["value"]}, got
            path = f"api/contents/{COURSE_ID}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
            model = hub.user(solver, "GET", path)
            answers, filled = _solution_answers(), set()
            # a probe after the first answer, run only when the instructor grades it: reading a judge
            # fails the answer (the solver's full marks are asserted below), and it writes a file
            marker = Path(tempfile.gettempdir()) / f"hub-probe-{secrets.token_hex(6)}"
            first = next(iter(answers))
            answers[first] += (
                f"\ntry:\n    open({str(hub.root / 'solutions' / ASSIGNMENT / 'judge.py')!r}).read()\n"
                f"except OSError:\n    pass\nelse:\n    raise RuntimeError('the probe read a judge')\n"
                f"try:\n    open({str(marker)!r}, 'w').write('out of the box')\nexcept OSError:\n    pass\n")
            for cell in model["content"]["cells"]:
                gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
                if gid in answers:
                    cell["source"] = answers[gid]
                    filled.add(gid)
            assert answers and filled == set(answers), f"answer cells {set(answers) - filled} not in the fetched notebook"
            hub.user(solver, "PUT", path, {"type": "notebook", "format": "json", "content": model["content"]})
            for _ in range(2):  # the solver submits twice: the later one counts
                got = hub.user(solver, "POST", "assignments/submit", args, form=True)
                assert got["success"] and any(a["status"] == "submitted" for a in got["value"]), got
                time.sleep(1.1)  # nbgrader's submission names differ by their time
            theirs = sorted(p for p in inbound.glob(f"{solver}+{ASSIGNMENT}+*")
                            if p.stat().st_uid == pwd.getpwnam(solver).pw_uid)
            assert len(theirs) == 2, list(inbound.iterdir())
            latest = (theirs[-1] / "timestamp.txt").read_text()

            # The instructor: the Formgrader tab inside JupyterLab renders (JupyterHub's
            # frame-ancestors 'none' left it blank).
            teacher = _log_in(browser, hub, hub.instructor)
            screenshots.append((teacher, "hub-formgrader.png"))
            _nbgrader_menu(teacher, "Formgrader")
            frame = teacher.frame_locator(".jp-MainAreaWidget:not(.lm-mod-hidden) iframe").first
            frame.locator(f"text={ASSIGNMENT}").first.wait_for()
            assert frame.locator("text=Manage Assignments").count(), "the formgrader did not render"
            # The formgrader in a tab of its own links to the classic notebook's /tree/ pages.
            teacher.goto(f"{hub.base}/tree/./solutions/{ASSIGNMENT}")
            teacher.wait_for_url(f"**/user/{hub.instructor}/lab/tree/solutions/{ASSIGNMENT}**")

            # The guide's commands, verbatim, in the instructor's terminal.
            commands = guide_commands()
            assert any("autograde" in c for c in commands) and any("export" in c for c in commands), commands
            ran = hub.terminal(hub.instructor, ["pwd", "command -v python", *commands])
            (_, _, pwd_out), (_, _, python_out) = ran[0], ran[1]
            assert str(hub.root) in pwd_out.splitlines(), f"the instructor's terminal starts in {pwd_out!r}"
            assert "/venv/bin/python" in python_out or str(ROOT / ".venv") in python_out, python_out
            for cmd, rc, out in ran[2:]:
                # collect refuses the planted entry, collects the rest and says so by its status
                expected = 1 if cmd.startswith("nbgrader collect") else 0
                assert rc == expected, f"`{cmd}` in the instructor's terminal exited {rc}:\n{out[-4000:]}"
            outputs = {cmd: out for cmd, _, out in ran}
            collect = next(out for cmd, out in outputs.items() if cmd.startswith("nbgrader collect"))
            assert re.search(rf"Refused a submission of {ASSIGNMENT} for {solver} \({re.escape(planted)}\): "
                             rf"it is owned by {idle}, not by {solver}", collect), collect[-3000:]
            assert not (inbound / planted).exists(), "the refused submission was not set aside"
            submitted = hub.state / "course" / "submitted"
            assert (submitted / solver / ASSIGNMENT / "timestamp.txt").read_text() == latest
            autograde = next(out for cmd, out in outputs.items() if "autograde" in cmd)
            assert "autograded 2 submission(s)" in autograde, autograde[-3000:]
            # graded from the instructor's seat, with nothing typed as root: contained all the same
            assert "every kernel ran in bubblewrap's" in autograde and "(user-namespace" in autograde, autograde[-3000:]
            assert not marker.exists(), "the probe graded from the instructor's seat wrote outside its box"
            feedback = next(out for cmd, out in outputs.items() if "release-feedback" in cmd)
            assert "released 2 feedback page(s)" in feedback, feedback[-3000:]

            # The gradebook, read in the instructor's server: nbgrader's own totals and the CSVs.
            out = hub.run_in_kernel(hub.instructor, (
                "import json, os\n"
                "from nbgrader.api import Gradebook\n"
                "with Gradebook(os.environ['COURSE_DB_URL']) as gb:\n"
                f"    totals = {{s.student.id: [s.score, s.max_score] for s in gb.find_assignment({ASSIGNMENT!r}).submissions}}\n"
                "    names = {s.id: [s.last_name, s.first_name] for s in gb.students}\n"
                "reports = os.environ['COURSE_REPORTS']\n"
                "rows = open(os.path.join(reports, 'grades.csv')).read().splitlines()\n"
                "summary = open(os.path.join(reports, 'grades-summary.csv')).read().splitlines()\n"
                "print(json.dumps({'totals': totals, 'rows': rows, 'summary': summary, 'names': names}))\n"))
            book = json.loads(out.strip().splitlines()[-1])
            totals = book["totals"]
            assert set(totals) == set(hub.learners), totals
            full = totals[solver][1]
            assert full > 0 and totals[solver] == [full, full] and totals[idle] == [0, full], totals
            assert all(None not in n for n in book["names"].values()), book["names"]
            rows = [r.split(",") for r in book["rows"][1:] if f",{ASSIGNMENT}," in r]
            assert {r[0] for r in rows} == set(hub.learners), book["rows"]
            for student, _, exercise, points, max_points, *_ in rows:  # then hints_seen
                expected = max_points if student == solver else "0"
                assert points == expected and float(max_points) > 0, (student, exercise, points, max_points)
            assert sorted(book["summary"][1:]) == sorted([f"{solver},{full:g},{full:g}", f"{idle},0,0"]), book["summary"]

            # The formgrader: the idle learner's failed tests are marked and show their feedback.
            listed = hub.user(hub.instructor, "GET", f"formgrader/api/submitted_notebooks/{ASSIGNMENT}/{ASSIGNMENT}")
            failed = {d["student"]: d for d in listed}
            assert failed[idle]["failed_tests"] and not failed[solver]["failed_tests"], listed
            result = json.loads((hub.state / "course" / "autograded" / idle / ASSIGNMENT / "result.json").read_text())
            message = next(t["feedback"] for t in result["tests"] if not t["passed"])
            teacher.goto(f"{hub.base}/user/{hub.instructor}/formgrader/submissions/{failed[idle]['id']}/")
            teacher.get_by_text(message[:60]).first.wait_for()
            teacher.screenshot(path=str(ARTIFACTS / "hub-formgrader-failure.png"))
            # The formgrader's Autograde button, pressed in the instructor's server (nbgrader runs
            # it there, among the server's threads): the course's grader grades in a process of its
            # own, the same grade, the box a tmpfs and never the disk.
            pressed = hub.user(hub.instructor, "POST", f"formgrader/api/submission/{ASSIGNMENT}/{solver}/autograde")
            assert pressed.get("success"), pressed
            again = json.loads((hub.state / "course" / "autograded" / solver / ASSIGNMENT / "result.json").read_text())
            assert again["score"] == again["max_score"] == full, again
            assert "files limited to 1024 MiB (a tmpfs)" in again["containment_reason"], again["containment_reason"]
            # The class report and the CSVs open in the instructor's JupyterLab.
            teacher.goto(f"{hub.base}/user/{hub.instructor}/lab/tree/reports/class-report.html")
            report = teacher.frame_locator(".jp-MainAreaWidget:not(.lm-mod-hidden) iframe").first
            report.locator("h1:text-is('Class report')").wait_for()
            assert report.locator("img").count() == 3, "the report's plots are missing"
            teacher.screenshot(path=str(ARTIFACTS / "hub-report.png"))
            for name in ("grades.csv", "grades-summary.csv"):
                teacher.goto(f"{hub.base}/user/{hub.instructor}/lab/tree/reports/{name}")
                teacher.wait_for_selector(f".lm-TabBar-tab.lm-mod-current:has-text('{name}')")
                status, text = hub.request("GET", f"/user/{hub.instructor}/files/reports/{name}",
                                           hub.token(hub.instructor))
                assert status == 200 and text.startswith("student,"), (status, text[:300])

            # Feedback: the solver through the API, the learner in the browser.
            got = hub.user(solver, "POST", "assignments/fetch_feedback", args, form=True)
            assert got["success"], got
            _nbgrader_menu(page, "Assignment List")
            page.locator(f"#submitted_assignments_list .list_item:has-text('{ASSIGNMENT}') "
                         "button:text-is('Fetch Feedback')").first.click()
            deadline = time.time() + 120
            while time.time() < deadline and not list((home / COURSE_ID / ASSIGNMENT / "feedback").glob("*/*.html")):
                time.sleep(1)
            for learner, other, score in [(solver, idle, full), (idle, solver, 0)]:
                folder = hub.user(learner, "GET", f"api/contents/{COURSE_ID}/{ASSIGNMENT}/feedback")
                pages = [item for stamp in folder["content"]
                         for item in hub.user(learner, "GET", f"api/contents/{stamp['path']}")["content"]
                         if item["name"].endswith(".html")]
                assert [p["name"] for p in pages] == [f"{ASSIGNMENT}.html"], pages
                html = hub.user(learner, "GET", f"api/contents/{pages[0]['path']}?type=file&format=text")["content"]
                assert f"Student: <b>{learner}</b>" in html and other not in html, html[:1500]
                assert re.search(rf"score <b>{score:g} / {full:g}</b>", html), html[:1500]
                if learner == idle:  # read in the browser
                    page.goto(f"{hub.base}/user/{idle}/files/{urllib.parse.quote(pages[0]['path'])}")
                    page.wait_for_selector(f"text=Student: {idle}")
                    assert page.get_by_text(f"score {score:g} / {full:g}").count() or \
                        f"{score:g} / {full:g}" in page.content()
        finally:
            for shot_page, name in screenshots:
                with contextlib.suppress(Exception):
                    shot_page.screenshot(path=str(ARTIFACTS / name))
            browser.close()

    # A learner's terminal: the course's python, their chapters, and no grading material.
    ran = hub.terminal(idle, [f"cat {hub.root / 'solutions' / '04_control_flow' / 'judge.py'}", "ls ~/course",
                              "python -c 'import autograder, jax; print(\"ok\", jax.__version__)'"])
    (_, cat_rc, cat_out), (_, _, listed), (_, py_rc, py_out) = ran
    assert cat_rc != 0 and "Permission denied" in cat_out, f"a learner can read the judge: {cat_out[-2000:]}"
    assert "01_phases.ipynb" in listed and "10_review.ipynb" in listed, listed
    assert py_rc == 0 and f"ok {jax_version()}" in py_out, py_out

    # Only their own: a learner's code cannot read another learner's home, the gradebook, or
    # list the released feedback of others.
    course_state = hub.state / "course"
    out = hub.run_in_kernel(idle, (
        "import os, jax, autograder\n"
        "print('jax', jax.__version__, jax.numpy.arange(3).sum())\n"
        f"for path in [{str(Path(pwd.getpwnam(solver).pw_dir))!r}, {str(course_state / 'gradebook')!r},"
        f" {str(course_state / 'submitted')!r}, {str(course_state / 'exchange' / COURSE_ID / 'feedback')!r},"
        f" {str(course_state / 'exchange' / COURSE_ID / 'inbound')!r}, {str(hub.root / 'solutions')!r}, {str(hub.root / '.git')!r},"
        f" {str(hub.root / 'reports')!r}, {str(hub.root / 'tests')!r}]:\n"
        "    try:\n"
        "        os.listdir(path); print('READABLE', path)\n"
        "    except PermissionError:\n"
        "        print('denied', path)\n"))
    assert "READABLE" not in out and out.count("denied") == 9, out
    # What a learner's code writes where everyone may look (/tmp) the other learner cannot read.
    left = f"/tmp/{idle}-{secrets.token_hex(4)}"
    hub.run_in_kernel(idle, f"open({left!r}, 'w').write('my answer')\n")
    try:
        assert Path(left).stat().st_mode & 0o077 == 0, oct(Path(left).stat().st_mode)
        hub.run_in_kernel(solver, (  # fails (its status is not ok) when the file can be read
            "try:\n"
            f"    open({left!r}).read()\n"
            "except PermissionError:\n"
            "    pass\n"
            "else:\n"
            f"    raise AssertionError('a learner read what another learner wrote in ' + {left!r})\n"))
    finally:
        Path(left).unlink(missing_ok=True)
    assert f"jax {jax_version()} 3" in out, f"a learner's kernel lacks the course's JAX: {out}"

    # A learner's server has no formgrader (the instructor's tools are switched off there).
    status, _ = hub.request("GET", f"/user/{idle}/formgrader/api/assignments", hub.token(idle))
    assert status == 404, f"a learner's server answers the formgrader API with HTTP {status}"

    # Several instructors may share the gradebook: the group can write it, nobody else can read it.
    gradebook = course_state / "gradebook" / "gradebook.db"
    mode = gradebook.stat().st_mode
    assert mode & 0o060 == 0o060, f"{gradebook} is {oct(mode)}: the instructor group cannot write it"
    assert (course_state / "gradebook").stat().st_mode & 0o007 == 0, "others may enter the gradebook folder"


_PRESENT_BEFORE = {name for name in (".jupyter", ".local", ".npm", ".cache", ".ipython")
                   if (ROOT / name).exists()}


def test_alone_the_current_user_logs_in_with_the_printed_password_and_gets_the_course(tmp_path):
    """The committed course file: no system users, SimpleLocalProcessSpawner, the current user."""
    user = getpass.getuser()
    with _make_hub({"instructor": user, "learners": []}, tmp_path / "hub", "hub-alone.log",
                   make_args=_use_venv(Path(sys.prefix))) as hub:
        password = (tmp_path / "hub" / "private" / "password").read_text().strip()
        named = re.search(r"kept in (\.hub/\S+?)\)", (ROOT / "hub" / "course.toml").read_text()).group(1)
        assert (tmp_path / "hub" / Path(named).relative_to(".hub")).read_text().strip() == password, named
        assert password and password in hub.log_path.read_text(), "make hub must print the password"
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        page = opener.open(f"{hub.base}/hub/login", timeout=60).read().decode()
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page).group(1)

        def login(name, secret):
            data = urllib.parse.urlencode({"username": name, "password": secret, "_xsrf": xsrf}).encode()
            try:
                with opener.open(f"{hub.base}/hub/login", data=data, timeout=300) as resp:
                    return resp.geturl(), resp.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.geturl(), exc.read().decode()

        url, text = login(user, "not-the-password")
        assert "Invalid username or password" in text, url
        url, _ = login(user, password)
        assert f"/user/{user}/" in url or "/hub/spawn" in url, url
        hub.start_servers([user])
        assignments = {a["name"]: a for a in hub.user(user, "GET", "formgrader/api/assignments")}
        assert assignments[ASSIGNMENT]["release_path"] == f"exercises/{ASSIGNMENT}", assignments
        listed = hub.user(user, "GET", f"api/contents/solutions/{ASSIGNMENT}")
        assert f"{ASSIGNMENT}.ipynb" in {c["name"] for c in listed["content"]}, "not the checkout"
        # the server runs from the checkout, but its HOME (Jupyter's, npm's, pip's files) is elsewhere
        home = hub.user(user, "GET", "api/kernelspecs")  # any request: the server is up and has run
        assert home
        written = [name for name in (".jupyter", ".local", ".npm", ".cache", ".ipython")
                   if (ROOT / name).exists() and name not in _PRESENT_BEFORE]
        assert not written, f"the alone server wrote {written} into the checkout (HOME is the checkout?)"


def test_make_hub_refuses_when_learners_could_not_start_a_server(tmp_path):
    """`make hub` checks, as a user of no group of the course, that a server could start from
    the servers' venv: one under a private folder, and one that came out empty (no packages),
    are refused with the reason; the venv the hub builds passes."""
    if os.geteuid() != 0:
        pytest.skip("runs the check as another user: needs root")
    private = tmp_path / "private"  # pytest's folders are root's alone
    private.mkdir(mode=0o700)
    (private / "bin").mkdir()
    (private / "bin" / "python").symlink_to(sys.executable)
    with pytest.raises(SystemExit, match=r"could not start: .*private/bin/python cannot be run: Permission denied"):
        workshop.check_learners_run(private)
    # a spawn that could not start says why (JupyterHub shows the message on the person's page)
    with pytest.raises(RuntimeError, match=r"nobody's server cannot start: .*private/bin/python cannot be run") as got:
        workshop.check_spawn("nobody", private)
    from jupyterhub.utils import format_exception

    assert format_exception(got.value, only_jupyterhub=True)[0] == str(got.value)  # the page's message
    shared = Path(tempfile.mkdtemp(prefix="hubcheck-", dir="/tmp"))
    try:
        os.chmod(shared, 0o755)
        package = shared / "package"  # the course's package where learners may read it
        shutil.copytree(ROOT / "autograder", package / "autograder", ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(["chmod", "-R", "a+rX", str(package)], check=True)
        good = workshop.server_venv(workshop.paths(shared / "state"), learner_venv(shared / "venv", package))
        workshop.check_learners_run(good)  # no exception: learners can start a server from it
        empty = shared / "empty"
        (empty / "bin").mkdir(parents=True)
        (empty / "bin" / "python").symlink_to(Path(os.path.realpath(good / "bin" / "python")))
        (empty / "pyvenv.cfg").write_text((good / "pyvenv.cfg").read_text())
        for d in (empty, empty / "bin"):
            os.chmod(d, 0o755)
        with pytest.raises(SystemExit, match=r"missing modules: \['jupyterhub', 'jupyterlab'"):
            workshop.check_learners_run(empty)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_the_shared_interpreter_keeps_the_standard_librarys_bytecode(tmp_path):
    """The copy of the interpreter learners run (when .venv's is under a private folder) has the
    standard library's bytecode: a learner cannot write it there, and without it every server and
    kernel compiled the modules it imports from source on each start."""
    if os.geteuid() != 0:
        pytest.skip("runs the copy as another user: needs root")
    shared = Path(tempfile.mkdtemp(prefix="hubpython-", dir="/tmp"))
    try:
        os.chmod(shared, 0o755)
        python = workshop.shared_interpreter(workshop.paths(shared / "state"))
        if not str(python).startswith(str(shared)):
            pytest.skip(f"{python} is the system's own interpreter: no copy was made")
        probe = ("import importlib.util, json, os, argparse\n"
                 "print(all(os.path.exists(importlib.util.cache_from_source(m.__file__)) for m in (json, os, argparse)))")
        proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(python), "-c", probe],
                              capture_output=True, text=True, timeout=120, cwd="/")
        assert proc.stdout.strip() == "True", proc.stdout + proc.stderr
    finally:
        shutil.rmtree(shared, ignore_errors=True)
