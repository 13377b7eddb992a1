"""Capacity of the gaps (spec §4): spherical-cap fractions, packing upper / greedy lower bounds,
the containment fraction a, and the Gong-Boddeti-Jain-style ellipsoid-ratio estimator."""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import betainc

from neurips26.harness.validation import check_scalar


def cap_fraction(k: int, theta: float) -> float:
    """F_k(theta): the fraction of S^{k-1} within angle theta of a point:
    ``0.5 I_{sin^2 theta}((k-1)/2, 1/2)`` for theta <= pi/2, ``1 - F_k(pi - theta)`` beyond."""
    k = check_scalar(k, "k", int, min=2)
    theta = check_scalar(theta, "theta", float, min=0, max=math.pi)
    if theta > math.pi / 2:
        return 1.0 - cap_fraction(k, math.pi - theta)
    return float(0.5 * betainc((k - 1) / 2, 0.5, math.sin(theta) ** 2))


def packing_bounds(k: int, n_real: int, tau_c: float, theta_sep: float, a: float = 1.0) -> dict:
    """Upper ``a / F_k(theta_sep/2)`` and greedy lower ``(a - N F_k(arccos tau_c)) / F_k(theta_sep)``."""
    a = check_scalar(a, "a", float, min=0, max=1)
    n_real = check_scalar(n_real, "n_real", int, min=0)
    upper = a / cap_fraction(k, theta_sep / 2)
    lower = (a - n_real * cap_fraction(k, math.acos(tau_c))) / cap_fraction(k, theta_sep)
    return {"upper": upper, "lower": max(lower, 0.0)}


def containment_fraction(sub, n: int = 100_000, seed: int = 0) -> float:
    """Monte Carlo fraction of the unit sphere of S_k inside the containment region (the ``a``)."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, sub.k, generator=g)
    v = z @ sub.P.T
    v = v / v.norm(dim=1, keepdim=True)
    return float(sub.inside(v).float().mean())


def ellipsoid_ratio(pop_eigvals, class_eigvals, k: int) -> float:
    """``C = prod_i sqrt(l_pop,i / l_class,i)`` over the top k dims (returned as log10 C is safer:
    see ``log10_ellipsoid_ratio``)."""
    return float(10 ** log10_ellipsoid_ratio(pop_eigvals, class_eigvals, k))


def log10_ellipsoid_ratio(pop_eigvals, class_eigvals, k: int) -> float:
    p = np.sort(np.asarray(pop_eigvals, float))[::-1][:k]
    c = np.sort(np.asarray(class_eigvals, float))[::-1][:k]
    if (c <= 0).any() or (p <= 0).any():
        raise ValueError("eigenvalues must be positive over the top k dims")
    return float(0.5 * np.log10(p / c).sum())
