"""Delayed-hit caching with regret guarantees: UCB-DH (stochastic), LA-FTPL (adversarial), restarts.

    from neurips26.delayed_hits import simulate, LRU, LAFTPL, UCBDH, read_atre
    trace = read_atre("my_trace.csv")            # ``timestamp;object_id`` lines
    res = simulate(trace, LAFTPL(refresh=16), K=50, Z=10)
    res.mean_latency, res.static_regret(), res.shadow_regret()
"""

from neurips26.delayed_hits.base import InvariantError, Policy, SimResult
from neurips26.delayed_hits.catalog import POLICY_NAMES, make_policy
from neurips26.delayed_hits.la_ftpl import LAFTPL, FTPLHitCount, RestartedLAFTPL, ftpl_restart_period
from neurips26.delayed_hits.offline import Belady, StaticOPT, StaticPolicy
from neurips26.delayed_hits.policies import (ARCMAD, FIFO, LFU, LHDMAD, LRU, LRUMAD, VACDH, InCacheLFU,
                                             Marker)
from neurips26.delayed_hits.restarts import (DetectRestartLAFTPL, DetectRestartUCBDH,
                                             DoublingRestartLAFTPL, DoublingRestartUCBDH,
                                             detect_restarts, doubling_restarts)
from neurips26.delayed_hits.shadow import (amplification, c_b_bound, regret_slope, shadow_losses,
                                           static_cost, static_opt_cost, switching_opt, theta, top_k)
from neurips26.delayed_hits.simulator import Cache, StreamInfo, simulate
from neurips26.delayed_hits.trace import (Trace, as_trace, from_slots, load_atre_5k, read_atre, read_csv,
                                          read_oracle_general, write_atre, write_oracle_general)
from neurips26.delayed_hits.ucb_dh import UCBDH, RestartedUCBDH, ucb_index, ucb_restart_period

__all__ = [
    "simulate", "Cache", "StreamInfo", "SimResult", "Policy", "InvariantError", "make_policy", "POLICY_NAMES",
    "LRU", "FIFO", "LFU", "InCacheLFU", "Belady", "Marker", "LRUMAD", "LHDMAD", "VACDH", "ARCMAD", "StaticPolicy",
    "StaticOPT", "LAFTPL", "RestartedLAFTPL", "FTPLHitCount", "UCBDH", "RestartedUCBDH",
    "shadow_losses", "c_b_bound", "static_opt_cost", "static_cost", "switching_opt", "theta",
    "amplification", "regret_slope", "top_k", "ucb_index", "ucb_restart_period", "ftpl_restart_period",
    "DoublingRestartUCBDH", "DoublingRestartLAFTPL", "DetectRestartUCBDH", "DetectRestartLAFTPL",
    "doubling_restarts", "detect_restarts", "Trace", "as_trace", "from_slots", "read_atre", "read_csv", "read_oracle_general", "write_atre",
    "write_oracle_general", "load_atre_5k",
]
