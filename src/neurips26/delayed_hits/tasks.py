"""The reproduction's task list: workload specs (rebuilt deterministically inside each worker),
one simulation per task, and the list of every simulation of one seed's run.

A task is a dict (workload spec, policy name, K, Z, seed, checkpoints, policy kwargs) and its key
a tuple ``(tag, policy, K, Z, seed, spec)``; ``analysis.py`` reads the outputs by these keys.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from neurips26.delayed_hits.catalog import BASELINES, FAST, OURS, RESTARTED, make_policy
from neurips26.delayed_hits.shadow import shadow_losses
from neurips26.delayed_hits.simulator import simulate
from neurips26.delayed_hits import workloads as W
from neurips26.delayed_hits.trace import load_atre_5k


ABLATION_C_ETA = (0.0, 0.1, 0.3, 1.0, 3.0)     # the c_eta ablation on W1 / W2


def latency_groups(cfg, seed: int) -> list[tuple]:
    """(tag, spec, K, Z, seed) of the latency tables: W2 bursty, W7 stdlib tokens, W8 Atre's 5K."""
    out = [("W2", ("W2", cfg.w2.N, cfg.w2.T, cfg.w2.b, Z, seed), cfg.w2.K, Z, seed) for Z in cfg.w2.Z]
    out += [("W7", ("W7", cfg.w7.requests), cfg.w7.K, Z, seed) for Z in cfg.w7.Z]
    out += [("W8", ("W8",), cfg.w8.K, Z, seed) for Z in cfg.w8.Z]
    return out


def tune_prefix(frac: float, T: int) -> int:
    """T0: the held-apart prefix (slots) on which c_eta and the variant are chosen."""
    return min(T - 1, max(1, int(round(frac * T))))


_PINNED: dict = {}     # workloads built once in the parent (forked workers inherit them)


def build_workload(spec: tuple):
    if spec in _PINNED:
        return _PINNED[spec]
    return _build_workload(spec)


def pin_workload(spec: tuple):
    """Build ``spec`` once and keep it for the rest of the process (and its forked workers)."""
    if spec not in _PINNED:
        _PINNED[spec] = _build_workload(spec)
    return _PINNED[spec]


@lru_cache(maxsize=4)
def _build_workload(spec: tuple):
    kind = spec[0]
    if kind == "W1":
        _, N, T, alpha, seed = spec
        return W.irm_zipf(N, T, alpha, seed=seed)
    if kind == "W2":
        _, N, T, b, Z, seed = spec
        return W.bursty(N=N, T=T, b=b, Z=Z, seed=seed)
    if kind == "W3":
        _, N, T, B, alpha, seed = spec
        return W.piecewise_zipf(N, T, B, alpha, seed=seed)
    if kind == "W4":
        _, T, seed = spec
        return W.shot_noise(T, seed=seed)
    if kind == "W5":
        _, T, Z, seed = spec
        return W.flow_packets(T, Z=Z, seed=seed)
    if kind == "W6a":
        _, K, T = spec
        return W.cyclic(K, T)
    if kind == "W6b":
        _, T, Z = spec
        return W.freq_vs_burst(T, Z)
    if kind == "W6c":
        _, K, T = spec
        return W.lfu_flip(K, T)
    if kind == "W7":
        _, n = spec
        return W.stdlib_tokens(n)
    if kind == "W8":
        return load_atre_5k(), {}
    if kind == "C7":
        _, N, T, seed = spec
        return W.irm(W.zipf_probs(N, 1.0), T, seed=seed, name="check-7 IRM")
    raise ValueError(f"unknown workload {kind!r}")


