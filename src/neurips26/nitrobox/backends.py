"""Baselines and anchors behind one ``SandboxBackend`` protocol, all on the same image.

``create/exec/write_file/read_file/reset/delete`` for: NitroBox (ours), Docker (SDK, own dockerd,
reset = remove + run, ``network_mode="none"``), Podman (CLI, runc runtime), runc (OCI bundle over a
host overlay), bubblewrap (persistent shell, writable tmpfs dirs, no COW root), the naive
``unshare ... chroot`` per command (no persistent shell: the per-command floor) and a ``NullBackend``
(no sandbox: rewards from the generator's labels). Same skeleton image for all: Docker/Podman import
the skeleton tar and bind the host ``/usr`` read-only, exactly like the NitroBox ``host`` image.
"""

from __future__ import annotations

import base64
import io
import json
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import tarfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from neurips26.nitrobox import reaper, runtime
from neurips26.nitrobox.image import host_image

WORKDIR = "/workspace"


@runtime_checkable
class SandboxBackend(Protocol):
    """What the GRPO loop and the benchmark need from a sandbox system."""

    name: str

    def create(self) -> Any: ...
    def exec(self, h: Any, cmd: str, timeout: float | None = None) -> tuple[int, str]: ...
    def write_file(self, h: Any, path: str, data: bytes) -> None: ...
    def read_file(self, h: Any, path: str) -> bytes: ...
    def reset(self, h: Any) -> Any: ...
    def delete(self, h: Any) -> None: ...
    def close(self) -> None: ...


class BackendUnavailable(RuntimeError):
    """The tool behind a backend is missing or does not work here; the message says why."""


def _wrap_timeout(cmd: str, timeout: float | None) -> list[str]:
    if timeout is None:
        return ["bash", "-c", cmd]
    return ["timeout", "-k", "1", f"{timeout:g}", "bash", "-c", cmd]


# ------------------------------------------------------------------------------------- NitroBox
class NitroBackend:
    """Ours: ``Sandbox`` over the shared COW image."""

    name = "nitrobox"
    async_delete = True  # delete() returns before the tree is reaped; delete(h, wait=True) waits

    def __init__(self, state_root: str | None = None, **config: Any):
        from neurips26.nitrobox.sandbox import Sandbox

        self._Sandbox = Sandbox
        self.state_root = state_root
        self.config = config

    def create(self):
        return self._Sandbox(state_root=self.state_root, **self.config)

    def before_cold_create(self) -> None:
        """Empty the process-wide tree pool (``treepool.py``) of this backend's state root and let its
        teardown finish, so the next create spawns a tree: the micro-benchmark's ``create``, compared
        with the anchors' creates. (A create right after a delete takes the deleted sandbox's unused
        standby from the pool: ``create_pooled``.)"""
        from neurips26.nitrobox import reaper, treepool

        treepool.drain(self.state_root)
        reaper.get().submit(lambda: None).wait(10)

    def create_mode(self) -> str:
        """The spawn mode a sandbox of this backend gets here ("auto" resolves by the client's RSS)."""
        h = self.create()
        try:
            return h.spawn_mode
        finally:
            h.delete()

    def exec(self, h, cmd, timeout=None):
        r = h.exec(cmd, timeout=timeout)
        return r.exit_code, r.output

    def write_file(self, h, path, data):
        h.write_file(path, data)

    def read_file(self, h, path):
        return h.read_file(path)

    def reset(self, h):
        h.reset()
        return h

    def delete(self, h, wait: bool = False):
        h.delete(wait=wait)

    def close(self):
        pass


class NullBackend:
    """No sandbox at all: files live in a dict and the GRPO loop takes rewards from the generator's
    oracle labels (``oracle_rewards``), the cross-check that sandbox rewards are exactly right."""

    name = "null"
    oracle_rewards = True

    def create(self):
        return {}

    def exec(self, h, cmd, timeout=None):
        if cmd.startswith("cat "):
            return 0, h.get("/workspace/" + cmd.split()[-1], b"").decode()
        return 0, ""

    def write_file(self, h, path, data):
        h[path] = data if isinstance(data, bytes) else data.encode()

    def read_file(self, h, path):
        return h[path]

    def reset(self, h):
        h.clear()
        return h

    def delete(self, h):
        h.clear()

    def close(self):
        pass


