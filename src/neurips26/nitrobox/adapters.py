"""Adapters so rollout code written for other sandbox APIs runs unchanged on NitroBox.

``DockerLikeClient``/``DockerLikeContainer``: the Docker SDK subset SWE-bench-style harnesses use
(``containers.run/create``, ``start``, ``exec_run``, ``put_archive``, ``get_archive``, ``remove``).
``HarborEnvironment``: the async Harbor/SkyRL ``BaseEnvironment`` shape (``start``, ``exec``,
``upload_*``, ``download_*``, ``stop``).
"""

from __future__ import annotations

import asyncio
import io
import os
import posixpath
import shlex
import signal
import tarfile
import threading
import uuid
from collections import namedtuple
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from neurips26.nitrobox.config import SandboxConfig
from neurips26.nitrobox.sandbox import Sandbox

DockerExecResult = namedtuple("DockerExecResult", ["exit_code", "output"])  # docker.models.containers.ExecResult


def _docker_errors():
    """``docker.errors`` when docker-py is installed (so ``except docker.errors.NotFound`` works),
    else stand-ins with the same names and bases."""
    try:
        import docker.errors as errs  # type: ignore[import-not-found]

        return errs.NotFound, errs.ImageNotFound, errs.ContainerError, errs.APIError
    except ImportError:
        class APIError(Exception):
            pass

        class NotFound(APIError):
            pass

        class ImageNotFound(NotFound):
            pass

        class ContainerError(Exception):
            def __init__(self, container, exit_status, command, image, stderr):
                self.container, self.exit_status, self.command, self.image, self.stderr = (
                    container, exit_status, command, image, stderr)
                super().__init__(f"Command '{command}' in image '{image}' returned non-zero exit status "
                                 f"{exit_status}: {stderr!r}")

        return NotFound, ImageNotFound, ContainerError, APIError


NotFound, ImageNotFound, ContainerError, APIError = _docker_errors()


def _cmd_text(cmd: Any) -> str:
    if isinstance(cmd, (list, tuple)):
        return shlex.join(str(c) for c in cmd)
    if not isinstance(cmd, str):
        raise TypeError(f"cmd must be a str or a list of str, got {type(cmd).__name__}")
    return cmd


_NOT_FOUND = ("OCI runtime exec failed: exec failed: unable to start container process: exec: \"%s\": "
              "executable file not found in $PATH: unknown\r\n")


def _argv(cmd: Any) -> list[str]:
    if isinstance(cmd, str):
        argv = shlex.split(cmd)
    elif isinstance(cmd, (list, tuple)):
        argv = [str(c) for c in cmd]
    else:
        raise TypeError(f"cmd must be a str or a list of str, got {type(cmd).__name__}")
    if not argv:
        raise ValueError("cmd must not be empty")
    return argv


def _docker_text(argv: list[str]) -> str:
    """A bash line that does what Docker does with ``argv``: no shell (a str was split like
    docker-py's ``shlex.split``), a ``$PATH`` lookup that ignores shell builtins, and Docker's
    exit 126 + message when the executable is not found."""
    a0 = shlex.quote(argv[0])
    return (f'[ -n "$(type -P -- {a0})" ] || {{ printf {shlex.quote(_NOT_FOUND)} {a0}; exit 126; }}; '
            f"exec -- {shlex.join(argv)}")


def _env_dict(environment: Any) -> dict | None:
    if environment is None:
        return None
    if isinstance(environment, (list, tuple)):
        return dict(e.split("=", 1) if "=" in e else (e, "") for e in environment)
    return dict(environment)


class _FullModeTarInfo(tarfile.TarInfo):
    """A tar header whose mode field keeps the file-type bits (``0o100755``), as Docker's archives
    have them; Python's ``tarfile`` masks the field to ``0o7777``, so the header is patched."""

    def tobuf(self, format=tarfile.DEFAULT_FORMAT, encoding=tarfile.ENCODING, errors="surrogateescape"):
        full = self.mode
        self.mode = full & 0o7777
        try:
            buf = bytearray(super().tobuf(format, encoding, errors))
        finally:
            self.mode = full
        off = len(buf) - tarfile.BLOCKSIZE  # PAX: extended header blocks come first, ours is last
        buf[off + 100:off + 108] = b"%07o\0" % full
        buf[off + 148:off + 156] = b"        "
        buf[off + 148:off + 156] = b"%06o\0 " % sum(buf[off:off + tarfile.BLOCKSIZE])
        return bytes(buf)


