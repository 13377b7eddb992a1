"""Issue 28 item 9: the pool under a verl/SkyRL-style asyncio rollout loop.

``_rollout`` is trainer-side code: N agents on one event loop, at most ``in_flight`` at a time, each
acquire -> several exec / file steps (write a task, run the "model's" solution, read its output) ->
reward (from the exit code and the file it wrote) -> release. The same function runs on the local
``AsyncSandboxPool`` (default test) and on ``AsyncRaySandboxPool`` over a local two-node Ray cluster
(slow). Checked: every reward is the one its own inputs deserve (agents with a wrong solution get 0,
nobody sees another agent's files: each episode starts from a clean workspace), sandboxes really
were in use concurrently, and the event loop was never blocked (a heartbeat task's largest gap).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from neurips26.nitrobox.diagnostics import support_problem

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")


async def _episode(pool, i: int, stats: dict) -> float:
    sb = await pool.acquire(timeout=120)
    stats["live"] += 1
    stats["peak"] = max(stats["peak"], stats["live"])
    try:
        seen = await sb.aexec("ls -A /workspace")
        stats["dirty"] += bool(seen.output.strip())        # a previous agent's files leaking in
        await sb.awrite_file("/workspace/task.txt", f"{i} {i * 7}\n")
        good = i % 5 != 0                                     # every fifth agent's "solution" is wrong
        body = "print(a * 7)" if good else "print(a + 7)"
        await sb.awrite_file("/workspace/solve.py", f"a, want = map(int, open('task.txt').read().split())\n{body}\n")
        r = await sb.aexec("python3 solve.py > out.txt && cat out.txt", timeout=60)
        await asyncio.sleep(0)                                # the agent "thinks" between steps
        out = (await sb.aread_file("/workspace/out.txt")).decode().strip()
        want = (await sb.aread_file("/workspace/task.txt")).decode().split()[1]
        return float(r.exit_code == 0 and out == want)
    finally:
        stats["live"] -= 1
        pool.release(sb)


async def _rollout(pool, n: int, in_flight: int) -> tuple[list[float], dict]:
    stats = {"live": 0, "peak": 0, "dirty": 0, "max_gap": 0.0}
    sem = asyncio.Semaphore(in_flight)
    stop = asyncio.Event()

    async def heartbeat():
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            stats["max_gap"] = max(stats["max_gap"], now - last)
            last = now

    async def one(i):
        async with sem:
            return await _episode(pool, i, stats)

    hb = asyncio.create_task(heartbeat())
    try:
        rewards = await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        stop.set()
        await hb
    return rewards, stats


def _check(rewards, stats, n, size):
    assert rewards == [0.0 if i % 5 == 0 else 1.0 for i in range(n)]
    assert stats["dirty"] == 0
    assert stats["peak"] >= 2 and stats["peak"] <= size        # concurrent, never past the pool
    assert stats["max_gap"] < 2.0, stats                        # the loop kept running (no blocking call)


def test_async_rollout_loop_on_the_local_pool(state_root):
    from neurips26.nitrobox.pool import AsyncSandboxPool

    async def main():
        pool = await AsyncSandboxPool.create({"state_root": state_root}, size=2, max_size=4)
        try:
            return await _rollout(pool, n=16, in_flight=8)
        finally:
            await pool.aclose()

    rewards, stats = asyncio.run(main())
    _check(rewards, stats, 16, 4)


@pytest.mark.slow
def test_async_rollout_loop_on_a_two_node_ray_cluster(tmp_path):
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from neurips26.nitrobox.raypool import AsyncRaySandboxPool

    state_root = f"/dev/shm/nbx-ray-loop-{tmp_path.name}"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address)
    try:
        async def main():
            pool = await AsyncRaySandboxPool.create({"state_root": state_root}, per_node=1, max_per_node=3)
            try:
                assert len(pool.nodes) == 2
                rewards, stats = await _rollout(pool, n=24, in_flight=6)
                nodes = {(await pool.acquire()).node for _ in range(2)}  # round robin over both nodes
                return rewards, stats, nodes
            finally:
                await pool.aclose()

        rewards, stats, nodes = asyncio.run(main())
        _check(rewards, stats, 24, 6)
        assert len(nodes) == 2
    finally:
        ray.shutdown()
        cluster.shutdown()
        import shutil

        shutil.rmtree(state_root, ignore_errors=True)
