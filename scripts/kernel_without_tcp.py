"""``python -m ipykernel_launcher`` for a machine that refuses TCP sockets, loopback included (the
device tool's TPU machines, under gVisor). The kernel's channels are Unix sockets there
(``scripts/bench.py`` asks for transport "ipc"), but ipykernel's IOPub thread also binds a pipe
on tcp://127.0.0.1 for the output of forked processes, and libzmq aborts the whole kernel when
that fails ("Address family not supported by protocol"). Only that pipe is turned off: output
printed by a forked child of the kernel is lost, nothing else changes. ``scripts/gpu_run.sh``
puts this file in the kernel spec where TCP is refused."""
import runpy

import ipykernel.iostream


def _no_pipe(self):
    self._pipe_flag = False


ipykernel.iostream.IOPubThread._setup_pipe_in = _no_pipe
runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
