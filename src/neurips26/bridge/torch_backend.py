"""Batched block-tridiagonal Gaussian marginals in torch (GPU scale-out of ``gaussian.py``).

The same recursion as ``gaussian.py`` (forward Schur complements ``F_k``, backward ``G_k``; slice marginal
precision ``F_k + G_k - B_k``), run for a *batch* of laws at once with ``torch.linalg.cholesky_ex``, so a
sweep over many configurations (rho_z, N, surrogate step) fills a GPU. Float64 by default; a failed
Cholesky raises ``NotPositiveDefiniteError`` naming the block (never NaN). torch is imported lazily: it is
an optional dependency of this path only.
"""

from __future__ import annotations

import numpy as np

from neurips26.bridge.errors import NotPositiveDefiniteError


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - torch is installed in the project venv
        raise ImportError("the torch path needs torch: pip install torch") from e
    return torch


def _chol(torch, M, what):
    L, info = torch.linalg.cholesky_ex(0.5 * (M + M.transpose(-1, -2)))
    if bool((info != 0).any()):
        raise NotPositiveDefiniteError(f"{what} is not positive definite (torch path)")
    return L


def batched_marginals(diag, off, eta, device: str = "cpu", dtype=None):
    """Slice means ``(B, N, D)``, covariances ``(B, N, D, D)`` and ``log det Lambda`` ``(B,)`` of a batch.

    diag: ``(B, N, D, D)`` diagonal blocks of the precisions, off: ``(B, N-1, D, D)`` the blocks
    ``Lambda[k, k+1]``, eta: ``(B, N, D)``. Returns numpy arrays.
    """
    torch = _torch()
    dtype = dtype or torch.float64
    B_, Off, e = (torch.as_tensor(np.asarray(a), dtype=dtype, device=device) for a in (diag, off, eta))
    N = B_.shape[1]
    F, f = [B_[:, 0]], [e[:, 0]]
    for k in range(1, N):
        L = _chol(torch, F[-1], f"forward block {k - 1}")
        W = torch.cholesky_solve(Off[:, k - 1], L)
        F.append(B_[:, k] - Off[:, k - 1].transpose(-1, -2) @ W)
        f.append(e[:, k] - (W.transpose(-1, -2) @ f[-1][..., None])[..., 0])
    G, g = [B_[:, -1]], [e[:, -1]]
    for k in range(N - 2, -1, -1):
        L = _chol(torch, G[0], f"backward block {k + 1}")
        W = torch.cholesky_solve(Off[:, k].transpose(-1, -2), L)
        G.insert(0, B_[:, k] - Off[:, k] @ W)
        g.insert(0, e[:, k] - (W.transpose(-1, -2) @ g[0][..., None])[..., 0])
    F, f, G, g = (torch.stack(x, 1) for x in (F, f, G, g))
    Lp = _chol(torch, F + G - B_, "slice marginal precision")
    eye = torch.eye(B_.shape[-1], dtype=dtype, device=device).expand_as(B_)
    V = torch.cholesky_solve(eye, Lp)
    u = (V @ (f + g - e)[..., None])[..., 0]
    logdet = 2 * torch.log(torch.diagonal(_chol(torch, F, "forward block"), dim1=-2, dim2=-1)).sum(dim=(1, 2))
    return u.cpu().numpy(), V.cpu().numpy(), logdet.cpu().numpy()


def law_marginals(laws, device: str = "cpu"):
    """``batched_marginals`` for a list of ``TiltedGaussian`` of equal N and D."""
    blocks = [law.blocks() for law in laws]
    diag = np.stack([b[0] for b in blocks])
    off = np.stack([b[1] for b in blocks])
    eta = np.stack([b[2] for b in blocks])
    return batched_marginals(diag, off, eta, device=device)
