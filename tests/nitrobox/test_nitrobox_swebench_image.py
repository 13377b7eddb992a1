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
import json
import os
import subprocess
import sys

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


def _base_layer(images, path: str) -> None:
    """Layer 1, the 'Debian' base: bash, python3.11 + stdlib, their libraries (and those of every
    lib-dynload extension), /etc."""
    def build(w):
        # the lib-dynload extensions themselves come with the stdlib tree below; their libraries here
        w.host_closure(["/usr/bin/bash", PY], libs_of=sorted(glob.glob(f"{STDLIB}/lib-dynload/*.so")))
        for name, target in (("usr/bin/sh", "bash"), ("usr/bin/python3", "python3.11")):
            w.link(name, target)
        w.host(STDLIB, "usr/lib/python3.11",
               filter=lambda ti: (ti.name.split("/", 3)[3] if ti.name.count("/") >= 3 else "").split("/")[0]
               not in _SKIP_STDLIB)
        for d, mode in (("etc", 0o755), ("tmp", 0o1777), ("root", 0o755), ("usr/lib/python3", 0o755),
                        ("usr/lib/python3/dist-packages", 0o755)):
            w.dir(d, mode)
        w.file("etc/passwd", b"root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n")
        w.file("etc/group", b"root:x:0:\nnogroup:x:65534:\n")
        w.file("etc/os-release", b'PRETTY_NAME="Debian GNU/Linux 12 (bookworm), assembled by the test"\nID=debian\n')
    images.layer(build, path)


def _pytest_layer(images, path: str) -> None:
    """Layer 2: pytest and its pure-Python dependencies, copied from the venv running this test."""
    site = os.path.dirname(os.path.dirname(pytest.__file__))

    def build(w):
        for name in _PURE:
            src = os.path.join(site, name)
            if os.path.exists(src):
                w.host(src, f"usr/lib/python3/dist-packages/{name}")
        for info in glob.glob(os.path.join(site, "pytest-*.dist-info")) + glob.glob(os.path.join(site, "pluggy-*.dist-info")):
            w.host(info, f"usr/lib/python3/dist-packages/{os.path.basename(info)}")
    images.layer(build, path)


def _repo_layer(images) -> bytes:
    def build(w):
        for d in ("testbed", "testbed/calc", "testbed/tests"):
            w.dir(d)
        for name, data in REPO.items():
            w.file(name, data)
    return images.layer(build)


CONFIG = {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE=1", "LANG=C.UTF-8"],
          "WorkingDir": "/testbed", "Entrypoint": ["python3", "-m", "pytest"], "Cmd": ["-q", "tests"]}


@pytest.fixture(scope="module")
def layers(tmp_path_factory, images):
    d = tmp_path_factory.mktemp("pyimg")
    _base_layer(images, str(d / "base.tar"))
    _pytest_layer(images, str(d / "pytest.tar"))
    return [(d / "base.tar").read_bytes(), (d / "pytest.tar").read_bytes(), _repo_layer(images)]


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


def test_docker_save_image_runs_pytest(state_root, layers, tmp_path, images):
    p = tmp_path / "swe.tar"
    images.docker_save(p, layers, CONFIG, "swe/calc:1")
    img = import_image(p, state_root=state_root)
    assert len(img.below) == 2 and img.config["Entrypoint"] == ["python3", "-m", "pytest"]
    with Sandbox(state_root=state_root, image="swe/calc:1") as sb:
        assert sb.exec("echo $PWD; command -v ls || echo no-ls") == (0, "/testbed\nno-ls\n")  # only our layers
        _swe_task(sb)
    with Sandbox(state_root=state_root, image="swe/calc:1") as sb:  # the patch stayed in that sandbox's upper
        assert sb.read_file("/testbed/calc/__init__.py") == REPO["testbed/calc/__init__.py"]


@pytest.mark.slow
def test_oci_layout_with_zstd_layer_runs_pytest(state_root, layers, tmp_path, images):
    zstandard = pytest.importorskip("zstandard", reason="zstd layers need the zstandard package")
    z = zstandard.ZstdCompressor().compress(layers[2])
    assert z[:4] == b"\x28\xb5\x2f\xfd"
    images.oci_layout(tmp_path / "layout", layers[:2] + [z], CONFIG, "swe/calc-oci:1")
    import_image(tmp_path / "layout", state_root=state_root)
    with Sandbox(state_root=state_root, image="swe/calc-oci:1") as sb:
        _swe_task(sb)


def test_zstd_without_zstandard_is_an_image_error(state_root, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "zstandard", None)   # import zstandard -> ImportError
    from neurips26.nitrobox import oci

    with pytest.raises(ImageError, match="zstandard"):
        oci._decompress(b"\x28\xb5\x2f\xfd" + b"\0" * 16)


def test_entrypoint_and_cmd_are_honoured(state_root, layers, tmp_path, images):
    from neurips26.nitrobox.adapters import ContainerError, DockerLikeClient

    p = tmp_path / "swe.tar"
    images.docker_save(p, layers, CONFIG, "swe/calc:2")
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


@pytest.mark.slow
def test_registry_pull_with_bearer_token_runs_pytest(state_root, layers, token_registry, images):
    import gzip

    from neurips26.nitrobox.oci import pull

    proxy, backend, log = token_registry
    images.push(backend, "swe/calc", "v1", layers[:2] + [gzip.compress(layers[2])], CONFIG)
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
