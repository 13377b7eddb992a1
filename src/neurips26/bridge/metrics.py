"""Metrics of a surrogate against P*: exact KL, TV (Monte Carlo +- 2 s.e., exact enumeration, Pinsker),
normalised curves, late-step slopes, the noise-alignment ratio a_tau and the bound's ingredients.

* KL: Gaussian closed form (block-tridiagonal for tilts of one prior), chain exact via forward-backward.
* TV: ``E_Pi[(1 - dP*/dPi)_+]`` with exact log ratios, ``n`` samples from Pi (fixed seed), +- 2 s.e.;
  on chains exact enumeration when ``G^N <= 2^20``; always also Pinsker ``sqrt(KL / 2)``.
* ``a_tau = sd_{P*}(Delta_tau) / sigma_tau``, ``Delta = sum_k (psi_k - phi_k)(x_k)``.
* Bound ingredients (a reconstruction; reported, never asserted): ``L_k`` = Lipschitz constant of
  ``psi_k - phi_k`` (Gaussian: sup of ``||(A*_k - A_k) y + (b_k - b*_k)||`` over a +-4 sd box around the
  P* slice mean; grid: max |finite difference| / dz),
  ``c_post = lambda_max(Cov(x | x + sigma xi)) / sigma^2``,
  ``C_hat = KL / (sigma^2 sum_k L_k^2 c_post)``.
"""

from __future__ import annotations

import itertools

import numpy as np

from neurips26.bridge.chain import ENUM_MAX, ChainLaw, chain_kl, delta_variance
from neurips26.bridge.gaussian import DenseGaussian, TiltedGaussian, gaussian_kl
from neurips26.harness.parallel import map_tasks
from neurips26.harness.validation import check_array, check_scalar

DENSE_VAR_MAX = 256
BOX_SD = 4.0
VERTEX_MAX_D = 10


def kl(p, q) -> float:
    """``KL(p || q)`` for two Gaussian laws or two chain laws on the same prior."""
    if isinstance(p, ChainLaw) and isinstance(q, ChainLaw):
        return chain_kl(p, q)
    if isinstance(p, (TiltedGaussian, DenseGaussian)) and isinstance(q, (TiltedGaussian, DenseGaussian)):
        return gaussian_kl(p, q)
    raise TypeError(f"kl needs two Gaussian or two chain laws, got {type(p).__name__}, {type(q).__name__}")


def pinsker(kl_value: float) -> float:
    """Pinsker's bound ``TV <= sqrt(KL / 2)``."""
    return float(np.sqrt(max(kl_value, 0.0) / 2))


def _tv_chunk(job) -> tuple[float, float, int]:
    """Sum, sum of squares and count of ``(1 - q/p)_+`` over one chunk of samples from p (a task)."""
    p, q, m, seed_seq = job
    x = p.sample(m, np.random.default_rng(seed_seq))
    lr = (q.log_prob(x) - p.log_prob(x)) if isinstance(p, ChainLaw) else (q.log_density(x) - p.log_density(x))
    v = np.maximum(0.0, 1.0 - np.exp(np.minimum(lr, 50.0)))
    return float(v.sum()), float(np.sum(v * v)), m


