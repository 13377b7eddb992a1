"""Two perpendicular slice stacks (TPDM-style, ``stacks=2``): overlapping marginal constraints, dense IPF.

An n x n x n volume ``v[k, i, j]`` (k = z, the slice axis of the prior R) is flattened as
``k n^2 + i n + j``. Stack 1 renders the z-slices ``v[k, :, :]`` (layout (i, j)); stack 2 the
perpendicular i-slices ``v[:, i, :]`` (layout (k, j)). Every rendered slice gets the 2D target
``N(m_mu 1, S_mu)``, ``S_mu = 0.5 (T_n (x) T_n)(0.3)``; the constraints overlap on the lines
``v[k, i, :]`` and are consistent (the law ``N(0.5, 0.5 T (x) T (x) T)`` satisfies them all).

IPF on natural parameters, one tilt ``(A_c, b_c)`` per constraint c on its index set ``I_c``::

    Lambda = Sigma_R^-1 + sum_c E_c A_c E_c^T,  eta = Sigma_R^-1 m_R + sum_c E_c b_c
    A_c <- A_c + S_c^-1 - V_c^-1,   b_c <- b_c + S_c^-1 m_c - V_c^-1 u_c     ((u_c, V_c) = marginal on I_c)

Dense (Cholesky) throughout: these volumes are small (n <= 6, N D <= 216), and overlapping stacks
break the block-tridiagonal structure. ``stacks=1`` is the ordinary lift (tested equal to
``gaussian_ipf``). The annealed surrogate S1 is the same sweep with ``+ sigma^2 I`` and weight lam.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import linalg

from neurips26.bridge.errors import ConvergenceError
from neurips26.bridge.gaussian import DenseGaussian, TiltedGaussian, cholesky, spd_inverse
from neurips26.bridge.priors import GaussianPrior, check_covariance, separable_covariance
from neurips26.bridge.schedule import check_schedule
from neurips26.harness.validation import check_array, check_choice, check_scalar


@dataclass(frozen=True)
class StackedProblem:
    """The prior R on the volume and the list of (index set, target mean, target covariance)."""

    prior: GaussianPrior
    constraints: tuple  # ((idx (d,), mean (d,), cov (d, d)), ...)
    stacks: int

    @classmethod
    def create(
        cls,
        shape=(4, 4, 4),
        stacks: int = 2,
        rho_z: float = 0.5,
        rho_x: float = 0.6,
        target_mean: float = 0.5,
        target_scale: float = 0.5,
        target_rho: float = 0.3,
    ) -> "StackedProblem":
        shp = check_array(shape, "shape", ndim=1, dtype=int, shape=(3,))
        check_choice(stacks, "stacks", (1, 2))
        if np.any(shp < 1):
            raise ValueError(f"shape must be positive, got {tuple(shp)}")
        nz, nh, nw = (int(x) for x in shp)
        if stacks == 2 and not (nz == nh == nw):
            raise ValueError(f"stacks=2 needs a cubic volume (n x n x n), got shape {tuple(shp)}")
        prior = GaussianPrior.ar1(nz, nh, nw, rho_z=rho_z, rho_x=rho_x)
        S = separable_covariance(nh, nw, target_rho, target_scale)
        flat = np.arange(nz * nh * nw).reshape(nz, nh, nw)
        cons = [(flat[k].reshape(-1), np.full(nh * nw, target_mean), S) for k in range(nz)]
        if stacks == 2:
            S2 = separable_covariance(nz, nw, target_rho, target_scale)
            cons += [(flat[:, i, :].reshape(-1), np.full(nz * nw, target_mean), S2) for i in range(nh)]
        for c, (_, _, cov) in enumerate(cons):
            check_covariance(cov, f"target covariance {c}")
        return cls(prior, tuple(cons), stacks)


@dataclass(frozen=True)
class StackedLaw:
    """``R exp(sum_c phi_c(x_{I_c})) / Z`` as a dense Gaussian, with the constraint tilts."""

    problem: StackedProblem
    A: tuple
    b: tuple
    info: dict = field(default_factory=dict, compare=False)

    def natural(self) -> tuple[np.ndarray, np.ndarray]:
        Lam, eta = TiltedGaussian.untilted(self.problem.prior).dense_precision()
        Lam, eta = Lam.copy(), eta.copy()
        for (idx, _, _), A, b in zip(self.problem.constraints, self.A, self.b):
            Lam[np.ix_(idx, idx)] += A
            eta[idx] += b
        return Lam, eta

    def dense(self) -> DenseGaussian:
        Lam, eta = self.natural()
        S = spd_inverse(Lam, "stacked precision")
        return DenseGaussian(S @ eta, S)


def _sweep(law: StackedLaw, sigma: float, lam: float) -> tuple[StackedLaw, float]:
    A, b = list(law.A), list(law.b)
    res = 0.0
    Lam, eta = law.natural()
    for c, (idx, m, S) in enumerate(law.problem.constraints):
        L = cholesky(Lam, f"stacked precision (constraint {c}, sigma = {sigma:.4g})")
        n = Lam.shape[0]
        E = np.zeros((n, idx.size))
        E[idx, np.arange(idx.size)] = 1.0
        cols = linalg.cho_solve((L, True), np.column_stack([E, eta]))
        V, u = cols[idx, : idx.size], cols[idx, idx.size]
        V = 0.5 * (V + V.T)
        res = max(res, float(np.max(np.abs(V - S))), float(np.max(np.abs(u - m))))
        eye = sigma**2 * np.eye(idx.size)
        Si = spd_inverse(S + eye, f"target covariance {c} + sigma^2 I")
        Vi = spd_inverse(V + eye, f"marginal covariance {c} + sigma^2 I")
        dA, db = lam * (Si - Vi), lam * (Si @ m - Vi @ u)
        A[c], b[c] = A[c] + dA, b[c] + db
        Lam[np.ix_(idx, idx)] += dA
        eta[idx] += db
    cholesky(Lam, f"stacked precision after the sweep (sigma = {sigma:.4g})")
    return StackedLaw(law.problem, tuple(A), tuple(b)), res


def _untilted(problem: StackedProblem) -> StackedLaw:
    return StackedLaw(
        problem,
        tuple(np.zeros((i.size, i.size)) for i, _, _ in problem.constraints),
        tuple(np.zeros(i.size) for i, _, _ in problem.constraints),
    )


def stacked_ipf(problem: StackedProblem, tol: float = 1e-10, max_iter: int = 5000) -> StackedLaw:
    """Exact P* for the (possibly overlapping) slice constraints; ``ConvergenceError`` with the residual."""
    tol = check_scalar(tol, "tol", float, min=0, inclusive="neither")
    max_iter = check_scalar(max_iter, "max_iter", int, min=1)
    law = _untilted(problem)
    res = np.inf
    for it in range(1, max_iter + 1):
        law, res = _sweep(law, 0.0, 1.0)
        if res < tol:
            return StackedLaw(law.problem, law.A, law.b, {"sweeps": it, "residual": res})
    raise ConvergenceError(
        f"stacked IPF did not reach tol = {tol:g} in {max_iter} sweeps (marginal residual {res:.3g})",
        res,
        max_iter,
    )


def stacked_annealed(problem: StackedProblem, sigmas, lam: float = 1.0) -> list[DenseGaussian]:
    """S1 on both stacks: one smoothed, tempered sweep over all constraints per schedule point."""
    lam = check_scalar(lam, "lam", float, min=0, max=1, inclusive="right")
    law = _untilted(problem)
    out = []
    for s in check_schedule(sigmas):
        law, _ = _sweep(law, float(s), lam)
        out.append(law.dense())
    return out
