"""A gradebook shared on a real PostgreSQL server (Debian's `postgresql`, on loopback).

Two graders (`python -m autograder autograde A` and `... autograde B`) and an `export` run at
once against one COURSE_DB_URL, ten times in a row, each time on a new database, so that all
three race to create nbgrader's schema and to write the same students. Every grade is checked
in the database (exactly one row per student, assignment and test, none missing) and in
`export`. The first round grades the notebooks; later rounds reuse those results (the
submissions are unchanged: the races under test are the gradebook's, not the kernels'). A
final rerun, with one submission changed, must regrade only that one and update its grades in
place. An unreachable or wrongly authenticated URL gets one line naming the URL without its
password.
"""
from __future__ import annotations

import csv
import glob
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, released_notebook, solution_notebook

pytestmark = pytest.mark.xdist_group("postgres")
A, B = "01_phases", "02_static_dynamic"   # two of the cheapest assignments to grade
ROUNDS = 10


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _expected(assignment: str, full: bool) -> dict:
    """``{test grade id: (points, max points)}`` read from the source notebook's metadata."""
    nb = nbformat.read(str(solution_notebook(assignment)), as_version=4)
    out = {}
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        if c.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            points = float(meta.get("points", 0))
            out[meta["grade_id"]] = (points if full else 0.0, points)
    assert out, f"{assignment} has no graded test cells"
    return out


