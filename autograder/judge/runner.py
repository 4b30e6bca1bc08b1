"""The program runner: learner programs run in a contained child process, never in the grader.

:class:`ProgramRunner`, in the grading process, starts :mod:`.runner_child` as a child process
(``python -s -P -m autograder.judge.runner_child serve``) and talks to it over its standard input
and output: each request holds a serialized ``jax.export`` program and its inputs as flat arrays,
each reply the output arrays only, both :mod:`autograder.wire` data framed by their length
(nothing is pickled). The child places the inputs on the program's mesh of virtual CPU devices
(:data:`JUDGE_CPU_DEVICES`, the judge's own 8) and runs it with JAX on CPU.

Containment: as root, the child has a :class:`autograder.sandbox.containment.Sandbox` of its own
(a uid from the pool, namespaces, the kernel's view of the files, a memory cap), started by the
kernels' launcher; without root, or with the sandbox off, it is still a process of its own with
``RLIMIT_DATA``. Both have a CPU-time limit, and every run a wall-clock limit.

Each notebook's judge has a runner of its own (:class:`autograder.judge.JudgeStep`), so one
submission's programs never share a process with another's. A program that crashes the child
or runs past its time loses only its own call (:class:`ProgramFailure`, learner-facing) and the
next call starts a fresh child; one that ran out of time while the machine was starved is not
graded (:class:`ProgramStarved`, :mod:`.starvation`).
"""
from __future__ import annotations

import base64
import os
import threading
import time

from .runner_frames import HEADER, frame, limits, wire
from .starvation import Starved, Watch

JUDGE_CPU_DEVICES = 8   # virtual CPU devices of the child and of every grading process (09's programs need 8)
RUN_TIMEOUT = 60.0      # wall-clock seconds one program may run
START_TIMEOUT = 60.0    # seconds the child may take to be ready (JAX's import, its devices)
DEFAULT_CPU_SECONDS = 1800  # CPU seconds of one child, all its runs
START_NICE = 10         # the contained child's nice value until it is ready
# The grader's, as a kernel's environment keeps them (autograder/sandbox/environment.py): where the
# packages come from PYTHONPATH (a TPU machine's JAX and wheels), the runner finds them there too.
_ENV_KEEP = ("LANG", "LC_ALL", "TZ", "PYTHONPATH")
# The judge's inputs are small: compiling a program costs far more than running it (0.9 s against
# milliseconds for 03's twenty Adam steps). LLVM's lowest optimization level compiles it in half
# the time; the program's operations and their floating-point semantics are XLA's either way.
XLA_FLAGS = "--xla_backend_optimization_level=0"


def ensure_judge_devices() -> None:
    """Compute on the CPU in this process, never on an accelerator, with :data:`JUDGE_CPU_DEVICES`
    virtual CPU devices (kernels do not inherit the config). A grade is then the same on a laptop
    and on a GPU or TPU host, also while another process holds the accelerator (a TPU opens for
    one process at a time: the learner's notebook on Colab). JAX fixes both when it starts its
    backends, and one grading process judges notebooks of any chapter: a process that judged
    another chapter first would stay at 1 device if 09's judge asked on import. Once JAX has
    started, they stay what they are."""
    import jax

    os.environ["JAX_PLATFORMS"] = "cpu"   # and for what this process starts
    try:
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", JUDGE_CPU_DEVICES)
    except Exception:  # noqa: BLE001 - the backends already exist, or an older JAX
        pass


class ProgramFailure(Exception):
    """The program could not be run to completion (a crash, its time, its memory, an error XLA
    raised). ``str(err)`` is learner-facing."""


class RunnerFault(ProgramFailure):
    """The grader's own runner failed (it could not start, it answered with something that is
    not an answer): the machine's fault, never the learner's, so the test is not graded."""


class ProgramStarved(ProgramFailure, Starved):
    """The program ran out of time while the machine was starved (see :mod:`.starvation`):
    the test is not graded."""


# --------------------------------------------------------------------------- the grading side

def _per_thread(name: str, doc: str) -> property:
    """A property whose value is the current thread's (``self._local``), None until set."""
    return property(lambda self: getattr(self._local, name, None),
                    lambda self, value: setattr(self._local, name, value), doc=doc)


_ON_WAIT = _per_thread("on_wait", "Called (per thread) with the seconds the current test's run waited "
                                  "for another's (the judge passes them on to the test's kernel "
                                  "channel: :func:`waited`).")


