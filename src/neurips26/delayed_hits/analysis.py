"""The reproduction's analysis: every metric of one seed's run, from the task outputs.

Metrics are nested JSON (workload -> Z -> policy -> figure); a check indexes them with the config's
own workload names and Z values, never by parsing a key.
"""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np

from neurips26.delayed_hits.catalog import RESTARTED
from neurips26.delayed_hits.shadow import (amplification, regret_slope, shadow_losses, static_cost,
                                           static_opt_cost, switching_opt, top_k)
from neurips26.delayed_hits.tasks import (build_workload, latency_groups, pow2_points, tune_prefix,
                                          w6_T0)
from neurips26.delayed_hits import workloads as W

MAD = ("LRU-MAD", "LHD-MAD")                      # the judged MAD baselines (chosen on the prefix)
SHOWN_MAD = ("VA-CDH", "ARC-MAD")                 # shown beside them
UCB_FAMILIES = ("UCB-DH",) + tuple(p for p in RESTARTED if p.startswith("UCB-DH"))
FTPL_FAMILIES = ("LA-FTPL",) + tuple(p for p in RESTARTED if p.startswith("LA-FTPL"))


def _prefix_comparators(spec, Z, K, cps, true_set=None):
    tr, _ = build_workload(spec)
    cps = [c for c in cps if c <= tr.n_slots]
    _, snaps = shadow_losses(tr, Z, grid=cps)
    opt = {c: static_opt_cost(snaps[k], K) for k, c in enumerate(cps)}
    true = None
    if true_set is not None:
        true = {c: static_cost(snaps[k], true_set) for k, c in enumerate(cps)}
    return opt, true


def _slopes(points_by_seed: dict[int, dict[int, float]], T0: int) -> dict:
    """The regret slope of the run's seed over the prefix points T0, 2 T0, ... (NaN with < 2)."""
    (pts,) = points_by_seed.values()
    grid = set(pow2_points(max(pts), T0)) if pts else set()
    Ts = sorted(t for t in pts if t in grid)
    if len(Ts) < 2:
        return {"slope": float("nan")}
    return {"slope": regret_slope(Ts, [pts[t] for t in Ts])}


