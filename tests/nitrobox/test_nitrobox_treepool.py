"""The process-wide pool of clean standby trees (treepool.py): a deleted sandbox's never-used standby
goes to the pool and the next create (or a reset whose own standby is not up) with the same tree spec
takes it. A pooled tree sees nothing of the sandbox it was spawned for, is only taken for an equal
spec, the pool is capped, and drain / the dead-owner cleanup free everything."""

from __future__ import annotations

import os

import pytest

from neurips26.nitrobox import Sandbox, maintenance, treepool
from neurips26.nitrobox.diagnostics import (PLANT_STATE, READ_STATE, pidns_of, procs_in_pidns,
                                            support_problem, wait_until)

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")


@pytest.fixture(autouse=True)
def _one_spawn_mode(monkeypatch):
    """spawn_mode="auto" forks directly until the zygote has booted in the background, so consecutive
    sandboxes of a test could get different tree keys (a tree is pooled per spawn mode) depending on the
    zygote's boot time: here "auto" means the zygote, every time (explicit modes stay as given)."""
    from neurips26.nitrobox import sandbox

    pick = sandbox._pick_spawn_mode
    monkeypatch.setattr(sandbox, "_pick_spawn_mode", lambda mode, rootless: "zygote" if mode == "auto"
                        else pick(mode, rootless))


def _pooled(state_root: str) -> list:
    real = os.path.realpath(state_root)
    return [p for k, p, _ in treepool.get().items if k[0] == real]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_pooled_standby_sees_nothing_of_the_deleted_sandbox(state_root):
    treepool.drain()
    sb = Sandbox(state_root=state_root)
    ref = Sandbox(state_root=state_root, standby=False)  # a freshly spawned tree (never pooled)
    sb2 = None
    try:
        assert sb.wait_standby()
        standby_pid, pooled_dir = sb._spare[0].b_pid, sb._spare[0].tree_dir
        assert sb.exec(PLANT_STATE).exit_code == 0
        sb.exec("export LEAK=1; cd /tmp", stateful=True)
        sb.write_file("/workspace/w", b"secret")
        old_id, old_dir = sb.id, sb.state_dir
        sb.delete(wait=True)
        # freed: the live tree and the sandbox's own dir; the standby went to the pool, alive
        assert not os.path.exists(old_dir)
        assert [p.b_pid for p in _pooled(state_root)] == [standby_pid] and _alive(standby_pid)
        sb2 = Sandbox(state_root=state_root)
        assert sb2.pid == standby_pid and _pooled(state_root) == []  # create took the pooled tree
        clean = ref.exec(READ_STATE)
        after = sb2.exec(READ_STATE)
        assert after.exit_code == clean.exit_code and after.output == clean.output
        assert "planted" not in after.output and after.output.endswith("0\nsandbox\n0\n")
        assert sb2.exec("echo ${LEAK:-unset}; pwd", stateful=True).output == "unset\n/workspace\n"
        assert not sb2.exists("/workspace/w")
        # its mount table names neither the deleted sandbox nor a host path
        mi = sb2.exec("cat /proc/self/mountinfo").output
        assert old_id not in mi and state_root not in mi and "sandboxes/" not in mi
        # what it writes lands in its own upper; the files API works on it
        sb2.write_file("/workspace/n", b"new")
        assert (sb2.state_dir / "upper" / "workspace" / "n").read_bytes() == b"new"
        assert sb2.exec("cat /workspace/n").output == "new"
        assert not os.path.exists(pooled_dir)                        # adopted: its dir is gone
        # and it gets its own standby, resets by swap as before
        assert sb2.wait_standby()
        sb2.exec(PLANT_STATE)
        sb2.reset()
        assert sb2.exec(READ_STATE).output == clean.output
    finally:
        for s in (sb2, ref):
            if s is not None:
                s.delete(wait=True)


