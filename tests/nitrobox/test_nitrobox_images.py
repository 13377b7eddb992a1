"""Issue 28 item 4 (in part): ``docker save`` / OCI layout import into a content-addressed layer cache.

The test builds a two-layer image itself (bash and its libraries copied from the host, so it runs
without the host's /usr): the top layer adds a file, whites one out and makes a directory opaque;
the config's Env reaches commands. The same layers imported twice are extracted once."""

from __future__ import annotations

import os

import pytest

from neurips26.nitrobox import ImageError, Sandbox
from neurips26.nitrobox.diagnostics import support_problem
from neurips26.nitrobox.oci import import_image

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")


def _tar(images, members: list) -> bytes:
    """members: (name, kind, payload) with kind 'dir' | 'file' | 'sym'."""
    def build(w):
        for name, kind, payload in members:
            w.dir(name) if kind == "dir" else w.link(name, payload) if kind == "sym" else w.file(name, payload)
    return images.layer(build)


def _bash_layer(images) -> bytes:
    """bash and its libraries from the host, /etc/passwd with a ``runner`` user, files to white out."""
    def build(w):
        w.host_closure(["/usr/bin/bash"])
        w.link("usr/bin/sh", "bash")
        w.dir("etc")
        w.file("etc/passwd", b"root:x:0:0:root:/root:/bin/bash\nrunner:x:1000:1000::/home/runner:/bin/bash\n")
        for d, files in (("app", {"b.txt": b"B\n", "keep.txt": b"K\n"}), ("opq", {"old.txt": b"old\n"})):
            w.dir(d)
            for name, data in files.items():
                w.file(f"{d}/{name}", data)
    return images.layer(build)


CONFIG = {"WorkingDir": "/app", "User": "runner", "Cmd": ["bash"]}


@pytest.fixture(scope="module")
def archive(tmp_path_factory, images):
    top = _tar(images, [("app", "dir", None), ("app/a.txt", "file", b"A\n"), ("app/.wh.b.txt", "file", b""),
                ("opq", "dir", None), ("opq/.wh..wh..opq", "file", b""), ("opq/new.txt", "file", b"new\n")])
    p = tmp_path_factory.mktemp("img") / "demo.tar"
    images.docker_save(p, [_bash_layer(images), top], dict(CONFIG, Env=["FOO=bar", "PATH=/usr/bin:/bin"]),
                       "demo/task:1")
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


def test_unknown_and_hostile_images(state_root, tmp_path, images):
    with pytest.raises(ImageError, match="nope:1"):
        Sandbox(state_root=state_root, image="nope:1")
    evil = _tar(images, [("../escape", "file", b"x")])
    p = tmp_path / "evil.tar"
    images.docker_save(p, [evil], {}, "evil:1")
    with pytest.raises(ImageError, match="leaves the layer"):
        import_image(p, state_root=state_root)
    assert not os.path.exists(os.path.join(state_root, "images", "escape"))


def test_oci_layout_import(state_root, tmp_path, images):
    import gzip

    top = gzip.compress(_tar(images, [("srv", "dir", None), ("srv/x", "file", b"oci\n")]))  # a gzip layer
    images.oci_layout(tmp_path / "layout", [_bash_layer(images), top], {"Env": ["GREETING=hi"]}, "oci/demo:3")
    img = import_image(tmp_path / "layout", state_root=state_root)
    assert img.name == "oci/demo:3"
    with Sandbox(state_root=state_root, image="oci/demo:3") as sb:
        assert sb.exec('echo $(</srv/x) "$GREETING"') == (0, "oci hi\n")


def test_registry_pull_runs_in_a_sandbox(state_root, registry, images):
    from neurips26.nitrobox.oci import pull

    top = _tar(images, [("task", "dir", None), ("task/run.sh", "file", b"echo pulled $TASK_ID\n")])
    images.push(registry, "swe/task", "v1", [_bash_layer(images), top], {"Env": ["TASK_ID=42"]})
    img = pull(f"{registry}/swe/task:v1", state_root=state_root)
    assert img.name == f"{registry}/swe/task:v1" and len(img.below) == 1
    with Sandbox(state_root=state_root, image=f"{registry}/swe/task:v1") as sb:
        assert sb.exec("bash /task/run.sh") == (0, "pulled 42\n")
    with pytest.raises(ImageError, match="HTTP 404"):
        pull(f"{registry}/swe/task:nope", state_root=state_root)
