"""Every policy of the reproduction by its report name (ours, the spec's baselines, the variants).

``make_policy("LA-FTPL", seed=0, ftpl_refresh=16)`` builds one; the experiment, the scale-out sweep
and a user's own sweep share this table.
"""

from __future__ import annotations

from neurips26.harness.validation import check_choice
from neurips26.delayed_hits.la_ftpl import LAFTPL, FTPLHitCount, RestartedLAFTPL
from neurips26.delayed_hits.offline import Belady
from neurips26.delayed_hits.policies import (ARCMAD, FIFO, LFU, LHDMAD, LRU, LRUMAD, VACDH, InCacheLFU,
                                             Marker)
from neurips26.delayed_hits.restarts import (DetectRestartLAFTPL, DetectRestartUCBDH,
                                             DoublingRestartLAFTPL, DoublingRestartUCBDH)
from neurips26.delayed_hits.ucb_dh import RestartedUCBDH, UCBDH

OURS = ("UCB-DH", "LA-FTPL")
BASELINES = ("LRU", "FIFO", "LFU", "LFU-incache", "Belady", "Marker", "LRU-MAD", "LHD-MAD", "LHD",
             "FTPL")
RESTARTED = ("UCB-DH-restart", "LA-FTPL-restart", "UCB-DH-doubling", "LA-FTPL-doubling",
             "UCB-DH-detect", "LA-FTPL-detect")
FAST = {"LRU", "FIFO", "UCB-DH", "LA-FTPL", "FTPL", "LA-FTPL-Zagnostic", "UCB-DH-generic", *RESTARTED}
POLICY_NAMES = set(OURS) | set(BASELINES) | {"LA-FTPL-restart", "UCB-DH-restart", "LA-FTPL-Zagnostic",
                                              "UCB-DH-generic", "VA-CDH", "Belady-Atre", "ARC-MAD", "ARC",
                                              *RESTARTED}


def make_policy(name: str, seed: int = 0, *, ftpl_refresh: int = 16, ucb_refresh: int = 16,
                c_eta: float = 1.0, lhd_reconfig: int = 2 ** 14, B: int = 4, T: int | None = None,
                restart_at: tuple | None = None):
    """A policy by its report name (the table of the spec's baselines plus ours)."""
    if name == "LRU":
        return LRU()
    if name == "FIFO":
        return FIFO()
    if name == "LFU":
        return LFU()
    if name == "LFU-incache":
        return InCacheLFU()
    if name == "Belady":
        return Belady()
    if name == "Belady-Atre":
        return Belady(admission="bypass", next_request="atre")
    if name == "Marker":
        return Marker(seed=seed)
    if name == "LRU-MAD":
        return LRUMAD()
    if name == "LHD-MAD":
        return LHDMAD(reconfig=lhd_reconfig, seed=seed)
    if name == "VA-CDH":
        return VACDH()
    if name == "ARC-MAD":
        return ARCMAD()
    if name == "ARC":
        return ARCMAD(mad=False)
    if name == "LHD":
        return LHDMAD(mad=False, reconfig=lhd_reconfig, seed=seed)
    if name == "FTPL":
        return FTPLHitCount(c_eta=c_eta, refresh=ftpl_refresh, seed=seed)
    if name == "LA-FTPL":
        return LAFTPL(c_eta=c_eta, refresh=ftpl_refresh, seed=seed)
    if name == "UCB-DH":
        return UCBDH(refresh=ucb_refresh, restart_at=restart_at)
    if name == "LA-FTPL-Zagnostic":
        return LAFTPL(c_eta=c_eta, refresh=ftpl_refresh, seed=seed, z_agnostic=True,
                      name="LA-FTPL-Zagnostic")
    if name == "UCB-DH-generic":
        return UCBDH(refresh=ucb_refresh, index="generic", name="UCB-DH-generic")
    if name == "LA-FTPL-restart":
        return RestartedLAFTPL(B=B, T=T, c_eta=c_eta, refresh=ftpl_refresh, seed=seed)
    if name == "UCB-DH-restart":
        return RestartedUCBDH(B=B, T=T, refresh=ucb_refresh)
    if name == "UCB-DH-doubling":
        return DoublingRestartUCBDH(B=B, refresh=ucb_refresh)
    if name == "LA-FTPL-doubling":
        return DoublingRestartLAFTPL(B=B, c_eta=c_eta, refresh=ftpl_refresh, seed=seed)
    if name == "UCB-DH-detect":
        return DetectRestartUCBDH(refresh=ucb_refresh)
    if name == "LA-FTPL-detect":
        return DetectRestartLAFTPL(c_eta=c_eta, refresh=ftpl_refresh, seed=seed)
    check_choice(name, "name", sorted(POLICY_NAMES))       # raises, naming the known policies
    raise AssertionError(f"policy {name!r} is in POLICY_NAMES but has no constructor here")
