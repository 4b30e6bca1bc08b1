"""`make hub`: JupyterHub serving the course to a room of learners (see hub/course.toml).

    python hub/workshop.py serve                 # what `make hub` runs
    python hub/workshop.py release-feedback A    # an instructor, after `make autograde`

`serve` reads the course file ($HUB_COURSE, default hub/course.toml), prepares the hub's state
folder ($HUB_STATE, default .hub/ in the checkout) and execs `jupyterhub -f
hub/jupyterhub_config.py` on http://127.0.0.1:$HUB_PORT (default 8000; the hub's own API and the
proxy's API take the next two ports).

Two modes, chosen by the course file:
- *alone* (no users listed, the committed default): the current user, SimpleLocalProcessSpawner,
  a password kept in <state>/private/password; JupyterLab on the checkout as `make lab` serves it.
- *room* (users listed; needs root): every name becomes a local system user with its own home
  (useradd), servers start as those users (LocalProcessSpawner), logins use their system
  passwords (PAM). One nbgrader exchange for everyone in <state>/course/exchange (mode 1777:
  writable by all, as nbgrader wants, and sticky, so no learner renames the course's folder).
  Each course's inbound, where submissions arrive, is mode 3733: learners may create entries
  there but not list them, and the sticky bit lets only an entry's owner or the instructor rename
  or remove it (the course's release and collect set it, autograder.instructor.exchange); a
  learner's submit leaves their entry mode 755, so no classmate can write into it, and collect
  copies each entry without following links before it checks it. The gradebook, submissions,
  grades and feedback live in <state>/course, which only the instructor group may enter. The
  checkout's grading material (PRIVATE: solutions/ and the judges, tests/ with their working
  answers, .git) becomes the instructor group's alone; each learner's home starts with ~/course, a copy of the
  chapters. The servers run from the course's .venv, or a twin of it (server_venv) that every
  user may run; `serve` refuses, saying why, when a learner could not start one.

Every server sends `frame-ancestors 'self'` (JupyterHub 4.1+ says 'none', which blanks the
formgrader's tab inside JupyterLab), has JupyterLab's news toast off, and opens terminals with
the course's python first on PATH (instructors' in the checkout).
"""
from __future__ import annotations

import getpass
import grp
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HUB_DIR = REPO / "hub"
CHP = REPO / ".hub" / "node_modules" / ".bin" / "configurable-http-proxy"
NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
# Learners get the Assignments tab, not the instructor's tools.
LEARNER_DISABLED_LAB = ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                        "@jupyter/nbgrader:course-list"]


class CourseError(SystemExit):
    """A problem with the course file or the machine, said in one clear sentence."""

    def __init__(self, message: str):
        super().__init__(f"make hub: {message}")


def course_file() -> Path:
    return Path(os.environ.get("HUB_COURSE") or HUB_DIR / "course.toml").resolve()


def state_dir() -> Path:
    return Path(os.environ.get("HUB_STATE") or REPO / ".hub").resolve()


def port() -> int:
    value = os.environ.get("HUB_PORT") or "8000"
    if not value.isdigit() or not 0 < int(value) < 65534:
        raise CourseError(f"HUB_PORT={value!r} is not a port number")
    return int(value)


