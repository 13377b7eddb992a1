"""Exact predictions: the sweeping law, the sandwich, elimination, the alternation rate, regret bounds,
susceptibility and the price of best response (spec §3, §5).

Fixed optimizer x: c = A^T x, v_x = min_j c_j, gaps Delta = c - v_x, O = argmin set (k = |O|).
Then L_{t-1} = (t-1) c and, by shift invariance, y_t = grad Phi(-eta (t-1) Delta), so

    S_T = sum_{t=1}^T <Delta, y_t> = sum_{s=0}^{T-1} f(s),      f(s) = <Delta, grad Phi(-eta s Delta)>,

with f non-increasing (convexity of Phi). The continuous-time surplus is

    S_cont(T) = int_0^T f = (Phi(0) - Phi(-eta T Delta)) / eta = (-h(u_m) - G(T)) / eta,

and the **sandwich** 0 <= S_T - S_cont(T) <= f(0) = mean(Delta) holds exactly. S_cont increases to the
**sweeping limit** (h(u_O) - h(u_m)) / eta = sigma_sweep / eta (log-barrier: +inf).

Alternation x_t = x* + (-1)^{t+1} delta adds rho = (eta / 2) g^T H_inf g per round (g = A^T delta),
H_inf = P_O / phi''(1/k) with P_O the projector onto {z : supp z in O, 1^T z = 0}.
"""

from __future__ import annotations

import math

import numpy as np

from neurips26.ftrl_surplus.regularizers import Regularizer, regularizer
from neurips26.harness.validation import check_array, check_scalar


def check_eta(eta, name: str = "eta") -> float:
    return check_scalar(eta, name, float, min=0.0, inclusive="neither")


def check_horizon(T, name: str = "T") -> int:
    return check_scalar(T, name, int, min=1)


def check_gaps(gaps, name: str = "gaps") -> np.ndarray:
    g = check_array(gaps, name, ndim=1, dtype=float, min_size=1)
    if np.any(g < -1e-12):
        raise ValueError(f"{name} must be >= 0 (gaps c_j - min c), got min {g.min():.3g}")
    return np.maximum(g, 0.0)


# ---------------------------------------------------------------------------- sweeping
def fixed_trajectory(reg, gaps, eta: float, T: int, start: int = 0) -> np.ndarray:
    """y_t = grad Phi(-eta (t-1) Delta) for t = start+1 .. T as one batched map, shape (T - start, m)."""
    reg = regularizer(reg)
    gaps, eta, T = check_gaps(gaps), check_eta(eta), check_horizon(T)
    s = np.arange(start, T, dtype=np.float64)
    return reg.map_unchecked(-eta * s[:, None] * gaps[None, :])


def fixed_surplus_curve(reg, gaps, eta: float, T: int, chunk: int = 50_000) -> np.ndarray:
    """S_t, t = 1..T, of a fixed max-min optimizer (exact discrete sum of <Delta, y_t>), shape (T,)."""
    gaps, T = check_gaps(gaps), check_horizon(T)
    out = np.empty(T)
    total = 0.0
    for a in range(0, T, chunk):
        b = min(T, a + chunk)
        s = fixed_trajectory(reg, gaps, eta, b, start=a) @ gaps
        out[a:b] = total + np.cumsum(s)
        total = out[b - 1]
    return out


def per_round_surplus(reg, gaps, eta: float, s) -> np.ndarray:
    """f(s) = <Delta, grad Phi(-eta s Delta)> (non-increasing in s)."""
    reg, gaps, eta = regularizer(reg), check_gaps(gaps), check_eta(eta)
    s = np.atleast_1d(np.asarray(s, dtype=np.float64))
    return reg.map_unchecked(-eta * s[:, None] * gaps[None, :]) @ gaps


def continuous_surplus(reg, gaps, eta: float, T) -> np.ndarray | float:
    """S_cont(T) = (Phi(0) - Phi(-eta T Delta)) / eta (scalar T -> float, array -> array)."""
    reg, gaps, eta = regularizer(reg), check_gaps(gaps), check_eta(eta)
    Ts = np.atleast_1d(np.asarray(T, dtype=np.float64))
    if np.any(Ts < 0):
        raise ValueError("T must be >= 0")
    theta = -eta * Ts[:, None] * gaps[None, :]
    phi0 = float(np.atleast_1d(reg.potential(np.zeros((1, gaps.size))))[0])
    out = (phi0 - np.atleast_1d(reg.potential(theta))) / eta
    return float(out[0]) if np.ndim(T) == 0 else out


def sandwich(reg, gaps, eta: float, T: int) -> tuple[float, float]:
    """[S_cont(T), S_cont(T) + f(0)]: the exact band of the discrete S_T of a fixed max-min optimizer."""
    gaps = check_gaps(gaps)
    lo = continuous_surplus(reg, gaps, eta, check_horizon(T))
    return lo, lo + float(gaps.mean())


def sweeping_limit(reg, m: int, k: int, eta: float) -> float:
    """lim_T S_cont(T) = (h(u_O) - h(u_m)) / eta; +inf with a warning for log-barrier (k < m).

    entropic ln(m/k)/eta; Euclidean (1/k - 1/m)/(2 eta); Tsallis-q (m^{1-q} - k^{1-q})/((1-q) eta).
    """
    return regularizer(reg).sweeping_susceptibility(m, k) / check_eta(eta)


