"""``Sandbox``: one daemon-less process tree over a copy-on-write overlay of a shared image.

State dir ``<state_root>/sandboxes/<id>/{upper,work,merged}`` + one process tree (child A in the
host pid ns, child B = pid 1 of the sandbox, the exec agent of ``agent.py``). The client talks to B
over one private ``SOCK_SEQPACKET`` socket. No server, registry, bridge or log driver: create is
fork + unshare + overlay + pivot_root, reset is kill + rename(upper) + create, delete is kill +
rename(state dir) with the unlinking done by a background reaper.

This module holds the lifecycle (create/spawn, reset, delete, CRIU hooks); the exec client is
``execution.py``, the files client ``files.py``, snapshots and layers ``layers.py``.
"""

from __future__ import annotations

import os
import resource  # noqa: F401 - imported before any fork: the child must import nothing new
import signal
import socket
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import Any, Mapping

from neurips26.nitrobox import (_sys, child, criu, kernel, limits as _limits, maintenance, oci, reaper, runtime,
                                spawner, treepool)
from neurips26.nitrobox.config import SandboxConfig
from neurips26.nitrobox.errors import (LimitsUnavailableError, SandboxClosedError, SandboxError,
                                       SandboxStartError, SnapshotNotFoundError)
from neurips26.nitrobox.execution import BackgroundJob, ExecClient, ExecResult, ExecStream
from neurips26.nitrobox.files import FileInfo, FilesClient
from neurips26.nitrobox.image import Image, dir_image, host_image
from neurips26.nitrobox.layers import LayerOps, Snapshot
from neurips26.nitrobox.procfs import fs_type, proc_start_time, rss_bytes, subid, wait_fd, wait_released

__all__ = ["Sandbox", "ExecResult", "ExecStream", "BackgroundJob", "FileInfo", "Snapshot"]

_DEFAULT_WORKDIR = SandboxConfig.__dataclass_fields__["working_dir"].default
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class _Proc:
    """The live process tree of one sandbox (kept outside ``Sandbox`` for the finalizer)."""

    __slots__ = ("a_pid", "b_pid", "pidfd", "ctl", "disk_fd", "disk_a_pid", "a_pidfd", "reap_b", "a_host_pid",
                 "net", "rootfd", "zygote_reaps_b", "pool_key", "tree_dir")

    def __init__(self) -> None:
        self.a_pid = self.b_pid = self.pidfd = None
        self.ctl: socket.socket | None = None  # the agent's control socket (SOCK_SEQPACKET)
        self.net = None  # network="nat": (slirp4netns Popen, its exit-fd write end) or (pasta Popen, None)
        self.disk_fd = self.disk_a_pid = None
        self.a_pidfd = None  # zygote mode: A is the zygote's child, tracked by pidfd
        self.reap_b = False  # CRIU-restored: B is our own child (child subreaper)
        self.a_host_pid = None  # A's pid in both modes (diagnostics, memory accounting)
        self.rootfd = None  # the files fast path's fd of the tree's "/" (keeps its mount ns alive)
        self.zygote_reaps_b = False  # zygote mode with A gone early: B is the zygote's child
        self.pool_key = None  # a standby tree: its treepool.tree_key (it may go to the pool on delete)
        self.tree_dir = None  # a standby tree: its dir <root>/pool/<owner>-<uuid> (upper, work, merged)

    def detach(self) -> "_Proc":
        """Move the live tree into a new ``_Proc`` (for background teardown); this one becomes empty."""
        old = _Proc()
        old.take(self)
        return old

    def take(self, other: "_Proc") -> None:
        """Become ``other``'s tree (a standby swapped in by ``reset``); ``other`` becomes empty."""
        for name in self.__slots__:
            setattr(self, name, getattr(other, name))
        other.__init__()

    def alive(self) -> bool:
        """B still runs (its pidfd is not readable yet)."""
        return self.pidfd is not None and not wait_fd(self.pidfd, 0)

    def wait_b(self, timeout: float = 10.0) -> None:
        """Until B, and so every process of its pid ns, is gone (no reaping, no closing)."""
        if self.pidfd is not None:
            wait_fd(self.pidfd, timeout)

    def signal_kill(self) -> None:
        """Send SIGKILL without waiting (pidfd: never hits a reused pid)."""
        for fd in (self.pidfd, self.a_pidfd):
            if fd is not None:
                try:
                    _sys.pidfd_send_signal(fd, signal.SIGKILL)
                    return
                except OSError:
                    continue

    def close_root(self) -> None:
        if self.rootfd is not None:
            os.close(self.rootfd)
            self.rootfd = None

    def kill(self) -> None:
        """SIGKILL B (pid-ns init: the kernel kills every sandbox process) and reap A."""
        self.close_root()
        if self.pidfd is not None:
            try:
                _sys.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            except OSError:
                pass
        if self.a_pid is not None:
            # direct mode: A reaps B (so B never lingers as a zombie), exits, and we reap A
            if self.pidfd is None:
                try:
                    os.kill(self.a_pid, signal.SIGKILL)  # our unreaped child: pid cannot be reused
                except ProcessLookupError:
                    pass
            if self.a_pidfd is not None and not wait_fd(self.a_pidfd, 5.0):
                os.kill(self.a_pid, signal.SIGKILL)
            try:
                os.waitpid(self.a_pid, 0)
            except ChildProcessError:
                pass
            self.a_pid = None
            if self.a_pidfd is not None:
                os.close(self.a_pidfd)
                self.a_pidfd = None
        if self.a_pidfd is not None:  # zygote mode: A exits once B is gone; the zygote reaps it
            if self.pidfd is None:
                try:
                    _sys.pidfd_send_signal(self.a_pidfd, signal.SIGKILL)
                except OSError:
                    pass
            if not wait_fd(self.a_pidfd, 5.0):
                try:
                    _sys.pidfd_send_signal(self.a_pidfd, signal.SIGKILL)
                except OSError:
                    pass
                wait_fd(self.a_pidfd, 5.0)
            os.close(self.a_pidfd)
            self.a_pidfd = None
        if self.pidfd is not None:
            wait_fd(self.pidfd, 10.0)  # readable once B (and so every process of its pid ns) is gone
            if self.zygote_reaps_b:  # B's parent is the zygote: until it has reaped the zombie (its pid
                wait_released(self.pidfd, 5.0)  # and pid namespace are released with it)
                self.zygote_reaps_b = False
            os.close(self.pidfd)
            self.pidfd = None
            if self.reap_b and self.b_pid is not None:
                try:
                    os.waitpid(self.b_pid, 0)
                except ChildProcessError:
                    pass
                self.reap_b = False
        if self.ctl is not None:
            try:
                self.ctl.close()
            except OSError:
                pass
            self.ctl = None
        self.stop_net()
        self.b_pid = None

    def stop_net(self) -> None:
        """Stop the user-mode network helper: closing its exit fd stops slirp4netns, pasta gets
        SIGTERM; then reap it (its forwarded host ports are free afterwards)."""
        if self.net is not None:
            p, exit_w = self.net
            self.net = None
            if exit_w is not None:
                os.close(exit_w)
            else:
                p.terminate()
            try:
                p.wait(5)
            except Exception:  # noqa: BLE001 - TimeoutExpired
                p.kill()
                p.wait()