def load_course(path: Path | None = None) -> dict:
    """The course file, checked: ``{course_id, instructor_group, instructors, learners, mode}``."""
    path = path or course_file()
    if not path.is_file():
        raise CourseError(f"no course file at {path} (HUB_COURSE names another one)")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise CourseError(f"{path} is not valid TOML: {exc}") from None
    course, users = data.get("course", {}), data.get("users", {})
    course_id = course.get("course_id", "")
    if not isinstance(course_id, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", course_id):
        raise CourseError(f"{path}: [course] course_id must be a name like 'jax-mental-model', "
                          f"not {course_id!r}")
    group = course.get("instructor_group", "jax-instructors")
    lists = {}
    for key in ("instructors", "learners"):
        names = users.get(key, [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise CourseError(f"{path}: [users] {key} must be a list of user names")
        bad = [n for n in names if not NAME.match(n)]
        if bad:
            raise CourseError(f"{path}: {bad} are not valid user names (lowercase letters, digits, "
                              "'-' and '_', at most 32 characters)")
        if len(set(names)) != len(names):
            raise CourseError(f"{path}: [users] {key} names someone twice")
        lists[key] = names
    both = sorted(set(lists["instructors"]) & set(lists["learners"]))
    if both:
        raise CourseError(f"{path}: {both} are listed both as instructors and as learners")
    if not NAME.match(str(group)):
        raise CourseError(f"{path}: instructor_group {group!r} is not a valid group name")
    if "root" in lists["instructors"] + lists["learners"]:
        raise CourseError(f"{path}: root cannot be a learner or an instructor")
    mode = "room" if lists["instructors"] or lists["learners"] else "alone"
    if mode == "room" and not lists["instructors"]:
        raise CourseError(f"{path}: a room needs at least one instructor")
    return {"path": str(path), "course_id": course_id, "instructor_group": group,
            "instructors": lists["instructors"], "learners": lists["learners"], "mode": mode}


def alone_user() -> str:
    return getpass.getuser()


def paths(state: Path | None = None) -> dict[str, Path]:
    state = state or state_dir()
    course = state / "course"
    return {"state": state, "private": state / "private", "course": course,
            "exchange": course / "exchange", "gradebook": course / "gradebook",
            "learner_config": state / "config" / "learner",
            "instructor_config": state / "config" / "instructor"}


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise CourseError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip() or proc.stdout.strip()}")


def _mkdir(path: Path, mode: int, gid: int | None = None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if gid is not None:
        os.chown(path, 0, gid)
    os.chmod(path, mode)  # after mkdir: the umask would drop group/other bits


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chmod(path, 0o644)


def ensure_users(course: dict) -> None:
    """Create the instructor group and every listed user (own home, mode 0700) when missing."""
    group = course["instructor_group"]
    try:
        grp.getgrnam(group)
    except KeyError:
        _run(["groupadd", "--system", group])
    for name in course["instructors"] + course["learners"]:
        try:
            pwd.getpwnam(name)
        except KeyError:
            _run(["useradd", "--create-home", "--user-group", "--shell", "/bin/bash", name])
        os.chmod(pwd.getpwnam(name).pw_dir, 0o700)
    for name in course["instructors"]:
        _run(["usermod", "--append", "--groups", group, name])


# JupyterHub 4.1+ sends `frame-ancestors 'none'` from every single-user server, so the
# formgrader (an iframe inside JupyterLab, served by the same server) would not render.
FRAME_POLICY = {"Content-Security-Policy": "frame-ancestors 'self'"}
# JupyterLab's "Would you like to receive official Jupyter news?" toast covers the notebook on a
# first start: no news, no update checks (settings overrides; a person may still turn them on).
LAB_OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false",
                                                                   "checkForUpdates": False}}


def write_lab_settings(folder: Path) -> Path:
    """JupyterLab's settings overrides (LAB_OVERRIDES) in ``folder``, for LabApp.app_settings_dir."""
    _mkdir(folder, 0o755)
    _write(folder / "overrides.json", json.dumps(LAB_OVERRIDES, indent=2))
    return folder


def _shell_rc(venv_bin: Path, cwd: Path | None) -> str:
    """A terminal's bash start-up file: the user's own, then the course's interpreter and
    commands first on PATH (a login shell's /etc/profile would have reset it), and, for an
    instructor, the course directory as the working folder, where ``make`` runs the Makefile's
    verbs with the servers' environment (the checkout's .venv may be one only root can run: its
    interpreter under root's pyenv)."""
    lines = ["# Written by hub/workshop.py: every terminal of a course server reads it.",
             "[ -f /etc/bash.bashrc ] && . /etc/bash.bashrc",
             "[ -f ~/.bashrc ] && . ~/.bashrc",
             f'export PATH="{venv_bin}:$PATH"']
    if cwd is not None:
        lines.append(f'[ "$PWD" = "$HOME" ] && cd "{cwd}"')
        venv = venv_bin.parent
        if os.path.realpath(venv) != os.path.realpath(cwd / ".venv"):
            lines.append(f'make() {{ command make VENV="{venv}" -o "{venv}/.installed-stamp" "$@"; }}')
    return "\n".join(lines) + "\n"


def write_configs(course: dict, p: dict[str, Path], venv: Path | None = None) -> None:
    """nbgrader and Jupyter configuration the single-user servers read (JUPYTER_CONFIG_PATH)."""
    learner, instructor = p["learner_config"], p["instructor_config"]
    for folder in (learner.parent, learner, instructor):
        _mkdir(folder, 0o755)
    venv_bin = Path(venv or sys.prefix) / "bin"
    lab_settings = write_lab_settings(learner.parent / "lab-settings")
    _write(learner / "nbgrader_config.py",
           "# Written by hub/workshop.py for every learner's server: the course's exchange.\n"
           "c = get_config()  # noqa: F821\n"
           f"c.CourseDirectory.course_id = {course['course_id']!r}\n"
           f"c.Exchange.root = {str(p['exchange'])!r}\n"
           "c.Exchange.path_includes_course = True\n"
           "# the learner's inbound entry stays theirs alone (mode 755; nbgrader's submit makes it 777)\n"
           "c.ExchangeFactory.submit = 'autograder.instructor.exchange.PrivateSubmit'\n")
    _write(learner / "bashrc", _shell_rc(venv_bin, None))
    _write(learner / "jupyter_server_config.json", json.dumps(
        {"ServerApp": {"jpserver_extensions": {"nbgrader.server_extensions.formgrader": False,
                                               "nbgrader.server_extensions.course_list": False},
                       "tornado_settings": {"headers": FRAME_POLICY},
                       "terminado_settings": {"shell_command": ["/bin/bash", "--rcfile",
                                                                str(learner / "bashrc"), "-i"]}},
         "LabApp": {"app_settings_dir": str(lab_settings)}},
        indent=2))
    # What a learner's server and kernels write (in /tmp, /dev/shm too) is theirs alone.
    _write(learner / "jupyter_server_config.py",
           "# Written by hub/workshop.py for every learner's server: files are the learner's alone.\n"
           "import os\nos.umask(0o077)\n")
    _write(learner / "labconfig" / "page_config.json", json.dumps(
        {"disabledExtensions": {name: True for name in LEARNER_DISABLED_LAB}}, indent=2))
    # Instructors (and the single user alone) use the checkout's own nbgrader_config.py; their
    # servers start in their home, where nbgrader would not find it.
    _write(instructor / "nbgrader_config.py",
           "# Written by hub/workshop.py: the course's own configuration, wherever the server starts.\n"
           "c = get_config()  # noqa: F821\n"
           f"load_subconfig({str(REPO / 'nbgrader_config.py')!r})  # noqa: F821\n"
           f"c.CourseDirectory.course_id = {course['course_id']!r}\n")
    _write(instructor / "bashrc", _shell_rc(venv_bin, REPO))
    server = ["# Written by hub/workshop.py for the instructors' servers.",
              "c = get_config()  # noqa: F821",
              f"c.ServerApp.tornado_settings = {{'headers': {FRAME_POLICY!r}}}  # the formgrader's iframe",
              f"c.ServerApp.terminado_settings = {{'shell_command': ['/bin/bash', '--rcfile', "
              f"{str(instructor / 'bashrc')!r}, '-i']}}",
              f"c.LabApp.app_settings_dir = {str(lab_settings)!r}"]
    if course["mode"] == "room":
        # Several instructors share the course state: what one writes (the gradebook, grades),
        # the others may change. Learners are kept out by the folders (mode 2770), not the files.
        server += ["import os", "os.umask(0o002)  # instructors' files are group-writable"]
    _write(instructor / "jupyter_server_config.py", "\n".join(server) + "\n")


def _others_can_run(path: Path) -> bool:
    """Whether a user without any group in common could execute ``path`` (every folder on the way
    searchable by others, the file executable by others)."""
    path = Path(os.path.realpath(path))
    return all(os.stat(d).st_mode & 0o001 for d in path.parents) and bool(os.stat(path).st_mode & 0o001)


def _runpath_entries(data: bytes):
    """The file offsets and values of an ELF file's DT_RUNPATH and DT_RPATH strings (64-bit
    little-endian only; ``[]`` for anything else)."""
    import struct

    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return []
    entries = {}
    for off in range(dynamic[0], dynamic[0] + dynamic[1], 16):
        tag, value = struct.unpack_from("<qQ", data, off)
        if tag == 0:
            break
        entries.setdefault(tag, []).append(value)
    strtab = next((off + entries[5][0] - vaddr for vaddr, off, size in loads
                   if 5 in entries and vaddr <= entries[5][0] < vaddr + size), None)
    if strtab is None:
        return []
    found = []
    for tag in (15, 29):  # DT_RPATH, DT_RUNPATH
        for value in entries.get(tag, []):
            start = strtab + value
            found.append((start, data[start:data.index(b"\0", start)].decode()))
    return found


def _relocate_runpath(path: Path, old_lib: Path) -> None:
    """Point the copied ELF file ``path``'s library path from ``old_lib`` (the original's lib/)
    to ``$ORIGIN/../lib``, in place (the new string is shorter, so it fits)."""
    data = bytearray(path.read_bytes())
    for start, value in _runpath_entries(bytes(data)):
        parts = [("$ORIGIN/../lib" if os.path.realpath(v) == os.path.realpath(old_lib) else v)
                 for v in value.split(":")]
        new = ":".join(parts).encode()
        if len(new) <= len(value.encode()):
            data[start:start + len(value.encode())] = new + b"\0" * (len(value.encode()) - len(new))
    path.write_bytes(bytes(data))


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)  # same file system: the same file, nothing copied
    except OSError:
        shutil.copy2(src, dst)


