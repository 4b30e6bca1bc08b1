"""The instructor's workflow on top of nbgrader: collect -> autograde -> feedback -> export.

Course state lives in a course-state folder (default ``.course/`` beside ``nbgrader_config.py``,
git-ignored): nbgrader's ``submitted/``, ``autograded/`` and ``feedback/`` layouts and the
gradebook (SQLite by default; any SQLAlchemy URL through ``--db-url`` or ``$COURSE_DB_URL``).

The verbs are ``collect`` (an LMS export's ``<student>_<anything>.ipynb`` files or zips into
``submitted/``; ``nbgrader collect`` is :mod:`.exchange`'s), ``autograde`` (into the gradebook
and ``autograded/``), ``feedback`` (HTML pages), ``export`` (CSVs) and ``report``
(:mod:`.report`): the functions of those names, the subcommands of :func:`add_parsers`.

A shared gradebook (``COURSE_DB_URL=postgresql+psycopg://user:password@host/db``) may be used
by any number of ``autograde``/``collect``/``export`` runs at once, on one machine or several:
every run that touches it (nbgrader's schema creation, an assignment's cells, one submission's
grades, an export) holds a PostgreSQL advisory lock meanwhile (a file lock beside a SQLite
gradebook), and one submission's grades are written in one transaction. Grading itself, the
slow part, runs outside the lock. A rerun rewrites the same rows (nothing is duplicated) and
reuses a result whose submission, assignment, grader and limits are unchanged
(``--regrade`` grades everything again).
"""
from __future__ import annotations

import csv
import fcntl
import hashlib
import html
import io
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

from ..common.course import assignments, find_course_root, source_notebook
from ..common.errors import GradingError
from ..common.settings import Settings, without_password
from ..grader.gradebook import alembic_version_once, build_gradebook
from ..grader.result import zero_result


class Course:
    """One course and the command's settings: its root (holding solutions/), its state folder,
    its gradebook. ``state``, ``db_url`` and ``reports`` (a command's flags) go over
    ``settings`` (default: :meth:`Settings.load`, the environment's)."""

    def __init__(self, root=None, state=None, db_url=None, reports=None, settings: Settings | None = None):
        self.settings = settings = settings or Settings.load()
        self.root = Path(root).resolve() if root else find_course_root(course_root=settings.course_root)
        self.state = Path(state or settings.course_state or self.root / ".course").resolve()
        self.db_url = gradebook_url(db_url or settings.course_db_url or f"sqlite:///{self.state / 'gradebook.db'}")
        self.submitted = self.state / "submitted"
        self.autograded = self.state / "autograded"
        self.feedback = self.state / "feedback"
        # what the instructor opens (grade CSVs, the class report): a folder their JupyterLab shows
        self.reports = Path(reports or settings.course_reports or self.state).resolve()

    def assignments(self):
        return assignments(self.root)


# --------------------------------------------------------------------------- the shared gradebook

class GradebookError(Exception):
    """The gradebook cannot be used (unreachable, a bad URL, no driver); the message, one line for
    a person, names the URL without its password."""


def gradebook_url(url: str) -> str:
    """``url`` with PostgreSQL's driver made explicit: a bare ``postgresql://`` (or ``postgres://``)
    means psycopg 3, the driver in requirements.txt (SQLAlchemy would otherwise ask for
    psycopg2)."""
    return re.sub(r"^postgres(ql)?://", "postgresql+psycopg://", url)


def _one_line(exc: BaseException, url: str) -> str:
    """The database's own reason, on one line, without the URL's password."""
    reason = " ".join(str(getattr(exc, "orig", None) or exc).split())
    try:
        from sqlalchemy.engine import make_url

        password = make_url(url).password
    except Exception:  # noqa: BLE001
        password = None
    if password:
        reason = reason.replace(str(password), "***")
    return reason.split(" (Background on this error")[0]


