"""Acceptance checks 9 (layer-freeze snapshots, branching) and 10 (concurrency, fd hygiene)."""

from __future__ import annotations

import os
import resource
import threading

import pytest

from neurips26.nitrobox import Sandbox, SnapshotNotFoundError, reaper
from neurips26.nitrobox.diagnostics import support_problem, wait_until
from neurips26.nitrobox.image import tree_hash

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")


def _state(sb):
    return sb.exec("cat /workspace/a /workspace/b 2>&1; ls /etc | sort | md5sum").output


def test_freeze_restore_roundtrip(sb):
    sb.exec("echo 1 > /workspace/a; echo 2 > /workspace/b; rm /etc/hostname")
    want = _state(sb)
    snap = sb.snapshot("s1")
    assert os.path.isdir(snap.lowers[0])
    assert _state(sb) == want                              # continues on top of the frozen layer
    sb.exec("echo changed > /workspace/a; rm /workspace/b; echo x > /etc/hostname")
    assert _state(sb) != want
    sb.restore("s1")
    assert _state(sb) == want
    assert sb.exec("cat /etc/hostname").exit_code != 0      # whiteout inside the frozen layer respected
    sb.reset()                                            # reset goes to the creation-time state
    assert sb.exec("cat /etc/hostname").output == "sandbox\n"
    assert sb.exec("ls /workspace").output == ""


def test_opaque_dir_in_frozen_layer(sb):
    sb.exec("rm -rf /etc/ld.so.conf.d && mkdir /etc/ld.so.conf.d && echo new > /etc/ld.so.conf.d/only")
    snap = sb.snapshot()
    (b,) = sb.branch(snap, 1)
    try:
        assert b.exec("ls /etc/ld.so.conf.d").output == "only\n"
    finally:
        b.delete(wait=True)


def test_branch_independent(sb):
    image_hash = tree_hash(sb.image.lower)
    sb.exec("echo base > /workspace/state")
    snap = sb.snapshot("base")
    kids = sb.branch(snap, 3)
    try:
        for i, k in enumerate(kids):
            assert k.exec("cat /workspace/state").output == "base\n"
            k.exec(f"echo {i} >> /workspace/state")
        for i, k in enumerate(kids):
            assert k.exec("cat /workspace/state").output == f"base\n{i}\n"
            k.reset()                                      # a branch resets to the snapshot, not the image
            assert k.exec("cat /workspace/state").output == "base\n"
        assert sb.exec("cat /workspace/state").output == "base\n"
    finally:
        for k in kids:
            k.delete(wait=True)
    assert tree_hash(sb.image.lower) == image_hash


def test_layers_freed_when_last_user_deleted(state_root):
    sb = Sandbox(state_root=state_root)
    sb.exec("echo x > /workspace/x")
    snap = sb.snapshot("t")
    layer = snap.lowers[0]
    kids = sb.branch(snap, 2)
    sb.delete(wait=True)                                   # releases sb's refs and its snapshots
    with pytest.raises(SnapshotNotFoundError):
        kids[0].branch(snap, 1)
    assert os.path.isdir(layer)                            # still used by the branches
    assert kids[1].exec("cat /workspace/x").output == "x\n"
    kids[0].delete(wait=True)
    assert os.path.isdir(layer)
    kids[1].delete(wait=True)
    assert wait_until(lambda: not os.path.exists(layer), timeout=5)


def test_snapshot_copy_method_keeps_processes(sb):
    job = sb.exec("sleep 30", background=True)
    sb.exec("echo c > /workspace/c")
    snap = sb.snapshot("c", method="copy")
    assert job.poll() is None                              # the shell and its jobs were not restarted
    (b,) = sb.branch(snap, 1)
    try:
        assert b.exec("cat /workspace/c").output == "c\n"
    finally:
        b.delete(wait=True)


