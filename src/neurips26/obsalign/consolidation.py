"""Server consolidation (spec 5c): FedAvg and evidence-aware weights, shared or personalised classifier rows.

Groups: the encoder of each modality ``m`` (averaged over the sources that have it) and each classifier
row ``c``. Evidence-aware: ``a_s(m) ~ sum_c n_s(m,c) e(m,c) q_s(m,c)`` with ``e(m,c) = max_m' omega``,
``q_s(m,c) = exp(-||mu_s - mu||^2 / (2 delta(m)^2))``; row ``c`` is shared (weights ``n_s(c) mean_m q_s``)
only if ``max omega(., ., c) >= tau_lo``; otherwise each source keeps its own row and sources that never
saw ``c`` get a count-weighted copy (**ASSUMPTION**, as is ``n_s(c) = max_m n_s(m, c)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from neurips26.obsalign.sketch import Pooled, Sketch


@dataclass
class Weights:
    enc: np.ndarray        # (S, K): per modality, sums to 1 over the sources that have it
    rows: np.ndarray       # (S, C): per shared row, sums to 1
    shared: np.ndarray     # (C,) bool
    has_row: np.ndarray    # (S, C) bool: the source saw class c


def _normalise(w: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    out = w.astype(float).copy()
    for j in range(w.shape[1]):
        col = out[:, j]
        if col.sum() <= 0:
            col = fallback[:, j].astype(float)
        out[:, j] = col / col.sum() if col.sum() > 0 else 0.0
    return out


def fedavg_weights(modality_counts: np.ndarray, sizes: np.ndarray, n_classes: int) -> Weights:
    """Counts of samples observing each modality (S, K) and source sizes (S,): every row shared."""
    if len(sizes) == 0:
        raise ValueError("consolidation needs at least one source")
    S = len(sizes)
    rows = np.repeat(np.asarray(sizes, float)[:, None], n_classes, axis=1)
    return Weights(_normalise(modality_counts, modality_counts), _normalise(rows, rows),
                   np.ones(n_classes, bool), np.ones((S, n_classes), bool))


def agreement(sk: Sketch, p: Pooled) -> np.ndarray:
    """``q_s(m, c)`` (K, C); 0 where the source has no prototype."""
    d2 = np.sum((sk.proto - p.mu) ** 2, axis=-1)
    q = np.exp(-d2 / (2 * p.delta[:, None] ** 2))
    return np.where(sk.counts > 0, q, 0.0)


def evidence_weights(sketches: list[Sketch], p: Pooled, omega: np.ndarray, modality_counts: np.ndarray,
                     tau_lo: float = 0.1) -> Weights:
    if not sketches:
        raise ValueError("consolidation needs at least one source")
    S = len(sketches)
    K, C = omega.shape[0], omega.shape[2]
    e = omega.max(axis=1)                                   # (K, C): max over m'
    q = np.stack([agreement(s, p) for s in sketches])       # (S, K, C)
    n = np.stack([s.counts for s in sketches])              # (S, K, C)
    enc = (n * e[None] * q).sum(axis=2)
    ns_c = n.max(axis=1)                                    # (S, C)
    qbar = np.zeros((S, C))
    for i, s in enumerate(sketches):
        if s.modalities:
            qbar[i] = q[i, list(s.modalities)].mean(axis=0)
    rows = ns_c * qbar
    shared = omega.reshape(K * K, C).max(axis=0) >= tau_lo
    return Weights(_normalise(enc, modality_counts), _normalise(rows, ns_c), shared, ns_c > 0)


@torch.no_grad()
def consolidate(states: list[dict[str, torch.Tensor]], w: Weights) -> tuple[list[dict], dict]:
    """New per-source states (personalised rows kept) and the global state, from the weights."""
    if not states:
        raise ValueError("consolidation needs at least one source")
    S = len(states)
    out = [dict(s) for s in states]
    glob: dict[str, torch.Tensor] = {}
    for key in states[0]:
        if key.startswith("enc."):
            m = int(key.split(".")[1])
            wm = torch.as_tensor(w.enc[:, m], dtype=states[0][key].dtype)
            avg = sum(wm[i] * states[i][key] for i in range(S))
            glob[key] = avg
            for i in range(S):
                out[i][key] = avg.clone()
    W = torch.stack([s["cls"] for s in states])              # (S, C, d)
    wr = torch.as_tensor(w.rows, dtype=W.dtype)              # (S, C)
    shared_avg = (wr[..., None] * W).sum(dim=0)
    has = torch.as_tensor(w.has_row, dtype=W.dtype)
    cnt = has / has.sum(dim=0).clamp(min=1)
    copy_avg = (cnt[..., None] * W).sum(dim=0)
    shared = torch.as_tensor(w.shared)
    glob["cls"] = torch.where(shared[:, None], shared_avg, copy_avg)
    for i in range(S):
        own = torch.as_tensor(w.has_row[i])
        keep = ~shared & own
        out[i]["cls"] = torch.where(shared[:, None], shared_avg,
                                    torch.where(keep[:, None], W[i], copy_avg))
    return out, glob
