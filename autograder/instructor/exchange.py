"""nbgrader's collect (the formgrader's Collect button, ``nbgrader collect``) that takes only
submissions made by the learner they name: ``nbgrader_config.py`` names :class:`OwnedCollect`
as the exchange's collect (``ExchangeFactory.collect``).

nbgrader's exchange ``inbound`` folder is writable by every learner (nbgrader issue 1225): one
may create ``inbound/<classmate>+<assignment>+<a future time>`` holding their own notebook.
nbgrader's collect warns "cheating attempt?" and collects it anyway, and its future time then
wins over every real submission of the classmate. :class:`OwnedCollect` checks each entry first
(:func:`refusal`): a folder owned by the learner it names, holding only that learner's regular
files, with nbgrader's ``timestamp.txt`` (the time in its name) and ``submission_secret.txt``,
a time not in the future, and whole notebooks. An entry that fails is refused: never collected,
named in the log with the learner and the reason, and renamed aside within ``inbound`` (the
instructor owns ``inbound``, so no root is needed; ``.refused+...`` matches no collect), then
removed where its files allow. Each learner's latest accepted submission is collected.
"""
from __future__ import annotations

import datetime
import glob
import json
import os
import pwd
import stat
from collections import defaultdict

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import parse_utc

FUTURE_SLACK = datetime.timedelta(minutes=5)  # clocks of one machine: a little skew at most
REFUSED_PREFIX = ".refused+"


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


def refusal(path: str, student: str, when, now=None) -> str | None:
    """Why the inbound entry ``path``, named as ``student``'s submission made at ``when``, is not
    one: None when it is."""
    try:
        top = os.lstat(path)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if not stat.S_ISDIR(top.st_mode):
        return "it is not a submission folder (a file or a link)"
    owner = _owner(top.st_uid)
    if owner != student:
        return f"it is owned by {owner}, not by {student}: a submission made in another's name"
    now = now or datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    if when - now > FUTURE_SLACK:
        return f"its time {when} is in the future"
    try:
        for folder, dirs, files in os.walk(path, onerror=_raise):
            for name in dirs + files:
                entry = os.lstat(os.path.join(folder, name))
                rel = os.path.relpath(os.path.join(folder, name), path)
                if not (stat.S_ISREG(entry.st_mode) or stat.S_ISDIR(entry.st_mode)):
                    return f"it holds {rel}, which is not a regular file"
                if entry.st_uid != top.st_uid:
                    return f"it holds {rel}, owned by {_owner(entry.st_uid)}, not by {student}"
        with open(os.path.join(path, "timestamp.txt")) as fh:
            stamp = parse_utc(fh.read().strip())
        if stamp != when:
            return f"its timestamp.txt ({stamp}) is not the time in its name ({when})"
        if not os.path.isfile(os.path.join(path, "submission_secret.txt")):
            return "it has no submission_secret.txt (not made by nbgrader's submit)"
        for notebook in sorted(glob.glob(os.path.join(glob.escape(path), "*.ipynb"))):
            try:
                with open(notebook, "rb") as fh:
                    if not isinstance(json.load(fh).get("cells"), list):
                        raise ValueError("no cells")
            except (ValueError, AttributeError, UnicodeDecodeError):
                return f"{os.path.basename(notebook)} is not a whole notebook (truncated or not JSON)"
    except FileNotFoundError as exc:
        return f"it has no {os.path.basename(exc.filename or '?')} (not made by nbgrader's submit)"
    except OSError as exc:
        return f"its {os.path.relpath(exc.filename or path, path)} cannot be read ({exc.strerror})"
    except (ValueError, OverflowError) as exc:
        return f"its timestamp.txt is not a time ({exc})"
    return None


def _raise(exc):
    raise exc


def set_aside(inbound: str, name: str) -> str:
    """Rename ``inbound/name`` to a ``.refused+`` name no collect matches (the owner of ``inbound``
    may, whoever owns the entry) and remove it where its files allow; the name it has now."""
    import shutil

    aside = REFUSED_PREFIX + name.replace("+", "_")
    os.rename(os.path.join(inbound, name), os.path.join(inbound, aside))
    shutil.rmtree(os.path.join(inbound, aside), ignore_errors=True)
    return aside


class OwnedCollect(ExchangeCollect):
    """nbgrader's collect of each learner's latest submission of their own (see the module)."""

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not os.access(self.inbound_path, os.R_OK | os.X_OK):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        assignment = self.coursedir.assignment_id
        wanted = self.coursedir.student_id if self.coursedir.student_id else "*"
        pattern = os.path.join(glob.escape(self.inbound_path), f"{wanted}+{glob.escape(assignment)}+*")
        accepted = defaultdict(list)
        self.refused = []
        for path in sorted(glob.glob(pattern)):
            name = os.path.basename(path)
            parsed = parse_entry(name, assignment)
            why = ("its name is not nbgrader's <student>+<assignment>+<time>" if parsed is None
                   else refusal(path, *parsed))
            if why is None:
                accepted[parsed[0]].append({"username": parsed[0], "filename": name, "timestamp": parsed[1]})
                continue
            student = parsed[0] if parsed else name.split("+", 1)[0]
            try:
                aside = f"; set aside as {set_aside(self.inbound_path, name)}"
            except OSError as exc:
                aside = f"; it could not be set aside ({exc.strerror})"
            self.refused.append((student, name, why))
            self.log.error("Refused a submission of %s for %s (%s): %s%s", assignment, student, name, why, aside)
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
        super().copy_files()
        if self.refused:
            self.log.error("%d submission(s) of %s refused, not collected: %s", len(self.refused),
                           self.coursedir.assignment_id,
                           "; ".join(f"{student} ({why})" for student, _, why in self.refused))
