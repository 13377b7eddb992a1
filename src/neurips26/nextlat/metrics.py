"""Measurement tools (spec M7): effective rank of a latent matrix and linear probes."""

from __future__ import annotations

import numpy as np

from neurips26.harness.validation import check_array

SV_FLOOR = 1e-12


def effective_rank(H, center: bool = False) -> float:
    """exp(entropy of sigma_i / sum sigma) over singular values > 1e-12 (Roy & Vetterli 2007).

    ``center=True`` subtracts the column means first (the verdicts use centred held-out latents).
    """
    H = check_array(H, "H", ndim=2, dtype=float)
    if center:
        H = H - H.mean(axis=0, keepdims=True)
    s = np.linalg.svd(H, compute_uv=False)
    s = s[s > SV_FLOOR]
    if s.size == 0:
        return 0.0
    w = s / s.sum()
    return float(np.exp(-(w * np.log(w)).sum()))


def probe_accuracy(X_train, y_train, X_test, y_test, max_iter: int = 300, C: float = 1.0) -> float:
    """Held-out accuracy of a multinomial logistic-regression probe (frozen features -> labels)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    X_train = check_array(X_train, "X_train", ndim=2, dtype=float)
    X_test = check_array(X_test, "X_test", ndim=2, dtype=float)
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    if len(y_train) != len(X_train) or len(y_test) != len(X_test):
        raise ValueError("probe labels must have one entry per feature row")
    sc = StandardScaler().fit(X_train)
    clf = LogisticRegression(max_iter=max_iter, C=C).fit(sc.transform(X_train), y_train)
    return float((clf.predict(sc.transform(X_test)) == y_test).mean())


def speedup_bound(accepted_beyond_first: float, gamma: int, cost_ratio: float) -> float:
    """(2 + E[a]) / (2 + gamma * c_psi / c_trunk): the official scheme's speed-up per round (M5)."""
    return (2.0 + accepted_beyond_first) / (2.0 + gamma * cost_ratio)
