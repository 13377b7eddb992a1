"""Pool, asyncio API, adapters (Docker SDK / Harbor shapes) and the ``neurips26 nitrobox`` CLI."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import tarfile
import time

import pytest

from neurips26.nitrobox import Sandbox
from neurips26.nitrobox.adapters import DockerLikeClient, HarborEnvironment
from neurips26.nitrobox.diagnostics import support_problem, wait_until
from neurips26.nitrobox.pool import AsyncSandbox, AsyncSandboxPool, SandboxPool

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")


def test_pool_reset_on_release(state_root):
    with SandboxPool({"state_root": state_root}, size=2, max_size=3) as pool:
        a = pool.acquire()
        a.exec("echo dirty > /workspace/x")
        t0 = time.perf_counter()
        pool.release(a)                                   # returns before the reset is done
        assert time.perf_counter() - t0 < 0.05
        seen = set()
        for _ in range(3):
            sb = pool.acquire(timeout=10)
            seen.add(sb.id)
            assert sb.exec("ls /workspace").output == ""  # every acquired sandbox is clean
        assert len(seen) == 3 and pool.in_use == 3
        with pytest.raises(TimeoutError):
            pool.acquire(timeout=0.2)                     # max_size reached
        ids = list(seen)
    assert all(not os.path.exists(os.path.join(state_root, "sandboxes", i)) for i in ids) or \
        wait_until(lambda: os.listdir(os.path.join(state_root, "sandboxes")) == [])


def test_pool_bad_input(state_root):
    with pytest.raises(ValueError, match="size"):
        SandboxPool({"state_root": state_root}, size=-1)
    with pytest.raises(ValueError, match="max_size"):
        SandboxPool({"state_root": state_root}, size=2, max_size=1)
    with SandboxPool({"state_root": state_root}, size=0, max_size=1) as pool:
        other = Sandbox(state_root=state_root)
        try:
            with pytest.raises(ValueError, match="pool"):
                pool.release(other)
        finally:
            other.delete()


def test_async_api(state_root):
    async def main():
        async with await AsyncSandbox.create(state_root=state_root) as sb:
            rs = await asyncio.gather(*[sb.aexec(f"echo {i}") for i in range(4)])
            assert [r.output for r in rs] == [f"{i}\n" for i in range(4)]
            await sb.awrite_file("/workspace/a", "A")
            snap = await sb.asnapshot("s")
            await sb.areset()
            assert (await sb.aexec("ls /workspace")).output == ""
            await sb.arestore(snap)
            assert await sb.aread_file("/workspace/a") == b"A"
        pool = await AsyncSandboxPool.create({"state_root": state_root}, size=2)
        s1, s2 = await asyncio.gather(pool.acquire(), pool.acquire())
        outs = await asyncio.gather(s1.aexec("hostname"), s2.aexec("hostname"))
        assert [o.output for o in outs] == ["sandbox\n", "sandbox\n"]
        pool.release(s1)
        pool.release(s2)
        await pool.aclose()

    asyncio.run(main())


def test_docker_like_adapter_runs_swebench_style_code(state_root):
    client = DockerLikeClient({"state_root": state_root}, images={"python:3.11": "host"})
    c = client.containers.create("python:3.11", command="tail -f /dev/null", working_dir="/testbed",
                                 environment=["PYTHONDONTWRITEBYTECODE=1"])
    c.start()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b"def add(a, b):\n    return a + b\n"
        info = tarfile.TarInfo("pkg/mod.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    assert c.put_archive("/testbed", buf.getvalue())
    r = c.exec_run("python3 -c 'from pkg.mod import add; print(add(2, 3)); import os; "
                   "print(os.environ[\"PYTHONDONTWRITEBYTECODE\"])'", workdir="/testbed")
    assert r.exit_code == 0 and r.output == b"5\n1\n"
    stream, stat = c.get_archive("/testbed/pkg/mod.py")
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        assert tar.extractfile(tar.getmembers()[0]).read() == data
    assert client.containers.get(c.id) is c
    c.remove(force=True)
    assert c.sandbox.closed
    client.close()


def test_harbor_environment(state_root, tmp_path):
    (tmp_path / "in.txt").write_text("payload")

    async def main():
        env = HarborEnvironment(state_root=state_root)
        await env.start(force_build=False)
        await env.upload_file(tmp_path / "in.txt", "/workspace/in.txt")
        r = await env.exec("cat /workspace/in.txt; echo; echo $X; pwd", cwd="/tmp", env={"X": "y"}, timeout_sec=10)
        assert (r.return_code, r.stdout) == (0, "payload\ny\n/tmp\n")
        await env.exec("mkdir -p /workspace/out && echo o > /workspace/out/f")
        await env.download_dir("/workspace/out", tmp_path / "out")
        await env.stop(delete=True)

    asyncio.run(main())
    assert (tmp_path / "out" / "f").read_text() == "o\n"


# ------------------------------------------------------------------------------- CLI
def _cli(*args, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "neurips26", "nitrobox", *args], input=stdin,
                          capture_output=True, text=True, timeout=120)


def test_cli_shell_exec_cleanup(state_root):
    r = _cli("shell", "--state-root", state_root, stdin="cd /tmp\nexport A=5\npwd; echo $A\nexit\n")
    assert r.returncode == 0 and r.stdout == "/tmp\n5\n", r.stderr
    r = _cli("exec", "--state-root", state_root, "--", "bash", "-c", "echo hi; exit 3")
    assert r.returncode == 3 and r.stdout == "hi\n"
    r = _cli("features", "--state-root", state_root, "--memory", "64m")
    assert r.returncode == 0 and '"limits"' in r.stdout
    assert os.listdir(os.path.join(state_root, "sandboxes")) == []
    assert os.listdir(os.path.join(state_root, "trash")) == []
    r = _cli("cleanup", "--state-root", state_root)
    assert r.returncode == 0


@pytest.mark.parametrize("args, msg", [
    (("exec", "--memory", "12q", "--", "true"), "memory"),
    (("exec", "--image", "/nonexistent-image", "--", "true"), "does not exist"),
    (("shell", "--pids", "notanint"), "pids"),
    (("bogus",), "invalid choice"),
])
def test_cli_user_errors(args, msg, state_root):
    r = _cli(*args[:1], "--state-root", state_root, *args[1:]) if args[0] != "bogus" else _cli(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and msg in lines[0] and "Traceback" not in r.stderr


def test_readme_example_runs(state_root, monkeypatch):
    """Issue 28 item 8: the README's first example works as written on the default image."""
    import re
    from pathlib import Path

    readme = Path(__file__).resolve().parents[2] / "src" / "neurips26" / "nitrobox" / "README.md"
    block = re.search(r"```python\n(.*?)```", readme.read_text(), re.S).group(1)
    monkeypatch.setenv("NEURIPS26_NBX_STATE", state_root)
    exec(compile(block, str(readme), "exec"), {"__name__": "readme_example"})


