"""Acceptance check 8: fork bomb, memory hog, disk fill and timeouts are contained."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from neurips26.nitrobox import Sandbox, limits
from neurips26.nitrobox.diagnostics import pidns_of, procs_in_pidns, support_problem, wait_until

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")


def _skip_unless(sb: Sandbox, item: str) -> None:
    if item not in sb.features["limits"]:
        sb.delete()
        pytest.skip(f"limit {item!r} not enforced here (features['limits'] = {sb.features['limits']})")


def _host_fork_ok() -> bool:
    return subprocess.run(["true"]).returncode == 0


def test_fork_bomb_contained(state_root):
    sb = Sandbox(state_root=state_root, pids=64)
    try:
        _skip_unless(sb, "pids")
        ns = pidns_of(sb.pid)
        t0 = time.monotonic()
        sb.exec(":(){ :|:& };:", timeout=4)  # the bomb backgrounds itself; exec must still return
        assert time.monotonic() - t0 < 4 + 8
        time.sleep(0.5)
        assert len(procs_in_pidns(ns)) <= 64 + 1  # pids.max holds (+1: child A lives outside the ns)
        assert _host_fork_ok()
        sb.reset()
        assert sb.exec("echo ok") == (0, "ok\n")
        # the old tree is killed by the background reaper: every bomb process must be gone soon
        assert wait_until(lambda: procs_in_pidns(ns) == [], timeout=10), procs_in_pidns(ns)
        assert int(sb.exec("ls /proc | grep -c '^[0-9]'").output) <= 5
    finally:
        sb.delete(wait=True)


def test_memory_hog_contained(state_root):
    sb = Sandbox(state_root=state_root, memory="128m")
    try:
        _skip_unless(sb, "memory")
        r = sb.exec("python3 -c 'b = bytearray(512 << 20); print(len(b))'", timeout=60)
        assert r.exit_code != 0 and "536870912" not in r.output  # 137 (OOM kill) or MemoryError
        assert _host_fork_ok()
        sb.reset()  # the OOM killer may have chosen the shell: reset must recover either way
        assert sb.exec("python3 -c 'b = bytearray(32 << 20); print(len(b))'").output == f"{32 << 20}\n"
    finally:
        sb.delete(wait=True)


def test_memory_rlimit_fallback(state_root, monkeypatch):
    be = limits.detect(force="rlimit")
    monkeypatch.setattr(limits, "detect", lambda force=None: be)
    sb = Sandbox(state_root=state_root, memory="128m")
    try:
        assert sb.features["limits"]["memory"] == "rlimit_as"
        r = sb.exec("python3 -c 'b = bytearray(512 << 20)'", timeout=60)
        assert r.exit_code != 0 and "MemoryError" in r.output
    finally:
        sb.delete(wait=True)


def test_disk_fill_contained(state_root):
    os.makedirs(state_root, exist_ok=True)
    st = os.statvfs(state_root)
    free0 = st.f_bavail * st.f_frsize
    sb = Sandbox(state_root=state_root, disk_limit="64m")
    try:
        _skip_unless(sb, "disk")
        r = sb.exec("dd if=/dev/zero of=/workspace/big bs=1M count=200", timeout=60)
        assert r.exit_code != 0 and "No space left on device" in r.output
        st = os.statvfs(state_root)
        assert free0 - st.f_bavail * st.f_frsize <= (64 << 20) + (1 << 20)
        assert sb.exec("rm /workspace/big && echo x > /workspace/small && cat /workspace/small").output == "x\n"
        sb.write_file("/workspace/f", "via files api")  # the files API reaches the ns-private tmpfs
        assert sb.exec("cat /workspace/f").output == "via files api"
        snap = sb.snapshot("d")                            # copied out through /proc/<A>/fd
        sb.exec("rm /workspace/f")
        sb.restore(snap)
        assert sb.read_file("/workspace/f") == b"via files api"
        sb.reset()
        assert not sb.exists("/workspace/small")
    finally:
        sb.delete(wait=True)
    assert [m for m in open("/proc/self/mountinfo") if state_root in m] == []


def test_sleep_timeout(sb):
    t0 = time.monotonic()
    r = sb.exec("sleep 100", timeout=1)
    assert time.monotonic() - t0 < 5
    assert r.timed_out and r.exit_code == 124
    assert sb.exec("echo next") == (0, "next\n")
    assert "sleep" not in sb.exec("ps -eo comm").output


def test_timeout_with_escaped_grandchild(sb):
    # a grandchild in its own session escapes coreutils' group kill and keeps stdout open: exec must
    # still return on the status pipe, not wait for EOF
    t0 = time.monotonic()
    r = sb.exec("setsid sleep 100 & wait", timeout=1)
    assert r.timed_out and time.monotonic() - t0 < 8
    assert sb.exec("echo alive") == (0, "alive\n")


def test_stateful_timeout_keeps_shell_usable(state_root):
    sb = Sandbox(state_root=state_root, stateful=True)
    try:
        sb.exec("cd /tmp")
        r = sb.exec("sleep 100", timeout=1)
        assert r.timed_out
        assert sb.exec("echo ok").output == "ok\n"
    finally:
        sb.delete(wait=True)


def test_max_lifetime_watchdog(state_root):
    sb = Sandbox(state_root=state_root, max_lifetime=0.5)
    assert sb.exec("true").exit_code == 0
    deadline = time.monotonic() + 5
    while not sb.closed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sb.closed


def test_features_say_where_files_land(state_root, tmp_path):
    """Issue 28 item 3: with no disk_limit the writable layer is the state root's filesystem; features
    says whether that is host RAM and whether it counts against the memory limit."""
    with Sandbox(state_root=state_root, memory="256m") as sb:
        st = sb.features["storage"]
        assert st["host_ram"] is True and st["size_cap_bytes"] is None   # /dev/shm state root
        assert st["charged_to_memory_limit"] == ("memory" in sb.features["limits"])
        assert "disk_limit" in st["note"]
    with Sandbox(state_root=state_root, disk_limit="8m") as sb:
        assert sb.features["storage"]["size_cap_bytes"] == 8 << 20
    disk_root = str(tmp_path / "state")
    with Sandbox(state_root=disk_root) as sb:
        st = sb.features["storage"]
        assert st["host_ram"] is False and "disk" in st["note"]
        assert sb.exec("echo x > /workspace/f && cat /workspace/f") == (0, "x\n")
