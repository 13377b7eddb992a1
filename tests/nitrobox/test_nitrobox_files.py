"""Issue 28 item 2: the files API acts with the sandbox's rights and cannot hang or flood the client.

Each reproduction failed on 49a5fe8 (host-root writes through a planted symlink, a FIFO read that
never returned, /dev/zero read to MemoryError, ``loop -> ..`` copied 83 levels deep, symlinked dirs
copied, mtimes lost)."""

from __future__ import annotations

import errno
import os
import stat
import threading

import pytest

from neurips26.nitrobox.diagnostics import support_problem

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")


def _within(seconds: float, fn, *args, **kw):
    """Run fn in a thread; (finished, result-or-exception). A hang is a failure, never a stuck test."""
    box = {}

    def run():
        try:
            box["r"] = fn(*args, **kw)
        except BaseException as e:  # noqa: BLE001
            box["e"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    return (not t.is_alive()), box.get("e", box.get("r"))


@pytest.mark.skipif(not os.path.exists("/proc/mtrr"), reason="no /proc/mtrr on this host")
def test_planted_symlink_to_host_proc_is_opened_with_the_sandboxes_rights(sb):
    assert sb.exec("ln -s /proc/mtrr /workspace/x; echo x > /proc/mtrr").exit_code != 0  # sandbox root: EPERM
    with pytest.raises(PermissionError):
        sb.write_file("/workspace/x", "disable=0\n")
    with pytest.raises(PermissionError):
        sb.read_file("/workspace/x")


def test_fifo_is_refused_without_hanging(sb):
    sb.exec("mkfifo /workspace/fifo")
    done, res = _within(5, sb.read_file, "/workspace/fifo")
    assert done, "read_file blocked on a FIFO"
    assert isinstance(res, OSError) and res.errno == errno.EINVAL and "fifo" in str(res)
    done, res = _within(5, sb.write_file, "/workspace/fifo", "x")
    assert done and isinstance(res, OSError) and res.errno == errno.EINVAL


def test_symlink_to_dev_zero_is_refused_and_reads_are_capped(sb):
    sb.exec("ln -s /dev/zero /workspace/z; head -c 3000000 /dev/zero > /workspace/big")
    done, res = _within(5, sb.read_file, "/workspace/z")
    assert done and isinstance(res, OSError) and "character device" in str(res)
    with pytest.raises(OSError) as ei:
        sb.read_file("/workspace/big", max_bytes=1 << 20)
    assert ei.value.errno == errno.EFBIG
    assert len(sb.read_file("/workspace/big")) == 3000000


def test_special_true_reads_a_device_when_asked(sb):
    sb.exec("ln -s /dev/null /workspace/n")
    assert sb.read_file("/workspace/n", special=True) == b""


def test_download_keeps_links_as_links_and_refuses_nothing_deep(sb, tmp_path):
    sb.exec("mkdir -p /workspace/d/sub && echo data > /workspace/d/sub/f && ln -s .. /workspace/d/loop "
            "&& ln -s /etc /workspace/d/etc && mkfifo /workspace/d/p && chmod 750 /workspace/d/sub "
            "&& chmod 741 /workspace/d/sub/f && touch -d @1000000000 /workspace/d/sub/f")
    done, skipped = _within(30, sb.download, "/workspace/d", tmp_path / "d")
    assert done and not isinstance(skipped, BaseException), skipped
    d = tmp_path / "d"
    assert os.path.islink(d / "loop") and os.readlink(d / "loop") == ".."
    assert os.path.islink(d / "etc") and os.readlink(d / "etc") == "/etc"
    assert skipped == ["/workspace/d/p"] and not os.path.lexists(d / "p")
    st = os.stat(d / "sub" / "f")
    assert (d / "sub" / "f").read_text() == "data\n"
    assert stat.S_IMODE(st.st_mode) == 0o741 and st.st_mtime_ns == 1000000000 * 10**9
    assert stat.S_IMODE(os.stat(d / "sub").st_mode) == 0o750
    # nothing was copied through the loop
    assert sorted(os.listdir(d)) == ["etc", "loop", "sub"]


def test_upload_keeps_modes_mtimes_and_links(sb, tmp_path):
    src = tmp_path / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "run.sh").write_text("echo ran\n")
    os.chmod(src / "pkg" / "run.sh", 0o755)
    os.utime(src / "pkg" / "run.sh", ns=(1_500_000_000_123_456_789,) * 2)
    os.symlink("pkg/run.sh", src / "link")
    os.mkfifo(src / "fifo")
    skipped = sb.upload(src, "/workspace/proj")
    assert skipped == [str(src / "fifo")]
    r = sb.exec("stat -c '%a %.9Y' pkg/run.sh; readlink link; ./link", workdir="/workspace/proj")
    assert r == (0, "755 1500000000.123456789\npkg/run.sh\nran\n")


