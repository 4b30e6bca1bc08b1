"""nbgrader's exchange for a room of learners: a collect that takes only what a learner made
(:class:`OwnedCollect`, the formgrader's Collect button and ``nbgrader collect``) and a submit
that leaves a learner's entry theirs alone (:class:`PrivateSubmit`). ``nbgrader_config.py`` and
the hub's learner configuration name them (``ExchangeFactory``).

nbgrader's exchange ``inbound`` folder is writable by every learner (nbgrader issue 1225): one
may create ``inbound/<classmate>+<assignment>+<a future time>`` holding their own notebook, or
swap a file of their own entry for a link to a file only the instructor can read after a check
and before the copy. So collect *copies first and checks the copy*: each entry is copied once
(:func:`snapshot`) into a folder only the instructor can write, by file descriptors, every one
opened with ``O_NOFOLLOW`` relative to its folder's descriptor and ``fstat``-ed once open: a link
is never followed, and what is checked (owner, type, size) is what was read. The copy must then
be a folder owned by the learner it names, holding only that learner's regular files and
folders, with nbgrader's ``timestamp.txt`` (the time in its name, not in the future) and
``submission_secret.txt``, and whole notebooks (:func:`refusal`). Only that copy reaches
``submitted/`` (nbgrader's own copy, with its ignore rules, is made from it); nothing of a
learner-writable path is read twice. An entry that fails is refused: never collected, named with
the learner and the reason, and renamed aside within ``inbound`` (the instructor owns
``inbound``, so no root is needed; ``.refused+...`` matches no collect), then removed where its
files allow; collect then exits non-zero listing every refusal. Each learner's latest accepted
submission is collected, replacing an older one collected before (as ``--update`` does; the
formgrader's button always did).

``inbound`` is made sticky (mode 3733: learners may create entries but not list them, and only
an entry's owner or the instructor may rename or remove it) by the release and by every
collect; :class:`PrivateSubmit` leaves an entry mode 755 where nbgrader's submit leaves 777, so
no learner can write into another's entry either.
"""
from __future__ import annotations

import datetime
import errno
import json
import os
import pwd
import shutil
import stat
import tempfile
from collections import defaultdict
from fnmatch import fnmatchcase

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import parse_utc

FUTURE_SLACK = datetime.timedelta(minutes=5)  # clocks of one machine: a little skew at most
REFUSED_PREFIX = ".refused+"
INBOUND_MODE = 0o3733  # setgid (nbgrader's), sticky, write-only for learners
ENTRY_MODE = 0o755
MAX_FILES = 1000  # a submission is a few notebooks and nbgrader's two files
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class Refused(Exception):
    """An inbound entry that is not a submission of the learner it names; the message says why."""


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def parse_entry(name: str, assignment: str):
    """``(student, time)`` of an inbound entry's name ``<student>+<assignment>+<time>[+<random>]``,
    or None when it is not such a name."""
    parts = name.rsplit("+", 3) if name.count("+") >= 3 else name.rsplit("+", 2)
    if len(parts) < 3 or parts[1] != assignment or not parts[0]:
        return None
    try:
        return parts[0], parse_utc(parts[2])
    except (ValueError, OverflowError, TypeError):
        return None


def snapshot(inbound_fd: int, name: str, dest: str, student: str, max_file: int, max_total: int) -> None:
    """Copy the entry ``name`` of the folder open as ``inbound_fd``, which must be ``student``'s,
    to ``dest`` (which must not exist, in a folder only this user can enter), following no link.
    Raises :class:`Refused` when the entry is not a folder owned by ``student``, or holds
    anything but regular files and folders of theirs, a file over ``max_file`` bytes, more than
    ``max_total`` bytes or :data:`MAX_FILES` entries in all, or something that cannot be read."""
    try:  # O_PATH: its owner is known before it is read (a folder of another's may be closed)
        found = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=inbound_fd)
    except OSError as exc:
        raise Refused(f"it cannot be read ({exc.strerror})") from None
    try:
        st = os.fstat(found)
        if not stat.S_ISDIR(st.st_mode):
            raise Refused("it is not a submission folder (a file or a link)")
        owner = _owner(st.st_uid)
        if owner != student:
            raise Refused(f"it is owned by {owner}, not by {student}: a submission made in another's name")
        try:
            top = os.open(".", _OPEN | os.O_DIRECTORY, dir_fd=found)  # that very folder
        except OSError as exc:
            raise Refused(f"it cannot be read ({exc.strerror})") from None
    finally:
        os.close(found)
    try:
        _copy_folder(top, dest, st.st_uid, "", max_file, {"bytes": max_total, "files": MAX_FILES})
    finally:
        os.close(top)


