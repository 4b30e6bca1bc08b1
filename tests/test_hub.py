"""`make hub` end to end, on loopback: one instructor and two learners, real system users.

The module starts `make hub` (as root: it creates the users, their homes and the course's
folders) with a course file of its own, then drives everything through the hub's REST API
(tokens issued by the hub) and each user's own server: nbgrader's formgrader API for the
instructor, the Assignments tab's API for the learners, the contents API to fill in a notebook,
and a kernel in the instructor's server for `python -m autograder autograde` (the command `make
autograde` runs). One learner fetches in Debian's Chromium driven by Playwright.

Checked: the release reaches both learners; one submits the solution (answer cells from
solutions/, as tests/conftest.py's fill_answers does), one the untouched notebook; the
instructor collects and autogrades, and the gradebook holds full marks and zero; the feedback is
released and each learner fetches a page about themselves only; learners cannot read each
other's homes, the gradebook or the exchange's feedback folder. Users, homes, processes and the
hub's state are removed at the end. The hub's log lands in artifacts/hub.log.
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
def _make_hub(names, state: Path, log_name: str, **env):
    """`make hub` on a free port with ``env`` added; stopped (with every server) on exit."""
    assert shutil.which("npm") and shutil.which("node"), "node and npm are needed for configurable-http-proxy"
    port, token = _free_port(), secrets.token_hex(16)
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / log_name
    log = open(log_path, "w")  # noqa: SIM115 - open while the hub runs
    env = dict(os.environ, HUB_STATE=str(state), HUB_PORT=str(port), HUB_API_TOKEN=token, **env)
    proc = subprocess.Popen(["make", "--no-print-directory", "hub"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    the_hub = Hub(f"http://127.0.0.1:{port}", token, names, state, log_path)
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
        with _make_hub(names, state / "hub", "hub.log", HUB_COURSE=str(course)) as the_hub:
            yield the_hub
    finally:
        for name in [names["instructor"], *names["learners"]]:
            _remove_user(name)
        subprocess.run(["groupdel", names["group"]], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="module")
def released(hub):
    hub.start_servers([hub.instructor])
    got = hub.user(hub.instructor, "POST", f"formgrader/api/assignment/{ASSIGNMENT}/release", {})
    assert got["success"], got
    assert "Released as" in got["log"], got["log"]
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
        f"r = subprocess.run([sys.executable, {str(ROOT / 'hub' / 'workshop.py')!r}, 'release-feedback',"
        " 'no_such_assignment'], capture_output=True, text=True)\n"
        "print(r.returncode, r.stderr)\n"))
    assert "unknown assignment 'no_such_assignment'" in out and ASSIGNMENT in out, out
    assert not out.startswith("0 "), out


def test_a_learner_logs_in_fetches_in_the_assignments_panel_and_sees_the_notebook(released):
    hub = released
    learner = hub.learners[1]
    password = secrets.token_urlsafe(12)
    subprocess.run(["chpasswd"], input=f"{learner}:{password}\n", text=True, check=True)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.fail(f"Playwright is pinned in requirements.txt but missing ({exc}): run `make env`")
    if not Path(CHROMIUM).exists():
        subprocess.run(["bash", str(ROOT / "tests" / "browser_setup.sh")], check=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--headless", "--no-sandbox", "--disable-gpu",
                                          "--disable-background-networking", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(240_000)
        try:
            page.goto(f"{hub.base}/hub/login")
            page.fill("#username_input", "nobody-here")  # an unknown user is turned away
            page.fill("#password_input", password)
            page.click("#login_submit")
            page.wait_for_selector("text=Invalid username or password")
            page.fill("#username_input", learner)
            page.fill("#password_input", password)
            page.click("#login_submit")
            page.wait_for_url(f"**/user/{learner}/lab**")
            page.click(".lm-MenuBar-itemLabel:text-is('Nbgrader')")
            labels = [t.strip() for t in page.locator(".lm-Menu-itemLabel").all_inner_texts() if t.strip()]
            assert labels == ["Assignment List"], f"a learner's Nbgrader menu offers {labels}"
            page.click(".lm-Menu-itemLabel:text-is('Assignment List')")
            page.click(f"#released_assignments_list .list_item:has-text('{ASSIGNMENT}') button:text-is('Fetch')")
            fetched = page.locator(f"#fetched_assignments_list .list_item:has-text('{ASSIGNMENT}')").first
            fetched.locator("a.assignment-notebooks-link").click()
            page.click(f"#nbgrader-{COURSE_ID}-{ASSIGNMENT} .nested_list_item a:text-is('{ASSIGNMENT}')")
            page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")
            tab = page.locator(".lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel").all_inner_texts()
            assert f"{ASSIGNMENT}.ipynb" in tab, tab
        finally:
            page.screenshot(path=str(ARTIFACTS / "hub-learner.png"))
            browser.close()
    # What the page showed is on disk, in the learner's own home, owned by the learner.
    fetched = Path(pwd.getpwnam(learner).pw_dir) / COURSE_ID / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert fetched.exists() and fetched.stat().st_uid == pwd.getpwnam(learner).pw_uid


def jax_version() -> str:
    from importlib.metadata import version

    return version("jax")


def _solution_answers() -> dict[str, str]:
    nb = nbformat.read(str(solution_notebook(ASSIGNMENT)), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution") and not c.metadata["nbgrader"].get("grade")}


def test_release_fetch_submit_collect_autograde_feedback(released):
    hub = released
    solver, idle = hub.learners
    hub.start_servers(hub.learners)
    args = {"course_id": COURSE_ID, "assignment_id": ASSIGNMENT}
    for learner in hub.learners:
        listed = {(a["assignment_id"], a["status"]) for a in hub.assignments(learner)}
        assert (ASSIGNMENT, "released") in listed or (ASSIGNMENT, "fetched") in listed, listed
        got = hub.user(learner, "POST", "assignments/fetch", args, form=True)
        assert (ASSIGNMENT, "fetched") in {(a["assignment_id"], a["status"]) for a in got["value"]}, got

    # The solver fills in every answer cell (the fill_answers pattern, through the contents API).
    path = f"api/contents/{COURSE_ID}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    model = hub.user(solver, "GET", path)
    answers, filled = _solution_answers(), set()
    for cell in model["content"]["cells"]:
        gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell["source"] = answers[gid]
            filled.add(gid)
    assert answers and filled == set(answers), f"answer cells {set(answers) - filled} not in the fetched notebook"
    hub.user(solver, "PUT", path, {"type": "notebook", "format": "json", "content": model["content"]})

    for learner in hub.learners:
        got = hub.user(learner, "POST", "assignments/submit", args, form=True)
        assert got["success"], got
        assert any(a["status"] == "submitted" for a in got["value"]), got

    got = hub.user(hub.instructor, "POST", f"formgrader/api/assignment/{ASSIGNMENT}/collect", {})
    assert got["success"], got
    for learner in hub.learners:
        assert f"Collecting submission: {learner} {ASSIGNMENT}" in got["log"], got["log"]

    # `make autograde` runs `python -m autograder autograde`: here in the instructor's own server.
    out = hub.run_in_kernel(hub.instructor, (
        "import subprocess, sys\n"
        f"r = subprocess.run([sys.executable, '-m', 'autograder', 'autograde', {ASSIGNMENT!r}],"
        f" capture_output=True, text=True, cwd={str(ROOT)!r})\n"
        "print('RC', r.returncode, r.stdout, r.stderr[-4000:])\n"))
    assert "RC 0" in out and "autograded 2 submission(s)" in out, out

    # The gradebook, read in the instructor's server: nbgrader's own totals and `make export`'s CSV.
    out = hub.run_in_kernel(hub.instructor, (
        "import json, os, subprocess, sys\n"
        "from nbgrader.api import Gradebook\n"
        "with Gradebook(os.environ['COURSE_DB_URL']) as gb:\n"
        f"    totals = {{s.student.id: [s.score, s.max_score] for s in gb.find_assignment({ASSIGNMENT!r}).submissions}}\n"
        f"r = subprocess.run([sys.executable, '-m', 'autograder', 'export'], capture_output=True, text=True, cwd={str(ROOT)!r})\n"
        "assert r.returncode == 0, r.stderr\n"
        "rows = open(os.path.join(os.environ['COURSE_STATE'], 'grades.csv')).read().splitlines()\n"
        "print(json.dumps({'totals': totals, 'rows': rows}))\n"))
    book = json.loads(out.strip().splitlines()[-1])
    totals = book["totals"]
    assert set(totals) == set(hub.learners), totals
    full = totals[solver][1]
    assert full > 0 and totals[solver] == [full, full], totals
    assert totals[idle] == [0, full], totals
    rows = [r.split(",") for r in book["rows"][1:] if f",{ASSIGNMENT}," in r]
    assert {r[0] for r in rows} == set(hub.learners), book["rows"]
    for student, _, exercise, points, max_points in rows:
        expected = max_points if student == solver else "0"
        assert points == expected and float(max_points) > 0, (student, exercise, points, max_points)

    out = hub.run_in_kernel(hub.instructor, (
        "import subprocess, sys\n"
        f"r = subprocess.run([sys.executable, {str(ROOT / 'hub' / 'workshop.py')!r}, 'release-feedback',"
        f" {ASSIGNMENT!r}], capture_output=True, text=True)\n"
        "print('RC', r.returncode, r.stdout, r.stderr[-4000:])\n"))
    assert "RC 0" in out and "released 2 feedback page(s)" in out, out

    for learner, other, score in [(solver, idle, full), (idle, solver, 0)]:
        got = hub.user(learner, "POST", "assignments/fetch_feedback", args, form=True)
        subs_seen = [s for a in got["value"] if a["status"] == "submitted" for s in a["submissions"]]
        assert subs_seen and all(s["student_id"] == learner for s in subs_seen), subs_seen
        assert subs_seen[-1]["has_local_feedback"], subs_seen
        folder = hub.user(learner, "GET", f"api/contents/{COURSE_ID}/{ASSIGNMENT}/feedback")
        pages = [item for stamp in folder["content"]
                 for item in hub.user(learner, "GET", f"api/contents/{stamp['path']}")["content"]
                 if item["name"].endswith(".html")]
        assert [p["name"] for p in pages] == [f"{ASSIGNMENT}.html"], pages
        html = hub.user(learner, "GET", f"api/contents/{pages[0]['path']}?type=file&format=text")["content"]
        assert f"Student: <b>{learner}</b>" in html and other not in html, html[:1500]
        assert re.search(rf"score <b>{score:g} / {full:g}</b>", html), html[:1500]

    # Only their own: a learner's code cannot read another learner's home, the gradebook, or
    # list the released feedback of others.
    course_state = hub.state / "course"
    out = hub.run_in_kernel(idle, (
        "import os, jax, autograder\n"
        "print('jax', jax.__version__, jax.numpy.arange(3).sum())\n"
        f"for path in [{str(Path(pwd.getpwnam(solver).pw_dir))!r}, {str(course_state / 'gradebook')!r},"
        f" {str(course_state / 'submitted')!r}, {str(course_state / 'exchange' / COURSE_ID / 'feedback')!r},"
        f" {str(course_state / 'exchange' / COURSE_ID / 'inbound')!r}]:\n"
        "    try:\n"
        "        os.listdir(path); print('READABLE', path)\n"
        "    except PermissionError:\n"
        "        print('denied', path)\n"))
    assert "READABLE" not in out and out.count("denied") == 5, out
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
    with _make_hub({"instructor": user, "learners": []}, tmp_path / "hub", "hub-alone.log") as hub:
        password = (tmp_path / "hub" / "private" / "password").read_text().strip()
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
