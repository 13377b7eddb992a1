"""Issue 28 item 5: Docker-SDK code runs unchanged on ``DockerLikeClient``.

Each behaviour below was wrong on 49a5fe8 (``run`` did not run the command, ``images.get`` returned
None and create fell back to ``host``, ``exec_run(stream=True)`` returned bytes, ``demux`` gave
``(out+err, None)``, ``user=`` ran as root, ``detach`` blocked, ``put_archive`` dropped hard links and
exec bits, ``get_archive(dir)`` raised, ``containers.get`` raised KeyError, ``container.client`` was
missing). The SWE-bench harness's own docker utilities (swebench 5.0.2, loaded from the installed
package) run against the adapter."""

from __future__ import annotations

import importlib.util
import io
import sys
import tarfile
import time
from pathlib import Path

import pytest

from neurips26.nitrobox.adapters import ContainerError, DockerLikeClient, ImageNotFound, NotFound
from neurips26.nitrobox.diagnostics import support_problem

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")


@pytest.fixture
def client(state_root):
    c = DockerLikeClient({"state_root": state_root}, images={"sweb.eval.x86_64.demo:latest": "host"})
    yield c
    c.close()


@pytest.fixture
def container(client):
    c = client.containers.run("sweb.eval.x86_64.demo:latest", "tail -f /dev/null", detach=True,
                              working_dir="/testbed")
    yield c
    c.remove(force=True)


def test_errors_are_dockers(client):
    docker_errors = pytest.importorskip("docker.errors")
    with pytest.raises(docker_errors.NotFound):
        client.containers.get("nope")
    with pytest.raises(docker_errors.ImageNotFound):
        client.images.get("python:3.11")
    with pytest.raises(ImageNotFound):                 # never a silent fallback to 'host'
        client.containers.create("python:3.11", "true")
    assert NotFound is docker_errors.NotFound


def test_run_runs_the_command_and_detach_does_not_block(client):
    assert client.containers.run("sweb.eval.x86_64.demo:latest", "echo ran", remove=True) == b"ran\n"
    with pytest.raises(ContainerError):
        client.containers.run("sweb.eval.x86_64.demo:latest", ["bash", "-c", "exit 3"], remove=True)
    t0 = time.monotonic()
    c = client.containers.run("sweb.eval.x86_64.demo:latest", ["bash", "-c", "sleep 1; echo late"], detach=True)
    assert time.monotonic() - t0 < 1.0 and c.status == "running"
    assert c.wait(timeout=30)["StatusCode"] == 0 and c.logs() == b"late\n"
    c.remove(force=True)


def test_exec_run_stream_demux_user_detach(container):
    r = container.exec_run(["bash", "-c", "echo a; sleep 0.2; echo b"], stream=True)
    assert r.exit_code is None and not isinstance(r.output, bytes)
    assert b"".join(r.output) == b"a\nb\n"
    r = container.exec_run(["bash", "-c", "echo o; echo e >&2"], demux=True)
    assert r == (0, (b"o\n", b"e\n"))
    assert container.exec_run("id -u", user="nobody").output == b"65534\n"
    t0 = time.monotonic()
    r = container.exec_run(["bash", "-c", "sleep 2; touch /tmp/detached"], detach=True)
    assert r == (None, b"") and time.monotonic() - t0 < 1.5
    assert container.exec_run("echo x").output == b"x\n"


def test_exec_semantics_docker_by_default_shell_on_request(client, state_root):
    """Docker runs a str command without a shell: no globs, no $VAR, builtins are not commands (exit
    126, Docker's message). ``exec_semantics="shell"`` is the bash-line superset."""
    c = client.containers.run("sweb.eval.x86_64.demo:latest", "tail -f /dev/null", detach=True)
    try:
        assert c.exec_run("echo $HOME *").output == b"$HOME *\n"
        r = c.exec_run("cd /tmp")                                       # a builtin, no /usr/bin/cd
        assert r.exit_code == 126 and b'exec: "cd": executable file not found in $PATH' in r.output
        assert c.exec_run(["ls", "-d", "/tmp"]) == (0, b"/tmp\n")
        assert c.exec_run("printf '%s|' 'a b' c").output == b"a b|c|"   # split like shlex
    finally:
        c.remove(force=True)
    sh = DockerLikeClient({"state_root": state_root}, images={"x:1": "host"}, exec_semantics="shell")
    try:
        c = sh.containers.run("x:1", "sleep 0.1; echo $((1+2))", detach=True)
        assert c.wait(timeout=30)["StatusCode"] == 0 and c.logs() == b"3\n"
        assert c.exec_run("cd /tmp && pwd").output == b"/tmp\n"
    finally:
        sh.close()
    with pytest.raises(ValueError, match="exec_semantics"):
        DockerLikeClient({"state_root": state_root}, exec_semantics="sh")


