"""Issue 28 item 4 (networks): network='nat', a private NAT'd netns per sandbox through a user-mode
stack — pasta (passt) when installed, slirp4netns otherwise; both are tested where present, as root
and rootless — with outbound access and port forwarding; tested against loopback listeners only."""

from __future__ import annotations

import os
import shutil
import socket
import urllib.request

import pytest

from neurips26.nitrobox import Sandbox
from neurips26.nitrobox.diagnostics import support_problem, wait_until

pytestmark = [
    pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}"),
]
_PKG = {"pasta": "passt", "slirp4netns": "slirp4netns"}
_NET_COMMS = ("slirp4netns", "pasta", "passt", "passt.avx2", "pasta.avx2")


@pytest.fixture(params=["pasta", "slirp4netns"])
def nat_backend(request):
    if shutil.which(request.param) is None:
        pytest.skip(f"{request.param} not installed (apt install {_PKG[request.param]}; scripts/setup-system)")
    return request.param


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _slirps() -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/comm") as f:
                    if f.read().strip() in _NET_COMMS:
                        out.append(int(d))
            except OSError:
                pass
    return out


@pytest.fixture
def listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    yield srv.getsockname()[1]
    srv.close()


def _nat_checks(state_root: str, listener: int, nat_backend: str) -> dict:
    """Runs as root, or as uid 65534 in a forked child (rootless): returns what was seen."""
    hp = _free_port()
    out = {}
    # direct spawning, as the security module's rootless checks: "auto" picks the zygote in a big test
    # process (RSS >= 256 MiB), and the zygote execs sys.executable, which uid 65534 cannot reach when the
    # venv sits under a 0700 directory (a fresh-clone CI's mktemp -d)
    sb = Sandbox(state_root=state_root, network="nat", nat_host_loopback=True, ports={hp: 8000},
                 nat_backend=nat_backend, spawn_mode="direct")
    try:
        out["features"] = sb.features["network"]
        out["ifaces"] = sb.exec("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; cat /etc/resolv.conf")
        probe = f"python3 -c \"import socket; socket.create_connection(('10.0.2.2', {listener}), 3); print('ok')\""
        out["outbound"] = sb.exec(probe, timeout=20)
        sb.exec("python3 -m http.server 8000 --bind 0.0.0.0", background=True)

        def served():  # raw HTTP: the rootless child cannot import what urllib would load lazily
            try:
                with socket.create_connection(("127.0.0.1", hp), 2) as c:
                    c.sendall(b"GET / HTTP/1.0\r\n\r\n")
                    return c.recv(64).startswith(b"HTTP/1.0 200")
            except OSError:
                return False

        out["forward"] = wait_until(served, timeout=15)
        sb.reset()
        out["after_reset"] = sb.exec(probe, timeout=20)
    finally:
        sb.delete(wait=True)
    return out


def test_nat_rootless(listener, nat_backend, as_nobody):
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("the rootless run forks a uid-65534 child: needs root to drop to it")
    if not os.stat("/dev/net/tun").st_mode & 0o006:
        pytest.skip("/dev/net/tun is not world read-writable here (Debian's udev makes it 0666; "
                    "scripts/setup-system: chmod 0666 /dev/net/tun): no rootless user-mode network")
    root = f"/dev/shm/neurips26-nbx-test-nobody-net-{os.getpid()}"
    before = set(_slirps())
    try:
        out = as_nobody(_nat_checks, root, listener, nat_backend)
    finally:
        subprocess.run(["rm", "-rf", root], check=False)
    assert out["features"].startswith(f"nat ({nat_backend}:")
    assert out["ifaces"] == (0, "lo\ntap0\nnameserver 10.0.2.3\n")
    assert out["outbound"] == (0, "ok\n") and out["forward"] and out["after_reset"] == (0, "ok\n")
    assert wait_until(lambda: set(_slirps()) <= before, timeout=10)


def test_dead_owner_pasta_is_stopped_by_cleanup(state_root):
    """A client SIGKILLed with a NAT'd sandbox leaves pasta running (it has no exit fd); the next
    client's cleanup stops it through the pid file in the dead owner's state dir."""
    import signal
    import subprocess
    import sys
    import textwrap

    from neurips26.nitrobox import maintenance

    if shutil.which("pasta") is None:
        pytest.skip("pasta not installed (apt install passt)")
    code = textwrap.dedent(f"""
        import sys, time
        from neurips26.nitrobox import Sandbox
        sb = Sandbox(state_root={state_root!r}, network="nat", nat_backend="pasta")
        print(open(sb._dir / "pasta.pid").read().strip(), flush=True)
        time.sleep(600)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pasta_pid = int(p.stdout.readline())
        assert pasta_pid in _slirps()
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert os.path.exists(f"/proc/{pasta_pid}")            # outlived its owner
    maintenance.cleanup(state_root)
    assert wait_until(lambda: pasta_pid not in _slirps(), timeout=10)


def test_nat_outbound_and_port_forward(state_root, listener, nat_backend):
    before = set(_slirps())
    hp = _free_port()
    sb = Sandbox(state_root=state_root, network="nat", nat_host_loopback=True, ports={hp: 8000},
                 nat_backend=nat_backend)
    try:
        assert "net" in sb.features["namespaces"] and sb.nat_backend == nat_backend
        r = sb.exec("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; cat /etc/resolv.conf")
        assert r == (0, "lo\ntap0\nnameserver 10.0.2.3\n")
        probe = f"python3 -c \"import socket; socket.create_connection(('10.0.2.2', {listener}), 3); print('ok')\""
        assert sb.exec(probe, timeout=20) == (0, "ok\n")              # outbound through the NAT
        sb.exec("python3 -m http.server 8000 --bind 0.0.0.0", background=True)

        def served():
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{hp}/", timeout=2).status == 200
            except OSError:
                return False

        assert wait_until(served, timeout=15)                        # host 127.0.0.1:hp -> sandbox :8000
        sb.reset()                                                    # a new tree gets a new NAT
        assert sb.exec(probe, timeout=20) == (0, "ok\n")
    finally:
        sb.delete(wait=True)
    assert wait_until(lambda: set(_slirps()) <= before, timeout=10)   # no slirp4netns left behind


def test_nat_auto_prefers_pasta(state_root):
    with Sandbox(state_root=state_root, network="nat") as sb:
        assert sb.nat_backend == ("pasta" if shutil.which("pasta") else "slirp4netns")
        assert sb.features["network"].startswith(f"nat ({sb.nat_backend}:")
    with pytest.raises(ValueError, match="nat_backend"):
        Sandbox(state_root=state_root, network="nat", nat_backend="vde")


def test_nat_host_loopback_off_by_default(state_root, listener, nat_backend):
    with Sandbox(state_root=state_root, network="nat", nat_backend=nat_backend) as sb:
        r = sb.exec(f"python3 -c \"import socket; socket.create_connection(('10.0.2.2', {listener}), 1)\"",
                    timeout=20)
        assert r.exit_code != 0


def test_ports_need_nat():
    with pytest.raises(ValueError, match="network='nat'"):
        Sandbox(ports={8080: 80})
    with pytest.raises(ValueError, match="host port"):
        Sandbox(network="nat", ports={0: 80})
