"""The reproduction's plots (matplotlib, Agg): gamma / L1_hat vs r_emp per model, alignment probability
vs p, certified accuracy vs radius (both certificates and the attack upper curve). Each takes the
metrics dict of its experiment and a run context with ``save_plot``."""

from __future__ import annotations

import numpy as np


def plot_x2(x2: dict, ctx) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    rng = np.random.default_rng(0)
    for book in x2["codebooks"].values():
        for key, row in book["models"].items():
            jitter = rng.uniform(-0.15, 0.15, len(row["r_emp"]))
            axes[0].scatter(row["normalised"], np.asarray(row["r_emp"]) + jitter, s=10, label=key, alpha=0.6)
    axes[0].set_xlabel("gamma / L1_hat")
    axes[0].set_ylabel("r_emp (jittered; -1 = not aligned clean)")
    axes[0].set_title("normalised margin vs empirical radius")
    axes[0].legend(fontsize=5, ncol=2)
    book = next(iter(x2["codebooks"].values()))
    for key, row in book["models"].items():
        ps = sorted(row["alpha"], key=float)
        axes[1].plot(
            [float(p) for p in ps], [row["alpha"][p]["alpha_mean"] for p in ps], marker="o", label=key
        )
    axes[1].set_xlabel("p")
    axes[1].set_ylabel("alignment probability (mean)")
    axes[1].set_title("alignment probability vs p (first codebook)")
    axes[1].legend(fontsize=5, ncol=2)
    ctx.save_plot(fig, "x2_margin_vs_radius.png")


def plot_x3(x3: dict, ctx) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    styles = {"lipschitz": "-", "smoothing": "--", "attack": ":"}
    for obj, row in x3["objectives"].items():
        for kind, ls in styles.items():
            ax.plot(row["curves"]["radius"], row["curves"][kind], ls, marker="o", label=f"{obj} {kind}")
    ax.set_xlabel("radius r (flips)")
    ax.set_ylabel("certified / robust accuracy")
    ax.set_title("karate: certificates and attack upper curve")
    ax.legend(fontsize=6)
    ctx.save_plot(fig, "x3_certified_accuracy.png")
