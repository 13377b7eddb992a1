"""Issue 28 item 5: one docker-py client script, run side by side on real Docker and on the adapter.

``_script(client, image, upload)`` is ordinary docker-py harness code (run / detach / exec_run with demux,
stream, environment, workdir, user / put_archive with modes, mtimes, a symlink and a hard link /
get_archive of a file and a directory / the low-level ``client.api`` exec calls / the error types).
It runs once against ``docker.DockerClient`` talking to a private ``dockerd`` (docker.io, started by
the fixture: root only; skipped with the reason if it cannot start) and once against
``DockerLikeClient``; what it observed must be equal. Both load the same image: a ``docker save``
tar the test writes (bash and a few coreutils with their libraries), ``docker load``-ed into
dockerd and ``import_image``-ed into NitroBox.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from neurips26.nitrobox.diagnostics import support_problem

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")]

TOOLS = ("bash", "cat", "tail", "sleep", "id", "stat", "ls", "readlink", "mkdir", "timeout", "kill")
TAG = "nbx/side-by-side:1"


def _image_tar(images) -> bytes:
    """A docker save (v1.2) tar: one layer with TOOLS and their ldd closure, /etc/passwd with nobody."""
    def build(w):
        w.host_closure([f"/usr/bin/{t}" for t in TOOLS])
        w.link("usr/bin/sh", "bash")
        for d, mode in (("etc", 0o755), ("tmp", 0o1777), ("root", 0o700), ("testbed", 0o755)):
            w.dir(d, mode)
        w.file("etc/passwd", b"root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        w.file("etc/group", b"root:x:0:\nnogroup:x:65534:\n")

    config = {"Env": ["PATH=/usr/bin:/bin", "TASK=side-by-side"], "WorkingDir": "/testbed", "Cmd": ["bash"]}
    return images.docker_save(None, [images.layer(build)], config, TAG)


def _upload(images) -> bytes:
    def build(w):
        w.dir("pkg", 0o750, mtime=1_600_000_000)
        w.file("pkg/run.sh", b"#!/bin/bash\necho ran \"$@\"\n", 0o755, mtime=1_600_000_123)
        w.file("pkg/data.txt", b"payload\n", 0o640, mtime=1_600_000_123)
        w.link("pkg/link", "data.txt", mtime=1_600_000_000)
        w.link("pkg/hard.txt", "pkg/data.txt", hard=True, mtime=1_600_000_123)
    return images.layer(build)


_TMP = Path(tempfile.mkdtemp(prefix="nbx-sxs-"))


def _swebench_docker_utils():
    """swebench.harness.docker_utils loaded by path (its harness __init__ imports modal & co.)."""
    spec = importlib.util.find_spec("swebench")
    if spec is None or not spec.submodule_search_locations or importlib.util.find_spec("unidiff") is None:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "harness" / "docker_utils.py"
    mspec = importlib.util.spec_from_file_location("swebench_harness_docker_utils_sxs", path)
    mod = importlib.util.module_from_spec(mspec)
    sys.modules[mspec.name] = mod
    mspec.loader.exec_module(mod)
    return mod


def _script(client, image: str, upload: bytes) -> dict:
    """Harness-style docker-py code; returns what it saw (nothing backend-specific in here)."""
    import docker.errors

    seen: dict = {}
    seen["run"] = client.containers.run(image, ["bash", "-c", "echo hello $TASK; pwd"], remove=True,
                                        network_mode="none")
    try:
        client.containers.run(image, ["bash", "-c", "echo boom >&2; exit 3"], remove=True, network_mode="none")
        seen["run_fail"] = None
    except docker.errors.ContainerError as e:
        seen["run_fail"] = (e.exit_status, type(e).__name__)
    try:
        client.images.get("nbx/does-not-exist:0")
        seen["missing_image"] = None
    except docker.errors.ImageNotFound as e:
        seen["missing_image"] = type(e).__name__
    c = client.containers.run(image, ["tail", "-f", "/dev/null"], detach=True, network_mode="none",
                              working_dir="/testbed", environment={"MODE": "eval"})
    try:
        seen["get"] = client.containers.get(c.id).id == c.id
        try:
            client.containers.get("nbx-no-such-container")
            seen["missing_container"] = None
        except docker.errors.NotFound as e:
            seen["missing_container"] = type(e).__name__
        r = c.exec_run("pwd")
        seen["pwd"] = (r.exit_code, r.output)
        r = c.exec_run(["bash", "-c", "echo out; echo err >&2; exit 4"])
        seen["merged"] = (r.exit_code, sorted(r.output.splitlines()))
        r = c.exec_run(["bash", "-c", "echo out; echo err >&2"], demux=True)
        seen["demux"] = (r.exit_code, r.output)
        r = c.exec_run(["bash", "-c", "for i in 1 2 3; do echo $i; done"], stream=True)
        seen["stream"] = (r.exit_code, b"".join(r.output))
        r = c.exec_run(["bash", "-c", "echo $MODE $EXTRA $TASK"], environment={"EXTRA": "x"})
        seen["env"] = (r.exit_code, r.output)
        r = c.exec_run("pwd", workdir="/tmp")
        seen["workdir"] = (r.exit_code, r.output)
        r = c.exec_run("id -u", user="nobody")
        seen["user"] = (r.exit_code, r.output)
        r = c.exec_run("cat /nope")
        seen["cat_missing"] = (r.exit_code, r.output)
        seen["put"] = c.put_archive("/testbed", upload)
        r = c.exec_run(["bash", "-c", "cd /testbed/pkg && stat -c '%n %a %s %Y %F %h' run.sh data.txt hard.txt "
                        "&& readlink link && ./run.sh a b && stat -c '%a' ."])
        seen["after_put"] = (r.exit_code, r.output)
        stream, st = c.get_archive("/testbed/pkg/run.sh")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            m = tar.getmembers()[0]
            seen["get_file"] = (st["name"], st["size"], m.name, m.mode, int(m.mtime), tar.extractfile(m).read())
        stream, st = c.get_archive("/testbed/pkg")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            seen["get_dir"] = sorted((m.name, m.type, m.mode, m.linkname) for m in tar.getmembers())
        du = _swebench_docker_utils()
        if du is not None:  # SWE-bench's own harness helpers, on both
            src = _TMP / "patch.diff"
            src.write_text("diff --git a/x b/x\n")
            du.copy_to_container(c, src, Path("/testbed/patches/patch.diff"))
            du.write_to_container(c, "echo from-heredoc\n", Path("/testbed/eval.sh"))
            r = c.exec_run(["bash", "-c", "cat /testbed/patches/patch.diff; ls /testbed"])
            out, timed_out, _ = du.exec_run_with_timeout(c, "bash -c 'echo start; sleep 30'", timeout=1)
            seen["swebench"] = (r.exit_code, r.output, out, timed_out)
        eid = client.api.exec_create(c.id, ["bash", "-c", "echo api; exit 5"])["Id"]
        out = client.api.exec_start(eid)
        seen["api"] = (out, client.api.exec_inspect(eid)["ExitCode"])
    finally:
        c.remove(force=True)
    try:
        client.containers.get(c.id)
        seen["removed"] = False
    except docker.errors.NotFound:
        seen["removed"] = True
    return seen


@pytest.fixture(scope="module")
def dockerd(tmp_path_factory):
    pytest.importorskip("docker", reason="the side-by-side run needs docker-py (pip install docker)")
    from neurips26.nitrobox.backends import BackendUnavailable, DockerDaemon

    try:
        d = DockerDaemon(str(tmp_path_factory.mktemp("dockerd")), timeout=60)
    except BackendUnavailable as e:
        pytest.skip(f"no real Docker to compare with: {e}")
    yield d
    d.stop()


def test_same_script_same_observations_docker_and_adapter(dockerd, state_root, tmp_path, images):
    import docker

    from neurips26.nitrobox.adapters import DockerLikeClient
    from neurips26.nitrobox.oci import import_image

    data, upload = _image_tar(images), _upload(images)
    real = docker.DockerClient(base_url=dockerd.url, version="auto", timeout=120)
    try:
        real.images.load(data)
        on_docker = _script(real, TAG, upload)
    finally:
        real.close()
    (tmp_path / "img.tar").write_bytes(data)
    import_image(tmp_path / "img.tar", state_root=state_root)
    ours = DockerLikeClient({"state_root": state_root})
    try:
        on_adapter = _script(ours, TAG, upload)
    finally:
        ours.close()
    assert on_docker["run"] == b"hello side-by-side\n/testbed\n"          # the script itself is sane
    assert on_docker["after_put"][0] == 0 and on_docker["user"] == (0, b"65534\n")
    diff = {k: (on_docker[k], on_adapter.get(k)) for k in on_docker if on_docker[k] != on_adapter.get(k)}
    assert not diff, json.dumps({k: [repr(a), repr(b)] for k, (a, b) in diff.items()}, indent=1)