def test_put_archive_keeps_hardlinks_exec_bits_and_mtimes(container):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        d = tarfile.TarInfo("pkg")
        d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, 1_000_000_000
        tar.addfile(d)
        body = b"#!/bin/sh\necho hi\n"
        f = tarfile.TarInfo("pkg/run.sh")
        f.size, f.mode, f.mtime = len(body), 0o755, 1_200_000_000
        tar.addfile(f, io.BytesIO(body))
        h = tarfile.TarInfo("pkg/again.sh")
        h.type, h.linkname = tarfile.LNKTYPE, "pkg/run.sh"
        tar.addfile(h)
        s = tarfile.TarInfo("pkg/link")
        s.type, s.linkname = tarfile.SYMTYPE, "run.sh"
        tar.addfile(s)
    assert container.put_archive("/testbed", buf.getvalue())
    r = container.exec_run(["bash", "-c", "stat -c '%a %h %Y' pkg/run.sh; ./pkg/again.sh; readlink pkg/link; stat -c %Y pkg"],
                           workdir="/testbed")
    assert r.output == b"755 2 1200000000\nhi\nrun.sh\n1000000000\n"
    with pytest.raises(NotFound):
        container.put_archive("/nonexistent", buf.getvalue())


def test_get_archive_of_a_directory(container):
    container.exec_run(["bash", "-c", "mkdir -p /testbed/out/sub && echo 1 > /testbed/out/sub/a && ln -s sub/a /testbed/out/l"])
    stream, st = container.get_archive("/testbed/out")
    assert st["name"] == "out"
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        names = sorted(m.name for m in tar.getmembers())
        assert names == ["out", "out/l", "out/sub", "out/sub/a"]
        assert tar.getmember("out/l").issym() and tar.getmember("out/l").linkname == "sub/a"
        assert tar.extractfile("out/sub/a").read() == b"1\n"


# ------------------------------------------------------------------ SWE-bench's own harness code
def _swebench_docker_utils():
    """swebench.harness.docker_utils from the installed package (its harness __init__ pulls in modal &
    co., so the module file is loaded by path; its own imports -- docker, swebench.utils -- are real)."""
    pytest.importorskip("docker")
    spec = importlib.util.find_spec("swebench")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("swebench is not installed (pip install --no-deps swebench unidiff)")
    pytest.importorskip("unidiff")
    path = Path(list(spec.submodule_search_locations)[0]) / "harness" / "docker_utils.py"
    mspec = importlib.util.spec_from_file_location("swebench_harness_docker_utils", path)
    mod = importlib.util.module_from_spec(mspec)
    sys.modules[mspec.name] = mod
    mspec.loader.exec_module(mod)
    return mod


def test_swebench_docker_utils_run_against_the_adapter(container, tmp_path):
    du = _swebench_docker_utils()
    patch = tmp_path / "patch.diff"
    patch.write_text("diff --git a/x b/x\n")
    du.copy_to_container(container, patch, Path("/testbed/patches/patch.diff"))
    assert container.exec_run("cat /testbed/patches/patch.diff").output == b"diff --git a/x b/x\n"
    # swebench's write_to_container passes a heredoc as a str command: Docker runs no shell, so
    # cat gets "<<'EOF'" as a file name and nothing is written (the side-by-side test shows Docker
    # doing exactly this); the adapter does the same by default, and writes it with shell semantics
    du.write_to_container(container, "print('eval')\n", Path("/testbed/eval.py"))
    assert not container.sandbox.exists("/testbed/eval.py")
    shell_client = DockerLikeClient({"state_root": container.sandbox.config.state_root},
                                    images={"x:1": "host"}, exec_semantics="shell")
    try:
        sc = shell_client.containers.run("x:1", "tail -f /dev/null", detach=True)
        du.write_to_container(sc, "print('eval')\n", Path("/workspace/eval.py"))
        assert sc.sandbox.read_file("/workspace/eval.py") == b"print('eval')\n\n"
    finally:
        shell_client.close()
    eval_py = tmp_path / "eval.py"
    eval_py.write_text("print('eval')\n")
    du.copy_to_container(container, eval_py, Path("/testbed/eval.py"))
    out, timed_out, took = du.exec_run_with_timeout(container, "python3 /testbed/eval.py", timeout=60)
    assert (out, timed_out) == ("eval\n", False)
    out, timed_out, took = du.exec_run_with_timeout(container, "bash -c 'echo start; sleep 30'", timeout=1)
    assert timed_out and out.startswith("start") and took < 10
    assert container.exec_run("echo alive").output == b"alive\n"
