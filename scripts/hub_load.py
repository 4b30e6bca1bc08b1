"""Load test of `make hub` on loopback: N simulated learners at once, through the hub's REST API.

    sudo .venv/bin/python scripts/hub_load.py --learners 1 2 3 --out artifacts/hub_load.json

As root (the hub creates system users): serves a copy of the working tree as a room of one
instructor and max(N) learners (users named load<tag>-..., removed at the end), releases
01_phases from the instructor's formgrader, then for each N in turn, N learners at once:

1. log in through the hub's login form (PAM, a password set with chpasswd) and start their server;
   *time to a usable server*: from the login to the server answering its API;
2. run every code cell of chapter 01 (course/01_phases.ipynb, the learner's ~/course copy) in a
   fresh kernel through the kernel API; *chapter time*: the cells' wall time;
3. fetch and submit 01_phases through nbgrader's Assignments API.

Their servers are stopped between rounds. Prints one JSON object (also to --out): per N the
median and largest of each time, the solo chapter time (N=1), the machine's cores, and the most
learners per core whose every chapter ran within 2x the solo time.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import http.cookiejar
import json
import os
import re
import secrets
import shutil
import signal
import statistics
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "hub"))
ASSIGNMENT = "01_phases"
COURSE_ID = "jax-mental-model"


def _api(base, method, path, token, data=None, form=False, timeout=600):
    headers = {"Authorization": f"token {token}"}
    body = None
    if data is not None:
        body = (urllib.parse.urlencode(data) if form else json.dumps(data)).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded" if form else "application/json"
    req = urllib.request.Request(base + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read().decode()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def log_in(base, user, password) -> None:
    """The hub's login form, as a browser posts it."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{base}/hub/login", timeout=300).read().decode()
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page).group(1)
    data = urllib.parse.urlencode({"username": user, "password": password, "_xsrf": xsrf}).encode()
    with opener.open(f"{base}/hub/login", data=data, timeout=600) as resp:
        resp.read()


def run_cells(base, user, token, cells, timeout=1800) -> None:
    """Run ``cells`` one after another in a fresh kernel of ``user``'s server; raise on an error
    other than one the chapter shows on purpose (its cells tagged raises-exception)."""
    import websocket  # websocket-client, a dependency of jupyter_server

    status, kernel = _api(base, "POST", f"/user/{user}/api/kernels", token, {"name": "python3"})
    assert status in (200, 201), (status, kernel)
    ws = websocket.create_connection(base.replace("http://", "ws://") + f"/user/{user}/api/kernels/{kernel['id']}/channels",
                                     header=[f"Authorization: token {token}"], timeout=timeout)
    try:
        for source, may_raise in cells:
            msg_id = uuid.uuid4().hex
            ws.send(json.dumps({
                "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": user,
                           "session": uuid.uuid4().hex, "version": "5.3", "date": ""},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": source, "silent": False, "store_history": True,
                            "user_expressions": {}, "allow_stdin": False, "stop_on_error": False}}))
            while True:
                msg = json.loads(ws.recv())
                if msg.get("parent_header", {}).get("msg_id") == msg_id and msg["msg_type"] == "execute_reply":
                    if msg["content"]["status"] != "ok" and not may_raise:
                        raise RuntimeError(f"{user}: a cell of chapter 01 failed: {msg['content'].get('evalue')}\n{source[:300]}")
                    break
    finally:
        ws.close()
        _api(base, "DELETE", f"/user/{user}/api/kernels/{kernel['id']}", token)


def chapter_cells() -> list[tuple[str, bool]]:
    nb = nbformat.read(str(REPO / "course" / f"{ASSIGNMENT}.ipynb"), as_version=4)
    return [(c.source, "raises-exception" in c.metadata.get("tags", [])) for c in nb.cells
            if c.cell_type == "code" and c.source.strip()]


def one_learner(base, admin, user, password, cells) -> dict:
    t0 = time.perf_counter()
    log_in(base, user, password)  # the hub starts the server on login (its spawn page)
    _api(base, "POST", f"/hub/api/users/{user}/server", admin)
    status, got = _api(base, "POST", f"/hub/api/users/{user}/tokens", admin, {"note": "load", "expires_in": 7200})
    token = got["token"]
    deadline = time.time() + 900
    while time.time() < deadline:
        status, _ = _api(base, "GET", f"/user/{user}/api/status", token, timeout=60)
        if status == 200:
            break
        time.sleep(0.5)
    else:
        raise RuntimeError(f"{user}'s server was not usable within 900 s")
    t1 = time.perf_counter()
    # the chapter from the learner's own copy (~/course), as a learner opens it
    run_cells(base, user, token, cells)
    t2 = time.perf_counter()
    args = {"course_id": COURSE_ID, "assignment_id": ASSIGNMENT}
    for action in ("fetch", "submit"):
        status, got = _api(base, "POST", f"/user/{user}/assignments/{action}", token, args, form=True)
        assert status == 200 and got["success"], (action, status, got)
    t3 = time.perf_counter()
    return {"user": user, "server_s": round(t1 - t0, 1), "chapter_s": round(t2 - t1, 1),
            "fetch_submit_s": round(t3 - t2, 1)}