# spawn_mode="auto": fork from the private zygote once the client is this large (see
# _pick_spawn_mode). MEASURED (root, load
# ~5, interleaved, 15 reps): already at a 39 MiB client the zygote is faster on every step (create
# 6.3 vs 7.1 ms, exec 3.6 vs 4.4 ms, reset 0.30 vs 0.63 ms, time-to-free 2.1 vs 2.8 ms): A and B
# are copies of the ~20 MiB zygote instead of the client, so their forks, the agent's fork per exec
# and their exits all touch fewer page tables. Rootless keeps the old 256 MiB rule (the zygote's
# rootless path is not exercised by the rootless tests here).
AUTO_ZYGOTE_RSS = 32 << 20
AUTO_ZYGOTE_RSS_ROOTLESS = 256 << 20


def _auto_zygote_rss(rootless: bool) -> int:
    return AUTO_ZYGOTE_RSS_ROOTLESS if rootless else AUTO_ZYGOTE_RSS


_auto_creates = [0]  # sandboxes created with spawn_mode="auto" in this process


def _pick_spawn_mode(mode: str, rootless: bool) -> str:
    """``"auto"``: from 256 MiB client RSS always the zygote (a fork of the client costs too much);
    from 32 MiB (root) the zygote once this process creates its second sandbox, and only once the
    zygote has booted (it starts in the background; creates fork directly until then), so a one-shot
    client (the CLI) never pays for starting it."""
    if mode != "auto":
        return mode
    rss = rss_bytes()
    if rss >= AUTO_ZYGOTE_RSS_ROOTLESS:
        return "zygote"
    _auto_creates[0] += 1
    if rss < _auto_zygote_rss(rootless) or _auto_creates[0] < 2:
        return "direct"
    from neurips26.nitrobox import zygote

    return "zygote" if zygote.ready_or_start() else "direct"


def _finalize(proc: _Proc, spare: list, cgroups: list, sdir: str, root: Path, layers: list,
              closed: list) -> None:
    if closed[0]:
        return
    closed[0] = True
    for p in (proc, spare[0]):
        try:
            if p is not None:
                treepool.discard(p, p.tree_dir, wait=True)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
    _limits.remove_cgroups(cgroups)
    runtime.layer_refs.release(layers)
    try:
        if os.path.exists(sdir):
            reaper.force_rmtree(sdir)
    except Exception:  # noqa: BLE001 - interpreter shutdown
        pass


def _resolve_image(image: Any, state_root: str) -> tuple[Image, list]:
    if isinstance(image, Snapshot):
        if image.released:
            raise SnapshotNotFoundError(f"snapshot {image.id!r} was released")
        return image.image, list(image.lowers)
    if isinstance(image, str) and image == "host":
        return host_image(state_root), []
    if isinstance(image, Image):
        return image, []
    if isinstance(image, str) and not image.startswith(("/", ".")):
        imported = oci.find_image(image, state_root)  # Sandbox(image="repo:tag") after import_image
        if imported is not None:
            return imported, []
    if isinstance(image, (str, os.PathLike)):
        return dir_image(image), []
    raise TypeError(f"image must be 'host', a rootfs directory path or a Snapshot, got {type(image).__name__}")


