"""Small /proc and mountinfo helpers of the client side (no sandbox state)."""

from __future__ import annotations

import os
import select
import signal
import time


def wait_fd(fd: int, timeout: float) -> bool:
    """Until ``fd`` is readable (a pidfd: its process has exited) or ``timeout`` seconds; one
    poll(2) call (no epoll instance per wait: this is on the delete path)."""
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(max(0, int(timeout * 1000 + 0.999))))  # PEP 475: poll retries on EINTR itself


def wait_released(pidfd: int, timeout: float) -> bool:
    """Until the exited process of ``pidfd`` is reaped by its parent (a zombie still holds its pid
    and its pid namespace): signal 0 succeeds on a zombie and fails with ESRCH once it is released."""
    end = time.monotonic() + timeout
    pause = 20e-6
    while True:
        try:
            signal.pidfd_send_signal(pidfd, 0)
        except OSError:  # ESRCH (ProcessLookupError): released
            return True
        if time.monotonic() > end:
            return False
        time.sleep(pause)
        pause = min(2 * pause, 1e-3)


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def subid(path: str, ident: int) -> tuple[int, int] | None:
    import pwd

    try:
        names = {str(ident), pwd.getpwuid(ident).pw_name}
    except KeyError:
        names = {str(ident)}
    try:
        for line in open(path):
            parts = line.strip().split(":")
            if len(parts) == 3 and parts[0] in names:
                return int(parts[1]), int(parts[2])
    except OSError:
        return None
    return None


def descendants(pid: int) -> list[int]:
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                continue
            out.extend(kids)
            stack.extend(kids)
    return out


def fs_type(path: str) -> str:
    """The filesystem type of the mount holding ``path`` (longest mount-point prefix in mountinfo)."""
    best, kind = "", "unknown"
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                mnt = left.split()[4]
                if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, kind = mnt, right.split()[0]
    except OSError:
        pass
    return kind


def proc_start_time(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return 0

