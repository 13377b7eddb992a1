"""Node features on batches of dense adjacency (spec §3), and their sensitivity delta_0 (spec §4).

- ``const``: all ones, one column (structure-free: delta_0 = 0; MPNNs are then 1-WL-bounded).
- ``rwse``: random-walk structural encoding ``diag(P^k)``, k = 1..K, ``P = D^{-1} A`` with zero rows for
  isolated nodes (deterministic, permutation equivariant). Entries lie in [0, 1], so a perturbation
  moves a node's row by at most ``delta_0 = sqrt(K)``.
- ``degree_onehot``: one-hot of the degree over 0..n_max-1 (``delta_0 = sqrt(2)``: two entries move).
"""

from __future__ import annotations

import math

import torch

FEATURES = ("const", "rwse", "degree_onehot")


def feature_dim(kind: str, rwse_steps: int = 8, n_max: int = 64) -> int:
    return {"const": 1, "rwse": rwse_steps, "degree_onehot": n_max}[kind]


def node_features(A: torch.Tensor, kind: str, rwse_steps: int = 8, n_max: int = 64) -> torch.Tensor:
    """Features ``B x n x k`` of the batch ``A`` (``B x n x n``, float)."""
    B, n, _ = A.shape
    if kind == "const":
        return torch.ones(B, n, 1, dtype=A.dtype, device=A.device)
    if kind == "rwse":
        deg = A.sum(-1, keepdim=True)
        P = A / deg.clamp(min=1.0)  # isolated nodes: a zero row
        out, M = [], P
        for _ in range(rwse_steps):
            out.append(torch.diagonal(M, dim1=-2, dim2=-1))
            M = M @ P
        return torch.stack(out, -1)
    deg = A.sum(-1).round().long()
    if int(deg.max()) >= n_max:
        raise ValueError(
            f"degree_onehot holds degrees 0..{n_max - 1}, got degree {int(deg.max())}; raise n_max"
        )
    return torch.nn.functional.one_hot(deg, n_max).to(A.dtype)


def feature_sensitivity(kind: str, rwse_steps: int = 8) -> float:
    """``delta_0``: the most a node's feature row can move under any perturbation (0 for ``const``)."""
    return {"const": 0.0, "rwse": math.sqrt(rwse_steps), "degree_onehot": math.sqrt(2.0)}[kind]