class DockerLikeContainer:
    """A NitroBox sandbox behind the Docker SDK ``Container`` methods harnesses call."""

    def __init__(self, sandbox: Sandbox, name: str | None = None, client: "DockerLikeClient | None" = None,
                 image: str = "host", command: Any = None, entrypoint: Any = None):
        self.sandbox = sandbox
        self.id = sandbox.id
        self.name = name or sandbox.id
        self.client = client
        self.image = image
        self.command = command
        self._entrypoint = entrypoint
        self.status = "created"
        self._main: Any = None  # the BackgroundJob running ``command`` after start()

    @property
    def attrs(self) -> dict:
        return {"Id": self.id, "Name": "/" + self.name, "State": {"Status": self.status},
                "Config": {"Image": self.image, "Cmd": self.command if self.command is not None else
                           (getattr(self.sandbox, "image", None).config or {}).get("Cmd"),
                           "Entrypoint": self._entrypoint if self._entrypoint is not None else
                           (getattr(self.sandbox, "image", None).config or {}).get("Entrypoint")}}

    def reload(self) -> None:
        if self._main is not None and self.status == "running" and self._main.poll() is not None:
            self.status = "exited"

    def _main_text(self) -> str | None:
        """What ``start`` runs: the image's ``Entrypoint + (command or Cmd)`` as ``docker run`` would;
        a str command with no entrypoint in play runs through the shell (a superset of docker's split)."""
        from neurips26.nitrobox.oci import image_command

        img = getattr(self.sandbox, "image", None)
        has_ep = self._entrypoint is not None or bool((getattr(img, "config", None) or {}).get("Entrypoint"))
        if not self._docker_semantics and isinstance(self.command, str) and self.command and not has_ep:
            return self.command
        argv = image_command(img, self.command or None, self._entrypoint)
        if not argv:
            return None
        return _docker_text(argv) if self._docker_semantics else shlex.join(argv)

    @property
    def _docker_semantics(self) -> bool:
        return self.client is None or self.client.exec_semantics == "docker"

    def _cmd(self, cmd: Any) -> str:
        """What an exec runs: Docker's semantics (argv, no shell) unless the client says ``shell``."""
        return _docker_text(_argv(cmd)) if self._docker_semantics else _cmd_text(cmd)

    def start(self) -> None:
        if self.status == "running":
            return
        self.status = "running"
        text = self._main_text()
        if text:
            self._main = self.sandbox.exec(text, background=True)

    def wait(self, timeout: float | None = None, **_: Any) -> dict:
        """``{"StatusCode": code}`` once the main command has ended (docker-py's shape)."""
        if self._main is None:
            return {"StatusCode": 0, "Error": None}
        code = self._main.wait(timeout if timeout is not None else 365 * 86400.0)
        if code is None:
            raise TimeoutError(f"container {self.name} still running after {timeout} s")
        self.status = "exited"
        return {"StatusCode": code, "Error": None}

    def logs(self, stdout: bool = True, stderr: bool = True, **_: Any) -> bytes:
        return self._main.output().encode() if self._main is not None else b""

    def exec_run(self, cmd: str | list, stdout: bool = True, stderr: bool = True, stdin: bool = False,
                 tty: bool = False, privileged: bool = False, user: str = "", detach: bool = False,
                 stream: bool = False, socket: bool = False, environment: Mapping[str, str] | list | None = None,
                 workdir: str | None = None, demux: bool = False, timeout: float | None = None,
                 **_: Any) -> DockerExecResult:
        """docker-py's ``exec_run``: ``(exit_code, bytes)``; ``demux`` -> ``(stdout, stderr)``;
        ``stream`` -> a generator of chunks (exit_code None); ``detach`` -> started, ``(None, b"")``."""
        text = self._cmd(cmd)
        env = _env_dict(environment)
        if detach:
            self.sandbox.exec(text, workdir=workdir, env=env, background=True, user=user or None)
            return DockerExecResult(None, b"")
        if stream:
            it = self.sandbox.exec_stream(text, timeout=timeout, workdir=workdir, env=env, user=user or None,
                                          merge_stderr=not demux)

            def chunks():
                for name, data in it:
                    if name == "stdout" and not stdout or name == "stderr" and not stderr:
                        continue
                    yield ((data, None) if name == "stdout" else (None, data)) if demux else data

            return DockerExecResult(None, chunks())
        r = self.sandbox.exec(text, timeout=timeout, workdir=workdir, env=env, user=user or None,
                              merge_stderr=not demux)
        if demux:
            return DockerExecResult(r.exit_code, (r.stdout_bytes if stdout and r.stdout_bytes else None,
                                                  r.stderr_bytes if stderr and r.stderr_bytes else None))
        return DockerExecResult(r.exit_code, r.output_bytes)

    def put_archive(self, path: str, data: bytes | io.IOBase) -> bool:
        """Extract a tar archive at ``path`` through the files API (the sandbox's rights): regular files
        with their modes and mtimes, directories, symlinks and hard links."""
        raw = data if isinstance(data, (bytes, bytearray)) else data.read()
        info = self.sandbox.stat(path) if self.sandbox.exists(path) else None
        if info is None or not info.is_dir:
            raise NotFound(f"Could not find the file {path} in container {self.name}")
        dirs = []
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            for m in tar.getmembers():
                dest = posixpath.normpath(posixpath.join(path, m.name))
                if m.isdir():
                    self.sandbox.mkdir(dest, mode=(m.mode & 0o7777) or 0o755, parents=True)
                    dirs.append(m)
                elif m.isfile():
                    self.sandbox.write_file(dest, tar.extractfile(m).read(), mode=m.mode & 0o7777,
                                            mtime_ns=int(m.mtime * 1e9))
                elif m.issym():
                    self.sandbox.symlink(m.linkname, dest, replace=True)
                elif m.islnk():
                    target = posixpath.normpath(posixpath.join(path, m.linkname))
                    self.sandbox.link(target, dest, replace=True)
        for m in reversed(dirs):  # directory modes/mtimes once their content is in place
            dest = posixpath.normpath(posixpath.join(path, m.name))
            self.sandbox.mkdir(dest, mode=(m.mode & 0o7777) or 0o755, parents=False)
            self.sandbox.set_mtime(dest, int(m.mtime * 1e9))
        return True

    def get_archive(self, path: str, chunk_size: int = 1 << 21, encode_stream: bool = False):
        """(iterator of tar bytes, stat dict) like docker-py; a directory comes back as a tree."""
        try:
            top = self.sandbox.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            raise NotFound(f"Could not find the file {path} in container {self.name}") from None
        buf = io.BytesIO()
        base = posixpath.basename(path.rstrip("/")) or "/"
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            self._add(tar, path.rstrip("/") or "/", base, top, {})
        data = buf.getvalue()
        st = {"name": base, "size": top.size, "mode": top.mode, "mtime": top.mtime_ns / 1e9,
              "linkTarget": top.target}
        return iter([data[i:i + chunk_size] for i in range(0, len(data), chunk_size)] or [b""]), st

    def _add(self, tar: tarfile.TarFile, path: str, arcname: str, info, seen: dict) -> None:
        """One entry as Docker's archive writes it: the mode with its file-type bits (Go's
        ``FileInfoHeader``), and a second name of a multiply-linked file as a hard link."""
        ti = _FullModeTarInfo(arcname)
        ti.mode = info.mode
        ti.mtime = info.mtime_ns / 1e9
        ti.uid, ti.gid = info.uid, info.gid
        if info.is_symlink:
            ti.type, ti.linkname = tarfile.SYMTYPE, info.target
            tar.addfile(ti)
        elif info.is_dir:
            ti.type = tarfile.DIRTYPE
            tar.addfile(ti)
            for name in self.sandbox.list_dir(path):
                sub = posixpath.join(path, name)
                self._add(tar, sub, f"{arcname}/{name}", self.sandbox.stat(sub, follow_symlinks=False), seen)
        elif info.is_file:
            if info.nlink > 1 and info.ino in seen:
                ti.type, ti.linkname = tarfile.LNKTYPE, seen[info.ino]
                tar.addfile(ti)
                return
            if info.nlink > 1:
                seen[info.ino] = arcname
            body = self.sandbox.read_file(path, follow_symlinks=False)
            ti.size = len(body)
            tar.addfile(ti, io.BytesIO(body))

    def stop(self, timeout: int | None = None) -> None:
        if self._main is not None and self._main.poll() is None:
            self._main.kill(signal.SIGKILL)
        self.status = "exited"

    def remove(self, force: bool = False, v: bool = False) -> None:
        self.sandbox.delete()
        self.status = "removed"
        if self.client is not None:
            self.client.containers._forget(self)

    def kill(self, signal: str | int = "SIGKILL") -> None:
        self.stop()