# Parts of the standard library no server needs (tests, the Tk GUI, the static library). Its
# bytecode (__pycache__) is kept: learners cannot write it into the copy, and without it every
# server and kernel compiled the modules it imports from source on each start (about 2.5 s of a
# server's start on a loaded 2-core machine: docs/capacity.md).
_STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "site-packages"}


def shared_interpreter(p: dict[str, Path]) -> Path:
    """An interpreter of this Python that every user may run: the system's own of the same
    version (/usr/local/bin, /usr/bin) when there is one, else a copy the hub makes in
    <state>/python of the installation the course's venv was made from (pyenv's, under root's
    private home): the interpreter, libpython and the standard library (hard links where the
    file system allows), with the interpreter's library path made relative ($ORIGIN/../lib)
    so that it no longer points into the private folder. Returns the interpreter's path."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for d in ("/usr/local/bin", "/usr/bin"):
        system = Path(d) / f"python{version}"
        if system.exists() and _others_can_run(system) and _same_python(system):
            return system
    base = Path(sys.base_prefix)
    exe = Path(os.path.realpath(Path(base) / "bin" / f"python{version}"))
    stdlib = base / "lib" / f"python{version}"
    if not exe.is_file() or not (stdlib / "os.py").is_file():
        raise CourseError(f"the learners cannot run {os.path.realpath(sys.executable)} (a folder on its "
                          f"path is private), there is no python{version} for everyone in /usr/bin, "
                          f"and {base} is not an installation the hub can copy (install python{version} "
                          "for everyone, or build .venv from a shared interpreter)")
    copy = p["state"] / "python"
    stamp = f"{exe} {exe.stat().st_size} {exe.stat().st_mtime_ns} {sys.version} bytecode\n"
    if (copy / "STAMP").is_file() and (copy / "STAMP").read_text() == stamp:
        return copy / "bin" / f"python{version}"
    if copy.exists():
        shutil.rmtree(copy)
    (copy / "bin").mkdir(parents=True)
    (copy / "lib").mkdir()
    shutil.copy2(exe, copy / "bin" / f"python{version}")  # a real copy: its library path changes
    _relocate_runpath(copy / "bin" / f"python{version}", base / "lib")
    for alias in ("python3", "python"):
        (copy / "bin" / alias).symlink_to(f"python{version}")
    for lib in (base / "lib").glob("libpython*"):
        if lib.is_symlink():
            (copy / "lib" / lib.name).symlink_to(os.readlink(lib))
        else:
            _link_or_copy(str(lib), str(copy / "lib" / lib.name))
    shutil.copytree(stdlib, copy / "lib" / f"python{version}", symlinks=True,
                    copy_function=_link_or_copy,
                    ignore=lambda d, names: [n for n in names if n in _STDLIB_SKIP
                                             or n.startswith("config-")] if Path(d) == stdlib else [])
    (copy / "lib" / f"python{version}" / "site-packages").mkdir()
    for folder in [copy, *(d for d in copy.rglob("*") if d.is_dir() and not d.is_symlink())]:
        os.chmod(folder, 0o755)
    (copy / "STAMP").write_text(stamp)
    return copy / "bin" / f"python{version}"


def _same_python(python: Path) -> bool:
    """Whether ``python`` is this very Python version (major, minor)."""
    proc = subprocess.run([str(python), "-c", "import sys; print(sys.version_info[:2])"],
                          capture_output=True, text=True)
    return proc.returncode == 0 and proc.stdout.strip() == str(tuple(sys.version_info[:2]))


def server_venv(p: dict[str, Path], venv: Path | None = None) -> Path:
    """The environment the learners' servers run from: the course's own .venv, when any user may
    run its interpreter. When not (a venv made from an interpreter under root's private home, as
    pyenv does), a twin in <state>/venv: the same packages (its lib/, share/ and etc/ are links to
    the venv's) run by :func:`shared_interpreter`, with the venv's commands re-pointed at it."""
    venv = Path(venv or sys.prefix)  # this Python's venv unless told another (of this Python)
    if _others_can_run(venv / "bin" / "python"):
        return venv
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    system = shared_interpreter(p)
    twin = p["state"] / "venv"
    if twin.exists():
        shutil.rmtree(twin)
    (twin / "bin").mkdir(parents=True)
    for name in ("lib", "lib64", "share", "etc", "include"):
        if (venv / name).exists():
            (twin / name).symlink_to(venv / name)
    (twin / "pyvenv.cfg").write_text(f"home = {system.parent}\ninclude-system-site-packages = false\n"
                                     f"version = {version}\n")
    (twin / "bin" / "python").symlink_to(system)
    for alias in ("python3", f"python{version}"):
        (twin / "bin" / alias).symlink_to("python")
    shebangs = {f"#!{venv / 'bin' / n}".encode() for n in ("python", "python3", f"python{version}")}
    for script in sorted((venv / "bin").iterdir()):
        if script.is_symlink() or not script.is_file() or (twin / "bin" / script.name).exists():
            continue
        first, _, rest = script.read_bytes().partition(b"\n")
        if first.strip() in shebangs:
            target = twin / "bin" / script.name
            target.write_bytes(f"#!{twin / 'bin' / 'python'}".encode() + b"\n" + rest)
            target.chmod(0o755)
    os.chmod(twin, 0o755)
    os.chmod(twin / "bin", 0o755)
    return twin


# In a room, what grades the learners or gives the answers away is the instructors' alone: the
# course's solutions and judges, the test suite (its attacks and program tests hold working
# answers), its history (git objects hold the solutions), the course state of `make lab` and the
# test artifacts. The hub makes each of these folders the instructor group's (the owner keeps
# their rights; others get none). Learners read the rest of the checkout: the course's package
# (their notebooks import it), chapters and exercises.
PRIVATE = ("solutions", "tests", ".git", ".course", "artifacts")


def close_grading_material(gid: int) -> list[Path]:
    """Make every folder of PRIVATE that exists the group ``gid``'s, without access for others;
    returns them."""
    closed = []
    for name in PRIVATE:
        path = REPO / name
        if path.is_dir() and not path.is_symlink():
            mode = path.stat().st_mode & 0o7777
            os.chown(path, -1, gid)
            os.chmod(path, (mode & 0o7700) | 0o050)
            closed.append(path)
    return closed


def _private_folder(path: Path) -> Path | None:
    """The first folder on the way to ``path`` (itself included, when a folder) that a user
    without any group in common cannot enter, or None."""
    path = Path(os.path.realpath(path))
    for d in [*reversed(path.parents), *([path] if path.is_dir() else [])]:
        if not os.stat(d).st_mode & 0o001:
            return d
    return None


def check_learners_reach(venv: Path) -> None:
    """Refuse to start when the learners' servers could not run: they run ``venv`` (its
    interpreter, its packages) and import the course's package from the checkout."""
    needs = [(venv / "bin" / "python", "the servers' interpreter"),
             (venv / "lib", "the course's packages"),
             (REPO / "autograder" / "__init__.py", "the course's package"),
             (REPO / "course", "the chapters")]
    for path, what in needs:
        private = _private_folder(path)
        if private is not None or not os.path.exists(path):
            why = (f"{private} is private (mode {oct(os.stat(private).st_mode & 0o777)})" if private
                   else "it is missing")
            raise CourseError(f"the learners could not reach {what} at {os.path.realpath(path)}: {why}. "
                              "Serve the room from a checkout every user may enter (e.g. clone it into "
                              "/srv or /opt, then `make env` and `make hub` there)")
    python = os.path.realpath(venv / "bin" / "python")
    if not os.stat(python).st_mode & 0o001:
        raise CourseError(f"the learners could not run {python}: it is not executable for others")


