"""``SandboxPool`` (warm sandboxes, reset-on-release in the background) and the asyncio API.

``release(sb)`` returns at once; a background thread resets the sandbox and re-queues it, so a
rollout worker never waits for a reset. ``AsyncSandbox``/``AsyncSandboxPool`` wrap every blocking
call in ``asyncio.to_thread`` (all blocking calls take timeouts).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

from neurips26.nitrobox.config import SandboxConfig, check_timeout
from neurips26.nitrobox.errors import SandboxClosedError, SandboxError
from neurips26.nitrobox.sandbox import ExecResult, Sandbox, Snapshot


class SandboxPool:
    """Pre-creates ``size`` sandboxes; grows up to ``max_size`` on demand.

    >>> with SandboxPool({"memory": "512m"}, size=8) as pool:     # doctest: +SKIP
    ...     sb = pool.acquire(); sb.exec("python3 -V"); pool.release(sb)
    """

    def __init__(self, config: SandboxConfig | Mapping[str, Any] | None = None, size: int = 4,
                 max_size: int | None = None, reset_workers: int = 2):
        self.config = SandboxConfig.from_any(config)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"size must be an int >= 0, got {size!r}")
        max_size = size if max_size is None else max_size
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < max(1, size):
            raise ValueError(f"max_size must be an int >= max(1, size), got {max_size!r}")
        if isinstance(reset_workers, bool) or not isinstance(reset_workers, int) or reset_workers < 1:
            raise ValueError(f"reset_workers must be an int >= 1, got {reset_workers!r}")
        self.size, self.max_size = size, max_size
        self._ready: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._all: set[Sandbox] = set()
        self._closed = False
        self._resetter = ThreadPoolExecutor(max_workers=reset_workers, thread_name_prefix="nbx-pool-reset")
        try:
            with ThreadPoolExecutor(max_workers=min(8, max(1, size))) as ex:
                for sb in ex.map(lambda _: Sandbox(self.config), range(size)):
                    self._all.add(sb)
                    self._ready.put(sb)
        except BaseException:
            self.close()
            raise

    @property
    def in_use(self) -> int:
        return len(self._all) - self._ready.qsize()

    def acquire(self, timeout: float | None = 60.0) -> Sandbox:
        """A ready sandbox (creation-time state); creates one if below ``max_size``."""
        timeout = check_timeout(timeout, "timeout", allow_none=True)
        if self._closed:
            raise SandboxClosedError("pool is closed")
        try:
            return self._ready.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            grow = len(self._all) < self.max_size
            if grow:
                placeholder = object()
                self._all.add(placeholder)  # reserve the slot
        if grow:
            try:
                sb = Sandbox(self.config)
            except BaseException:
                with self._lock:
                    self._all.discard(placeholder)
                raise
            with self._lock:
                self._all.discard(placeholder)
                self._all.add(sb)
            return sb
        try:
            return self._ready.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no sandbox became free within {timeout} s (max_size={self.max_size})") from None

    def release(self, sb: Sandbox) -> None:
        """Give a sandbox back; it is reset in the background and re-queued (returns at once)."""
        if sb not in self._all:
            raise ValueError("sandbox does not belong to this pool")
        if self._closed:
            sb.delete()
            return
        self._resetter.submit(self._reset_and_requeue, sb)

    def _reset_and_requeue(self, sb: Sandbox) -> None:
        try:
            sb.reset()
        except (SandboxError, OSError):
            with self._lock:
                self._all.discard(sb)
            sb.delete()
            return
        if self._closed:
            sb.delete()
        else:
            self._ready.put(sb)

    def close(self) -> None:
        """Delete every sandbox of the pool (idempotent)."""
        self._closed = True
        self._resetter.shutdown(wait=True)
        with self._lock:
            boxes = [b for b in self._all if isinstance(b, Sandbox)]
            self._all.clear()
        for sb in boxes:
            sb.delete()

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncSandbox:
    """asyncio facade: ``sb = await AsyncSandbox.create(...); await sb.aexec("ls")``."""

    def __init__(self, sandbox: Sandbox):
        self.sandbox = sandbox

    @classmethod
    async def create(cls, config: SandboxConfig | Mapping[str, Any] | None = None, **kw: Any) -> "AsyncSandbox":
        return cls(await asyncio.to_thread(Sandbox, config, **kw))

    async def aexec(self, cmd: str, timeout: float | None = None, **kw: Any) -> ExecResult:
        return await asyncio.to_thread(self.sandbox.exec, cmd, timeout, **kw)

    async def awrite_file(self, path: str, data: bytes | str) -> None:
        await asyncio.to_thread(self.sandbox.write_file, path, data)

    async def aread_file(self, path: str) -> bytes:
        return await asyncio.to_thread(self.sandbox.read_file, path)

    async def areset(self) -> None:
        await asyncio.to_thread(self.sandbox.reset)

    async def asnapshot(self, tag: str | None = None) -> Snapshot:
        return await asyncio.to_thread(self.sandbox.snapshot, tag)

    async def arestore(self, snapshot: Snapshot | str) -> None:
        await asyncio.to_thread(self.sandbox.restore, snapshot)

    async def adelete(self, wait: bool = False) -> None:
        await asyncio.to_thread(self.sandbox.delete, wait)

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.adelete()


class AsyncSandboxPool:
    """asyncio facade over ``SandboxPool``."""

    def __init__(self, pool: SandboxPool):
        self.pool = pool

    @classmethod
    async def create(cls, config=None, size: int = 4, max_size: int | None = None) -> "AsyncSandboxPool":
        return cls(await asyncio.to_thread(SandboxPool, config, size, max_size))

    async def acquire(self, timeout: float | None = 60.0) -> AsyncSandbox:
        return AsyncSandbox(await asyncio.to_thread(self.pool.acquire, timeout))

    def release(self, sb: AsyncSandbox | Sandbox) -> None:
        self.pool.release(sb.sandbox if isinstance(sb, AsyncSandbox) else sb)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.pool.close)
