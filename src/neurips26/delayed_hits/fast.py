"""Dispatch of a policy to its compiled kernel (``kernels.py``) when one exists.

``simulate(..., engine="auto")`` uses this path for LRU, FIFO, UCB-DH (without prefetch) and
LA-FTPL/FTPL (completion-time admission, one gamma per restart); the decisions are the same as the
Python policies' (tested), only faster. Other policies run in the Python engine.
"""

from __future__ import annotations


import numpy as np

from neurips26.delayed_hits import kernels
from neurips26.delayed_hits.la_ftpl import LAFTPL
from neurips26.delayed_hits.policies import FIFO, LRU
from neurips26.delayed_hits.simulator import SimResult
from neurips26.delayed_hits.trace import Trace
from neurips26.delayed_hits.ucb_dh import UCBDH


MAX_GAMMA_VALUES = 1 << 25     # 256 MB of pre-drawn perturbations (one N-vector per restart)


def supports(policy) -> bool:
    if type(policy) in (LRU, FIFO):
        return True
    if isinstance(policy, UCBDH):
        return not policy.prefetch_enabled
    if isinstance(policy, LAFTPL):
        return policy.admission == "completion" and not policy.fresh_gamma
    return False


def run(tr: Trace, policy, K: int, Z: int, checkpoints=(), ref_set=None,
        track_from: int = 0) -> SimResult | None:
    """Run ``policy`` through its kernel; returns the same ``SimResult`` as ``simulate`` (None when
    the kernel path does not fit: LA-FTPL with so many restarts that the pre-drawn perturbations
    would exceed MAX_GAMMA_VALUES)."""
    ids, ptr, one = kernels.trace_arrays(tr)
    N = tr.n_items
    cps = np.asarray(sorted(set(int(c) for c in checkpoints)), dtype=np.int64)
    extra = {}
    if type(policy) in (LRU, FIFO):
        stats, cp = kernels.lru_kernel(ids, ptr, one, N, K, Z, type(policy) is FIFO, cps)
    elif isinstance(policy, UCBDH):
        policy.reset(tr, K, Z)
        ref = np.zeros(0, dtype=np.bool_)
        if ref_set is not None:
            ref = np.zeros(N, dtype=np.bool_)
            ref[np.asarray(ref_set, dtype=np.int64)] = True
        ra = np.asarray(policy.restart_at or [], dtype=np.int64)
        stats, cp, mism, nrest = kernels.ucb_kernel(
            ids, ptr, one, N, K, Z, policy.refresh, policy.index == "generic", float(policy._bmax),
            float(policy.C_B_used), int(policy.restart_every or 0), ra, cps, ref, int(track_from))
        extra = {"mismatch_slots": int(mism), "restarts": int(nrest)}
    elif isinstance(policy, LAFTPL):
        policy.reset(tr, K, Z)
        H = policy.restart_every or 0
        n_rest = (tr.n_slots // H + 1) if H else 0
        if (n_rest + 1) * N > MAX_GAMMA_VALUES:
            return None                    # too many pre-drawn gammas: use the Python engine
        rng = np.random.default_rng(policy.seed)
        gammas = np.stack([rng.standard_normal(N) for _ in range(n_rest + 1)])
        kern = kernels.ftpl_kernel if policy.refresh == 1 else kernels.ftpl_heap_kernel
        stats, cp, nrest = kern(
            ids, ptr, one, N, K, Z, policy.refresh, policy.c_eta, policy._scale,
            policy.loss == "count", int(H), gammas, cps)
        extra = {"restarts": int(nrest)}
    else:
        raise TypeError(f"no kernel for policy {type(policy).__name__}")
    L = kernels.shadow_kernel(ids, ptr, one, Z, N, np.zeros(0, dtype=np.int64))[0]
    cp_out = {int(t): (int(cp[k, 0]), int(cp[k, 1]), None) for k, t in enumerate(cps)}
    res = SimResult(policy=policy.name, K=K, Z=Z, n_slots=tr.n_slots, n_requests=int(stats[7]),
                    total_latency=int(stats[0]), hits=int(stats[1]), delayed_hits=int(stats[2]),
                    misses=int(stats[3]), admissions=int(stats[4]), evictions=int(stats[5]),
                    shadow_cost=int(stats[6]), shadow_loss_per_item=L, checkpoints=cp_out)
    res.extra = extra
    return res
