"""Issue 28 item 4: a SWE-bench-style image built by the test, with its own Python, runs pytest.

No debootstrap and no network: the test assembles a Debian rootfs from pieces of this machine —
``/usr/bin/python3.11`` and ``/usr/bin/bash`` with their ``ldd`` closure (and that of every
``lib-dynload`` extension), Debian's ``/usr/lib/python3.11`` stdlib, pytest and its pure-Python
dependencies copied from the running venv into ``/usr/lib/python3/dist-packages`` — plus a tiny
repository ``/testbed`` with one passing and one failing test (a FAIL_TO_PASS instance). Three
layers, written as a ``docker save`` tar and as an OCI layout (its repo layer zstd-compressed), and
pushed to a loopback registry behind a Bearer-token proxy. Each import runs ``python3 -m pytest``
inside a sandbox that has no host ``/usr``; the image's Entrypoint/Cmd run the tests through the
Docker adapter.
"""

from __future__ import annotations

import glob
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile

import pytest

from neurips26.nitrobox import ImageError, Sandbox
from neurips26.nitrobox.diagnostics import support_problem
from neurips26.nitrobox.oci import import_image, image_command

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")

PY = "/usr/bin/python3.11"
STDLIB = "/usr/lib/python3.11"
_SKIP_STDLIB = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "dist-packages",
                "pydoc_data", "venv"}
_PURE = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py")

REPO = {
    "testbed/calc/__init__.py": b"def add(a, b):\n    return a - b  # the bug the task is about\n",
    "testbed/tests/test_calc.py": (b"from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
                                   b"def test_import():\n    import calc\n    assert calc.add\n"),
    "testbed/pytest.ini": b"[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n",
}
FIX = b"def add(a, b):\n    return a + b\n"

pytestmark = [pytestmark, pytest.mark.skipif(not (os.path.exists(PY) and os.path.isdir(STDLIB)),
                                             reason="needs Debian's /usr/bin/python3.11 and /usr/lib/python3.11")]


def _ldd(paths: list[str]) -> set[str]:
    """The shared libraries ``paths`` load (as named by the loader, e.g. /lib/x86_64-linux-gnu/libc.so.6)."""
    out: set[str] = set()
    for chunk in range(0, len(paths), 32):
        r = subprocess.run(["ldd", *paths[chunk:chunk + 32]], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            parts = line.split()
            path = parts[2] if "=>" in parts and len(parts) > 2 else (parts[0] if parts else "")
            if path.startswith("/") and not path.endswith(":"):  # "file:" headers of a multi-file ldd
                out.add(path)
    return out


def _add_dirs(tar: tarfile.TarFile, rel: str, seen: set) -> None:
    parts = rel.split("/")
    for i in range(1, len(parts)):
        d = "/".join(parts[:i])
        if d not in seen:
            seen.add(d)
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, 1_700_000_000
            tar.addfile(ti)


def _root_owned(ti: tarfile.TarInfo) -> tarfile.TarInfo:
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    return ti


def _base_layer(path: str) -> None:
    """Layer 1, the 'Debian' base: bash, python3.11 + stdlib, their libraries, /etc."""
    dynload = sorted(glob.glob(f"{STDLIB}/lib-dynload/*.so"))
    libs = _ldd(["/usr/bin/bash", PY] + dynload)
    seen: set[str] = set()
    with tarfile.open(path, "w") as tar:
        for link in ("bin", "lib", "lib64", "sbin"):  # merged /usr, as on the host
            if os.path.islink("/" + link):
                ti = tarfile.TarInfo(link)
                ti.type, ti.linkname = tarfile.SYMTYPE, os.readlink("/" + link)
                tar.addfile(ti)
        for named in sorted(libs):
            real = os.path.realpath(named)
            # the loader's name (through the /lib -> usr/lib symlink) and the real file under /usr
            rel_real = real.lstrip("/")
            _add_dirs(tar, rel_real, seen)
            if rel_real not in seen:
                seen.add(rel_real)
                tar.add(real, arcname=rel_real, filter=_root_owned)
            rel_named = os.path.join(os.path.realpath(os.path.dirname(named)), os.path.basename(named)).lstrip("/")
            if rel_named != rel_real and rel_named not in seen:
                seen.add(rel_named)
                _add_dirs(tar, rel_named, seen)
                ti = tarfile.TarInfo(rel_named)
                ti.type, ti.linkname = tarfile.SYMTYPE, real
                tar.addfile(ti)
        for exe in ("usr/bin/bash", "usr/bin/python3.11"):
            _add_dirs(tar, exe, seen)
            tar.add("/" + exe, arcname=exe, filter=_root_owned)
        for name, target in (("usr/bin/sh", "bash"), ("usr/bin/python3", "python3.11")):
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname = tarfile.SYMTYPE, target
            tar.addfile(ti)

        def stdlib_filter(ti: tarfile.TarInfo):
            rel = ti.name.split("/", 3)[3] if ti.name.count("/") >= 3 else ""
            return None if rel.split("/")[0] in _SKIP_STDLIB else _root_owned(ti)

        _add_dirs(tar, "usr/lib/python3.11/x", seen)
        tar.add(STDLIB, arcname="usr/lib/python3.11", filter=stdlib_filter)
        etc = {"etc/passwd": b"root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n",
               "etc/group": b"root:x:0:\nnogroup:x:65534:\n",
               "etc/os-release": b'PRETTY_NAME="Debian GNU/Linux 12 (bookworm), assembled by the test"\nID=debian\n'}
        for d in ("etc", "tmp", "root", "usr/lib/python3", "usr/lib/python3/dist-packages"):
            if d not in seen:
                seen.add(d)
                ti = tarfile.TarInfo(d)
                ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755, 1_700_000_000
                tar.addfile(ti)
        for name, data in etc.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 1_700_000_000
            tar.addfile(ti, io.BytesIO(data))


def _pytest_layer(path: str) -> None:
    """Layer 2: pytest and its pure-Python dependencies, copied from the venv running this test."""
    site = os.path.dirname(os.path.dirname(pytest.__file__))
    with tarfile.open(path, "w") as tar:
        for name in _PURE:
            src = os.path.join(site, name)
            if os.path.exists(src):
                tar.add(src, arcname=f"usr/lib/python3/dist-packages/{name}", filter=_root_owned)
        for info in glob.glob(os.path.join(site, "pytest-*.dist-info")) + glob.glob(os.path.join(site, "pluggy-*.dist-info")):
            tar.add(info, arcname=f"usr/lib/python3/dist-packages/{os.path.basename(info)}", filter=_root_owned)


def _repo_layer() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("testbed", "testbed/calc", "testbed/tests"):
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, 1_700_000_000
            tar.addfile(ti)
        for name, data in REPO.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 1_700_000_000
            tar.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


CONFIG = {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE=1", "LANG=C.UTF-8"],
          "WorkingDir": "/testbed", "Entrypoint": ["python3", "-m", "pytest"], "Cmd": ["-q", "tests"]}


def _config_blob(layers: list[bytes]) -> bytes:
    return json.dumps({"architecture": "amd64", "os": "linux", "config": CONFIG,
                       "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(x).hexdigest()
                                                                 for x in layers]}}).encode()


