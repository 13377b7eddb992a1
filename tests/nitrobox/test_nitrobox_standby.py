"""reset = swap to a pre-spawned standby tree: the standby is exactly the clean image (it sees
nothing written, started or changed before the reset), configurations that would share state with
it respawn instead, and nothing leaks over many mixed cycles (processes, mounts, fds, threads,
state dirs, trash)."""

from __future__ import annotations

import os
import threading

import pytest

from neurips26.nitrobox import Sandbox, reaper, treepool
from neurips26.nitrobox.diagnostics import PLANT_STATE, READ_STATE, support_problem, wait_until

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")


def test_standby_sees_nothing_written_before_reset(state_root):
    sb = Sandbox(state_root=state_root)
    ref = Sandbox(state_root=state_root, standby=False)  # what a freshly created tree looks like
    try:
        assert sb.wait_standby() and "standby" in sb.features["reset"]
        standby_pid = sb._spare[0].b_pid
        # the standby is already running while the live tree gets dirty
        r = sb.exec(PLANT_STATE)
        assert r.exit_code == 0, r.output
        r = sb.exec("export LEAK=1; cd /tmp", stateful=True)
        dirty = sb.exec(READ_STATE).output
        assert "planted" in dirty and "a\n" in dirty and dirty.endswith("1\nsandbox\n1\n")  # shm seg, sleep
        sb.reset()
        assert sb.pid == standby_pid                       # the reset was a swap, not a respawn
        clean = ref.exec(READ_STATE)
        after = sb.exec(READ_STATE)
        assert after.exit_code == clean.exit_code and after.output == clean.output
        assert "planted" not in after.output and after.output.endswith("0\nsandbox\n0\n")
        assert sb.exec("echo ${LEAK:-unset}; pwd", stateful=True).output == "unset\n/workspace\n"
        # what the live tree writes after the swap lands in the sandbox's own upper
        sb.exec("echo new > /workspace/n")
        assert (sb.state_dir / "upper" / "workspace" / "n").read_bytes() == b"new\n"
        # the next standby comes up in the background over its own empty upper
        assert sb.wait_standby() and sb._spare[0].b_pid != sb.pid
        assert os.listdir(os.path.join(sb._spare[0].tree_dir, "upper", "workspace")) == []
        sb.exec(PLANT_STATE)
        sb.reset()
        assert sb.exec(READ_STATE).output == clean.output
    finally:
        sb.delete(wait=True)
        ref.delete(wait=True)


def test_snapshot_and_restore_still_work_with_a_standby(state_root):
    sb = Sandbox(state_root=state_root)
    try:
        sb.wait_standby()
        sb.exec("echo 1 > /workspace/a")
        snap = sb.snapshot("s")
        sb.exec("echo 2 > /workspace/a")
        sb.reset()                                         # back to the image, not to the snapshot
        assert sb.exec("cat /workspace/a 2>&1").exit_code != 0
        sb.restore(snap)
        assert sb.exec("cat /workspace/a").output == "1\n"
        sb.wait_standby()
        sb.reset()
        assert sb.exec("ls -A /workspace").output == ""
    finally:
        sb.delete(wait=True)


@pytest.mark.parametrize("kw", [{"standby": False}, {"pids": 64}, {"memory": "256m"}, {"disk_limit": "16m"}])
def test_configurations_sharing_state_respawn_instead(state_root, kw):
    sb = Sandbox(state_root=state_root, **kw)
    try:
        assert not sb.wait_standby(0.5) and sb._spare[0] is None
        assert "respawn" in sb.features["reset"]
        sb.exec("echo x > /workspace/x")
        sb.reset()
        assert sb.exec("ls -A /workspace").output == ""
    finally:
        sb.delete(wait=True)


def _children() -> list[int]:
    me = str(os.getpid())
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1] == me:  # ppid
                    out.append(int(d))
            except OSError:
                pass
    return out


def _census(state_root: str) -> dict:
    """What the client holds, once the trees pooled on purpose (capped, treepool.py) are drained."""
    treepool.drain()
    pool_dir = treepool.pool_root(state_root)
    return {"fds": len(os.listdir("/proc/self/fd")),
            "threads": threading.active_count(),
            "children": len(_children()),
            "mounts": sum(state_root in m for m in open("/proc/self/mountinfo")),
            "sandboxes": sorted(os.listdir(os.path.join(state_root, "sandboxes"))),
            "trash": sorted(os.listdir(os.path.join(state_root, "trash"))),
            "pool": sorted(os.listdir(pool_dir)) if os.path.isdir(pool_dir) else []}


def _mixed_cycles(state_root: str, n: int) -> None:
    from neurips26.nitrobox import zygote

    # warm the image, spawner, reaper, standby maker and (spawn_mode="auto" from the second sandbox
    # on) the zygote: its process and socket are the client's once, not per cycle
    for _ in range(2):
        Sandbox(state_root=state_root).delete(wait=True)
    if zygote._zygote is not None:
        wait_until(zygote._zygote.ready, timeout=20)
    Sandbox(state_root=state_root).delete(wait=True)
    wait_until(lambda: reaper.get().pending == 0, timeout=20)
    before = _census(state_root)
    pool = treepool.get()
    puts, takes = pool.puts, pool.takes
    for i in range(n):
        sb = Sandbox(state_root=state_root)
        kind = i % 5
        if kind == 0:      # deleted while its standby is queued or being spawned
            sb.delete(wait=bool(i % 2))
            continue
        sb.exec(f"echo {i} > /workspace/f; sleep 100 &")
        if kind in (1, 2):
            sb.wait_standby()
        sb.reset()         # a swap (kinds 1, 2) or, often, a respawn (3, 4: standby not ready yet)
        assert sb.exec("ls -A /workspace").output == ""
        if kind == 2:
            sb.reset()     # right after a swap: the next standby is rarely ready
        sb.write_file("/workspace/g", b"x" * 1024)
        sb.delete(wait=kind == 3)
        assert len(pool) <= treepool.max_trees()
    # the pool was used both ways (deleted sandboxes' standbys went in, creates/resets took them)
    assert pool.puts > puts and pool.takes > takes, (pool.puts - puts, pool.takes - takes)
    assert wait_until(lambda: reaper.get().pending == 0 and _census(state_root) == before, timeout=60), \
        (_census(state_root), before)


def test_mixed_cycles_leave_nothing(state_root):
    _mixed_cycles(state_root, 20)


@pytest.mark.slow
def test_500_mixed_cycles_leave_nothing(state_root):
    _mixed_cycles(state_root, 500)
