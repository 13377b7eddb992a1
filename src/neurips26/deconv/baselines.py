"""Classical deconvolution / empirical-Bayes baselines, re-implemented in numpy.

* :func:`naive_kde` — Gaussian KDE on the noisy x (ignores noise; lower bar) or on clean z (oracle).
* :class:`DeconKDE` — deconvolution kernel density estimator (Fan 1991; Stefanski–Carroll;
  heteroscedastic Delaigle–Meister 2008), the estimator of R's ``decon``.
* :class:`NPMLE` — Kiefer–Wolfowitz NPMLE on a fixed grid, by EM (REBayes ``GLmix``/``npeb``),
  optional exact convex solve with cvxpy + Clarabel.
* :class:`ExtremeDeconvolution` — XD, EM for a GMM under heteroscedastic Gaussian noise (Bovy et al. 2011).
* :class:`GModel` — Efron's g-modeling (``deconvolveR``): log-spline prior, penalised ML.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy import optimize

import numbers

from sklearn.base import BaseEstimator, DensityMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from neurips26.deconv._validation import _check_typed_noise, _dense_2d, check_noise, check_x
from neurips26.harness.validation import check_scalar
from neurips26.deconv.data import cdf_from_atoms
from neurips26.deconv.noise import NoiseModel


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    return (m + np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True))).squeeze(axis)


def _rng_from(random_state) -> np.random.Generator:
    """int: reproducible; None: fresh draws each call (NumPy's global RandomState, scikit-learn
    convention); a RandomState or Generator is advanced."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, (numbers.Integral, np.integer)) and not isinstance(random_state, bool):
        return np.random.default_rng(check_scalar(int(random_state), "random_state", int, min=0))
    if random_state is None or isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(int(check_random_state(random_state).randint(0, 2**31 - 1)))
    raise TypeError(f"random_state must be None, an int, a RandomState or a Generator, "
                    f"got {type(random_state).__name__}")


class _Baseline(DensityMixin, BaseEstimator):
    """scikit-learn conventions shared by the baselines: the constructor only stores its arguments;
    ``fit(X, y=None, *, noise=...)`` validates them and the data (``noise`` keyword-only, a
    :class:`NoiseModel`; ``noise=None`` uses the constructor's); ``score`` = mean ``score_samples``."""

    _one_d = False

    def _check_params(self) -> None:  # pragma: no cover - overridden
        pass

    def _fit_inputs(self, X, y, noise) -> tuple[np.ndarray, NoiseModel]:
        if isinstance(y, (NoiseModel, numbers.Real)) and not isinstance(y, (bool, np.bool_)):
            raise TypeError("the noise model is keyword-only (scikit-learn API): write "
                            "est.fit(X, noise=NoiseModel(...)) instead of est.fit(X, noise); y is ignored")
        self._check_params()
        noise = _check_typed_noise(self.noise if noise is None else noise)
        xa = check_x(_dense_2d(X), "X")
        if self._one_d and xa.shape[1] != 1:
            raise ValueError(f"X must have one column ({type(self).__name__} is 1-D), got {xa.shape[1]}")
        noise = check_noise(noise, xa, x_raw=X)
        self.n_features_in_ = xa.shape[1]
        return xa, noise

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "n_features_in_") and hasattr(self, "_fitted")

    def _check_z(self, z, name: str = "X") -> np.ndarray:
        check_is_fitted(self, msg=f"{type(self).__name__} is not fitted; call fit(X, noise=...) first")
        arr = check_x(_dense_2d(z, name), name, min_rows=1)
        if arr.shape[1] != self.n_features_in_:
            raise ValueError(f"{name} has {arr.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input")
        return arr

    def score(self, X, y=None) -> float:
        """Mean of ``score_samples(X)`` (see each class for what it measures)."""
        return float(np.mean(self.score_samples(X)))