def check_gradebook(db_url: str) -> None:
    """Connect to the gradebook once, before any work, or raise :class:`GradebookError` saying why
    (a SQLite gradebook's folder is created)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
    from sqlalchemy.pool import NullPool

    shown = without_password(db_url)
    try:
        url = make_url(db_url)
    except ArgumentError as exc:
        raise GradebookError(f"the gradebook URL {shown} is not a database URL ({exc}); "
                             f"expected e.g. postgresql://user:password@host:5432/course") from None
    backend = url.get_backend_name()
    if backend == "sqlite" and url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    connect_args = {"connect_timeout": 10} if backend == "postgresql" else {}
    try:
        engine = create_engine(url, poolclass=NullPool, connect_args=connect_args)
    except (NoSuchModuleError, ImportError) as exc:
        hint = ("write postgresql://... to use psycopg 3, the driver requirements.txt installs"
                if backend == "postgresql" else "install it, or use PostgreSQL (postgresql://...)")
        raise GradebookError(f"cannot open the gradebook {shown}: its database driver is not "
                             f"installed ({exc}); {hint}") from None
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except DBAPIError as exc:
        raise GradebookError(f"cannot reach the gradebook {shown}: {_one_line(exc, db_url)}") from None
    finally:
        engine.dispose()


# One key for every run against a PostgreSQL gradebook (any course, any machine).
_LOCK_KEY = int.from_bytes(hashlib.sha256(b"jax-course gradebook").digest()[:8], "big", signed=True)


@contextmanager
def gradebook_lock(db_url: str):
    """Hold the gradebook's lock: a PostgreSQL session-level advisory lock on a connection of its
    own (released when the block ends, or by the server if the process dies), or an exclusive
    ``flock`` on ``<gradebook>.lock`` beside a SQLite file. Everything that opens nbgrader's
    ``Gradebook`` on a shared URL does so inside this block: two graders creating nbgrader's
    schema at once fail with ``UniqueViolation`` otherwise, and two writers of one student or
    submission with ``IntegrityError``."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.pool import NullPool

    url = make_url(db_url)
    backend = url.get_backend_name()
    if backend == "postgresql":
        engine = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _LOCK_KEY})
                try:
                    yield
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _LOCK_KEY})
        finally:
            engine.dispose()
    elif backend == "sqlite" and url.database and url.database != ":memory:":
        lock = Path(f"{url.database}.lock")
        lock.parent.mkdir(parents=True, exist_ok=True)
        with lock.open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
    else:  # another server: nbgrader's own behaviour, unguarded
        yield


@contextmanager
def course_gradebook(db_url: str):
    """nbgrader's ``Gradebook`` under :func:`gradebook_lock`, as one transaction: nbgrader's own
    commits inside the block only flush, everything is committed when the block ends and rolled
    back if it raises (no half-written submission). Schema creation (in ``Gradebook()``) is
    done under the lock too."""
    from nbgrader.api import Gradebook

    alembic_version_once()
    with gradebook_lock(db_url), Gradebook(db_url) as gb:
        session = gb.db
        session.commit = session.flush  # nbgrader's helpers commit after each row
        try:
            yield gb
        except BaseException:
            del session.commit
            session.rollback()
            raise
        del session.commit
        session.commit()


def _special(path: Path) -> bool:
    """``path`` exists and is not a regular file (``/dev/stdout``, a pipe)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` so that a concurrent reader sees the old file or the new one, never a part
    (a :func:`_special` target is written directly)."""
    if _special(path):
        Path(path).write_bytes(data)
    else:
        _copy_atomic(path, io.BytesIO(data), len(data))


def _copy_atomic(path: Path, src, limit: int) -> int:
    """Stream the readable ``src`` into ``path`` atomically (as :func:`_write_atomic`), keeping
    at most ``limit + 1`` bytes; the number of bytes read. Nothing larger than that is ever held
    in memory or written, whatever ``src`` claims (a zip member that expands without end)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    size = 0
    try:
        with os.fdopen(fd, "wb") as fh:
            while size <= limit:
                chunk = src.read(min(2**20, limit + 1 - size))
                if not chunk:
                    break
                fh.write(chunk)
                size += len(chunk)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return size


# --------------------------------------------------------------------------- collect

_STUDENT_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9.\-]*)_")


def student_of(filename: str) -> str | None:
    """The student id of an LMS export's file name ``<student>_<anything>``."""
    m = _STUDENT_RE.match(Path(filename).name)
    return m.group(1) if m else None