def test_only_an_equal_tree_spec_takes_a_pooled_tree(state_root):
    treepool.drain()
    sb = Sandbox(state_root=state_root, env={"A": "1"})
    assert sb.wait_standby()
    pid = sb._spare[0].b_pid
    sb.delete(wait=True)
    others = [Sandbox(state_root=state_root, env={"A": "2"}), Sandbox(state_root=state_root, hostname="other"),
              Sandbox(state_root=state_root, working_dir="/work"), Sandbox(state_root=state_root, memory="64m"),
              Sandbox(state_root=state_root, env={"A": "1"}, network="host")]
    try:
        assert all(o.pid != pid for o in others)
        assert [p.b_pid for p in _pooled(state_root)] == [pid]
        same = Sandbox(state_root=state_root, env={"A": "1"})
        others.append(same)
        assert same.pid == pid and same.exec("echo $A").output == "1\n"
    finally:
        for o in others:
            o.delete(wait=True)


def test_reset_takes_a_pooled_tree_when_its_own_standby_is_not_up(state_root):
    treepool.drain()
    a = Sandbox(state_root=state_root)
    assert a.wait_standby()
    pooled_pid = a._spare[0].b_pid
    a.delete(wait=True)
    b = Sandbox(state_root=state_root)  # takes the pooled tree; its own standby is queued now
    try:
        assert b.pid == pooled_pid
        c = Sandbox(state_root=state_root)
        assert c.wait_standby()
        c_standby = c._spare[0].b_pid
        c.delete(wait=True)                # a second pooled tree
        b._take_spare = lambda: None       # as if b's own standby were not up yet
        b.exec("echo x > /workspace/x")
        b.reset()
        assert b.pid == c_standby and b.exec("ls -A /workspace").output == ""
        b.exec("echo y > /workspace/y")
        assert (b.state_dir / "upper" / "workspace" / "y").exists()
    finally:
        b.delete(wait=True)


def test_pool_is_capped_and_drain_frees_everything(state_root, monkeypatch):
    treepool.drain()
    monkeypatch.setenv(treepool.POOL_ENV, "3")
    boxes = [Sandbox(state_root=state_root) for _ in range(5)]
    for b in boxes:
        assert b.wait_standby()
    standbys = [b._spare[0].b_pid for b in boxes]
    nss = [pidns_of(p) for p in standbys]
    for b in boxes:
        b.delete(wait=True)
    kept = [p.b_pid for p in _pooled(state_root)]
    assert kept == standbys[2:]                       # the newest 3; the oldest 2 were evicted
    assert wait_until(lambda: not any(_alive(p) for p in standbys[:2]), timeout=10)
    assert all(procs_in_pidns(ns) == [] for ns in nss[:2])
    pool_dir = treepool.pool_root(state_root)
    assert wait_until(lambda: len(os.listdir(pool_dir)) == 3, timeout=10)
    assert treepool.drain(state_root) == 3
    assert not any(_alive(p) for p in standbys) and all(procs_in_pidns(ns) == [] for ns in nss)
    assert os.listdir(pool_dir) == []
    monkeypatch.setenv(treepool.POOL_ENV, "0")     # off: the standby is torn down with its sandbox
    b = Sandbox(state_root=state_root)
    assert b.wait_standby()
    spid = b._spare[0].b_pid
    b.delete(wait=True)
    assert _pooled(state_root) == [] and not _alive(spid)


def test_the_pool_switch_is_read_when_a_tree_would_be_pooled(state_root, monkeypatch):
    """$NEURIPS26_NBX_POOL set after the sandbox (and its standby, and its tree key) exist still
    counts: 0 at delete tears the standby down; a malformed value fails a create, naming it."""
    treepool.drain()
    monkeypatch.setenv(treepool.POOL_ENV, "8")
    sb = Sandbox(state_root=state_root)
    assert sb.wait_standby() and sb._pool_key() is not None
    spid = sb._spare[0].b_pid
    monkeypatch.setenv(treepool.POOL_ENV, "0")
    sb.delete(wait=True)
    assert _pooled(state_root) == [] and not _alive(spid)
    monkeypatch.setenv(treepool.POOL_ENV, "eight")
    with pytest.raises(ValueError, match=treepool.POOL_ENV):
        Sandbox(state_root=state_root)
    # malformed only after the create: the delete must still free everything (the pool reads as off)
    monkeypatch.setenv(treepool.POOL_ENV, "8")
    sb = Sandbox(state_root=state_root)
    assert sb.wait_standby()
    pids = (sb._spare[0].b_pid, sb._proc.b_pid)
    monkeypatch.setenv(treepool.POOL_ENV, "eight")
    sb.delete(wait=True)
    assert _pooled(state_root) == [] and not any(_alive(p) for p in pids)
    assert not os.path.exists(sb._dir)


