"""The course's shared gradebook: its URL, a check that it can be used, its lock (a PostgreSQL
advisory lock, or a file lock beside a SQLite gradebook) and nbgrader's ``Gradebook`` on it."""
from __future__ import annotations

import fcntl
import hashlib
import re
from contextlib import contextmanager
from pathlib import Path

from ..common.settings import without_password
from ..grader.gradebook import alembic_version_once

class GradebookError(Exception):
    """The gradebook cannot be used (unreachable, a bad URL, no driver); the message, one line for
    a person, names the URL without its password."""


def gradebook_url(url: str) -> str:
    """``url`` with PostgreSQL's driver made explicit: a bare ``postgresql://`` (or ``postgres://``)
    means psycopg 3, the driver in requirements.txt (SQLAlchemy would otherwise ask for
    psycopg2)."""
    return re.sub(r"^postgres(ql)?://", "postgresql+psycopg://", url)


def one_line(exc: BaseException, url: str) -> str:
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
        raise GradebookError(f"cannot reach the gradebook {shown}: {one_line(exc, db_url)}") from None
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
