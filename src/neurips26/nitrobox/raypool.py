"""``RaySandboxPool``: sandboxes on many hosts through Ray (issue 28 item 9).

One actor per Ray node (pinned with ``NodeAffinitySchedulingStrategy``) owns a local
``SandboxPool``; a sandbox is addressed by a ``SandboxHandle`` (node actor + id), and exec results and
file contents come back as Ray objects. A node (or its actor) that dies surfaces as
``SandboxLostError`` on every handle it held; ``pool.replace(handle)`` re-creates the sandbox on a
live node (the lost one's state is gone: rollouts restart the episode), and ``acquire`` skips dead
nodes. Ray is optional: this module imports it only when a pool is created.

``AsyncRaySandboxPool`` is the same pool for asyncio rollout loops (verl / SkyRL style: many agents
in flight, each acquire -> exec / file steps -> reward -> release): ``await pool.acquire()``,
``await h.aexec(...)``, ``await h.awrite_file``/``aread_file``, ``pool.release(h)``, ``await
pool.aclose()`` -- the shape of ``AsyncSandboxPool``. Nothing blocks the event loop: Ray object refs
are awaited natively. The node actors are threaded (``max_concurrency``), so calls for different
sandboxes on one node run side by side.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
from typing import Any, Mapping

from neurips26.harness.validation import check_scalar
from neurips26.nitrobox.errors import SandboxError


class SandboxLostError(SandboxError):
    """The node (or actor) holding this sandbox is gone; its state is lost."""


class _NodeAgent:
    """Actor body: a local ``SandboxPool`` on one node and the sandboxes handed out from it."""

    def __init__(self, config: Mapping[str, Any] | None, size: int, max_size: int):
        from neurips26.nitrobox.pool import SandboxPool

        self.pool = SandboxPool(config, size=size, max_size=max_size)
        self.boxes: dict[str, Any] = {}

    def node_id(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def acquire(self, timeout: float) -> str:
        hid = uuid.uuid4().hex[:12]
        self.boxes[hid] = self.pool.acquire(timeout)
        return hid

    def release(self, hid: str) -> None:
        sb = self.boxes.pop(hid, None)
        if sb is not None:
            self.pool.release(sb)

    def exec(self, hid: str, cmd: Any, kw: dict):
        return self.boxes[hid].exec(cmd, **kw)

    def write_file(self, hid: str, path: str, data: bytes, mode: int) -> None:
        self.boxes[hid].write_file(path, data, mode)

    def read_file(self, hid: str, path: str) -> bytes:
        return self.boxes[hid].read_file(path)

    def close(self) -> None:
        self.pool.close()


class SandboxHandle:
    """A sandbox on some node of the cluster: ``exec``, ``write_file``, ``read_file``, ``release``."""

    def __init__(self, pool: "RaySandboxPool", node: str, actor: Any, hid: str):
        self.pool, self.node, self._actor, self.id = pool, node, actor, hid

    def _call(self, method: str, *args: Any, timeout: float | None = None):
        import ray

        try:
            return ray.get(getattr(self._actor, method).remote(self.id, *args), timeout=timeout)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as e:
            self.pool._mark_dead(self.node)
            raise SandboxLostError(f"sandbox {self.id} on node {self.node[:12]} is lost: {type(e).__name__}") from None

    def exec(self, cmd: Any, timeout: float | None = None, **kw: Any):
        """``Sandbox.exec`` on the sandbox's node (the ``ExecResult`` comes back over Ray)."""
        return self._call("exec", cmd, dict(kw, timeout=timeout),
                          timeout=None if timeout is None else timeout + 60.0)

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        self._call("write_file", path, data.encode() if isinstance(data, str) else bytes(data), mode)

    def read_file(self, path: str) -> bytes:
        return self._call("read_file", path)

    def release(self) -> None:
        self.pool.release(self)

    async def _acall(self, method: str, *args: Any, timeout: float | None = None):
        import ray

        try:
            ref = getattr(self._actor, method).remote(self.id, *args)
            return await (ref if timeout is None else asyncio.wait_for(ref, timeout))
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as e:
            self.pool._mark_dead(self.node)
            raise SandboxLostError(f"sandbox {self.id} on node {self.node[:12]} is lost: {type(e).__name__}") from None

    async def aexec(self, cmd: Any, timeout: float | None = None, **kw: Any):
        """``exec`` awaited on the event loop (no thread held while the command runs)."""
        return await self._acall("exec", cmd, dict(kw, timeout=timeout),
                                 timeout=None if timeout is None else timeout + 60.0)

    async def awrite_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        await self._acall("write_file", path, data.encode() if isinstance(data, str) else bytes(data), mode)

    async def aread_file(self, path: str) -> bytes:
        return await self._acall("read_file", path)


