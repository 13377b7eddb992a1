"""Issue 28 item 4 (networks): network='nat', a private NAT'd netns per sandbox through slirp4netns
(user-mode stack), with outbound access and port forwarding; tested against loopback only."""

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
    pytest.mark.skipif(shutil.which("slirp4netns") is None, reason="slirp4netns not installed (apt install slirp4netns)"),
]


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
                    if f.read().strip() == "slirp4netns":
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


def test_nat_outbound_and_port_forward(state_root, listener):
    before = set(_slirps())
    hp = _free_port()
    sb = Sandbox(state_root=state_root, network="nat", nat_host_loopback=True, ports={hp: 8000})
    try:
        assert "net" in sb.features["namespaces"]
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


def test_nat_host_loopback_off_by_default(state_root, listener):
    with Sandbox(state_root=state_root, network="nat") as sb:
        r = sb.exec(f"python3 -c \"import socket; socket.create_connection(('10.0.2.2', {listener}), 3)\"",
                    timeout=20)
        assert r.exit_code != 0


def test_ports_need_nat():
    with pytest.raises(ValueError, match="network='nat'"):
        Sandbox(ports={8080: 80})
    with pytest.raises(ValueError, match="host port"):
        Sandbox(network="nat", ports={0: 80})
