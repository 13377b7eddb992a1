"""Adapters so rollout code written for other sandbox APIs runs unchanged on NitroBox.

``DockerLikeClient``/``DockerLikeContainer``: the Docker SDK subset SWE-bench-style harnesses use
(``containers.run/create``, ``start``, ``exec_run``, ``put_archive``, ``get_archive``, ``remove``).
``HarborEnvironment``: the async Harbor/SkyRL ``BaseEnvironment`` shape (``start``, ``exec``,
``upload_*``, ``download_*``, ``stop``).
"""

from __future__ import annotations

import asyncio
import io
import posixpath
import shlex
import tarfile
from collections import namedtuple
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from neurips26.nitrobox.config import SandboxConfig
from neurips26.nitrobox.sandbox import Sandbox

DockerExecResult = namedtuple("DockerExecResult", ["exit_code", "output"])  # docker.models.containers.ExecResult


class DockerLikeContainer:
    """A NitroBox sandbox behind the Docker SDK ``Container`` methods harnesses call."""

    def __init__(self, sandbox: Sandbox, name: str | None = None):
        self.sandbox = sandbox
        self.id = sandbox.id
        self.name = name or sandbox.id
        self.status = "running"

    def start(self) -> None:
        self.status = "running"

    def exec_run(self, cmd: str | list, workdir: str | None = None, environment: Mapping[str, str] | list | None = None,
                 user: str = "", demux: bool = False, timeout: float | None = None, **_: Any) -> DockerExecResult:
        if isinstance(environment, list):
            environment = dict(e.split("=", 1) for e in environment)
        if isinstance(cmd, list):
            cmd = shlex.join(cmd)
        r = self.sandbox.exec(cmd, timeout=timeout, workdir=workdir, env=environment or None)
        if demux:
            return DockerExecResult(r.exit_code, (r.output_bytes, None))
        return DockerExecResult(r.exit_code, r.output_bytes)

    def put_archive(self, path: str, data: bytes | io.IOBase) -> bool:
        """Extract a tar archive at ``path`` through the symlink-safe files API."""
        raw = data if isinstance(data, (bytes, bytearray)) else data.read()
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            for m in tar.getmembers():
                dest = posixpath.normpath(posixpath.join(path, m.name))
                if m.isdir():
                    self.sandbox.exec(f"mkdir -p {shlex.quote(dest)}")
                elif m.isfile():
                    self.sandbox.write_file(dest, tar.extractfile(m).read(), mode=m.mode & 0o7777 or 0o644)
                elif m.issym():
                    self.sandbox.exec(f"ln -sfn {shlex.quote(m.linkname)} {shlex.quote(dest)}")
        return True

    def get_archive(self, path: str):
        """(iterator of tar bytes, stat dict) like the Docker SDK."""
        buf = io.BytesIO()
        data = self.sandbox.read_file(path)
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(posixpath.basename(path))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        return iter([buf.getvalue()]), {"name": posixpath.basename(path), "size": len(data)}

    def stop(self, timeout: int | None = None) -> None:
        self.status = "exited"

    def remove(self, force: bool = False, v: bool = False) -> None:
        self.sandbox.delete()
        self.status = "removed"

    def kill(self, signal: str | int = "SIGKILL") -> None:
        self.remove(force=True)


class _Containers:
    def __init__(self, client: "DockerLikeClient"):
        self.client = client
        self._by_id: dict[str, DockerLikeContainer] = {}

    def create(self, image: str = "host", command: Any = None, name: str | None = None,
               working_dir: str | None = None, environment: Mapping[str, str] | list | None = None,
               mem_limit: Any = None, network_disabled: bool = True, **_: Any) -> DockerLikeContainer:
        cfg = self.client.config
        # Docker image names map through ``images``; an absolute path is a rootfs dir; anything else
        # (e.g. "python:3.11") falls back to the client's configured image
        img = self.client.images.get(image, image if str(image).startswith("/") else cfg.image)
        overrides: dict[str, Any] = {"image": img}
        if working_dir:
            overrides["working_dir"] = working_dir
        if environment:
            env = dict(e.split("=", 1) for e in environment) if isinstance(environment, list) else dict(environment)
            overrides["env"] = {**cfg.env, **env}
        if mem_limit is not None:
            overrides["memory"] = mem_limit
        c = DockerLikeContainer(Sandbox(cfg, **overrides), name)
        self._by_id[c.id] = c
        if name:
            self._by_id[name] = c
        return c

    def run(self, image: str = "host", command: Any = None, detach: bool = True, **kw: Any) -> DockerLikeContainer:
        return self.create(image, command, **kw)

    def get(self, id_or_name: str) -> DockerLikeContainer:
        return self._by_id[id_or_name]

    def list(self, all: bool = False) -> list[DockerLikeContainer]:  # noqa: A002 - Docker SDK name
        return [c for k, c in self._by_id.items() if k == c.id and c.status != "removed"]


class DockerLikeClient:
    """``docker.from_env()`` stand-in; ``images`` maps Docker image names to NitroBox images."""

    def __init__(self, config: SandboxConfig | Mapping[str, Any] | None = None,
                 images: Mapping[str, Any] | None = None):
        self.config = SandboxConfig.from_any(config)
        self.images = dict(images or {})
        self.containers = _Containers(self)

    def close(self) -> None:
        for c in self.containers.list():
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
