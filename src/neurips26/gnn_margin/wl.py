"""The 1-WL colour-count invariant f_WL (spec §3) and its sensitivity bound (spec §4).

Colour refinement, unlabelled start::

    c^0(u) = 0,    c^t(u) = id(t, c^{t-1}(u), {{ c^{t-1}(v) : v in N(u) }})

where ``id`` is an injective vocabulary (a dict) grown over every graph this object has seen, so
colours are comparable across calls; an unseen signature gets the next coordinate.
``f_WL(G) = concat_{t=0..T}`` colour-count histograms; since every colour has one global coordinate
(new ones are appended), an older embedding is a prefix of a newer one and is zero-padded.
Distance: l1 (``WLHistogram.norm = "l1"``).

Vectorised: per round, every node's sorted neighbour colours for the whole batch at once, unique
signature rows with ``np.unique`` (rows viewed as bytes), and a dict lookup only for the distinct ones.

Bound (ASSUMPTION: crude but sound): one flip changes round-t colours only within distance t - 1 of
its endpoints, so ``||f_WL(G (+) F) - f_WL(G)||_1 <= r * sum_{t=1}^T 4 * sum_{s=0}^{t-1} (d_max + r)^s``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from neurips26.gnn_margin.graphs import check_adjacency
from neurips26.harness.validation import check_scalar


class WLHistogram(nn.Module):
    """f_WL with ``iterations`` = T refinement rounds; ``forward(A)`` -> ``B x V`` float64 counts."""

    arch = "wl"
    norm = "l1"

    def __init__(self, iterations: int = 3):
        super().__init__()
        self.iterations = check_scalar(iterations, "iterations", int, min=1)
        self.vocab: dict[tuple, int] = {(0,): 0}  # the round-0 colour

    @property
    def size(self) -> int:
        return len(self.vocab)

    def colours(self, A, validate: bool = True) -> list[np.ndarray]:
        """``[c^0, ..., c^T]``, each ``B x n`` int64 global colour ids."""
        if torch.is_tensor(A):
            A = A.detach().cpu().numpy()
        A = np.asarray(A)
        if A.ndim == 2:
            A = A[None]
        if validate:
            A = check_adjacency(A, "A", batch=True)
        A = A.astype(bool)
        B, n, _ = A.shape
        c = np.zeros((B, n), dtype=np.int64)
        out = [c]
        for t in range(1, self.iterations + 1):
            # signature of u: (c(u), sorted neighbour colours, -1 padded) -- the multiset, injectively
            nb = np.where(A, c[:, None, :], -1)
            nb.sort(-1)
            sig = np.ascontiguousarray(np.concatenate([c[..., None], nb], -1).reshape(B * n, n + 1))
            rows, inv = np.unique(sig.view(np.dtype((np.void, 8 * (n + 1)))).ravel(), return_inverse=True)
            rows = rows.view(np.int64).reshape(-1, n + 1)
            ids = np.empty(rows.shape[0], dtype=np.int64)
            for k, row in enumerate(rows.tolist()):
                key = (t, row[0], tuple(v for v in row[1:] if v >= 0))
                ids[k] = self.vocab.setdefault(key, len(self.vocab))
            c = ids[inv.reshape(-1)].reshape(B, n)
            out.append(c)
        return out

    def forward(self, A, validate: bool = True) -> torch.Tensor:
        cols = self.colours(A, validate)
        B = cols[0].shape[0]
        V = self.size
        flat = np.concatenate([c + (np.arange(B)[:, None] * V) for c in cols], 1).ravel()
        hist = np.bincount(flat, minlength=B * V).reshape(B, V)
        return torch.from_numpy(hist.astype(np.float64))

    def graph_bound(self, A, r: int, A_perturbed=None) -> float:
        """``beta_WL(G, r)`` in l1 (see the module docstring)."""
        A = check_adjacency(A)
        r = check_scalar(r, "r", int, min=0)
        d = int(A.sum(0).max()) + r
        return float(r * sum(4 * sum(d**s for s in range(t)) for t in range(1, self.iterations + 1)))