def collect(folder, assignment: str, course: Course) -> list[tuple[str, Path]]:
    """Copy ``<student>_*.ipynb`` files and ``<student>_*.zip`` archives from ``folder`` into
    nbgrader's submitted layout. Returns ``[(student, destination)]``; files whose name has no
    student id are reported on stderr and skipped."""
    if assignment not in course.assignments():
        raise SystemExit(f"unknown assignment {assignment!r}; known: {', '.join(course.assignments())}")
    limit = course.settings.max_notebook_bytes  # more is not read by the grader: never copied whole here
    collected = []
    for item in sorted(Path(folder).iterdir()):
        student = student_of(item.name)
        if student is None or item.suffix not in (".ipynb", ".zip"):
            print(f"collect: skipped {item.name} (expected <student>_<anything>.ipynb or .zip)",
                  file=sys.stderr)
            continue
        dest = course.submitted / student / assignment / f"{assignment}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        size = None
        if item.suffix == ".zip":
            try:
                with zipfile.ZipFile(item) as zf:
                    names = [n for n in zf.namelist() if n.endswith(".ipynb") and "__MACOSX" not in n]
                    best = next((n for n in names if Path(n).stem == assignment), names[0] if names else None)
                    if best is None:
                        print(f"collect: {item.name} holds no notebook", file=sys.stderr)
                        continue
                    with zf.open(best) as src:
                        size = _copy_atomic(dest, src, limit)
            except Exception as exc:  # noqa: BLE001 - a bad zip (corrupt, encrypted, truncated...)
                print(f"collect: {item.name} cannot be unzipped ({type(exc).__name__}: {exc}); kept as "
                      "is for grading", file=sys.stderr)
        if size is None:  # a notebook, or a zip that cannot be unzipped: copied whole, the grader says its size
            with open(item, "rb") as src:
                size = _copy_atomic(dest, src, max(limit, item.stat().st_size))
        elif size > limit:
            print(f"collect: {item.name} holds a notebook over {limit / 2**20:.0f} MB uncompressed "
                  "(AUTOGRADER_MAX_NOTEBOOK_MB): only its beginning was unzipped, and grading will "
                  "say it is too large", file=sys.stderr)
        collected.append((student, dest))
    return collected


def submissions(course: Course, assignments=None):
    """``[(student, assignment, notebook path or None)]`` found in the submitted folder."""
    wanted = set(assignments or course.assignments())
    found = []
    if not course.submitted.is_dir():
        return found
    for student_dir in sorted(p for p in course.submitted.iterdir() if p.is_dir()):
        for a_dir in sorted(p for p in student_dir.iterdir() if p.is_dir() and p.name in wanted):
            nbs = sorted(a_dir.glob("*.ipynb"))
            pick = next((n for n in nbs if n.stem == a_dir.name), nbs[0] if nbs else None)
            found.append((student_dir.name, a_dir.name, pick))
    return found


def _record(course: Course, student: str, assignment: str, result: dict) -> None:
    """One submission's grades into the gradebook, all or nothing (a rerun rewrites the same rows)."""
    source = source_notebook(assignment, course.root)
    timestamp = submitted_timestamp(course, student, assignment)
    with course_gradebook(course.db_url) as gb:
        known = gb.update_or_create_student(student)
        if known.first_name is None and known.last_name is None:  # else the formgrader says "None, None"
            known.last_name, known.first_name = _person(student), ""
        # nbgrader's formgrader counts a submission as autograded only when the gradebook's
        # timestamp is the one in submitted/<student>/<assignment>/timestamp.txt
        submission = gb.update_or_create_submission(assignment, student, timestamp=timestamp)
        _complete_submission(gb, submission)
        for t in result["tests"]:
            grade = gb.find_grade(t["grade_id"], source.stem, assignment, student)
            grade.auto_score = float(t["points"])
            grade.needs_manual_grade = False


def _person(student: str) -> str:
    """A name for ``student``: the full name of the local user of that name (a hub's learner),
    else the id itself."""
    import pwd

    try:
        name = pwd.getpwnam(student).pw_gecos.split(",")[0].strip()
    except (KeyError, OSError):
        name = ""
    return name or student


