"""Adaptive restarts: the doubling schedule, the shadow-loss change detector, and the kernels with
given restart slots equal to the Python policies."""

from __future__ import annotations

import pytest

from neurips26.delayed_hits import (LAFTPL, Cache, DetectRestartLAFTPL, DetectRestartUCBDH,
                                    DoublingRestartLAFTPL, DoublingRestartUCBDH, detect_restarts,
                                    doubling_restarts, make_policy, simulate)
from neurips26.delayed_hits.workloads import irm_zipf, piecewise_zipf


def test_doubling_schedule():
    pts = doubling_restarts(100, lambda E: E // 2, 8)
    # epochs [0,8) [8,24) [24,56) [56,120): inner restarts every E/2, plus each epoch's end
    assert pts == [4, 8, 16, 24, 40, 56, 88]
    assert doubling_restarts(10, lambda E: 10 ** 6, 4) == [4]       # no inner restart fits


def test_detector_finds_the_changes_and_stays_quiet_on_iid():
    tr, info = piecewise_zipf(1000, 2 ** 16, 4, 0.8, seed=0)
    got = detect_restarts(tr, 10, 50, 2048)
    assert len(got) == 4
    for g, c in zip(got, info["change_points"]):
        assert c < g <= c + 2 * 2048 + 2048                          # fires within 2 windows
    iid, _ = irm_zipf(1000, 2 ** 16, 0.8, seed=0)
    assert detect_restarts(iid, 10, 50, 2048) == []


@pytest.mark.parametrize("make", [lambda: LAFTPL(refresh=1, seed=2, restart_at=[500, 1700]),
                                  lambda: LAFTPL(refresh=8, seed=2, restart_at=[500, 1700],
                                                 restart_every=900),
                                  lambda: DetectRestartLAFTPL(window=600, refresh=4, seed=1),
                                  lambda: DoublingRestartLAFTPL(B=2, H0=256, refresh=4, seed=0),
                                  lambda: DetectRestartUCBDH(window=600, refresh=4),
                                  lambda: DoublingRestartUCBDH(B=2, H0=256, refresh=4)])
def test_restart_slots_kernel_equals_python(make):
    tr, _ = piecewise_zipf(200, 4000, 3, 0.9, seed=4)
    a = simulate(tr, make(), K=15, Z=6)
    b = simulate(tr, make(), K=15, Z=6, engine="python")
    assert a.total_latency == b.total_latency and a.shadow_cost == b.shadow_cost
    assert a.extra["restarts"] >= 1


def test_detect_restart_policies_by_name_and_stream_refusal():
    for name in ("UCB-DH-detect", "LA-FTPL-detect", "UCB-DH-doubling", "LA-FTPL-doubling"):
        assert make_policy(name).name == name
    with pytest.raises(TypeError, match="whole trace"):
        Cache(DetectRestartLAFTPL(), K=2, Z=3, n_items=5)


def test_detect_restart_helps_on_piecewise():
    """On a piecewise workload the detector's restarts lower LA-FTPL's latency (a sanity check
    that the restarts act, not a claim)."""
    tr, _ = piecewise_zipf(1000, 2 ** 16, 4, 0.8, seed=1)
    plain = simulate(tr, LAFTPL(refresh=16, seed=0), K=50, Z=10).total_latency
    det = simulate(tr, DetectRestartLAFTPL(window=2048, refresh=16, seed=0), K=50, Z=10).total_latency
    assert det < plain
