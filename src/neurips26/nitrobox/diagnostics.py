"""Leak scanners used by the tests and the ``cleanup`` CLI: processes, mounts, state dirs."""

from __future__ import annotations

import os
import time


_problem: list = []


# Isolation probes for a tree that must look freshly created (a reset's standby, a pooled tree): PLANT_STATE
# leaves state everywhere a sandbox can keep it (files in /workspace, /tmp, /etc, /root, /dev/shm, a removed
# file, a SysV shm segment, a background process, a FIFO); READ_STATE prints what a fresh tree shows there, so
# ``sb.exec(READ_STATE).output`` of a tree that saw PLANT_STATE elsewhere must equal a fresh sandbox's.
PLANT_STATE = ("echo a > /workspace/a; mkdir -p /workspace/d/e; echo t > /tmp/t; echo e > /etc/planted; "
               "echo r > /root/r; echo s > /dev/shm/s; rm -f /etc/hostname; ipcmk -M 4096 >/dev/null; "
               "(sleep 300 &) ; mkfifo /workspace/fifo")
READ_STATE = ("ls -A /workspace /tmp /dev/shm /root; test -e /etc/planted && echo planted; "
              "cat /etc/hostname; ipcs -m | grep -c '^0x'; hostname; ps -eo comm= | grep -c sleep")


def support_problem() -> str | None:
    """Why sandboxes cannot run here (kernel, sysctl, pyseccomp, or a real probe sandbox failing,
    e.g. inside an unprivileged container), or ``None`` when they can. Cached per process."""
    if _problem:
        return _problem[0]
    _problem.append(_probe())
    return _problem[0]


def _probe() -> str | None:
    try:
        from neurips26.nitrobox import kernel

        kernel.check_kernel(os.geteuid() != 0)
    except Exception as e:  # noqa: BLE001
        return str(e)
    try:
        import pyseccomp  # noqa: F401
    except ImportError:
        return "pyseccomp is not installed (pip install 'neurips26[nitrobox]')"
    import shutil

    root = f"/dev/shm/neurips26-nbx-probe-{os.getpid()}" if os.path.isdir("/dev/shm") else None
    try:
        from neurips26.nitrobox.sandbox import Sandbox

        sb = Sandbox(state_root=root, spawn_mode="direct") if root else Sandbox(spawn_mode="direct")
        try:
            r = sb.exec("echo ok", timeout=30)
            if r.output != "ok\n":
                return f"probe sandbox answered {r.output!r}"
        finally:
            sb.delete(wait=True)
    except Exception as e:  # noqa: BLE001
        return f"probe sandbox failed: {type(e).__name__}: {e}"
    finally:
        if root:
            shutil.rmtree(root, ignore_errors=True)
    return None


class PidNamespace(str):
    """``pid:[inode]`` of a pid namespace, pinned by an open nsfs fd while this object lives.

    The kernel recycles namespace inode numbers (lowest free id) as soon as a namespace is freed, so
    a bare ``"pid:[N]"`` string taken before ``reset``/``delete`` may later name the *new* tree's
    namespace, and a scan for leftovers of the old tree would find the new shell. Holding a
    reference to the namespace (not to any process in it) keeps its number reserved: compare as a
    plain ``str``; ``close()`` (or garbage collection) releases it.
    """

    _fd: int | None

    def __new__(cls, pid: int) -> "PidNamespace":
        fd = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        try:
            ino = os.fstat(fd).st_ino  # the ns we hold, even if ``pid`` has died since open
        except BaseException:
            os.close(fd)
            raise
        self = super().__new__(cls, f"pid:[{ino}]")
        self._fd = fd
        return self

    def __reduce__(self):  # copies/pickles are plain strings (they do not pin)
        return (str, (str(self),))

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def pidns_of(pid: int) -> PidNamespace:
    """The pid-namespace id (``pid:[inode]``) of a process, pinned (see ``PidNamespace``) so that
    ``procs_in_pidns`` never mistakes a later namespace that got the same inode number for it."""
    return PidNamespace(pid)


def procs_in_pidns(ns: str) -> list[int]:
    """Host pids of every live process in the pid namespace ``ns``."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.readlink(f"/proc/{d}/ns/pid") == ns:
                    out.append(int(d))
            except OSError:
                pass
    return out


def mounts_referencing(path: str) -> list[str]:
    """Lines of this process's mountinfo that mention ``path``."""
    with open("/proc/self/mountinfo") as f:
        return [line for line in f if str(path) in line]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def wait_until(pred, timeout: float = 5.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return bool(pred())
