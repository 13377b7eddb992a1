"""Process-wide helpers: state root, kernel probes, the spawner thread, the reaper, layer refcounts.

Spawner: PR_SET_PDEATHSIG fires when the *thread* that forked exits, not the process (MEASURED in
the spec), so in direct mode every fork goes through one long-lived spawner thread per process.
Reaper: trash dirs (old uppers, deleted sandboxes, unused layers) are unlinked in the background so
reset/delete return in O(1) of the data size.
"""

from __future__ import annotations

import atexit
import os
import queue
import shutil
import stat
import threading
import uuid
from pathlib import Path

from neurips26.nitrobox.errors import KernelSupportError

STATE_ENV = "NEURIPS26_NBX_STATE"


def default_state_root() -> str:
    """``$NEURIPS26_NBX_STATE`` or ``/dev/shm/neurips26-nbx-<uid>`` (tmpfs: unlink is ~free), else $TMPDIR."""
    env = os.environ.get(STATE_ENV)
    if env:
        return env
    uid = os.geteuid()
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
        return f"/dev/shm/neurips26-nbx-{uid}"
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"neurips26-nbx-{uid}")


def ensure_state_root(root: str) -> Path:
    p = Path(root)
    for sub in ("sandboxes", "layers", "trash", "images"):
        (p / sub).mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(p, 0o711)
    except OSError:
        pass
    return p


