"""The surrogates Pi_tau behind one interface: ``surrogate.laws(prior, targets, sigmas, pstar)``.

All but S4 are tilts of R, ``Pi = R exp(sum_k psi_k(x_k)) / Z``, so ``Delta = sum_k (psi_k - phi_k)(x_k)``
up to a constant (phi = the exact Schroedinger potentials of P*). One law per schedule point
tau = 0..T-1 (sigma_tau > 0); ``None`` where the surrogate is undefined (S3 with Q not PD, only when
``undefined="none"``; the API default raises).

S1  ``AnnealedTilt`` (primary; ASSUMPTION on the recipe): psi = 0, then for i = 0..tau and each slice
    ``psi_k += lam_i [log mu_k^{sigma_i} - log Pi_k^{sigma_i}]`` (Gauss-Seidel, or Jacobi).
    Gaussian: ``A_k += lam [(S_k + s^2 I)^-1 - (V_k + s^2 I)^-1]``,
    ``b_k += lam [(S_k + s^2)^-1 m_k - (V_k + s^2)^-1 u_k]``;
    grid: ``psi_k += lam [log M_s mu_k - log M_s p_k]``. ``lam_i = 1`` (default) or
    ``sigma_data^2 / (sigma_data^2 + sigma_i^2)`` (``lam="edm"``, sigma_data = 0.5).
S2  ``ProductTilt``: ``psi_k = log mu_k^sigma - log r_k^sigma`` (r_k the slice marginal of R); no iteration.
S3  ``SmoothedPotentials``: ``e^psi_k = e^phi_k`` averaged with a N(0, sigma^2) kernel. Gaussian closed form
    ``Q = A_k + sigma^-2 I`` (must be PD), ``A'_k = sigma^-2 I - sigma^-4 Q^-1 = A_k (I + sigma^2 A_k)^-1``,
    ``b'_k = sigma^-2 Q^-1 b_k = (I + sigma^2 A_k)^-1 b_k`` (the right-hand forms avoid cancellation).
S4  ``EDMSampler`` (Gaussian): Karras Alg. 1 (Euler or Heun) on the probability-flow ODE with the affine
    score ``s(y) = grad log R_sigma(y) + sum_k grad psi_k^sigma(y_k)`` (psi^sigma = S2 at sigma), or the exact
    score of ``P*_sigma``; every step is affine, so the output law is propagated exactly from
    ``y_0 ~ N(0, sigma_max^2 I)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neurips26.bridge.chain import ChainLaw, chain_sweep
from neurips26.bridge.errors import NotPositiveDefiniteError
from neurips26.bridge.gaussian import (
    DenseGaussian,
    TiltedGaussian,
    cholesky,
    gaussian_kl_dense,
    spd_inverse,
    tilt_sweep,
)
from neurips26.bridge.priors import ChainPrior, GaussianPrior, GaussianTargets
from neurips26.bridge.schedule import check_schedule, log_smooth_grid, log_smoothing_matrix, logsumexp
from neurips26.harness.validation import check_choice, check_scalar

SIGMA_DATA = 0.5
LAMBDAS = ("one", "edm")
UNDEFINED = ("raise", "none")


def _is_gaussian(prior) -> bool:
    if isinstance(prior, GaussianPrior):
        return True
    if isinstance(prior, ChainPrior):
        return False
    raise TypeError(f"prior must be a GaussianPrior or ChainPrior, got {type(prior).__name__}")


def _check_targets(prior, targets):
    if _is_gaussian(prior):
        if not isinstance(targets, GaussianTargets):
            raise TypeError("targets of a GaussianPrior must be GaussianTargets")
        targets.check_against(prior)
    else:
        t = np.asarray(targets, dtype=float)
        if t.shape != (prior.N, prior.G):
            raise ValueError(f"targets must have shape ({prior.N}, {prior.G}), got {t.shape}")


def lam_schedule(sigmas: np.ndarray, lam: str | float = "one") -> np.ndarray:
    """Tempering weights: 1, ``sigma_data^2 / (sigma_data^2 + sigma_i^2)`` ("edm") or a constant in (0, 1]."""
    if isinstance(lam, str):
        check_choice(lam, "lam", LAMBDAS)
        return np.ones_like(sigmas) if lam == "one" else SIGMA_DATA**2 / (SIGMA_DATA**2 + sigmas**2)
    lam = check_scalar(lam, "lam", float, min=0, max=1, inclusive="right")
    return np.full_like(sigmas, lam)


@dataclass(frozen=True)
class AnnealedTilt:
    """S1: the annealed 2D-tilted surrogate (ASSUMPTION on order and lam; both switchable)."""

    order: str = "gauss-seidel"
    lam: str | float = "one"
    name: str = "S1"

    def laws(self, prior, targets, sigmas, pstar=None) -> list:
        _check_targets(prior, targets)
        check_choice(self.order, "order", ("gauss-seidel", "jacobi"))
        s = check_schedule(sigmas)
        lams = lam_schedule(s, self.lam)
        out = []
        if _is_gaussian(prior):
            law = TiltedGaussian.untilted(prior)
            for sig, lm in zip(s, lams):
                law, _ = tilt_sweep(law, targets, float(sig), float(lm), self.order)
                out.append(law)
        else:
            law = ChainLaw.untilted(prior)
            with np.errstate(divide="ignore"):
                logmu = np.log(np.asarray(targets, dtype=float))
            for sig, lm in zip(s, lams):
                law, _ = chain_sweep(law, logmu, float(lm), self.order, float(sig))
                out.append(law)
        return out


@dataclass(frozen=True)
class ProductTilt:
    """S2: the one-shot product of 2D experts ``psi_k = log mu_k^sigma - log r_k^sigma`` (ablation)."""

    name: str = "S2"

    def tilt_at(self, prior, targets, sigma: float):
        sigma = check_scalar(sigma, "sigma", float, min=0)
        if _is_gaussian(prior):
            eye = sigma**2 * np.eye(prior.D)
            Si = spd_inverse(targets.covs + eye, "target covariance + sigma^2 I")
            Ci = spd_inverse(prior.C + eye, "prior slice covariance + sigma^2 I")
            A = Si - Ci[None]
            b = np.einsum("kij,kj->ki", Si, targets.means) - prior.mean @ Ci.T
            law = TiltedGaussian(prior, A, b)
            law.forward("S2 tilt")
            return law
        with np.errstate(divide="ignore"):
            logmu = np.log(np.asarray(targets, dtype=float))
        logr = prior.log_r
        phi = (
            np.stack([
                log_smooth_grid(logmu[k], prior.z, sigma) - log_smooth_grid(logr, prior.z, sigma)
                for k in range(prior.N)
            ])
            if sigma > 0
            else logmu - logr
        )
        return ChainLaw(prior, phi)

    def laws(self, prior, targets, sigmas, pstar=None) -> list:
        _check_targets(prior, targets)
        return [self.tilt_at(prior, targets, float(s)) for s in check_schedule(sigmas)]


@dataclass(frozen=True)
class SmoothedPotentials:
    """S3: heat-smoothed exact potentials (pure tempering, ablation); needs ``pstar``."""

    undefined: str = "raise"
    name: str = "S3"

    def tilt_at(self, pstar, sigma: float):
        sigma = check_scalar(sigma, "sigma", float, min=0, inclusive="neither")
        if isinstance(pstar, TiltedGaussian):
            D = pstar.D
            M = np.eye(D)[None] + sigma**2 * pstar.A  # sigma^2 Q
            for k in range(pstar.N):
                try:
                    cholesky(M[k], "Q")
                except NotPositiveDefiniteError:
                    lmin = float(np.linalg.eigvalsh(pstar.A[k]).min())
                    raise NotPositiveDefiniteError(
                        f"S3: Q = A_k + sigma^-2 I is not positive definite at sigma = {sigma:.4g} "
                        f"(slice {k}; defined only for sigma < {1 / np.sqrt(-lmin):.4g})"
                    ) from None
            A = np.linalg.solve(M, pstar.A)
            A = 0.5 * (A + np.swapaxes(A, -1, -2))
            b = np.linalg.solve(M, pstar.b[..., None])[..., 0]
            law = TiltedGaussian(pstar.prior, A, b)
            law.forward(f"S3 tilt at sigma = {sigma:.4g}")
            return law
        if isinstance(pstar, ChainLaw):
            logW = log_smoothing_matrix(pstar.prior.z, sigma, "rows")
            phi = logsumexp(logW[None] + pstar.phi[:, None, :], axis=2)
            return ChainLaw(pstar.prior, phi)
        raise TypeError(f"pstar must be a TiltedGaussian or ChainLaw, got {type(pstar).__name__}")

    def laws(self, prior, targets, sigmas, pstar=None) -> list:
        if pstar is None:
            raise ValueError("S3 needs pstar (the exact P*, whose potentials it smooths)")
        check_choice(self.undefined, "undefined", UNDEFINED)
        out = []
        for s in check_schedule(sigmas):
            try:
                out.append(self.tilt_at(pstar, float(s)))
            except NotPositiveDefiniteError:
                if self.undefined == "raise":
                    raise
                out.append(None)
        return out


@dataclass(frozen=True)
class EDMSampler:
    """S4: the output law of Karras Alg. 1 (``solver`` euler/heun) with the S2 score or the exact score."""

    solver: str = "heun"
    score: str = "surrogate"
    name: str = "S4"

    def _affine_score(self, prior, targets, pstar, sigma):
        """``s(y) = -H y + c`` at noise level sigma (dense, N*D small)."""
        n = prior.N * prior.D
        eye = sigma**2 * np.eye(n)
        if self.score == "exact":
            m, S = pstar.dense()
            H = spd_inverse(S + eye, "P* covariance + sigma^2 I")
            return H, H @ m
        m_R, S_R = prior.mean.reshape(-1), prior.dense_covariance()
        H = spd_inverse(S_R + eye, "prior covariance + sigma^2 I")
        c = H @ m_R
        tilt = ProductTilt().tilt_at(prior, targets, sigma)
        for k in range(prior.N):
            sl = slice(k * prior.D, (k + 1) * prior.D)
            H[sl, sl] += tilt.A[k]
            c[sl] += tilt.b[k]
        return H, c

    def sample_law(self, prior, targets, sigmas, pstar=None) -> tuple[DenseGaussian, dict]:
        """The sampler's output law (exact affine propagation) and the start mismatch it carries."""
        if not isinstance(prior, GaussianPrior):
            raise TypeError("S4 (EDM sampler law) is Gaussian only")
        check_choice(self.solver, "solver", ("euler", "heun"))
        check_choice(self.score, "score", ("surrogate", "exact"))
        if self.score == "exact" and pstar is None:
            raise ValueError("score='exact' needs pstar")
        s = check_schedule(sigmas)
        s = np.append(s, 0.0)
        n = prior.N * prior.D
        eye_n = np.eye(n)
        mean, cov = np.zeros(n), s[0] ** 2 * eye_n
        scores = {}

        def drift(i):  # d(y; sigma_i) = P y + q
            if i not in scores:
                H, c = self._affine_score(prior, targets, pstar, float(s[i]))
                scores[i] = (s[i] * H, -s[i] * c)
            return scores[i]

        for i in range(len(s) - 1):
            h = s[i + 1] - s[i]
            P, q = drift(i)
            M, v = eye_n + h * P, h * q  # Euler step
            if self.solver == "heun" and s[i + 1] > 0:  # 2nd-order correction
                P2, q2 = drift(i + 1)
                M = eye_n + 0.5 * h * (P + P2 @ (eye_n + h * P))
                v = 0.5 * h * (q + h * (P2 @ q) + q2)
            mean, cov = M @ mean + v, M @ cov @ M.T
            cov = 0.5 * (cov + cov.T)
        info = {}
        if pstar is not None:
            m_star, S_star = pstar.dense()
            info["start_mismatch"] = gaussian_kl_dense(
                np.zeros(n), s[0] ** 2 * eye_n, m_star, S_star + s[0] ** 2 * eye_n
            )
        return DenseGaussian(mean, cov), info


SURROGATES = {"S1": AnnealedTilt, "S2": ProductTilt, "S3": SmoothedPotentials, "S4": EDMSampler}
