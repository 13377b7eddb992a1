"""The per-client zygote: a tiny Python helper that forks sandboxes so a large client never does.

fork() from a 3 GiB trainer costs ~200 ms (MEASURED in the spec), so ``spawn_mode="zygote"`` (auto
above 256 MiB RSS) hands every fork to a small process started once with ``subprocess``. It loads
only ``_sys.py``, ``agent.py`` and ``child.py`` by file path (no package import), receives a spec and the control socket's fd
over a SOCK_SEQPACKET socket (``SCM_RIGHTS``), forks child A from its main thread and answers with
A's pid. It is private to one client, holds no state after the hand-off, reaps its children
(SIGCHLD ignored, so the kernel releases them at exit; it is a child subreaper, so a B whose A exited early is its child too) and dies with the client (``PR_SET_PDEATHSIG`` + a ``getppid`` check). It is
not a shared daemon: no registry, no images, no tenants.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

from neurips26.nitrobox import spawner

_HERE = Path(__file__).resolve().parent

# what the zygote loads (``here`` = this folder): the three files by path under ``_nbx_*`` names, never the
# package (with PYTHONPATH set, ``from neurips26.nitrobox import _sys`` would import all of nitrobox, and
# every tree forked from the zygote would carry its pages: 13.4 vs 7.9 MiB anonymous memory per agent)
LOAD = r'''
import importlib.util, os, pickle, signal, socket, struct, sys
def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
_sys = _load("_nbx_sys", os.path.join(here, "_sys.py"))
_agent = _load("_nbx_agent", os.path.join(here, "agent.py"))
child = _load("_nbx_child", os.path.join(here, "child.py"))
import resource, fcntl, marshal, selectors, struct as _st, time  # everything the children use, imported before any fork
'''

BOOT = r'''
import sys
here, parent, fd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
''' + LOAD + r'''
_sys.prctl(_sys.PR_SET_PDEATHSIG, signal.SIGKILL)
_sys.prctl(_sys.PR_SET_CHILD_SUBREAPER, 1)  # a B whose A exited early is reparented here and reaped
if os.getppid() != parent:
    os._exit(0)
# children are reaped by the kernel at their exit (SIGCHLD ignored): every A, and every B reparented
# here, is released without waiting for this process to be scheduled and run a handler (a delete
# waits for B's release: its pid and pid namespace go with it)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
sock = socket.socket(fileno=fd)
sock.send(b"Z")  # booted: the client may route spawns here without waiting
progs = {}
while True:
    try:
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
    except (ConnectionResetError, OSError):
        os._exit(0)
    if not msg:
        os._exit(0)
    d = pickle.loads(msg)
    bpf = d.pop("seccomp_bpf")
    if bpf and bpf not in progs:
        progs[bpf] = _sys.SeccompProgram(bpf)
    d["seccomp"] = progs.get(bpf)
    d["sock"] = fds[0]
    d["parent_pid"] = os.getpid()
    spec = child.ChildSpec(**d)
    try:
        pid = os.fork()
    except OSError as e:
        pid = -e.errno
    if pid == 0:
        try:
            child.run_a(spec)
        finally:
            os._exit(127)
    for f in fds:
        os.close(f)
    sock.send(struct.pack("q", pid))
'''


class Zygote:
    """Client side of the zygote protocol."""

    def __init__(self) -> None:
        self.pid_owner = os.getpid()
        self.lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours

        def start():  # from the long-lived spawner thread: PDEATHSIG follows the creating thread
            return subprocess.Popen([sys.executable, "-S", "-c", BOOT, str(_HERE), str(os.getpid()),
                                     str(theirs.fileno())], pass_fds=(theirs.fileno(),), close_fds=True,
                                    stdin=subprocess.DEVNULL)

        self.proc = spawner.get().call(start)
        theirs.close()
        self.booted = False  # its "Z" (sent once its imports are done) has been read

    def _await_boot(self, block: bool) -> bool:
        """Read the zygote's boot message (call under self.lock)."""
        if not self.booted:
            try:
                msg = self.sock.recv(8, 0 if block else socket.MSG_DONTWAIT)
            except BlockingIOError:
                return False
            if msg != b"Z":
                raise OSError("zygote died")
            self.booted = True
        return True

    def ready(self) -> bool:
        """Booted and alive (never blocks)."""
        if not self.alive():
            return False
        with self.lock:
            try:
                return self._await_boot(False)
            except OSError:
                return False

    def alive(self) -> bool:
        return self.proc.poll() is None and self.pid_owner == os.getpid()

    def spawn(self, spec) -> int:
        d = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
        prog = d.pop("seccomp")
        d["seccomp_bpf"] = prog.bpf if prog is not None else b""
        fds = [d.pop("sock")]
        d.pop("parent_pid")
        payload = pickle.dumps(d)
        with self.lock:
            self._await_boot(True)
            socket.send_fds(self.sock, [payload], fds)
            raw = self.sock.recv(8)
        if len(raw) != 8:
            raise OSError("zygote died")
        pid = struct.unpack("q", raw)[0]
        if pid < 0:
            raise OSError(-pid, f"zygote fork failed: {os.strerror(-pid)}")
        return pid

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()


_zygote: Zygote | None = None
_lock = threading.Lock()


def get() -> Zygote:
    """The process's zygote (started on first use, restarted if it died or after a fork)."""
    global _zygote
    with _lock:
        if _zygote is None or not _zygote.alive():
            _zygote = Zygote()
        return _zygote


def ready_or_start() -> bool:
    """Whether this process's zygote is up; if there is none, start one in the background (the
    caller forks directly meanwhile, so no create waits for the zygote's boot)."""
    z = get()
    return z.ready()


def shutdown() -> None:
    global _zygote
    with _lock:
        if _zygote is not None and _zygote.pid_owner == os.getpid():
            _zygote.close()
        _zygote = None
