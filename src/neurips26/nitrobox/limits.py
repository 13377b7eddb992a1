"""Resource limits with auto-detected backends (spec "Limits backends").

1. cgroup v2 with a writable delegated subtree: ``memory.max``, ``memory.swap.max=0``, ``pids.max``,
   ``cpu.max``; one leaf cgroup per sandbox.
2. cgroup v1, root only: ``memory.limit_in_bytes``, ``pids.max``, ``cpu.cfs_quota_us`` under the
   caller's own v1 path (``<ctrl>/<own path>/neurips26-nbx/<sandbox id>``).
3. rlimits set in the sandbox init: RLIMIT_AS (memory), RLIMIT_NPROC (only when sandbox root is
   not host uid 0: the kernel exempts INIT_USER).
Disk is always a per-sandbox tmpfs (``size=``) mounted inside the sandbox's namespaces; wall time is
the exec ``timeout`` plus the ``max_lifetime`` watchdog.
"""

from __future__ import annotations

import atexit
import errno
import os
import resource
import threading
import time
from dataclasses import dataclass, field

CG_ROOT = "/sys/fs/cgroup"
CG_DIRNAME = "neurips26-nbx"


def _own_cgroups() -> dict[str, str]:
    """controller -> own path from /proc/self/cgroup (v2 under key '')."""
    out = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                for c in ctrls.split(",") if ctrls else [""]:
                    out[c] = path
    except OSError:
        pass
    return out


@dataclass
class LimitsBackend:
    """What this process can enforce: ``kind`` in {'cgroup2','cgroup1','rlimit'} and per-limit backend."""

    kind: str
    bases: dict = field(default_factory=dict)   # controller -> parent dir of the per-sandbox cgroups
    enforced: dict = field(default_factory=dict)  # limit name -> backend label

    def create_cgroup(self, sid: str, limits: dict) -> list[str]:
        """Make the per-sandbox cgroup(s), write the limits; return the cgroup dirs."""
        dirs: list[str] = []
        if self.kind not in ("cgroup1", "cgroup2"):
            return dirs
        try:
            if self.kind == "cgroup2":
                d = os.path.join(self.bases[""], sid)
                os.mkdir(d)
                dirs.append(d)
                if "memory" in limits:
                    _write(d, "memory.max", limits["memory"])
                    if os.path.exists(os.path.join(d, "memory.swap.max")):
                        _write(d, "memory.swap.max", 0)
                if "pids" in limits:
                    _write(d, "pids.max", limits["pids"])
                if "cpu" in limits:
                    _write(d, "cpu.max", f"{int(limits['cpu'] * 100000)} 100000")
            else:
                need = {"memory": "memory" in limits, "pids": "pids" in limits, "cpu": "cpu" in limits}
                for ctrl, wanted in need.items():
                    if not wanted:
                        continue
                    parent = self.bases[ctrl]
                    d = os.path.join(parent, sid)
                    for _attempt in range(3):  # another process may rmdir the empty parent at exit
                        os.makedirs(parent, exist_ok=True)
                        try:
                            os.mkdir(d)
                            break
                        except FileNotFoundError:
                            continue
                    dirs.append(d)
                    if ctrl == "memory":
                        _write(d, "memory.limit_in_bytes", limits["memory"])
                        if os.path.exists(os.path.join(d, "memory.memsw.limit_in_bytes")):
                            _write(d, "memory.memsw.limit_in_bytes", limits["memory"])
                    elif ctrl == "pids":
                        _write(d, "pids.max", limits["pids"])
                    else:
                        _write(d, "cpu.cfs_period_us", 100000)
                        _write(d, "cpu.cfs_quota_us", int(limits["cpu"] * 100000))
        except BaseException:
            remove_cgroups(dirs)
            raise
        return dirs


def _write(d: str, name: str, value) -> None:
    with open(os.path.join(d, name), "w") as f:
        f.write(str(value))


def remove_cgroups(dirs: list[str], timeout: float = 2.0) -> None:
    """rmdir each cgroup, retrying briefly while the kernel finishes tearing tasks down."""
    for d in dirs:
        deadline = time.monotonic() + timeout
        while True:
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() > deadline:
                    break
                kill = os.path.join(d, "cgroup.kill")
                if os.path.exists(kill):
                    try:
                        _write(d, "cgroup.kill", 1)
                    except OSError:
                        pass
                time.sleep(0.005)