def analyse(cfg, R: dict, seeds, slow_seeds) -> dict:
    """Every metric of one seed's run from the task outputs ``R`` (keyed as in ``tasks.py``)."""

    m: dict = {"config": asdict(cfg)}
    # W1 regret curves (static and shadow), per Z and policy
    w1_cps = pow2_points(cfg.w1.T, cfg.slope_T0) + [cfg.w1.T]
    regret = {}
    for Z in cfg.w1.Z:
        comps = {s: _prefix_comparators(("W1", cfg.w1.N, cfg.w1.T, cfg.w1.alpha, s), Z, cfg.w1.K,
                                        w1_cps)[0] for s in seeds}
        for p in ["LRU", "FIFO", "Marker", "LFU", "UCB-DH", "LA-FTPL", "FTPL"]:
            real, sh = {}, {}
            for s in seeds:
                out = R[("W1", p, cfg.w1.K, Z, s, ("W1", cfg.w1.N, cfg.w1.T, cfg.w1.alpha, s))]
                real[s] = {t: out["cp"][t][0] - comps[s][t] for t in comps[s]}
                sh[s] = {t: out["cp"][t][1] - comps[s][t] for t in comps[s]}
            regret.setdefault("W1", {}).setdefault(str(Z), {})[p] = {"real": _slopes(real, cfg.slope_T0),
                                       "shadow": _slopes(sh, cfg.slope_T0),
                                       "curve": {int(t): float(np.mean([real[s][t] for s in seeds]))
                                                 for t in comps[seeds[0]]}}
    # W6a / W6b regret from prefixes
    w6_cps = pow2_points(cfg.w6.T, w6_T0(cfg)) + [cfg.w6.T]
    for tag, spec, K, Z in (("W6a", ("W6a", cfg.w6.a_K, cfg.w6.T), cfg.w6.a_K, 1),
                            ("W6b", ("W6b", cfg.w6.T, cfg.w6.b_Z), 1, cfg.w6.b_Z)):
        comp = _prefix_comparators(spec, Z, K, w6_cps)[0]
        for p in ("LRU", "FIFO", "Marker", "LFU", "LA-FTPL", "UCB-DH"):
            real, sh = {}, {}
            for s in seeds:
                out = R[(tag, p, K, Z, s, spec)]
                real[s] = {t: out["cp"][t][0] - comp[t] for t in comp}
                sh[s] = {t: out["cp"][t][1] - comp[t] for t in comp}
            T = cfg.w6.T
            regret.setdefault(tag, {}).setdefault(str(Z), {})[p] = {
                "real": _slopes(real, w6_T0(cfg)), "shadow": _slopes(sh, w6_T0(cfg)),
                "regret_over_T": float(np.mean([real[s][T] / T for s in seeds])),
                "curve": {int(t): float(np.mean([real[s][t] for s in seeds])) for t in comp}}
    # W6c: LFU lock-in, switching regret vs the comparator with one switch at the flip
    w6c = {}
    for p in ("LFU", "LRU"):
        pts = {}
        for T in cfg.w6.c_T:
            spec = ("W6c", cfg.w6.c_K, T)
            tr, info = build_workload(spec)
            grid = sorted(set(info["change_points"]) | {T})
            _, snaps = shadow_losses(tr, 1, grid=grid)
            P = np.vstack([np.zeros((1, tr.n_items), dtype=np.int64), snaps])
            sw, _ = switching_opt(P, cfg.w6.c_K, 1)
            out = R[("W6c", p, cfg.w6.c_K, 1, seeds[0], spec)]
            pts[T] = out["latency"] - sw
        w6c[p] = {"switching_regret": {int(t): float(v) for t, v in pts.items()},
                  **_slopes({0: pts}, cfg.slope_T0)}
    m["w6c"] = w6c
    m["regret"] = regret

    # W3: static and switching regret per T (one run per T)
    w3 = {p: {"static": {}, "switching": {}, "shadow": {}} for p in
          ("LRU", "LA-FTPL", "LA-FTPL-restart", "UCB-DH-restart")}
    switch_vs_B = {p: {} for p in w3}
    for T in cfg.w3.T:
        for s in seeds:
            spec = ("W3", cfg.w1.N, T, cfg.w3.B, cfg.w1.alpha, s)
            tr, info = build_workload(spec)
            G = 200
            grid = sorted(set(np.linspace(T / G, T, G).round().astype(int).tolist())
                          | set(info["change_points"]) | {T})
            grid = [g for g in grid if 1 <= g <= T]
            L, snaps = shadow_losses(tr, cfg.w3.Z, grid=grid)
            P = np.vstack([np.zeros((1, tr.n_items), dtype=np.int64), snaps])
            sw = {B: switching_opt(P, cfg.w1.K, B)[0] for B in cfg.w3.B_grid}
            sw_B = sw.get(cfg.w3.B, switching_opt(P, cfg.w1.K, cfg.w3.B)[0])
            st = static_opt_cost(L, cfg.w1.K)
            for p in w3:
                out = R[("W3", p, cfg.w1.K, cfg.w3.Z, s, spec)]
                w3[p]["static"].setdefault(s, {})[T] = out["latency"] - st
                w3[p]["shadow"].setdefault(s, {})[T] = out["shadow"] - st
                w3[p]["switching"].setdefault(s, {})[T] = out["latency"] - sw_B
                if T == max(cfg.w3.T):
                    for B, v in sw.items():
                        switch_vs_B[p].setdefault(B, []).append(out["latency"] - v)
    m["w3"] = {p: {k: _slopes(v, cfg.slope_T0) | {"mean": {int(T): float(np.mean([v[s][T] for s in v]))
                                              for T in cfg.w3.T}}
                   for k, v in d.items()} for p, d in w3.items()}
    m["w3_switching_vs_B"] = {p: {int(B): float(np.mean(v)) for B, v in d.items()}
                              for p, d in switch_vs_B.items()}

    # check-7 instance: UCB-DH regret vs the true S* and its ratio regret/ln T between T and T/16
    c7_cps = sorted(set(pow2_points(cfg.c7.T, cfg.slope_T0) + [cfg.c7.T, cfg.c7.T // 16]))
    ratios, mism, c7_reg = [], [], {}
    for s in seeds:
        spec = ("C7", cfg.c7.N, cfg.c7.T, s)
        _, true = _prefix_comparators(spec, cfg.c7.Z, cfg.c7.K, c7_cps, true_set=np.arange(cfg.c7.K))
        out = R[("C7", "UCB-DH", cfg.c7.K, cfg.c7.Z, s, spec)]
        reg = {t: out["cp"][t][0] - true[t] for t in true}
        T = cfg.c7.T
        r_T = max(reg[T], 1) / math.log(T)
        r_16 = max(reg[T // 16], 1) / math.log(T // 16)
        ratios.append(r_T / r_16)
        mism.append(out["mismatch_slots"] / (T - T // 2 + 1))
        c7_reg = {int(t): int(v) for t, v in reg.items()}
    # regret at T vs Z (the latency-amplification factor a_Z multiplies the gap-dependent terms)
    by_z = {}
    for Z in sorted(set(cfg.c7.Z_sweep) | {cfg.c7.Z}):
        vals = []
        for s in seeds:
            spec = ("C7", cfg.c7.N, cfg.c7.T, s)
            tr, _ = build_workload(spec)
            L = shadow_losses(tr, Z)
            out = R[("C7", "UCB-DH", cfg.c7.K, Z, s, spec)]
            vals.append(out["latency"] - static_cost(L, np.arange(cfg.c7.K)))
        by_z[int(Z)] = float(np.mean(vals))
    # the lower bound's amplification: a gap-dependent term at fetch latency Z is the Z = 1 term
    # times a_Z(q) = Z (1 + q(Z-1)/2) / (1 + q(Z-1)) (the per-request shadow value, spec §2), with q
    # the request probability of the items at the top-K boundary (geometric mean of q_K, q_K+1)
    p = W.zipf_probs(cfg.c7.N, 1.0)
    q = float(math.sqrt(p[cfg.c7.K - 1] * p[min(cfg.c7.K, cfg.c7.N - 1)]))
    base = by_z.get(1)
    amp = [{"Z": int(Z), "regret": r, "a_Z": float(amplification(q, Z)),
            "measured_ratio": (r / base) if base else None,
            "predicted_ratio": float(amplification(q, Z) / amplification(q, 1))}
           for Z, r in sorted(by_z.items())]
    m["c7"] = {"ratio_T_over_T16": float(np.mean(ratios)),
               "mismatch_fraction": float(np.max(mism)), "regret": c7_reg,
               "q_boundary": q, "regret_vs_Z": amp}

    # latency tables: mean latency per (workload, Z, policy) averaged over the seeds run
    lat = {}
    groups = {}
    for key, out in R.items():
        tag, p, K, Z, s, spec = key
        if tag in ("W1", "W2", "W7", "W8", "W4", "W5") and s in slow_seeds:
            groups.setdefault((tag, Z), {}).setdefault(p, []).append(out)
    for (tag, Z), d in sorted(groups.items()):
        lat.setdefault(tag, {})[str(Z)] = {p: {"mean_latency": float(np.mean([o["mean_latency"] for o in v])),
                                   "miss_ratio": float(np.mean([o["miss_ratio"] for o in v])),
                                   "delayed_hit_ratio": float(np.mean([o["delayed_hit_ratio"]
                                                                       for o in v]))}
                               for p, v in sorted(d.items())}
    m["latency"] = lat
    rel = {}
    for wl, byz in lat.items():
        for z, d in byz.items():
            if "LRU-MAD" in d and "LHD-MAD" in d:
                rel.setdefault(wl, {})[z] = {
                    p: {"vs_LRU-MAD": v["mean_latency"] / d["LRU-MAD"]["mean_latency"],
                        "vs_LHD-MAD": v["mean_latency"] / d["LHD-MAD"]["mean_latency"]}
                    for p, v in d.items()}
    m["relative_to_mad"] = rel

    # ablations: mean latency and static regret at the full horizon
    abl = {}
    for key, out in R.items():
        tag, p, K, Z, s, spec = key
        if not tag.startswith("abl"):
            continue
        tr, _ = build_workload(spec)
        opt = static_opt_cost(shadow_losses(tr, Z), K)
        name = p if tag in ("abl",) else f"{p} {tag[4:]}"
        abl.setdefault(spec[0], {}).setdefault(str(Z), {})[name] = {
            "mean_latency": out["mean_latency"], "static_regret": out["latency"] - opt}
    m["ablations"] = abl

    # theta formula vs simulation (W2 generator, shadow losses only)
    m["theta_check"] = _theta_check(cfg, seeds[0])
    m["hit_vs_latency"] = _hit_vs_latency(cfg, seeds[0])
    w7info = build_workload(("W7", cfg.w7.requests))[1]
    m["w7"] = {k: w7info[k] for k in ("files", "requests", "distinct", "sha256", "python")}

    m["latency_fair"] = latency_fair(cfg, R, seeds[0])
    return m



def _hit_vs_latency(cfg, seed: int) -> dict:
    """Hit-optimal (top-K by request count) vs latency-optimal (top-K by shadow loss L_T) static
    sets: the latency gap of the hit-optimal set. At Z = 1, L_T = counts, so the gap is 0."""
    out = {}
    cases = [(("W2", cfg.w2.N, cfg.w2.T, cfg.w2.b, Z, seed), cfg.w2.K, Z, "W2")
             for Z in sorted({1, *cfg.w2.Z})]
    cases += [(("W8",), cfg.w8.K, Z, "W8") for Z in cfg.w8.Z]
    cases += [(("W7", cfg.w7.requests), cfg.w7.K, Z, "W7") for Z in cfg.w7.Z]
    for spec, K, Z, tag in cases:
        tr, _ = build_workload(spec)
        L = shadow_losses(tr, Z)
        cnt = np.bincount(tr.ids, minlength=tr.n_items)
        S_L, S_c = top_k(L, K), top_k(cnt, K)
        best = static_cost(L, S_L)
        out.setdefault(tag, {})[str(Z)] = {"gap": (static_cost(L, S_c) - best) / best,
                               "differ": int(K - np.intersect1d(S_L, S_c).size)}
    return out


def _theta_check(cfg, seed: int, n_items: int = 20) -> dict:
    """|L_T(i)/T - theta_i| in standard errors (batch means over 100 batches) for the n_items
    items with the largest theta (spec check 4)."""
    Z = cfg.w2.Z[0]
    tr, info = W.bursty(N=cfg.w2.N, T=cfg.w2.theta_T, b=cfg.w2.b, Z=Z, seed=seed + 1000)
    T = tr.n_slots
    grid = np.linspace(T / 100, T, 100).round().astype(np.int64)
    L, snaps = shadow_losses(tr, Z, grid=grid)
    widths = np.diff(np.concatenate([[0], grid]))
    bm = np.diff(np.vstack([np.zeros((1, tr.n_items)), snaps]), axis=0) / widths[:, None]
    se = bm.std(axis=0, ddof=1) / math.sqrt(len(grid))
    top = np.argsort(-info["theta"], kind="stable")[:n_items]
    z = (L[top] / T - info["theta"][top]) / se[top]
    # the frequency-vs-burst flip: bursty items outrank more frequent steady ones on theta
    rate, th, bursty = info["rate"], info["theta"], info["bursty"]
    flips = int(np.sum(bursty[:-1] & ~bursty[1:] & (rate[:-1] < rate[1:]) & (th[:-1] > th[1:])))
    flips = int(np.sum(bursty[1:] & ~bursty[:-1] & (rate[1:] < rate[:-1]) & (th[1:] > th[:-1]))) + flips
    return {"max_abs_z": float(np.abs(z).max()), "T": int(T), "items": int(n_items),
            "frequency_burst_flips": flips}




def _suffix(out: dict, T0: int, T: int, req0: int, reqT: int) -> tuple[float, float]:
    """(mean latency over the prefix slots 1..T0, mean latency over the suffix T0+1..T)."""
    l0, lT = out["cp"][T0][0], out["cp"][T][0]
    return l0 / max(req0, 1), (lT - l0) / max(reqT - req0, 1)


def latency_fair(cfg, R: dict, seed: int) -> dict:
    """The latency claim judged on a held-apart suffix (spec "lower latency"; issue 12).

    Per latency group (W2 / W7 / W8 at each Z): the first T0 = tune_frac T slots are the tuning
    prefix. On it, LA-FTPL's c_eta is chosen per family (plain, fixed-B restart, doubling,
    detector), then ``ours`` = the family (UCB-DH or LA-FTPL, each with or without restarts)
    with the lowest prefix latency, and ``mad`` = the better of LRU-MAD and LHD-MAD on the prefix.
    Both are then scored on the suffix T0+1..T, beside the suffix's static OPT (top-K of the
    suffix's shadow losses: the best fixed set in hindsight) and its switching OPT with B changes
    (grid DP), so a loss can be read as "no static set could win here" or not.
    """
    out: dict = {}
    for tag, spec, K, Z, s in latency_groups(cfg, seed):
        tr, _ = build_workload(spec)
        T = tr.n_slots
        T0 = tune_prefix(cfg.tune_frac, T)
        req = (lambda t: t) if tr.slot_ptr is None else (lambda t: int(tr.slot_ptr[t]))
        r0, rT = req(T0), req(T)
        pre, suf = {}, {}
        for p in ("LRU", "LRU-MAD", "LHD-MAD", "VA-CDH", "ARC-MAD", "ARC", "LFU", "Belady",
                  "Belady-Atre") + UCB_FAMILIES:
            key = (tag, p, K, Z, s, spec)
            if key in R:
                pre[p], suf[p] = _suffix(R[key], T0, T, r0, rT)
        tuned = {}
        for fam in FTPL_FAMILIES:
            grid = {ce: _suffix(R[(f"{tag}/c_eta={ce}", fam, K, Z, s, spec)], T0, T, r0, rT)
                    for ce in cfg.c_eta_grid}
            best = min(grid, key=lambda ce: (grid[ce][0], ce))      # on the prefix only
            tuned[fam] = {"c_eta": float(best),
                          "suffix_by_c_eta": {str(ce): v[1] for ce, v in grid.items()}}
            pre[fam], suf[fam] = grid[best]
        ours_pick = min(UCB_FAMILIES + FTPL_FAMILIES, key=lambda p: (pre[p], p))
        mad_pick = min(MAD, key=lambda p: (pre[p], p))
        # comparators on the suffix: static OPT and switching OPT (grid of G points after T0)
        G = cfg.switch_grid
        pts = sorted({T0, T} | set(np.linspace(T0, T, G + 1).round().astype(int).tolist()))
        _, snaps = shadow_losses(tr, Z, grid=pts)
        P = snaps - snaps[0]                      # row 0 = zeros at T0
        L_suf = P[-1]
        n_suf = max(rT - r0, 1)
        static = static_opt_cost(L_suf, K) / n_suf
        switching = {str(B): switching_opt(P, K, B)[0] / n_suf for B in cfg.switch_B}
        out.setdefault(tag, {})[str(Z)] = {
            "T0": int(T0), "T": int(T), "prefix": pre, "suffix": suf, "c_eta": tuned,
            "ours_pick": ours_pick, "mad_pick": mad_pick,
            "ours": suf[ours_pick], "mad": suf[mad_pick],
            "static_opt": float(static), "switching_opt": switching}
    return out
