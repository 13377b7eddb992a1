"""Baselines B1-B5 (spec "Baselines"), all on the same gallery and thresholds as ``GapAllocator``."""

from __future__ import annotations

import torch

from neurips26.bip.gallery import Subspace, maxcos
from neurips26.harness.validation import check_scalar


def _n(M: int) -> int:
    return check_scalar(M, "M", int, min=1)


def b1_uniform_sphere(M: int, D: int, seed: int = 0) -> torch.Tensor:
    """B1: uniform on the full sphere S^{D-1} (few collisions, not realizable)."""
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(_n(M), check_scalar(D, "D", int, min=2), generator=g)
    return v / v.norm(dim=1, keepdim=True)


def b2_in_manifold(M: int, sub: Subspace, seed: int = 0) -> torch.Tensor:
    """B2: random in-manifold sampling (Gaussian in PCA space), no repulsion."""
    return sub.sample(_n(M), torch.Generator().manual_seed(seed))


def b3_rejection(M: int, reals: torch.Tensor, sub: Subspace, tau_c: float, batch: int = 10_000,
                 max_factor: int = 20, seed: int = 0) -> tuple[torch.Tensor, list[float]]:
    """B3: sequential rejection in-manifold: proposals in batches, greedy in-batch then vs the kept
    set and the reals; stop at M kept or ``max_factor * M`` proposals.
    Returns (kept, acceptance per batch)."""
    M = _n(M)
    g = torch.Generator().manual_seed(seed)
    kept = torch.empty(0, reals.shape[1])
    curve: list[float] = []
    proposed = 0
    while kept.shape[0] < M and proposed < max_factor * M:
        x = sub.sample(batch, g)
        proposed += batch
        ok = maxcos(x, reals) < tau_c
        if kept.shape[0]:
            ok &= maxcos(x, kept) < tau_c
        x = x[ok]
        keep = torch.zeros(x.shape[0], dtype=torch.bool)
        if x.shape[0]:                       # greedy in-batch: x_i kept if below tau_c to kept x_j, j < i
            s = x @ x.T
            conf = (s >= tau_c).triu(1)
            for i in range(x.shape[0]):
                keep[i] = not bool((conf[:i, i] & keep[:i]).any())
        curve.append(float(keep.sum()) / batch)
        kept = torch.cat([kept, x[keep]])[:M]
    return kept, curve


def b4_hyperface(M: int, reals: torch.Tensor, sub: Subspace, steps: int = 100, lr: float = 1e-2,
                 alpha: float = 1.0, seed: int = 0) -> torch.Tensor:
    """B4: HyperFace-style packing (as recalled): minimise mean_i max_{j!=i} <x_i,x_j> +
    alpha mean_i min_k ||x_i - g_k|| with Adam and renormalisation, g_k = real centers.

    The (sub)gradient is written out instead of back-propagated through the M x M score matrix:
    with j(i) = argmax_{j!=i} <x_i,x_j> and k(i) = argmin_k ||x_i - g_k||,
    M dL/dx_i = x_{j(i)} + sum_{l: j(l)=i} x_l + alpha (x_i - g_{k(i)}) / ||x_i - g_{k(i)}||,
    the gradient autograd gives (same argmax on ties), at one matmul per step and no M x M backward.
    """
    M = _n(M)
    x = sub.sample(M, torch.Generator().manual_seed(seed)).clone().requires_grad_(True)
    opt = torch.optim.Adam([x], lr=check_scalar(lr, "lr", float, min=0, inclusive="neither"))
    alpha = check_scalar(alpha, "alpha", float, min=0)
    idx = torch.arange(M)
    for _ in range(check_scalar(steps, "steps", int, min=0)):
        with torch.no_grad():
            xd = x.detach()
            s = xd @ xd.T
            s[idx, idx] = -2.0
            j = s.max(dim=1).indices
            del s
            k = torch.cdist(xd, reals).min(dim=1).indices
            diff = xd - reals[k]
            g = xd[j].index_add_(0, j, xd)
            g += alpha * diff / diff.norm(dim=1, keepdim=True).clamp_min(1e-12)
            x.grad = g / M
        opt.step()
        with torch.no_grad():
            x /= x.norm(dim=1, keepdim=True)
    return x.detach()


def b5_orthogonal(M: int, sub: Subspace, seed: int = 0) -> torch.Tensor:
    """B5: orthogonal-complement placement, v in range(I - P P^T) (the strawman)."""
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(_n(M), sub.P.shape[0], generator=g)
    v = v - (v @ sub.P) @ sub.P.T
    return v / v.norm(dim=1, keepdim=True)
