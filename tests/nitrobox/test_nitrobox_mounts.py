"""Issue 28 item 4 (mounts): read-only, read-write and copy-on-write bind mounts, devices by name."""

from __future__ import annotations

import os

import pytest

from neurips26.nitrobox import Sandbox
from neurips26.nitrobox.diagnostics import support_problem

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")


@pytest.fixture
def hostdir(tmp_path):
    d = tmp_path / "share"
    d.mkdir()
    (d / "f").write_text("host\n")
    os.chmod(tmp_path, 0o755)
    return str(d)


def test_ro_rw_cow_mounts(state_root, hostdir):
    sb = Sandbox(state_root=state_root, mounts=[f"{hostdir}:/data", (hostdir, "/rw", "rw"), f"{hostdir}:/cow:cow"])
    try:
        r = sb.exec("cat /data/f; echo x > /data/g")
        assert r.exit_code != 0 and r.output.startswith("host\n") and "Read-only file system" in r.output
        assert sb.exec("echo rw > /rw/g").exit_code == 0
        with open(os.path.join(hostdir, "g")) as f:
            assert f.read() == "rw\n"                               # rw: the host sees the write
        assert sb.exec("echo cow > /cow/f; cat /cow/f") == (0, "cow\n")
        with open(os.path.join(hostdir, "f")) as f:
            assert f.read() == "host\n"                             # cow: the host does not
        sb.reset()
        assert sb.exec("cat /cow/f") == (0, "host\n")               # and reset drops the sandbox's copy
    finally:
        sb.delete(wait=True)


def test_mount_target_never_resolves_on_the_host(state_root, hostdir):
    """B mounts before pivot_root, still seeing the host's root: a symlink planted in the layers at a
    mount target's parent must resolve inside the sandbox and create nothing on the host."""
    probe = f"/tmp/nbx-mount-probe-{os.getpid()}"
    sb = Sandbox(state_root=state_root)
    kids = []
    try:
        sb.exec(f"mkdir -p /mnt && ln -s {probe} /mnt/d2")
        snap = sb.snapshot("planted")
        kids = sb.branch(snap, 1, mounts=[f"{hostdir}:/mnt/d2/sub"])
        assert kids[0].exec(f"cat {probe}/sub/f") == (0, "host\n")   # resolved inside the sandbox
        assert not os.path.exists(probe)                              # nothing created on the host
    finally:
        for k in kids:
            k.delete(wait=True)
        sb.delete(wait=True)


@pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no /dev/fuse on this host")
def test_device_by_name(state_root):
    with Sandbox(state_root=state_root, devices=["fuse"]) as sb:
        assert sb.exec("test -c /dev/fuse && echo chr").output == "chr\n"
    with Sandbox(state_root=state_root) as sb:
        assert sb.exec("test -e /dev/fuse || echo absent").output == "absent\n"


def test_bad_mounts_and_devices_name_the_field():
    with pytest.raises(ValueError, match="mounts mode"):
        Sandbox(mounts=["/tmp:/x:rwx"])
    with pytest.raises(ValueError, match="existing absolute host path"):
        Sandbox(mounts=["/nonexistent-nbx:/x"])
    with pytest.raises(ValueError, match="mounts target"):
        Sandbox(mounts=["/tmp:/proc"])
    with pytest.raises(ValueError, match="device"):
        Sandbox(devices=["nonexistent-nbx-dev"])