def tv_mc(
    p,
    q,
    n: int = 100_000,
    seed: int = 0,
    chunk: int = 25_000,
    backend: str = "serial",
    workers: int | None = None,
) -> tuple[float, float]:
    """Monte Carlo ``TV(p, q) = E_p[(1 - q/p)_+]``: (estimate, 2 standard errors); exact log ratios.

    The n samples are drawn in chunks, chunk i from ``SeedSequence(seed).spawn(...)[i]``, so the estimate
    is the same on every ``backend`` (``serial``, ``process``, ``ray``: the harness task map); the chunks'
    sums and sums of squares are reduced into the mean and its standard error.
    """
    n = check_scalar(n, "n", int, min=2)
    chunk = check_scalar(chunk, "chunk", int, min=1)
    seeds = np.random.SeedSequence(check_scalar(seed, "seed", int, min=0)).spawn(-(-n // chunk))
    jobs = [(p, q, min(chunk, n - i * chunk), s) for i, s in enumerate(seeds)]
    parts = _tv_chunk_map(jobs, backend, workers)
    total = sum(a for a, _, _ in parts)
    sq = sum(b for _, b, _ in parts)
    mean = total / n
    var = max(sq / n - mean * mean, 0.0) * n / (n - 1)
    return float(mean), float(2 * np.sqrt(var / n))


def _tv_chunk_map(jobs, backend: str, workers: int | None) -> list:
    if backend == "serial":
        return [_tv_chunk(j) for j in jobs]
    return map_tasks(_tv_chunk, jobs, backend=backend, workers=workers, progress=False)


def kl_mc(p, q, n: int = 100_000, seed: int = 0) -> tuple[float, float]:
    """Monte Carlo ``KL(p || q) = E_p[log p - log q]``: (estimate, standard error)."""
    rng = np.random.default_rng(seed)
    x = p.sample(n, rng)
    lr = (p.log_prob(x) - q.log_prob(x)) if isinstance(p, ChainLaw) else (p.log_density(x) - q.log_density(x))
    return float(lr.mean()), float(lr.std(ddof=1) / np.sqrt(n))


def tv_exact(p: ChainLaw, q: ChainLaw) -> float:
    """Exact ``TV = 1/2 sum_x |p(x) - q(x)|`` by enumeration (``G^N <= 2^20``, else ValueError)."""
    if p.G**p.N > ENUM_MAX:
        raise ValueError(f"exact TV needs G^N <= 2^20, got G = {p.G}, N = {p.N} (use tv_mc)")
    return float(0.5 * np.abs(np.exp(p.joint_log_probs()) - np.exp(q.joint_log_probs())).sum())


def alignment_ratio(pi, pstar, sigma: float, n_mc: int = 20_000, seed: int = 0) -> float:
    """``a_tau = sd_{P*}(Delta) / sigma`` (exact; Gaussian with N*D > 256: Monte Carlo, n_mc samples)."""
    sigma = check_scalar(sigma, "sigma", float, min=0, inclusive="neither")
    if isinstance(pi, ChainLaw):
        with np.errstate(invalid="ignore"):
            delta = np.where(np.isfinite(pstar.phi), pi.phi - pstar.phi, 0.0)
        return float(np.sqrt(delta_variance(pstar, delta)) / sigma)
    dA, db = pi.A - pstar.A, pi.b - pstar.b
    if pi.N * pi.D <= DENSE_VAR_MAX:
        m, S = pstar.dense()
        n, D = pi.N * pi.D, pi.D
        M = np.zeros((n, n))
        for k in range(pi.N):
            M[k * D : (k + 1) * D, k * D : (k + 1) * D] = dA[k]
        c = db.reshape(-1) - M @ m
        MS = M @ S
        var = 0.5 * float(np.trace(MS @ MS)) + float(c @ S @ c)
    else:
        x = pstar.sample(n_mc, np.random.default_rng(seed))
        d = -0.5 * np.einsum("nki,kij,nkj->n", x, dA, x) + np.einsum("nki,ki->n", x, db)
        var = float(d.var(ddof=1))
    return float(np.sqrt(max(var, 0.0)) / sigma)


def lipschitz_constants(pi, pstar) -> np.ndarray:
    """``L_k``: Lipschitz constants of ``psi_k - phi_k`` (see the module docstring), shape (N,)."""
    if isinstance(pi, ChainLaw):
        d = pi.phi - pstar.phi
        dz = pi.prior.dz
        out = []
        for row in d:
            fd = np.diff(row)
            fd = fd[np.isfinite(fd)]
            out.append(float(np.max(np.abs(fd)) / dz) if fd.size else 0.0)
        return np.array(out)
    u, V = pstar.marginals()
    L = []
    for k in range(pi.N):
        E, f = pstar.A[k] - pi.A[k], pi.b[k] - pstar.b[k]
        sd = BOX_SD * np.sqrt(np.diag(V[k]))
        if pi.D <= VERTEX_MAX_D:  # the norm is convex: its sup over the box is at a vertex
            signs = np.array(list(itertools.product((-1.0, 1.0), repeat=pi.D)))
            y = u[k][None, :] + signs * sd[None, :]
            L.append(float(np.max(np.linalg.norm(y @ E.T + f, axis=1))))
        else:  # bound over the ball holding the box
            L.append(float(np.linalg.norm(E @ u[k] + f) + np.linalg.norm(E, 2) * np.linalg.norm(sd)))
    return np.array(L)


def posterior_concentration(pstar, sigma: float) -> float:
    """``c_post = lambda_max(Cov(x | y = x + sigma xi)) / sigma^2`` under P*.

    Gaussian: ``1 / (1 + sigma^2 lambda_min(Lambda*))`` (<= 1). Chain (ASSUMPTION: slice-wise): the max over
    slices k and grid points y of ``Var_{p*_k}(x | y) / sigma^2``.
    """
    sigma = check_scalar(sigma, "sigma", float, min=0, inclusive="neither")
    if isinstance(pstar, ChainLaw):
        z = pstar.prior.z
        best = 0.0
        for p in pstar.marginals():
            w = p[None, :] * np.exp(-((z[:, None] - z[None, :]) ** 2) / (2 * sigma**2))
            w = w / np.maximum(w.sum(axis=1, keepdims=True), 1e-300)
            mean = w @ z
            var = w @ z**2 - mean**2
            best = max(best, float(var.max()))
        return best / sigma**2
    lmin = _lambda_min_precision(pstar)
    return float(1.0 / (1.0 + sigma**2 * lmin))


def _lambda_min_precision(law: TiltedGaussian) -> float:
    cached = law.info.get("_lambda_min")
    if cached is not None:
        return cached
    if law.N * law.D <= 2048:
        val = float(np.linalg.eigvalsh(law.dense_precision()[0])[0])
    else:
        from scipy.sparse import bmat
        from scipy.sparse.linalg import eigsh

        diag, off, _ = law.blocks()
        rows = [[None] * law.N for _ in range(law.N)]
        for k in range(law.N):
            rows[k][k] = diag[k]
            if k < law.N - 1:
                rows[k][k + 1], rows[k + 1][k] = off[k], off[k].T
        val = float(eigsh(bmat(rows, format="csr"), k=1, which="SA")[0][0])
    law.info["_lambda_min"] = val
    return val


def bound_ingredients(pi, pstar, sigma: float, kl_value: float) -> dict:
    """``{"L": [L_k], "c_post", "C_hat"}`` at one schedule point (reported, never asserted)."""
    L = lipschitz_constants(pi, pstar)
    c = posterior_concentration(pstar, sigma)
    denom = sigma**2 * float(np.sum(L**2)) * c
    return {
        "L_max": float(L.max()),
        "L_sum_sq": float(np.sum(L**2)),
        "c_post": c,
        "C_hat": float(kl_value / denom) if denom > 0 else float("nan"),
    }


# ============================================================================ curves and fits
def normalised(kl_values, tv_values, sigmas, N: int) -> tuple[np.ndarray, np.ndarray]:
    """``KL / (N sigma^2)`` and ``TV / (sqrt(N) sigma)``."""
    s = np.asarray(sigmas, dtype=float)
    return np.asarray(kl_values, float) / (N * s**2), np.asarray(tv_values, float) / (np.sqrt(N) * s)


def fit_slope(sigmas, values) -> float:
    """Least-squares slope of ``log values`` against ``log sigma`` (NaN with fewer than 2 points)."""
    s = check_array(sigmas, "sigmas", ndim=1, dtype=float, finite=False)
    v = check_array(values, "values", ndim=1, dtype=float, finite=False)
    ok = np.isfinite(v) & (v > 0) & np.isfinite(s) & (s > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(s[ok]), np.log(v[ok]), 1)[0])


def gaussian_window(sigmas, kls, last: int = 6, floor: float = 1e-12) -> np.ndarray:
    """Indices of the Gaussian fit window: the last ``last`` schedule points with KL >= floor."""
    kls = np.asarray(kls, dtype=float)
    idx = np.arange(len(kls))[-last:]
    return idx[np.isfinite(kls[idx]) & (kls[idx] >= floor)]


def grid_window(sigmas, dz: float, hi: float = 0.5, lo_factor: float = 4.0) -> np.ndarray:
    """Indices of the grid fit window: schedule points with ``4 dz <= sigma <= 0.5``."""
    s = np.asarray(sigmas, dtype=float)
    return np.flatnonzero((s >= lo_factor * dz) & (s <= hi))
