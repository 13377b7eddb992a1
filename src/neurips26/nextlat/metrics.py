"""Measurement tools (spec M7): effective rank of a latent matrix, linear probes (current state and
future tokens h_t -> x_{t+k}), and the speculative-decoding bound."""

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


def token_probe_accuracy(H, ids, ks, valid=None, train_frac: float = 0.75, l2: float = 1e-4,
                         iters: int = 100) -> dict[int, float]:
    """Held-out accuracy of linear probes h_t -> x_{t+k}, one multinomial logistic regression per k.

    H [N, T, p] frozen latents of N held-out sequences, ids [N, T] their tokens, ks the offsets
    (k >= 1), valid [N, T] bool (default: all) marks usable tokens; the pair (t, t+k) is used when both
    are valid. The first ``train_frac`` of the sequences train the probes, the rest test them (no
    sequence on both sides). All k are fitted jointly by full-batch L-BFGS on
    sum_k mean_t CE(W_k z_t, x_{t+k}) + l2 * ||W||^2 (z = standardised h; disjoint weights per k, so
    this is K independent probes fitted in one batched solve). Returns {k: accuracy} (NaN without
    test pairs).
    """
    import torch

    H = check_array(H, "H", ndim=3, dtype=float)
    ids = np.asarray(ids)
    if ids.shape != H.shape[:2]:
        raise ValueError(f"ids must have shape {H.shape[:2]} (H's [N, T]), got {ids.shape}")
    ks = [int(k) for k in ks]
    if not ks or min(ks) < 1 or max(ks) >= H.shape[1]:
        raise ValueError(f"ks must be offsets in [1, T-1] = [1, {H.shape[1] - 1}], got {ks}")
    if not 0 < train_frac < 1:
        raise ValueError(f"train_frac must be in (0, 1), got {train_frac}")
    valid = np.ones(ids.shape, bool) if valid is None else np.asarray(valid, bool)
    N, T, p = H.shape
    V = int(ids.max()) + 1
    cut = max(1, min(N - 1, int(round(train_frac * N))))
    Z = torch.from_numpy(H[:, : T - min(ks)]).double()
    mu = Z[:cut].reshape(-1, p).mean(0)
    sd = Z[:cut].reshape(-1, p).std(0).clamp_min(1e-8)
    Z = (Z - mu) / sd
    # targets and masks per k, aligned on origin t = 0 .. T-1-min(ks)
    Tn = Z.shape[1]
    Y = np.zeros((len(ks), N, Tn), np.int64)
    M = np.zeros((len(ks), N, Tn), bool)
    for j, k in enumerate(ks):
        Y[j, :, : T - k] = ids[:, k:]
        M[j, :, : T - k] = valid[:, : T - k] & valid[:, k:]
    Y, M = torch.from_numpy(Y), torch.from_numpy(M)
    W = torch.zeros(len(ks), p + 1, V, dtype=torch.float64, requires_grad=True)
    X = torch.cat([Z, torch.ones_like(Z[..., :1])], -1)  # bias column
    Xtr, Ytr, Mtr = X[:cut].reshape(-1, p + 1), Y[:, :cut].reshape(len(ks), -1), M[:, :cut].reshape(len(ks), -1)
    rows = Mtr.any(0)
    Xtr, Ytr, Mtr = Xtr[rows], Ytr[:, rows], Mtr[:, rows].double()
    opt = torch.optim.LBFGS([W], max_iter=iters, line_search_fn="strong_wolfe", tolerance_grad=1e-6)

    def closure():
        opt.zero_grad()
        logits = torch.einsum("np,kpv->knv", Xtr, W)
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, V), Ytr.reshape(-1), reduction="none")
        loss = ((ce.view_as(Mtr) * Mtr).sum(1) / Mtr.sum(1).clamp_min(1)).sum() + l2 * (W[:, :p] ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        pred = torch.einsum("ntp,kpv->kntv", X[cut:], W).argmax(-1)
        hit = (pred == Y[:, cut:]) & M[:, cut:]
        n = M[:, cut:].sum((1, 2))
    return {k: float(hit[j].sum() / n[j]) if int(n[j]) else float("nan") for j, k in enumerate(ks)}