def _root_prefix() -> list[str]:
    """How to run a command as root: directly, through sudo, or a clear failure."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    pytest.fail("PostgreSQL's server (Debian's `postgresql` package) is not installed, and this suite "
                "runs neither as root nor with password-less sudo: install it once with "
                "`apt-get install postgresql`")


def _server_binaries() -> Path:
    """The newest installed PostgreSQL's bin folder, installing Debian's `postgresql` if missing
    (without letting the package create and start its own `main` cluster)."""
    def newest():
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                       key=lambda p: int(Path(p).parent.parent.name))
        return Path(found[-1]).parent if found else None

    if (bindir := newest()) is not None:
        return bindir
    prefix = _root_prefix()
    conf = Path("/etc/postgresql-common/createcluster.conf")
    if not conf.exists():
        subprocess.run(prefix + ["sh", "-c", f"mkdir -p {conf.parent} && "
                                 f"echo 'create_main_cluster = false' > {conf}"], check=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = prefix + ["apt-get", "install", "-y", "-q", "--no-install-recommends",
                        "-o", "Dpkg::Options::=--force-confold", "postgresql"]
    proc = subprocess.run(install, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:  # a fresh machine's package lists may be missing or old
        subprocess.run(prefix + ["apt-get", "update", "-q"], capture_output=True, env=env, timeout=600)
        proc = subprocess.run(install, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0 or newest() is None:
        pytest.fail(f"installing PostgreSQL with apt failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return newest()


class Server:
    """A throwaway PostgreSQL cluster on 127.0.0.1 with a password-protected superuser."""

    user = "grader"

    def __init__(self):
        self.bin = _server_binaries()
        self.as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.dir = Path(tempfile.mkdtemp(prefix="course-pg-"))
        self.data, self.log = self.dir / "data", self.dir / "server.log"
        self.password = "pw-" + secrets.token_hex(8)
        self.port = _free_port()
        pwfile = self.dir / "pw"
        pwfile.write_text(self.password + "\n")
        if self.as_postgres:
            shutil.chown(self.dir, "postgres")
            shutil.chown(pwfile, "postgres")
        self._run("initdb", "-D", self.data, "-U", self.user, f"--pwfile={pwfile}",
                  "--auth-host=scram-sha-256", "--auth-local=peer", "-E", "UTF8", "--no-sync")
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.dir} "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
        self._run("pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "-o", options, "start")

    def _run(self, tool, *args):
        proc = subprocess.run([*self.as_postgres, str(self.bin / tool), *map(str, args)],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            pytest.fail(f"{tool} failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}{log}")

    def url(self, database: str, password: str | None = None) -> str:
        return (f"postgresql://{self.user}:{password or self.password}@127.0.0.1:{self.port}/"
                f"{database}")

    def connect(self, database="postgres"):
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user=self.user,
                               password=self.password, dbname=database, autocommit=True)

    def create_database(self, name: str) -> str:
        with self.connect() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def grades(self, database: str) -> list[tuple]:
        """``[(student, assignment, test id, auto score, max score)]``, one per grade row."""
        with self.connect(database) as conn:
            return [tuple(r) for r in conn.execute("""
                SELECT st.id, a.name, c.name, g.auto_score, gc.max_score
                FROM grade g
                JOIN submitted_notebook sn ON g.notebook_id = sn.id
                JOIN submitted_assignment sa ON sn.assignment_id = sa.id
                JOIN student st ON sa.student_id = st.id
                JOIN assignment a ON sa.assignment_id = a.id
                JOIN base_cell c ON g.cell_id = c.id
                JOIN grade_cells gc ON gc.id = c.id""").fetchall()]

    def stop(self):
        subprocess.run([*self.as_postgres, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast",
                        "-w", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def server():
    srv = Server()
    try:
        yield srv
    finally:
        srv.stop()


def _start(*args, env):
    return subprocess.Popen([sys.executable, "-m", "autograder", *map(str, args)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc, what):
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, f"{what} failed (exit {proc.returncode}):\n{err[-3000:]}"
    return out, err


def _export(url: str, state: Path, out: Path) -> Path:
    """``export`` in this process (nbgrader imported once: the CLI's export runs during each round)."""
    from autograder.instructor import Course, export

    return export(Course(ROOT, state, url), out)


def _csv_rows(path: Path) -> list[tuple]:
    return [(r["student"], r["assignment"], "test_" + r["exercise"], float(r["points"]),
             float(r["max_points"])) for r in csv.DictReader(path.open())]


def _as_rows(expected: dict) -> list[tuple]:
    return sorted((s, a, t, p, m) for (s, a), tests in expected.items() for t, (p, m) in tests.items())


@pytest.mark.slow_env
def test_two_graders_at_once_ten_times(server, tmp_path):
    state = tmp_path / "state"
    given = {("alice", A): solution_notebook(A), ("bob", A): released_notebook(A),
             ("alice", B): solution_notebook(B), ("bob", B): released_notebook(B)}
    for (student, assignment), nb in given.items():
        dest = state / "submitted" / student / assignment / f"{assignment}.ipynb"
        dest.parent.mkdir(parents=True)
        shutil.copy(nb, dest)
    expected = {(s, a): _expected(a, full=(s == "alice")) for s, a in given}
    want = _as_rows(expected)
    groups = {(s, a): sorted(rows) for (s, a) in expected
              for rows in [[r for r in want if r[:2] == (s, a)]]}
    env = {**os.environ, "COURSE_STATE": str(state)}
    env.pop("COURSE_DB_URL", None)
    timings = []
    for i in range(ROUNDS):
        t0 = time.monotonic()
        env["COURSE_DB_URL"] = url = server.create_database(f"round{i}")
        concurrent_csv = tmp_path / f"during{i}.csv"
        procs = {"grader of " + A: _start("autograde", A, "-j", "1", env=env),
                 "grader of " + B: _start("autograde", B, "-j", "1", env=env),
                 "export": _start("export", "--out", concurrent_csv, env=env)}
        for what, proc in procs.items():
            out, err = _finish(proc, f"round {i}: {what}")
            assert server.password not in out + err, "a run printed the gradebook's password"
            if i and what.startswith("grader"):  # graded in round 0, unchanged since
                assert "2 submission(s) unchanged" in err, err[-2000:]
        got = sorted(server.grades(f"round{i}"))
        assert got == want, f"round {i}: the gradebook holds {got}, expected {want}"
        # An export running meanwhile sees each submission whole or not at all.
        during = sorted(_csv_rows(concurrent_csv))
        for key in {r[:2] for r in during}:
            assert sorted(r for r in during if r[:2] == key) == groups[key], (
                f"round {i}: an export made while grading saw {key} half-written: {during}")
        assert sorted(_csv_rows(_export(url, state, tmp_path / f"after{i}.csv"))) == want
        timings.append(time.monotonic() - t0)
    print(f"rounds took {', '.join(f'{t:.1f}' for t in timings)} s")

    # A rerun on the last database: idempotent, and a changed submission is graded again.
    shutil.copy(solution_notebook(A), state / "submitted" / "bob" / A / f"{A}.ipynb")
    expected[("bob", A)] = _expected(A, full=True)
    want = _as_rows(expected)
    runs = [_start("autograde", A, "-j", "1", env=env), _start("autograde", B, "-j", "1", env=env)]
    (_, err_a), (_, err_b) = (_finish(p, "rerun") for p in runs)
    assert "1 submission(s) unchanged" in err_a and "2 submission(s) unchanged" in err_b, err_a + err_b
    assert sorted(server.grades(f"round{ROUNDS - 1}")) == want
    _finish(_start("export", "--out", tmp_path / "final.csv", env=env), "export")
    assert sorted(_csv_rows(tmp_path / "final.csv")) == want
    _finish(_start("autograde", "-j", "1", env=env), "a second rerun")  # nothing changed: same rows
    assert sorted(server.grades(f"round{ROUNDS - 1}")) == want


@pytest.mark.slow_env
def test_wrong_password_is_one_line_without_it(server, tmp_path):
    wrong = "not-" + server.password
    proc = subprocess.run([sys.executable, "-m", "autograder", "export", "--state", tmp_path,
                           "--db-url", server.url("postgres", password=wrong)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"postgresql+psycopg://{server.user}:***@127.0.0.1:{server.port}/postgres" in lines[0]
    assert "password authentication failed" in lines[0]
    assert wrong not in proc.stdout + proc.stderr


def test_unreachable_gradebook_is_one_line_without_password(tmp_path):
    """Nothing listens on the port: autograde stops before grading anything, export writes nothing;
    each says so on one line that names the URL without its password, and exits non-zero."""
    port = _free_port()
    secret = "s3cret-" + secrets.token_hex(4)
    url = f"postgresql://grader:{secret}@127.0.0.1:{port}/course"
    state = tmp_path / "state"
    sub = state / "submitted" / "alice" / A / f"{A}.ipynb"
    sub.parent.mkdir(parents=True)
    shutil.copy(solution_notebook(A), sub)
    env = {**os.environ, "COURSE_STATE": str(state), "COURSE_DB_URL": url}
    for args in (["autograde"], ["export", "--out", tmp_path / "grades.csv"]):
        proc = subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0, proc.stdout
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert f"{args[0]}: cannot reach the gradebook postgresql+psycopg://grader:***@127.0.0.1:{port}/course" \
            in lines[0], lines[0]
        assert "refused" in lines[0].lower()
        assert secret not in proc.stdout + proc.stderr
    assert not (state / "autograded").exists(), "autograde graded before it knew it could record"
    assert not (tmp_path / "grades.csv").exists()