class ProgramRunner:
    """A warm child process that runs exported programs (see the module's docstring).

    ``settings``: the command's (:class:`~autograder.common.settings.Settings`; default: the
    environment's), which say how the child is contained.
    """

    def __init__(self, *, timeout: float = RUN_TIMEOUT, cpu_seconds: int = DEFAULT_CPU_SECONDS, settings=None):
        self.timeout = timeout
        self.cpu_seconds = cpu_seconds
        self.settings = settings
        self.box = None       # the child's Sandbox (a uid of its own), when contained
        self.proc = None
        self.info: dict = {}  # the child's ready message: pid, uid, devices
        self.mode = ""        # the containment it runs with (autograder.sandbox.containment's words)
        self.starts = 0
        self._owner = os.getpid()  # a forked copy of this object never stops the original's child
        self._lock = threading.RLock()  # one run at a time, whichever test's thread asks
        self._local = threading.local()
        self.deadline: float | None = None  # time.monotonic() no run may last past (the test's)
        self._ready = False
        self._buf = b""

    @property
    def deadline(self) -> float | None:
        """``time.monotonic()`` no run may last past: the current test's, per thread (tests
        judged side by side each have their own)."""
        return getattr(self._local, "deadline", None)

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        self._local.deadline = value

    on_wait = _ON_WAIT

    # -- life
    def start(self) -> None:
        """Start the child if none is running (returns at once: it gets ready on its own)."""
        import subprocess

        from ..common.settings import Settings
        from ..sandbox import launch
        from ..sandbox.containment import open_sandbox

        if os.getpid() != self._owner:  # a copy from before a fork: this process's own is another
            raise RunnerFault("The grader's program runner belongs to another process; please tell the "
                              "course staff.")
        if self.proc is not None and self.proc.poll() is None:
            return
        self._reap()
        if self.box is None:
            try:
                self.box = open_sandbox(time.monotonic() + START_TIMEOUT,
                                   self.settings or Settings.load())
            except Exception as exc:  # noqa: BLE001 - GradingError: every sandbox uid busy, a bad setting
                raise RunnerFault(f"The grader could not start its program runner ({exc}).") from None
        if self.box.refused:
            raise RunnerFault(f"The grader cannot run programs contained: {self.box.reason}")
        self.mode = self.box.mode
        serve = [*launch.package_module("autograder.judge.runner_child"), "serve"]
        if self.box.contained:
            # It starts at a lower priority (importing JAX, beside the kernel that runs the
            # notebook, whose time the learner waits for), and is raised back once ready
            # (_wait_ready).
            cmd = launch.limited(self.box.wrap(serve), self.cpu_seconds, self.box, nice=START_NICE)
        else:
            cmd = [*launch.LAUNCHER, "limits", f"--cpu={self.cpu_seconds}",
                   f"--parent={os.getpid()}", f"--memory={self.box.memory_mb << 20}", "--", *serve]
        env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
        env.update({"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "TMPDIR": "/tmp", "JAX_PLATFORMS": "cpu",
                    "PYTHONDONTWRITEBYTECODE": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "XLA_FLAGS": XLA_FLAGS})
        env = launch.with_package(env)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, cwd="/", env=env, close_fds=True)
        self.starts += 1
        self._ready = False
        self._buf = b""

    def close(self) -> None:
        """Stop the child and give its sandbox back."""
        if os.getpid() != self._owner:
            return
        self._reap()
        if self.box is not None:
            self.box.close()
            self.box = None

    def _reap(self) -> None:
        if os.getpid() != self._owner:
            return
        proc, self.proc = self.proc, None
        self._ready = False
        if proc is None:
            return
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        if proc.poll() is None:
            proc.kill()
        if self.box is not None and self.box.contained:
            self.box.kill_all()  # the child runs as the sandbox uid, under unshare
        try:
            proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            pass

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    # -- framing
    def _send(self, payload: dict) -> None:
        data = frame(payload)
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise _Died() from None

    def _receive(self, end: float) -> dict:
        import select

        fd = self.proc.stdout.fileno()
        need = None
        while True:
            if need is None and len(self._buf) >= HEADER.size:
                need = HEADER.unpack(self._buf[:HEADER.size])[0]
                if need > limits().max_bytes:
                    raise _Died()
            if need is not None and len(self._buf) >= HEADER.size + need:
                text = self._buf[HEADER.size:HEADER.size + need].decode("utf-8", errors="replace")
                self._buf = self._buf[HEADER.size + need:]
                try:  # the child ran a learner's program: its answer is data to check
                    reply = wire().decode(text, limits=limits())
                except wire().WireError:
                    raise _Died() from None
                if not isinstance(reply, dict):
                    raise _Died()
                return reply
            left = end - time.monotonic()
            if left <= 0:
                raise _Late()
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise _Died()
                self._buf += chunk

    def _wait_ready(self) -> None:
        if self._ready:
            return
        try:
            info = self._receive(time.monotonic() + START_TIMEOUT)
        except (_Late, _Died):
            self._reap()
            from .starvation import Watch, machine_starved

            if machine_starved():  # a busy machine's (perhaps the submission's own: see starvation)
                raise ProgramStarved(Watch().message("the grader's program runner, starting,")) from None
            raise RunnerFault("The grader's program runner could not start; please tell the course staff.") from None
        # ready: back to the normal priority (every process of its uid; root may, the uid may not)
        self.info = info.get("ready") if isinstance(info.get("ready"), dict) else {}
        self._ready = True
        if self.box is not None and self.box.contained:
            try:
                os.setpriority(os.PRIO_USER, self.box.uid, 0)
            except OSError:
                pass

    # -- running
    def run(self, blob: bytes, leaves: list, *, timeout: float | None = None, placements=None,
            compiled_facts: bool = False) -> dict:
        """Run the serialized program ``blob`` on the flat input arrays ``leaves``.

        ``placements``: for a program of several devices, a partition spec per input (a list
        of axis names or None per dimension) to place it with on the program's mesh, instead of
        the program's own input shardings (XLA then adds whatever the program needs to move
        them). ``compiled_facts``: also compile it explicitly and answer ``facts``, what XLA's
        compiled program holds: ``collectives`` (``{"all-reduce": n, ...}``, counted by HLO
        opcode), so that no learner program is ever compiled outside the runner.

        Returns the child's reply: ``outputs`` (the flat output arrays, decoded as
        :class:`autograder.wire.KernelArray`: values, ``weak_type`` and a description of the
        sharding, with the sharding in the output's type), ``pid`` and ``uid`` (of the process
        that computed). Raises :class:`ProgramFailure`. Runs asked for by several threads wait
        for each other (each one's time limit counts from when it is sent; the wait moves the
        test's deadline: :func:`waited`)."""
        asked = time.monotonic()
        with self._lock:
            waited(self, time.monotonic() - asked)
            return self._run(blob, leaves, timeout, placements, compiled_facts)

    def _limit(self, timeout) -> float:
        limit = self.timeout if timeout is None else min(self.timeout, timeout)
        if self.deadline is not None:
            limit = min(limit, self.deadline - time.monotonic())
        return max(1.0, limit)

    def _run(self, blob, leaves, timeout, placements, compiled_facts):
        self.start()
        self._wait_ready()
        limit = self._limit(timeout)
        watch = Watch(getattr(self.proc, "pid", None))
        try:
            self._send({"op": "run", "program": base64.b64encode(bytes(blob)).decode("ascii"),
                        "args": list(leaves), "placements": placements, "facts": bool(compiled_facts)})
            reply = self._receive(time.monotonic() + limit)
        except (_Late, _Died) as exc:
            starved = isinstance(exc, _Late) and watch.starved()
            self._reap()
            if starved:
                raise ProgramStarved(watch.message("the program, run by the grader,")) from None
            raise _failure(exc, limit) from None
        except BaseException:  # any other way out leaves a reply unread: the next run would take it
            self._reap()
            raise
        return _answer(reply, self._reap)