class RaySandboxPool:
    """``per_node`` warm sandboxes on every live Ray node (``max_per_node`` at most)."""

    def __init__(self, config: Mapping[str, Any] | None = None, per_node: int = 2, max_per_node: int | None = None,
                 address: str | None = None):
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        per_node = check_scalar(per_node, "per_node", int, min=0)
        max_per_node = check_scalar(max(1, per_node) if max_per_node is None else max_per_node, "max_per_node",
                                    int, min=max(1, per_node))
        if not ray.is_initialized():
            ray.init(address=address, ignore_reinit_error=True)
        self._lock = threading.Lock()
        self._actors: dict[str, Any] = {}
        self._dead: set[str] = set()
        # threaded actors: one node serves calls for its sandboxes concurrently (a sync actor would
        # run one agent's exec at a time)
        agent = ray.remote(num_cpus=0, max_restarts=0, max_concurrency=max(4, 2 * max_per_node + 2))(_NodeAgent)
        for n in ray.nodes():
            if not n.get("Alive"):
                continue
            nid = n["NodeID"]
            self._actors[nid] = agent.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False)).remote(
                    dict(config or {}), per_node, max_per_node)
        if not self._actors:
            raise SandboxError("no live Ray node")
        ray.get([a.node_id.remote() for a in self._actors.values()])  # every agent is up
        self._rr = itertools.cycle(list(self._actors))

    @property
    def nodes(self) -> list[str]:
        with self._lock:
            return [n for n in self._actors if n not in self._dead]

    def _mark_dead(self, node: str) -> None:
        with self._lock:
            self._dead.add(node)

    def acquire(self, timeout: float = 60.0, node: str | None = None) -> SandboxHandle:
        """A sandbox on ``node`` or on the next live node (round robin); dead nodes are skipped."""
        import ray

        for nid in self._nodes_to_try(node):
            actor = self._actors[nid]
            try:
                hid = ray.get(actor.acquire.remote(timeout), timeout=timeout + 60.0)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                self._node_lost(nid, node)
                continue
            return SandboxHandle(self, nid, actor, hid)
        raise SandboxLostError("no live node left in the pool")

    def _nodes_to_try(self, node: str | None):
        """The nodes an acquire tries in turn: ``node`` alone (``SandboxLostError`` once it is dead), or
        one round robin over the live nodes."""
        for _ in range(len(self._actors)):
            nid = node or next(self._rr)
            if nid in self._dead:
                if node is not None:
                    raise SandboxLostError(f"node {nid[:12]} is dead")
                continue
            yield nid

    def _node_lost(self, nid: str, node: str | None) -> None:
        """An acquire on ``nid`` found its actor gone: mark it dead; fatal when the caller asked for it."""
        self._mark_dead(nid)
        if node is not None:
            raise SandboxLostError(f"node {nid[:12]} is dead") from None

    def replace(self, handle: SandboxHandle, timeout: float = 60.0) -> SandboxHandle:
        """A fresh sandbox on a live node, in place of a lost (or unwanted) one."""
        if handle.node not in self._dead:
            try:
                handle.release()
            except SandboxLostError:
                pass
        return self.acquire(timeout)

    def release(self, handle: SandboxHandle) -> None:
        import ray

        if handle.node in self._dead:
            return
        try:
            ray.get(handle._actor.release.remote(handle.id), timeout=60.0)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
            self._mark_dead(handle.node)

    def close(self) -> None:
        import ray

        for nid, actor in list(self._actors.items()):
            if nid in self._dead:
                continue
            try:
                ray.get(actor.close.remote(), timeout=60.0)
                ray.kill(actor)
            except Exception:  # noqa: BLE001 - a node that died meanwhile
                pass
        self._actors.clear()

    def __enter__(self) -> "RaySandboxPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncRaySandboxPool:
    """``RaySandboxPool`` for asyncio rollout loops; the interface of ``AsyncSandboxPool``."""

    def __init__(self, pool: RaySandboxPool):
        self.pool = pool
        self._pending: set = set()

    @classmethod
    async def create(cls, config: Mapping[str, Any] | None = None, per_node: int = 2,
                     max_per_node: int | None = None, address: str | None = None) -> "AsyncRaySandboxPool":
        return cls(await asyncio.to_thread(RaySandboxPool, config, per_node, max_per_node, address))

    @property
    def nodes(self) -> list[str]:
        return self.pool.nodes

    async def acquire(self, timeout: float = 60.0, node: str | None = None) -> SandboxHandle:
        """A sandbox on ``node`` or the next live node; waits (holding no thread) while every node's
        pool is at ``max_per_node``; dead nodes are skipped, ``SandboxLostError`` if none is left."""
        import ray

        timeout = check_scalar(timeout, "timeout", float, min=0)
        p = self.pool
        for nid in p._nodes_to_try(node):
            actor = p._actors[nid]
            try:
                hid = await asyncio.wait_for(actor.acquire.remote(timeout), timeout + 60.0)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                p._node_lost(nid, node)
                continue
            return SandboxHandle(p, nid, actor, hid)
        raise SandboxLostError("no live node left in the pool")

    async def replace(self, handle: SandboxHandle, timeout: float = 60.0) -> SandboxHandle:
        self.release(handle)
        return await self.acquire(timeout)

    def release(self, handle: SandboxHandle) -> None:
        """Hand the sandbox back (reset on its node); returns at once, like ``AsyncSandboxPool``."""
        if handle.node in self.pool._dead:
            return
        ref = handle._actor.release.remote(handle.id)
        self._pending.add(ref)
        if len(self._pending) > 256:  # forget refs of releases that are long done
            import ray

            done, _ = ray.wait(list(self._pending), num_returns=len(self._pending), timeout=0)
            self._pending.difference_update(done)

    async def aclose(self) -> None:
        if self._pending:
            try:
                await asyncio.wait_for(asyncio.gather(*self._pending, return_exceptions=True), 60.0)
            except asyncio.TimeoutError:
                pass
            self._pending.clear()
        await asyncio.to_thread(self.pool.close)
