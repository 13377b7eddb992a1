"""Issue 28 item 4 (in part): ``docker save`` / OCI layout import into a content-addressed layer cache.

The test builds a two-layer image itself (bash and its libraries copied from the host, so it runs
without the host's /usr): the top layer adds a file, whites one out and makes a directory opaque;
the config's Env reaches commands. The same layers imported twice are extracted once."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile

import pytest

from neurips26.nitrobox import ImageError, Sandbox
from neurips26.nitrobox.diagnostics import support_problem
from neurips26.nitrobox.oci import import_image

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")


def _tar(members: list) -> bytes:
    """members: (name, kind, payload) with kind 'dir' | 'file' | 'sym' | 'hostfile'."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind, payload in members:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1_700_000_000
            if kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(ti)
            elif kind == "sym":
                ti.type, ti.linkname = tarfile.SYMTYPE, payload
                tar.addfile(ti)
            else:
                data = open(payload, "rb").read() if kind == "hostfile" else payload
                ti.size, ti.mode = len(data), 0o755 if kind == "hostfile" else 0o644
                tar.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def _bash_layer() -> bytes:
    libs = []
    for line in subprocess.run(["ldd", "/usr/bin/bash"], capture_output=True, text=True).stdout.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
        if path.startswith("/"):
            libs.append((os.path.realpath(path), os.path.join(os.path.realpath(os.path.dirname(path)),
                                                              os.path.basename(path))))
    members = [("usr", "dir", None), ("usr/bin", "dir", None), ("bin", "sym", "usr/bin"),
               ("usr/bin/bash", "hostfile", "/usr/bin/bash"), ("usr/bin/sh", "sym", "bash"),
               ("etc", "dir", None), ("etc/passwd", "file", b"root:x:0:0:root:/root:/bin/bash\nrunner:x:1000:1000::/home/runner:/bin/bash\n"),
               ("app", "dir", None), ("app/b.txt", "file", b"B\n"), ("app/keep.txt", "file", b"K\n"),
               ("opq", "dir", None), ("opq/old.txt", "file", b"old\n")]
    seen = {"usr", "usr/bin"}
    for real, named in libs:  # the file, and the name the loader looks for (e.g. /lib64/ld-linux...)
        for path, kind, payload in ((real, "hostfile", real), (named, "sym", real)):
            rel = path.lstrip("/")
            if kind == "sym" and path == real:
                continue
            parts = rel.split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in seen:
                    seen.add(d)
                    members.append((d, "dir", None))
            members.append((rel, kind, payload))
    for link in ("lib", "lib64"):
        if os.path.islink("/" + link):
            members.append((link, "sym", os.readlink("/" + link)))
    return _tar(members)


def _docker_save(path, layers: list[bytes], env: list[str], tag: str) -> None:
    config = json.dumps({"config": {"Env": env, "WorkingDir": "/app", "User": "runner", "Cmd": ["bash"]},
                         "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(x).hexdigest()
                                                                   for x in layers]}}).encode()
    cfg_name = hashlib.sha256(config).hexdigest() + ".json"
    names = [f"{hashlib.sha256(x).hexdigest()}/layer.tar" for x in layers]
    manifest = json.dumps([{"Config": cfg_name, "RepoTags": [tag], "Layers": names}]).encode()
    with tarfile.open(path, "w") as tar:
        for name, data in [("manifest.json", manifest), (cfg_name, config)] + list(zip(names, layers)):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tar.addfile(ti, io.BytesIO(data))


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    top = _tar([("app", "dir", None), ("app/a.txt", "file", b"A\n"), ("app/.wh.b.txt", "file", b""),
                ("opq", "dir", None), ("opq/.wh..wh..opq", "file", b""), ("opq/new.txt", "file", b"new\n")])
    p = tmp_path_factory.mktemp("img") / "demo.tar"
    _docker_save(p, [_bash_layer(), top], ["FOO=bar", "PATH=/usr/bin:/bin"], "demo/task:1")
    return p


def test_docker_save_import_layers_whiteouts_env(state_root, archive):
    img = import_image(archive, state_root=state_root)
    assert img.name == "demo/task:1" and len(img.below) == 1
    with Sandbox(state_root=state_root, image="demo/task:1") as sb:
        r = sb.exec('echo $(</app/a.txt) /app/* /opq/* "$FOO"; [ -e /usr/bin/python3 ] || echo no-host-usr')
        assert r == (0, "A /app/a.txt /app/keep.txt /opq/new.txt bar\nno-host-usr\n")
        assert sb.exec('echo "$PWD" $UID $HOME') == (0, "/app 1000 /home/runner\n")  # WorkingDir, User
        assert sb.exec("echo $UID", user="root") == (0, "0\n")
        sb.write_file("/app/keep.txt", "changed")   # copy-up into the sandbox's own upper
    with Sandbox(state_root=state_root, image="demo/task:1") as sb2:   # the shared layers are unchanged
        assert sb2.read_file("/app/keep.txt") == b"K\n"
    again = import_image(archive, name="demo/other:2", state_root=state_root)
    assert (again.lower, again.below) == (img.lower, img.below)      # content-addressed: extracted once
    layers = os.listdir(os.path.join(state_root, "images", "layers"))
    assert len([x for x in layers if not x.startswith(".")]) == 2