def elimination_round(reg, k: int, delta_min: float, eta: float) -> float:
    """First round t (1-based) with y_{t,j} = 0 for every suboptimal j: ceil(thr / (eta Delta_min)) + 1.

    thr = phi'(1/k) - phi'(0) (Euclidean 1/k: the spec's ceil(1/(eta k Delta_min)) + 1; Tsallis-1.5
    3/sqrt(k)); +inf for steep regularizers, which keep every y_{t,j} > 0.
    """
    reg = regularizer(reg)
    delta_min = check_scalar(delta_min, "delta_min", float, min=0.0, inclusive="neither")
    thr = reg.elimination_threshold(k)
    if math.isinf(thr):
        return math.inf
    return float(math.ceil(thr / (check_eta(eta) * delta_min) - 1e-12) + 1)


def euclidean_elimination_bound(eta: float, k: int, delta_min: float) -> int:
    """ceil(1 / (eta k Delta_min)) + 1 (spec §3)."""
    k = check_scalar(k, "k", int, min=1)
    return int(math.ceil(1.0 / (check_eta(eta) * k * delta_min)) + 1)


# ---------------------------------------------------------------------------- alternation
def optimal_projector(optimal) -> np.ndarray:
    """P_O: the orthogonal projector onto {z : supp(z) in O, 1^T z = 0}, shape (m, m)."""
    o = check_array(optimal, "optimal", ndim=1, dtype=bool, min_size=1).astype(np.float64)
    k = o.sum()
    if k < 1:
        raise ValueError("optimal must mark at least one action")
    return np.diag(o) - np.outer(o, o) / k


def h_inf(reg, optimal) -> np.ndarray:
    """Hessian of Phi at y = u_O: P_O / phi''(1/k) (entropic diag(u_O) - u_O u_O^T; Euclidean P_O)."""
    o = np.asarray(optimal, dtype=bool)
    return optimal_projector(o) * regularizer(reg).hessian_scale(int(o.sum()))


def alternation_susceptibility(reg, A, delta, optimal) -> float:
    """sigma_alt = (1/2) g^T H_inf g, g = A^T delta: surplus per round per unit eta."""
    A = check_array(A, "A", ndim=2, dtype=float)
    d = check_array(delta, "delta", ndim=1, dtype=float, shape=(A.shape[0],))
    g = A.T @ d
    return 0.5 * float(g @ h_inf(reg, optimal) @ g)


def alternation_rate(reg, A, delta, optimal, eta: float) -> float:
    """rho = (eta / 2) g^T H_inf g: the long-run surplus per round of x* +- delta alternation."""
    return check_eta(eta) * alternation_susceptibility(reg, A, delta, optimal)


# ---------------------------------------------------------------------------- regret and fairness
def ftrl_regret_bound(reg, losses, eta: float) -> float:
    """D_h / eta + eta sum_t ||l_t||_*^2 / (2 mu_h), the FTRL regret bound for losses (T, m).

    entropic ln(m)/eta + eta sum ||l||_inf^2 / 2; Euclidean (1/2 - 1/(2m))/eta + eta sum ||l||_2^2 / 2;
    Tsallis-q |1 - m^{1-q}| / (|1-q| eta) + eta sum ||l||_2^2 / (2q); log-barrier against the smoothed
    comparator: m ln T / eta + eta sum ||l||_2^2 / 2 + (2/T) sum ||l||_inf.
    """
    reg = regularizer(reg)
    loss = check_array(losses, "losses", ndim=2, dtype=float, min_size=1)
    eta = check_eta(eta)
    T, m = loss.shape
    bound = reg.range(m, max(T, 2)) / eta + eta * float(reg.dual_norm_sq(loss).sum()) / (2.0 * reg.mu)
    if not reg.finite_on_boundary:
        bound += 2.0 / T * float(np.abs(loss).max(axis=1).sum())
    return bound


def matched_eta(reg, m: int, T: int) -> float:
    """eta_h = sqrt(2 mu_h D_h / (G_h^2 T)): equal worst-case FTRL regret bounds across regularizers."""
    reg = regularizer(reg)
    T = check_horizon(T)
    return math.sqrt(2.0 * reg.mu * reg.range(m, max(T, 2)) / (reg.dual_bound(m) * T))


def predicted_susceptibility(reg, m: int, k: int, sigma_alt: float, T: int,
                             eta: float | None = None) -> float:
    """(sigma_sweep / eta_h + sigma_alt eta_h T) / sqrt(T) at eta_h = ``matched_eta`` (or ``eta``)."""
    reg = regularizer(reg)
    T = check_horizon(T)
    sigma_alt = check_scalar(sigma_alt, "sigma_alt", float, min=0.0)
    eta = matched_eta(reg, m, T) if eta is None else check_eta(eta)
    return (reg.sweeping_susceptibility(m, k) / eta + sigma_alt * eta * T) / math.sqrt(T)


def price_of_best_response(sigma_sweep: float, sigma_alt: float, T: int) -> tuple[float, float]:
    """min_eta sigma_sweep/eta + sigma_alt eta T = 2 sqrt(sigma_sweep sigma_alt T) at eta = sqrt(s/(a T)).

    Returns (the minimum, the minimising eta): no constant eta avoids Omega(sqrt T) surplus.
    """
    s = check_scalar(sigma_sweep, "sigma_sweep", float, min=0.0, inclusive="neither")
    a = check_scalar(sigma_alt, "sigma_alt", float, min=0.0, inclusive="neither")
    T = check_horizon(T)
    return 2.0 * math.sqrt(s * a * T), math.sqrt(s / (a * T))


__all__ = ["Regularizer", "alternation_rate", "alternation_susceptibility", "continuous_surplus",
           "elimination_round", "euclidean_elimination_bound", "fixed_surplus_curve", "fixed_trajectory",
           "ftrl_regret_bound", "h_inf", "matched_eta", "optimal_projector", "per_round_surplus",
           "predicted_susceptibility", "price_of_best_response", "sandwich", "sweeping_limit"]