@pytest.mark.anchor
def test_agentdocker_lite_backend_one_lifecycle(state_root):
    """The authors' earlier implementation as a bench anchor (skips unless installed and root)."""
    pytest.importorskip("agentdocker_lite")
    if os.geteuid() != 0:
        pytest.skip("agentdocker-lite's rootful backend needs root")
    from neurips26.nitrobox import microbench
    from neurips26.nitrobox.backends import make_backend

    be = make_backend("agentdocker-lite", state_root=state_root)
    out = {op: [] for op in microbench.OPS}
    try:
        microbench.one_lifecycle(be, out)   # raises if echo, read-back or reset is wrong
    finally:
        be.close()
    assert all(len(out[op]) == 1 for op in ("create", "exec_echo", "reset", "delete"))


def test_behaviour_probes_all_pass_on_nitrobox(state_root):
    """The probes behind the README feature table (``probes.py``), on our backend: every one holds."""
    from neurips26.nitrobox.backends import NitroBackend
    from neurips26.nitrobox.probes import PROBES, probe_all

    be = NitroBackend(state_root=state_root)
    try:
        res = probe_all(be)
    finally:
        be.close()
    assert set(res) == set(PROBES) and all(v is True for v in res.values()), res


@pytest.mark.slow
def test_probes_detect_a_backend_that_fails_them():
    """The probes are not vacuous: a naive backend (a host shell per sandbox, files opened on the host
    path) fails the forge-free, file-rights and FIFO probes."""
    import shutil
    import subprocess
    import tempfile

    from neurips26.nitrobox.probes import probe

    class HostShell:
        name = "host-shell"

        def create(self):
            return tempfile.mkdtemp(prefix="nbx-naive-")

        def exec(self, h, cmd, timeout=None):
            cmd = cmd.replace("/workspace", h)
            r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=h,
                               pass_fds=(), timeout=30)
            return r.returncode if r.returncode >= 0 else 128 - r.returncode, r.stdout

        def write_file(self, h, path, data):
            with open(path.replace("/workspace", h), "wb") as f:
                f.write(data)

        def read_file(self, h, path):
            with open(path.replace("/workspace", h), "rb") as f:
                return f.read()

        def reset(self, h):
            shutil.rmtree(h)
            os.mkdir(h)
            return h

        def delete(self, h):
            shutil.rmtree(h, ignore_errors=True)

    be = HostShell()
    assert probe(be, "exit_exact") and probe(be, "reset_clean")
    assert probe(be, "file_sandbox_rights") is False      # the planted symlink wrote the host file
    assert probe(be, "fifo_no_hang") is False              # open() of the FIFO blocked