@contextlib.contextmanager
def room(size: int):
    """A `make hub` room of one instructor and ``size`` learners, serving a copy of the tree."""
    from test_hub import _free_port, _remove_user, course_copy, learner_venv

    from conftest import wait_until_serving

    tag = secrets.token_hex(2)
    names = {"instructor": f"load{tag}-ta", "learners": [f"load{tag}-l{i}" for i in range(size)]}
    base_dir = Path(tempfile.mkdtemp(prefix="hubload-", dir="/tmp"))
    os.chmod(base_dir, 0o755)
    course = base_dir / "course.toml"
    course.write_text(f'[course]\ncourse_id = "{COURSE_ID}"\ninstructor_group = "load{tag}-inst"\n'
                      f'[users]\ninstructors = ["{names["instructor"]}"]\nlearners = {json.dumps(names["learners"])}\n')
    port, token = _free_port(), secrets.token_hex(16)
    proc = None
    try:
        root = course_copy(base_dir / "checkout")
        venv = learner_venv(base_dir / "venv", root)
        env = dict(os.environ, HUB_STATE=str(base_dir / "hub"), HUB_PORT=str(port), HUB_API_TOKEN=token,
                   HUB_COURSE=str(course))
        log = open(base_dir / "hub.log", "w")  # noqa: SIM115 - open while the hub runs
        t0 = time.perf_counter()
        proc = subprocess.Popen(["make", "--no-print-directory", "hub", f"VENV={venv}", "-o", str(venv / ".installed-stamp")],
                                cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(proc, f"{base}/hub/api", 900, "make hub", lambda: (base_dir / "hub.log").read_text()[-3000:])
        yield base, token, names, round(time.perf_counter() - t0, 1)
    finally:
        pid_file = base_dir / "hub" / "private" / "jupyterhub.pid"
        if proc is not None and proc.poll() is None and pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=120)
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        for name in [names["instructor"], *names["learners"]]:
            _remove_user(name)
        subprocess.run(["groupdel", f"load{tag}-inst"], capture_output=True)
        shutil.rmtree(base_dir, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, nargs="+", default=[1, 2, 3],
                        help="the numbers of learners at once, one round each (the first should be 1: the solo times)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("hub_load.py creates system users: run it as root")
    cells = chapter_cells()
    rounds = []
    with room(max(args.learners)) as (base, admin, names, startup_s):
        inst = names["instructor"]
        _api(base, "POST", f"/hub/api/users/{inst}/server", admin)
        _, got = _api(base, "POST", f"/hub/api/users/{inst}/tokens", admin, {"note": "load"})
        while _api(base, "GET", f"/user/{inst}/api/status", got["token"], timeout=60)[0] != 200:
            time.sleep(1)
        status, released = _api(base, "POST", f"/user/{inst}/formgrader/api/assignment/{ASSIGNMENT}/release", got["token"], {})
        assert status == 200 and released["success"], released
        passwords = {u: secrets.token_urlsafe(12) for u in names["learners"]}
        subprocess.run(["chpasswd"], input="".join(f"{u}:{p}\n" for u, p in passwords.items()), text=True, check=True)
        for n in args.learners:
            users = names["learners"][:n]
            started = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(n) as pool:
                each = list(pool.map(lambda u: one_learner(base, admin, u, passwords[u], cells), users))
            wall = time.perf_counter() - started
            for u in users:
                _api(base, "DELETE", f"/hub/api/users/{u}/server", admin)
            for u in users:
                while _api(base, "GET", f"/hub/api/users/{u}", admin)[1].get("server"):
                    time.sleep(1)
            rounds.append({"learners": n, "wall_s": round(wall, 1), "each": each,
                           **{f"{k}_{stat}": round(f([e[k] for e in each]), 1)
                              for k in ("server_s", "chapter_s", "fetch_submit_s")
                              for stat, f in (("median", statistics.median), ("max", max))}})
            print(json.dumps(rounds[-1]), file=sys.stderr)
    solo = next((r["chapter_s_max"] for r in rounds if r["learners"] == 1), None)
    cores = os.cpu_count()
    within = [r["learners"] for r in rounds if solo and r["chapter_s_max"] <= 2 * solo]
    report = {"cores": cores, "hub_startup_s": startup_s, "solo_chapter_s": solo, "rounds": rounds,
              "most_learners_within_2x": max(within) if within else None,
              "learners_per_core_within_2x": round(max(within) / cores, 2) if within else None,
              "load_average_at_end": os.getloadavg()}
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