class _Images:
    """``client.images``: Docker image names -> NitroBox images (``ImageNotFound`` for unknown names)."""

    def __init__(self, mapping: Mapping[str, Any] | None, state_root: Any = None):
        self._map = dict(mapping or {})
        self._state_root = state_root

    def get(self, name: str) -> Any:
        if name in self._map:
            return self._map[name]
        if isinstance(name, str) and name.startswith("/") and os.path.isdir(name):
            return name
        if name == "host":
            return "host"
        if isinstance(name, str) and name and not name.startswith(("/", ".")):
            from neurips26.nitrobox import oci, runtime

            img = oci.find_image(name, self._state_root or runtime.default_state_root())
            if img is not None:  # imported with import_image / pulled with oci.pull
                return img
        raise ImageNotFound(f"No such image: {name} (known: {sorted(self._map)}; map names with "
                            f"DockerLikeClient(images={{...}}))")

    def list(self) -> list[str]:
        return sorted(self._map)

    def __contains__(self, name: str) -> bool:
        return name in self._map


class _Api:
    """``client.api``: the low-level exec calls SWE-bench's ``exec_run_with_timeout`` uses."""

    def __init__(self, client: "DockerLikeClient"):
        self.client = client
        self._execs: dict[str, dict] = {}
        self._lock = threading.Lock()

    def exec_create(self, container: Any, cmd: Any, stdout: bool = True, stderr: bool = True,
                    environment: Any = None, workdir: str | None = None, user: str = "", **_: Any) -> dict:
        c = self.client.containers.get(container if isinstance(container, str) else container.id)
        eid = uuid.uuid4().hex
        with self._lock:
            self._execs[eid] = {"container": c, "cmd": c._cmd(cmd), "env": _env_dict(environment),
                                "workdir": workdir, "user": user or None, "stream": None, "exit": None}
        return {"Id": eid}

    def exec_start(self, exec_id: str, detach: bool = False, stream: bool = False, demux: bool = False, **_: Any):
        e = self._execs[exec_id]
        sb = e["container"].sandbox
        if detach:
            sb.exec(e["cmd"], workdir=e["workdir"], env=e["env"], background=True, user=e["user"])
            return b""
        st = sb.exec_stream(e["cmd"], workdir=e["workdir"], env=e["env"], user=e["user"], merge_stderr=True)
        e["stream"] = st

        def chunks():
            for _, data in st:
                yield data
            e["exit"] = st.result.exit_code if st.result is not None else None

        if stream:
            return chunks()
        return b"".join(chunks())

    def exec_inspect(self, exec_id: str) -> dict:
        e = self._execs[exec_id]
        st = e["stream"]
        return {"ID": exec_id, "Pid": st.pid if st is not None else 0, "ExitCode": e["exit"],
                "Running": st is not None and e["exit"] is None}


