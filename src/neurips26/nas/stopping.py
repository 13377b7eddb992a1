"""Empirical model, the stopping statistic and its threshold (shared by every algorithm).

Stopping rule (checked every K_s steps once every pair is visited):
    Z_t = t / U(M_t, N(t)/t)          (empirical allocation N/t, not omega*)
    beta(N, delta) = log(1/delta) + (S-1) sum_sa log(e (1 + N_sa/(S-1)))     (Jonsson et al. 2020)
    stop when Z_t >= beta(N(t), delta); answer pi_hat = pi*(M_t).
Since U >= T (the GLR-type quantity), Z_t lower-bounds the GLR statistic: the rule is conservative and
delta-PAC. Ties in M_t (Delta_min < 1e-10) give U = inf, Z = 0 (normal early on; not an error).
"""

from __future__ import annotations

import numpy as np

from neurips26.harness.validation import check_scalar
from neurips26.nas.bound import BoundTerms, bound_terms
from neurips26.nas.mdp import TIE_TOL, solve_mdp


def check_delta(delta) -> float:
    return check_scalar(delta, "delta", float, min=0.0, max=1.0, inclusive="neither")


def threshold(N: np.ndarray, delta: float) -> float:
    """beta(N, delta) = log(1/delta) + (S-1) sum_{s,a} log(e (1 + N_sa/(S-1))); N has shape (S, A)."""
    delta = check_delta(delta)
    N = np.asarray(N, dtype=float)
    if N.ndim != 2 or N.shape[0] < 2:
        raise ValueError(f"N must be an (S, A) count array with S >= 2, got shape {N.shape}")
    if np.any(N < 0):
        raise ValueError("N (counts) must be non-negative")
    S = N.shape[0]
    return float(np.log(1 / delta) + (S - 1) * np.sum(1.0 + np.log1p(N / (S - 1))))


class EmpiricalModel:
    """Counts N_sas', N_sa, N_s and observed deterministic rewards; p_hat = N_sas'/N_sa (uniform if 0),
    r_hat = observed reward on visited pairs, 0 otherwise (ASSUMPTION), or the true r when known."""

    def __init__(self, S: int, A: int, gamma: float, rewards: np.ndarray | None = None,
                 bound: str = "primary"):
        self.S, self.A, self.gamma, self.bound = S, A, gamma, bound
        self.N_sas = np.zeros((S, A, S), dtype=np.int64)
        self.N_sa = np.zeros((S, A), dtype=np.int64)
        self.N_s = np.zeros(S, dtype=np.int64)          # visits of s as the current state
        self.r_hat = np.zeros((S, A)) if rewards is None else np.asarray(rewards, float).copy()
        self.r_seen = np.zeros((S, A), dtype=bool) if rewards is None else np.ones((S, A), bool)
        self.t = 0
        self.n_unvisited = S * A
        self._cache_t = -1
        self._cache: BoundTerms | None = None
        self._pi_prev: np.ndarray | None = None

    def update(self, s: int, a: int, r: float, s2: int) -> None:
        if self.N_sa[s, a] == 0:
            self.n_unvisited -= 1
        self.N_sas[s, a, s2] += 1
        self.N_sa[s, a] += 1
        self.N_s[s] += 1
        if not self.r_seen[s, a]:
            self.r_hat[s, a] = r
            self.r_seen[s, a] = True
        self.t += 1

    @property
    def all_visited(self) -> bool:
        return self.n_unvisited == 0

    def p_hat(self) -> np.ndarray:
        n = self.N_sa[:, :, None]
        return np.where(n > 0, self.N_sas / np.maximum(n, 1), 1.0 / self.S)

    def terms(self) -> BoundTerms:
        """Bound coefficients of M_t (cached per t; policy iteration warm-started at the last pi*)."""
        if self._cache_t != self.t:
            P = self.p_hat()
            sol = solve_mdp(P, self.r_hat, self.gamma, self._pi_prev)
            self._pi_prev = sol.pi
            self._cache = bound_terms(P, self.r_hat, self.gamma, self.bound, sol)
            self._cache_t = self.t
        return self._cache


def stopping_statistic(terms: BoundTerms, N_sa: np.ndarray, t: int) -> tuple[float, float]:
    """(Z_t, U(M_t, N/t)); Z = 0 and U = inf when M_t has tied optimal actions or U is degenerate."""
    if terms.sol.delta_min < TIE_TOL:
        return 0.0, float("inf")
    u = terms.value(N_sa / t)
    if not np.isfinite(u) or u <= 0:
        return 0.0, float(u)
    return t / u, u
