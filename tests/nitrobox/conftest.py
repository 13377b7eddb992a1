"""Shared fixtures for the NitroBox tests: a dedicated state root per test, leak scanners."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
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
    from neurips26.nitrobox import reaper

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


def _run_as_nobody(fn, *args):
    """Fork, drop to uid/gid 65534 (setgroups([]), setresgid/setresuid, PR_SET_DUMPABLE=1), run ``fn``
    and return its result, pickled back through a pipe; an exception in the child is an AssertionError
    carrying its traceback."""
    import ctypes
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
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)
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
def as_nobody():
    """``as_nobody(fn, *args)``: ``fn(*args)`` in a forked child running as uid/gid 65534 (the rootless
    tests; needs root to drop)."""
    return _run_as_nobody
