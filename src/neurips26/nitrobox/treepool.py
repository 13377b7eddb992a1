"""A process-wide pool of clean standby trees.

A sandbox keeps one pre-spawned standby tree for its next reset (``sandbox.py``). When the sandbox
is deleted before that reset, its standby was never used: no command of the sandbox ever ran in it,
its upper is the empty one it was spawned over (plus the working dir), and it sees nothing the live
tree did (its own namespaces, its own upper). Instead of tearing it down with the sandbox, ``delete``
hands it here; the next ``create`` (or a ``reset`` whose own standby is not up yet) with the same tree
spec takes it instead of spawning one.

What a delete frees is then exactly the sandbox's own: its live tree (processes, mount/pid/ipc/net
namespaces), its upper and state dir, its cgroup. A pooled tree stays allocated: the pool is capped
(``max_trees()``, ``$NEURIPS26_NBX_POOL`` read at each use; 0 turns it off), counted in the bench's idle-memory row, killed
and unlinked by ``drain`` (also at interpreter exit) and, after a crash, by the next client's dead-owner
cleanup (its dir name carries the owner's pid and start time).

A tree is only ever taken for a spec equal to the one it was spawned with (image and lowers, env,
hostname, working dir, network, mounts, devices, shm size, seccomp program, spawn mode, state root):
``tree_key``. Trees over snapshot layers are not pooled (their layers are reference-counted by the
sandbox that is being deleted).
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import uuid

from neurips26.nitrobox import reaper
from neurips26.nitrobox.procfs import proc_start_time

POOL_ENV = "NEURIPS26_NBX_POOL"
DEFAULT_MAX_TREES = 8


def max_trees(strict: bool = True) -> int:
    """The pool's cap: ``$NEURIPS26_NBX_POOL`` (default 8; 0 turns the pool off), read at each use, so
    a change of the variable after the first sandbox takes effect at the next put. A malformed value
    raises (``strict``: at create) or turns the pool off (teardown paths, which must never fail)."""
    v = os.environ.get(POOL_ENV, "").strip()
    if not v:
        return DEFAULT_MAX_TREES
    try:
        return int(v)
    except ValueError:
        if not strict:
            return 0
        raise ValueError(f"{POOL_ENV}={v!r}: expected a whole number (0 turns the tree pool off)") from None


@functools.lru_cache(maxsize=256)
def _real(state_root: str) -> str:
    return os.path.realpath(state_root)


_SKIP = ("sock", "parent_pid", "merged", "overlay_cwd", "trace", "disk_mkdirs")


def tree_key(spec, state_root: str, spawn_mode: str) -> tuple:
    """What makes two standby trees interchangeable: every field of the child spec except the
    per-tree ones (control socket, mount point, the dir the overlay's relative paths start from)."""
    from dataclasses import fields

    items = []
    for f in fields(spec):
        if f.name in _SKIP:
            continue
        v = getattr(spec, f.name)
        if f.name == "seccomp":
            v = None if v is None else v.bpf
        elif f.name == "env":
            v = tuple(sorted(v.items()))
        elif f.name == "mounts":
            v = tuple(tuple(m[:3]) for m in v)  # the 4th item is a cow dir (cow trees are never pooled)
        elif isinstance(v, list):
            v = tuple(tuple(x) if isinstance(x, list) else x for x in v)
        items.append((f.name, v))
    return (_real(state_root), spawn_mode, os.geteuid(), tuple(items))


def pool_root(state_root) -> str:
    """``<state root>/pool``: where every standby tree's dir lives (pooled or not yet)."""
    return os.path.join(state_root, "pool")


def pool_dir_owner(name: str) -> tuple[int, int] | None:
    """(pid, start time) of the process that pooled the tree ``pool/<name>``, from its name."""
    try:
        pid, start, _ = name.split("-", 2)
        return int(pid), int(start)
    except ValueError:
        return None


class TreePool:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.items: list = []          # [(key, proc, dir)], oldest first
        self._start = proc_start_time(self.pid)
        self._made: set = set()        # state roots whose pool/ dir exists
        self.puts = self.takes = self.evictions = 0
        self.expected = 0              # standby spawns of deleted sandboxes that will end here
        self.cond = threading.Condition(self.lock)

    def __len__(self) -> int:
        return len(self.items)

    def new_dir(self, root: str) -> str:
        """The path (not yet created) of a new standby tree's dir, ``<root>/pool/<pid>-<start>-<uuid>``:
        every standby is spawned there, so pooling it moves nothing."""
        pdir = pool_root(root)
        if root not in self._made:
            os.makedirs(pdir, exist_ok=True)
            self._made.add(root)
        return os.path.join(pdir, f"{self.pid}-{self._start}-{uuid.uuid4().hex}")

    def expect(self, n: int) -> None:
        """A deleted sandbox's standby spawn will end here (+1) / has ended (-1)."""
        with self.cond:
            self.expected += n
            self.cond.notify_all()

    def put(self, key: tuple, proc, tree_dir: str) -> bool:
        """Add a clean, alive standby tree (its dir holds upper/work/merged); False if the pool is off
        (the caller then tears it down as before)."""
        cap = max_trees(strict=False)
        if cap <= 0 or os.getpid() != self.pid or tree_dir is None:
            return False
        evict = []
        with self.lock:
            self.items.append((key, proc, tree_dir))
            self.puts += 1
            while len(self.items) > cap:
                evict.append(self.items.pop(0))
                self.evictions += 1
        for _, p, d in evict:
            discard(p, d)
        return True

    def take(self, key: tuple):
        """The newest pooled tree with this key, as (proc, dir), or None. A tree that died meanwhile
        or whose dir is gone (its state root was removed) is discarded."""
        if os.getpid() != self.pid:
            return None
        while True:
            with self.lock:
                i = next((i for i in range(len(self.items) - 1, -1, -1) if self.items[i][0] == key), None)
                if i is None:
                    return None
                _, proc, d = self.items.pop(i)
            if proc.alive() and os.path.isdir(d):
                self.takes += 1
                return proc, d
            discard(proc, d)

    def drain(self, state_root: str | None = None, wait: bool = True) -> int:
        """Kill and unlink the pooled trees (of one state root, or all), after the standby spawns of
        deleted sandboxes still on their way here have ended; returns how many."""
        real = None if state_root is None else _real(state_root)
        with self.cond:
            self.cond.wait_for(lambda: self.expected <= 0, timeout=30)
            out, keep = [], []
            for it in self.items:
                (out if real is None or it[0][0] == real else keep).append(it)
            self.items = keep
        for _, p, d in out:
            discard(p, d, wait=wait)
        return len(out)


def discard(proc, d: str | None, wait: bool = False) -> None:
    """Kill a tree (a standby, pooled or not; ``None``: none) and unlink its dir (``None`` or gone:
    none), in the background unless ``wait``."""
    def job() -> None:
        if proc is not None:
            proc.kill()
        if d is not None and os.path.lexists(d):
            reaper.force_rmtree(d)

    if wait:
        job()
    else:
        reaper.get().submit(job)


def remove_dir(d: str) -> None:
    """The dir of a taken tree once its upper/work moved out: only the empty mount point is left."""
    try:
        os.rmdir(d + "/merged")
        os.rmdir(d)
    except OSError:
        reaper.get().submit(d)


_pool: TreePool | None = None
_pool_lock = threading.Lock()


def get() -> TreePool:
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = TreePool()
        return _pool


def drain(state_root: str | None = None) -> int:
    """Kill and unlink the trees pooled by this process (of ``state_root``, or all)."""
    p = _pool
    if p is None or p.pid != os.getpid():
        return 0
    return p.drain(state_root)


def _drain_at_exit() -> None:
    try:
        drain()
    except Exception:  # noqa: BLE001 - interpreter shutdown
        pass


atexit.register(_drain_at_exit)