def _complete_submission(gb, submission) -> int:
    """Add the rows nbgrader's ``add_submission`` would have made and ``submission`` lacks: a
    submission created before the assignment's notebook or cells were recorded (nbgrader's
    collect or its formgrader list it early, an nbgrader run stopped half-way) has no grade for
    them, and writing a grade would fail. Rows that exist (with manual grades, comments) are
    kept. Returns the number of rows added."""
    from nbgrader.api import Comment, Grade, SubmittedNotebook

    added = 0
    have = {nb.notebook.name: nb for nb in submission.notebooks}
    for notebook in submission.assignment.notebooks:
        sub_nb = have.get(notebook.name)
        if sub_nb is None:
            sub_nb = SubmittedNotebook(notebook=notebook, assignment=submission)
            gb.db.add(sub_nb)
            added += 1
        grades = {g.cell_id for g in sub_nb.grades}
        comments = {c.cell_id for c in sub_nb.comments}
        for cell in list(notebook.grade_cells) + list(notebook.task_cells):
            if cell.id not in grades:
                gb.db.add(Grade(cell_id=cell.id, notebook=sub_nb))
                added += 1
        for cell in list(notebook.solution_cells) + list(notebook.task_cells):
            if cell.id not in comments:
                gb.db.add(Comment(cell_id=cell.id, notebook=sub_nb))
                added += 1
    if added:
        gb.db.flush()
    return added


def submitted_timestamp(course: Course, student: str, assignment: str):
    """The submission's time from nbgrader's ``timestamp.txt`` (as nbgrader parses it), or None."""
    from nbgrader.utils import parse_utc

    path = course.submitted / student / assignment / "timestamp.txt"
    try:
        return parse_utc(path.read_text().strip())
    except (OSError, ValueError, OverflowError):
        return None


def _fingerprint(course: Course, notebook: Path, assignment: str, limits: dict) -> str:
    """What a grade depends on: the submission, the assignment's trusted files (source notebook,
    judge, data), the grader's code, its limits and the versions it grades with."""
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256(b"autograde-v1\0")
    h.update(Path(notebook).read_bytes())
    folder = course.root / "solutions" / assignment
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(f"\0{f.relative_to(folder)}\0".encode() + f.read_bytes())
    package = Path(__file__).parent  # the grader's code, its subpackages (grader/, judge/...) too
    for f in sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts):
        h.update(f"\0{f.relative_to(package)}\0".encode() + f.read_bytes())
    h.update(json.dumps(limits, sort_keys=True, default=str).encode() + sys.version.encode())
    for dist in ("jax", "jaxlib", "numpy", "nbgrader", "nbclient", "ipykernel"):
        try:
            h.update(f"\0{dist}={version(dist)}".encode())
        except PackageNotFoundError:
            pass
    return h.hexdigest()


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _reusable(course: Course, student: str, assignment: str, fingerprint: str) -> dict | None:
    """The earlier result of this very submission, graded by this very grader, if any (an error is
    always graded again: it may have been the machine's), and only while the graded notebook
    beside it is still the one this grader saved (nbgrader's own autograde replaces it)."""
    out = course.autograded / student / assignment
    try:
        d = json.loads((out / "result.json").read_text())
    except (OSError, ValueError):
        return None
    if (d.get("fingerprint") == fingerprint and not d.get("error") and d.get("tests")
            and d.get("graded_notebook") == _digest(out / f"{assignment}.ipynb")):
        return d
    return None


def _unusable(notebook: Path, limit: int) -> str | None:
    """Why the submitted file is not a notebook the grader can read (a grade of zero: the
    submission's own fault), or None. ``limit``: the bytes the grader reads."""
    from ..grader.submission import read_json, read_submission

    try:
        read_submission(notebook, read_json(notebook, limit))
    except GradingError as exc:
        return str(exc)
    return None