def test_unknown_and_hostile_images(state_root, tmp_path):
    with pytest.raises(ImageError, match="nope:1"):
        Sandbox(state_root=state_root, image="nope:1")
    evil = _tar([("../escape", "file", b"x")])
    p = tmp_path / "evil.tar"
    _docker_save(p, [evil], [], "evil:1")
    with pytest.raises(ImageError, match="leaves the layer"):
        import_image(p, state_root=state_root)
    assert not os.path.exists(os.path.join(state_root, "images", "escape"))


def _oci_layout(d, layers: list[bytes], env: list[str], tag: str) -> None:
    """An OCI image layout directory (index.json -> manifest -> config + layer blobs)."""
    blobs = d / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes) -> str:
        h = hashlib.sha256(data).hexdigest()
        (blobs / h).write_bytes(data)
        return "sha256:" + h

    config = json.dumps({"config": {"Env": env}, "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "config": {"digest": put(config), "size": len(config)},
                           "layers": [{"digest": put(x), "size": len(x),
                                       "mediaType": "application/vnd.oci.image.layer.v1.tar"} for x in layers]}
                          ).encode()
    index = {"schemaVersion": 2, "manifests": [{"digest": put(manifest), "size": len(manifest),
                                                "annotations": {"org.opencontainers.image.ref.name": tag}}]}
    (d / "index.json").write_text(json.dumps(index))
    (d / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')


def test_oci_layout_import(state_root, tmp_path):
    import gzip

    top = gzip.compress(_tar([("srv", "dir", None), ("srv/x", "file", b"oci\n")]))  # a gzip layer
    _oci_layout(tmp_path / "layout", [_bash_layer(), top], ["GREETING=hi"], "oci/demo:3")
    img = import_image(tmp_path / "layout", state_root=state_root)
    assert img.name == "oci/demo:3"
    with Sandbox(state_root=state_root, image="oci/demo:3") as sb:
        assert sb.exec('echo $(</srv/x) "$GREETING"') == (0, "oci hi\n")


def _push(host: str, repo: str, tag: str, layers: list[bytes], env: list[str]) -> None:
    """Push through the OCI distribution API (monolithic blob uploads, then the manifest)."""
    import urllib.request

    def blob(data: bytes) -> dict:
        dig = "sha256:" + hashlib.sha256(data).hexdigest()
        r = urllib.request.urlopen(urllib.request.Request(f"http://{host}/v2/{repo}/blobs/uploads/", method="POST"))
        loc = r.headers["Location"]
        loc = loc if loc.startswith("http") else f"http://{host}{loc}"
        sep = "&" if "?" in loc else "?"
        urllib.request.urlopen(urllib.request.Request(f"{loc}{sep}digest={dig}", data=data, method="PUT",
                                                      headers={"Content-Type": "application/octet-stream"}))
        return {"digest": dig, "size": len(data)}

    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": env},
                         "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(x).hexdigest()
                                                                   for x in layers]}}).encode()
    man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
           "config": dict(blob(config), mediaType="application/vnd.oci.image.config.v1+json"),
           "layers": [dict(blob(x), mediaType="application/vnd.oci.image.layer.v1.tar") for x in layers]}
    urllib.request.urlopen(urllib.request.Request(
        f"http://{host}/v2/{repo}/manifests/{tag}", data=json.dumps(man).encode(), method="PUT",
        headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"}))


def test_registry_pull_runs_in_a_sandbox(state_root, registry):
    from neurips26.nitrobox.oci import pull

    top = _tar([("task", "dir", None), ("task/run.sh", "file", b"echo pulled $TASK_ID\n")])
    _push(registry, "swe/task", "v1", [_bash_layer(), top], ["TASK_ID=42"])
    img = pull(f"{registry}/swe/task:v1", state_root=state_root)
    assert img.name == f"{registry}/swe/task:v1" and len(img.below) == 1
    with Sandbox(state_root=state_root, image=f"{registry}/swe/task:v1") as sb:
        assert sb.exec("bash /task/run.sh") == (0, "pulled 42\n")
    with pytest.raises(ImageError, match="HTTP 404"):
        pull(f"{registry}/swe/task:nope", state_root=state_root)
