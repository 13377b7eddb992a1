"""Shared fixtures for the NitroBox tests: a dedicated state root per test, leak scanners."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import shutil
import subprocess
import tarfile
import time

import pytest

_counter = itertools.count()


def pytest_configure(config):
    config.addinivalue_line("markers", "criu: needs a working CRIU (criu check passes)")
    config.addinivalue_line("markers", "anchor: compares against an external sandbox tool")


@pytest.fixture
def state_root():
    """A dedicated state root outside pytest's 0700 tmp tree, removed afterwards."""
    root = f"/dev/shm/neurips26-nbx-test-{os.getpid()}-{next(_counter)}"
    yield root
    from neurips26.nitrobox import reaper, treepool

    treepool.drain(root)  # the standby trees this root's deleted sandboxes left in the pool
    deadline = time.monotonic() + 10
    while reaper.get().pending and time.monotonic() < deadline:
        time.sleep(0.01)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def sb(state_root):
    from neurips26.nitrobox import Sandbox

    s = Sandbox(state_root=state_root)
    yield s
    s.delete(wait=True)


@pytest.fixture
def registry(tmp_path):
    """Debian's docker-registry (distribution 2.8) on loopback, filesystem storage in tmp: ``host:port``
    (the registry-pull tests, and the Bearer-token proxy of the SWE-bench-style image test)."""
    import shutil
    import socket
    import time

    exe = shutil.which("docker-registry")
    if exe is None:
        pytest.skip("docker-registry not installed (apt install docker-registry)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "registry.yml"
    cfg.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'data'}\n"
                   f"http:\n  addr: 127.0.0.1:{port}\nlog:\n  level: error\n")
    p = subprocess.Popen([exe, "serve", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.skip("docker-registry did not start")
        yield f"127.0.0.1:{port}"
    finally:
        p.kill()
        p.wait()


def _drop_to_nobody() -> None:
    """In a forked child: become uid/gid 65534 with no groups, dumpable again (setuid cleared it)."""
    import ctypes

    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE


def _fork_as_nobody(fn, *args) -> int:
    """Fork a child that drops to uid/gid 65534, runs ``fn(*args)`` and exits; its pid, not waited for
    (a rootless client the test kills)."""
    from neurips26.nitrobox import seccomp_filter

    seccomp_filter.program()  # compile before fork: the child imports nothing new
    pid = os.fork()
    if pid == 0:
        try:
            _drop_to_nobody()
            fn(*args)
        finally:
            os._exit(0)
    return pid


def _run_as_nobody(fn, *args):
    """Fork, drop to uid/gid 65534 (setgroups([]), setresgid/setresuid, PR_SET_DUMPABLE=1), run ``fn``
    and return its result, pickled back through a pipe; an exception in the child is an AssertionError
    carrying its traceback."""
    import encodings.idna  # noqa: F401 - getaddrinfo's lazy import: the uid-65534 child cannot read /root
    import pickle
    import traceback

    from neurips26.nitrobox import seccomp_filter

    seccomp_filter.program()  # compile before fork: the child imports nothing new
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            _drop_to_nobody()
            out = ("ok", fn(*args))
        except BaseException as e:  # noqa: BLE001
            out = ("err", f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
        try:
            os.write(w, pickle.dumps(out))
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while b := os.read(r, 1 << 16):
        chunks.append(b)
    os.close(r)
    os.waitpid(pid, 0)
    kind, val = pickle.loads(b"".join(chunks))
    if kind == "err":
        raise AssertionError(val)
    return val


@pytest.fixture
def fork_as_nobody():
    """``fork_as_nobody(fn, *args)``: pid of a forked child running ``fn(*args)`` as uid/gid 65534."""
    return _fork_as_nobody


@pytest.fixture
def as_nobody():
    """``as_nobody(fn, *args)``: ``fn(*args)`` in a forked child running as uid/gid 65534 (the rootless
    tests; needs root to drop)."""
    return _run_as_nobody


# ------------------------------------------------------------------ test images (shared by the image tests)
MTIME = 1_700_000_000


def _root_owned(ti: tarfile.TarInfo) -> tarfile.TarInfo:
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    return ti


class LayerWriter:
    """Writes one image layer (a tar): directories, files, links, and host files with their ``ldd``
    closure. ``seen`` holds every name written, so a parent directory or a library goes in once."""

    def __init__(self, tar: tarfile.TarFile):
        self.tar, self.seen = tar, set()

    def dir(self, name: str, mode: int = 0o755, mtime: int = MTIME) -> None:
        if name not in self.seen:
            self.seen.add(name)
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, mode, mtime
            self.tar.addfile(ti)

    def parents(self, rel: str) -> None:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            self.dir("/".join(parts[:i]))

    def file(self, name: str, data: bytes, mode: int = 0o644, mtime: int = MTIME) -> None:
        self.seen.add(name)
        ti = tarfile.TarInfo(name)
        ti.size, ti.mode, ti.mtime = len(data), mode, mtime
        self.tar.addfile(ti, io.BytesIO(data))

    def link(self, name: str, target: str, hard: bool = False, mtime: int = MTIME) -> None:
        self.seen.add(name)
        ti = tarfile.TarInfo(name)
        ti.type, ti.linkname, ti.mtime = (tarfile.LNKTYPE if hard else tarfile.SYMTYPE), target, mtime
        self.tar.addfile(ti)

    def host(self, src: str, arcname: str, filter=None) -> None:
        """``src`` from this machine (a file or a whole tree), root-owned; ``filter`` may drop members."""
        self.parents(arcname)
        self.seen.add(arcname)
        self.tar.add(src, arcname=arcname,
                     filter=(lambda ti: _root_owned(ti) if filter(ti) else None) if filter else _root_owned)

    def host_closure(self, exes: list[str], libs_of: list[str] = ()) -> None:
        """Host executables and the shared libraries they (and ``libs_of``) load: merged-/usr links (bin,
        lib, lib64, sbin as on the host), each library under its real path plus the loader's name as a
        symlink to it."""
        for top in ("bin", "lib", "lib64", "sbin"):
            if os.path.islink("/" + top) and top not in self.seen:
                self.link(top, os.readlink("/" + top))
        for named in sorted(ldd(list(exes) + list(libs_of))) + list(exes):
            real = os.path.realpath(named)
            rel = real.lstrip("/")
            if rel not in self.seen:
                self.host(real, rel)
            alias = os.path.join(os.path.realpath(os.path.dirname(named)), os.path.basename(named)).lstrip("/")
            if alias != rel and alias not in self.seen:
                self.parents(alias)
                self.link(alias, real)


def ldd(paths: list[str]) -> set[str]:
    """The shared libraries ``paths`` load, as the loader names them (e.g. /lib/x86_64-linux-gnu/libc.so.6)."""
    out: set[str] = set()
    for chunk in range(0, len(paths), 32):
        r = subprocess.run(["ldd", *paths[chunk:chunk + 32]], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            parts = line.split()
            path = parts[2] if "=>" in parts and len(parts) > 2 else (parts[0] if parts else "")
            if path.startswith("/") and not path.endswith(":"):  # "file:" headers of a multi-file ldd
                out.add(path)
    return out


def layer(build, path=None) -> bytes | None:
    """A layer tar written by ``build(LayerWriter)``: its bytes, or written to ``path`` (large layers)."""
    buf = None if path is not None else io.BytesIO()
    with tarfile.open(path, "w") if path is not None else tarfile.open(fileobj=buf, mode="w") as tar:
        build(LayerWriter(tar))
    return None if buf is None else buf.getvalue()


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def config_blob(layers: list[bytes], config: dict) -> bytes:
    return json.dumps({"architecture": "amd64", "os": "linux", "config": config,
                       "rootfs": {"type": "layers", "diff_ids": [_sha(x) for x in layers]}}).encode()


def docker_save(path, layers: list[bytes], config: dict, tag: str) -> bytes | None:
    """A ``docker save`` (v1.2) archive of ``layers`` with image config ``config``: written to ``path``,
    or returned as bytes when ``path`` is None."""
    cfg = config_blob(layers, config)
    cfg_name = hashlib.sha256(cfg).hexdigest() + ".json"
    names = [f"{hashlib.sha256(x).hexdigest()}/layer.tar" for x in layers]
    manifest = json.dumps([{"Config": cfg_name, "RepoTags": [tag], "Layers": names}]).encode()
    buf = None if path is not None else io.BytesIO()
    with tarfile.open(path, "w") if path is not None else tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in [("manifest.json", manifest), (cfg_name, cfg)] + list(zip(names, layers)):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tar.addfile(ti, io.BytesIO(data))
    return None if buf is None else buf.getvalue()


def _layer_media(x: bytes) -> str:
    base = "application/vnd.oci.image.layer.v1.tar"
    return base + ("+gzip" if x[:2] == b"\x1f\x8b" else "+zstd" if x[:4] == b"\x28\xb5\x2f\xfd" else "")


def manifest(cfg: bytes, layers: list[bytes]) -> dict:
    return {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": _sha(cfg),
                       "size": len(cfg)},
            "layers": [{"mediaType": _layer_media(x), "digest": _sha(x), "size": len(x)} for x in layers]}


def oci_layout(d, layers: list[bytes], config: dict, tag: str) -> None:
    """An OCI image layout directory ``d`` (index.json -> manifest -> config + layer blobs)."""
    blobs = d / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    cfg = config_blob(layers, config)
    man = json.dumps(manifest(cfg, layers)).encode()
    for data in [cfg, man] + layers:
        (blobs / hashlib.sha256(data).hexdigest()).write_bytes(data)
    (d / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": _sha(man), "size": len(man),
         "annotations": {"org.opencontainers.image.ref.name": tag}}]}))
    (d / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')


def push(host: str, repo: str, tag: str, layers: list[bytes], config: dict) -> None:
    """Push through the OCI distribution API (monolithic blob uploads, then the manifest)."""
    import urllib.request

    def blob(data: bytes) -> None:
        r = urllib.request.urlopen(urllib.request.Request(f"http://{host}/v2/{repo}/blobs/uploads/", method="POST"))
        loc = r.headers["Location"]
        loc = loc if loc.startswith("http") else f"http://{host}{loc}"
        sep = "&" if "?" in loc else "?"
        urllib.request.urlopen(urllib.request.Request(f"{loc}{sep}digest={_sha(data)}", data=data, method="PUT",
                                                      headers={"Content-Type": "application/octet-stream"}))

    cfg = config_blob(layers, config)
    for x in [cfg] + layers:
        blob(x)
    urllib.request.urlopen(urllib.request.Request(
        f"http://{host}/v2/{repo}/manifests/{tag}", data=json.dumps(manifest(cfg, layers)).encode(),
        method="PUT", headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"}))


@pytest.fixture(scope="session")
def images():
    """The test-image builders: ``images.layer(build)``, ``.docker_save``, ``.oci_layout``, ``.push``,
    ``.ldd`` (see this module); the image tests build their images from host binaries with them."""
    import types

    return types.SimpleNamespace(layer=layer, docker_save=docker_save, oci_layout=oci_layout, push=push,
                                 ldd=ldd, config_blob=config_blob, manifest=manifest)
