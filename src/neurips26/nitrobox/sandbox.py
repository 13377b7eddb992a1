"""``Sandbox``: one daemon-less process tree over a copy-on-write overlay of a shared image.

State dir ``<state_root>/sandboxes/<id>/{upper,work,merged}`` + one process tree (child A in the
host pid ns, child B = pid 1 of the sandbox running ``bash``). The client talks to B's shell over
three pipes (stdin, stdout+stderr, a status pipe at fd 3). No server, registry, bridge or log
driver: create is fork + unshare + overlay + pivot_root + exec, reset is kill + rename(upper) +
create, delete is kill + rename(state dir) with the unlinking done by a background reaper.
"""

from __future__ import annotations

import errno
import marshal
import os
import secrets
import resource  # noqa: F401 - imported before any fork: the child must import nothing new
import selectors
import shlex
import signal
import socket
import stat
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from neurips26.nitrobox import _child, _sys, limits as _limits, maintenance, runtime
from neurips26.nitrobox.agent import TIMEOUT_CODE, _kind
from neurips26.nitrobox.config import SandboxConfig, check_env, check_path_text, check_timeout
from neurips26.nitrobox.errors import (LimitsUnavailableError, SandboxClosedError, SandboxError,
                                       SandboxStartError, SnapshotNotFoundError)
from neurips26.nitrobox.image import Image, dir_image, host_image

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class ExecResult:
    """Result of ``Sandbox.exec``.

    ``output``: stdout and stderr in order (one pipe by default; with ``merge_stderr=False`` the two
    pipes interleaved in arrival order), ``stdout``/``stderr``: the streams (with the default merged
    pipe, ``stdout`` is ``output`` and ``stderr`` is empty). ``exit_code`` is the kernel's
    (``waitpid``): the code, ``128 + signal``, or 124 with ``timed_out``.
    """

    exit_code: int
    output: str
    output_bytes: bytes = field(default=b"", repr=False)
    duration_s: float = 0.0
    timed_out: bool = False
    truncated: bool = False
    stdout_bytes: bytes = field(default=b"", repr=False)
    stderr_bytes: bytes = field(default=b"", repr=False)

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode(errors="replace")

    def __iter__(self):  # ``code, out = sb.exec(...)`` and ``== (0, "hi\n")`` comparisons
        return iter((self.exit_code, self.output))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, tuple):
            return (self.exit_code, self.output) == other
        if isinstance(other, ExecResult):
            return (self.exit_code, self.output_bytes, self.timed_out, self.truncated) == (
                other.exit_code, other.output_bytes, other.timed_out, other.truncated)
        return NotImplemented


class FileInfo(tuple):
    """``Sandbox.stat`` result: mode, size, mtime_ns, uid, gid (inside the sandbox), symlink target."""

    __slots__ = ()
    _fields = ("mode", "size", "mtime_ns", "uid", "gid", "target")

    def __new__(cls, mode: int, size: int, mtime_ns: int, uid: int, gid: int, target: str = ""):
        return super().__new__(cls, (mode, size, mtime_ns, uid, gid, target))

    mode = property(lambda self: self[0])
    size = property(lambda self: self[1])
    mtime_ns = property(lambda self: self[2])
    uid = property(lambda self: self[3])
    gid = property(lambda self: self[4])
    target = property(lambda self: self[5])

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.mode)

    @property
    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self.mode)


class ExecStream:
    """Iterator over ``(stream, bytes)`` chunks of a running exec (``"stdout"``/``"stderr"``);
    ``result`` holds the ``ExecResult`` once the iteration has ended."""

    def __init__(self, gen):
        self._gen = gen
        self.result: ExecResult | None = None
        self.pid: int | None = None

    def _set_pid(self, pid: int) -> None:
        self.pid = pid

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self._gen)
        except StopIteration as stop:
            self.result = stop.value
            raise

    def close(self) -> None:
        self._gen.close()


@dataclass
class Snapshot:
    """A frozen state: read-only layers (newest first) over an image. Usable as an image."""

    id: str
    tag: str
    lowers: list
    image: Image
    state_root: str
    _released: bool = field(default=False, repr=False)

    def release(self) -> None:
        """Drop this snapshot's references; layers no one uses any more are unlinked."""
        if not self._released:
            self._released = True
            runtime.layer_refs.release(self.lowers)

    @property
    def released(self) -> bool:
        return self._released