# ------------------------------------------------------------------------------- 10. concurrency
def test_32_sandboxes_from_threads_no_fd_leak_high_fds(state_root):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 4096)
    if want < 1300:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} too low to test fds > 1024")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    dummies = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        from neurips26.nitrobox import treepool

        Sandbox(state_root=state_root).delete(wait=True)  # warm the image, spawner and reaper
        treepool.drain()
        fds0 = len(os.listdir("/proc/self/fd"))
        results: dict[int, list[str]] = {}
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                sb = Sandbox(state_root=state_root)
                try:
                    outs = [sb.exec(f"echo {i}-{k}").output for k in range(5)]
                    results[i] = outs
                finally:
                    sb.delete()
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
        assert all(results[i] == [f"{i}-{k}\n" for k in range(5)] for i in range(32))
        assert wait_until(lambda: reaper.get().pending == 0, timeout=20)
        assert len(treepool.get()) <= treepool.max_trees()  # pooled standby trees: capped, then drained
        treepool.drain()
        assert len(os.listdir("/proc/self/fd")) == fds0
        assert os.listdir(os.path.join(state_root, "sandboxes")) == []
    finally:
        for fd in dummies:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _fd_names() -> list:
    out = []
    for f in os.listdir("/proc/self/fd"):
        try:
            out.append(f"{f}:{os.readlink(f'/proc/self/fd/{f}')}")
        except OSError:
            pass
    return out


@pytest.mark.slow
def test_churn_1000_cycles_leave_nothing(state_root):
    fds0 = None
    for i in range(1000):
        sb = Sandbox(state_root=state_root)
        if fds0 is None:
            fds0 = len(os.listdir("/proc/self/fd"))
            names0 = _fd_names()
        assert sb.exec("echo x").output == "x\n"
        sb.delete()
    from neurips26.nitrobox import treepool

    assert len(treepool.get()) <= treepool.max_trees()  # deleted sandboxes' unused standbys: capped
    treepool.drain()
    assert wait_until(lambda: reaper.get().pending == 0, timeout=60)
    assert os.listdir(os.path.join(state_root, "sandboxes")) == []
    assert os.listdir(os.path.join(state_root, "trash")) == []
    pool_dir = treepool.pool_root(state_root)
    assert not os.path.isdir(pool_dir) or os.listdir(pool_dir) == []
    assert [m for m in open("/proc/self/mountinfo") if state_root in m] == []
    names = _fd_names()
    assert len(os.listdir("/proc/self/fd")) <= fds0, (sorted(set(names) - set(names0)), sorted(set(names0) - set(names)))
    own = os.readlink("/proc/self/ns/pid")
    children = [d for d in os.listdir("/proc") if d.isdigit()
                and open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1] == str(os.getpid())]  # ppid
    assert children == [] or all(os.readlink(f"/proc/{c}/ns/pid") == own for c in children)


def test_deep_snapshot_chain_is_squashed(state_root):
    sb = Sandbox(state_root=state_root, max_layers=3)
    try:
        sb.exec("mkdir -p /workspace/d && echo 0 > /workspace/d/keep && echo x > /workspace/gone")
        snaps = [sb.snapshot("s0")]
        sb.exec("rm /workspace/gone /etc/hostname; echo 1 > /workspace/one")
        snaps.append(sb.snapshot("s1"))
        sb.exec("rm -rf /workspace/d && mkdir /workspace/d && echo new > /workspace/d/only")  # opaque dir
        snaps.append(sb.snapshot("s2"))
        sb.exec("echo 3 > /workspace/one; mkdir -p /etc/hostname.d")
        snaps.append(sb.snapshot("s3"))
        assert len(sb._lowers) <= 3                           # squashed to stay within max_layers
        listing = sb.exec("cd /workspace && find . -type f | sort && cat one d/only && ls /etc/hostname 2>&1").output
        assert listing.splitlines()[:2] == ["./d/only", "./one"]
        assert "3\nnew\n" in listing and "No such file" in listing
        (b,) = sb.branch(snaps[-1], 1)
        try:
            assert b.exec("cat /workspace/one /workspace/d/only; ls /workspace/d").output == "3\nnew\nonly\n"
            assert b.exec("test -e /workspace/gone || test -e /etc/hostname").exit_code != 0
        finally:
            b.delete(wait=True)
    finally:
        sb.delete(wait=True)
