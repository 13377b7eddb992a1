"""Issue 28 item 5: one docker-py client script, run side by side on real Docker and on the adapter.

``_script(client, image)`` is ordinary docker-py harness code (run / detach / exec_run with demux,
stream, environment, workdir, user / put_archive with modes, mtimes, a symlink and a hard link /
get_archive of a file and a directory / the low-level ``client.api`` exec calls / the error types).
It runs once against ``docker.DockerClient`` talking to a private ``dockerd`` (docker.io, started by
the fixture: root only; skipped with the reason if it cannot start) and once against
``DockerLikeClient``; what it observed must be equal. Both load the same image: a ``docker save``
tar the test writes (bash and a few coreutils with their libraries), ``docker load``-ed into
dockerd and ``import_image``-ed into NitroBox.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import subprocess
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


def _image_tar() -> bytes:
    """A docker save (v1.2) tar: one layer with TOOLS and their ldd closure, /etc/passwd with nobody."""
    exes = [f"/usr/bin/{t}" for t in TOOLS]
    libs: set[str] = set()
    r = subprocess.run(["ldd", *exes], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else (parts[0] if parts else "")
        if path.startswith("/") and not path.endswith(":"):
            libs.add(path)
    buf = io.BytesIO()
    seen: set[str] = set()

    def dirs(rel: str, tar: tarfile.TarFile) -> None:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            d = "/".join(parts[:i])
            if d not in seen:
                seen.add(d)
                ti = tarfile.TarInfo(d)
                ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, 1_700_000_000
                tar.addfile(ti)

    def owned(ti: tarfile.TarInfo) -> tarfile.TarInfo:
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        return ti

    with tarfile.open(fileobj=buf, mode="w") as tar:
        for link in ("bin", "lib", "lib64", "sbin"):
            if os.path.islink("/" + link):
                ti = tarfile.TarInfo(link)
                ti.type, ti.linkname = tarfile.SYMTYPE, os.readlink("/" + link)
                tar.addfile(ti)
        for named in sorted(libs) + exes:
            real = os.path.realpath(named)
            rel = real.lstrip("/")
            dirs(rel, tar)
            if rel not in seen:
                seen.add(rel)
                tar.add(real, arcname=rel, filter=owned)
            alias = os.path.join(os.path.realpath(os.path.dirname(named)), os.path.basename(named)).lstrip("/")
            if alias != rel and alias not in seen:
                seen.add(alias)
                dirs(alias, tar)
                ti = tarfile.TarInfo(alias)
                ti.type, ti.linkname = tarfile.SYMTYPE, real
                tar.addfile(ti)
        ti = tarfile.TarInfo("usr/bin/sh")
        ti.type, ti.linkname = tarfile.SYMTYPE, "bash"
        tar.addfile(ti)
        for d, mode in (("etc", 0o755), ("tmp", 0o1777), ("root", 0o700), ("testbed", 0o755)):
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, mode, 1_700_000_000
            tar.addfile(ti)
        for name, data in (("etc/passwd", b"root:x:0:0:root:/root:/bin/bash\n"
                                          b"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"),
                           ("etc/group", b"root:x:0:\nnogroup:x:65534:\n")):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 1_700_000_000
            tar.addfile(ti, io.BytesIO(data))
    layer = buf.getvalue()
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Env": ["PATH=/usr/bin:/bin", "TASK=side-by-side"], "WorkingDir": "/testbed",
                                    "Cmd": ["bash"]},
                         "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]}}
                        ).encode()
    cfg_name = hashlib.sha256(config).hexdigest() + ".json"
    lname = hashlib.sha256(layer).hexdigest() + "/layer.tar"
    manifest = json.dumps([{"Config": cfg_name, "RepoTags": [TAG], "Layers": [lname]}]).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in (("manifest.json", manifest), (cfg_name, config), (lname, layer)):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tar.addfile(ti, io.BytesIO(data))
    return out.getvalue()


def _upload() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        ti = tarfile.TarInfo("pkg")
        ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o750, 1_600_000_000
        tar.addfile(ti)
        for name, data, mode in (("pkg/run.sh", b"#!/bin/bash\necho ran \"$@\"\n", 0o755),
                                 ("pkg/data.txt", b"payload\n", 0o640)):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), mode, 1_600_000_123
            tar.addfile(ti, io.BytesIO(data))
        ti = tarfile.TarInfo("pkg/link")
        ti.type, ti.linkname, ti.mtime = tarfile.SYMTYPE, "data.txt", 1_600_000_000
        tar.addfile(ti)
        ti = tarfile.TarInfo("pkg/hard.txt")
        ti.type, ti.linkname, ti.mtime = tarfile.LNKTYPE, "pkg/data.txt", 1_600_000_123
        tar.addfile(ti)
    return buf.getvalue()


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


def _script(client, image: str) -> dict:
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
        seen["put"] = c.put_archive("/testbed", _upload())
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


def test_same_script_same_observations_docker_and_adapter(dockerd, state_root, tmp_path):
    import docker

    from neurips26.nitrobox.adapters import DockerLikeClient
    from neurips26.nitrobox.oci import import_image

    data = _image_tar()
    real = docker.DockerClient(base_url=dockerd.url, version="auto", timeout=120)
    try:
        real.images.load(data)
        on_docker = _script(real, TAG)
    finally:
        real.close()
    (tmp_path / "img.tar").write_bytes(data)
    import_image(tmp_path / "img.tar", state_root=state_root)
    ours = DockerLikeClient({"state_root": state_root})
    try:
        on_adapter = _script(ours, TAG)
    finally:
        ours.close()
    assert on_docker["run"] == b"hello side-by-side\n/testbed\n"          # the script itself is sane
    assert on_docker["after_put"][0] == 0 and on_docker["user"] == (0, b"65534\n")
    diff = {k: (on_docker[k], on_adapter.get(k)) for k in on_docker if on_docker[k] != on_adapter.get(k)}
    assert not diff, json.dumps({k: [repr(a), repr(b)] for k, (a, b) in diff.items()}, indent=1)
