"""Issue 28 item 6: AsyncSandboxPool never deadlocks, and a new client reaps what dead owners left.

49a5fe8: waiting ``acquire`` calls sat in asyncio's default thread pool, so on a size-2 pool 6 of 8
tasks timed out and 64 tasks on a size-8 pool never finished; leaked state dirs stayed until
``neurips26 nitrobox cleanup``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from neurips26.nitrobox import Sandbox
from neurips26.nitrobox.diagnostics import support_problem, wait_until
from neurips26.nitrobox.pool import AsyncSandboxPool

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")


async def _rollouts(state_root: str, size: int, tasks: int, timeout: float, **kw) -> list:
    pool = await AsyncSandboxPool.create({"state_root": state_root}, size=size, **kw)
    try:
        async def one(i: int):
            sb = await pool.acquire(timeout=timeout)
            try:
                r = await sb.aexec(f"echo {i}")
                return r.exit_code, r.output
            finally:
                pool.release(sb)

        return await asyncio.gather(*(one(i) for i in range(tasks)))
    finally:
        await pool.aclose()


def test_more_waiters_than_threads_size2_pool(state_root):
    res = asyncio.run(_rollouts(state_root, size=2, tasks=8, timeout=60))
    assert res == [(0, f"{i}\n") for i in range(8)]


def test_256_tasks_on_a_pool_of_8(state_root):
    # same wait/wake path as with resets (release -> re-queue on the resetting thread -> notify);
    # without the 256 resets the test takes seconds (the size-2 test above resets every release)
    t0 = time.monotonic()
    res = asyncio.run(_rollouts(state_root, size=8, tasks=256, timeout=120, reset_on_release=False))
    assert res == [(0, f"{i}\n") for i in range(256)]
    assert time.monotonic() - t0 < 120


def test_acquire_timeout_is_a_timeout_error(state_root):
    async def main():
        pool = await AsyncSandboxPool.create({"state_root": state_root}, size=1)
        try:
            held = await pool.acquire()
            with pytest.raises(TimeoutError):
                await pool.acquire(timeout=0.3)
            pool.release(held)
            again = await pool.acquire(timeout=30)  # woken by the re-queue, not by polling
            pool.release(again)
        finally:
            await pool.aclose()

    asyncio.run(main())


CRASHER = r'''
import os, sys
from neurips26.nitrobox import Sandbox
sb = Sandbox(state_root=sys.argv[1], memory="64m")
print(sb.state_dir, flush=True)
os.kill(os.getpid(), 9)
'''


def test_next_client_reaps_what_a_dead_owner_left(state_root):
    out = subprocess.run([sys.executable, "-c", CRASHER, state_root], capture_output=True, text=True,
                         timeout=60).stdout.split()
    assert out, "the crashing client printed no state dir"
    leaked = out[0]
    assert os.path.isdir(leaked)                      # SIGKILL left the state dir behind
    with Sandbox(state_root=state_root) as sb:        # the next client's first sandbox reaps it
        assert wait_until(lambda: not os.path.exists(leaked), timeout=15)
        assert os.path.exists(sb.state_dir)            # and never its own
        assert sb.exec("true").exit_code == 0
