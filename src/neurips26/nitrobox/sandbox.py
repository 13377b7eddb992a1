"""``Sandbox``: one daemon-less process tree over a copy-on-write overlay of a shared image.

State dir ``<state_root>/sandboxes/<id>/{upper,work,merged}`` + one process tree (child A in the
host pid ns, child B = pid 1 of the sandbox running ``bash``). The client talks to B's shell over
three pipes (stdin, stdout+stderr, a status pipe at fd 3). No server, registry, bridge or log
driver: create is fork + unshare + overlay + pivot_root + exec, reset is kill + rename(upper) +
create, delete is kill + rename(state dir) with the unlinking done by a background reaper.
"""

from __future__ import annotations

import errno
import fcntl
import os
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
from typing import Any, Mapping

from neurips26.nitrobox import _child, _sys, limits as _limits, runtime
from neurips26.nitrobox.config import SandboxConfig, check_env, check_path_text, check_timeout
from neurips26.nitrobox.errors import (LimitsUnavailableError, SandboxClosedError, SandboxError,
                                       SandboxStartError, SnapshotNotFoundError)
from neurips26.nitrobox.image import Image, dir_image, host_image

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_RESOLVE = _sys.RESOLVE_IN_ROOT | _sys.RESOLVE_NO_MAGICLINKS


@dataclass
class ExecResult:
    """Result of ``Sandbox.exec``: merged stdout+stderr in order, exit code, timing, flags."""

    exit_code: int
    output: str
    output_bytes: bytes = field(default=b"", repr=False)
    duration_s: float = 0.0
    timed_out: bool = False
    truncated: bool = False

    def __iter__(self):  # ``code, out = sb.exec(...)`` and ``== (0, "hi\n")`` comparisons
        return iter((self.exit_code, self.output))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, tuple):
            return (self.exit_code, self.output) == other
        if isinstance(other, ExecResult):
            return (self.exit_code, self.output_bytes, self.timed_out, self.truncated) == (
                other.exit_code, other.output_bytes, other.timed_out, other.truncated)
        return NotImplemented


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
    """A command started with ``exec(..., background=True)`` under ``setsid nohup``."""

    def __init__(self, sandbox: "Sandbox", job_id: str, pid: int):
        self.sandbox, self.id, self.pid = sandbox, job_id, pid
        self._dir = f"/tmp/.nbx-jobs/{job_id}"

    def poll(self) -> int | None:
        """Exit code, or ``None`` while it runs."""
        try:
            return int(self.sandbox.read_file(self._dir + ".rc").decode().strip() or "0")
        except FileNotFoundError:
            return None

    def output(self) -> str:
        try:
            return self.sandbox.read_file(self._dir + ".log").decode(errors="replace")
        except FileNotFoundError:
            return ""

    def wait(self, timeout: float = 30.0, interval: float = 0.02) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rc = self.poll()
            if rc is not None:
                return rc
            time.sleep(interval)
        return None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        self.sandbox.exec(f"kill -{int(sig)} -- -{self.pid} 2>/dev/null; true", timeout=10)