# ------------------------------------------------------------------------------------- shell helper
class _PipeShell:
    """A persistent bash behind a launcher (bwrap), same protocol as NitroBox: status on a pipe."""

    def __init__(self, argv_prefix: list[str]):
        st_r, st_w = os.pipe()
        self.st_fd = st_w
        self.p = subprocess.Popen(argv_prefix + ["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=(st_w,),
                                  start_new_session=True)
        os.close(st_w)
        self.st_r = st_r
        os.set_blocking(self.p.stdout.fileno(), False)
        os.set_blocking(st_r, False)
        self.lock = threading.Lock()
        code, _ = self.run(f"PS1= ; cd {WORKDIR} 2>/dev/null || mkdir -p {WORKDIR}; cd {WORKDIR}; true", None)
        if code != 0:
            self.kill()
            raise BackendUnavailable(f"{argv_prefix[0]} shell did not start")

    def run(self, cmd: str, timeout: float | None) -> tuple[int, str]:
        inner = " ".join(shlex.quote(a) for a in _wrap_timeout(cmd, timeout))
        line = f"(cd {WORKDIR} && exec {inner}) </dev/null 2>&1; echo $? >&{self.st_fd}\n"
        with self.lock:
            self.p.stdin.write(line.encode())
            self.p.stdin.flush()
            out, status = bytearray(), bytearray()
            sel = selectors.DefaultSelector()
            sel.register(self.p.stdout, selectors.EVENT_READ, "o")
            sel.register(self.st_r, selectors.EVENT_READ, "s")
            deadline = None if timeout is None else time.monotonic() + timeout + 5
            try:
                while b"\n" not in status:
                    ev = sel.select(None if deadline is None else max(0.0, deadline - time.monotonic()))
                    if not ev:
                        return 124, out.decode(errors="replace")
                    for key, _ in ev:
                        fd = key.fileobj if isinstance(key.fileobj, int) else key.fileobj.fileno()
                        try:
                            data = os.read(fd, 65536)
                        except BlockingIOError:
                            continue
                        if not data:
                            return 137, out.decode(errors="replace")
                        (out if key.data == "o" else status).extend(data)
                while True:
                    try:
                        data = os.read(self.p.stdout.fileno(), 65536)
                    except BlockingIOError:
                        break
                    if not data:
                        break
                    out.extend(data)
            finally:
                sel.close()
            return int(status.split(b"\n")[0] or b"1"), out.decode(errors="replace")

    def kill(self) -> None:
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()
        for f in (self.p.stdin, self.p.stdout):
            try:
                f.close()
            except OSError:
                pass
        os.close(self.st_r)


def _b64_write(run, path: str, data: bytes) -> None:
    b64 = base64.b64encode(data).decode()
    d = os.path.dirname(path)
    code, out = run(f"mkdir -p {shlex.quote(d)} && printf %s {b64} | base64 -d > {shlex.quote(path)}", 30)
    if code != 0:
        raise OSError(f"write {path} failed: {out}")


def _b64_read(run, path: str) -> bytes:
    code, out = run(f"base64 -w0 {shlex.quote(path)}", 30)
    if code != 0:
        raise FileNotFoundError(path)
    return base64.b64decode(out.strip())


# ------------------------------------------------------------------------------------- bubblewrap
class BwrapBackend:
    """bubblewrap + persistent shell: same skeleton /etc and host /usr, writable tmpfs, no COW root."""

    name = "bwrap"

    def __init__(self, state_root: str | None = None):
        self.exe = shutil.which("bwrap")
        if self.exe is None:
            raise BackendUnavailable("bwrap not installed (apt install bubblewrap)")
        root = runtime.ensure_state_root(state_root or runtime.default_state_root())
        self.skel = host_image(str(root)).lower
        self.argv = [self.exe, "--unshare-all", "--die-with-parent", "--new-session",
                     "--ro-bind", "/usr", "/usr", "--ro-bind", self.skel + "/etc", "/etc",
                     "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", WORKDIR,
                     "--hostname", "sandbox"]
        for name in ("bin", "sbin", "lib", "lib64"):
            if os.path.islink(os.path.join(self.skel, name)):
                self.argv += ["--symlink", os.readlink(os.path.join(self.skel, name)), "/" + name]
        self.argv += ["--"]

    def create(self):
        return _PipeShell(self.argv)

    def exec(self, h, cmd, timeout=None):
        return h.run(cmd, timeout)

    def write_file(self, h, path, data):
        _b64_write(h.run, path, data)

    def read_file(self, h, path):
        return _b64_read(h.run, path)

    def reset(self, h):
        h.kill()
        return self.create()

    def delete(self, h):
        h.kill()

    def close(self):
        pass


# ------------------------------------------------------------------------------------- naive unshare
class NaiveUnshareBackend:
    """A fresh ``unshare -Urmnpfiu ... chroot`` per command over a writable copy of the skeleton."""

    name = "unshare"

    def __init__(self, state_root: str | None = None):
        if shutil.which("unshare") is None:
            raise BackendUnavailable("util-linux unshare not found")
        self.root = runtime.ensure_state_root(state_root or runtime.default_state_root())
        self.skel = host_image(str(self.root)).lower

    def create(self):
        d = self.root / "naive" / uuid.uuid4().hex[:12]
        d.parent.mkdir(exist_ok=True)
        shutil.copytree(self.skel, d, symlinks=True)
        return str(d)

    def exec(self, h, cmd, timeout=None):
        inner = " ".join(shlex.quote(a) for a in _wrap_timeout(f"cd {WORKDIR} && {cmd}", timeout))
        script = (f"mount --rbind /usr {h}/usr && mount -t proc proc {h}/proc && "
                  f"exec chroot {h} {inner}")
        r = subprocess.run(["unshare", "-Urmnpfiu", "--kill-child", "sh", "-c", script],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return r.returncode, r.stdout.decode(errors="replace")

    def write_file(self, h, path, data):
        # host-side writes resolve symlinks inside the sandbox root (openat2 RESOLVE_IN_ROOT)
        from neurips26.nitrobox import _sys

        root = os.open(h, os.O_PATH | os.O_DIRECTORY)
        try:
            parent = os.path.dirname(path.lstrip("/"))
            if parent:
                try:
                    os.close(_sys.openat2(root, parent, os.O_PATH | os.O_DIRECTORY, 0, _sys.RESOLVE_IN_ROOT))
                except FileNotFoundError:
                    self.exec(h, f"mkdir -p {shlex.quote('/' + parent)}")
            fd = _sys.openat2(root, path.lstrip("/"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644,
                              _sys.RESOLVE_IN_ROOT | _sys.RESOLVE_NO_MAGICLINKS)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        finally:
            os.close(root)

    def read_file(self, h, path):
        from neurips26.nitrobox import _sys

        root = os.open(h, os.O_PATH | os.O_DIRECTORY)
        try:
            fd = _sys.openat2(root, path.lstrip("/"), os.O_RDONLY, 0,
                              _sys.RESOLVE_IN_ROOT | _sys.RESOLVE_NO_MAGICLINKS)
        finally:
            os.close(root)
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def reset(self, h):
        self.delete(h)
        return self.create()

    def delete(self, h):
        reaper.trash(self.root, h)

    def close(self):
        pass


# ------------------------------------------------------------------------------------- Docker
def skeleton_tar(skel: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for entry in sorted(os.listdir(skel)):
            tar.add(os.path.join(skel, entry), arcname=entry)
    return buf.getvalue()


class DockerDaemon:
    """A private dockerd (spec): ``dockerd --data-root D --exec-root E -H unix://S --iptables=false
    --ip6tables=false --bridge=none``, stopped and removed on ``stop()``."""

    def __init__(self, base: str | None = None, timeout: float = 20.0):
        exe = shutil.which("dockerd")
        if exe is None:
            raise BackendUnavailable("dockerd not installed (apt install docker.io)")
        if os.geteuid() != 0:
            raise BackendUnavailable("the private dockerd needs root")
        self.base = Path(base or f"/tmp/neurips26-nitrobox-docker-{os.getpid()}")
        self.base.mkdir(parents=True, exist_ok=True)
        self.sock = self.base / "docker.sock"
        self.log = open(self.base / "dockerd.log", "w")
        self.proc = subprocess.Popen(
            [exe, "--data-root", str(self.base / "data"), "--exec-root", str(self.base / "exec"),
             "-H", f"unix://{self.sock}", "--pidfile", str(self.base / "docker.pid"),
             "--iptables=false", "--ip6tables=false", "--bridge=none"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"unix://{self.sock}"
        deadline = time.monotonic() + timeout
        import docker

        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if self.sock.exists():
                try:
                    docker.DockerClient(base_url=self.url, version="auto", timeout=5).ping()
                    return
                except Exception:  # noqa: BLE001 - not up yet
                    pass
            time.sleep(0.2)
        tail = (self.base / "dockerd.log").read_text()[-300:]
        self.stop()
        raise BackendUnavailable(f"dockerd did not come up in {timeout:g} s: {tail.strip()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        with open("/proc/self/mountinfo") as f:  # dockerd unmounts on exit; detach any leftover
            left = [line.split()[4] for line in f if str(self.base) in line]
        for mnt in sorted(left, key=len, reverse=True):
            subprocess.run(["umount", "-l", mnt], capture_output=True)
        shutil.rmtree(self.base, ignore_errors=True)


class DockerBackend:
    """Docker Engine through the Python SDK: ``containers.run(tail -f /dev/null)``, ``exec_run``,
    ``put_archive``; reset = remove + run; ``network_mode="none"``; the host /usr bound read-only."""

    name = "docker"
    IMAGE = "neurips26-nbx-skel:v1"

    def __init__(self, state_root: str | None = None, base_url: str | None = None):
        try:
            import docker
        except ImportError as e:
            raise BackendUnavailable("python package 'docker' missing (pip install docker)") from e
        self.daemon = None
        if base_url is None:
            self.daemon = DockerDaemon()
            base_url = self.daemon.url
        # the SDK's default pool of 10 connections breaks under 32 threads (urllib3 queue.Full)
        self.client = docker.DockerClient(base_url=base_url, version="auto", timeout=120, max_pool_size=64)
        root = runtime.ensure_state_root(state_root or runtime.default_state_root())
        skel = host_image(str(root)).lower
        try:
            self.client.images.get(self.IMAGE)
        except Exception:  # noqa: BLE001 - not imported yet
            repo, tag = self.IMAGE.split(":")
            self.client.api.import_image_from_data(skeleton_tar(skel), repository=repo, tag=tag)

    def create(self):
        return self.client.containers.run(
            self.IMAGE, ["tail", "-f", "/dev/null"], detach=True, network_mode="none",
            volumes={"/usr": {"bind": "/usr", "mode": "ro"}}, working_dir=WORKDIR, hostname="sandbox")

    def exec(self, h, cmd, timeout=None):
        r = h.exec_run(_wrap_timeout(cmd, timeout), workdir=WORKDIR)
        return r.exit_code, (r.output or b"").decode(errors="replace")

    def write_file(self, h, path, data):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(os.path.basename(path))
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
        h.put_archive(os.path.dirname(path) or "/", buf.getvalue())

    def read_file(self, h, path):
        stream, _ = h.get_archive(path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            return tar.extractfile(tar.getmembers()[0]).read()

    def reset(self, h):
        h.remove(force=True)
        return self.create()

    def delete(self, h):
        h.remove(force=True)

    def close(self):
        try:
            for c in self.client.containers.list(all=True):
                c.remove(force=True)
            self.client.close()
        finally:
            if self.daemon is not None:
                self.daemon.stop()


# ------------------------------------------------------------------------------------- Podman
class _FilesThroughExec:
    """Files as base64 through ``exec``, reset as delete + create: for the CLI-driven anchors."""

    def write_file(self, h, path, data):
        _b64_write(lambda c, t: self.exec(h, c, t), path, data)

    def read_file(self, h, path):
        return _b64_read(lambda c, t: self.exec(h, c, t), path)

    def reset(self, h):
        self.delete(h)
        return self.create()


class PodmanBackend(_FilesThroughExec):
    """Podman CLI (runc runtime; explicit ulimits, see the spec's MEASURED table)."""

    name = "podman"
    IMAGE = "localhost/neurips26-nbx-skel:v1"

    def __init__(self, state_root: str | None = None):
        self.exe = shutil.which("podman")
        if self.exe is None or shutil.which("runc") is None:
            raise BackendUnavailable("podman/runc not installed (apt install podman runc)")
        if os.geteuid() != 0:
            raise BackendUnavailable("the podman anchor runs as root here")
        self.root = runtime.ensure_state_root(state_root or runtime.default_state_root())
        self.base = Path(f"/tmp/neurips26-nitrobox-podman-{os.getpid()}")
        self._lock_existed = os.path.exists("/dev/shm/libpod_lock")  # podman's shm lock file
        self.flags = [self.exe, "--root", str(self.base / "root"), "--runroot", str(self.base / "run"),
                      "--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "none"]
        skel = host_image(str(self.root)).lower
        tar = self.base / "skel.tar"
        self.base.mkdir(parents=True, exist_ok=True)
        tar.write_bytes(skeleton_tar(skel))
        r = subprocess.run(self.flags + ["import", str(tar), self.IMAGE], capture_output=True, text=True)
        if r.returncode != 0:
            self.close()
            raise BackendUnavailable(f"podman import failed: {r.stderr.strip()[-300:]}")

    def _run(self, args, timeout=120):
        return subprocess.run(self.flags + args, capture_output=True, text=True, timeout=timeout)

    def create(self):
        r = self._run(["run", "-d", "--network", "none", "-v", "/usr:/usr:ro", "-w", WORKDIR,
                       "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
                       self.IMAGE, "tail", "-f", "/dev/null"])
        if r.returncode != 0:
            raise BackendUnavailable(f"podman run failed: {r.stderr.strip()[-300:]}")
        return r.stdout.strip()

    def exec(self, h, cmd, timeout=None):
        r = subprocess.run(self.flags + ["exec", "-w", WORKDIR, h] + _wrap_timeout(cmd, timeout),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return r.returncode, r.stdout.decode(errors="replace")

    def delete(self, h):
        self._run(["rm", "-f", "-t", "0", h])

    def close(self):
        if self.base.exists():
            subprocess.run(self.flags + ["rm", "-a", "-f", "-t", "0"], capture_output=True)
            subprocess.run(self.flags + ["system", "reset", "-f"], capture_output=True, timeout=120)
            with open("/proc/self/mountinfo") as f:
                left = [line.split()[4] for line in f if str(self.base) in line]
            for mnt in sorted(left, key=len, reverse=True):
                subprocess.run(["umount", "-l", mnt], capture_output=True)
            shutil.rmtree(self.base, ignore_errors=True)
            if not self._lock_existed and os.path.exists("/dev/shm/libpod_lock"):
                os.unlink("/dev/shm/libpod_lock")


# ------------------------------------------------------------------------------------- runc
class RuncBackend(_FilesThroughExec):
    """runc CLI with an OCI bundle whose root is a host-mounted overlay of the skeleton."""

    name = "runc"

    def __init__(self, state_root: str | None = None):
        self.exe = shutil.which("runc")
        if self.exe is None:
            raise BackendUnavailable("runc not installed (apt install runc)")
        if os.geteuid() != 0:
            raise BackendUnavailable("the runc anchor runs as root here")
        self.root = runtime.ensure_state_root(state_root or runtime.default_state_root())
        self.skel = host_image(str(self.root)).lower
        self.base = Path(f"/tmp/neurips26-nitrobox-runc-{os.getpid()}")
        (self.base / "state").mkdir(parents=True, exist_ok=True)

    def _config(self) -> dict:
        caps = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
                "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
                "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]
        return {
            "ociVersion": "1.0.2",
            "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": ["tail", "-f", "/dev/null"],
                        "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                        "cwd": WORKDIR, "noNewPrivileges": True,
                        "capabilities": {k: caps for k in ("bounding", "effective", "permitted")},
                        "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}]},
            "root": {"path": "rootfs", "readonly": False},
            "hostname": "sandbox",
            "mounts": [
                {"destination": "/proc", "type": "proc", "source": "proc"},
                {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                 "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
                {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
                 "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
                {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
                 "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
                {"destination": "/sys", "type": "sysfs", "source": "sysfs",
                 "options": ["nosuid", "noexec", "nodev", "ro"]},
                {"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro"]},
            ],
            "linux": {"namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
                      "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list"],
                      "readonlyPaths": ["/proc/sys", "/proc/bus", "/proc/fs", "/proc/irq"]},
        }

    def create(self):
        cid = "nbx-" + uuid.uuid4().hex[:10]
        b = self.base / cid
        for d in ("upper", "work", "rootfs"):
            (b / d).mkdir(parents=True)
        (b / "upper" / WORKDIR.strip("/")).mkdir(parents=True)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={self.skel},upperdir={b}/upper,workdir={b}/work", str(b / "rootfs")],
                       check=True, capture_output=True)
        (b / "config.json").write_text(json.dumps(self._config()))
        # the detached container inherits runc's stdio: a pipe here would never reach EOF
        with open(b / "runc.err", "w+") as err:
            r = subprocess.run([self.exe, "--root", str(self.base / "state"), "run", "-d", "-b", str(b), cid],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, timeout=60)
            err.seek(0)
            msg = err.read()
        if r.returncode != 0:
            subprocess.run(["umount", str(b / "rootfs")], capture_output=True)
            shutil.rmtree(b, ignore_errors=True)
            raise BackendUnavailable(f"runc run failed: {msg[-300:]}")
        return cid

    def exec(self, h, cmd, timeout=None):
        r = subprocess.run([self.exe, "--root", str(self.base / "state"), "exec", "--cwd", WORKDIR, h]
                           + _wrap_timeout(cmd, timeout),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return r.returncode, r.stdout.decode(errors="replace")

    def delete(self, h):
        subprocess.run([self.exe, "--root", str(self.base / "state"), "delete", "-f", h], capture_output=True)
        b = self.base / h
        subprocess.run(["umount", str(b / "rootfs")], capture_output=True)
        reaper.force_rmtree(str(b))

    def close(self):
        if self.base.exists():
            for d in self.base.iterdir():
                if d.name.startswith("nbx-"):
                    self.delete(d.name)
            shutil.rmtree(self.base, ignore_errors=True)


class AgentDockerLiteBackend:
    """The authors' earlier implementation, ``agentdocker-lite`` 0.0.3 (PyPI), on the same skeleton
    image with the host ``/usr`` as a read-only volume and its own net namespace (root only)."""

    name = "agentdocker-lite"

    def __init__(self, state_root: str | None = None):
        try:
            import agentdocker_lite  # noqa: F401 - optional anchor
        except ImportError as e:
            raise BackendUnavailable(f"agentdocker-lite not installed (pip install agentdocker-lite==0.0.3): "
                                     f"{e}") from None
        if os.geteuid() != 0:
            raise BackendUnavailable("agentdocker-lite's rootful backend needs root here")
        from agentdocker_lite import Sandbox as _ADL, SandboxConfig as _ADLConfig

        root = runtime.ensure_state_root(state_root or runtime.default_state_root())
        self.skel = host_image(str(root)).lower
        self.env_dir = str(root / "adl-env")
        self._Sandbox, self._Config = _ADL, _ADLConfig
        self._n = 0

    def create(self):
        self._n += 1
        cfg = self._Config(image=self.skel, working_dir=WORKDIR, volumes=["/usr:/usr:ro"], net_isolate=True,
                           env_base_dir=self.env_dir)
        return self._Sandbox(cfg, name=f"nbx-bench-{os.getpid()}-{self._n}")

    def exec(self, h, cmd, timeout=None):
        out, code = h.run(cmd, timeout=None if timeout is None else int(max(1, timeout)))
        return code, out

    def write_file(self, h, path, data):
        h.write_file(path, data)

    def read_file(self, h, path):
        data = h.read_file(path)
        return data.encode() if isinstance(data, str) else data

    def reset(self, h):
        h.reset()
        return h

    def delete(self, h):
        h.delete()

    def close(self):
        shutil.rmtree(self.env_dir, ignore_errors=True)


AUTHORS_CACHE = Path(os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))) / "neurips26" / "nitrobox-authors"


def _python312() -> str | None:
    """A CPython 3.12 on this machine: ``$NEURIPS26_NBX_PY312``, ``python3.12`` on PATH, or pyenv's."""
    import glob

    env = os.environ.get("NEURIPS26_NBX_PY312")
    if env:
        return env
    exe = shutil.which("python3.12")
    if exe and "/shims/" not in exe:  # a pyenv shim fails unless 3.12 is pyenv's global version
        return exe
    found = sorted(glob.glob(str(Path.home() / ".pyenv" / "versions" / "3.12*" / "bin" / "python3.12")))
    return found[-1] if found else None


def fetch_authors(cache: Path | None = None, timeout: float = 900) -> str:
    """A venv (CPython 3.12) with the authors' ``nitrobox==0.1.0`` from PyPI (``pip install``, the
    ordinary client); returns its python. ``BackendUnavailable`` says why when it cannot be had."""
    cache = Path(cache or AUTHORS_CACHE)
    py = cache / "venv" / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", "import nitrobox"], capture_output=True).returncode == 0:
        return str(py)
    base = _python312()
    if base is None:
        raise BackendUnavailable("the authors' nitrobox 0.1.0 wheel is cp312-only and no CPython 3.12 is "
                                 "installed (python3.12 on PATH, pyenv, or $NEURIPS26_NBX_PY312)")
    cache.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run([base, "-m", "venv", str(cache / "venv")], check=True, capture_output=True, timeout=300)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "nitrobox==0.1.0"], check=True,
                       capture_output=True, timeout=timeout)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        err = getattr(e, "stderr", b"") or b""
        raise BackendUnavailable(f"installing nitrobox==0.1.0 into a {base} venv failed: "
                                 f"{err.decode(errors='replace')[-300:]}") from None
    return str(py)


class AuthorsNitroboxBackend:
    """The authors' ``nitrobox`` 0.1.0 (PyPI wheel, CPython 3.12) in a worker process
    (``authors_worker.py``), same skeleton image + host ``/usr`` read-only + own netns as ours.
    ``last_inner_s``: the last operation's time measured inside the worker (no pipe round trip);
    ``microbench`` uses it in place of its outer timing."""

    name = "nitrobox-0.1.0"

    def __init__(self, state_root: str | None = None):
        if os.geteuid() != 0:
            raise BackendUnavailable("the authors' nitrobox is benched rootful here (root needed)")
        py = fetch_authors()
        root = runtime.ensure_state_root(state_root or runtime.default_state_root())
        self.skel = host_image(str(root)).lower
        self.env_dir = str(root / "authors-env")
        worker = Path(__file__).with_name("authors_worker.py")
        self.proc = subprocess.Popen([py, str(worker)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1, start_new_session=True,
                                     env={**os.environ, "NBX_AUTHORS_ENV": self.env_dir, "PYTHONPATH": ""})
        self.last_inner_s: float | None = None
        self._lock = threading.Lock()
        self.version = self._call("version")["version"]
        self.delete(self.create())  # the first create prepares the authors' caches: not a sample

    CALL_TIMEOUT = 120.0  # a call that does not return by then (a hung shell) abandons the worker

    def _call(self, op: str, timeout: float | None = None, **kw) -> dict:
        import select

        with self._lock:
            if self.proc.poll() is not None:
                raise BackendUnavailable(f"the authors' nitrobox worker exited ({self.proc.returncode})")
            self.proc.stdin.write(json.dumps({"op": op, **kw}) + "\n")
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout or self.CALL_TIMEOUT)
            if not ready:
                self.abandon()
                raise TimeoutError(f"authors' nitrobox: {op} did not return in {timeout or self.CALL_TIMEOUT:g} s "
                                   f"(worker killed)")
            line = self.proc.stdout.readline()
        if not line:
            raise BackendUnavailable("the authors' nitrobox worker closed its pipe")
        rep = json.loads(line)
        self.last_inner_s = rep.get("t")
        if not rep.get("ok"):
            raise RuntimeError(f"authors' nitrobox: {op}: {rep.get('error')}")
        return rep

    def create(self):
        return self._call("create", image=self.skel, workdir=WORKDIR)["h"]

    def exec(self, h, cmd, timeout=None):
        rep = self._call("exec", h=h, cmd=cmd, timeout=None if timeout is None else timeout + 30.0)
        return rep["code"], rep["out"]

    def write_file(self, h, path, data):
        self._call("write", h=h, path=path, b64=base64.b64encode(data).decode())

    def read_file(self, h, path):
        return base64.b64decode(self._call("read", h=h, path=path)["b64"])

    def reset(self, h):
        self._call("reset", h=h)
        return h

    def delete(self, h):
        self._call("delete", h=h)

    def lifecycles_per_s(self, c: int, total: int, execs: int = 5) -> float:
        """The same loop as ``microbench.lifecycles_per_s``, run by a thread pool inside the worker."""
        return self._call("lifecycles", timeout=600.0, image=self.skel, workdir=WORKDIR, c=c, total=total,
                          execs=execs)["per_s"]

    def abandon(self) -> None:
        """A call that never returns (e.g. its ``read_file`` of a FIFO): kill the worker's session
        (its sandboxes' shells included) and detach what it left mounted; the backend is unusable."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()
        self._unmount_env()

    def _unmount_env(self) -> None:
        with open("/proc/self/mountinfo") as f:
            left = [line.split()[4] for line in f if line.split()[4].startswith(self.env_dir + "/")]
        for mnt in sorted(left, key=len, reverse=True):
            subprocess.run(["umount", "-l", mnt], capture_output=True)

    def close(self):
        try:
            if self.proc.poll() is None:
                self._call("quit", timeout=60.0)
                self.proc.wait(30)
        except Exception:  # noqa: BLE001
            self.abandon()
        self._unmount_env()  # never unlink through a mount (the host /usr is bound into its rootfs)
        with open("/proc/self/mountinfo") as f:
            if any(line.split()[4].startswith(self.env_dir + "/") for line in f):
                return
        shutil.rmtree(self.env_dir, ignore_errors=True)


BACKENDS = {"nitrobox": NitroBackend, "bwrap": BwrapBackend, "unshare": NaiveUnshareBackend,
            "runc": RuncBackend, "podman": PodmanBackend, "docker": DockerBackend,
            "agentdocker-lite": AgentDockerLiteBackend, "nitrobox-0.1.0": AuthorsNitroboxBackend}


def make_backend(name: str, state_root: str | None = None, **kw: Any):
    """Instantiate a backend by name; raises ``BackendUnavailable`` with the reason."""
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {sorted(BACKENDS)}, got {name!r}")
    return BACKENDS[name](state_root=state_root, **kw)


def open_backends(names, state_root: str | None = None, log=print) -> tuple[dict, dict]:
    """Open each backend of ``names``: ({name: backend}, {name: why it is unavailable})."""
    opened, skipped = {}, {}
    for name in names:
        try:
            opened[name] = make_backend(name, state_root=state_root)
        except BackendUnavailable as e:
            skipped[name] = str(e)
            log(f"nitrobox: backend {name} unavailable: {e}")
    return opened, skipped