def test_upload_keeps_mtime_so_a_same_size_edit_recompiles(sb, tmp_path):
    """The issue's stale-.pyc case: 49a5fe8 gave every upload the upload time as mtime, so a same-size
    edit uploaded within the same second kept the old .pyc; the source's own mtime now travels."""
    f = tmp_path / "m.py"
    f.write_text("X = 1\n")
    os.utime(f, ns=(1_600_000_000_000_000_000,) * 2)
    sb.upload(f, "/workspace/m.py")
    assert sb.exec("stat -c %Y m.py").output == "1600000000\n"
    assert sb.exec("python3 -c 'import m; print(m.X)'").output == "1\n"   # writes __pycache__
    f.write_text("X = 2\n")                                                # same size, new mtime
    os.utime(f, ns=(1_600_000_001_000_000_000,) * 2)
    sb.upload(f, "/workspace/m.py")
    assert sb.exec("python3 -c 'import m; print(m.X)'").output == "2\n"


def test_write_file_follows_links_only_inside_the_sandbox(sb, sentinel_path):
    sb.exec(f"ln -s {sentinel_path} /workspace/s")
    sb.write_file("/workspace/s", "inside\n")
    with open(sentinel_path) as f:
        assert f.read() == "host secret\n"
    assert sb.exec(f"cat {sentinel_path}").output == "inside\n"


def test_stat_mkdir_symlink_link(sb):
    sb.mkdir("/workspace/a/b", mode=0o700, parents=True)
    sb.write_file("/workspace/a/b/f", "1", mode=0o640)
    sb.link("/workspace/a/b/f", "/workspace/a/hard")
    sb.symlink("b/f", "/workspace/a/soft")
    info = sb.stat("/workspace/a/soft", follow_symlinks=False)
    assert info.is_symlink and info.target == "b/f"
    assert sb.stat("/workspace/a/soft").is_file
    assert sb.exec("stat -c '%h %a' /workspace/a/b/f").output == "2 640\n"
    with pytest.raises(NotADirectoryError):
        sb.list_dir("/workspace/a/hard")
    with pytest.raises(FileNotFoundError):
        sb.read_file("/workspace/missing")


@pytest.fixture
def sentinel_path():
    path = f"/dev/shm/neurips26-nbx-files-sentinel-{os.getpid()}"
    with open(path, "w") as f:
        f.write("host secret\n")
    yield path
    os.unlink(path)


# ----------------------------------------------------------------- the client-side fast path
def test_fast_path_serves_plain_files_and_hands_the_rest_to_the_agent(sb):
    sb.write_file("/workspace/a.txt", b"one", mode=0o640)
    assert sb._proc.rootfd is not None                     # opened from the tree's root fd
    assert sb.read_file("/workspace/a.txt") == b"one"
    assert sb.exec("stat -c '%a %u %g' /workspace/a.txt; cat /workspace/a.txt").output == "640 0 0\none"
    sb.write_file("/workspace/a.txt", b"2")                 # existing file: truncated, mode kept
    assert sb.exec("stat -c %a /workspace/a.txt; cat /workspace/a.txt").output == "640\n2"
    sb.write_file("/workspace/new/deep/b", b"b")           # missing parents: the agent makes them
    assert sb.read_file("/workspace/new/deep/b") == b"b"
    # across a mount (the sandbox's /proc, the host /usr bind) the agent decides, with its rights
    assert sb.read_file("/proc/self/comm").strip()
    with pytest.raises(OSError):
        sb.write_file("/usr/nbx-fast-path-probe", b"x")
    assert not os.path.exists("/usr/nbx-fast-path-probe")
    with pytest.raises(FileNotFoundError):
        sb.read_file("/workspace/missing")
    # a reset closes the old tree's root fd; the new tree brought its own
    old = os.stat(f"/proc/self/fd/{sb._proc.rootfd}")
    sb.reset()
    assert os.stat(f"/proc/self/fd/{sb._proc.rootfd}").st_dev != old.st_dev  # another overlay
    with pytest.raises(FileNotFoundError):
        sb.read_file("/workspace/a.txt")
    sb.write_file("/workspace/c", b"c")
    assert sb.exec("cat /workspace/c").output == "c"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant an unmapped owner in the upper")
def test_fast_path_never_acts_on_an_inode_the_sandbox_root_cannot(sb):
    # a file owned by a host uid outside the sandbox's map (as an imported layer may carry):
    # sandbox root's DAC_OVERRIDE does not cover it, so the write must fail as it does inside
    sb.exec("echo keep > /workspace/u; chmod 644 /workspace/u")
    upper = sb.state_dir / "upper" / "workspace" / "u"
    os.chown(upper, 70000, 70000)
    assert sb.exec("echo x > /workspace/u").exit_code != 0  # what the sandbox's root may do
    with pytest.raises(PermissionError):
        sb.write_file("/workspace/u", b"overwritten")
    assert upper.read_bytes() == b"keep\n"
    os.mkdir(sb.state_dir / "upper" / "workspace" / "ud", 0o755)
    os.chown(sb.state_dir / "upper" / "workspace" / "ud", 70000, 70000)
    with pytest.raises(PermissionError):
        sb.write_file("/workspace/ud/f", b"x")
    assert os.listdir(sb.state_dir / "upper" / "workspace" / "ud") == []
