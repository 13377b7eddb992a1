"""The reaper: trash dirs (old uppers, deleted sandboxes, unused layers) and dying trees are
handled in the background so reset/delete return in O(1) of the data size."""

from __future__ import annotations

import atexit
import os
import queue
import shutil
import stat
import threading
import uuid
from pathlib import Path


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


_MAX_DEPTH = 64  # open directory fds held at once; a deeper dir is moved up to the top and done there


def _entries(fd: int) -> list[tuple[str, bool]]:
    """(name, is a directory, not following links) of every entry of the open dir ``fd``."""
    with os.scandir(fd) as it:
        return [(e.name, e.is_dir(follow_symlinks=False)) for e in it]


def _unlink_under(root: int) -> bool:
    """Unlink everything in the open dir ``root`` (dirs depth first, by fd: no path is ever resolved,
    a symlink is unlinked, never followed); False if anything could not be removed.

    Iterative, with at most ``_MAX_DEPTH`` dir fds open: a sandbox can build a tree thousands of levels
    deep, which recursion (one frame and one fd per level) cannot take; a dir at that depth is renamed
    into ``root`` under a fresh name and emptied from there."""
    ok = True
    stack = [(root, _entries(root), None)]  # (fd, entries left, name in the parent dir)
    try:
        while stack:
            fd, left, _ = stack[-1]
            if not left:
                _, _, name = stack.pop()
                if name is not None:
                    os.close(fd)
                    try:
                        os.rmdir(name, dir_fd=stack[-1][0])
                    except OSError:
                        ok = False
                continue
            name, is_dir = left.pop()
            try:
                if not is_dir:
                    os.unlink(name, dir_fd=fd)
                elif len(stack) >= _MAX_DEPTH:
                    top = f".nbx-deep-{uuid.uuid4().hex}"
                    os.rename(name, top, src_dir_fd=fd, dst_dir_fd=root)
                    stack[0][1].append((top, True))
                else:
                    sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    try:
                        stack.append((sub, _entries(sub), name))
                    except OSError:
                        os.close(sub)
                        raise
            except OSError:
                ok = False
    finally:
        for fd, _, name in stack[1:]:
            os.close(fd)
    return ok


def force_rmtree(path: str) -> None:
    """Unlink ``path`` whatever its modes. Fast path: one fd-based pass (``_unlink_under``: scandir and
    unlinkat, 0.92 vs 1.15 ms thread-CPU for a deleted sandbox's 106 entries than ``shutil.rmtree``,
    which joins a path string and stats each entry); only if that failed somewhere (mode-000 dirs
    such as overlay's work/work, rootless), the chmod pass and a retry with repair."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return
    except OSError:  # not a directory (a file or a link: unlinked), or one we may not open (repaired)
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                os.unlink(path)
                return
        except FileNotFoundError:
            return
        except OSError:
            pass
        _force_rmtree(path)
        return
    try:
        ok = _unlink_under(fd)
    except OSError:
        ok = False
    finally:
        os.close(fd)
    if ok:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            pass
    if os.path.lexists(path):
        _force_rmtree(path)


def _force_rmtree(path: str) -> None:
    def onerror(func, p, exc):  # overlay's work/work is mode 000: chmod and retry
        try:
            parent = os.path.dirname(p)
            os.chmod(parent, stat.S_IRWXU)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, stat.S_IRWXU)
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
        except OSError:
            pass

    try:
        for dirpath, dirnames, _ in os.walk(path):  # (RecursionError: os.walk recurses per level in 3.11)
            for d in dirnames:
                full = os.path.join(dirpath, d)
                try:
                    if not os.path.islink(full) and (os.lstat(full).st_mode & 0o700) != 0o700:
                        os.chmod(full, 0o700)
                except OSError:
                    pass
    except (OSError, RecursionError):
        pass
    try:
        shutil.rmtree(path, onerror=onerror)
    except RecursionError:  # Python 3.11's rmtree recurses per level; the fd pass flattened what it could
        pass


class Job(threading.Event):
    """One queued reaper job, one record of its whole life: ``state`` is ``"queued"``, then either
    ``"running"`` (the reaper began it) or ``"taken"`` (a caller ran it on its own thread, so the
    reaper skips it); the Event itself is set once it has run, by whichever thread ran it."""

    def __init__(self, work) -> None:
        super().__init__()
        self.work = work  # a path to unlink or a callable
        self.state = "queued"
        self._lock = threading.Lock()

    def _claim(self, state: str) -> bool:
        """Move queued -> ``state``; False if another thread began it first."""
        with self._lock:
            if self.state != "queued":
                return False
            self.state = state
            return True

    def _run(self) -> None:
        try:
            if callable(self.work):
                self.work()
            else:
                force_rmtree(self.work)
        finally:
            self.set()

    def run_or_wait(self, timeout: float | None = None) -> bool:
        """Run the job here if the reaper has not begun it (it is queued behind other jobs: no wait
        behind them), else wait until the reaper has run it. True once it has run."""
        if self._claim("taken"):
            self._run()
            return True
        return self.wait(timeout)


class Reaper:
    """Background unlinker of trash dirs; ``submit`` returns the ``Job``, an Event set when it is done."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.q: queue.SimpleQueue = queue.SimpleQueue()
        self.pending = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._loop, name="nitrobox-reaper", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            job = self.q.get()
            try:
                if job._claim("running"):  # a job a caller took ran (or runs) on that caller's thread
                    job._run()
            except Exception:  # noqa: BLE001 - a failed unlink must not stop the reaper
                pass
            with self.lock:
                self.pending -= 1

    def submit(self, work) -> Job:
        """Queue a path to unlink or a callable to run; the returned Job is set when it is done."""
        job = Job(work)
        with self.lock:
            self.pending += 1
        self.q.put(job)
        return job


_reaper: Reaper | None = None
_reaper_lock = threading.Lock()


def _drain_at_exit(timeout: float = 10.0) -> None:
    """At interpreter exit, give the daemon reaper thread time to finish (no trash left behind)."""
    import time as _time

    r = _reaper
    if r is None or r.pid != os.getpid():
        return
    deadline = _time.monotonic() + timeout
    while r.pending > 0 and _time.monotonic() < deadline:
        _time.sleep(0.005)


atexit.register(_drain_at_exit)


def get() -> Reaper:
    global _reaper
    with _reaper_lock:
        if _reaper is None or _reaper.pid != os.getpid() or not _reaper.thread.is_alive():
            _reaper = Reaper()
        return _reaper


def trash(root: Path, path: str | Path, wait: bool = False) -> Job | None:
    """Rename ``path`` into ``root/trash`` (O(1)) and let the reaper unlink it."""
    if not os.path.lexists(path):
        return None
    dest = root / "trash" / f"{uuid.uuid4().hex}"
    try:
        os.rename(path, dest)
    except OSError:
        dest = Path(path)
    ev = get().submit(str(dest))
    if wait:
        ev.wait()
    return ev