SERVER_MODULES = ("jupyterhub", "jupyterlab", "nbgrader", "ipykernel", "jax", "autograder")
# Found, not imported (a second, not several on a loaded machine).
SERVER_IMPORTS = ("import importlib.util as u, sys; "
                  f"missing = [m for m in {SERVER_MODULES!r} if u.find_spec(m) is None]; "
                  "sys.exit(f'missing modules: {missing}' if missing else 0)")


def server_problem(venv: Path, uid: int, gid: int, groups=()) -> str | None:
    """Why a server run as ``uid`` from ``venv`` could not start (its interpreter does not run,
    or the packages a server imports are missing for that user), or None: the check runs the
    venv's python as that user."""
    python = venv / "bin" / "python"
    try:
        proc = subprocess.run([str(python), "-c", SERVER_IMPORTS], capture_output=True, text=True,
                              timeout=120, user=uid, group=gid, extra_groups=list(groups), cwd="/",
                              env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": "/"})
    except OSError as exc:
        return f"{python} cannot be run: {exc.strerror or exc}"
    except subprocess.TimeoutExpired:
        return f"{python} did not finish looking for {', '.join(SERVER_MODULES)} in 120 s"
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        return f"{python} cannot start a server: {last}"
    return None


def check_learners_run(venv: Path) -> None:
    """Refuse to start when a user without any group of the course (uid 65534) cannot start a
    server from ``venv``."""
    problem = server_problem(venv, 65534, 65534)
    if problem:
        raise CourseError(f"the learners' servers could not start: {problem} (as uid 65534). Serve "
                          "the room from a checkout and .venv every user may enter and run")


def check_spawn(name: str, venv: Path) -> None:
    """Before ``name``'s server starts: raise, naming the cause, when it could not (JupyterHub
    shows the message on the person's page instead of a bare error)."""
    entry = pwd.getpwnam(name)
    groups = os.getgrouplist(name, entry.pw_gid)
    problem = server_problem(venv, entry.pw_uid, entry.pw_gid, groups)
    if problem:
        error = RuntimeError(f"{name}'s server cannot start: {problem}. Tell the instructor "
                             "(the hub's log has the details)")
        error.jupyterhub_message = str(error)  # what JupyterHub's page shows (else no cause at all)
        raise error


def give_chapters(user: str) -> Path:
    """``user``'s own copy of the chapters, in ~/course (to run and edit; the feedback's "see
    course/..." names these): made once, never overwritten."""
    entry = pwd.getpwnam(user)
    dest = Path(entry.pw_dir) / "course"
    if dest.exists():
        return dest
    dest.mkdir(mode=0o755)
    os.chown(dest, entry.pw_uid, entry.pw_gid)
    for item in sorted((REPO / "course").iterdir()):
        if item.is_file() and not item.name.startswith("."):
            shutil.copyfile(item, dest / item.name)
            os.chown(dest / item.name, entry.pw_uid, entry.pw_gid)
            os.chmod(dest / item.name, 0o644)
    return dest


def reports_dir() -> Path:
    """Where an instructor's grade CSVs and class report go (COURSE_REPORTS of their server): a
    folder of the checkout, which their JupyterLab shows (the course state is hidden in .hub/)."""
    return REPO / "reports"


def make_reports(gid: int | None) -> Path:
    """The reports folder: in a room the instructor group's alone (mode 2770), git-ignored."""
    folder = reports_dir()
    _mkdir(folder, 0o2770 if gid is not None else 0o755, gid)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        _write(ignore, "# grades and reports: never committed\n*\n")
    return folder


def prepare(course: dict) -> dict[str, Path]:
    """Folders, users and configuration for ``course``; returns the paths."""
    p = paths()
    _mkdir(p["state"], 0o755)
    _mkdir(p["private"], 0o700)
    if course["mode"] == "room":
        if os.geteuid() != 0:
            raise CourseError(f"{course['path']} lists users, so the hub must create them and start "
                              "their servers: run `make hub` as root (or empty the lists to try it alone)")
        ensure_users(course)
        gid = grp.getgrnam(course["instructor_group"]).gr_gid
        _mkdir(p["course"], 0o2775, gid)  # learners pass through to the exchange, nothing more
        _mkdir(p["exchange"], 0o1777)
        for sub in ("submitted", "autograded", "feedback", "gradebook"):
            _mkdir(p["course"] / sub, 0o2770, gid)
        gradebook = p["gradebook"] / "gradebook.db"
        if not gradebook.exists():  # SQLite would create it 0644: one instructor's only
            gradebook.touch()
            os.chown(gradebook, 0, gid)
            os.chmod(gradebook, 0o660)
        make_reports(gid)
        venv = server_venv(p)
        check_learners_reach(venv)
        check_learners_run(venv)
        for path in close_grading_material(gid):
            print(f"make hub: {path} is now readable by the group {course['instructor_group']} only",
                  file=sys.stderr)
    else:
        venv = Path(sys.prefix)
        make_reports(None)
    (p["private"] / "server-venv").write_text(str(venv))
    if course["mode"] == "alone":
        exchange = REPO / ".course" / "exchange"  # where `make lab` keeps it
        exchange.mkdir(parents=True, exist_ok=True)
        os.chmod(exchange, 0o1777)
        password = p["private"] / "password"
        if not password.exists():
            password.write_text(secrets.token_urlsafe(12))
            os.chmod(password, 0o600)
    write_configs(course, p, venv)
    return p


def serve() -> None:
    course = load_course()
    port()  # checked before anything else starts
    if not CHP.exists():
        raise CourseError(f"configurable-http-proxy is missing ({CHP}): `make hub` installs it "
                          "with npm (node and npm must be on PATH)")
    p = prepare(course)
    print(f"make hub: serving {course['course_id']} from {course['path']} on "
          f"http://127.0.0.1:{port()}", file=sys.stderr)
    if course["mode"] == "alone":
        print(f"make hub: trying it alone: log in as {alone_user()!r} with the password in "
              f"{p['private'] / 'password'}: {(p['private'] / 'password').read_text()}", file=sys.stderr)
    else:
        print(f"make hub: instructors {course['instructors']}, learners {course['learners']}; "
              "they log in with their system passwords", file=sys.stderr)
    hub = Path(sys.executable).parent / "jupyterhub"
    os.chdir(p["private"])  # jupyterhub writes nothing into the checkout
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), str(CHP.parent),
                                          os.environ.get("PATH", "/usr/bin:/bin")])
    args = [str(hub), "-f", str(HUB_DIR / "jupyterhub_config.py")]
    os.execv(args[0], args)


