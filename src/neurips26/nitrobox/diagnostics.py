"""Leak scanners used by the tests and the ``cleanup`` CLI: processes, mounts, state dirs."""

from __future__ import annotations

import os
import time


def support_problem() -> str | None:
    """Why sandboxes cannot run here (kernel/sysctl/pyseccomp), or ``None`` when they can."""
    try:
        from neurips26.nitrobox import runtime

        runtime.check_kernel(os.geteuid() != 0)
    except Exception as e:  # noqa: BLE001
        return str(e)
    try:
        import pyseccomp  # noqa: F401
    except ImportError:
        return "pyseccomp is not installed (pip install 'neurips26[nitrobox]')"
    return None


def pidns_of(pid: int) -> str:
    """The pid-namespace id (``pid:[inode]``) of a process."""
    return os.readlink(f"/proc/{pid}/ns/pid")


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
