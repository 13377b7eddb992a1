"""Baselines: persistence, climatology (deterministic and probabilistic)."""

from __future__ import annotations

import numpy as np

from neurips26.harness.validation import check_scalar


def persistence(x0: np.ndarray, leads: int) -> np.ndarray:
    """``X^{t+k} = X^t``: (B, N, C) -> (B, leads, N, C)."""
    leads = check_scalar(leads, "leads", int, min=1)
    return np.repeat(x0[:, None], leads, axis=1)


class Climatology:
    """Per-cell training mean; with >= 365 training days also the first annual harmonic (least squares).
    Ensemble: the mean plus the residual fields of M random training dates (< 1 year of data)."""

    def __init__(self, train: np.ndarray, days: np.ndarray):
        """``train`` (traj, T, N, C), ``days`` (T,)."""
        self.mean = train.mean((0, 1))
        self.harmonic = None
        if np.ptp(days) >= 365:
            w = 2 * np.pi * days / 365.0
            A = np.stack([np.ones_like(w), np.sin(w), np.cos(w)], 1)
            y = train.mean(0).reshape(len(days), -1)
            self.harmonic = np.linalg.lstsq(A, y, rcond=None)[0].reshape(3, *train.shape[2:])
        self.residuals = (train - self.predict(days)[None]).reshape(-1, *train.shape[2:])

    def predict(self, days) -> np.ndarray:
        days = np.atleast_1d(np.asarray(days, float))
        if self.harmonic is None:
            return np.broadcast_to(self.mean, days.shape + self.mean.shape).copy()
        w = 2 * np.pi * days / 365.0
        return (
            self.harmonic[0][None]
            + np.sin(w)[:, None, None] * self.harmonic[1][None]
            + np.cos(w)[:, None, None] * self.harmonic[2][None]
        )

    def ensemble(self, days, members: int, seed: int = 0) -> np.ndarray:
        """(members, len(days), N, C)."""
        members = check_scalar(members, "members", int, min=1)
        rng = np.random.default_rng(seed)
        pick = rng.integers(0, len(self.residuals), size=(members, len(np.atleast_1d(days))))
        return self.predict(days)[None] + self.residuals[pick]
