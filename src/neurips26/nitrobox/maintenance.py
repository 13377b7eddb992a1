"""``cleanup``: remove state dirs (and cgroups) whose owner process is dead (crashed clients)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from neurips26.nitrobox import limits as _limits, reaper, runtime, treepool


def _owner_alive(owner_file: Path) -> bool:
    try:
        pid_s, start_s = owner_file.read_text().split()
        pid, start = int(pid_s), int(start_s)
    except (OSError, ValueError):
        return False
    return _alive(pid, start)


def _alive(pid: int, start: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19]) == start
    except (OSError, ValueError, IndexError):
        return False


def _kill_processes_under(sdir: str) -> int:
    """SIGKILL processes whose root or cwd lies in ``sdir`` (CRIU-restored trees have no PDEATHSIG)."""
    n = 0
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            ns_root = os.readlink(f"/proc/{d}/root")
        except OSError:
            continue
        if ns_root.startswith(sdir + "/"):
            try:
                os.kill(int(d), signal.SIGKILL)
                n += 1
            except OSError:
                pass
    return n


def _kill_pasta(pidfile: Path) -> None:
    """network='nat' through pasta: its pid file names it; SIGKILL it if that pid is still a pasta."""
    try:
        pid = int(pidfile.read_text().split()[0])
        with open(f"/proc/{pid}/comm") as f:
            comm = f.read().strip()
    except (OSError, ValueError, IndexError):
        return
    if comm.startswith(("pasta", "passt")):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


CREATE_GRACE_S = 60.0  # a state dir without an owner file this young is being created, not leaked


def cleanup(state_root: str | None = None, dry_run: bool = False, trash: bool = True) -> list[str]:
    """Remove sandboxes whose owner pid is dead, their cgroups and (``trash``) the trash; return what went."""
    root = Path(state_root or runtime.default_state_root())
    removed: list[str] = []
    sboxes = root / "sandboxes"
    if sboxes.is_dir():
        for sdir in sorted(sboxes.iterdir()):
            if _owner_alive(sdir / "owner"):
                continue
            try:
                young = not (sdir / "owner").exists() and time.time() - sdir.stat().st_mtime < CREATE_GRACE_S
            except OSError:
                continue  # gone meanwhile
            if young:
                continue
            removed.append(str(sdir))
            if dry_run:
                continue
            _kill_processes_under(str(sdir))
            _kill_pasta(sdir / "pasta.pid")
            try:
                owner_pid = (sdir / "owner").read_text().split()[0]
            except (OSError, IndexError):
                owner_pid = None
            be = _limits.detect()
            cgs = []
            for base in be.bases.values():
                if owner_pid is not None:
                    cgs.append(os.path.join(base, f"{sdir.name}-{owner_pid}"))
            _limits.remove_cgroups([c for c in cgs if os.path.isdir(c)])
            reaper.force_rmtree(str(sdir))
    pool = Path(treepool.pool_root(root))  # pooled standby trees (treepool.py): the owner is in the dir's name; the
    if pool.is_dir():     # trees themselves died with it (PDEATHSIG)
        for d in sorted(pool.iterdir()):
            owner = treepool.pool_dir_owner(d.name)
            if owner is not None and _alive(*owner):
                continue
            removed.append(str(d))
            if not dry_run:
                reaper.force_rmtree(str(d))
    if not dry_run:
        _limits.remove_empty_bases()
    tdir = root / "trash"
    if trash and tdir.is_dir() and not dry_run:
        for t in tdir.iterdir():
            removed.append(str(t))
            reaper.force_rmtree(str(t))
    return removed


_reaped: set = set()
_reaped_lock = threading.Lock()


def reap_dead_owners(state_root: str) -> "threading.Event | None":
    """Once per process and state root: clean up in the background what crashed clients left.

    Called by the first ``Sandbox`` of a process; the work runs on the reaper thread, so create does
    not wait for it. Returns the reaper's Event (``None`` if this root was already handled).
    """
    key = (os.getpid(), os.path.realpath(state_root))
    with _reaped_lock:
        if key in _reaped:
            return None
        _reaped.add(key)
    return reaper.get().submit(lambda: cleanup(state_root, trash=False))
