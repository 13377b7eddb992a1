"""Zero-sum matrix games: the value LP, the max-min strategy, the gaps and the optimal set; generators.

Payoff A in R^{n x m}, entries in [-1, 1]. The optimizer (row, maximiser) plays x in Delta_n, the
learner (column, minimiser of x^T A y) plays y in Delta_m. The value

    v = max_x min_y x^T A y :  maximise w  s.t.  A^T x >= w 1,  1^T x = 1,  x >= 0

is solved by ``scipy.optimize.linprog`` (HiGHS). For the max-min x* we report c = A^T x*,
v = min_j c_j, the gaps Delta = c - v >= 0, the optimal set O = {j : Delta_j <= tol} (k = |O|) and
N_sub = m - k, the number of the learner's suboptimal actions (tol = 1e-9).

Generators (all seeded with ``numpy.random.default_rng``):
  G1 ``core_appendix_game``: a k x k circulant core C_ij = f((j - i) mod k), sum_r f(r) = 0, so u_k is
     max-min with value 0 and equalises every core column; N_sub appended columns
     c_j = Delta_j 1 + xi_j (xi_j orthogonal to 1). Known x* = u_k, v = 0, O = the core columns.
  G2 ``random_game``: A_ij ~ U[-1, 1] i.i.d.
  G3 ``matching_pennies``, ``rock_paper_scissors``, ``pure_equilibrium_game``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from neurips26.harness.validation import check_array, check_scalar

#: tolerance on the gaps that defines the optimal set O (spec: 1e-9)
GAP_TOL = 1e-9


def check_payoff(A, name: str = "A") -> np.ndarray:
    """A as a finite, non-empty 2-D float64 array (entries outside [-1, 1] are allowed but unusual)."""
    arr = check_array(A, name, ndim=2, dtype=float, min_size=1)
    if 0 in arr.shape:
        raise ValueError(f"{name} must be non-empty, got shape {arr.shape}")
    return arr


def check_simplex(x, name: str, n: int | None = None, tol: float = 1e-9) -> np.ndarray:
    """x as a point of the simplex (>= -tol, sum 1 +- tol) along its last axis."""
    arr = check_array(x, name, ndim=(1, 2), dtype=float, min_size=1)
    if n is not None and arr.shape[-1] != n:
        raise ValueError(f"{name} must have {n} entries (one per row action), got {arr.shape[-1]}")
    if np.any(arr < -tol) or np.any(np.abs(arr.sum(axis=-1) - 1.0) > tol):
        raise ValueError(f"{name} must lie in the simplex (entries >= 0, sum 1, tolerance {tol:g}); "
                         f"got min {arr.min():.3g}, sum {np.ravel(arr.sum(axis=-1))[0]:.12g}")
    return arr


@dataclass(frozen=True)
class GameSolution:
    """The value LP of one game and what the experiments read off it."""

    A: np.ndarray
    value: float
    x_star: np.ndarray
    gaps: np.ndarray
    optimal: np.ndarray  # bool (m,): the optimal set O

    @property
    def n(self) -> int:
        return self.A.shape[0]

    @property
    def m(self) -> int:
        return self.A.shape[1]

    @property
    def k(self) -> int:
        return int(self.optimal.sum())

    @property
    def n_sub(self) -> int:
        return self.m - self.k

    @property
    def support(self) -> np.ndarray:
        """Indices i with x*_i > 1e-9, in index order."""
        return np.flatnonzero(self.x_star > GAP_TOL)

    @property
    def pure(self) -> bool:
        return self.support.size == 1

    @property
    def delta_min(self) -> float:
        """The smallest positive gap (inf when N_sub = 0)."""
        sub = self.gaps[~self.optimal]
        return float(sub.min()) if sub.size else float("inf")


def solve_game(A, tol: float = GAP_TOL) -> GameSolution:
    """The value LP (HiGHS) of the zero-sum game A: value, a max-min x*, gaps, optimal set O."""
    A = check_payoff(A)
    tol = check_scalar(tol, "tol", float, min=0.0)
    n, m = A.shape
    # variables (x_1..x_n, w): minimise -w s.t. w - (A^T x)_j <= 0, sum x = 1, x >= 0, w free
    c = np.zeros(n + 1)
    c[-1] = -1.0
    A_ub = np.hstack([-A.T, np.ones((m, 1))])
    A_eq = np.hstack([np.ones((1, n)), np.zeros((1, 1))])
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(m), A_eq=A_eq, b_eq=[1.0],
                  bounds=[(0, None)] * n + [(None, None)], method="highs")
    if res.status != 0:  # pragma: no cover - a bounded feasible LP always solves
        raise RuntimeError(f"value LP failed: {res.message}")
    x = np.maximum(res.x[:n], 0.0)
    x /= x.sum()
    cols = A.T @ x
    v = float(cols.min())
    gaps = cols - v
    return GameSolution(A=A, value=v, x_star=x, gaps=gaps, optimal=gaps <= tol)


def core_appendix_game(k: int = 3, n_sub: int = 0, gaps=None, seed: int = 0, xi_scale: float = 0.5,
                       f=None) -> np.ndarray:
    """G1: a k x k circulant core plus ``n_sub`` appended suboptimal columns with known gaps.

    Core C_ij = f((j - i) mod k) with f(r) = sin(2 pi r / k) by default (sum_r f(r) = 0; k = 3 is a
    scaled rock-paper-scissors). Column j of the appendix is Delta_j 1 + xi_j with xi_j orthogonal to
    1 and |entries| <= 1 (xi_j = xi_scale (1 - Delta_j) z / max|z|, z a centred Gaussian; 0 for
    ``xi_scale = 0``). Gaps: given, or ``default_rng(seed).uniform(0.1, 0.5, n_sub)`` drawn first.
    Then x* = u_k, v = 0 and O = the core columns (exactly, for a core with a unique equilibrium).
    """
    k = check_scalar(k, "k", int, min=2)
    n_sub = check_scalar(n_sub, "n_sub", int, min=0)
    xi_scale = check_scalar(xi_scale, "xi_scale", float, min=0.0, max=1.0)
    rng = np.random.default_rng(check_scalar(seed, "seed", int, min=0))
    if gaps is None:
        gaps = rng.uniform(0.1, 0.5, n_sub)
    gaps = check_array(gaps, "gaps", ndim=1, dtype=float, shape=(n_sub,))
    if np.any(gaps <= 0) or np.any(gaps > 1):
        raise ValueError("gaps must lie in (0, 1]")
    r = np.arange(k)
    fr = np.sin(2 * np.pi * r / k) if f is None else check_array(f, "f", ndim=1, dtype=float, shape=(k,))
    if abs(fr.sum()) > 1e-12:
        raise ValueError(f"f must sum to 0 (so u_k equalises the core), got sum {fr.sum():.3g}")
    core = fr[(r[None, :] - r[:, None]) % k]
    cols = []
    for d in gaps:
        z = rng.standard_normal(k)
        z -= z.mean()
        xi = xi_scale * (1.0 - d) * z / np.max(np.abs(z)) if xi_scale > 0 else np.zeros(k)
        cols.append(d + xi)
    app = np.stack(cols, axis=1) if cols else np.zeros((k, 0))
    return np.hstack([core, app])


def random_game(n: int, m: int | None = None, seed: int = 0, rng: np.random.Generator | None = None):
    """G2: A_ij ~ U[-1, 1] i.i.d. (n x m, m = n by default) from ``default_rng(seed)`` or ``rng``."""
    n = check_scalar(n, "n", int, min=1)
    m = n if m is None else check_scalar(m, "m", int, min=1)
    gen = rng if rng is not None else np.random.default_rng(check_scalar(seed, "seed", int, min=0))
    return gen.uniform(-1.0, 1.0, (n, m))


def matching_pennies() -> np.ndarray:
    """G3: [[1, -1], [-1, 1]]: x* = y* = (1/2, 1/2), v = 0, N_sub = 0."""
    return np.array([[1.0, -1.0], [-1.0, 1.0]])


def rock_paper_scissors() -> np.ndarray:
    """G3: rows R, P, S against columns R, P, S (optimizer's payoff): v = 0, x* = u_3, N_sub = 0."""
    return np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])


def pure_equilibrium_game() -> np.ndarray:
    """G3: a unique pure equilibrium (row 0, column 0) with v = 0.2: alternation is impossible (delta = 0)."""
    return np.array([[0.2, 0.6, 0.5], [-0.3, 0.4, -0.5], [-0.6, 0.1, 0.3]])
