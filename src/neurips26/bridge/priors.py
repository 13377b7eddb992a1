"""The 3D priors R and the 2D slice targets mu_k of the testbed.

Gaussian (x_k in R^D, a flattened h x w slice)::

    R = N(m_R, Sigma_R),  Sigma_R = K_z (x) C,  K_z[i, j] = rho_z^|i-j|  (AR(1) across slices, 0 <= rho_z < 1)
    C = s_R^2 (T_h (x) T_w),  T_n[i, j] = rho_x^|i-j|                      (separable AR(1) inside a slice)

``K_z^-1`` is tridiagonal in closed form, so ``Sigma_R^-1 = K_z^-1 (x) C^-1`` is block-tridiagonal:
diagonal blocks ``d_k C^-1`` with ``d = (1, 1 + rho^2, ..., 1 + rho^2, 1) / (1 - rho^2)`` and off-diagonal
blocks ``-rho / (1 - rho^2) C^-1``. Nothing dense of size ND x ND is built unless asked for.

Targets (the "2D diffusion prior" marginals): ``N(m_mu, S_mu)``, ``m_mu = 0.5 * 1``,
``S_mu = 0.5 (T_h (x) T_w)`` with rho = 0.3, the same for every slice unless ``slice_varying``.

Discrete (x_k in {0..G-1}, grid z on [-L, L]): a stationary Markov chain over slices,
``R(x) = r(x_1) prod_k K(x_k, x_{k+1})``, ``K[g, g'] ~ exp(-(z_g - z_g')^2 / (2 l^2))`` row-normalised;
K is reversible, so ``r(g) ~`` the row sum of the unnormalised kernel. Targets: ``smooth`` =
1/2 N(-1, 0.3^2) + 1/2 N(1, 0.3^2), ``kinked`` = 1/2 Laplace(-1, 0.4) + 1/2 Laplace(1, 0.4), each evaluated
at the grid points and normalised to sum 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neurips26.bridge.errors import InfeasibleError, NotPositiveDefiniteError
from neurips26.bridge.schedule import logsumexp
from neurips26.harness.validation import check_array, check_choice, check_scalar

PROB_TOL = 1e-9


# ============================================================================ covariance helpers
def ar1_matrix(n: int, rho: float) -> np.ndarray:
    """``T_n[i, j] = rho^|i - j|`` (an AR(1) correlation matrix)."""
    n = check_scalar(n, "n", int, min=1)
    rho = check_scalar(rho, "rho", float, min=-1, max=1, inclusive="neither")
    i = np.arange(n)
    return rho ** np.abs(i[:, None] - i[None, :])


def separable_covariance(h: int, w: int, rho: float, scale: float = 1.0) -> np.ndarray:
    """``scale * (T_h (x) T_w)``: separable AR(1) covariance of a flattened h x w slice."""
    return scale * np.kron(ar1_matrix(h, rho), ar1_matrix(w, rho))


def check_covariance(S, name: str, dim: int | None = None) -> np.ndarray:
    """``S`` as a symmetric positive-definite matrix (``dim x dim`` if given); errors name ``name``."""
    S = check_array(S, name, ndim=2, dtype=float)
    if S.shape[0] != S.shape[1]:
        raise ValueError(f"{name} must be square, got shape {S.shape}")
    if dim is not None and S.shape[0] != dim:
        raise ValueError(f"{name} must be {dim} x {dim} (the slice dimension), got {S.shape}")
    scale = max(1.0, float(np.max(np.abs(S))))
    if not np.allclose(S, S.T, atol=1e-10 * scale, rtol=0):
        raise ValueError(f"{name} must be symmetric (max |S - S^T| = {np.max(np.abs(S - S.T)):.3g})")
    try:
        np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        raise NotPositiveDefiniteError(
            f"{name} must be positive definite (min eigenvalue {np.linalg.eigvalsh(S).min():.3g})"
        ) from None
    return 0.5 * (S + S.T)


# ============================================================================ Gaussian prior
@dataclass(frozen=True)
class GaussianPrior:
    """``R = N(m_R, K_z (x) C)`` over N slices of dimension D, in block-tridiagonal information form.

    ``diag[k] = Lambda_R[k, k]``, ``off[k] = Lambda_R[k, k+1]``, ``eta[k] = (Lambda_R m_R)[k]``.
    """

    N: int
    C: np.ndarray
    rho_z: float
    mean: np.ndarray  # (N, D)

    @classmethod
    def create(cls, N: int, C, rho_z: float = 0.5, mean=0.0) -> "GaussianPrior":
        N = check_scalar(N, "N", int, min=1)
        rho_z = check_scalar(rho_z, "rho_z", float, min=0, max=1, inclusive="left")
        C = check_covariance(C, "C")
        D = C.shape[0]
        m = check_array(mean, "mean", dtype=float)
        if m.ndim == 0:
            m = np.full((N, D), float(m))
        elif m.shape == (D,):
            m = np.tile(m, (N, 1))
        elif m.shape != (N, D):
            raise ValueError(f"mean must be a scalar, shape ({D},) or ({N}, {D}), got {m.shape}")
        return cls(N, C, rho_z, m.copy())

    @classmethod
    def ar1(
        cls, N: int, h: int, w: int, rho_z: float = 0.5, rho_x: float = 0.6, s_R: float = 1.0, mean=0.0
    ) -> "GaussianPrior":
        """The spec's prior: ``C = s_R^2 (T_h (x) T_w)`` with ``rho_x`` (default 0.6), ``m_R = mean``."""
        h = check_scalar(h, "h", int, min=1)
        w = check_scalar(w, "w", int, min=1)
        rho_x = check_scalar(rho_x, "rho_x", float, min=0, max=1, inclusive="left")
        s_R = check_scalar(s_R, "s_R", float, min=0, inclusive="neither")
        return cls.create(N, separable_covariance(h, w, rho_x, s_R**2), rho_z, mean)

    @property
    def D(self) -> int:
        return self.C.shape[0]

    @property
    def C_inv(self) -> np.ndarray:
        return np.linalg.inv(self.C)

    def kz_inverse_bands(self) -> tuple[np.ndarray, float]:
        """Diagonal and off-diagonal of the tridiagonal ``K_z^-1`` (closed form)."""
        r = self.rho_z
        if self.N == 1:
            return np.ones(1), 0.0
        d = np.full(self.N, (1 + r * r) / (1 - r * r))
        d[0] = d[-1] = 1 / (1 - r * r)
        return d, -r / (1 - r * r)

    def precision_blocks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(diag (N,D,D), off (N-1,D,D), eta (N,D))`` of ``Lambda_R = Sigma_R^-1`` and ``Lambda_R m_R``."""
        d, o = self.kz_inverse_bands()
        Ci = self.C_inv
        Ci = 0.5 * (Ci + Ci.T)
        diag = d[:, None, None] * Ci
        off = np.broadcast_to(o * Ci, (self.N - 1, self.D, self.D)).copy()
        eta = np.einsum("kij,kj->ki", diag, self.mean)
        eta[:-1] += np.einsum("kij,kj->ki", off, self.mean[1:])
        eta[1:] += np.einsum("kji,kj->ki", off, self.mean[:-1])
        return diag, off, eta

    def dense_covariance(self) -> np.ndarray:
        """``Sigma_R = K_z (x) C`` (dense; the oracle and the bench's dense anchor only)."""
        return np.kron(ar1_matrix(self.N, self.rho_z) if self.N > 1 else np.ones((1, 1)), self.C)

    def reversed(self) -> "GaussianPrior":
        """The same prior with the slice order reversed (``K_z`` is reversal-symmetric)."""
        return GaussianPrior(self.N, self.C, self.rho_z, self.mean[::-1].copy())


@dataclass(frozen=True)
class GaussianTargets:
    """Slice targets ``mu_k = N(means[k], covs[k])``."""

    means: np.ndarray  # (N, D)
    covs: np.ndarray  # (N, D, D)

    @classmethod
    def create(cls, means, covs) -> "GaussianTargets":
        means = check_array(means, "means", ndim=2, dtype=float)
        covs = check_array(covs, "covs", ndim=3, dtype=float)
        if covs.shape != (means.shape[0], means.shape[1], means.shape[1]):
            raise ValueError(
                f"covs must have shape {(means.shape[0], means.shape[1], means.shape[1])} "
                f"to match means {means.shape}, got {covs.shape}"
            )
        covs = np.stack([check_covariance(S, f"covs[{k}]") for k, S in enumerate(covs)])
        return cls(means.copy(), covs)

    @classmethod
    def default(
        cls,
        N: int,
        h: int,
        w: int,
        mean: float = 0.5,
        scale: float = 0.5,
        rho: float = 0.3,
        slice_varying: bool = False,
    ) -> "GaussianTargets":
        """The spec's targets ``N(0.5 * 1, 0.5 (T_h (x) T_w)(0.3))``.

        ``slice_varying`` (ASSUMPTION, the spec names it without a recipe): slice k's mean is
        ``mean + 0.25 sin(2 pi k / N)`` and its covariance is scaled by ``1 + 0.5 k / max(N - 1, 1)``.
        """
        N = check_scalar(N, "N", int, min=1)
        S = separable_covariance(h, w, rho, scale)
        D = S.shape[0]
        k = np.arange(N)
        if slice_varying:
            means = (mean + 0.25 * np.sin(2 * np.pi * k / N))[:, None] * np.ones((N, D))
            covs = (1 + 0.5 * k / max(N - 1, 1))[:, None, None] * S
        else:
            means, covs = np.full((N, D), mean), np.broadcast_to(S, (N, D, D)).copy()
        return cls(means, covs)

    @property
    def N(self) -> int:
        return self.means.shape[0]

    @property
    def D(self) -> int:
        return self.means.shape[1]

    def check_against(self, prior: GaussianPrior) -> None:
        if (self.N, self.D) != (prior.N, prior.D):
            raise ValueError(
                f"targets are {self.N} slices of dimension {self.D} but the prior has "
                f"N = {prior.N}, D = {prior.D}"
            )

    def reversed(self) -> "GaussianTargets":
        return GaussianTargets(self.means[::-1].copy(), self.covs[::-1].copy())


# ============================================================================ discrete chain
@dataclass(frozen=True)
class ChainPrior:
    """Stationary Markov chain over N slices on the grid ``z`` (G points on [-L, L])."""

    N: int
    z: np.ndarray
    ell: float
    log_K: np.ndarray  # (G, G), rows sum to 1 in probability
    log_r: np.ndarray  # (G,), the stationary law

    @classmethod
    def create(cls, N: int, G: int = 128, L: float = 3.0, ell: float = 0.5) -> "ChainPrior":
        N = check_scalar(N, "N", int, min=1)
        G = check_scalar(G, "G", int, min=2)
        L = check_scalar(L, "L", float, min=0, inclusive="neither")
        ell = check_scalar(ell, "ell", float, min=0, inclusive="neither")
        z = np.linspace(-L, L, G)
        logk = -((z[:, None] - z[None, :]) ** 2) / (2 * ell**2)
        rows = logsumexp(logk, axis=1)
        log_K = logk - rows[:, None]
        log_r = rows - logsumexp(rows)  # reversible: r(g) ~ row sum of the unnormalised kernel
        return cls(N, z, ell, log_K, log_r)

    @property
    def G(self) -> int:
        return self.z.size

    @property
    def dz(self) -> float:
        return float(self.z[1] - self.z[0])

    def with_N(self, N: int) -> "ChainPrior":
        return ChainPrior(check_scalar(N, "N", int, min=1), self.z, self.ell, self.log_K, self.log_r)


TARGET_SHAPES = ("smooth", "kinked")


def discrete_target(z, shape: str = "kinked") -> np.ndarray:
    """The spec's discretised bimodal targets on the grid ``z`` (sum 1)."""
    z = check_array(z, "z", ndim=1, dtype=float, min_size=2)
    check_choice(shape, "shape", TARGET_SHAPES)
    if shape == "smooth":
        logd = np.logaddexp(-((z + 1) ** 2) / (2 * 0.3**2), -((z - 1) ** 2) / (2 * 0.3**2))
    else:
        logd = np.logaddexp(-np.abs(z + 1) / 0.4, -np.abs(z - 1) / 0.4)
    return np.exp(logd - logsumexp(logd))


def check_probability(p, name: str, G: int | None = None) -> np.ndarray:
    """``p`` as a probability vector: non-negative, summing to 1 within 1e-9 (length G if given)."""
    p = check_array(p, name, ndim=1, dtype=float, min_size=1)
    if G is not None and p.size != G:
        raise ValueError(f"{name} must have {G} entries (the grid size), got {p.size}")
    if np.any(p < 0):
        raise ValueError(f"{name} must be non-negative, got min {p.min():.3g}")
    if abs(p.sum() - 1.0) > PROB_TOL:
        raise ValueError(f"{name} must sum to 1 (within {PROB_TOL:g}), got {p.sum():.12g}")
    return p


def discrete_targets(prior: ChainPrior, mu, slice_varying: bool = False) -> np.ndarray:
    """``(N, G)`` slice targets from one vector, an (N, G) array, or a shape name.

    ``slice_varying`` (ASSUMPTION): slice k's target is the one vector shifted by
    ``round(0.25 sin(2 pi k / N) / dz)`` grid points (then renormalised).
    """
    if isinstance(mu, str):
        mu = discrete_target(prior.z, mu)
    arr = np.asarray(mu, dtype=float)
    if arr.ndim == 1:
        base = check_probability(arr, "mu", prior.G)
        if slice_varying:
            shifts = np.round(0.25 * np.sin(2 * np.pi * np.arange(prior.N) / prior.N) / prior.dz).astype(int)
            rows = [np.roll(base, s) for s in shifts]
            arr = np.stack([r / r.sum() for r in rows])
        else:
            arr = np.tile(base, (prior.N, 1))
    if arr.ndim != 2 or arr.shape != (prior.N, prior.G):
        raise ValueError(f"mu must be a grid vector or have shape ({prior.N}, {prior.G}), got {arr.shape}")
    for k in range(prior.N):
        check_probability(arr[k], f"mu[{k}]", prior.G)
    if prior.N >= 2:
        # infeasible zeros: a target state that no neighbour state can reach under K
        reach = np.exp(prior.log_K).T @ (arr > 0).T  # (G, N): can slice k's support reach state g
        for k in range(prior.N - 1):
            cannot = (arr[k + 1] > 0) & (reach[:, k] == 0)
            if np.any(cannot):
                raise InfeasibleError(
                    f"mu[{k + 1}] puts mass on states unreachable from the support of "
                    f"mu[{k}] under the kernel K (e.g. state {int(np.argmax(cannot))})"
                )
    return arr.copy()
