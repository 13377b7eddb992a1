"""Baselines: persistence, climatology (deterministic and probabilistic)."""

from __future__ import annotations

import copy

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


class RidgeIncrement:
    """Linear reference (not in the paper; a diagnostic of how much skill over persistence the
    testbed allows): the one-step increment ``X^t - X^{t-1}`` regressed on the whole field
    ``[X^{t-1}, X^{t-1} - X^{t-2}, sin season]`` by ridge regression (penalty ``lam``), rolled out
    autoregressively. Fitted by SVD on the training windows."""

    def __init__(self, x: np.ndarray, days: np.ndarray, lam: float):
        """``x`` (K, T, N, C) training states, ``days`` (T,)."""
        self.lam = check_scalar(lam, "lam", float, min=0.0, inclusive="neither")
        K, T = x.shape[:2]
        a = x[:, : T - 2].reshape(-1, *x.shape[2:])
        b = x[:, 1 : T - 1].reshape(-1, *x.shape[2:])
        c = x[:, 2:].reshape(-1, *x.shape[2:])
        A = self._features(a, b, np.tile(days[2:], K))
        self.mu, self.ym = A.mean(0), (c - b).reshape(len(c), -1).mean(0)
        U, s, Vt = np.linalg.svd(A - self.mu, full_matrices=False)
        self._svd = (s, Vt, U.T @ ((c - b).reshape(len(c), -1) - self.ym))
        self._solve()

    def _solve(self) -> None:
        s, Vt, UtY = self._svd
        self.W = Vt.T @ ((s / (s**2 + self.lam))[:, None] * UtY)

    def with_lam(self, lam: float) -> RidgeIncrement:
        """The same fit at another penalty (reuses the SVD: one decomposition for a penalty path)."""
        other = copy.copy(self)
        other.lam = check_scalar(lam, "lam", float, min=0.0, inclusive="neither")
        other._solve()
        return other

    @staticmethod
    def _features(a, b, days):
        B = len(b)
        return np.concatenate(
            [b.reshape(B, -1), (b - a).reshape(B, -1), np.sin(2 * np.pi * np.asarray(days) / 365.0)[:, None]], 1
        )

    def forecast(self, x_prev2: np.ndarray, x_prev1: np.ndarray, days: np.ndarray) -> np.ndarray:
        """(B, N, C) x 2 and ``days`` (B, leads) of the forecast days -> (B, leads, N, C)."""
        a, b, out = x_prev2.astype(float), x_prev1.astype(float), []
        for i in range(days.shape[1]):
            c = b + ((self._features(a, b, days[:, i]) - self.mu) @ self.W + self.ym).reshape(b.shape)
            out.append(c)
            a, b = b, c
        return np.stack(out, 1)