class _Containers:
    def __init__(self, client: "DockerLikeClient"):
        self.client = client
        self._by_id: dict[str, DockerLikeContainer] = {}

    def create(self, image: str = "host", command: Any = None, name: str | None = None,
               working_dir: str | None = None, environment: Mapping[str, str] | list | None = None,
               mem_limit: Any = None, network_disabled: bool = True, user: str = "", entrypoint: Any = None,
               **_: Any) -> DockerLikeContainer:
        cfg = self.client.config
        img = self.client.images.get(image)  # ImageNotFound for a name nobody mapped: never a silent 'host'
        overrides: dict[str, Any] = {"image": img}
        if working_dir:
            overrides["working_dir"] = working_dir
        env = _env_dict(environment)
        if env:
            overrides["env"] = {**cfg.env, **env}
        if mem_limit is not None:
            overrides["memory"] = mem_limit
        if name and name in self._by_id:
            raise APIError(f"Conflict. The container name {name!r} is already in use")
        c = DockerLikeContainer(Sandbox(cfg, **overrides), name, self.client, image, command, entrypoint)
        self._by_id[c.id] = c
        if name:
            self._by_id[name] = c
        return c

    def run(self, image: str = "host", command: Any = None, detach: bool = False, remove: bool = False,
            stdout: bool = True, stderr: bool = False, **kw: Any):
        """docker-py's ``run``: ``detach=True`` -> the started container; otherwise wait for ``command``
        and return its output (``ContainerError`` on a non-zero exit), like ``docker run``."""
        c = self.create(image, command, **kw)
        c.start()
        if detach:
            return c
        try:
            code = c.wait()["StatusCode"]
            out = c.logs()
        finally:
            if remove:
                c.remove(force=True)
        if code != 0:
            raise ContainerError(c, code, command, image, out)
        return out

    def get(self, id_or_name: str) -> DockerLikeContainer:
        try:
            return self._by_id[id_or_name]
        except KeyError:
            raise NotFound(f"No such container: {id_or_name}") from None

    def _forget(self, c: DockerLikeContainer) -> None:
        for k in [k for k, v in self._by_id.items() if v is c]:
            del self._by_id[k]

    def list(self, all: bool = False) -> list[DockerLikeContainer]:  # noqa: A002 - Docker SDK name
        return [c for k, c in self._by_id.items() if k == c.id and (all or c.status == "running")]


