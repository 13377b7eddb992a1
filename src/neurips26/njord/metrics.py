"""Ensemble scores (spec §8): CRPS (fair, standard, sorted), ensemble-mean RMSE, spread, SSR, rank
histogram. The ensemble axis is 0: ``ens`` (M, ...), ``y`` (...). Work with numpy or torch."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from neurips26.harness.validation import check_scalar


def _m(ens):
    M = ens.shape[0]
    check_scalar(M, "ensemble size M", int, min=1)
    return M


def _abs(x):
    return x.abs() if torch.is_tensor(x) else np.abs(x)


def crps_fair(ens, y):
    """Fair (unbiased) CRPS per entry: ``mean_i|x_i-y| - sum_ij|x_i-x_j| / (2M(M-1))``; M=1 -> MAE (warns)."""
    M = _m(ens)
    skill = _abs(ens - y[None]).mean(0)
    if M == 1:
        warnings.warn("fair CRPS with M = 1 is the MAE", stacklevel=2)
        return skill
    pair = _abs(ens[:, None] - ens[None]).sum((0, 1))
    return skill - pair / (2 * M * (M - 1))


def crps_standard(ens, y):
    """Standard ensemble CRPS: ``mean_i|x_i-y| - sum_ij|x_i-x_j| / (2M^2)`` (properscoring's)."""
    M = _m(ens)
    return _abs(ens - y[None]).mean(0) - _abs(ens[:, None] - ens[None]).sum((0, 1)) / (2 * M * M)


def crps_sorted(ens, y, fair: bool = True):
    """O(M log M) form: ``sum_ij|x_i-x_j| = 2 sum_i (2i - M + 1) x_(i)`` over the sorted members."""
    M = _m(ens)
    if torch.is_tensor(ens):
        xs = torch.sort(ens, dim=0).values
        w = (2 * torch.arange(M, dtype=ens.dtype) - M + 1).reshape((M,) + (1,) * (ens.ndim - 1))
    else:
        xs = np.sort(ens, axis=0)
        w = (2 * np.arange(M) - M + 1).reshape((M,) + (1,) * (ens.ndim - 1))
    pair = 2 * (w * xs).sum(0)
    denom = 2 * M * (M - 1) if fair else 2 * M * M
    if M == 1:
        return _abs(ens - y[None]).mean(0)
    return _abs(ens - y[None]).mean(0) - pair / denom


def rmse_ensmean(ens, y):
    return float(np.sqrt(np.mean((np.asarray(ens).mean(0) - np.asarray(y)) ** 2)))


def spread(ens):
    """``sqrt(mean over entries of the unbiased ensemble variance)`` (0 for M = 1)."""
    ens = np.asarray(ens)
    if ens.shape[0] < 2:
        return 0.0
    d = ens - ens[:1]  # shifted by member 0: identical members give exactly zero
    M = ens.shape[0]
    var = ((d**2).sum(0) - d.sum(0) ** 2 / M) / (M - 1)
    return float(np.sqrt(max(float(np.mean(var)), 0.0)))


def ssr(ens, y, corrected: bool = True):
    """Spread-skill ratio; corrected (WeatherBench-2) multiplies by ``sqrt((M+1)/M)``."""
    M = _m(np.asarray(ens))
    r = spread(ens) / rmse_ensmean(ens, y)
    return float(r * np.sqrt((M + 1) / M)) if corrected else float(r)


def rank_histogram(ens, y) -> np.ndarray:
    """Counts of the truth's rank among the M members (M + 1 bins), ties broken at random (seeded)."""
    ens, y = np.asarray(ens), np.asarray(y)
    M = ens.shape[0]
    below = (ens < y[None]).sum(0)
    ties = (ens == y[None]).sum(0)
    rng = np.random.default_rng(0)
    rank = below + (rng.random(below.shape) * (ties + 1)).astype(int)
    return np.bincount(rank.ravel(), minlength=M + 1)


def check_lead(lead: int) -> int:
    return check_scalar(lead, "lead", int, min=1)