# ============================================================================ naive KDE
def naive_kde(data, grid, bandwidth: float | str = "silverman") -> np.ndarray:
    """Gaussian KDE of 1-D ``data`` evaluated on ``grid`` (Silverman's or Scott's rule, or a float)."""
    x = np.asarray(data, dtype=np.float64).reshape(-1)
    if x.size < 2 or not np.all(np.isfinite(x)):
        raise ValueError("data must hold at least 2 finite values")
    n, sd = x.size, x.std(ddof=1)
    iqr = np.subtract(*np.percentile(x, [75, 25]))
    if bandwidth == "silverman":
        h = 0.9 * min(sd, iqr / 1.34) * n ** (-0.2)
    elif bandwidth == "scott":
        h = 1.06 * sd * n ** (-0.2)
    else:
        h = check_scalar(bandwidth, "bandwidth", float, min=0, inclusive="neither")
    g = np.asarray(grid, dtype=np.float64).reshape(-1)
    u = (g[:, None] - x[None]) / h
    return np.exp(-0.5 * u**2).sum(1) / (n * h * math.sqrt(2 * math.pi))


def kde_score(x, data, h: float) -> np.ndarray:
    """d/dx log p_hat(x) for a Gaussian KDE of ``data`` with bandwidth h (1-D or d-D, isotropic)."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    data = np.atleast_2d(np.asarray(data, dtype=np.float64))
    diff = data[None, :, :] - x[:, None, :]                      # (m, n, d)
    logw = -0.5 * (diff**2).sum(-1) / h**2
    w = np.exp(logw - logw.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    return np.einsum("mn,mnd->md", w, diff) / h**2


# ============================================================================ deconvolution KDE
def support_kernel_ft(t: np.ndarray) -> np.ndarray:
    """phi_K(t) = (1 - t^2)^3 on [-1, 1] (decon's "support" kernel), 0 outside."""
    t = np.asarray(t, dtype=np.float64)
    return np.where(np.abs(t) <= 1, (1 - t**2) ** 3, 0.0)


def support_kernel(u: np.ndarray) -> np.ndarray:
    """K(u) = (1/2pi) int (1-t^2)^3 cos(tu) dt.  Closed form
    48 cos u/(pi u^4)(1 - 15/u^2) - 144 sin u/(pi u^5)(2 - 5/u^2) cancels catastrophically for small
    |u|, so |u| <= 2 uses quadrature (K(0) = 16/(35 pi))."""
    u = np.asarray(u, dtype=np.float64)
    out = np.empty_like(u)
    small = np.abs(u) <= 2
    us = u[small]
    t = np.linspace(0, 1, 4001)
    out[small] = np.trapezoid(((1 - t**2) ** 3)[None] * np.cos(t[None] * us[:, None]), t, axis=1) / math.pi
    ub = u[~small]
    out[~small] = (48 * np.cos(ub) / (math.pi * ub**4) * (1 - 15 / ub**2)
                   - 144 * np.sin(ub) / (math.pi * ub**5) * (2 - 5 / ub**2))
    return out


class DeconKDE(_Baseline):
    """Deconvolution KDE for 1-D data with known (possibly heteroscedastic) noise::

        f_hat(z) = (1/2pi) int_{-1/h}^{1/h} e^{-itz} phi_K(th) [sum_j e^{itX_j}] / [sum_j phi_{eps_j}(t)] dt

    (trapezoid on 2049 t-points).  ``bandwidth``: a float, ``"cv"`` (deconvolution cross-validation,
    largest local minimiser on a 30-point log grid in [0.02, 1] sd(x); normal-reference fallback) or
    ``"nr"`` (normal-reference AMISE rule).

    scikit-learn estimator (1-D): ``score_samples`` = log max(f_hat(z), 1e-300) of the *unclipped*
    estimate (f_hat can dip below 0 in the tails: those rows get log 1e-300 = -690.8); ``sample`` draws
    from the clipped estimate by inverse CDF on a 4001-point grid over the data range +- 4 sd.
    """

    _one_d = True

    def __init__(self, bandwidth: float | str = "cv", n_t: int = 2049, noise: NoiseModel | None = None) -> None:
        self.bandwidth = bandwidth
        self.n_t = n_t
        self.noise = noise

    def _check_params(self) -> None:
        if not (isinstance(self.bandwidth, str) and self.bandwidth in ("cv", "nr")):
            if isinstance(self.bandwidth, str):
                raise ValueError(f"bandwidth must be 'cv', 'nr' or a positive float, got {self.bandwidth!r}")
            check_scalar(self.bandwidth, "bandwidth", float, min=0, inclusive="neither")
        check_scalar(self.n_t, "n_t", int, min=3)

    def fit(self, X, y=None, *, noise: NoiseModel | None = None) -> "DeconKDE":
        xa, noise = self._fit_inputs(X, y, noise)
        self._fitted = True
        self.x_ = xa[:, 0]
        self.noise_ = noise
        n = len(self.x_)
        self._rows = n if noise.n_rows == n else 1
        self.cv_curve_ = None
        if self.bandwidth == "cv":
            self.h_, self.h_rule_ = self._cv_bandwidth()
        elif self.bandwidth == "nr":
            self.h_, self.h_rule_ = self._nr_bandwidth(), "normal-reference"
        else:
            self.h_, self.h_rule_ = float(self.bandwidth), "given"
        return self

    # ---------------------------------------------------------------- Fourier pieces
    def _AD(self, t: np.ndarray):
        """A(t) = sum_j e^{itX_j}, D(t) = sum_j phi_j(t), D2(t) = sum_j phi_j(t)^2."""
        n = len(self.x_)
        tx = t[:, None] * self.x_[None]
        A = np.cos(tx).sum(1) + 1j * np.sin(tx).sum(1)
        phi = self.noise_.char_fn(t)                      # (rows, T)
        if phi.shape[0] == 1:
            D, D2 = n * phi[0], n * phi[0] ** 2
        else:
            D, D2 = phi.sum(0), (phi**2).sum(0)
        return A, D, D2

    def pdf(self, z, h: float | None = None) -> np.ndarray:
        """The (unclipped) deconvolution KDE at z (1-D array)."""
        check_is_fitted(self, msg="DeconKDE is not fitted; call fit(X, noise=...) first")
        h = self.h_ if h is None else h
        z = np.asarray(z, dtype=np.float64).reshape(-1)
        t = np.linspace(0.0, 1.0 / h, (self.n_t + 1) // 2)   # symmetric integrand: 2 x int_0^{1/h} Re
        A, D, _ = self._AD(t)
        g = support_kernel_ft(t * h) * A / D
        integrand = (np.cos(np.outer(z, t)) * g.real[None] + np.sin(np.outer(z, t)) * g.imag[None])
        return np.trapezoid(integrand, t, axis=1) / math.pi

    def pdf_clipped(self, z, h: float | None = None) -> np.ndarray:
        """max(f_hat, 0) renormalised on the evaluation grid z (for reporting only)."""
        z = np.asarray(z, dtype=np.float64).reshape(-1)
        f = np.maximum(self.pdf(z, h), 0.0)
        mass = np.trapezoid(f, z)
        return f / mass if mass > 0 else f

    def score_samples(self, X) -> np.ndarray:
        """log max(f_hat(z), 1e-300) at the rows of X (latent points), shape (n,)."""
        z = self._check_z(X)
        return np.log(np.maximum(self.pdf(z[:, 0]), 1e-300))

    def sample(self, n: int, random_state=None) -> np.ndarray:
        """n draws (n, 1) from the clipped estimate (inverse CDF on a 4001-point grid, linear in a cell)."""
        check_is_fitted(self, msg="DeconKDE is not fitted; call fit(X, noise=...) first")
        check_scalar(n, "n", int, min=1)
        sd = max(float(self.x_.std()), 1e-12)
        grid = np.linspace(self.x_.min() - 4 * sd, self.x_.max() + 4 * sd, 4001)
        f = self.pdf_clipped(grid)
        cdf = np.concatenate([[0.0], np.cumsum(0.5 * (f[1:] + f[:-1]) * np.diff(grid))])
        cdf /= cdf[-1]
        return np.interp(_rng_from(random_state).random(n), cdf, grid)[:, None]

    # ---------------------------------------------------------------- bandwidths
    def cv_score(self, h: float) -> float:
        """CV(h) = (1/2pi) int_{-1/h}^{1/h} [phi_K(th)^2 |A|^2/D^2 - 2 phi_K(th)(|A|^2 - n)/(D^2 - D2)] dt."""
        n = len(self.x_)
        t = np.linspace(0.0, 1.0 / h, (self.n_t + 1) // 2)
        A, D, D2 = self._AD(t)
        k = support_kernel_ft(t * h)
        A2 = np.abs(A) ** 2
        val = k**2 * A2 / D**2 - 2 * k * (A2 - n) / (D**2 - D2)
        return float(2 * np.trapezoid(val, t) / (2 * math.pi))

    def _nr_bandwidth(self) -> float:
        """h minimising (1/(2 pi n h)) int_{-1}^{1} phi_K(u)^2/|phibar(u/h)|^2 du + (h^4/4) 36 R(f''),
        R(f'') = 3/(8 sqrt(pi) sigma^5), sigma^2 = max(var(x) - mean s^2, 0.05 var(x))."""
        x, n = self.x_, len(self.x_)
        s2 = float(np.mean(self.noise_.std_matrix(self._rows, 1) ** 2))
        sig2 = max(x.var() - s2, 0.05 * x.var())
        Rf2 = 3.0 / (8.0 * math.sqrt(math.pi) * sig2**2.5)
        u = np.linspace(-1, 1, 801)

        def amise(logh):
            h = math.exp(logh)
            phibar = self.noise_.char_fn(u / h).mean(0)
            var = np.trapezoid(support_kernel_ft(u) ** 2 / phibar**2, u) / (2 * math.pi * n * h)
            return var + h**4 / 4 * 36 * Rf2

        sd = x.std()
        res = optimize.minimize_scalar(amise, bounds=(math.log(0.01 * sd), math.log(3 * sd)),
                                       method="bounded")
        return float(math.exp(res.x))

    def _cv_bandwidth(self) -> tuple[float, str]:
        sd = self.x_.std()
        hs = np.exp(np.linspace(math.log(0.02 * sd), math.log(1.0 * sd), 30))
        cv = np.array([self.cv_score(h) for h in hs])
        self.cv_curve_ = (hs, cv)
        loc = [i for i in range(1, len(hs) - 1) if cv[i] < cv[i - 1] and cv[i] < cv[i + 1]]
        if loc:
            return float(hs[max(loc)]), "cv"
        return self._nr_bandwidth(), "normal-reference (no interior CV minimum)"


# ============================================================================ NPMLE
class NPMLE(_Baseline):
    """Kiefer–Wolfowitz NPMLE of the latent law on fixed atoms theta_j, by EM::

        w <- w * L^T (1 / (L w)) / n,   L_ij = f_{eps_i}(x_i - theta_j)

    with the row-rescaled L~_ij = exp(log L_ij - max_j log L_ij) (row scaling leaves the update
    unchanged).  Atoms: M = 300 grid points over [min x, max x] in 1-D, a 1000-point subsample of x
    in d > 1 (Soloff et al.).  ``solver="exact"`` solves max sum_i log(L~ w) over the simplex with
    cvxpy + Clarabel (n <= 500; falls back to EM on SolverError or larger n, noted in ``solver_used_``).

    scikit-learn estimator.  The NPMLE is discrete, so it has no latent density: ``score_samples(X,
    noise=None)`` is the log marginal density of *observations* X, log sum_j w_j f_eps(x_i - theta_j),
    with ``noise`` (default: the constructor's ``noise``, else the fit's when it was homoscedastic).
    ``sample`` draws atoms with their weights.  ``random_state`` picks the atom subsample in d > 1.
    """

    def __init__(self, n_atoms: int = 300, max_iter: int = 2000, tol: float = 1e-8, solver: str = "em",
                 noise: NoiseModel | None = None, random_state=0) -> None:
        self.n_atoms = n_atoms
        self.max_iter = max_iter
        self.tol = tol
        self.solver = solver
        self.noise = noise
        self.random_state = random_state

    def _check_params(self) -> None:
        check_scalar(self.n_atoms, "n_atoms", int, min=2)
        check_scalar(self.max_iter, "max_iter", int, min=1)
        check_scalar(self.tol, "tol", float, min=0)
        if self.solver not in ("em", "exact"):
            raise ValueError(f"solver must be 'em' or 'exact', got {self.solver!r}")

    def _loglik_matrix(self, x: np.ndarray, noise: NoiseModel, atoms: np.ndarray) -> np.ndarray:
        n, d = x.shape
        rows = noise if noise.n_rows == n else NoiseModel(noise.family, std=noise.std_matrix(n, d)) \
            if not noise.full_cov else NoiseModel("gaussian", cov=noise.cov_matrix(n, d))
        out = np.empty((n, len(atoms)))
        for s in range(0, n, 256):
            sub = rows.subset(np.arange(s, min(s + 256, n)))
            out[s:s + 256] = sub.log_pdf(x[s:s + 256, None, :] - atoms[None])
        return out

    def fit(self, X, y=None, *, noise: NoiseModel | None = None) -> "NPMLE":
        xa, noise = self._fit_inputs(X, y, noise)
        self._fitted = True
        self.fit_noise_ = noise
        n, d = xa.shape
        if d == 1:
            atoms = np.linspace(xa.min(), xa.max(), self.n_atoms)[:, None]
        else:
            rng = _rng_from(self.random_state)
            atoms = xa[rng.choice(n, min(n, 1000), replace=False)]
        logL = self._loglik_matrix(xa, noise, atoms)
        rowmax = logL.max(1, keepdims=True)
        Lt = np.exp(logL - rowmax)
        self.atoms_, self.row_log_scale_ = atoms, rowmax[:, 0]
        self.solver_used_ = "em"
        t0 = time.perf_counter()
        if self.solver == "exact":
            w = self._exact(Lt) if n <= 500 else None
            if w is not None:
                self.solver_used_ = "exact"
            else:
                why = "n > 500" if n > 500 else "SolverError"
                self.solver_used_ = f"em (exact solve unavailable: {why})"
        if self.solver_used_ == "em" or self.solver_used_.startswith("em ("):
            w = self._em(Lt)
        self.fit_seconds_ = time.perf_counter() - t0
        self.weights_ = w
        self.loglik_ = float(np.sum(np.log(Lt @ w) + rowmax[:, 0]))
        return self

    def _em(self, Lt: np.ndarray) -> np.ndarray:
        n, m = Lt.shape
        w = np.full(m, 1.0 / m)
        ll_prev = -np.inf
        self.loglik_path_ = []
        for it in range(self.max_iter):
            f = Lt @ w
            ll = float(np.sum(np.log(f)))
            self.loglik_path_.append(ll)
            if ll - ll_prev < self.tol * n:
                break
            ll_prev = ll
            w = w * (Lt.T @ (1.0 / f)) / n
        self.n_iter_ = it + 1
        return w / w.sum()

    def _exact(self, Lt: np.ndarray) -> np.ndarray | None:
        try:
            import cvxpy as cp
        except ImportError:
            return None
        m = Lt.shape[1]
        w = cp.Variable(m, nonneg=True)
        prob = cp.Problem(cp.Maximize(cp.sum(cp.log(Lt @ w))), [cp.sum(w) == 1])
        try:
            prob.solve(solver=cp.CLARABEL)
        except (cp.error.SolverError, Exception):   # Clarabel fails on large exp-cone problems
            return None
        if w.value is None:
            return None
        v = np.maximum(np.asarray(w.value).reshape(-1), 0.0)
        return v / v.sum()

    def cdf(self, grid) -> np.ndarray:
        """1-D CDF of the discrete NPMLE on ``grid``."""
        return cdf_from_atoms(self.atoms_[:, 0], self.weights_, np.asarray(grid).reshape(-1))

    def _score_noise(self, noise, n: int) -> NoiseModel:
        if noise is None:
            noise = self.noise if self.noise is not None else self.fit_noise_
            if not noise.homoscedastic and noise.n_rows != n:
                raise ValueError("noise is required for rows other than the heteroscedastic fit's: "
                                 "score_samples(X, noise=NoiseModel(...))")
        return noise

    def score_samples(self, X, noise: NoiseModel | None = None) -> np.ndarray:
        """log sum_j w_j f_eps(x_i - theta_j): log marginal density of the observations X, shape (n,)."""
        xa = self._check_z(X)
        noise = check_noise(_check_typed_noise(self._score_noise(noise, len(xa))), xa)
        lw = self._loglik_matrix(xa, noise, self.atoms_) + np.log(np.maximum(self.weights_, 1e-300))[None]
        return _logsumexp(lw, 1)

    def sample(self, n: int, random_state=None) -> np.ndarray:
        """n draws (n, d) from the discrete NPMLE (atoms with their weights)."""
        check_is_fitted(self, msg="NPMLE is not fitted; call fit(X, noise=...) first")
        check_scalar(n, "n", int, min=1)
        k = _rng_from(random_state).choice(len(self.weights_), n, p=self.weights_ / self.weights_.sum())
        return self.atoms_[k].copy()

    def posterior_mean(self, x, noise) -> np.ndarray:
        """sum_j theta_j w_j L_ij / sum_j w_j L_ij, shape (n, d)."""
        xa = check_x(x, min_rows=1)
        noise = check_noise(noise, xa)
        logL = self._loglik_matrix(xa, noise, self.atoms_)
        lw = logL + np.log(np.maximum(self.weights_, 1e-300))[None]
        p = np.exp(lw - lw.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        return p @ self.atoms_


# ============================================================================ extreme deconvolution
class ExtremeDeconvolution(_Baseline):
    """XD: EM for sum_k pi_k N(mu_k, V_k) observed under heteroscedastic Gaussian noise S_i.

    E-step: T_ik = V_k + S_i; q_ik ∝ pi_k N(x_i; mu_k, T_ik); b_ik = mu_k + V_k T_ik^{-1}(x_i - mu_k);
    B_ik = V_k - V_k T_ik^{-1} V_k.  M-step: pi_k = mean_i q_ik; mu_k = sum_i q_ik b_ik / sum_i q_ik;
    V_k = sum_i q_ik [(mu_k - b_ik)(mu_k - b_ik)^T + B_ik] / sum_i q_ik + reg I.

    scikit-learn estimator: ``score_samples`` = log of the fitted latent GMM density; ``sample`` draws
    from it; ``random_state`` picks the initial means (K distinct rows of X).
    """

    def __init__(self, n_components: int = 6, max_iter: int = 500, tol: float = 1e-6, reg: float = 1e-6,
                 noise: NoiseModel | None = None, random_state=0) -> None:
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.reg = reg
        self.noise = noise
        self.random_state = random_state

    def _check_params(self) -> None:
        check_scalar(self.n_components, "n_components", int, min=1)
        check_scalar(self.max_iter, "max_iter", int, min=1)
        check_scalar(self.tol, "tol", float, min=0)
        check_scalar(self.reg, "reg", float, min=0)

    def fit(self, X, y=None, *, noise: NoiseModel | None = None,
            init: tuple | None = None) -> "ExtremeDeconvolution":
        """``init`` = (weights, means, covs) to start from; default K random rows as means, data cov / K."""
        xa, noise = self._fit_inputs(X, y, noise)
        if noise.family != "gaussian":
            raise ValueError("noise: extreme deconvolution needs Gaussian noise (family='gaussian')")
        n, d = xa.shape
        S = noise.cov_matrix(n, d)
        K = self.n_components
        if init is None:
            if K > n:
                raise ValueError(f"n_components = {K} exceeds the number of rows n = {n}")
            rng = _rng_from(self.random_state)
            mu = xa[rng.choice(n, K, replace=False)]
            V = np.repeat(np.atleast_2d(np.cov(xa.T))[None] / K, K, 0)
            pi = np.full(K, 1.0 / K)
        else:
            pi, mu, V = (np.array(a, dtype=np.float64) for a in init)
        prev = -np.inf
        self.loglik_path_ = []
        for it in range(self.max_iter):
            pi, mu, V, ll = self._em_step(xa, S, pi, mu, V)
            self.loglik_path_.append(ll)
            if abs(ll - prev) < self.tol * n:
                break
            prev = ll
        self.weights_, self.means_, self.covariances_ = pi, mu, V
        self.n_iter_ = it + 1
        self._fitted = True
        return self

    def _em_step(self, x, S, pi, mu, V):
        n, d = x.shape
        T = V[None] + S[:, None]                                  # (n, K, d, d)
        Tinv = np.linalg.inv(T)
        r = x[:, None, :] - mu[None]                              # (n, K, d)
        sol = np.einsum("nkij,nkj->nki", Tinv, r)
        _, logdet = np.linalg.slogdet(T)
        logN = -0.5 * (np.einsum("nki,nki->nk", r, sol) + logdet + d * math.log(2 * math.pi))
        lq = logN + np.log(np.maximum(pi, 1e-300))[None]
        ll = float(np.sum(_logsumexp(lq, 1)))
        q = np.exp(lq - _logsumexp(lq, 1)[:, None])
        b = mu[None] + np.einsum("kij,nkj->nki", V, sol)
        B = V[None] - np.einsum("kij,nkjl,klm->nkim", V, Tinv, V)
        qs = q.sum(0)
        pi = qs / n
        mu = np.einsum("nk,nki->ki", q, b) / qs[:, None]
        dm = mu[None] - b
        V = (np.einsum("nk,nki,nkj->kij", q, dm, dm) + np.einsum("nk,nkij->kij", q, B)) / qs[:, None, None]
        V = V + self.reg * np.eye(d)[None]
        return pi, mu, V, ll

    def score_samples(self, X) -> np.ndarray:
        """log of the fitted latent GMM density at the rows of X, shape (n,)."""
        z = self._check_z(X)
        from scipy.stats import multivariate_normal
        lp = np.stack([np.log(max(w, 1e-300)) + np.atleast_1d(multivariate_normal(m, c).logpdf(z))
                       for w, m, c in zip(self.weights_, self.means_, self.covariances_)], 1)
        return _logsumexp(lp, 1)

    def pdf(self, z) -> np.ndarray:
        return np.exp(self.score_samples(z))

    def sample(self, n: int, random_state=None) -> np.ndarray:
        """n draws (n, d) from the fitted latent GMM (int random_state: reproducible; None: fresh)."""
        check_is_fitted(self, msg="ExtremeDeconvolution is not fitted; call fit(X, noise=...) first")
        check_scalar(n, "n", int, min=1)
        rng = _rng_from(random_state)
        k = rng.choice(len(self.weights_), n, p=self.weights_ / self.weights_.sum())
        L = np.linalg.cholesky(self.covariances_)
        return self.means_[k] + np.einsum("nij,nj->ni", L[k], rng.standard_normal((n, self.means_.shape[1])))


# ============================================================================ g-modeling
def natural_spline_basis(grid: np.ndarray, df: int = 5) -> np.ndarray:
    """Natural cubic spline basis on ``grid`` with ``df`` columns (constant dropped): boundary knots
    at the grid ends, df-1 interior knots at grid quantiles (0.2..0.8 for df = 5) — the span of R's
    ``ns(grid, df = df)`` (the column basis differs).  Truncated-power form (ESL eq. 5.4-5.5)."""
    g = np.asarray(grid, dtype=np.float64)
    inner = np.quantile(g, np.linspace(0, 1, df + 1)[1:-1])
    knots = np.concatenate([[g.min()], inner, [g.max()]])
    K = len(knots)

    def dk(k):
        num = np.maximum(g - knots[k], 0) ** 3 - np.maximum(g - knots[K - 1], 0) ** 3
        return num / (knots[K - 1] - knots[k])

    cols = [g] + [dk(k) - dk(K - 2) for k in range(K - 2)]
    return np.stack(cols, 1)


class GModel(_Baseline):
    """Efron's g-modeling (deconvolveR): g(alpha) = softmax(Q alpha) on m grid atoms, Q a 5-df natural
    spline basis with centred unit-L2-norm columns; maximise
    ``sum_i log sum_j P_ij g_j(alpha) - c0 ||alpha||_2`` (the norm, not its square) by L-BFGS from
    alpha = 1, P_ij = f_{eps_i}(x_i - theta_j).  1-D only.

    scikit-learn estimator (1-D): ``score_samples`` = log max(pdf(z), 1e-300) of the piecewise-linear
    density g_j / dtheta (0 outside the grid: -690.8 there); ``sample`` draws grid atoms with weights g_j
    plus a uniform jitter of +- dtheta / 2 (the histogram of g)."""

    _one_d = True

    def __init__(self, n_atoms: int = 200, df: int = 5, c0: float = 1.0, noise: NoiseModel | None = None) -> None:
        self.n_atoms = n_atoms
        self.df = df
        self.c0 = c0
        self.noise = noise

    def _check_params(self) -> None:
        check_scalar(self.n_atoms, "n_atoms", int, min=3)
        check_scalar(self.df, "df", int, min=1)
        check_scalar(self.c0, "c0", float, min=0)

    def fit(self, X, y=None, *, noise: NoiseModel | None = None) -> "GModel":
        xa, noise = self._fit_inputs(X, y, noise)
        n = len(xa)
        theta = np.linspace(xa.min(), xa.max(), self.n_atoms)
        Q = natural_spline_basis(theta, self.df)
        Q = Q - Q.mean(0)
        Q = Q / np.linalg.norm(Q, axis=0)
        rows = noise if noise.n_rows == n else NoiseModel(noise.family, std=noise.std_matrix(n, 1))
        logP = rows.log_pdf(xa[:, None, :] - theta[None, :, None])
        rowmax = logP.max(1, keepdims=True)
        P = np.exp(logP - rowmax)

        def obj(a):
            eta = Q @ a
            g = np.exp(eta - eta.max())
            g /= g.sum()
            f = P @ g
            ll = np.sum(np.log(f))
            nrm = np.linalg.norm(a)
            r = P.T @ (1.0 / f)                        # d ll / d g_j
            grad_ll = Q.T @ (g * r - g * (g @ r))      # chain rule through softmax
            val = -ll + float(self.c0) * nrm
            grad = -grad_ll + (float(self.c0) * a / nrm if nrm > 0 else 0.0)
            return val, grad

        res = optimize.minimize(obj, np.ones(Q.shape[1]), jac=True, method="L-BFGS-B",
                                options={"maxiter": 2000})
        a = res.x
        eta = Q @ a
        g = np.exp(eta - eta.max())
        self.theta_, self.g_, self.alpha_, self.Q_ = theta, g / g.sum(), a, Q
        self._objective = obj
        self.converged_ = bool(res.success)
        self._fitted = True
        return self

    def objective_(self, a):
        """The penalised negative log-likelihood and its gradient at alpha = a (after fit)."""
        return self._objective(a)

    def score_samples(self, X) -> np.ndarray:
        """log max(pdf(z), 1e-300) at the rows of X (latent points), shape (n,)."""
        z = self._check_z(X)
        return np.log(np.maximum(self.pdf(z[:, 0]), 1e-300))

    def sample(self, n: int, random_state=None) -> np.ndarray:
        """n draws (n, 1): grid atoms with weights g_j, jittered uniformly within +- dtheta / 2."""
        check_is_fitted(self, msg="GModel is not fitted; call fit(X, noise=...) first")
        check_scalar(n, "n", int, min=1)
        rng = _rng_from(random_state)
        dth = self.theta_[1] - self.theta_[0]
        k = rng.choice(len(self.g_), n, p=self.g_)
        return (self.theta_[k] + dth * (rng.random(n) - 0.5))[:, None]

    def pdf(self, z) -> np.ndarray:
        """Piecewise-linear density g_j / dtheta interpolated at z (0 outside the grid)."""
        check_is_fitted(self, msg="GModel is not fitted; call fit(X, noise=...) first")
        dth = self.theta_[1] - self.theta_[0]
        return np.interp(np.asarray(z, dtype=np.float64).reshape(-1), self.theta_, self.g_ / dth,
                         left=0.0, right=0.0)

    def posterior_mean(self, x, noise) -> np.ndarray:
        xa = check_x(x, min_rows=1)
        noise = check_noise(noise, xa)
        n = len(xa)
        rows = noise if noise.n_rows == n else NoiseModel(noise.family, std=noise.std_matrix(n, 1))
        lw = rows.log_pdf(xa[:, None, :] - self.theta_[None, :, None]) + np.log(np.maximum(self.g_, 1e-300))
        p = np.exp(lw - lw.max(1, keepdims=True))
        return ((p @ self.theta_) / p.sum(1))[:, None]
