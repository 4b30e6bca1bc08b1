"""Executing a notebook headless with nbclient, without the widget stall (nbclient issue 312).

:func:`execute_notebook` is how the site build (scripts/site.py) and the test suite run a chapter: nbclient's
``NotebookClient`` in a fresh kernel on Unix sockets of its own, shut down afterwards, with one
change to how nbclient waits for a cell's reply.

The stall: a cell whose output goes to an ipywidgets ``Output`` widget (a slider's callback
that prints into it after ``clear_output(wait=True)``) sometimes finished in the kernel while
nbclient kept waiting for its reply until the cell's timeout (300 s), then carried on as if
nothing happened. The cause, confirmed here on nbclient 0.11, jupyter_client 8.10 and pyzmq 27:

1. nbclient mirrors each ``Output`` widget (``nbclient.output_widget.OutputWidget``) and, on
   every output the widget captures, sends the kernel the widget's new state: a ``comm_msg``
   on the *shell* channel, from the task that reads IOPub;
2. meanwhile the task waiting for the cell's ``execute_reply`` is parked in
   ``await shell_socket.poll(timeout)`` of the same asyncio socket;
3. jupyter_client's ``Session.send`` sends through a *synchronous* shadow of that asyncio socket
   (``zmq.Socket.shadow(socket.underlying)``), so pyzmq's asyncio layer never learns of the
   send; but a ZeroMQ socket's file descriptor is edge-triggered, and the send processes the
   socket's pending commands, the reply's arrival among them, which consumes the edge: the
   poller waiting on the descriptor is never woken, and the reply sits unread until the poll's
   timeout, when pyzmq polls once more and finds it.

Seen here: 3 runs side by side of a notebook of 41 slider cells stalled on 12 cells; chapter 02
run 3 times side by side with one core busy stalled once, on its cell of scripted slider moves;
the same with jupyter_client 7.4.9 and pyzmq 26.2.1 (Colab's). Waking pyzmq's asyncio socket
after each such send ends the stalls (none in the same runs), but needs a private pyzmq method.
The fix here uses public API only, upstream-style (nbclient PR 311 proposes bounded waits in the
same place): the shell channel waits for a message in slices of :data:`POLL` seconds, each ending
in a fresh poll of the socket, up to the same overall timeout. A lost wake-up then costs at most
one slice instead of the cell's timeout.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from traitlets import Type

try:
    from jupyter_client.channels import AsyncZMQSocketChannel as _Channel   # jupyter_client 8
except ImportError:  # jupyter_client 7 (Colab's): its ZMQSocketChannel is the asynchronous one
    from jupyter_client.channels import ZMQSocketChannel as _Channel

POLL = 0.1  # seconds: the longest a reply can wait unread after a lost wake-up


class ShellChannel(_Channel):
    """The shell channel, waiting for a message in slices of :data:`POLL` seconds."""

    async def get_msg(self, timeout: float | None = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = POLL if deadline is None else min(POLL, max(0.0, deadline - time.monotonic()))
            try:
                return await super().get_msg(timeout=left)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise


class KernelClient(AsyncKernelClient):
    """nbclient's asynchronous kernel client with :class:`ShellChannel`."""

    shell_channel_class = Type(ShellChannel)


def execute_notebook(nb, cwd, *, timeout: int = 300, kernel_name: str = "python3", **options):
    """Execute ``nb`` (a ``NotebookNode``, changed in place and returned) in a fresh kernel started
    in ``cwd``, as nbclient does, without the widget stall. ``timeout``: the limit for one cell;
    ``options``: more of ``NotebookClient``'s (hooks such as ``on_cell_executed``, ``allow_errors``).
    Raises nbclient's ``CellExecutionError`` on an error in a cell not tagged ``raises-exception``.

    The kernel talks on Unix sockets in a folder of its own: on TCP, jupyter_client picks a free
    port, frees it, and the kernel binds it a moment later, and a kernel starting side by side can
    take it in between (jupyter_client issue 154)."""
    sockets = tempfile.mkdtemp(prefix="kernel-")
    try:
        km = AsyncKernelManager(kernel_name=kernel_name, transport="ipc", ip=os.path.join(sockets, "k"))
        km.client_factory = KernelClient
        client = NotebookClient(nb, km=km, timeout=timeout, kernel_name=kernel_name,
                                resources={"metadata": {"path": str(Path(cwd))}}, **options)
        client.execute(cleanup_kc=True)  # the kernel is shut down at the end, even on an error
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    return nb