def waited(runner, seconds: float) -> None:
    """``runner``'s current test waited ``seconds`` for another's run: not its own time. Its
    deadline moves by as much, and so does its kernel channel's (``runner.on_wait``)."""
    if seconds <= 0:
        return
    extend(runner, seconds)
    if runner.on_wait is not None:
        runner.on_wait(seconds)


def extend(runner, seconds: float) -> None:
    """Move ``runner``'s deadline for the current test ``seconds`` later."""
    if seconds > 0 and runner.deadline is not None:
        runner.deadline += seconds


def _failure(exc, limit) -> ProgramFailure:
    if isinstance(exc, _Late):
        return ProgramFailure(f"The program ran out of time when the grader ran it (more than {limit:.0f} s): "
                              "a loop that never ends, or far more work than the exercise needs.")
    return ProgramFailure("The program crashed when the grader ran it (it ended the grader's program "
                          "runner, or took more memory than it may use).")


def _answer(reply: dict, reap) -> dict:
    """The reply of a run, or the ProgramFailure it says (``reap``: stop a runner whose answer
    is not one)."""
    if "error" in reply:
        err = reply["error"] if isinstance(reply["error"], dict) else {}
        kind, message = str(err.get("type", "Error"))[:100], str(err.get("message", ""))[:300]
        if kind == "memory":
            raise ProgramFailure(f"The program ran out of memory when the grader ran it ({message}): it "
                                 "builds arrays far larger than the exercise needs.")
        if kind == "refused":
            raise ProgramFailure(f"The grader did not run the program: {message}.")
        raise ProgramFailure(f"The program failed when the grader ran it ({kind}: {message}).")
    if not isinstance(reply.get("outputs"), list):
        reap()
        raise RunnerFault("The grader's program runner gave no outputs; please tell the course staff.")
    return reply


class _Late(Exception):
    pass


class _Died(Exception):
    pass


_PROCESS: list = []  # [(runner, pid)]: this process's own runner
_CURRENT: list = []  # a runner made current by use()


def process_runner() -> ProgramRunner:
    """This process's own runner, for programs run outside a notebook's grading (whose judge has
    a runner of its own): made on first use, stopped when the process ends; a forked process
    makes its own."""
    if not _PROCESS or _PROCESS[0][1] != os.getpid():
        r = ProgramRunner()
        _PROCESS[:] = [(r, os.getpid())]
        import atexit
        from multiprocessing import util

        atexit.register(r.close)
        util.Finalize(None, r.close, exitpriority=10)  # a multiprocessing child runs no atexit
    return _PROCESS[0][0]


def current() -> ProgramRunner:
    """The runner made current by :func:`use`, else this process's own."""
    return _CURRENT[-1] if _CURRENT else process_runner()


def use(runner: ProgramRunner | None) -> None:
    """Make ``runner`` the current one (``None``: back to this process's own)."""
    _CURRENT[:] = [runner] if runner is not None else []