def test_dead_owners_pool_dirs_are_cleaned_up(state_root):
    sb = Sandbox(state_root=state_root)
    sb.delete(wait=True)
    pool_dir = treepool.pool_root(state_root)
    os.makedirs(pool_dir, exist_ok=True)
    dead = os.path.join(pool_dir, f"{2 ** 22 + 12345}-1-{'0' * 32}")   # no such pid
    os.makedirs(dead + "/upper/workspace")
    mine = os.path.join(pool_dir, f"{os.getpid()}-{treepool.get()._start}-{'1' * 32}")
    os.makedirs(mine + "/upper")
    removed = maintenance.cleanup(state_root, trash=False)
    assert dead in removed and not os.path.exists(dead)
    assert os.path.exists(mine)                                      # a live owner's: kept
    os.rmdir(mine + "/upper")
    os.rmdir(mine)


def test_a_standby_spawn_in_flight_at_delete_finishes_into_the_pool(state_root, monkeypatch):
    """delete does not wait for (or kill) its standby's spawn when its trees are pooled: the clean tree
    finishes into the pool; with the pool off the spawn is killed and waited for, as before."""
    import threading

    from neurips26.nitrobox import sandbox as sbmod

    treepool.drain()
    ref = Sandbox(state_root=state_root, standby=False)
    started, release = threading.Event(), threading.Event()
    orig = sbmod.Sandbox._spawn_into

    def slow(self, proc, paths=None, lowers=None):
        if paths is not None:  # a standby spawn: hold it in flight
            started.set()
            release.wait(10)
        return orig(self, proc, paths, lowers)

    monkeypatch.setattr(sbmod.Sandbox, "_spawn_into", slow)
    try:
        sb = Sandbox(state_root=state_root)
        assert started.wait(10) and sb._spare_state == "spawning"
        assert sb.exec(PLANT_STATE).exit_code == 0
        sb.delete(wait=True)                 # returns with the spawn still held
        assert not release.is_set() and _pooled(state_root) == []
        release.set()
        assert wait_until(lambda: len(_pooled(state_root)) == 1, timeout=20)
        pid = _pooled(state_root)[0].b_pid
        sb2 = Sandbox(state_root=state_root, standby=True)
        assert sb2.pid == pid
        assert sb2.exec(READ_STATE).output == ref.exec(READ_STATE).output
        sb2.delete(wait=True)
        treepool.drain()
        # pool off: the in-flight spawn is killed and delete waits for it
        monkeypatch.setenv(treepool.POOL_ENV, "0")
        started.clear()
        release.clear()
        sb3 = Sandbox(state_root=state_root)
        assert started.wait(10)
        threading.Timer(0.3, release.set).start()
        sb3.delete(wait=True)
        assert release.is_set() and _pooled(state_root) == []
        assert os.listdir(treepool.pool_root(state_root)) == []
    finally:
        release.set()
        ref.delete(wait=True)


def test_a_standby_spawn_that_cannot_start_leaves_no_waiter(state_root, monkeypatch):
    """Its state root gone (a test fixture's rmtree) while a standby was queued: the spawn fails, the
    delete and drain wait for nothing, and nothing is left behind."""
    from neurips26.nitrobox import sandbox as sbmod

    treepool.drain()
    orig = sbmod.Sandbox._make_standby

    def fail_first(self):
        monkeypatch.setattr(treepool.get(), "new_dir", lambda root: (_ for _ in ()).throw(OSError(2, "gone")))
        try:
            return orig(self)
        finally:
            monkeypatch.undo()

    monkeypatch.setattr(sbmod.Sandbox, "_make_standby", fail_first)
    sb = Sandbox(state_root=state_root)
    assert not sb.wait_standby(10) and sb._spare_state == "none" and sb._spare_done.is_set()
    sb.delete(wait=True)
    assert treepool.get().expected == 0 and treepool.drain(state_root) == 0