def _prepare_output(folder: Path) -> str | None:
    """Make ``folder`` (autograded/<student>/<assignment>) a place this run can write: created
    when missing, made writable when it is ours (nbgrader's autograde leaves its files read-only;
    the graded notebook itself is replaced, never written in place). The reason it cannot be,
    or None."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            if folder.stat().st_uid == os.geteuid():
                os.chmod(folder, folder.stat().st_mode | 0o700)
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"{folder} cannot be written by this user (uid {os.geteuid()})"
        for leftover in folder.glob(".grading-*"):
            leftover.unlink()
    except OSError as exc:
        return f"{folder} cannot be prepared: {exc.strerror or exc}"
    return None


def show_failures(notebook: Path) -> int:
    """Give every error output of the graded ``notebook`` that has an empty traceback (a failed
    test's: its feedback is in ``evalue``) a traceback of ``ename: evalue``: the formgrader (and
    nbconvert's HTML) shows an error by its traceback, and showed an empty grey box. Returns the
    number of outputs changed; the file is rewritten only when there are some."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    changed = 0
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if isinstance(cell, dict) else []:
            if isinstance(out, dict) and out.get("output_type") == "error" and not out.get("traceback"):
                out["traceback"] = [f"{out.get('ename') or 'Error'}: {out.get('evalue') or ''}"]
                changed += 1
    if changed:
        _write_atomic(Path(notebook), (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
    return changed


class NotGraded(dict):
    """A submission this run could not grade: ``{student, assignment, reason}``. Its previous
    grade (gradebook, result, graded notebook) is left as it was."""


def autograde(course: Course, assignments=None, workers=None, progress=True, regrade=False,
              students=None, **limits):
    """Grade every submission (of ``assignments``, of ``students``) and record it in the
    gradebook. Returns ``(rows, not_graded, unreadable)``: the results recorded, the submissions
    that could not be graded and those recorded as zero (each a :class:`NotGraded`).

    A submission is recorded when the grader graded it, or when its file is not a notebook it can
    read (zero: the submission's own fault). When grading itself failed (an internal error, the
    sandbox refused, the grader's process died or hung, the graded notebook could not be saved)
    nothing of it is written: its previous grade stays, and it is named in the summary.

    Safe to run while other ``autograde``/``export`` runs use the same gradebook (see the module's
    docstring). A submission whose result is current is not graded again unless ``regrade``."""
    from ..grader.batch import grade_many, summary
    from ..grader.result import Result

    check_gradebook(course.db_url)
    found = [f for f in submissions(course, assignments) if students is None or f[0] in students]
    for a in sorted({a for _, a, _ in found}):
        with gradebook_lock(course.db_url):
            alembic_version_once()
            build_gradebook(source_notebook(a, course.root), a, course.db_url)
    fingerprints = {(s, a): _fingerprint(course, p, a, limits) for s, a, p in found if p is not None}
    reused = {} if regrade else {k: d for k, fp in fingerprints.items()
                                 if (d := _reusable(course, *k, fp)) is not None}
    not_graded: list[NotGraded] = []
    unreadable: list[NotGraded] = []  # recorded as zero: no notebook the grader can read
    to_grade = []
    for s, a, p in found:
        if p is None or (s, a) in reused:
            continue
        problem = _prepare_output(course.autograded / s / a)
        if problem:
            not_graded.append(NotGraded(student=s, assignment=a, reason=problem))
        else:
            to_grade.append((s, a, p))
    skipped = {(n["student"], n["assignment"]) for n in not_graded}

    def saved(s, a):  # the graded notebook is written beside its place, then moved there
        return course.autograded / s / a / f".grading-{a}.ipynb"

    def per_job(path):
        return {"save_graded": saved(Path(path).parent.parent.name, Path(path).parent.name)}

    results = grade_many([p for _, _, p in to_grade], course.settings, workers=workers, progress=progress,
                         root=course.root, per_job=per_job, **limits) if to_grade else []
    by_path = {str(p): r for (_, _, p), r in zip(to_grade, results)}
    rows = []
    for s, a, p in found:
        if (s, a) in skipped:
            continue
        src = source_notebook(a, course.root)
        out = course.autograded / s / a
        if (s, a) in reused:
            d = reused[(s, a)]
        else:
            if p is None:
                r = zero_result(str(course.submitted / s / a), a, src, "no notebook submitted")
                unreadable.append(NotGraded(student=s, assignment=a, reason="no notebook submitted"))
            else:
                r = by_path[str(p)]
                if r.error:
                    why = _unusable(p, course.settings.max_notebook_bytes)
                    if why is None:  # the grader's failure, not the submission's: no grade
                        saved(s, a).unlink(missing_ok=True)
                        not_graded.append(NotGraded(student=s, assignment=a, reason=r.error))
                        continue
                    r = zero_result(r.notebook, a, src, why)  # the submission's own fault
                    unreadable.append(NotGraded(student=s, assignment=a, reason=why))
            d = r.as_dict()
            d["student"] = s
            if p is not None:
                d["fingerprint"] = fingerprints[(s, a)]
            try:
                if saved(s, a).exists():
                    show_failures(saved(s, a))
                    os.replace(saved(s, a), out / f"{a}.ipynb")  # over a read-only one too
                d["graded_notebook"] = _digest(out / f"{a}.ipynb") if not r.error else None
                _write_atomic(out / "result.json", json.dumps(d, indent=2).encode())
            except OSError as exc:
                not_graded.append(NotGraded(student=s, assignment=a,
                                            reason=f"its result cannot be saved in {out}: {exc}"))
                continue
        _record(course, s, a, d)
        rows.append(d)
    if reused:
        print(f"autograde: {len(reused)} submission(s) unchanged since they were graded: their "
              f"results reused (--regrade grades them again)", file=sys.stderr)
    print(summary([Result.from_dict(r) for r in rows]), file=sys.stderr)
    if not_graded:
        print(f"autograde: {len(not_graded)} submission(s) NOT graded; nothing of them was written "
              "(a grade they had before is kept). Fix the cause and run autograde again:", file=sys.stderr)
        for n in not_graded:
            print(f"  {n['student']}/{n['assignment']}: {n['reason']}", file=sys.stderr)
    if unreadable:
        print(f"autograde: {len(unreadable)} submission(s) hold no notebook the grader can read; each "
              "is recorded as zero (ask the learner to submit again):", file=sys.stderr)
        for n in unreadable:
            print(f"  {n['student']}/{n['assignment']}: {n['reason']}", file=sys.stderr)
    return rows, not_graded, unreadable


def feedback(course: Course) -> tuple[list[Path], list[NotGraded]]:
    """Write one HTML page per autograded submission; return their paths, and the submissions
    whose page cannot be written (its result unreadable, a folder that cannot be written: each a
    :class:`NotGraded`), which do not stop the others."""
    pages, problems = [], []
    for result_path in sorted(course.autograded.glob("*/*/result.json")):
        student, assignment = result_path.parent.parent.name, result_path.parent.name
        try:
            pages.append(_feedback_page(course, student, assignment, json.loads(result_path.read_text())))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(NotGraded(student=student, assignment=assignment,
                                      reason=f"no feedback page: {result_path} cannot be used "
                                             f"({type(exc).__name__}: {exc})"))
    for n in problems:
        print(f"feedback: {n['student']}/{n['assignment']}: {n['reason']}", file=sys.stderr)
    return pages, problems


def _feedback_page(course: Course, student: str, assignment: str, r: dict) -> Path:
    rows = "".join(
        f"<tr class='{'pass' if t['passed'] else 'fail'}'><td><code>{html.escape(t['exercise'])}</code></td>"
        f"<td>{t['points']:g} / {t['max_points']:g}</td>"
        f"<td>{html.escape(t['feedback']) if not t['passed'] else 'passed'}</td></tr>"
        for t in r["tests"])
    problem = f"<p class='fail'>{html.escape(r['error'])}</p>" if r.get("error") else ""
    page = f"""<!doctype html><html><head><meta charset="utf-8">
<title>{html.escape(assignment)}: feedback for {html.escape(student)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}td,th{{padding:.4em;vertical-align:top;
text-align:left;border-bottom:1px solid #ddd}}.pass td:nth-child(2){{color:green}}.fail{{color:#b00020}}</style>
</head><body><h1>{html.escape(assignment)}</h1><p>Student: <b>{html.escape(student)}</b> &middot;
score <b>{r['score']:g} / {r['max_score']:g}</b></p>{problem}
<table><tr><th>exercise</th><th>points</th><th>feedback</th></tr>{rows}</table>
<p>Each message names the idea of JAX's mental model that the test found broken and the course
section that teaches it.</p></body></html>"""
    out = course.feedback / student / assignment / f"{assignment}.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(out, page.encode("utf-8"))
    # nbgrader's release_feedback releases a page only beside the submission's timestamp and
    # secret (its own generate_feedback copies them too)
    for name in ("timestamp.txt", "submission_secret.txt"):
        submitted = course.submitted / student / assignment / name
        if submitted.is_file():
            shutil.copyfile(submitted, out.parent / name)
        else:
            (out.parent / name).unlink(missing_ok=True)  # never a stale one of an earlier submission
    return out


def export(course: Course, out: Path, summary: Path | None = None) -> Path:
    """Write ``student,assignment,exercise,points,max_points,hints_seen`` rows from the gradebook
    (hints seen: :func:`autograder.hints.seen` of the submitted notebook) to ``out`` and, to
    ``summary`` (default: ``<out's name>-summary.csv`` beside a regular ``out``; none beside
    ``/dev/stdout``), one row per student: a column per assignment (its points; empty
    where nothing was recorded) and their total."""
    from ..hints import seen

    check_gradebook(course.db_url)
    out = Path(out)
    if summary is None and not _special(out):
        summary = out.with_name(f"{out.stem}-summary{out.suffix or '.csv'}")
    fh = io.StringIO(newline="")
    points: dict[str, dict[str, float]] = {}
    with course_gradebook(course.db_url) as gb:  # a consistent view: no write is half seen
        writer = csv.writer(fh)
        writer.writerow(["student", "assignment", "exercise", "points", "max_points", "hints_seen"])
        names = sorted(a.name for a in gb.assignments)
        students = sorted(s.id for s in gb.students)
        for assignment, student, notebook, sub in _graded_notebooks(gb):
            hints = seen(course.submitted / student / assignment / f"{notebook}.ipynb")
            for g in sorted(sub.grades, key=lambda g: g.name):
                exercise = g.name.removeprefix("test_")
                writer.writerow([student, assignment, exercise, f"{g.score:g}", f"{g.max_score:g}",
                                 hints.get(exercise, 0)])
                got = points.setdefault(student, {})
                got[assignment] = got.get(assignment, 0.0) + g.score
    _write_atomic(out, fh.getvalue().encode())
    if summary is not None:
        fh = io.StringIO(newline="")
        writer = csv.writer(fh)
        writer.writerow(["student", *names, "total"])
        for student in students:
            got = points.get(student, {})
            writer.writerow([student, *(f"{got[a]:g}" if a in got else "" for a in names),
                             f"{sum(got.values()):g}"])
        _write_atomic(Path(summary), fh.getvalue().encode())
    return out


def gradebook_points(course: Course) -> dict:
    """``{(student, assignment): {exercise: (points, max_points)}}`` from the gradebook."""
    check_gradebook(course.db_url)
    points: dict = {}
    with course_gradebook(course.db_url) as gb:
        for assignment, student, _, sub in _graded_notebooks(gb):
            got = points.setdefault((student, assignment), {})
            for g in sub.grades:
                got[g.name.removeprefix("test_")] = (float(g.score), float(g.max_score))
    return points


def _graded_notebooks(gb):
    """``(assignment, student, notebook, its nbgrader SubmissionNotebook)`` of every submission in
    the gradebook ``gb``, by assignment then student."""
    from nbgrader.api import MissingEntry

    students = sorted(s.id for s in gb.students)
    for assignment in sorted(gb.assignments, key=lambda a: a.name):
        for student in students:
            for nb in assignment.notebooks:
                try:
                    yield assignment.name, student, nb.name, gb.find_submission_notebook(
                        nb.name, assignment.name, student)
                except MissingEntry:
                    continue


def class_report(course: Course, out: Path) -> Path:
    """Write the class report (:mod:`autograder.instructor.report`) to ``out``; returns it."""
    from .report import render, tripped

    page = render(gradebook_points(course), tripped(course.autograded), without_password(course.db_url))
    _write_atomic(Path(out), page.encode("utf-8"))
    return Path(out)


__all__ = ["Course", "collect", "autograde", "feedback", "export", "class_report", "student_of",
           "GradebookError", "check_gradebook", "course_gradebook", "gradebook_lock"]


def add_parsers(sub) -> None:
    """The instructor subcommands of ``python -m autograder``."""
    from ..grader.cli import add_limits

    def common(p):
        p.add_argument("--root", help="course root holding solutions/ (default: found automatically)")
        p.add_argument("--state", help="course-state folder (default: .course/ in the course root)")
        p.add_argument("--db-url", help="gradebook SQLAlchemy URL, e.g. postgresql://user:pw@host/db "
                                        "(default: $COURSE_DB_URL, else sqlite in the state folder)")
        p.add_argument("--reports", help="folder of the grade CSVs and the class report (default: "
                                         "$COURSE_REPORTS, else the state folder)")
        return p

    p = common(sub.add_parser("collect", help="collect downloaded submissions into nbgrader's layout"))
    p.add_argument("folder", help="folder of <student>_<anything>.ipynb files or zips")
    p.add_argument("--assignment", "-a", required=True)
    p = common(sub.add_parser("autograde", help="grade every submission into the gradebook"))
    p.add_argument("assignments", nargs="*", help="only these assignments (default: all)")
    add_limits(p)
    p.add_argument("--regrade", action="store_true",
                   help="grade every submission again, even those unchanged since their last grading")
    common(sub.add_parser("feedback", help="one HTML feedback page per graded submission"))
    p = common(sub.add_parser("export", help="CSV of points per student, assignment and exercise, "
                                             "and a summary CSV: one row per student"))
    p.add_argument("--out", default=None, help="CSV path (default: <reports>/grades.csv)")
    p.add_argument("--summary", default=None, help="the per-student summary CSV (default: beside --out, "
                                                   "named <out>-summary.csv)")
    p = common(sub.add_parser("report", help="the class report: one HTML page with plots (pass rate per "
                                            "exercise, learners per idea they tripped on, progress per learner)"))
    p.add_argument("--out", default=None, help="HTML path (default: <reports>/class-report.html)")


def run(args) -> int:
    """Run an instructor's subcommand; 2 when its settings, its course or its gradebook cannot be
    used (said in one line, before anything is done where it can be)."""
    course = None
    try:
        course = Course(args.root, args.state, args.db_url, args.reports, Settings.load())
        return _run(args, course)
    except (GradingError, GradebookError) as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
    except Exception as exc:  # the database went away mid-run: say so, without a traceback
        from sqlalchemy.exc import DBAPIError

        if course is None or not isinstance(exc, DBAPIError):
            raise
        print(f"{args.command}: the gradebook {without_password(course.db_url)} failed: "
              f"{_one_line(exc, course.db_url)}", file=sys.stderr)
    return 2


def _run(args, course: Course) -> int:
    if args.command == "collect":
        got = collect(args.folder, args.assignment, course)
        print(f"collected {len(got)} submission(s) of {args.assignment} into {course.submitted}")
    elif args.command == "autograde":
        rows, missed, unreadable = autograde(course, args.assignments or None, workers=args.jobs,
                                             progress=sys.stderr.isatty(), regrade=args.regrade,
                                             cell_timeout=args.cell_timeout,
                                             notebook_timeout=args.notebook_timeout)
        print(f"autograded {len(rows)} submission(s) into {without_password(course.db_url)}"
              + (f"; {len(missed)} NOT graded: " + ", ".join(f"{n['student']}/{n['assignment']}"
                                                          for n in missed) if missed else "")
              + (f"; {len(unreadable)} not a notebook (zero): " + ", ".join(
                  f"{n['student']}/{n['assignment']}" for n in unreadable) if unreadable else ""))
        if missed or unreadable:
            return 1
    elif args.command == "feedback":
        pages, problems = feedback(course)
        print(f"wrote {len(pages)} feedback page(s) under {course.feedback}"
              + (f"; {len(problems)} NOT written: " + ", ".join(f"{n['student']}/{n['assignment']}"
                                                             for n in problems) if problems else ""))
        if problems:
            return 1
    elif args.command == "export":
        out = export(course, Path(args.out) if args.out else course.reports / "grades.csv",
                     Path(args.summary) if args.summary else None)
        print(f"wrote {out}", file=sys.stderr)  # stdout may be the CSV itself (--out /dev/stdout)
    elif args.command == "report":
        out = class_report(course, Path(args.out) if args.out else course.reports / "class-report.html")
        print(f"wrote {out}")
    return 0