class BackgroundJob:
    """A command started with ``exec(..., background=True)``: its own session, output to a log file.

    The exit code comes from the sandbox's agent (``waitpid``), never from a file the job could write.
    """

    def __init__(self, sandbox: "Sandbox", job_id: str, pid: int, generation: int):
        self.sandbox, self.id, self.pid = sandbox, job_id, pid
        self._gen = generation
        self.log_path = f"{_JOBS_DIR}/{job_id}.log"

    def _ask(self, op: dict, timeout: float | None) -> str:
        sb = self.sandbox
        if sb.closed or sb._generation != self._gen:
            return str(_KILLED)  # the tree it ran in was killed (reset/restore/delete)
        reply = sb._agent_request(op, timeout)
        if reply is None:
            return "timeout"
        return reply

    def poll(self) -> int | None:
        """Exit code, or ``None`` while it runs."""
        r = self._ask({"op": "wait", "job": self.id, "block": False}, 10.0)
        return _job_code(r)

    def wait(self, timeout: float = 30.0) -> int | None:
        """Block until the job ends (its exit code) or ``timeout`` s pass (``None``)."""
        timeout = check_timeout(timeout, "timeout")
        return _job_code(self._ask({"op": "wait", "job": self.id, "block": True}, timeout))

    def output(self) -> str:
        try:
            return self.sandbox.read_file(self.log_path).decode(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the job's process group and session; ``wait`` then returns ``128 + sig``."""
        self._ask({"op": "signal", "job": self.id, "sig": int(sig)}, 10.0)


_KILLED = 128 + signal.SIGKILL
_JOBS_DIR = "/tmp/.nbx-jobs"


def _job_code(reply: str) -> int | None:
    if reply in ("running", "timeout"):
        return None
    if reply in ("unknown", "gone"):
        return _KILLED
    return int(reply)


class _Proc:
    """The live process tree of one sandbox (kept outside ``Sandbox`` for the finalizer)."""

    __slots__ = ("a_pid", "b_pid", "pidfd", "ctl", "disk_fd", "disk_a_pid", "a_pidfd", "reap_b", "a_host_pid")

    def __init__(self) -> None:
        self.a_pid = self.b_pid = self.pidfd = None
        self.ctl: socket.socket | None = None  # the agent's control socket (SOCK_SEQPACKET)
        self.disk_fd = self.disk_a_pid = None
        self.a_pidfd = None  # zygote mode: A is the zygote's child, tracked by pidfd
        self.reap_b = False  # CRIU-restored: B is our own child (child subreaper)
        self.a_host_pid = None  # A's pid in both modes (diagnostics, memory accounting)

    def detach(self) -> "_Proc":
        """Move the live tree into a new ``_Proc`` (for background teardown); this one becomes empty."""
        old = _Proc()
        for name in self.__slots__:
            setattr(old, name, getattr(self, name))
        self.__init__()
        return old

    def signal_kill(self) -> None:
        """Send SIGKILL without waiting (pidfd: never hits a reused pid)."""
        for fd in (self.pidfd, self.a_pidfd):
            if fd is not None:
                try:
                    _sys.pidfd_send_signal(fd, signal.SIGKILL)
                    return
                except OSError:
                    continue

    def kill(self) -> None:
        """SIGKILL B (pid-ns init: the kernel kills every sandbox process) and reap A."""
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
            if self.a_pidfd is not None and not _wait_fd(self.a_pidfd, 5.0):
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
            if not _wait_fd(self.a_pidfd, 5.0):
                try:
                    _sys.pidfd_send_signal(self.a_pidfd, signal.SIGKILL)
                except OSError:
                    pass
                _wait_fd(self.a_pidfd, 5.0)
            os.close(self.a_pidfd)
            self.a_pidfd = None
        if self.pidfd is not None:
            _wait_fd(self.pidfd, 10.0)  # readable once B (and so every process of its pid ns) is gone
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
        self.b_pid = None


def _wait_fd(fd: int, timeout: float) -> bool:
    sel = selectors.DefaultSelector()
    try:
        sel.register(fd, selectors.EVENT_READ)
        return bool(sel.select(timeout))
    finally:
        sel.close()


def _finalize(proc: _Proc, cgroups: list, sdir: str, root: Path, layers: list, closed: list) -> None:
    if closed[0]:
        return
    closed[0] = True
    try:
        proc.kill()
    except Exception:  # noqa: BLE001 - interpreter shutdown
        pass
    _limits.remove_cgroups(cgroups)
    runtime.layer_refs.release(layers)
    try:
        if os.path.exists(sdir):
            runtime._force_rmtree(sdir)
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
    if isinstance(image, (str, os.PathLike)):
        return dir_image(image), []
    raise TypeError(f"image must be 'host', a rootfs directory path or a Snapshot, got {type(image).__name__}")


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


class Sandbox:
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
        runtime.check_kernel(self.rootless)
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
            self._fresh_upper()
            self._closed = [False]
            self._spawn()
        except BaseException:
            self._closed = [False]
            self._teardown(wait=True)
            raise
        self._arm()

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
        self.id = cfg.name or uuid.uuid4().hex[:12]
        self._dir = root / "sandboxes" / self.id
        if cfg.spawn_mode == "zygote" or (cfg.spawn_mode == "auto" and _rss_bytes() >= 256 << 20):
            self.spawn_mode = "zygote"
        else:
            self.spawn_mode = "direct"
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
        with open(self._dir / "owner", "w") as f:
            f.write(f"{os.getpid()} {_proc_start_time(os.getpid())}\n")

    def _arm(self) -> None:
        """Finalizer (atexit + GC) and the max_lifetime watchdog."""
        self._finalizer = weakref.finalize(self, _finalize, self._proc, self._cgroups, str(self._dir), self._root,
                                           self._layers_held, self._closed)
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
            + (["net"] if self.config.network == "none" else []),
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
            "masked": ["/proc/" + p for p in _child.PROC_NULL + _child.PROC_EMPTY]
            + ["/sys/" + p for p in _child.SYS_EMPTY],
            "storage": self._storage(),
        }

    def _storage(self) -> dict[str, Any]:
        """Where the writable layer lives and what bounds it (the default surprises nobody who reads it)."""
        disk = self._limits.get("disk")
        fstype = "tmpfs" if disk else _fs_type(self._state_root)
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

    def _child_spec(self, sock: int) -> _child.ChildSpec:
        cfg = self.config
        upper, work, merged = self._paths()
        base = str(self._root)
        # layer paths relative to the state root: the sandbox's mountinfo shows no host path
        lowers = [os.path.relpath(p, base) for p in self._lowers + [self.image.lower]]
        upper_r, work_r = os.path.relpath(upper, base), os.path.relpath(work, base)
        data = f"lowerdir={':'.join(lowers)},upperdir={upper_r},workdir={work_r},userxattr"
        if len(data) > 4000:
            raise SandboxError(f"overlay options too long ({len(data)} bytes): too many layers")
        env = {"PATH": DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb",
               "HOSTNAME": cfg.hostname}
        env.update(cfg.env)
        from neurips26.nitrobox import seccomp_filter

        disk = self._limits.get("disk")
        procs = [os.path.join(d, "cgroup.procs") for d in self._cgroups]
        return _child.ChildSpec(
            sock=sock, parent_pid=os.getpid(),
            map_by_parent=not self.rootless or cfg.subuid, uid=os.geteuid(), gid=os.getegid(),
            cgroup_procs=procs, network_none=cfg.network == "none", pdeathsig_b=not cfg.criu,
            merged=merged, overlay_data=data, overlay_cwd=base, host_usr=self.image.host_usr,
            disk_dir=str(self._dir / "disk") if disk else None, disk_size=disk or 0,
            disk_mkdirs=(upper, work, upper + "/" + cfg.working_dir.strip("/").split("/")[0])
            if disk else (),
            shm_size=cfg.shm_bytes, hostname=cfg.hostname,
            rlimits=_limits.rlimits_for(self._limits, self._backend), cap_last=_CAP_LAST,
            seccomp=seccomp_filter.program(), env=env,
            usr_flags=_USR_FLAGS if self.image.host_usr else 0, trace=self._trace is not None,
            criu_agent=_criu_sources() if cfg.criu else None)

    def _spawn(self) -> None:
        """Create steps 2-11: control socket, fork A via the spawner, id map, wait for B's agent."""
        cfg = self.config
        ctl, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        child_fd = child.detach()
        proc = self._proc
        deadline = time.monotonic() + cfg.start_timeout
        try:
            spec = self._child_spec(child_fd)
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
                a_pid = runtime.spawner().fork(spec)
                proc.a_pid = proc.a_host_pid = a_pid
                proc.a_pidfd = _sys.pidfd_open(a_pid)  # our unreaped child: cannot be a reused pid
            os.close(child_fd)
            child_fd = None
            msgs = b""
            b_pid = None
            ready = False
            while b_pid is None or not ready:
                m, new_ctl = _recv_msg(ctl, deadline)
                if not m:
                    raise SandboxStartError(_start_error(msgs, "child exited before reporting"))
                msgs += m
                if new_ctl is not None:  # criu mode: B's control socket lives in the sandbox's netns
                    ctl.close()
                    ctl = new_ctl
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
            self._generation += 1
            self._shell_dead = False
        except BaseException:
            if child_fd is not None:
                os.close(child_fd)
            proc.kill()
            raise
        finally:
            if ctl is not None:
                ctl.close()

    def _write_maps(self, a_pid: int) -> None:
        if not self.rootless:
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{a_pid}/{name}", "w") as f:
                    f.write("0 0 65536\n")
        else:  # rootless subuid: newuidmap/newgidmap from /etc/subuid
            import subprocess

            uid, gid = os.geteuid(), os.getegid()
            sub_u = _subid("/etc/subuid", uid)
            sub_g = _subid("/etc/subgid", gid)
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

    def _send(self, op: dict, fds: list[int]) -> None:
        """One request to the agent (``marshal`` dict + fds); ``_AgentGone`` if it is not there."""
        ctl = self._proc.ctl
        if ctl is None:
            raise _AgentGone()
        try:
            with self._send_lock:
                socket.send_fds(ctl, [marshal.dumps(op)], fds)
        except OSError:
            raise _AgentGone() from None

    def _agent_request(self, op: dict, timeout: float | None) -> str | None:
        """Send ``op`` with a fresh reply pipe; the reply text after the nonce, or None on timeout."""
        nonce = secrets.token_hex(8)
        op = dict(op, n=nonce)
        r, w = os.pipe2(os.O_CLOEXEC)
        try:
            try:
                self._send(op, [w])
            except _AgentGone:
                return "gone"
            finally:
                os.close(w)
            line = _read_line(r, None if timeout is None else time.monotonic() + timeout)
        finally:
            os.close(r)
        if line is None:
            return None
        got, _, rest = line.partition(" ")
        if got != nonce:  # EOF (the agent died) or a reply that is not ours
            return "gone"
        return rest

    def _exec_gen(self, cmd: str, timeout: float | None, workdir: str | None, env: dict,
                  stdin: bytes | None, stateful: bool, merge: bool, user: tuple | None = None, on_pid=None):
        """The exec protocol as a generator of ``(stream, bytes)``; returns the ``ExecResult``.

        1. fresh pipes: status (agent -> client only), stdout, stderr (unless merged), stdin;
        2. one ``exec`` request with a per-exec nonce; the write ends go to the agent, ours are closed;
        3. read both streams (epoll) and feed stdin until the status line arrives, check its nonce;
        4. drain what the command wrote before it exited, then hand our read ends to the agent to
           discard (late writers of background processes neither block nor reach a later exec).
        """
        cap = self.config.max_output_bytes
        # no exec-wide lock: execs of one sandbox run concurrently (each has its own pipes); the
        # lifecycle lock covers only the hand-over of the request, so a reset never sees half a send
        with self._life:
            self._check_open()
            if self._shell_dead:
                self._respawn_keep()
            nonce = secrets.token_hex(8)
            st_r, st_w = os.pipe2(os.O_CLOEXEC)
            out_r, out_w = os.pipe2(os.O_CLOEXEC)
            err_r = err_w = in_r = in_w = None
            if not merge:
                err_r, err_w = os.pipe2(os.O_CLOEXEC)
            if stdin is not None:
                in_r, in_w = os.pipe2(os.O_CLOEXEC)
            wd = workdir or self.config.working_dir
            op = {"op": "exec", "n": nonce, "cmd": cmd, "env": env, "cwd": self.config.working_dir if stateful
                  else wd, "wd": workdir if stateful else None, "timeout": timeout, "merge": merge,
                  "stdin": stdin is not None, "state": stateful}
            if user is not None:
                op["uid"], op["gid"] = user
            fds = [st_w, out_w] + ([err_w] if err_w is not None else []) + ([in_r] if in_r is not None else [])
            gen = self._generation  # an EOF from a tree that a reset has since replaced is not "dead"
            t0 = time.monotonic()
            try:
                self._send(op, fds)
            except _AgentGone:
                self._shell_dead = True
                for fd in (st_r, out_r, err_r, in_w):
                    if fd is not None:
                        os.close(fd)
                return ExecResult(_KILLED, "", b"", 0.0, False, False)
            finally:
                for fd in fds:
                    os.close(fd)
        caps = {"stdout": _Capture(cap), "stderr": _Capture(cap)}
        merged = _Capture(cap)
        streams = {out_r: "stdout"}
        if err_r is not None:
            streams[err_r] = "stderr"
        open_streams = dict(streams)
        for fd in streams:
            os.set_blocking(fd, False)
        view = memoryview(stdin) if stdin is not None else None
        if in_w is not None:
            os.set_blocking(in_w, False)
        status = bytearray()
        line = None
        sel = selectors.DefaultSelector()
        # client-side backstop only (the agent enforces ``timeout``): a stuck agent is replaced
        backstop = None if timeout is None else t0 + timeout + 10.0
        try:
            for fd in streams:
                sel.register(fd, selectors.EVENT_READ, "out")
            sel.register(st_r, selectors.EVENT_READ, "st")
            if in_w is not None:
                if view:
                    sel.register(in_w, selectors.EVENT_WRITE, "in")
                else:
                    os.close(in_w)
                    in_w = None
            while line is None:
                wait = None if backstop is None else backstop - time.monotonic()
                if wait is not None and wait <= 0:
                    break
                for key, _ in sel.select(wait):
                    if key.data == "in":
                        try:
                            n = os.write(in_w, view[:1 << 16])
                        except BlockingIOError:
                            continue
                        except OSError:  # the command closed its stdin
                            n = len(view)
                        view = view[n:]
                        if not view:
                            sel.unregister(in_w)
                            os.close(in_w)
                            in_w = None
                    elif key.data == "st":
                        data = os.read(st_r, 4096)
                        status += data
                        while b"\n" in status:
                            first, _, rest = bytes(status).partition(b"\n")
                            status = bytearray(rest)
                            text = first.decode(errors="replace")
                            if text.startswith(nonce + " P "):
                                if on_pid is not None:
                                    on_pid(int(text.split()[2]))
                                continue
                            line = text
                            break
                        if not data and line is None:
                            line = ""
                        if line is not None:
                            sel.unregister(st_r)
                    else:
                        try:
                            data = os.read(key.fd, 1 << 16)
                        except BlockingIOError:
                            continue
                        if not data:
                            sel.unregister(key.fd)
                            open_streams.pop(key.fd, None)
                            continue
                        name = streams[key.fd]
                        caps[name].add(data)
                        merged.add(data)
                        yield name, data
            # the command has exited: what it wrote is in the pipes already
            for fd in list(open_streams):
                while True:
                    try:
                        data = os.read(fd, 1 << 16)
                    except (BlockingIOError, InterruptedError):
                        break
                    if not data:
                        open_streams.pop(fd, None)
                        break
                    name = streams[fd]
                    caps[name].add(data)
                    merged.add(data)
                    yield name, data
        finally:
            sel.close()
            if in_w is not None:
                os.close(in_w)
            os.close(st_r)
            late = list(open_streams)
            for fd in streams:
                if fd not in late:
                    os.close(fd)
            if late:
                try:
                    self._send({"op": "discard"}, late)
                except _AgentGone:
                    pass
                for fd in late:
                    os.close(fd)
        dur = time.monotonic() - t0
        timed_out = False
        if line is None:  # backstop: the agent did not answer in time
            self._shell_dead = self._shell_dead or self._generation == gen
            code, timed_out = TIMEOUT_CODE, True
        else:
            got, _, rest = line.partition(" ")
            parts = rest.split(" ")
            if not line or got != nonce or not parts or parts[0] == "E":
                if got == nonce and parts and parts[0] == "E":
                    raise SandboxError(f"sandbox {self.id}: {rest[2:]}")
                self._shell_dead = self._shell_dead or self._generation == gen  # EOF: agent died (OOM, delete)
                code = _KILLED
            else:
                code = int(parts[0])
                timed_out = len(parts) > 1 and parts[1] == "T"
        raw = merged.value()
        out_b = caps["stdout"].value()
        return ExecResult(code, raw.decode(errors="replace"), raw, dur, timed_out,
                          merged.total > cap or caps["stdout"].total > cap or caps["stderr"].total > cap,
                          out_b, caps["stderr"].value())

    def _check_exec_args(self, cmd, timeout, workdir, env, stdin, stateful):
        if isinstance(cmd, (list, tuple)):
            if not all(isinstance(c, str) for c in cmd):
                raise TypeError("cmd list must contain only str")
            cmd = shlex.join(cmd)
        if not isinstance(cmd, str):
            raise TypeError(f"cmd must be a str or a list of str, got {type(cmd).__name__}")
        if "\0" in cmd:
            raise ValueError("cmd must not contain NUL bytes")
        if timeout is None:
            timeout = self.config.exec_timeout
        timeout = check_timeout(timeout, "timeout", allow_none=True)
        if workdir is not None:
            check_path_text(workdir, "workdir")
            if not workdir.startswith("/"):
                workdir = os.path.join(self.config.working_dir, workdir)
        env = check_env(env or {}, "env")
        if stdin is not None and not isinstance(stdin, (bytes, bytearray, str)):
            raise TypeError(f"stdin must be bytes or str, got {type(stdin).__name__}")
        if isinstance(stdin, str):
            stdin = stdin.encode()
        stateful = self.config.stateful if stateful is None else bool(stateful)
        return cmd, timeout, workdir, env, stdin, stateful

    def exec(self, cmd: str | list, timeout: float | None = None, workdir: str | None = None,
             env: Mapping[str, str] | None = None, stdin: bytes | str | None = None,
             background: bool = False, stateful: bool | None = None, merge_stderr: bool = True,
             on_output: Callable[[str, bytes], Any] | None = None,
             user: str | int | None = None) -> ExecResult | BackgroundJob:
        """Run ``cmd`` with ``bash -c`` in the sandbox (see ``agent.py`` for the protocol).

        ``timeout``: the agent SIGKILLs the command's session (exit 124, ``timed_out``).
        ``stateful``: cwd, variables and functions persist across stateful execs (never into
        non-stateful ones). ``merge_stderr=False``: separate ``stdout``/``stderr``. ``on_output``:
        called with ``("stdout"|"stderr", chunk)`` as output arrives. ``background``: a
        ``BackgroundJob`` (its own session; output in ``job.output()``). ``user``: a name from the
        image's ``/etc/passwd``, a uid, or ``"uid:gid"`` (needs those ids mapped: rootful or subuid).
        """
        cmd, timeout, workdir, env, stdin, stateful = self._check_exec_args(cmd, timeout, workdir, env,
                                                                             stdin, stateful)
        if on_output is not None and not callable(on_output):
            raise TypeError(f"on_output must be callable, got {type(on_output).__name__}")
        ids = self._resolve_user(user)
        if ids is not None and "HOME" not in env:
            env = dict(env, HOME=ids[2])
        if background:
            return self._start_background(cmd, workdir, env, stateful, None if ids is None else ids[:2])
        gen = self._exec_gen(cmd, timeout, workdir, env, stdin, stateful, bool(merge_stderr),
                             None if ids is None else ids[:2])
        while True:
            try:
                name, chunk = next(gen)
            except StopIteration as stop:
                return stop.value
            if on_output is not None:
                on_output(name, chunk)

    def exec_stream(self, cmd: str | list, timeout: float | None = None, workdir: str | None = None,
                    env: Mapping[str, str] | None = None, stdin: bytes | str | None = None,
                    stateful: bool | None = None, merge_stderr: bool = False,
                    user: str | int | None = None) -> ExecStream:
        """``for stream, chunk in sb.exec_stream("pytest -x"): ...``; then ``.result``; ``.pid`` is the
        command's pid inside the sandbox once the first chunk (or the end) has been read."""
        cmd, timeout, workdir, env, stdin, stateful = self._check_exec_args(cmd, timeout, workdir, env,
                                                                             stdin, stateful)
        ids = self._resolve_user(user)
        if ids is not None and "HOME" not in env:
            env = dict(env, HOME=ids[2])
        stream = ExecStream(None)
        stream._gen = self._exec_gen(cmd, timeout, workdir, env, stdin, stateful, bool(merge_stderr),
                                     None if ids is None else ids[:2], on_pid=stream._set_pid)
        return stream

    def _resolve_user(self, user: str | int | None) -> tuple[int, int, str] | None:
        """(uid, gid, home) from the sandbox's own /etc/passwd and /etc/group; None = root."""
        if user is None or user == "" or user == "root" or user == 0:
            return None
        if isinstance(user, bool) or not isinstance(user, (str, int)):
            raise TypeError(f"user must be a name, a uid or 'uid:gid', got {user!r}")
        name, _, group = str(user).partition(":")
        try:
            passwd = self.read_file("/etc/passwd").decode(errors="replace").splitlines()
        except OSError:
            passwd = []
        entry = next((ln.split(":") for ln in passwd if ln.split(":")[:1] == [name]
                      or (name.isdigit() and len(ln.split(":")) > 2 and ln.split(":")[2] == name)), None)
        if entry is not None and len(entry) >= 6:
            uid, gid, home = int(entry[2]), int(entry[3]), entry[5] or "/"
        elif name.isdigit():
            uid, gid, home = int(name), int(name), "/"
        else:
            raise ValueError(f"user {name!r} is not in the sandbox's /etc/passwd")
        if group:
            if group.isdigit():
                gid = int(group)
            else:
                try:
                    groups = self.read_file("/etc/group").decode(errors="replace").splitlines()
                except OSError:
                    groups = []
                g = next((ln.split(":") for ln in groups if ln.split(":")[:1] == [group]), None)
                if g is None or len(g) < 3:
                    raise ValueError(f"group {group!r} is not in the sandbox's /etc/group")
                gid = int(g[2])
        return uid, gid, home

    def _start_background(self, cmd: str, workdir: str | None, env: dict, stateful: bool,
                          user: tuple | None = None) -> BackgroundJob:
        with self._life:
            self._check_open()
            if self._shell_dead:
                self._respawn_keep()
            self._jobs += 1
            jid = f"{self._jobs}-{uuid.uuid4().hex[:6]}"
            wd = workdir or self.config.working_dir
            op = {"op": "spawn", "job": jid, "cmd": cmd, "env": env, "cwd": self.config.working_dir
                  if stateful else wd, "wd": workdir if stateful else None, "timeout": None, "merge": True,
                  "stdin": False, "state": stateful, "log": f"{_JOBS_DIR}/{jid}.log"}
            if user is not None:
                op["uid"], op["gid"] = user
            gen = self._generation
            reply = self._agent_request(op, 30.0)
        if reply in (None, "gone") or not reply.isdigit():
            raise SandboxError(f"could not start background job in sandbox {self.id}: {reply}")
        return BackgroundJob(self, jid, int(reply), gen)

    # ------------------------------------------------------------------ files API (openat2)
    # The files API: every path is resolved and opened by the sandbox's agent, inside the sandbox's
    # root and mounts, with a command's capabilities (never host root's), never through /proc magic
    # links; the opened fd comes back over SCM_RIGHTS and the client only reads or writes it.
    # Non-regular files are refused unless ``special=True``; reads are capped (``max_file_bytes``);
    # trees keep symlinks as symlinks (never followed, so no loops), modes and mtimes.
    def _abs(self, path: str, name: str = "path") -> str:
        check_path_text(path, name)
        if not path:
            raise ValueError(f"{name} must be a non-empty str")
        if not path.startswith("/"):
            path = os.path.join(self.config.working_dir, path)
        return path

    def _fop(self, op: dict, timeout: float = 60.0) -> tuple[list[str], list[int]]:
        """One file operation in the agent: (reply fields after ``OK``, fds) or the errno as OSError."""
        with self._life:
            self._check_open()
            if self._shell_dead:
                self._respawn_keep()
            nonce = secrets.token_hex(8)
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                try:
                    self._send(dict(op, n=nonce), [theirs.fileno()])
                except _AgentGone:
                    self._shell_dead = True
                    raise SandboxError(f"sandbox {self.id}: agent is gone (retry)") from None
                finally:
                    theirs.close()
                ours.settimeout(timeout)
                try:
                    msg, fds, _, _ = socket.recv_fds(ours, 1 << 16, 4)
                except socket.timeout:
                    raise SandboxError(f"sandbox {self.id}: file operation {op['op']} timed out") from None
            finally:
                ours.close()
        text = msg.decode(errors="replace")
        got, _, rest = text.partition(" ")
        if got != nonce:
            for fd in fds:
                os.close(fd)
            self._shell_dead = not text
            raise SandboxError(f"sandbox {self.id}: no answer from the agent for {op['op']}")
        if rest.startswith("E "):
            _, num, msg_ = rest.split(" ", 2)
            raise OSError(int(num), msg_, op.get("path"))
        return rest.split(" ")[1:], fds

    def stat(self, path: str, follow_symlinks: bool = True) -> FileInfo:
        """Type, mode, size, mtime and owner of ``path`` in the sandbox (``target`` for a symlink)."""
        p = self._abs(path)
        f, _ = self._fop({"op": "lstat", "path": p, "follow": bool(follow_symlinks)})
        return FileInfo(int(f[0]), int(f[1]), int(f[2]), int(f[3]), int(f[4]), " ".join(f[5:]))

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644, mkdirs: bool = True,
                   mtime_ns: int | None = None, special: bool = False) -> None:
        """Write ``data`` at ``path`` (created with ``mode``; parents created when ``mkdirs``)."""
        if isinstance(data, str):
            data = data.encode()
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes or str, got {type(data).__name__}")
        mode = _check_mode(mode)
        p = self._abs(path)
        _, fds = self._fop({"op": "open", "how": "w", "path": p, "perm": mode, "parents": bool(mkdirs),
                            "special": bool(special)})
        fd = fds[0]
        try:
            os.set_blocking(fd, True)
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if mtime_ns is not None:
                os.utime(fd, ns=(int(mtime_ns), int(mtime_ns)))
        finally:
            os.close(fd)

    def read_file(self, path: str, max_bytes: int | None = None, special: bool = False,
                  follow_symlinks: bool = True) -> bytes:
        """Bytes of the regular file ``path`` (``FileNotFoundError`` if missing).

        More than ``max_bytes`` (default ``config.max_file_bytes``) raises ``OSError(EFBIG)``;
        a FIFO, device or socket raises ``OSError(EINVAL)`` unless ``special=True``.
        """
        cap = self.config.max_file_bytes if max_bytes is None else max_bytes
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
            raise ValueError(f"max_bytes must be an int >= 0, got {max_bytes!r}")
        p = self._abs(path)
        _, fds = self._fop({"op": "open", "how": "r", "path": p, "special": bool(special),
                            "nofollow": not follow_symlinks})
        fd = fds[0]
        try:
            if special:
                os.set_blocking(fd, True)
            chunks, total = [], 0
            while total <= cap:
                try:
                    b = os.read(fd, min(1 << 20, cap + 1 - total))
                except BlockingIOError:
                    break
                if not b:
                    break
                chunks.append(b)
                total += len(b)
            if total > cap:
                raise OSError(errno.EFBIG, f"{p} in sandbox {self.id} is larger than max_bytes={cap}", path)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def read_text(self, path: str, **kw: Any) -> str:
        return self.read_file(path, **kw).decode(errors="replace")

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return False

    def list_dir(self, path: str = ".") -> list[str]:
        _, fds = self._fop({"op": "open", "how": "dir", "path": self._abs(path)})
        try:
            return sorted(os.listdir(fds[0]))
        finally:
            os.close(fds[0])

    def mkdir(self, path: str, mode: int = 0o755, parents: bool = True) -> None:
        self._fop({"op": "mkdir", "path": self._abs(path), "perm": _check_mode(mode), "parents": bool(parents),
                   "exist_ok": True, "chmod": not parents})

    def symlink(self, target: str, path: str, replace: bool = False) -> None:
        """Create the symlink ``path -> target`` in the sandbox (``target`` is not checked)."""
        check_path_text(target, "target")
        self._fop({"op": "symlink", "path": self._abs(path), "target": target, "replace": bool(replace)})

    def link(self, target: str, path: str, replace: bool = False) -> None:
        """Create the hard link ``path`` to the existing ``target`` in the sandbox."""
        self._fop({"op": "link", "path": self._abs(path), "target": self._abs(target, "target"),
                   "replace": bool(replace)})

    def set_mtime(self, path: str, mtime_ns: int, follow_symlinks: bool = True) -> None:
        self._fop({"op": "utime", "path": self._abs(path), "ns": int(mtime_ns), "nofollow": not follow_symlinks})

    def upload(self, local: str | os.PathLike, remote: str) -> list[str]:
        """Copy a host file or tree into the sandbox at ``remote``: modes and mtimes kept, symlinks
        inside the tree copied as symlinks. Returns the host paths skipped (FIFOs, devices, sockets)."""
        local = Path(local)
        st = os.stat(local)  # the top level may be a symlink to what the user means
        skipped: list[str] = []
        remote = self._abs(remote, "remote")
        if stat.S_ISDIR(st.st_mode):
            self._upload_dir(str(local), remote, st, skipped, 0)
        elif stat.S_ISREG(st.st_mode):
            self._upload_file(str(local), remote, st)
        else:
            raise OSError(errno.EINVAL, f"{local} is a {_kind_name(st.st_mode)}, not a file or directory", str(local))
        return skipped

    def _upload_file(self, src: str, dst: str, st: os.stat_result) -> None:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        self.write_file(dst, data, stat.S_IMODE(st.st_mode), mkdirs=True, mtime_ns=st.st_mtime_ns)

    def _upload_dir(self, src: str, dst: str, st: os.stat_result, skipped: list, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise OSError(errno.ELOOP, f"directory tree deeper than {_MAX_DEPTH} levels", src)
        self._fop({"op": "mkdir", "path": dst, "perm": stat.S_IMODE(st.st_mode) | 0o700, "exist_ok": True,
                   "parents": depth == 0})
        with os.scandir(src) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            est = e.stat(follow_symlinks=False)
            s, d = os.path.join(src, e.name), dst.rstrip("/") + "/" + e.name
            if stat.S_ISLNK(est.st_mode):
                self.symlink(os.readlink(s), d, replace=True)
            elif stat.S_ISDIR(est.st_mode):
                self._upload_dir(s, d, est, skipped, depth + 1)
            elif stat.S_ISREG(est.st_mode):
                self._upload_file(s, d, est)
            else:
                skipped.append(s)
        self._fop({"op": "mkdir", "path": dst, "perm": stat.S_IMODE(st.st_mode), "exist_ok": True})
        self.set_mtime(dst, st.st_mtime_ns)

    def download(self, remote: str, local: str | os.PathLike) -> list[str]:
        """Copy a sandbox file or tree to ``local``: modes and mtimes kept, symlinks kept as symlinks
        (never followed, so a ``loop -> ..`` is one link). Returns the sandbox paths skipped
        (FIFOs, devices, sockets); each file is capped at ``max_file_bytes``."""
        local = Path(local)
        rp = self._abs(remote, "remote")
        info = self.stat(rp)
        skipped: list[str] = []
        if stat.S_ISDIR(info.mode):
            local.mkdir(parents=True, exist_ok=True)
            self._download_dir(rp, str(local), info, skipped, 0)
        elif stat.S_ISREG(info.mode):
            local.parent.mkdir(parents=True, exist_ok=True)
            self._download_file(rp, str(local), info, follow=True)
        else:
            raise OSError(errno.EINVAL, f"{rp} is a {_kind_name(info.mode)}, not a file or directory", remote)
        return skipped

    def _download_file(self, src: str, dst: str, info: "FileInfo | os.stat_result", follow: bool) -> None:
        data = self.read_file(src, follow_symlinks=follow)
        mode = stat.S_IMODE(info.st_mode if hasattr(info, "st_mode") else info.mode)
        mtime = info.st_mtime_ns if hasattr(info, "st_mtime_ns") else info.mtime_ns
        try:
            os.unlink(dst)
        except FileNotFoundError:
            pass
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            os.utime(fd, ns=(mtime, mtime))
        finally:
            os.close(fd)

    def _download_dir(self, src: str, dst: str, info, skipped: list, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise OSError(errno.ELOOP, f"directory tree deeper than {_MAX_DEPTH} levels", src)
        _, fds = self._fop({"op": "open", "how": "dir", "path": src, "nofollow": depth > 0})
        dfd = fds[0]
        try:
            with os.scandir(dfd) as it:  # names and lstat only: nothing is opened through this fd
                entries = sorted(((e.name, e.stat(follow_symlinks=False)) for e in it), key=lambda x: x[0])
            links = {n: os.readlink(n, dir_fd=dfd) for n, st in entries if stat.S_ISLNK(st.st_mode)}
        finally:
            os.close(dfd)
        for name, st in entries:
            s, d = src.rstrip("/") + "/" + name, os.path.join(dst, name)
            if stat.S_ISLNK(st.st_mode):
                if os.path.lexists(d):
                    os.unlink(d)
                os.symlink(links[name], d)
            elif stat.S_ISDIR(st.st_mode):
                os.makedirs(d, exist_ok=True)
                self._download_dir(s, d, st, skipped, depth + 1)
            elif stat.S_ISREG(st.st_mode):
                self._download_file(s, d, st, follow=False)
            else:
                skipped.append(s)
        mode = stat.S_IMODE(info.st_mode if hasattr(info, "st_mode") else info.mode)
        mtime = info.st_mtime_ns if hasattr(info, "st_mtime_ns") else info.mtime_ns
        os.chmod(dst, mode | 0o700 if os.geteuid() != 0 else mode)
        os.utime(dst, ns=(mtime, mtime))

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
        self._fresh_upper()
        if old is None and tdir is not None:
            runtime.reaper().submit(str(tdir))
        elif old is not None:
            def job(old=old, tdir=tdir):
                old.kill()
                if tdir is not None:
                    runtime._force_rmtree(str(tdir))
            runtime.reaper().submit(job)

    def _retire_tree(self) -> "_Proc | None":
        """SIGKILL the tree. Without cgroups the wait for it happens in the background (returns the
        detached tree); with cgroups we wait here, so a pids/memory limit is not shared with dying
        processes of the previous tree."""
        if self._cgroups:
            self._proc.kill()
            return None
        old = self._proc.detach()
        old.signal_kill()
        return old

    def reset(self) -> None:
        """Back to the creation-time state: kill the tree, rename the upper away, respawn.

        O(1) in the data size: the old upper is renamed into the trash and unlinked (after the old
        tree has died) by the background reaper while the new tree starts.
        """
        with self._exec_lock, self._life:
            self._check_open()
            old = self._retire_tree()
            self._new_upper(old)
            self._set_lowers(list(self._base_lowers))
            self._spawn()

    def _set_lowers(self, lowers: list) -> None:
        runtime.layer_refs.acquire(lowers, self._root)
        old = self._lowers
        self._lowers = lowers
        self._layers_held[:] = self._base_lowers + self._lowers
        runtime.layer_refs.release(old)

    def snapshot(self, tag: str | None = None, method: str = "freeze") -> Snapshot:
        """Freeze the current filesystem as a read-only layer (O(1): a rename) and continue on top.

        ``method="freeze"`` restarts the shell (processes are lost, files kept); ``method="copy"``
        copies the upper with ``cp -a`` without restarting (racy while commands run).
        """
        if tag is not None and (not isinstance(tag, str) or not tag or "/" in tag or "\0" in tag):
            raise ValueError(f"tag must be a non-empty str without '/' or NUL, got {tag!r}")
        if method not in ("freeze", "copy"):
            raise ValueError(f"method must be 'freeze' or 'copy', got {method!r}")
        with self._exec_lock, self._life:
            self._check_open()
            lid = uuid.uuid4().hex[:16]
            layer = str(self._root / "layers" / lid)
            upper, _, _ = self._paths()
            disk = bool(self._limits.get("disk"))
            if method == "copy" or disk:
                src = upper
                if disk:  # the upper lives on a tmpfs inside the ns: reach it through B's /proc
                    src = self._disk_upper_path()
                import subprocess

                os.mkdir(layer)
                r = subprocess.run(["cp", "-a", "--reflink=auto", src + "/.", layer + "/"],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    runtime.trash(self._root, layer)
                    raise SandboxError(f"snapshot copy failed: {r.stderr.strip()}")
                if method == "freeze":
                    self._proc.kill()
                    self._fresh_upper()
            else:
                self._proc.kill()
                os.rename(upper, layer)
                _, work, _ = self._paths()
                runtime.trash(self._root, work)
                self._fresh_upper()
            lowers = [layer] + self._lowers
            if len(lowers) > self.config.max_layers:
                lowers = self._squash(lowers)
            self._set_lowers(lowers)
            if self._proc.b_pid is None:
                self._spawn()
            snap = Snapshot(lid, tag or lid, list(lowers), self.image, self._state_root)
            runtime.layer_refs.acquire(snap.lowers, self._root)
            self._snapshots[snap.tag] = snap
            return snap

    def _disk_upper_path(self) -> str:
        """The tmpfs upper exists only inside the sandbox's mount ns: reach it through A's O_PATH fd."""
        return f"/proc/{self._proc.disk_a_pid}/fd/{self._proc.disk_fd}/upper"

    def _squash(self, lowers: list) -> list:
        """Keep the overlay option string short: merge the newest layers into one (O(data) copy).

        Overlay semantics are replayed oldest to newest: a whiteout (char 0/0) deletes and stays a
        whiteout (older layers below may hold the path), an opaque dir (``user.overlay.opaque``)
        replaces the directory, anything else overwrites. Unprivileged whiteout creation is allowed
        since Linux 5.8, so this works rootless too.
        """
        k = len(lowers) - self.config.max_layers + 1
        group, rest = lowers[:k], lowers[k:]
        dest = str(self._root / "layers" / uuid.uuid4().hex[:16])
        os.mkdir(dest)
        try:
            for layer in reversed(group):  # oldest of the group first
                _merge_layer(layer, dest)
        except BaseException:
            runtime.trash(self._root, dest)
            raise
        return [dest] + rest

    def restore(self, snapshot: Snapshot | str) -> None:
        """Kill the tree, start a fresh upper over the snapshot's layers."""
        snap = self._lookup(snapshot)
        with self._exec_lock, self._life:
            self._check_open()
            if snap.image.lower != self.image.lower:
                raise ValueError("snapshot was taken from a different image")
            old = self._retire_tree()
            self._new_upper(old)
            self._set_lowers(list(snap.lowers))
            self._spawn()

    def _lookup(self, snapshot: Snapshot | str) -> Snapshot:
        if isinstance(snapshot, str):
            if snapshot not in self._snapshots:
                raise SnapshotNotFoundError(f"no snapshot tagged {snapshot!r} in sandbox {self.id}")
            snapshot = self._snapshots[snapshot]
        if not isinstance(snapshot, Snapshot):
            raise TypeError(f"snapshot must be a Snapshot or a tag str, got {type(snapshot).__name__}")
        if snapshot.released:
            raise SnapshotNotFoundError(f"snapshot {snapshot.id!r} was released")
        return snapshot

    def branch(self, snapshot: Snapshot | str, n: int = 1, **overrides: Any) -> list["Sandbox"]:
        """``n`` new sandboxes sharing the snapshot's frozen layers, each with its own empty upper."""
        snap = self._lookup(snapshot)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an int >= 1, got {n!r}")
        kw = {k: getattr(self.config, k) for k in SandboxConfig.__dataclass_fields__}
        kw.update(image=snap, name=None, state_root=self._state_root)
        kw.update(overrides)
        out: list[Sandbox] = []
        try:
            for _ in range(n):
                out.append(Sandbox(kw))
        except BaseException:
            for sb in out:
                sb.delete()
            raise
        return out

    def _teardown(self, wait: bool, background: bool = False) -> threading.Event | None:
        """Kill, remove cgroups, release layers, trash the state dir.

        ``background=True`` (delete): SIGKILL now, rename the state dir now (O(1)), and let the
        reaper wait for the tree, remove the cgroups, release the layers and unlink.
        """
        snaps = list(self._snapshots.values())
        self._snapshots.clear()
        layers = list(self._layers_held)
        self._layers_held.clear()
        cgroups = list(self._cgroups)
        self._closed[0] = True
        if not background:
            self._proc.kill()
            _limits.remove_cgroups(cgroups)
            runtime.layer_refs.release(layers)
            for snap in snaps:
                snap.release()
            return runtime.trash(self._root, self._dir, wait=wait)
        old = self._proc.detach()
        old.signal_kill()
        dest = self._root / "trash" / uuid.uuid4().hex
        try:
            os.rename(self._dir, dest)
        except OSError:
            dest = self._dir

        def job() -> None:
            old.kill()
            _limits.remove_cgroups(cgroups)
            runtime.layer_refs.release(layers)
            for snap in snaps:
                snap.release()
            runtime._force_rmtree(str(dest))

        ev = runtime.reaper().submit(job)
        if wait:
            ev.wait()
        return ev

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
        from neurips26.nitrobox import criu

        return criu.checkpoint(self, path)

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, n: int = 1):
        from neurips26.nitrobox import criu

        return criu.restore(path, n)


# ---------------------------------------------------------------------------------------- helpers
_MAX_DEPTH = 256


def _check_mode(mode: Any) -> int:
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
        raise ValueError(f"mode must be an int permission in [0, 0o7777], got {mode!r}")
    return mode


def _kind_name(mode: int) -> str:
    return _kind(mode)


class _AgentGone(Exception):
    """The sandbox's agent is not reachable (it died, or the tree is being replaced)."""


class _Capture:
    """Head and tail of a stream, ``cap`` bytes in all (the middle of a flood is dropped)."""

    __slots__ = ("half", "head", "tail", "total")

    def __init__(self, cap: int):
        self.half = cap // 2
        self.head, self.tail = bytearray(), bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        if len(self.head) < self.half:
            take = self.half - len(self.head)
            self.head += data[:take]
            data = data[take:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[:len(self.tail) - self.half]

    def value(self) -> bytes:
        return bytes(self.head + self.tail)


def _read_line(fd: int, deadline: float | None) -> str | None:
    """One reply line from a pipe ('' on EOF, None when ``deadline`` passes first)."""
    buf = b""
    while b"\n" not in buf:
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            return None
        if not _wait_fd(fd, 3600.0 if wait is None else min(wait, 3600.0)):
            continue  # the deadline check above ends the wait
        data = os.read(fd, 4096)
        if not data:
            break
        buf += data
    return buf.split(b"\n", 1)[0].decode(errors="replace")


_OPAQUE = "user.overlay.opaque"


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        runtime._force_rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _merge_layer(src: str, dst: str) -> None:
    """Apply overlay layer ``src`` on top of the merged layer ``dst`` (see ``Sandbox._squash``)."""
    import shutil

    for name in sorted(os.listdir(src)):
        s, d = os.path.join(src, name), os.path.join(dst, name)
        st = os.lstat(s)
        if _is_whiteout(st):
            _remove(d)
            os.mknod(d, stat.S_IFCHR | 0o000, 0)
        elif stat.S_ISDIR(st.st_mode):
            try:
                opaque = os.getxattr(s, _OPAQUE, follow_symlinks=False) == b"y"
            except OSError:
                opaque = False
            if os.path.lexists(d) and (opaque or not os.path.isdir(d) or os.path.islink(d)):
                _remove(d)
            if not os.path.lexists(d):
                os.mkdir(d, stat.S_IMODE(st.st_mode))
                if opaque:
                    os.setxattr(d, _OPAQUE, b"y", follow_symlinks=False)
            os.chmod(d, stat.S_IMODE(st.st_mode))
            _merge_layer(s, d)
        else:
            _remove(d)
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(s), d)
            else:
                shutil.copy2(s, d, follow_symlinks=False)
        if os.geteuid() == 0:
            os.chown(d, st.st_uid, st.st_gid, follow_symlinks=False)


def _recv(sock: socket.socket, n: int, deadline: float) -> bytes:
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    try:
        return sock.recv(n)
    except socket.timeout:
        raise SandboxStartError("sandbox did not start in time (start_timeout)") from None


def _recv_msg(sock: socket.socket, deadline: float) -> tuple[bytes, "socket.socket | None"]:
    """One start-up message; a passed fd (criu mode's replacement control socket) comes back too."""
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    try:
        msg, fds, _, _ = socket.recv_fds(sock, 65536, 1)
    except socket.timeout:
        raise SandboxStartError("sandbox did not start in time (start_timeout)") from None
    new = None
    if fds:
        new = socket.socket(fileno=fds[0])
        new.settimeout(max(0.001, deadline - time.monotonic()))
    return msg, new


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


def _subid(path: str, ident: int) -> tuple[int, int] | None:
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


def _descendants(pid: int) -> list[int]:
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


_CRIU_SRC: dict | None = None


def _criu_sources() -> dict:
    """Source text of ``_sys`` and ``agent`` for the criu-mode agent (read once, before any fork)."""
    global _CRIU_SRC
    if _CRIU_SRC is None:
        here = Path(__file__).resolve().parent
        _CRIU_SRC = {"sys_src": (here / "_sys.py").read_text(), "agent_src": (here / "agent.py").read_text()}
    return _CRIU_SRC


def _fs_type(path: str) -> str:
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


def _proc_start_time(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


_CAP_LAST = _sys.cap_last_cap()
try:
    _USR_FLAGS = _sys.locked_mount_flags("/usr")
except OSError:
    _USR_FLAGS = 0