# ----------------------------------------------------------------------------------- kernel probes
_kernel_ok: dict[bool, str | None] = {}


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def check_kernel(rootless: bool) -> None:
    """Raise ``KernelSupportError`` naming the sysctl/kernel version that forbids sandboxes."""
    if rootless in _kernel_ok:
        if _kernel_ok[rootless]:
            raise KernelSupportError(_kernel_ok[rootless])
        return
    msg = None
    n = _read_int("/proc/sys/user/max_user_namespaces")
    if n is not None and n <= 0:
        msg = "user namespaces are disabled: sysctl user.max_user_namespaces = 0"
    elif rootless and _read_int("/proc/sys/kernel/unprivileged_userns_clone") == 0:
        msg = "unprivileged user namespaces are disabled: sysctl kernel.unprivileged_userns_clone = 0"
    elif rootless and _read_int("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1:
        msg = ("unprivileged user namespaces are restricted by AppArmor: "
               "sysctl kernel.apparmor_restrict_unprivileged_userns = 1")
    else:
        rel = os.uname().release
        try:
            major, minor = (int(x) for x in rel.split(".")[:2])
        except ValueError:
            major, minor = 99, 0
        if (major, minor) < (5, 11):
            msg = f"overlayfs inside a user namespace needs Linux >= 5.11, this kernel is {rel}"
        else:
            try:
                fs = open("/proc/filesystems").read()
            except OSError:
                fs = "overlay"
            if "overlay" not in fs:
                msg = "the overlay filesystem is not available (modprobe overlay)"
    _kernel_ok[rootless] = msg
    if msg:
        raise KernelSupportError(msg)


# ----------------------------------------------------------------------------------- spawner thread
class _Box:
    __slots__ = ("ev", "result", "exc")

    def __init__(self) -> None:
        self.ev = threading.Event()
        self.result = None
        self.exc = None


class _Call:
    __slots__ = ("fn",)

    def __init__(self, fn) -> None:
        self.fn = fn


def _fork_a(spec) -> int:
    """Fork; the child becomes the sandbox's process A and never returns into the caller's code."""
    from neurips26.nitrobox import child

    pid = os.fork()
    if pid == 0:
        try:
            child.run_a(spec)
        finally:
            os._exit(127)
    return pid


class Spawner:
    """One long-lived thread per process that performs every ``fork`` (PDEATHSIG is per thread)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.q: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="nitrobox-spawner", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            spec, box = self.q.get()
            if isinstance(spec, _Call):
                try:
                    box.result = spec.fn()
                except BaseException as e:  # noqa: BLE001
                    box.exc = e
                box.ev.set()
                continue
            try:
                box.result = _fork_a(spec)
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                box.exc = e
            box.ev.set()

    def call(self, fn):
        """Run ``fn()`` in the spawner thread (e.g. start the zygote: PDEATHSIG follows this thread)."""
        return self._hand_off(_Call(fn))

    def fork(self, spec) -> int:
        if threading.current_thread() is threading.main_thread():
            # the main OS thread lives until the interpreter exits, so PDEATHSIG tied to it is as
            # good as the spawner thread's, without a thread hand-off
            return _fork_a(spec)
        return self._hand_off(spec)

    def _hand_off(self, item):
        """Run ``item`` (a spec to fork, or a ``_Call``) in the spawner thread; return or raise its outcome."""
        box = _Box()
        self.q.put((item, box))
        box.ev.wait()
        if box.exc is not None:
            raise box.exc
        return box.result


_spawner: Spawner | None = None
_spawner_lock = threading.Lock()


def spawner() -> Spawner:
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner.pid != os.getpid() or not _spawner.thread.is_alive():
            _spawner = Spawner()
        return _spawner


# ----------------------------------------------------------------------------------- reaper
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
        for dirpath, dirnames, _ in os.walk(path):
            for d in dirnames:
                full = os.path.join(dirpath, d)
                try:
                    if not os.path.islink(full) and (os.lstat(full).st_mode & 0o700) != 0o700:
                        os.chmod(full, 0o700)
                except OSError:
                    pass
    except OSError:
        pass
    shutil.rmtree(path, onerror=onerror)


class Reaper:
    """Background unlinker of trash dirs; ``submit`` returns an Event set when the dir is gone."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.q: queue.SimpleQueue = queue.SimpleQueue()
        self.pending = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._loop, name="nitrobox-reaper", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            job, ev = self.q.get()
            try:
                if callable(job):
                    job()
                else:
                    _force_rmtree(job)
            except Exception:  # noqa: BLE001 - a failed unlink must not stop the reaper
                pass
            with self.lock:
                self.pending -= 1
            ev.set()

    def submit(self, job) -> threading.Event:
        """Queue a path to unlink or a callable to run; the Event is set when it is done."""
        ev = threading.Event()
        with self.lock:
            self.pending += 1
        self.q.put((job, ev))
        return ev


_reaper: Reaper | None = None


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


def reaper() -> Reaper:
    global _reaper
    with _spawner_lock:
        if _reaper is None or _reaper.pid != os.getpid() or not _reaper.thread.is_alive():
            _reaper = Reaper()
        return _reaper


def trash(root: Path, path: str | Path, wait: bool = False) -> threading.Event | None:
    """Rename ``path`` into ``root/trash`` (O(1)) and let the reaper unlink it."""
    if not os.path.lexists(path):
        return None
    dest = root / "trash" / f"{uuid.uuid4().hex}"
    try:
        os.rename(path, dest)
    except OSError:
        dest = Path(path)
    ev = reaper().submit(str(dest))
    if wait:
        ev.wait()
    return ev


# ----------------------------------------------------------------------------------- layer refcounts
class LayerRefs:
    """Reference counts of frozen layer dirs; a layer is trashed when no sandbox/snapshot uses it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.roots: dict[str, Path] = {}

    def acquire(self, layers, root: Path) -> None:
        with self.lock:
            for lay in layers:
                self.counts[lay] = self.counts.get(lay, 0) + 1
                self.roots[lay] = root

    def release(self, layers) -> None:
        dead = []
        with self.lock:
            for lay in layers:
                c = self.counts.get(lay, 0) - 1
                if c <= 0:
                    self.counts.pop(lay, None)
                    dead.append((lay, self.roots.pop(lay, None)))
                else:
                    self.counts[lay] = c
        for lay, root in dead:
            if root is not None:
                trash(root, lay)

    def count(self, layer: str) -> int:
        with self.lock:
            return self.counts.get(layer, 0)


layer_refs = LayerRefs()