class Sandbox(ExecClient, FilesClient, LayerOps):
    """A daemon-less copy-on-write namespace sandbox.

    >>> sb = Sandbox(memory="512m", pids=256)          # doctest: +SKIP
    >>> sb.exec("echo hi")                              # doctest: +SKIP
    ExecResult(exit_code=0, output='hi\\n', ...)
    >>> sb.write_file("/workspace/a.py", "print(1)"); sb.reset(); sb.delete()   # doctest: +SKIP
    """

    def __init__(self, config: SandboxConfig | Mapping[str, Any] | None = None, **overrides: Any):
        self._closed = [True]  # until fully created
        self._trace = [] if os.environ.get("NEURIPS26_NBX_TRACE") else None  # per-spawn step timings
        cfg = SandboxConfig.from_any(config, **overrides)
        self.config = cfg
        self.rootless = os.geteuid() != 0
        kernel.check_kernel(self.rootless)
        self._state_root = str(cfg.state_root or runtime.default_state_root())
        backend = _limits.detect()
        requested = cfg.requested_limits()
        missing = [k for k in requested if k not in backend.enforced]
        if missing and cfg.strict_limits:
            raise LimitsUnavailableError(
                f"limits {missing} cannot be enforced here (backend {backend.kind!r} enforces "
                f"{sorted(backend.enforced)}); pass strict_limits=False to accept best effort")
        self._setup_state(cfg, backend, requested)
        maintenance.reap_dead_owners(self._state_root)  # background: what crashed clients left
        try:
            self._cgroups = backend.create_cgroup(f"{self.id}-{os.getpid()}", requested)
            self._closed = [False]
            if not self._from_pool():  # a clean standby tree a deleted sandbox never used, if any
                self._fresh_upper()
                self._spawn()
        except BaseException:
            self._closed = [False]
            self._teardown(wait=True)
            raise
        self._arm()
        self._want_standby()

    def _setup_state(self, cfg: SandboxConfig, backend, requested: dict, image=None, base_lowers=None) -> None:
        """State dir, locks and layer references (nothing spawned yet)."""
        self._backend = backend
        self._limits = requested
        root = runtime.ensure_state_root(self._state_root)
        self._root = root
        if image is None:
            self.image, base_lowers = _resolve_image(cfg.image, self._state_root)
        else:
            self.image = image
        wd = (self.image.config or {}).get("WorkingDir")
        if wd and cfg.working_dir == _DEFAULT_WORKDIR and isinstance(wd, str) and wd.startswith("/"):
            cfg.working_dir = wd  # an imported image's WorkingDir replaces the default /workspace
        self.id = cfg.name or uuid.uuid4().hex[:12]
        self._dir = root / "sandboxes" / self.id
        self.spawn_mode = _pick_spawn_mode(cfg.spawn_mode, self.rootless)
        treepool.max_trees()  # a malformed $NEURIPS26_NBX_POOL fails this create, not a later delete
        try:
            os.mkdir(self._dir, 0o755)
        except FileExistsError:
            raise ValueError(f"name {self.id!r} is already used by a sandbox under {self._state_root}") from None
        self._proc = _Proc()
        self._cgroups: list[str] = []
        self._base_lowers = list(base_lowers)
        self._lowers = list(base_lowers)
        runtime.layer_refs.acquire(self._base_lowers, root)
        runtime.layer_refs.acquire(self._lowers, root)
        self._layers_held = self._base_lowers + self._lowers
        self._exec_lock = threading.Lock()
        self._life = threading.RLock()
        self._generation = 0  # bumped on every (re)spawn: background jobs of older trees are gone
        self._send_lock = threading.Lock()
        self._shell_dead = False
        self._snapshots: dict[str, Snapshot] = {}
        self._jobs = 0
        self._watchdog = None
        # standby tree for the next reset: [its _Proc] (a list, shared with the finalizer); state is
        # "none" | "queued" | "spawning" | "ready" | "closed", guarded by _spare_lock; _spare_done is
        # clear while a background spawn is in flight
        self._spare: list = [None]
        self._spare_lock = threading.Lock()
        self._spare_state = "none"
        self._spare_done = threading.Event()
        self._spare_done.set()
        self._spare_inflight = None
        self._spare_to_pool = False  # deleted during a standby spawn: the spawn's tree goes to the pool
        self._key: tuple | None | bool = False  # treepool.tree_key of this sandbox's standby trees (lazy)
        # atomically: a concurrent dead-owner cleanup must never read a half-written (empty) owner
        # file, take the sandbox for a crashed client's and unlink it while it is being created
        with open(self._dir / "owner.tmp", "w") as f:
            f.write(f"{os.getpid()} {proc_start_time(os.getpid())}\n")
        os.rename(self._dir / "owner.tmp", self._dir / "owner")

    def _arm(self) -> None:
        """Finalizer (atexit + GC) and the max_lifetime watchdog."""
        self._finalizer = weakref.finalize(self, _finalize, self._proc, self._spare, self._cgroups, str(self._dir),
                                           self._root, self._layers_held, self._closed)
        if self.config.max_lifetime is not None:
            ref = weakref.ref(self)

            def _expire() -> None:
                sb = ref()
                if sb is not None:
                    sb.delete()

            self._watchdog = threading.Timer(self.config.max_lifetime, _expire)
            self._watchdog.daemon = True
            self._watchdog.start()

    @classmethod
    def _new_restored(cls, cfg: SandboxConfig, image: Image, base_lowers: list) -> "Sandbox":
        """A sandbox shell object for a CRIU-restored tree (criu.py fills the process in)."""
        self = cls.__new__(cls)
        self._closed = [True]
        self._trace = None
        self.config = cfg
        self.rootless = os.geteuid() != 0
        self._state_root = str(cfg.state_root or runtime.default_state_root())
        self._setup_state(cfg, _limits.detect(), {}, image=image, base_lowers=base_lowers)
        self._fresh_upper()
        return self

    def _adopt(self, b_pid: int, ctl: socket.socket) -> None:
        """Take over a restored init (our child: the client is a child subreaper)."""
        proc = self._proc
        proc.b_pid, proc.ctl = b_pid, ctl
        proc.pidfd = _sys.pidfd_open(b_pid)
        proc.reap_b = True
        self._generation += 1
        self._closed = [False]
        self._arm()

    # ------------------------------------------------------------------ properties
    @property
    def state_dir(self) -> Path:
        return self._dir

    @property
    def closed(self) -> bool:
        return self._closed[0]

    @property
    def pid(self) -> int | None:
        """Host pid of the sandbox init (B)."""
        return self._proc.b_pid

    @property
    def features(self) -> dict[str, Any]:
        """What is enforced here: namespaces, id map, seccomp, and the limit backends."""
        enforced = {k: v for k, v in self._backend.enforced.items()}
        return {
            "namespaces": ["user", "mnt", "pid", "ipc", "uts", "cgroup"]
            + (["net"] if self.config.network in ("none", "nat") else []),
            "network": self.config.network + (f" ({self.nat_backend}: tap0 10.0.2.100/24, gw 10.0.2.2, dns 10.0.2.3)"
                                              if self.config.network == "nat" else ""),
            "uid_map": "0 0 65536" if not self.rootless else f"0 {os.geteuid()} 1",
            "rootless": self.rootless,
            "seccomp": "filter (EPERM deny list, clone3 ENOSYS)",
            "capabilities": "bounding set = Docker keep list",
            "no_new_privs": True,
            "limits": enforced,
            "limits_backend": self._backend.kind,
            "requested_limits": dict(self._limits),
            "unenforced": [k for k in self._limits if k not in enforced],
            "spawn_mode": self.spawn_mode,
            "state_root": self._state_root,
            "exec_channel": "pid-1 agent over a private SOCK_SEQPACKET socket; per-exec pipes; exit code "
                            "from waitpid with a per-exec nonce",
            "files": "opened by the agent inside the sandbox with a command's capabilities; regular files "
                     "and directories only unless special=True; reads capped at max_file_bytes",
            "masked": ["/proc/" + p for p in child.PROC_NULL + child.PROC_EMPTY]
            + ["/sys/" + p for p in child.SYS_EMPTY],
            "storage": self._storage(),
            "reset": "swap to a pre-spawned standby tree (fresh namespaces, fresh empty upper)"
            if self._standby_eligible() else "kill + respawn (standby off: config.standby=False, or resource "
            "limits (memory/pids/cpu/disk_limit), nat/ports, cow mounts or criu)",
        }

    def _storage(self) -> dict[str, Any]:
        """Where the writable layer lives and what bounds it (the default surprises nobody who reads it)."""
        disk = self._limits.get("disk")
        fstype = "tmpfs" if disk else fs_type(self._state_root)
        in_ram = fstype in ("tmpfs", "ramfs")
        mem_cg = str(self._backend.enforced.get("memory", "")).startswith("cgroup")
        return {
            "writable_layer": f"per-sandbox tmpfs of {disk} bytes" if disk else f"{fstype} under {self._state_root}",
            "host_ram": in_ram,
            "size_cap_bytes": disk,
            "charged_to_memory_limit": in_ram and mem_cg and "memory" in self._limits,
            "note": ("files written in the sandbox use host RAM and count against its memory limit; pass "
                     "disk_limit= to cap them, or state_root=<dir on disk> for disk semantics")
            if in_ram else "files written in the sandbox go to disk",
        }

    # ------------------------------------------------------------------ spawning
    def _paths(self) -> tuple[str, str, str]:
        if self._limits.get("disk"):
            d = str(self._dir / "disk")
            return d + "/upper", d + "/work", str(self._dir / "merged")
        return str(self._dir / "upper"), str(self._dir / "work"), str(self._dir / "merged")

    def _fresh_upper(self) -> None:
        """mkdir an empty upper/work (+ working_dir in the upper, owned by the caller)."""
        if self._limits.get("disk"):
            os.makedirs(self._dir / "disk", exist_ok=True)
        else:
            upper, work, _ = self._paths()
            os.makedirs(upper + self.config.working_dir, mode=0o755, exist_ok=True)
            os.makedirs(work, exist_ok=True)
        os.makedirs(self._dir / "merged", exist_ok=True)
        for i, (_, _, mode) in enumerate(self.config.mounts):  # cow mounts: their own upper, reset with ours
            if mode == "cow":
                for sub in ("upper", "work"):
                    os.makedirs(self._dir / "cow" / str(i) / sub, exist_ok=True)

    def _child_spec(self, sock: int, paths: tuple | None = None, lowers: list | None = None) -> child.ChildSpec:
        cfg = self.config
        upper, work, merged = paths or self._paths()
        # layer paths relative to the dir holding upper/work: the sandbox's mountinfo shows no host
        # path and no sandbox id (a pooled standby tree is taken by another sandbox than its own)
        base = os.path.dirname(upper)
        lowers = [os.path.relpath(p, base) for p in (self._lowers if lowers is None else lowers)
                  + [self.image.lower] + list(self.image.below)]
        upper_r, work_r = os.path.relpath(upper, base), os.path.relpath(work, base)
        data = f"lowerdir={':'.join(lowers)},upperdir={upper_r},workdir={work_r},userxattr"
        if len(data) > 4000:
            raise SandboxError(f"overlay options too long ({len(data)} bytes): too many layers")
        env = {"PATH": DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb",
               "HOSTNAME": cfg.hostname}
        env.update(oci.image_env(self.image))  # an imported image's config Env, then the user's
        env.update(cfg.env)
        from neurips26.nitrobox import seccomp_filter

        disk = self._limits.get("disk")
        procs = [os.path.join(d, "cgroup.procs") for d in self._cgroups]
        return child.ChildSpec(
            sock=sock, parent_pid=os.getpid(),
            map_by_parent=not self.rootless or cfg.subuid, uid=os.geteuid(), gid=os.getegid(),
            cgroup_procs=procs, network_none=cfg.network in ("none", "nat"), pdeathsig_b=not cfg.criu,
            merged=merged, overlay_data=data, overlay_cwd=base, host_usr=self.image.host_usr,
            disk_dir=str(self._dir / "disk") if disk else None, disk_size=disk or 0,
            disk_mkdirs=(upper, work, upper + "/" + cfg.working_dir.strip("/").split("/")[0])
            if disk else (),
            shm_size=cfg.shm_bytes, hostname=cfg.hostname,
            rlimits=_limits.rlimits_for(self._limits, self._backend), cap_last=_CAP_LAST,
            seccomp=seccomp_filter.program(), env=env,
            usr_flags=_USR_FLAGS if self.image.host_usr else 0, trace=self._trace is not None,
            # zygote mode: A exits once B is forked (B is reparented to the zygote, a subreaper);
            # not where A is used later: NAT (pasta/slirp open A's namespaces), disk_limit (A
            # holds the tmpfs fd), CRIU
            a_exits_early=self.spawn_mode == "zygote" and cfg.network != "nat" and not disk and not cfg.criu,
            criu_agent=_criu_sources() if cfg.criu else None,
            mounts=[(src, dst, mode, str(self._dir / "cow" / str(i))) for i, (src, dst, mode) in enumerate(cfg.mounts)],
            devices=list(cfg.devices),
            resolv_conf=_host_resolv_conf() if cfg.network == "host" else
            (b"nameserver 10.0.2.3\n" if cfg.network == "nat" else None))

    def _spawn(self) -> None:
        """Create steps 2-11 for the sandbox's own tree (over its current upper and lowers)."""
        self._spawn_into(self._proc)
        self._generation += 1
        self._shell_dead = False

    def _spawn_into(self, proc: _Proc, paths: tuple | None = None, lowers: list | None = None) -> None:
        """Create steps 2-11 into ``proc``: control socket, fork A via the spawner, id map, wait for
        B's agent. ``paths``/``lowers`` default to the sandbox's own (a standby passes its own)."""
        cfg = self.config
        ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        child_fd = theirs.detach()
        deadline = time.monotonic() + cfg.start_timeout
        try:
            spec = self._child_spec(child_fd, paths, lowers)
            proc.zygote_reaps_b = spec.a_exits_early
            if self.spawn_mode == "zygote":
                from neurips26.nitrobox import zygote

                proc.a_pid = None
                a_pid = zygote.get().spawn(spec)
                proc.a_host_pid = a_pid
                try:
                    proc.a_pidfd = _sys.pidfd_open(a_pid)
                except ProcessLookupError:
                    pass
            else:
                a_pid = spawner.get().fork(spec)
                proc.a_pid = proc.a_host_pid = a_pid
                proc.a_pidfd = _sys.pidfd_open(a_pid)  # our unreaped child: cannot be a reused pid
            os.close(child_fd)
            child_fd = None
            msgs = b""
            b_pid = None
            ready = False
            while b_pid is None or not ready:
                m, fd = _recv_msg(ctl, deadline)
                if not m:
                    raise SandboxStartError(_start_error(msgs, "child exited before reporting"))
                if fd is not None and m.startswith(b"O\n"):  # B's root (files fast path), with "R"
                    os.set_inheritable(fd, False)
                    if proc.rootfd is not None:
                        os.close(proc.rootfd)
                    proc.rootfd = fd
                    fd, m = None, m[2:]
                    if not m:
                        continue
                msgs += m
                if fd is not None:  # criu mode: B's control socket lives in the sandbox's netns
                    ctl.close()
                    ctl = socket.socket(fileno=fd)
                    ctl.settimeout(max(0.001, deadline - time.monotonic()))
                    continue
                if m == b"U":
                    self._write_maps(a_pid)
                    ctl.sendall(b"G")
                    continue
                for line in m.decode(errors="replace").splitlines():
                    if line.startswith("P:"):
                        b_pid = int(line[2:])
                    elif line == "R":
                        ready = True
                    elif line.startswith("T:") and self._trace is not None:
                        self._trace.append({k: float(v) for k, v in (kv.split("=") for kv in line[2:].split(","))})
                    elif line.startswith("D:"):
                        proc.disk_a_pid, proc.disk_fd = (int(x) for x in line[2:].split(","))
                    elif line.startswith("F:"):
                        raise SandboxStartError(f"sandbox {self.id}: {line[2:]}")
            proc.b_pid = b_pid
            try:
                proc.pidfd = _sys.pidfd_open(b_pid)
            except ProcessLookupError:
                raise SandboxStartError(f"sandbox {self.id}: agent exited at start") from None
            ctl.settimeout(None)
            proc.ctl = ctl
            ctl = None
            if cfg.network == "nat":
                # A unshared the sandbox's user and net namespaces and stays dumpable; B (pid 1) is
                # not, so rootless callers cannot open /proc/<B>/ns/*
                self._start_nat(proc.a_host_pid or b_pid, deadline)
        except BaseException:
            if child_fd is not None:
                os.close(child_fd)
            proc.kill()
            raise
        finally:
            if ctl is not None:
                ctl.close()

    @property
    def nat_backend(self) -> str | None:
        """``"pasta"`` or ``"slirp4netns"`` for ``network="nat"`` (``None`` otherwise)."""
        import shutil

        if self.config.network != "nat":
            return None
        if self.config.nat_backend != "auto":
            return self.config.nat_backend
        return "pasta" if shutil.which("pasta") else "slirp4netns"

    def _start_nat(self, ns_pid: int, deadline: float) -> None:
        """``ns_pid``: a process in the sandbox's user and net namespaces that we may open."""
        b_pid = ns_pid
        if self.nat_backend == "pasta":
            self._start_pasta(b_pid, deadline)
        else:
            self._start_slirp(b_pid, deadline)

    def _start_pasta(self, b_pid: int, deadline: float) -> None:
        """network='nat' through pasta (passt's namespace mode, L4 sockets, no tap on the host side):
        the same view as slirp4netns (``tap0`` 10.0.2.100/24, gateway 10.0.2.2, DNS 10.0.2.3
        forwarded to the host's resolver); ``ports`` bound on the host's 127.0.0.1 only; no
        forwarding of host-bound ports into or out of the sandbox (``-T/-U none``); the gateway
        maps to the host's loopback only with ``nat_host_loopback``. pasta runs in the foreground
        as our child (SIGTERM at teardown); its pid file in the state dir lets ``cleanup`` stop
        one whose owner died."""
        import shutil
        import subprocess

        exe = shutil.which("pasta")
        if exe is None:
            raise SandboxStartError("network='nat' with nat_backend='pasta' needs pasta (apt install passt)")
        pidfile = self._dir / "pasta.pid"
        try:
            os.unlink(pidfile)
        except FileNotFoundError:
            pass
        fwd = ",".join(f"{int(hp)}:{int(sp)}" for hp, sp in self.config.ports.items())
        args = [exe, "--foreground", "--quiet", "--runas", f"{os.geteuid()}:{os.getegid()}", "--config-net",
                "--ns-ifname", "tap0", "--address", "10.0.2.100", "--netmask", "24", "--gateway", "10.0.2.2",
                "--dns-forward", "10.0.2.3", "--ipv4-only", "--no-dhcp", "--no-ra", "--no-ndp", "--no-dhcpv6",
                "--tcp-ports", f"127.0.0.1/{fwd}" if fwd else "none", "--udp-ports", "none",
                "--tcp-ns", "none", "--udp-ns", "none", "--pid", str(pidfile)]
        if not self.config.nat_host_loopback:
            args.append("--no-map-gw")
        # pasta drops CAP_SYS_PTRACE before joining: hand it the namespaces as fds we opened (its own
        # /proc/self/fd/N), not as /proc/<pid>/ns paths it might not be allowed to open
        ns_fds = [os.open(f"/proc/{b_pid}/ns/{ns}", os.O_RDONLY | os.O_CLOEXEC) for ns in ("user", "net")]
        args += ["--userns", f"/proc/self/fd/{ns_fds[0]}", "--netns", f"/proc/self/fd/{ns_fds[1]}"]
        log = self._dir / "pasta.log"
        try:
            with open(log, "wb") as logf:  # a file, not a pipe nobody drains
                p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=logf,
                                     pass_fds=ns_fds)
        finally:
            for fd in ns_fds:
                os.close(fd)
        self._proc.net = (p, None)
        while True:  # the pid file is written once the namespace side is configured and ports bound
            if p.poll() is not None:
                err = log.read_text(errors="replace")
                err = " ".join(x for x in err.splitlines() if "syslog" not in x)[-300:]
                raise SandboxStartError(f"sandbox {self.id}: pasta exited ({p.returncode}): {err}")
            try:
                if pidfile.read_text().strip():
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SandboxStartError(f"sandbox {self.id}: pasta did not come up")
            time.sleep(0.002)

    def _start_slirp(self, b_pid: int, deadline: float) -> None:
        """network='nat': slirp4netns on B's netns (tap0, 10.0.2.100/24), ports forwarded on 127.0.0.1.

        It stops when its exit fd closes (our ``_Proc.kill``, or the client's death)."""
        import json
        import shutil
        import subprocess

        exe = shutil.which("slirp4netns")
        if exe is None:
            raise SandboxStartError("network='nat' needs slirp4netns (apt install slirp4netns)")
        exit_r, exit_w = os.pipe()
        ready_r, ready_w = os.pipe()
        api = str(self._dir / "slirp.sock")
        try:
            os.unlink(api)
        except FileNotFoundError:
            pass
        args = [exe, "--configure", "--mtu=65520", "--exit-fd", str(exit_r), "--ready-fd", str(ready_w),
                "--api-socket", api, "--netns-type=path", f"--userns-path=/proc/{b_pid}/ns/user"]
        if not self.config.nat_host_loopback:
            args.append("--disable-host-loopback")
        args += [f"/proc/{b_pid}/ns/net", "tap0"]
        try:
            p = subprocess.Popen(args, pass_fds=(exit_r, ready_w), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        finally:
            os.close(exit_r)
            os.close(ready_w)
        self._proc.net = (p, exit_w)
        try:
            if not wait_fd(ready_r, max(0.1, deadline - time.monotonic())) or os.read(ready_r, 1) != b"1":
                err = p.stderr.read().decode(errors="replace")[-300:] if p.poll() is not None else "timeout"
                raise SandboxStartError(f"sandbox {self.id}: slirp4netns did not come up: {err}")
        finally:
            os.close(ready_r)
        for hp, sp in self.config.ports.items():
            req = {"execute": "add_hostfwd", "arguments": {"proto": "tcp", "host_addr": "127.0.0.1",
                                                            "host_port": int(hp), "guest_port": int(sp)}}
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.settimeout(5)
                s.connect(api)
                s.sendall(json.dumps(req).encode())
                s.shutdown(socket.SHUT_WR)
                reply = json.loads(s.recv(65536) or b"{}")
            finally:
                s.close()
            if "error" in reply:
                raise SandboxStartError(f"sandbox {self.id}: port {hp} -> {sp}: {reply['error']}")

    def _write_maps(self, a_pid: int) -> None:
        if not self.rootless:
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{a_pid}/{name}", "w") as f:
                    f.write("0 0 65536\n")
        else:  # rootless subuid: newuidmap/newgidmap from /etc/subuid
            import subprocess

            uid, gid = os.geteuid(), os.getegid()
            sub_u = subid("/etc/subuid", uid)
            sub_g = subid("/etc/subgid", gid)
            if sub_u is None or sub_g is None:
                raise SandboxStartError(f"subuid=True needs entries for uid {uid} in /etc/subuid and /etc/subgid")
            for tool, own, (start, count) in (("newuidmap", uid, sub_u), ("newgidmap", gid, sub_g)):
                r = subprocess.run([tool, str(a_pid), "0", str(own), "1", "1", str(start), str(count)],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    raise SandboxStartError(f"{tool} failed: {r.stderr.strip()}")

    # ------------------------------------------------------------------ exec
    def _check_open(self) -> None:
        if self._closed[0]:
            raise SandboxClosedError(f"sandbox {self.id} is deleted")


    # ------------------------------------------------------------------ lifecycle
    def _respawn_keep(self) -> None:
        """Restart the shell over the same upper (state kept; processes lost)."""
        self._proc.kill()
        self._spawn()

    def _new_upper(self, old: "_Proc | None" = None) -> None:
        """Trash the current upper/work (O(1) rename) and make fresh ones.

        With ``old`` (a detached, SIGKILLed tree) the reaper first waits for it to die, then unlinks:
        the new tree is spawned while the old one is still being torn down by the kernel.
        """
        tdir = None
        if not self._limits.get("disk"):
            upper, work, _ = self._paths()
            tdir = self._root / "trash" / uuid.uuid4().hex
            os.mkdir(tdir)
            os.rename(upper, tdir / "upper")
            os.rename(work, tdir / "work")
            if os.path.isdir(self._dir / "cow"):
                os.rename(self._dir / "cow", tdir / "cow")
        self._fresh_upper()
        if old is not None or tdir is not None:
            treepool.discard(old, None if tdir is None else str(tdir))

    def _retire_tree(self) -> "_Proc | None":
        """SIGKILL the tree. Without cgroups the wait for it happens in the background (returns the
        detached tree); with cgroups we wait here, so a pids/memory limit is not shared with dying
        processes of the previous tree."""
        if self._cgroups:
            self._proc.kill()
            return None
        old = self._proc.detach()
        old.signal_kill()
        if self.config.ports:
            old.stop_net()  # the next tree's helper binds the same host ports
        return old

    def reset(self) -> None:
        """Back to the creation-time state: kill the tree, rename the upper away, respawn.

        O(1) in the data size: the old upper is renamed into the trash and unlinked (after the old
        tree has died) by the background reaper while the new tree starts.
        """
        with self._exec_lock, self._life:
            self._check_open()
            spare = self._take_spare()
            if spare is None:  # own standby not up: a pooled one (same tree spec), if any
                spare = (self._pool_take() or (None, None))[0]
            old = self._retire_tree()
            if spare is None:
                self._new_upper(old)
                self._set_lowers(list(self._base_lowers))
                self._spawn()
            else:
                self._swap_in(spare, old)
        self._want_standby()

    # ------------------------------------------------------------------ standby tree (reset = swap)
    def _standby_eligible(self) -> bool:
        """A standby must share nothing with the live tree: a resource limit (a cgroup's pids/memory
        shared with the dying tree; rootless, RLIMIT_NPROC counts every process of the host uid), a
        per-sandbox tmpfs, a NAT helper with fixed host ports, cow uppers or CRIU state would all be
        shared or need per-tree handling, so those configurations respawn."""
        cfg = self.config
        return (cfg.standby and not self._cgroups and not self._limits and cfg.network != "nat"
                and not cfg.ports and not cfg.criu and not any(m == "cow" for _, _, m in cfg.mounts))

    def _want_standby(self) -> None:
        """Queue one background spawn of a standby (at most one per sandbox, one at a time per process)."""
        if not self._standby_eligible():
            return
        with self._spare_lock:
            if self._closed[0] or self._spare_state != "none":
                return
            self._spare_state = "queued"
        _standby_maker().submit(weakref.ref(self))

    def wait_standby(self, timeout: float = 10.0) -> bool:
        """Block until no standby spawn is queued or in flight; ``True`` if one is ready."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._spare_lock:
                state = self._spare_state
            if state not in ("queued", "spawning"):
                return state == "ready"
            time.sleep(0.002)
        return False

    def _make_standby(self) -> None:
        """Background: spawn a tree over a fresh empty upper and the base lowers (what reset restores),
        without any lock the live sandbox's exec/reset/delete need; keep it unless closed meanwhile."""
        with self._spare_lock:
            if self._closed[0] or self._spare_state != "queued":
                return
            self._spare_state = "spawning"
            self._spare_done.clear()
            proc, ok = _Proc(), False
            self._spare_inflight = proc  # a delete meanwhile pools it or SIGKILLs it (_close_spare)
        # its own dir under pool/ (not under the sandbox's: a tree may outlive its sandbox in the pool,
        # and its overlay paths, relative to this dir, name no sandbox)
        d = None
        try:
            d = treepool.get().new_dir(self._state_root)
            upper, work, merged = d + "/upper", d + "/work", d + "/merged"
            os.mkdir(d)
            proc.tree_dir = d
            for sub in (upper, work, merged):
                os.mkdir(sub, 0o755)
            path = upper
            for part in self.config.working_dir.strip("/").split("/"):
                path += "/" + part
                os.mkdir(path, 0o755)
            self._spawn_into(proc, (upper, work, merged), list(self._base_lowers))
            proc.pool_key = self._pool_key()
            ok = True
        except BaseException:  # noqa: BLE001 - a failed standby only means reset respawns
            pass
        finally:
            with self._spare_lock:
                self._spare_inflight = None
                keep = ok and self._spare_state == "spawning" and not self._closed[0]
                if keep:
                    self._spare[0] = proc
                    self._spare_state = "ready"
                elif self._spare_state == "spawning":
                    self._spare_state = "none"
                to_pool, self._spare_to_pool = self._spare_to_pool, False
            try:
                pooled = False
                if ok and not keep and to_pool and proc.pool_key is not None and proc.alive():
                    pooled = treepool.get().put(proc.pool_key, proc, d)  # deleted meanwhile, never used
                if not keep and not pooled:
                    treepool.discard(proc, d, wait=True)  # (a failed spawn killed it already)
            finally:
                if to_pool:
                    treepool.get().expect(-1)
                self._spare_done.set()

    # ------------------------------------------------------------------ the process-wide pool (treepool.py)
    def _pool_key(self) -> tuple | None:
        """The key of this sandbox's standby trees in the pool; None where they are never pooled
        (not standby-eligible, snapshot lowers). Whether the pool is on (``treepool.max_trees()``) is
        asked where a tree would go there, not cached here."""
        if self._key is False:
            key = None
            if self._standby_eligible() and not self._base_lowers:
                d = os.path.join(treepool.pool_root(self._state_root), "key")  # a standby's paths, at the same depth
                key = treepool.tree_key(self._child_spec(-1, (d + "/upper", d + "/work", d + "/merged"), []),
                                        self._state_root, self.spawn_mode)
            self._key = key
        return self._key

    def _pool_take(self) -> "tuple[_Proc, str] | None":
        key = self._pool_key()
        return treepool.get().take(key) if key is not None else None

    def _from_pool(self) -> bool:
        """create: adopt a pooled tree (its empty upper/work become this sandbox's) instead of spawning."""
        got = self._pool_take()
        if got is None:
            return False
        proc, d = got
        upper, work, merged = self._paths()
        try:
            os.rename(d + "/upper", upper)
        except OSError:
            treepool.discard(proc, d)
            return False
        try:
            os.rename(d + "/work", work)
            os.mkdir(merged)
        except OSError:
            try:
                os.rename(upper, d + "/upper")
            except OSError:
                pass
            treepool.discard(proc, d)
            reaper.force_rmtree(str(self._dir / "work"))
            return False
        self._adopt(proc, d)
        return True

    def _adopt(self, proc: _Proc, d: str) -> None:
        """A standby tree (own or pooled) whose upper/work were moved into this sandbox's becomes
        the live tree; its pool dir (only the empty mount point left) goes."""
        treepool.remove_dir(d)
        proc.pool_key = proc.tree_dir = None  # live from now on: never pooled again
        self._proc.take(proc)
        self._generation += 1
        self._shell_dead = False

    def _pool_give(self, spare: _Proc) -> bool:
        """delete: hand the never-used standby to the pool (False: tear it down as before)."""
        if spare.pool_key is None or not spare.alive():
            return False
        return treepool.get().put(spare.pool_key, spare, spare.tree_dir)

    def _take_spare(self) -> "_Proc | None":
        """The ready standby (removed from the slot), if it is still alive. One being spawned right
        now is waited for (it is further along than a respawn from scratch would be)."""
        with self._spare_lock:
            spawning = self._spare_state == "spawning"
        if spawning:
            self._spare_done.wait(self.config.start_timeout)
        with self._spare_lock:
            if self._spare_state != "ready":
                return None
            spare, self._spare[0] = self._spare[0], None
            self._spare_state = "none"
        if spare.alive():
            return spare
        treepool.discard(spare, spare.tree_dir)
        return None

    def _swap_in(self, spare: _Proc, old: "_Proc | None") -> None:
        """Reset by swap: trash the old upper/work, move the standby's (mounted, empty, never seen by
        any command of this sandbox; its own or a pooled one) into their place, and make the standby
        the live tree."""
        upper, work, _ = self._paths()
        sdir = spare.tree_dir
        s_upper, s_work = sdir + "/upper", sdir + "/work"
        tdir = self._root / "trash" / uuid.uuid4().hex
        os.mkdir(tdir)
        os.rename(upper, tdir / "upper")
        os.rename(work, tdir / "work")
        os.rename(s_upper, upper)  # the overlay follows its upper dir's inode, not the path
        os.rename(s_work, work)
        treepool.discard(old, str(tdir))
        self._adopt(spare, sdir)
        self._set_lowers(list(self._base_lowers))

    def _close_spare(self) -> tuple["_Proc | None", "threading.Event | None"]:
        """On delete: take the standby; an in-flight spawn is left to finish into the pool (a clean
        tree that never was this sandbox's) where this sandbox's trees are pooled, else SIGKILLed
        (returns the event to wait for then)."""
        with self._spare_lock:
            spare, self._spare[0] = self._spare[0], None
            inflight = self._spare_state == "spawning" and self._spare_inflight is not None
            self._spare_state = "closed"
            to_pool = inflight and self._pool_key() is not None and treepool.max_trees(strict=False) > 0
            if to_pool:
                self._spare_to_pool = True
                treepool.get().expect(1)
            elif self._spare_inflight is not None:
                self._spare_inflight.signal_kill()  # its spawn then fails fast and reaps what it forked
        return spare, (self._spare_done if inflight and not to_pool else None)


    def _teardown(self, wait: bool, background: bool = False) -> threading.Event | None:
        """Kill, remove cgroups, release layers, trash the state dir.

        ``background=True`` (delete): SIGKILL now, rename the state dir now (O(1)), and let the
        reaper wait for the tree, remove the cgroups, release the layers and unlink.
        """
        marks = [("start", time.perf_counter())] if self._trace is not None else None  # delete phases
        snaps = list(self._snapshots.values())
        self._snapshots.clear()
        layers = list(self._layers_held)
        self._layers_held.clear()
        cgroups = list(self._cgroups)
        self._closed[0] = True
        spare, inflight = self._close_spare()
        if spare is not None and background and self._pool_give(spare):
            spare = None  # not freed: pooled (its dir is under pool/, not ours), see treepool.py
        if spare is not None:
            spare.signal_kill()
        if not background:
            self._proc.kill()
            if spare is not None:
                treepool.discard(spare, spare.tree_dir, wait=True)
            if inflight is not None:
                inflight.wait(2 * self.config.start_timeout)
            _limits.remove_cgroups(cgroups)
            runtime.layer_refs.release(layers)
            for snap in snaps:
                snap.release()
            return reaper.trash(self._root, self._dir, wait=wait)
        old = self._proc.detach()
        old.signal_kill()
        # the files fast path's root fds (used only under _life, which we hold; the live _proc no
        # longer has them): closed now, the overlay's last reference goes with the mount namespace
        # in the dying tree's own exit instead of in a close() here after it
        old.close_root()
        if spare is not None:
            spare.close_root()
        dest = self._root / "trash" / uuid.uuid4().hex
        try:
            os.rename(self._dir, dest)
        except OSError:
            dest = self._dir
        mark = (lambda name: marks.append((name, time.perf_counter()))) if marks is not None else (lambda name: None)
        mark("kill+rename")

        def job(helper: bool = False) -> None:
            # unlink while the kernel tears the SIGKILLed tree down (on another CPU): a killed process
            # runs no more user code, and whatever a system call it was inside still creates is
            # removed by the pass below, after every sandbox process is gone. With ``helper`` (a
            # caller that waits, and an idle reaper) the unlink runs on the reaper's thread while this
            # one releases B's memory: the two passes are independent and each is a few hundred us
            unlinked = reaper.get().submit(str(dest)) if helper and inflight is None else None
            if MRELEASE and old.pidfd is not None:
                # B's memory (its copy of the zygote) unmapped here, on this CPU, while B tears down
                # its namespaces and mounts on another: the two halves of its exit run in parallel
                _sys.process_mrelease(old.pidfd)
                mark("mrelease")
            if inflight is None and unlinked is None:
                reaper.force_rmtree(str(dest))
            mark("unlink")
            old.wait_b()  # every sandbox process is gone (zygote mode: and with B the namespaces)
            mark("B gone")
            if spare is not None:
                spare.wait_b()
            mark("standby gone")
            old.kill()  # reaps A (direct mode: the mount namespace (overlay, proc, tmpfs) goes with it)
            if spare is not None:
                treepool.discard(spare, spare.tree_dir, wait=True)
            mark("reaped")
            if inflight is not None:
                inflight.wait(2 * self.config.start_timeout)
            mark("in-flight standby")
            _limits.remove_cgroups(cgroups)
            runtime.layer_refs.release(layers)
            for snap in snaps:
                snap.release()
            if unlinked is not None:
                # by now an idle reaper has long begun; if not, another thread queued a job on it since
                # ``pending`` was read: the pass runs here instead of behind that job, and the reaper
                # skips it (one job record, reaper.Job: never run twice, never waited on behind others)
                unlinked.run_or_wait()
                mark("unlink joined")
            if os.path.lexists(dest):
                reaper.force_rmtree(str(dest))  # what the early pass could not remove
            mark("final")
            if marks is not None:
                self._trace.append({"delete": {b[0]: 1e3 * (b[1] - a[1]) for a, b in zip(marks, marks[1:])}})

        if wait:  # the caller waits anyway: run it here, not behind other sandboxes' queued jobs
            # (``pending == 0`` also keeps a delete running on the reaper's own thread from waiting on it)
            job(helper=PARALLEL_UNLINK and reaper.get().pending == 0)
            ev = threading.Event()
            ev.set()
            return ev
        return reaper.get().submit(job)

    def delete(self, wait: bool = False) -> None:
        """Idempotent: SIGKILL the tree, remove the cgroup, rename the state dir into trash.

        ``wait=True`` blocks until the reaper has unlinked it (benchmarks time both).
        """
        if self._closed[0]:
            return
        pidfd = self._proc.pidfd
        if pidfd is not None:  # interrupt a running exec before waiting for its lock
            try:
                _sys.pidfd_send_signal(pidfd, signal.SIGKILL)
            except OSError:
                pass
        with self._exec_lock, self._life:
            if self._closed[0]:
                return
            if self._watchdog is not None:
                self._watchdog.cancel()
            self._teardown(wait, background=True)

    def close(self) -> None:
        self.delete()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.delete()

    def __repr__(self) -> str:
        state = "deleted" if self._closed[0] else f"pid={self._proc.b_pid}"
        return f"Sandbox(id={self.id!r}, image={self.image.name!r}, {state})"

    # CRIU (optional) -------------------------------------------------------------------------
    def checkpoint(self, path: str | os.PathLike):
        """CRIU dump of the whole tree (root only, needs a working CRIU; see ``criu.py``)."""
        return criu.checkpoint(self, path)

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, n: int = 1) -> list:
        return criu.restore(path, n, sandbox_cls=cls)


# ---------------------------------------------------------------------------------------- helpers


def _recv(sock: socket.socket, n: int, deadline: float) -> bytes:
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    try:
        return sock.recv(n)
    except socket.timeout:
        raise SandboxStartError("sandbox did not start in time (start_timeout)") from None


def _recv_msg(sock: socket.socket, deadline: float) -> tuple[bytes, int | None]:
    """One start-up message and the fd passed with it, if any (B's root fd, or criu mode's
    replacement control socket)."""
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    try:
        msg, fds, _, _ = socket.recv_fds(sock, 65536, 1)
    except socket.timeout:
        raise SandboxStartError("sandbox did not start in time (start_timeout)") from None
    return msg, (fds[0] if fds else None)


def _recv_all(sock: socket.socket, deadline: float) -> bytes:
    out = b""
    while True:
        b = _recv(sock, 4096, deadline)
        if not b:
            return out
        out += b


def _start_error(msgs: bytes, default: str) -> str:
    for line in msgs.decode(errors="replace").splitlines():
        if line.startswith("F:"):
            return line[2:]
    return default


def _host_resolv_conf() -> bytes | None:
    try:
        with open("/etc/resolv.conf", "rb") as f:
            return f.read(1 << 16)
    except OSError:
        return None


_CRIU_SRC: dict | None = None


def _criu_sources() -> dict:
    """Source text of ``_sys`` and ``agent`` for the criu-mode agent (read once, before any fork)."""
    global _CRIU_SRC
    if _CRIU_SRC is None:
        here = Path(__file__).resolve().parent
        _CRIU_SRC = {"sys_src": (here / "_sys.py").read_text(), "agent_src": (here / "agent.py").read_text()}
    return _CRIU_SRC


MRELEASE = True  # delete: process_mrelease(2) on the SIGKILLed B (see _teardown)
PARALLEL_UNLINK = True  # delete(wait=True): the unlink pass on the idle reaper thread meanwhile (_teardown)
_CAP_LAST = _sys.cap_last_cap()
try:
    _USR_FLAGS = _sys.locked_mount_flags("/usr")
except OSError:
    _USR_FLAGS = 0


class _StandbyMaker:
    """One background thread per process spawning standby trees, one at a time (bounded: at c = 32
    the queue lags and resets respawn inline instead of piling up spawns). Requests of sandboxes
    deleted or collected before their turn are dropped."""

    def __init__(self) -> None:
        import queue

        self.pid = os.getpid()
        self.q = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="nitrobox-standby", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            ref = self.q.get()
            sb = ref()
            if sb is not None:
                try:
                    sb._make_standby()
                except Exception:  # noqa: BLE001 - never stop the maker
                    pass
            del sb

    def submit(self, ref) -> None:
        self.q.put(ref)


_maker: _StandbyMaker | None = None
_maker_lock = threading.Lock()


def _standby_maker() -> _StandbyMaker:
    global _maker
    with _maker_lock:
        if _maker is None or _maker.pid != os.getpid() or not _maker.thread.is_alive():
            _maker = _StandbyMaker()
        return _maker
