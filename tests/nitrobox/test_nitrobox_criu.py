"""Acceptance check 11 (marker ``criu``): CRIU checkpoint -> two branches continue independently.

Skips with the ``criu check`` reason unless a working CRIU is found ($NEURIPS26_CRIU, criu on PATH,
or the opt-in ``neurips26.nitrobox.criu.fetch_provider()`` cache). Layer-freeze snapshots (check 9)
never need CRIU.
"""

from __future__ import annotations

import os
import time

import pytest

from neurips26.nitrobox import CheckpointUnavailable, Sandbox, criu
from neurips26.nitrobox.diagnostics import pidns_of, procs_in_pidns, support_problem

pytestmark = [pytest.mark.criu,
              pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")]
CRIU, WHY = criu.find_criu()
needs_criu = pytest.mark.skipif(CRIU is None, reason=f"no working CRIU: {WHY}")


def _counter(sb) -> int:
    return int(sb.exec("cat /tmp/counter").output.strip())


@needs_criu
def test_checkpoint_two_branches_continue_independently(state_root, tmp_path):
    sb = Sandbox(state_root=state_root, criu=True)
    branches = []
    try:
        sb.exec("echo before > /workspace/f")
        sb.exec("i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.05; done", background=True)
        time.sleep(0.4)
        ckpt = sb.checkpoint(tmp_path / "ckpt")
        dumped = int((ckpt / "fs" / "tmp" / "counter").read_text())
        assert dumped >= 4
        time.sleep(0.2)
        assert _counter(sb) > dumped                           # the original kept running
        branches = Sandbox.from_checkpoint(ckpt, n=2)
        assert len(branches) == 2
        for b in branches:
            c0 = _counter(b)
            assert c0 >= dumped                                # resumes from the dumped value (a restart
            #                                                    would count from 1 again)
            assert b.read_file("/workspace/f") == b"before\n"
        time.sleep(0.3)
        for b in branches:
            assert _counter(b) > dumped                        # background state resumed
        branches[0].exec("echo one > /workspace/f")
        assert branches[1].read_file("/workspace/f") == b"before\n"   # branches diverge independently
        assert sb.read_file("/workspace/f") == b"before\n"            # original unaffected
        ns = [pidns_of(b.pid) for b in branches]
    finally:
        for b in branches:
            b.delete(wait=True)
        sb.delete(wait=True)
    assert all(procs_in_pidns(n) == [] for n in ns)


def test_checkpoint_unavailable_reasons(state_root, monkeypatch, tmp_path):
    sb = Sandbox(state_root=state_root)
    try:
        monkeypatch.setattr(criu, "_found", (None, "criu check failed: vdso: Unexpected rt vDSO area bounds"))
        with pytest.raises(CheckpointUnavailable, match="vDSO"):
            sb.checkpoint(tmp_path / "c")
        monkeypatch.setattr(criu, "_found", ("/bin/true", ""))
        with pytest.raises(CheckpointUnavailable, match="criu=True"):
            sb.checkpoint(tmp_path / "c")
    finally:
        sb.delete()
    assert not os.path.exists(tmp_path / "c")