def run_task(task: dict) -> dict:
    """One simulation: task = workload spec, policy, K, Z, seed, checkpoints, policy kwargs."""
    tr, info = build_workload(task["spec"])
    pol = make_policy(task["policy"], task["seed"], **task.get("pkw", {}))
    cps = [c for c in task.get("checkpoints", ()) if c <= tr.n_slots]
    if task.get("tune_frac") is not None:                 # the latency tables' tuning prefix T0
        cps = sorted(set(cps) | {tune_prefix(task["tune_frac"], tr.n_slots), tr.n_slots})
    ref = task.get("ref_set")
    if ref is not None:                   # UCB-DH's kernel also counts the slots with S_t != S*
        r = pol.run_kernel(tr, task["K"], task["Z"], cps, ref_set=ref, track_from=tr.n_slots // 2)
    else:
        r = simulate(tr, pol, K=task["K"], Z=task["Z"], checkpoints=cps)
    out = {"key": task["key"], "latency": r.total_latency, "shadow": r.shadow_cost,
           "requests": r.n_requests, "mean_latency": r.mean_latency, "miss_ratio": r.miss_ratio,
           "delayed_hit_ratio": r.delayed_hit_ratio, "changes": r.cache_changes,
           "cp": {int(t): [int(v[0]), int(v[1])] for t, v in r.checkpoints.items()}}
    out.update(r.extra)
    return out


def warm_kernels() -> None:
    """Compile the numba kernels once in the parent so forked workers inherit them."""
    tr = W.irm_zipf(20, 200, 0.8, seed=0)[0]
    for name in ("LRU", "UCB-DH", "LA-FTPL"):
        simulate(tr, make_policy(name), K=3, Z=2)
    shadow_losses(tr, 2, grid=[10, 20], return_windows=True)


def w6_T0(cfg) -> int:
    return cfg.w6.slope_T0 or cfg.slope_T0


def pow2_points(T: int, T0: int) -> list[int]:
    """T0, 2 T0, 4 T0, ... <= T: the prefix lengths of the regret-slope fits."""
    out, t = [], T0
    while t <= T:
        out.append(t)
        t *= 2
    return out



def build_tasks(cfg, seed: int) -> list[dict]:
    """Every simulation of one seed's run (workload spec, policy, K, Z, seed, checkpoints), longest
    first."""
    seeds = slow_seeds = [seed]
    pkw = dict(ftpl_refresh=cfg.ftpl_refresh, ucb_refresh=cfg.ucb_refresh, c_eta=cfg.c_eta,
               lhd_reconfig=cfg.lhd_reconfig)
    tasks: list[dict] = []

    def add(spec, policy, K, Z, seed, cps=(), extra_pkw=None, ref_set=None, tag="", tune_frac=None):
        kw = dict(pkw)
        kw.update(extra_pkw or {})
        tasks.append({"key": (tag or spec[0], policy, K, Z, seed, spec), "spec": spec,
                      "policy": policy, "K": K, "Z": Z, "seed": seed, "checkpoints": list(cps),
                      "pkw": kw, "ref_set": ref_set, "tune_frac": tune_frac})

    all_pols = list(OURS) + list(BASELINES)
    regret_pols = ["LRU", "FIFO", "Marker", "LFU", "UCB-DH", "LA-FTPL", "FTPL"]
    # W1: regret from prefixes (the regret policies), latency tables (every policy)
    w1_cps = pow2_points(cfg.w1.T, cfg.slope_T0) + [cfg.w1.T]
    for Z in cfg.w1.Z:
        for s in seeds:
            spec = ("W1", cfg.w1.N, cfg.w1.T, cfg.w1.alpha, s)
            for p in all_pols:
                if p == "LHD" and Z != 1:
                    continue                    # the base LHD is only needed for the Z = 1 claim
                if p in regret_pols or s in slow_seeds:
                    add(spec, p, cfg.w1.K, Z, s, w1_cps)
    # W2 bursty, W7, W8 latency tables (every policy; checkpoints at the tuning prefix T0), the
    # adaptive and fixed-B restarted variants, and LA-FTPL's c_eta grid (chosen on the prefix)
    for tag, spec, K, Z, s in latency_groups(cfg, seed):
        for p in all_pols + ["VA-CDH", "ARC-MAD", "ARC", "Belady-Atre"]:
            add(spec, p, K, Z, s, tag=tag, tune_frac=cfg.tune_frac)
        for p in RESTARTED:
            if not p.startswith("LA-FTPL"):
                add(spec, p, K, Z, s, extra_pkw={"B": cfg.w3.B}, tag=tag, tune_frac=cfg.tune_frac)
        for p in ("LA-FTPL",) + tuple(r for r in RESTARTED if r.startswith("LA-FTPL")):
            for ce in cfg.c_eta_grid:
                add(spec, p, K, Z, s, extra_pkw={"B": cfg.w3.B, "c_eta": ce},
                    tag=f"{tag}/c_eta={ce}", tune_frac=cfg.tune_frac)
    for T, tag in ((cfg.w4_T, "W4"), (cfg.w5_T, "W5")):
        if T:
            for Z in cfg.w7.Z:
                spec = ("W4", T, seeds[0]) if tag == "W4" else ("W5", T, Z, seeds[0])
                for p in all_pols:
                    add(spec, p, cfg.w1.K, Z, seeds[0])
    # W6a (K=8, Z=1) and W6b (K=1, Z=10): prefixes
    w6_cps = pow2_points(cfg.w6.T, w6_T0(cfg)) + [cfg.w6.T]
    for p in ("LRU", "FIFO", "Marker", "LFU", "LA-FTPL", "UCB-DH"):
        for s in seeds:
            add(("W6a", cfg.w6.a_K, cfg.w6.T), p, cfg.w6.a_K, 1, s, w6_cps)
            add(("W6b", cfg.w6.T, cfg.w6.b_Z), p, 1, cfg.w6.b_Z, s, w6_cps)
    # W6c: one run per T (flip at T/2), LFU and LRU
    for T in cfg.w6.c_T:
        for p in ("LFU", "LRU"):
            add(("W6c", cfg.w6.c_K, T), p, cfg.w6.c_K, 1, seeds[0])
    # W3: one run per T
    for T in cfg.w3.T:
        for s in seeds:
            spec = ("W3", cfg.w1.N, T, cfg.w3.B, cfg.w1.alpha, s)
            for p in ("LRU", "LA-FTPL", "LA-FTPL-restart", "UCB-DH-restart"):
                add(spec, p, cfg.w1.K, cfg.w3.Z, s, extra_pkw={"B": cfg.w3.B, "T": T})
    # ablations (seed 0, the middle W1 latency and W2): c_eta grid, Z-agnostic eta, generic index
    Zab = cfg.w1.Z[len(cfg.w1.Z) // 2]
    for spec, K, Z in ((("W1", cfg.w1.N, cfg.w1.T, cfg.w1.alpha, seeds[0]), cfg.w1.K, Zab),
                       (("W2", cfg.w2.N, cfg.w2.T, cfg.w2.b, cfg.w2.Z[0], seeds[0]), cfg.w2.K,
                        cfg.w2.Z[0])):
        for ce in ABLATION_C_ETA:
            add(spec, "LA-FTPL", K, Z, seeds[0], extra_pkw={"c_eta": ce}, tag=f"abl/c_eta={ce}")
        for p in ("LA-FTPL-Zagnostic", "UCB-DH-generic"):
            add(spec, p, K, Z, seeds[0], tag="abl")
    # oracle restarts of UCB-DH at the true change points (W3, largest T)
    T3 = max(cfg.w3.T)
    for s in seeds:
        spec = ("W3", cfg.w1.N, T3, cfg.w3.B, cfg.w1.alpha, s)
        add(spec, "UCB-DH", cfg.w1.K, cfg.w3.Z, s,
            extra_pkw={"restart_at": tuple(W.change_points(T3, cfg.w3.B))}, tag="abl/oracle")
    # check-7 instance: UCB-DH with the S_t != S* count
    c7_cps = sorted(set(pow2_points(cfg.c7.T, cfg.slope_T0) + [cfg.c7.T, cfg.c7.T // 16]))
    for s in seeds:
        add(("C7", cfg.c7.N, cfg.c7.T, s), "UCB-DH", cfg.c7.K, cfg.c7.Z, s, c7_cps,
            ref_set=np.arange(cfg.c7.K))
        for Z in cfg.c7.Z_sweep:
            if Z != cfg.c7.Z:
                add(("C7", cfg.c7.N, cfg.c7.T, s), "UCB-DH", cfg.c7.K, Z, s, [cfg.c7.T],
                    ref_set=np.arange(cfg.c7.K))

    # longest first for load balance
    def cost(t):
        kind = t["spec"][0]
        tr_len = {"W1": cfg.w1.T, "W2": cfg.w2.T * 3, "W6a": cfg.w6.T, "W6b": cfg.w6.T // 4,
                  "W7": cfg.w7.requests or 500_000, "W8": 5000, "C7": cfg.c7.T, "W4": cfg.w4_T,
                  "W5": cfg.w5_T}.get(kind) or t["spec"][2]
        return tr_len * (1 if t["policy"] in FAST else 10)

    tasks.sort(key=cost, reverse=True)
    return tasks