def release_feedback(assignment: str) -> None:
    """After `make autograde`: the project's feedback pages, then nbgrader's release_feedback.

    nbgrader releases a page only beside the submission's timestamp.txt and submission_secret.txt
    (`autograder feedback` copies both beside every page it writes), and stops at the first page
    without them: such a submission (and one without a page) is named and left out, everyone
    else's feedback is released, and the exit status is then non-zero."""
    sys.path.insert(0, str(REPO))
    from autograder.instructor import Course

    course = Course()
    if assignment not in course.assignments():
        raise SystemExit(f"release-feedback: unknown assignment {assignment!r}; known: "
                         f"{', '.join(course.assignments())}")
    submitted = sorted(course.submitted.glob(f"*/{assignment}"))
    if not submitted:
        raise SystemExit(f"release-feedback: nobody's {assignment} has been collected into "
                         f"{course.submitted} yet (collect it in the formgrader first)")
    python = sys.executable
    subprocess.run([python, "-m", "autograder", "feedback"], cwd=REPO)  # names a page it cannot write
    missing: dict[str, str] = {}
    for folder in submitted:
        student = folder.parent.name
        page = course.feedback / student / assignment / f"{assignment}.html"
        lacking = [n for n in ("timestamp.txt", "submission_secret.txt") if not (page.parent / n).is_file()]
        if not page.is_file():
            missing[student] = "no feedback page (not autograded?)"
        elif lacking:
            missing[student] = (f"its submission has no {' or '.join(lacking)} (not submitted through "
                                "nbgrader's exchange?), so nbgrader cannot release its page")
        elif (why := _unreleasable(page.parent)) is not None:
            missing[student] = why
    released = [f.parent.name for f in submitted if f.parent.name not in missing]
    if released:
        cmd = [str(Path(python).parent / "nbgrader"), "release_feedback", assignment]
        # every page of the assignment's feedback folder but those: a stray one would stop nbgrader too
        others = [d.name for d in course.feedback.glob("*") if d.name not in released]
        if others:
            cmd.append(f"--CourseDirectory.student_id_exclude={','.join(sorted(others))}")
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        if proc.returncode:
            sys.stderr.write(proc.stdout + proc.stderr)
            raise SystemExit(f"release-feedback: nbgrader release_feedback {assignment} failed "
                             f"(exit {proc.returncode}); see above")
    print(f"release-feedback: released {len(released)} feedback page(s) of {assignment}")
    if missing:
        for student, why in sorted(missing.items()):
            print(f"release-feedback: NOT released for {student}: {why}", file=sys.stderr)
        raise SystemExit(f"release-feedback: {len(missing)} submission(s) of {assignment} got no "
                         f"feedback: {', '.join(sorted(missing))}")


def _unreleasable(folder: Path) -> str | None:
    """Why nbgrader's release_feedback would stop at the page in ``folder`` (its timestamp.txt,
    copied from the learner's submission, is no time nbgrader can read), or None."""
    from nbgrader.utils import parse_utc

    try:
        parse_utc((folder / "timestamp.txt").read_text(errors="replace").strip())
    except (OSError, ValueError, OverflowError, TypeError) as exc:
        return f"its timestamp.txt is not a time nbgrader can read ({exc}), so nbgrader cannot release its page"
    return None


def main(argv: list[str]) -> None:
    if argv[:1] == ["serve"] and len(argv) == 1:
        serve()
    elif argv[:1] == ["release-feedback"] and len(argv) == 2:
        release_feedback(argv[1])
    else:
        raise SystemExit(__doc__.split("\n\n")[1])


if __name__ == "__main__":
    main(sys.argv[1:])