class _Proc:
    """The live process tree of one sandbox (kept outside ``Sandbox`` for the finalizer)."""

    __slots__ = ("a_pid", "b_pid", "pidfd", "in_w", "out_r", "st_r", "disk_fd", "disk_a_pid", "a_pidfd",
                 "reap_b", "a_host_pid")

    def __init__(self) -> None:
        self.a_pid = self.b_pid = self.pidfd = self.in_w = self.out_r = self.st_r = None
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
        for name in ("in_w", "out_r", "st_r"):
            fd = getattr(self, name)
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, None)
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
        self._pending_status = 0
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

    def _adopt(self, b_pid: int, in_w: int, out_r: int, st_r: int) -> None:
        """Take over a restored init (our child: the client is a child subreaper)."""
        proc = self._proc
        proc.b_pid, proc.in_w, proc.out_r, proc.st_r = b_pid, in_w, out_r, st_r
        proc.pidfd = _sys.pidfd_open(b_pid)
        proc.reap_b = True
        for fd in (out_r, st_r):
            os.set_blocking(fd, False)
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

    def _child_spec(self, sock: int, in_r: int, out_w: int, st_w: int) -> _child.ChildSpec:
        cfg = self.config
        upper, work, merged = self._paths()
        lowers = self._lowers + [self.image.lower]
        data = f"lowerdir={':'.join(lowers)},upperdir={upper},workdir={work},userxattr"
        if len(data) > 4000:
            raise SandboxError(f"overlay options too long ({len(data)} bytes): too many layers")
        env = {"PATH": DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb",
               "HOSTNAME": cfg.hostname}
        env.update(cfg.env)
        from neurips26.nitrobox import seccomp_filter

        disk = self._limits.get("disk")
        procs = [os.path.join(d, "cgroup.procs") for d in self._cgroups]
        return _child.ChildSpec(
            sock=sock, stdin_r=in_r, out_w=out_w, status_w=st_w, parent_pid=os.getpid(),
            map_by_parent=not self.rootless or cfg.subuid, uid=os.geteuid(), gid=os.getegid(),
            cgroup_procs=procs, network_none=cfg.network == "none", pdeathsig_b=not cfg.criu,
            merged=merged, overlay_data=data, host_usr=self.image.host_usr,
            disk_dir=str(self._dir / "disk") if disk else None, disk_size=disk or 0,
            disk_mkdirs=(upper, work, upper + "/" + cfg.working_dir.strip("/").split("/")[0])
            if disk else (),
            shm_size=cfg.shm_bytes, hostname=cfg.hostname,
            rlimits=_limits.rlimits_for(self._limits, self._backend), cap_last=_CAP_LAST,
            seccomp=seccomp_filter.program(), env=env,
            usr_flags=_USR_FLAGS if self.image.host_usr else 0, trace=self._trace is not None)

    def _spawn(self) -> None:
        """Create steps 2-11: pipes, fork A via the spawner, id map, wait for B's shell."""
        cfg = self.config
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        st_r, st_w = os.pipe()
        ctl, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        child_fd = child.detach()
        proc = self._proc
        proc.in_w, proc.out_r, proc.st_r = in_w, out_r, st_r
        deadline = time.monotonic() + cfg.start_timeout
        try:
            spec = self._child_spec(child_fd, in_r, out_w, st_w)
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
            for fd in (in_r, out_w, st_w, child_fd):
                os.close(fd)
            in_r = out_w = st_w = child_fd = None
            msgs = b""
            if spec.map_by_parent:
                first = _recv(ctl, 1, deadline)
                if first != b"U":
                    msgs = first + _recv_all(ctl, deadline)
                    raise SandboxStartError(_start_error(msgs, "no id-map request from child"))
                self._write_maps(a_pid)
                ctl.sendall(b"G")
            msgs += _recv_all(ctl, deadline)
            b_pid = None
            for line in msgs.decode(errors="replace").splitlines():
                if line.startswith("P:"):
                    b_pid = int(line[2:])
                elif line.startswith("T:") and self._trace is not None:
                    self._trace.append({k: float(v) for k, v in (kv.split("=") for kv in line[2:].split(","))})
                elif line.startswith("D:"):
                    proc.disk_a_pid, proc.disk_fd = (int(x) for x in line[2:].split(","))
                elif line.startswith("F:"):
                    raise SandboxStartError(f"sandbox {self.id}: {line[2:]}")
            if b_pid is None:
                raise SandboxStartError(_start_error(msgs, "child exited before reporting"))
            proc.b_pid = b_pid
            try:
                proc.pidfd = _sys.pidfd_open(b_pid)
            except ProcessLookupError:
                raise SandboxStartError(f"sandbox {self.id}: shell exited at start") from None
            for fd in (out_r, st_r):
                fl = fcntl.fcntl(fd, fcntl.F_GETFL)
                fcntl.fcntl(fd, fcntl.F_SETFL, fl | os.O_NONBLOCK)
            # bash is exec'd (the control socket reached EOF). The init line's status is read by the
            # first exec (pipelined), so create does not wait for bash's startup.
            os.write(in_w, f"PS1= PS2=; cd -- {shlex.quote(cfg.working_dir)}; echo 0 >&3\n".encode())
            self._pending_status = 1
            self._shell_dead = False
        except BaseException:
            for fd in (in_r, out_w, st_w, child_fd):
                if fd is not None:
                    os.close(fd)
            proc.kill()
            raise
        finally:
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

    def _read_until_status(self, timeout_at: float | None, hard_deadline: float | None,
                           cap: int | None = None):
        """Read merged output until the status pipe yields one exit code (epoll, no select()).

        Returns (code | None, head, tail, total, eof).
        """
        proc = self._proc
        cap = cap or self.config.max_output_bytes
        half = cap // 2
        head, tail = bytearray(), bytearray()
        total = 0
        status = bytearray()
        code = None
        eof = False
        sel = selectors.DefaultSelector()
        try:
            sel.register(proc.out_r, selectors.EVENT_READ, "out")
            sel.register(proc.st_r, selectors.EVENT_READ, "st")
            while code is None:
                wait = None if hard_deadline is None else hard_deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    break
                events = sel.select(wait)
                for key, _ in events:
                    try:
                        data = os.read(key.fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if not data:
                        eof = True
                        sel.unregister(key.fd)
                        continue
                    if key.data == "out":
                        total += len(data)
                        if len(head) < half:
                            take = half - len(head)
                            head += data[:take]
                            data = data[take:]
                        if data:
                            tail += data
                            if len(tail) > half:
                                del tail[:len(tail) - half]
                    else:
                        status += data
                        while b"\n" in status:
                            line, _, rest = bytes(status).partition(b"\n")
                            status = bytearray(rest)
                            if self._pending_status > 0:
                                self._pending_status -= 1
                                continue
                            try:
                                code = int(line.strip() or b"0")
                            except ValueError:
                                code = 1
                            break
                if eof and not sel.get_map():
                    break
                if eof and code is None and proc.st_r not in sel.get_map():
                    break
            if code is not None:  # the command has exited: drain what it wrote
                while True:
                    try:
                        data = os.read(proc.out_r, 1 << 16)
                    except (BlockingIOError, OSError):
                        break
                    if not data:
                        break
                    total += len(data)
                    if len(head) < half:
                        take = half - len(head)
                        head += data[:take]
                        data = data[take:]
                    tail += data
                    if len(tail) > half:
                        del tail[:len(tail) - half]
        finally:
            sel.close()
        return code, head, tail, total, eof

    def exec(self, cmd: str | list, timeout: float | None = None, workdir: str | None = None,
             env: Mapping[str, str] | None = None, stdin: bytes | str | None = None,
             background: bool = False, stateful: bool | None = None) -> ExecResult | BackgroundJob:
        """Run ``cmd`` with ``bash -c`` in the sandbox (persistent shell protocol).

        Writes one line ``(cd WD && exec env K=V timeout -k 1 T bash -c CMD) </dev/null 2>&1;
        echo $? >&3`` and reads output until the status pipe yields the exit code. Timeout: the
        coreutils ``timeout`` kills the command's process group (exit 124); a client-side backstop at
        T+2 s kills the foreground processes and, if the shell stays silent, restarts it.
        """
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
        if stdin is not None and not isinstance(stdin, (bytes, str)):
            raise TypeError(f"stdin must be bytes or str, got {type(stdin).__name__}")
        stateful = self.config.stateful if stateful is None else bool(stateful)
        if background:
            return self._start_background(cmd, workdir, env)
        with self._exec_lock:
            self._check_open()
            if self._shell_dead:
                with self._life:
                    self._respawn_keep()
            stdin_path = None
            if stdin is not None:
                stdin_path = f"/tmp/.nbx-stdin-{uuid.uuid4().hex[:8]}"
                self.write_file(stdin_path, stdin)
            src = shlex.quote(stdin_path) if stdin_path else "/dev/null"
            envs = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
            if stateful:
                assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
                cd = f"cd -- {shlex.quote(workdir)} && " if workdir else ""
                line = f"{cd}{assign + ' ' if assign else ''}eval {shlex.quote(cmd)} <{src} 2>&1; echo $? >&3"
            else:
                wd = shlex.quote(workdir or self.config.working_dir)
                inner = f"bash -c {shlex.quote(cmd)}"
                if timeout is not None:
                    inner = f"timeout -k 1 {timeout:g} {inner}"
                if envs:
                    inner = f"env -- {envs} {inner}"
                line = f"(cd -- {wd} && exec {inner}) <{src} 2>&1; echo $? >&3"
            if stdin_path:
                line += f"; rm -f {src}"
            t0 = time.monotonic()
            try:
                os.write(self._proc.in_w, (line + "\n").encode())
            except (BrokenPipeError, OSError):
                self._shell_dead = True
                return ExecResult(137, "", b"", 0.0, False, False)
            backstop = None if timeout is None else t0 + timeout + (0 if stateful else 2.0)
            code, head, tail, total, eof = self._read_until_status(None, backstop)
            timed_out = False
            if code is None and not eof and backstop is not None:
                # client-side backstop: kill the foreground processes, then wait briefly
                timed_out = True
                self._kill_foreground()
                c2, h2, t2, tot2, eof = self._read_until_status(None, time.monotonic() + 2.0)
                head += h2
                tail += t2
                total += tot2
                if c2 is None:
                    with self._life:
                        self._respawn_keep()
                code = 124
            elif code is None:  # the shell died (e.g. the OOM killer chose it)
                self._shell_dead = True
                code = 137
            dur = time.monotonic() - t0
            if timeout is not None and code in (124, 137) and dur >= timeout:
                timed_out = True
                code = 124
            raw = bytes(head + tail)
            return ExecResult(code, raw.decode(errors="replace"), raw, dur, timed_out,
                              total > self.config.max_output_bytes)

    def _kill_foreground(self) -> None:
        """SIGKILL every process of B's session except B (background jobs run in their own session)."""
        b = self._proc.b_pid
        if b is None:
            return
        for pid in _descendants(b):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[3]) == b:  # session id (field 6)
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError, IndexError):
                continue

    def _start_background(self, cmd: str, workdir: str | None, env: dict) -> BackgroundJob:
        self._jobs += 1
        jid = f"{self._jobs}-{uuid.uuid4().hex[:6]}"
        base = f"/tmp/.nbx-jobs/{jid}"
        envs = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
        wd = shlex.quote(workdir or self.config.working_dir)
        inner = f"cd -- {wd} && {('export ' + envs + '; ') if envs else ''}{cmd}"
        script = f"bash -c {shlex.quote(inner)}; echo $? > {base}.rc.tmp; mv {base}.rc.tmp {base}.rc"
        launch = (f"mkdir -p /tmp/.nbx-jobs; setsid nohup bash -c {shlex.quote(script)} "
                  f"> {base}.log 2>&1 < /dev/null & echo $!")
        r = self.exec(launch, timeout=30)
        if r.exit_code != 0:
            raise SandboxError(f"could not start background job: {r.output.strip()}")
        return BackgroundJob(self, jid, int(r.output.strip().splitlines()[-1]))

    # ------------------------------------------------------------------ files API (openat2)
    def _rel(self, path: str) -> str:
        check_path_text(path, "path")
        if not path:
            raise ValueError("path must be a non-empty str")
        if not path.startswith("/"):
            path = os.path.join(self.config.working_dir, path)
        return path.lstrip("/") or "."

    def _rootfd(self) -> int:
        self._check_open()
        if self._shell_dead:
            self._respawn_keep()
        return os.open(f"/proc/{self._proc.b_pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)

    def _mkdirs(self, root: int, rel: str, mode: int = 0o755) -> None:
        parts = [p for p in rel.split("/") if p]
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            try:
                os.close(_sys.openat2(root, prefix, os.O_PATH | os.O_DIRECTORY, 0, _RESOLVE))
                continue
            except FileNotFoundError:
                pass
            parent = "/".join(parts[:i - 1]) or "."
            pfd = _sys.openat2(root, parent, os.O_PATH | os.O_DIRECTORY, 0, _RESOLVE)
            try:
                os.mkdir(parts[i - 1], mode, dir_fd=pfd)
            except FileExistsError:
                pass
            finally:
                os.close(pfd)

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644, mkdirs: bool = True) -> None:
        """Write ``data`` at ``path`` inside the sandbox; symlinks resolve inside its root (openat2)."""
        if isinstance(data, str):
            data = data.encode()
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes or str, got {type(data).__name__}")
        rel = self._rel(path)
        with self._life:
            root = self._rootfd()
            try:
                if mkdirs and "/" in rel:
                    self._mkdirs(root, rel.rsplit("/", 1)[0])
                fd = _sys.openat2(root, rel, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode, _RESOLVE)
                try:
                    view = memoryview(data)
                    while view:
                        n = os.write(fd, view)
                        view = view[n:]
                finally:
                    os.close(fd)
            finally:
                os.close(root)

    def read_file(self, path: str) -> bytes:
        """Bytes of ``path`` inside the sandbox (``FileNotFoundError`` if missing)."""
        rel = self._rel(path)
        with self._life:
            root = self._rootfd()
            try:
                fd = _sys.openat2(root, rel, os.O_RDONLY, 0, _RESOLVE)
            except FileNotFoundError:
                raise FileNotFoundError(errno.ENOENT, f"no such file in sandbox {self.id}", path) from None
            finally:
                os.close(root)
            with os.fdopen(fd, "rb") as f:
                return f.read()

    def read_text(self, path: str) -> str:
        return self.read_file(path).decode(errors="replace")

    def exists(self, path: str) -> bool:
        rel = self._rel(path)
        with self._life:
            root = self._rootfd()
            try:
                os.close(_sys.openat2(root, rel, os.O_PATH, 0, _RESOLVE))
                return True
            except FileNotFoundError:
                return False
            finally:
                os.close(root)

    def list_dir(self, path: str = ".") -> list[str]:
        rel = self._rel(path)
        with self._life:
            root = self._rootfd()
            try:
                fd = _sys.openat2(root, rel, os.O_RDONLY | os.O_DIRECTORY, 0, _RESOLVE)
            finally:
                os.close(root)
            try:
                return sorted(os.listdir(fd))
            finally:
                os.close(fd)

    def upload(self, local: str | os.PathLike, remote: str) -> None:
        """Copy a host file or directory tree into the sandbox at ``remote``."""
        local = Path(local)
        if local.is_dir():
            for dirpath, _, files in os.walk(local):
                rel = os.path.relpath(dirpath, local)
                dst = remote if rel == "." else f"{remote.rstrip('/')}/{rel}"
                with self._life:
                    root = self._rootfd()
                    try:
                        self._mkdirs(root, self._rel(dst))
                    finally:
                        os.close(root)
                for fn in files:
                    src = Path(dirpath) / fn
                    self.write_file(f"{dst.rstrip('/')}/{fn}", src.read_bytes(), stat.S_IMODE(src.stat().st_mode))
        elif local.is_file():
            self.write_file(remote, local.read_bytes(), stat.S_IMODE(local.stat().st_mode))
        else:
            raise FileNotFoundError(errno.ENOENT, "no such local file or directory", str(local))

    def download(self, remote: str, local: str | os.PathLike) -> None:
        """Copy a sandbox file or directory tree to ``local`` on the host."""
        local = Path(local)
        rel = self._rel(remote)
        with self._life:
            root = self._rootfd()
            try:
                fd = _sys.openat2(root, rel, os.O_PATH, 0, _RESOLVE)
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                os.close(fd)
            finally:
                os.close(root)
        if not is_dir:
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(self.read_file(remote))
            return
        local.mkdir(parents=True, exist_ok=True)
        for name in self.list_dir(remote):
            sub = f"{remote.rstrip('/')}/{name}"
            self.download(sub, local / name)

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
