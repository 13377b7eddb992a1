"""The reproduction's plots (matplotlib, first seed of a run)."""

from __future__ import annotations

import numpy as np

from neurips26.delayed_hits.catalog import OURS


def plots(cfg, ctx, m: dict) -> None:
    """The four PNGs of one seed's run (regret vs T, latency vs Z, latency relative to MAD,
    switching regret vs B)."""
    import matplotlib.pyplot as plt

    # regret vs T (log-log) on W1 at the middle Z, W6a, W6b
    panels = [("W1", cfg.w1.Z[len(cfg.w1.Z) // 2]), ("W6a", 1), ("W6b", cfg.w6.b_Z)]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4))
    for ax, (wl, z) in zip(np.atleast_1d(axes), panels):
        pan = f"{wl}, Z={z}"
        for p, v in m["regret"][wl][str(z)].items():
            ts = sorted(int(t) for t in v["curve"])
            ys = [max(v["curve"][t], 1) for t in ts]
            ax.loglog(ts, ys, "o-", label=f"{p} (slope {v['real']['slope']:.2f})")
        from matplotlib.ticker import NullFormatter

        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"static regret vs T, {pan} (seed {ctx.seed})")
        ax.set_xlabel("T (slots)")
        ax.set_ylabel("regret (latency units, clipped at 1)")
        ax.legend(fontsize=7)
    ctx.save_plot(fig, "regret_vs_T.png")

    # mean latency vs Z per policy (W1 and W8)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, tag, Zs in ((axes[0], "W1", cfg.w1.Z), (axes[1], "W8", cfg.w8.Z)):
        groups_z = [set(m["latency"].get(tag, {}).get(str(Z), {})) for Z in Zs]
        pols = sorted(set.intersection(*groups_z)) if groups_z else []
        for p in pols:
            ys = [m["latency"][tag][str(Z)][p]["mean_latency"] / Z for Z in Zs]
            ax.plot(Zs, ys, "o-", label=p, lw=2.5 if p in OURS else 1)
        ax.set_xscale("log")
        ax.set_xlabel("Z (slots)")
        ax.set_ylabel("mean latency / Z")
        ax.set_title(f"mean latency vs Z, {tag}")
        ax.legend(fontsize=6, ncol=2)
    ctx.save_plot(fig, "latency_vs_Z.png")

    # latency relative to LRU-MAD and LHD-MAD
    rel = m["relative_to_mad"]
    groups = [(wl, z) for wl in rel for z in rel[wl] if z != "1"]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(groups)), 4))
    pols = sorted({p for wl, z in groups for p in rel[wl][z]})
    w = 0.8 / max(len(pols), 1)
    for k, p in enumerate(pols):
        ys = [rel[wl][z].get(p, {}).get("vs_LRU-MAD", np.nan) for wl, z in groups]
        ax.bar(np.arange(len(groups)) + k * w, ys, w, label=p)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(groups)) + 0.4)
    ax.set_xticklabels([f"{wl}, Z={z}" for wl, z in groups], fontsize=7)
    ax.set_ylabel("mean latency / LRU-MAD's")
    ax.legend(fontsize=6, ncol=3)
    ctx.save_plot(fig, "latency_relative_to_mad.png")

    # switching regret vs B (comparator budget) on W3 at the largest T
    fig, ax = plt.subplots(figsize=(6, 4))
    for p, d in m["w3_switching_vs_B"].items():
        Bs = sorted(d)
        ax.plot(Bs, [d[B] for B in Bs], "o-", label=p)
    ax.set_xlabel("comparator switches B")
    ax.set_ylabel("switching regret (latency units)")
    ax.set_title(f"W3 (true B={cfg.w3.B}), T={max(cfg.w3.T)}")
    ax.legend(fontsize=8)
    ctx.save_plot(fig, "switching_regret_vs_B.png")