def remove_empty_bases() -> None:
    """rmdir the ``neurips26-nbx`` parent cgroups if no sandbox uses them (EBUSY otherwise)."""
    for be in list(_detected.values()):
        for base in be.bases.values():
            try:
                os.rmdir(base)
            except OSError:
                pass


atexit.register(remove_empty_bases)

_detected: dict[int, LimitsBackend] = {}
_lock = threading.Lock()


def detect(force: str | None = None) -> LimitsBackend:
    """Probe once per euid which backend works; ``force`` ('rlimit') skips cgroups (tests)."""
    euid = os.geteuid()
    with _lock:
        key = euid if force is None else hash((euid, force))
        if key in _detected:
            return _detected[key]
        be = _probe(force)
        _detected[key] = be
        return be


def _probe(force: str | None) -> LimitsBackend:
    own = _own_cgroups()
    root = os.geteuid() == 0
    if force != "rlimit":
        # cgroup v2: pure unified hierarchy, own cgroup with the controllers delegated to children
        if os.path.exists(os.path.join(CG_ROOT, "cgroup.controllers")) and "" in own:
            base_own = os.path.join(CG_ROOT, own[""].lstrip("/"))
            try:
                ctrls = open(os.path.join(base_own, "cgroup.subtree_control")).read().split()
            except OSError:
                ctrls = []
            if "memory" in ctrls and "pids" in ctrls and os.access(base_own, os.W_OK):
                base = os.path.join(base_own, CG_DIRNAME)
                try:
                    os.makedirs(base, exist_ok=True)
                    with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                        f.write(" ".join("+" + c for c in ctrls if c in ("memory", "pids", "cpu")))
                    enforced = {"memory": "cgroup2", "pids": "cgroup2"}
                    if "cpu" in ctrls:
                        enforced["cpu"] = "cgroup2"
                    return _finish(LimitsBackend("cgroup2", {"": base}, enforced))
                except OSError:
                    pass
        # cgroup v1 (hybrid, this machine), root only
        if root:
            bases, enforced = {}, {}
            for ctrl, mount in (("memory", "memory"), ("pids", "pids"), ("cpu", "cpu")):
                mdir = os.path.join(CG_ROOT, mount)
                if ctrl in own and os.path.isdir(mdir) and os.access(mdir, os.W_OK) and \
                        not os.path.exists(os.path.join(mdir, "cgroup.controllers")):
                    bases[ctrl] = os.path.join(mdir, own[ctrl].lstrip("/"), CG_DIRNAME)
                    enforced[ctrl] = "cgroup1"
            if enforced:
                probe_ok = {}
                for ctrl, base in bases.items():
                    try:
                        os.makedirs(base, exist_ok=True)
                        probe_ok[ctrl] = base
                    except OSError:
                        enforced.pop(ctrl, None)
                if enforced:
                    return _finish(LimitsBackend("cgroup1", probe_ok, enforced))
    return _finish(LimitsBackend("rlimit", {}, {}))


def _finish(be: LimitsBackend) -> LimitsBackend:
    be.enforced.setdefault("memory", "rlimit_as")
    if os.geteuid() != 0:  # RLIMIT_NPROC is ignored for host uid 0 (INIT_USER exemption)
        be.enforced.setdefault("pids", "rlimit_nproc")
    be.enforced["disk"] = "tmpfs"
    be.enforced["wall"] = "timeout+watchdog"
    return be


def rlimits_for(limits: dict, backend: LimitsBackend) -> list[tuple[int, int, int]]:
    """rlimits to set in the sandbox init for the limits the backend does not cover with cgroups."""
    out = []
    hard_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    soft_nofile = min(1 << 16, hard_nofile) if hard_nofile != resource.RLIM_INFINITY else 1 << 16
    out.append((resource.RLIMIT_NOFILE, soft_nofile, hard_nofile))
    if "memory" in limits and backend.enforced.get("memory") == "rlimit_as":
        out.append((resource.RLIMIT_AS, limits["memory"], limits["memory"]))
    if "pids" in limits and backend.enforced.get("pids") == "rlimit_nproc":
        out.append((resource.RLIMIT_NPROC, limits["pids"], limits["pids"]))
    return out