def _copy_folder(fd: int, dest: str, uid: int, rel: str, max_file: int, budget: dict) -> None:
    os.mkdir(dest, 0o755)  # inside the collect's own folder (mode 700)
    for name in sorted(os.listdir(fd)):
        here = os.path.join(rel, name)
        budget["files"] -= 1
        if budget["files"] < 0:
            raise Refused(f"it holds more than {MAX_FILES} files")
        try:
            child = os.open(name, _OPEN, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Refused(f"it holds {here}, which is not a regular file (a link)") from None
            if exc.errno == errno.ENXIO:
                raise Refused(f"it holds {here}, which is not a regular file") from None
            if exc.errno == errno.ENOENT:
                raise Refused(f"its {here} changed while it was collected") from None
            raise Refused(f"its {here} cannot be read ({exc.strerror})") from None
        try:
            st = os.fstat(child)
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise Refused(f"it holds {here}, which is not a regular file")
            if st.st_uid != uid:
                raise Refused(f"it holds {here}, owned by {_owner(st.st_uid)}, not by {_owner(uid)}")
            if stat.S_ISDIR(st.st_mode):
                _copy_folder(child, os.path.join(dest, name), uid, here, max_file, budget)
            else:
                _copy_file(child, os.path.join(dest, name), here, max_file, budget)
        finally:
            os.close(child)


def _copy_file(fd: int, dest: str, rel: str, max_file: int, budget: dict) -> None:
    size = 0
    with open(dest, "xb") as out:
        while chunk := os.read(fd, 2**20):
            size += len(chunk)
            budget["bytes"] -= len(chunk)
            if size > max_file:
                raise Refused(f"its {rel} is larger than {max_file / 2**20:g} MiB (AUTOGRADER_MAX_NOTEBOOK_MB)")
            if budget["bytes"] < 0:
                raise Refused("it is larger than nbgrader's max_dir_size")
            out.write(chunk)


def refusal(copy: str, when, now=None) -> str | None:
    """Why the :func:`snapshot` ``copy`` of an inbound entry named as a submission made at
    ``when`` is not one: None when it is. Reads the copy only."""
    now = now or datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    if when - now > FUTURE_SLACK:
        return f"its time {when} is in the future"
    try:
        with open(os.path.join(copy, "timestamp.txt")) as fh:
            stamp = parse_utc(fh.read().strip())
    except FileNotFoundError:
        return "it has no timestamp.txt (not made by nbgrader's submit)"
    except (ValueError, OverflowError, UnicodeDecodeError) as exc:
        return f"its timestamp.txt is not a time ({exc})"
    if stamp != when:
        return f"its timestamp.txt ({stamp}) is not the time in its name ({when})"
    if not os.path.isfile(os.path.join(copy, "submission_secret.txt")):
        return "it has no submission_secret.txt (not made by nbgrader's submit)"
    for name in sorted(os.listdir(copy)):
        if name.endswith(".ipynb"):
            try:
                with open(os.path.join(copy, name), "rb") as fh:
                    if not isinstance(json.load(fh).get("cells"), list):
                        raise ValueError("no cells")
            except (ValueError, AttributeError, UnicodeDecodeError, RecursionError):
                return f"{name} is not a whole notebook (truncated or not JSON)"
    return None


def set_aside(inbound: str, name: str) -> str:
    """Rename ``inbound/name`` to a ``.refused+`` name no collect matches (the owner of ``inbound``
    may, whoever owns the entry) and remove it where its files allow; the name it has now."""
    aside = REFUSED_PREFIX + name.replace("+", "_")
    os.rename(os.path.join(inbound, name), os.path.join(inbound, aside))
    shutil.rmtree(os.path.join(inbound, aside), ignore_errors=True)
    return aside


def make_sticky(inbound: str, log) -> None:
    """Give ``inbound`` (when this user owns it) the sticky bit: learners then cannot rename or
    remove each other's entries."""
    try:
        st = os.stat(inbound)
        if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & stat.S_ISVTX == 0:
            os.chmod(inbound, stat.S_IMODE(st.st_mode) | stat.S_ISVTX)
    except OSError as exc:
        log.warning("could not make %s sticky (%s): learners may rename each other's submissions",
                    inbound, exc.strerror)


class OwnedCollect(ExchangeCollect):
    """nbgrader's collect of each learner's latest submission of their own (see the module)."""

    staging = None

    def start(self):
        try:
            return super().start()
        finally:
            if self.staging:
                shutil.rmtree(self.staging, ignore_errors=True)

    def init_src(self):
        from ..common.settings import Settings

        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        try:
            inbound_fd = os.open(self.inbound_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            self.fail(f"Course not found: {self.inbound_path}")
        except OSError:
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        make_sticky(self.inbound_path, self.log)
        assignment = self.coursedir.assignment_id
        wanted = self.coursedir.student_id or "*"
        self.staging = tempfile.mkdtemp(prefix="collect-")  # mode 700: the instructor's alone
        max_file = Settings.load().max_notebook_bytes
        max_total = int(self.coursedir.max_dir_size * 1000)
        accepted = defaultdict(list)
        self.refused = []
        try:
            names = sorted(n for n in os.listdir(inbound_fd) if fnmatchcase(n, f"{wanted}+{assignment}+*"))
            for i, name in enumerate(names):
                parsed = parse_entry(name, assignment)
                copy = os.path.join(self.staging, str(i))
                if parsed is None:
                    why = "its name is not nbgrader's <student>+<assignment>+<time>"
                else:
                    try:
                        snapshot(inbound_fd, name, copy, parsed[0], max_file, max_total)
                        why = refusal(copy, parsed[1])
                    except Refused as exc:
                        why = str(exc)
                if why is None:
                    accepted[parsed[0]].append({"username": parsed[0], "filename": name,
                                                "timestamp": parsed[1], "copy": copy})
                    continue
                shutil.rmtree(copy, ignore_errors=True)
                student = parsed[0] if parsed else name.split("+", 1)[0]
                try:
                    aside = f"; set aside as {set_aside(self.inbound_path, name)}"
                except OSError as exc:
                    aside = f"; it could not be set aside ({exc.strerror})"
                self.refused.append((student, name, why))
                self.log.error("Refused a submission of %s for %s (%s): %s%s", assignment, student, name, why, aside)
        finally:
            os.close(inbound_fd)
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(assignment).duedate
            except MissingEntry:
                self.duedate = None
        self.src_records = []
        for records in accepted.values():
            records = self._sort_by_timestamp(records)
            if self.duedate is not None and self.before_duedate:
                records = [r for r in records if r["timestamp"] <= self.duedate] or records
            self.src_records.append(records[0])

    def copy_files(self):
        """nbgrader's copy into ``submitted/``, from each accepted entry's snapshot (never from
        ``inbound``); a later submission replaces one collected before."""
        assignment = self.coursedir.assignment_id
        if not self.src_records:
            self.log.warning("No submissions of '%s' for course '%s' to collect", assignment,
                             self.coursedir.course_id)
        for rec in sorted(self.src_records, key=lambda r: r["username"]):
            student = rec["username"]
            dest = self.coursedir.format_path(self.coursedir.submitted_directory, student, assignment)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if os.path.isdir(dest):
                existing = self.coursedir.get_existing_timestamp(dest)
                if existing == rec["timestamp"] or (existing is not None and existing > rec["timestamp"]
                                                    and not self.before_duedate):
                    self.log.info("No newer submission to collect: %s %s", student, assignment)
                    continue
                self.log.info("Updating submission: %s %s (submitted %s)", student, assignment, rec["timestamp"])
                shutil.rmtree(dest)
            else:
                self.log.info("Collecting submission: %s %s", student, assignment)
            self.do_copy(rec["copy"], dest)
        if self.refused:
            self.fail(f"{len(self.refused)} submission(s) of {assignment} refused, not collected: "
                      + "; ".join(f"{student} ({why})" for student, _, why in self.refused))


class PrivateSubmit(ExchangeSubmit):
    """nbgrader's submit, leaving the learner's inbound entry mode 755 (nbgrader's makes it 777,
    so that any learner could write into it)."""

    def copy_files(self):
        super().copy_files()
        os.chmod(os.path.join(self.inbound_path, self.assignment_filename), ENTRY_MODE)