class DockerLikeClient:
    """``docker.from_env()`` stand-in; ``images`` maps Docker image names to NitroBox images
    (imported images resolve by name). ``exec_semantics="docker"`` (default): commands run as Docker
    runs them (a str is split, no shell, builtins are not commands, exit 126 for a missing
    executable); ``"shell"``: a str command is a bash line (globs, ``&&``, ``$VAR``)."""

    def __init__(self, config: SandboxConfig | Mapping[str, Any] | None = None,
                 images: Mapping[str, Any] | None = None, exec_semantics: str = "docker"):
        from neurips26.harness.validation import check_choice

        check_choice(exec_semantics, "exec_semantics", ("docker", "shell"))
        self.exec_semantics = exec_semantics  # "shell": str commands run through bash -c (a superset)
        self.config = SandboxConfig.from_any(config)
        self.images = _Images(images, self.config.state_root)
        self.containers = _Containers(self)
        self.api = _Api(self)

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        for c in self.containers.list(all=True):
            c.remove(force=True)


@dataclass
class HarborExecResult:
    stdout: str | None
    stderr: str | None
    return_code: int


class HarborEnvironment:
    """The Harbor/SkyRL ``BaseEnvironment`` shape, backed by one NitroBox sandbox."""

    def __init__(self, config: SandboxConfig | Mapping[str, Any] | None = None, **kw: Any):
        self.config = SandboxConfig.from_any(config, **kw)
        self.sandbox: Sandbox | None = None

    async def start(self, force_build: bool = False) -> None:
        if self.sandbox is None or self.sandbox.closed:
            self.sandbox = await asyncio.to_thread(Sandbox, self.config)

    def _sb(self) -> Sandbox:
        if self.sandbox is None:
            raise RuntimeError("environment not started: await env.start() first")
        return self.sandbox

    async def exec(self, command: str, cwd: str | None = None, env: Mapping[str, str] | None = None,
                   timeout_sec: float | None = None) -> HarborExecResult:
        r = await asyncio.to_thread(self._sb().exec, command, timeout_sec, cwd, env)
        return HarborExecResult(r.output, None, r.exit_code)

    async def upload_file(self, source_path: str | Path, target_path: str) -> None:
        await asyncio.to_thread(self._sb().upload, source_path, target_path)

    async def upload_dir(self, source_dir: str | Path, target_dir: str) -> None:
        await asyncio.to_thread(self._sb().upload, source_dir, target_dir)

    async def download_file(self, source_path: str, target_path: str | Path) -> None:
        await asyncio.to_thread(self._sb().download, source_path, target_path)

    async def download_dir(self, source_dir: str, target_dir: str | Path) -> None:
        await asyncio.to_thread(self._sb().download, source_dir, target_dir)

    async def stop(self, delete: bool = True) -> None:
        if self.sandbox is not None:
            await asyncio.to_thread(self.sandbox.delete)
            self.sandbox = None