def _write_docker_save(path, layers: list[bytes], tag: str) -> None:
    config = _config_blob(layers)
    cfg_name = hashlib.sha256(config).hexdigest() + ".json"
    names = [f"{hashlib.sha256(x).hexdigest()}/layer.tar" for x in layers]
    manifest = json.dumps([{"Config": cfg_name, "RepoTags": [tag], "Layers": names}]).encode()
    with tarfile.open(path, "w") as tar:
        for name, data in [("manifest.json", manifest), (cfg_name, config)] + list(zip(names, layers)):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tar.addfile(ti, io.BytesIO(data))


def _layer_media(x: bytes) -> str:
    base = "application/vnd.oci.image.layer.v1.tar"
    return base + ("+gzip" if x[:2] == b"\x1f\x8b" else "+zstd" if x[:4] == b"\x28\xb5\x2f\xfd" else "")


def _manifest(config: bytes, layers: list[bytes]) -> dict:
    return {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": "sha256:" + hashlib.sha256(config).hexdigest(), "size": len(config)},
            "layers": [{"mediaType": _layer_media(x), "digest": "sha256:" + hashlib.sha256(x).hexdigest(),
                        "size": len(x)} for x in layers]}


def _write_oci_layout(d, layers: list[bytes], tag: str) -> None:
    blobs = d / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    config = _config_blob(layers)
    man = json.dumps(_manifest(config, layers)).encode()
    for data in [config, man] + layers:
        (blobs / hashlib.sha256(data).hexdigest()).write_bytes(data)
    (d / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + hashlib.sha256(man).hexdigest(),
         "size": len(man), "annotations": {"org.opencontainers.image.ref.name": tag}}]}))
    (d / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')


@pytest.fixture(scope="module")
def layers(tmp_path_factory):
    d = tmp_path_factory.mktemp("pyimg")
    _base_layer(str(d / "base.tar"))
    _pytest_layer(str(d / "pytest.tar"))
    return [(d / "base.tar").read_bytes(), (d / "pytest.tar").read_bytes(), _repo_layer()]


def _swe_task(sb: Sandbox) -> None:
    """The SWE-bench evaluation shape: the failing test fails, the patch is applied, it passes."""
    r = sb.exec("python3 -c 'import sys; print(sys.executable, sys.version_info[:2])'; "
                "[ -e /usr/lib/python3.11/venv ] || echo no-host-usr", timeout=60)
    assert r == (0, "/usr/bin/python3 (3, 11)\nno-host-usr\n"), r
    r = sb.exec("python3 -m pytest -q tests", timeout=120)
    assert r.exit_code == 1 and "1 failed, 1 passed" in r.output and "assert -1 == 5" in r.output, r.output
    sb.write_file("/testbed/calc/__init__.py", FIX)
    r = sb.exec("python3 -m pytest -q tests/test_calc.py::test_add", timeout=120)
    assert r.exit_code == 0 and "1 passed" in r.output, r.output


def test_docker_save_image_runs_pytest(state_root, layers, tmp_path):
    p = tmp_path / "swe.tar"
    _write_docker_save(p, layers, "swe/calc:1")
    img = import_image(p, state_root=state_root)
    assert len(img.below) == 2 and img.config["Entrypoint"] == ["python3", "-m", "pytest"]
    with Sandbox(state_root=state_root, image="swe/calc:1") as sb:
        assert sb.exec("echo $PWD; command -v ls || echo no-ls") == (0, "/testbed\nno-ls\n")  # only our layers
        _swe_task(sb)
    with Sandbox(state_root=state_root, image="swe/calc:1") as sb:  # the patch stayed in that sandbox's upper
        assert sb.read_file("/testbed/calc/__init__.py") == REPO["testbed/calc/__init__.py"]


@pytest.mark.slow
def test_oci_layout_with_zstd_layer_runs_pytest(state_root, layers, tmp_path):
    zstandard = pytest.importorskip("zstandard", reason="zstd layers need the zstandard package")
    z = zstandard.ZstdCompressor().compress(layers[2])
    assert z[:4] == b"\x28\xb5\x2f\xfd"
    _write_oci_layout(tmp_path / "layout", layers[:2] + [z], "swe/calc-oci:1")
    import_image(tmp_path / "layout", state_root=state_root)
    with Sandbox(state_root=state_root, image="swe/calc-oci:1") as sb:
        _swe_task(sb)


def test_zstd_without_zstandard_is_an_image_error(state_root, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "zstandard", None)   # import zstandard -> ImportError
    from neurips26.nitrobox import oci

    with pytest.raises(ImageError, match="zstandard"):
        oci._decompress(b"\x28\xb5\x2f\xfd" + b"\0" * 16)


def test_entrypoint_and_cmd_are_honoured(state_root, layers, tmp_path):
    from neurips26.nitrobox.adapters import ContainerError, DockerLikeClient

    p = tmp_path / "swe.tar"
    _write_docker_save(p, layers, "swe/calc:2")
    img = import_image(p, state_root=state_root)
    assert image_command(img) == ["python3", "-m", "pytest", "-q", "tests"]
    assert image_command(img, ["-x", "t.py"]) == ["python3", "-m", "pytest", "-x", "t.py"]   # replaces Cmd
    assert image_command(img, "echo hi", entrypoint=[]) == ["echo", "hi"]                       # no Entrypoint
    assert image_command(img, entrypoint="bash -c") == ["bash", "-c"]                           # drops Cmd
    client = DockerLikeClient({"state_root": state_root})
    with pytest.raises(ContainerError) as e:        # no command: Entrypoint + Cmd, i.e. the test suite
        client.containers.run("swe/calc:2", remove=True)
    assert e.value.exit_status == 1 and b"1 failed, 1 passed" in e.value.stderr
    out = client.containers.run("swe/calc:2", ["-q", "tests/test_calc.py::test_import"], remove=True)
    assert b"1 passed" in out                       # a command replaces Cmd, after the Entrypoint
    out = client.containers.run("swe/calc:2", ["-c", "echo $PWD"], entrypoint=["bash"], remove=True)
    assert out == b"/testbed\n"
    r = subprocess.run([sys.executable, "-m", "neurips26.nitrobox.cli", "exec", "--image", "swe/calc:2",
                        "--state-root", state_root], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "1 failed, 1 passed" in r.stdout, (r.stdout, r.stderr)


# ------------------------------------------------------------------ registry pull with Bearer token auth
@pytest.fixture
def token_registry(registry):
    """Debian's docker-registry on loopback (storage in tmp, no auth: the test pushes to it directly),
    fronted by a small token-auth proxy written here: every ``/v2/`` request without a valid Bearer
    token gets ``401`` + ``WWW-Authenticate: Bearer realm=<token endpoint>,service=..,scope=..``; the
    token endpoint wants HTTP Basic ``rl:s3cret`` and grants the requested pull scope; the proxy
    checks the token covers the repository and relays to the registry. Yields (proxy, backend, log)."""
    import http.client
    import secrets
    import threading
    import urllib.parse
    from base64 import b64encode
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    bport = int(registry.rsplit(":", 1)[1])
    log: list[tuple] = []
    tokens: dict[str, str] = {}
    good = "Basic " + b64encode(b"rl:s3cret").decode()

    class Token(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
            ok = self.headers.get("Authorization") == good
            log.append(("token", q.get("service"), q.get("scope"), ok))
            if not ok:
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            tok = secrets.token_hex(16)
            tokens[tok] = q.get("scope", "")
            body = json.dumps({"token": tok, "expires_in": 300}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    tsrv = ThreadingHTTPServer(("127.0.0.1", 0), Token)

    class Proxy(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            parts = self.path.split("/")
            repo = "/".join(parts[2:-2]) if len(parts) > 4 else ""
            scope = f"repository:{repo}:pull"
            auth = self.headers.get("Authorization", "")
            granted = auth.startswith("Bearer ") and tokens.get(auth[7:]) == scope
            log.append(("registry", self.path, "bearer" if auth.startswith("Bearer ") else "none", granted))
            if not granted:
                realm = f"http://127.0.0.1:{tsrv.server_address[1]}/token"
                self.send_response(401)
                self.send_header("WWW-Authenticate", f'Bearer realm="{realm}",service="nbx-test",scope="{scope}"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            c = http.client.HTTPConnection("127.0.0.1", bport, timeout=30)
            c.request("GET", self.path, headers={"Accept": self.headers.get("Accept", "*/*")})
            r = c.getresponse()
            body = r.read()
            self.send_response(r.status)
            for h in ("Content-Type", "Docker-Content-Digest"):
                if r.getheader(h):
                    self.send_header(h, r.getheader(h))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            c.close()

    psrv = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (tsrv, psrv)]
    for t in threads:
        t.start()
    try:
        yield f"127.0.0.1:{psrv.server_address[1]}", f"127.0.0.1:{bport}", log
    finally:
        for s in (tsrv, psrv):
            s.shutdown()
            s.server_close()


def _push(host: str, repo: str, tag: str, layers: list[bytes]) -> None:
    """Push through the OCI distribution API (monolithic blob uploads, then the manifest)."""
    import urllib.request

    def blob(data: bytes) -> None:
        dig = "sha256:" + hashlib.sha256(data).hexdigest()
        r = urllib.request.urlopen(urllib.request.Request(f"http://{host}/v2/{repo}/blobs/uploads/", method="POST"))
        loc = r.headers["Location"]
        loc = loc if loc.startswith("http") else f"http://{host}{loc}"
        sep = "&" if "?" in loc else "?"
        urllib.request.urlopen(urllib.request.Request(f"{loc}{sep}digest={dig}", data=data, method="PUT",
                                                      headers={"Content-Type": "application/octet-stream"}))

    config = _config_blob(layers)
    for x in [config] + layers:
        blob(x)
    urllib.request.urlopen(urllib.request.Request(
        f"http://{host}/v2/{repo}/manifests/{tag}", data=json.dumps(_manifest(config, layers)).encode(),
        method="PUT", headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"}))


@pytest.mark.slow
def test_registry_pull_with_bearer_token_runs_pytest(state_root, layers, token_registry):
    import gzip

    from neurips26.nitrobox.oci import pull

    proxy, backend, log = token_registry
    _push(backend, "swe/calc", "v1", layers[:2] + [gzip.compress(layers[2])])
    with pytest.raises(ImageError, match="token endpoint .*HTTP 401"):   # no credentials: refused
        pull(f"{proxy}/swe/calc:v1", state_root=state_root)
    assert log[0][0] == "registry" and log[0][2] == "none" and not log[0][3]
    assert log[1] == ("token", "nbx-test", "repository:swe/calc:pull", False)
    log.clear()
    img = pull(f"{proxy}/swe/calc:v1", name="swe/calc:pulled", state_root=state_root, auth=("rl", "s3cret"))
    assert img.config["Entrypoint"] == ["python3", "-m", "pytest"]
    # the flow: 401 challenge -> token endpoint (Basic, the challenge's service + scope) -> retry with Bearer
    assert log[0][2:] == ("none", False) and log[1] == ("token", "nbx-test", "repository:swe/calc:pull", True)
    assert log[2][1] == log[0][1] and log[2][2:] == ("bearer", True)
    assert all(e[3] for e in log[2:]) and sum(e[0] == "token" for e in log) == 1   # the token is reused
    with Sandbox(state_root=state_root, image="swe/calc:pulled") as sb:
        _swe_task(sb)
