"""The jupyter_client kernel manager whose kernel starts contained (:func:`kernel_manager_class`),
its kernelspecs, and the grading folder short enough for its Unix sockets."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..common.course import GradingError
from .containment import Sandbox, chown_tree
from .launch import interpreter, limited

SOCKET_PATH_MAX = 100  # bytes of a Unix socket's path (sun_path holds 108, with its NUL)


_RUN_DIR_TAIL = len("/run-12345678/box/k-65535")  # what the grader adds to the base folder


def run_dir_base() -> str | None:
    """The folder for a submission's grading folder (``dir=`` of ``tempfile``): None (the
    temporary folder), unless its path is too long for the kernel's Unix sockets
    (``<run>/box/k-N``); then the first of ``/tmp``, ``/var/tmp``, ``/dev/shm`` that is
    writable. Raises :class:`GradingError` with the fix when none is."""
    base = tempfile.gettempdir()
    if len(os.fsencode(base)) + _RUN_DIR_TAIL <= SOCKET_PATH_MAX:
        return None
    for short in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(short) and os.access(short, os.W_OK | os.X_OK):
            return short
    raise GradingError(f"the temporary folder's path is too long for the kernel's sockets "
                       f"({len(base)} characters: {base}); set TMPDIR to a folder whose path has at "
                       f"most {SOCKET_PATH_MAX - _RUN_DIR_TAIL} characters")


def without_debugger(cmd: list) -> list:
    """``cmd`` (a kernelspec's command) with ``-m ipykernel_launcher`` run without ipykernel's
    debugger; any other command as it is."""
    for i in range(len(cmd) - 1):
        if cmd[i] == "-m" and cmd[i + 1] == "ipykernel_launcher":
            return [*cmd[:i], "-m", "autograder.sandbox.kernel_launcher", *cmd[i + 2:]]
    return list(cmd)


def kernel_specs(**kw):
    """jupyter_client's ``KernelSpecManager`` over Jupyter's kernel folders only: its default also
    searches IPython's old ``~/.ipython/kernels`` (after them: ``python3`` is found first), and
    finding that folder imports IPython, about 50 ms before a kernel can start."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_core.paths import jupyter_path

    return KernelSpecManager(kernel_dirs=jupyter_path("kernels"), **kw)


def kernel_manager_class(box: Sandbox | None, box_dir: Path, cpu_seconds: int):
    """A jupyter_client kernel manager whose kernel starts under :func:`limited` (wrapped in
    ``box``'s sandbox when it has a uid), with its connection file and its channels on Unix
    sockets in ``box_dir`` (``transport="ipc"``). Unix sockets in a folder of the submission's
    own cannot collide: TCP ports are chosen by the parent, freed, and bound again by the
    kernel, and in a parallel batch another process can take one in between (the kernel then
    dies before it answers, jupyter_client issue 154); a contained kernel has no network."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    contained = box is not None and box.contained

    class BoxedKernelManager(AsyncKernelManager):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.transport = "ipc"
            self.ip = str(box_dir / "k")
            self.connection_file = str(box_dir / "kernel.json")

        @default("kernel_spec_manager")
        def _kernel_spec_manager_default(self):
            return kernel_specs(data_dir=self.data_dir)

        def format_kernel_cmd(self, extra_arguments=None):
            cmd = without_debugger(super().format_kernel_cmd(extra_arguments))
            if os.path.isabs(cmd[0]):  # the interpreter, its folders resolved (launch.interpreter)
                cmd[0] = interpreter(cmd[0])
            return limited(box.wrap(cmd) if contained else cmd, cpu_seconds, box)

        async def interrupt_kernel(self) -> None:
            """Interrupt a cell that ran past its time limit. A contained kernel runs in a session
            and PID namespace of its own, which a SIGINT to the process jupyter_client started
            (the sandbox's launcher) never reaches: the cell went on, and the whole notebook
            ended as if the kernel had died. It is asked on its control channel instead
            (Jupyter's ``interrupt_request``: ipykernel sends SIGINT to itself)."""
            if not contained:
                return await super().interrupt_kernel()
            if not self.has_kernel:
                raise RuntimeError("Cannot interrupt kernel. No kernel is running!")
            self._connect_control_socket()
            self.session.send(self._control_socket, self.session.msg("interrupt_request", content={}))

        def write_connection_file(self, **kw):
            super().write_connection_file(**kw)
            if contained:
                chown_tree(Path(self.connection_file), box.uid)  # the kernel must read its key

    return BoxedKernelManager
