"""Posterior denoising with a fitted prior (empirical Bayes).

Target: z_hat(x_i) = E_theta[Z | X = x_i] = int z q(z) f_i(x_i - z) dz / int q(z) f_i(x_i - z) dz.

* :func:`gmm_posterior` — GMM prior + Gaussian noise, exact (means and covariances).
* :func:`importance_posterior_mean` — self-normalised importance sampling in log space with the
  package's adaptive mixture proposal (any prior with ``log_prob``/``rsample``, Gaussian or Laplace noise).
* :func:`quadrature_posterior_mean` — d = 1: deterministic quadrature of both integrals on one fine grid
  (trapezoid, log space); the default for 1-D priors without a closed form (e.g. Laplace noise).
* :func:`langevin_posterior_mean` — unadjusted Langevin (ULA) with annealed temperature.
* :func:`tweedie_gmm`, :func:`tweedie_kde` — Tweedie's formula z = x + S grad log p_X(x)
  (homoscedastic Gaussian noise); the KDE version is the "f-modeling" baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from neurips26.deconv._validation import check_noise, check_x
from neurips26.harness.validation import check_scalar
from neurips26.deconv.baselines import kde_score
from neurips26.deconv.noise import NoiseModel, torch_log_lik, torch_noise

_LOG2PI = math.log(2 * math.pi)


def _gmm_params(prior):
    """(weights, means, covs) from a fitted ConvMMDGMM, an ExtremeDeconvolution or a tuple."""
    if isinstance(prior, tuple) and len(prior) == 3:
        w, m, c = (np.asarray(a, dtype=np.float64) for a in prior)
        return w, m, c
    for attrs in (("weights_", "means_", "covariances_"),):
        if all(hasattr(prior, a) for a in attrs):
            return tuple(np.asarray(getattr(prior, a), dtype=np.float64) for a in attrs)
    raise TypeError("prior must be a fitted ConvMMDGMM / ExtremeDeconvolution or a (weights, means, covs) "
                    f"tuple, got {type(prior).__name__}")


def gmm_posterior(prior, x, noise) -> tuple[np.ndarray, np.ndarray]:
    """Exact posterior mean and covariance for a GMM prior and Gaussian noise S_i::

        w_k ∝ pi_k N(x; mu_k, Sigma_k + S),  m_k = mu_k + Sigma_k (Sigma_k + S)^{-1} (x - mu_k),
        C_k = Sigma_k - Sigma_k (Sigma_k + S)^{-1} Sigma_k,
        E[Z|x] = sum_k w_k m_k,  Cov[Z|x] = sum_k w_k (C_k + m_k m_k^T) - E E^T.
    """
    pi, mu, Sig = _gmm_params(prior)
    xa = check_x(x, min_rows=1)
    noise = check_noise(noise, xa)
    if noise.family != "gaussian":
        raise ValueError("noise: the closed-form GMM posterior needs Gaussian noise; use method='is' for "
                         "Laplace noise")
    n, d = xa.shape
    S = noise.cov_matrix(n, d)
    T = Sig[None] + S[:, None]                                   # (n, K, d, d)
    Tinv = np.linalg.inv(T)
    r = xa[:, None, :] - mu[None]
    sol = np.einsum("nkij,nkj->nki", Tinv, r)
    _, logdet = np.linalg.slogdet(T)
    quad = np.einsum("nki,nki->nk", r, sol)
    lw = np.log(np.maximum(pi, 1e-300))[None] - 0.5 * (quad + logdet + d * _LOG2PI)
    w = np.exp(lw - lw.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    m = mu[None] + np.einsum("kij,nkj->nki", Sig, sol)
    C = Sig[None] - np.einsum("kij,nkjl,klm->nkim", Sig, Tinv, Sig)
    mean = np.einsum("nk,nki->ni", w, m)
    second = np.einsum("nk,nkij->nij", w, C + np.einsum("nki,nkj->nkij", m, m))
    return mean, second - np.einsum("ni,nj->nij", mean, mean)


def tweedie_gmm(prior, x, noise) -> np.ndarray:
    """Tweedie: z = x + S grad log p_X(x), p_X = sum_k pi_k N(mu_k, Sigma_k + S) (homoscedastic Gaussian)."""
    pi, mu, Sig = _gmm_params(prior)
    xa = check_x(x, min_rows=1)
    noise = check_noise(noise, xa)
    if noise.family != "gaussian" or not noise.homoscedastic:
        raise ValueError("noise: Tweedie's formula needs homoscedastic Gaussian noise")
    n, d = xa.shape
    S = noise.cov_matrix(1, d)[0]
    T = Sig + S[None]
    Tinv = np.linalg.inv(T)
    r = xa[:, None, :] - mu[None]
    sol = np.einsum("kij,nkj->nki", Tinv, r)
    _, logdet = np.linalg.slogdet(T)
    lw = np.log(pi)[None] - 0.5 * (np.einsum("nki,nki->nk", r, sol) + logdet[None])
    w = np.exp(lw - lw.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    score = -np.einsum("nk,nki->ni", w, sol)
    return xa + score @ S.T


def tweedie_kde(x, noise, bandwidth: float | None = None) -> np.ndarray:
    """f-modeling: Tweedie with a Gaussian KDE of the noisy x (Silverman bandwidth per coordinate)."""
    xa = check_x(x)
    noise = check_noise(noise, xa)
    if noise.family != "gaussian" or not noise.homoscedastic:
        raise ValueError("noise: Tweedie's formula needs homoscedastic Gaussian noise")
    n, d = xa.shape
    if bandwidth is None:
        sd = float(np.mean(xa.std(0, ddof=1)))
        bandwidth = 0.9 * sd * n ** (-1.0 / (d + 4))
    S = noise.cov_matrix(1, d)[0]
    return xa + kde_score(xa, xa, bandwidth) @ S.T


# ============================================================================ importance sampling
@dataclass
class ISResult:
    mean: np.ndarray           # (n, d) posterior means
    se: np.ndarray             # (n, d) Monte-Carlo standard errors (from the two halves)
    ess: np.ndarray            # (n,) effective sample size of the final draws
    flagged: np.ndarray        # (n,) halves disagree beyond 5 estimated standard errors


def _prior_log_prob(prior, z: torch.Tensor) -> torch.Tensor:
    model = getattr(prior, "model_", prior)
    return model.log_prob(z)


def _prior_rsample(prior, n: int, g: torch.Generator) -> torch.Tensor:
    model = getattr(prior, "model_", prior)
    return model.rsample(n, g)


def _lik_sample(family: str, x: torch.Tensor, std: torch.Tensor, M: int, g: torch.Generator) -> torch.Tensor:
    """Draws from the likelihood as a density in z: x + eps (symmetric noise)."""
    return x[:, None, :] + torch_noise(family, std[:, None, :].expand(-1, M, -1).contiguous(), g)


def _lik_logpdf(family: str, z: torch.Tensor, x: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    return torch_log_lik(family, x[:, None, :] - z, std[:, None, :])


def _gauss_logpdf(z, m, s):
    return torch.sum(-0.5 * ((z - m[:, None]) / s[:, None]) ** 2 - torch.log(s[:, None]) - 0.5 * _LOG2PI, -1)


def importance_posterior_mean(prior, x, noise, n_samples: int = 8192, seed: int = 0,
                              chunk: int = 64) -> ISResult:
    """Adaptive self-normalised IS for E[Z | x_i] under a prior with ``log_prob`` and ``rsample``.

    Pilot proposal 1/2 q + 1/2 l_x (l_x the likelihood as a density in z) with M/4 draws; a Gaussian
    bridge a_x from the pilot's weighted mean / diagonal variance (sd floored at 0.05 noise sd); final
    proposal 1/8 q + 1/8 l_x + 3/8 a_x + 3/8 a_x^wide (doubled sd) with M draws; weights q l / r in
    log space with the mixture density r evaluated exactly.  The final draws are split in two halves;
    their means disagreeing by more than 5 estimated standard errors flags the point.
    """
    n_samples = check_scalar(n_samples, "n_samples", int, min=1)
    if n_samples % 4 or not 128 <= n_samples <= 32768:
        raise ValueError(f"n_samples must be a multiple of 4 in [128, 32768], got {n_samples}")
    model = getattr(prior, "model_", prior)
    if not (callable(getattr(model, "log_prob", None)) and callable(getattr(model, "rsample", None))):
        raise TypeError("prior must be a fitted convMMD estimator or a module with log_prob and rsample "
                        "(a differentiable sampler)")
    xa = check_x(x, min_rows=1)
    noise = check_noise(noise, xa)
    if noise.full_cov:
        raise ValueError("noise: importance sampling supports diagonal noise (std), not full covariances")
    model = getattr(prior, "model_", prior)
    if hasattr(model, "tail_bound") and model.tail_bound is not None:
        zs = (xa - model.loc.double().numpy()) / model.scale.double().numpy()
        if np.max(np.abs(zs)) >= model.tail_bound:
            raise ValueError(f"x: standardised |x| reaches {np.max(np.abs(zs)):.3g} >= the flow's tail bound "
                             f"{model.tail_bound}; refit with a larger tail_bound")
    dtype = next(model.parameters()).dtype
    n, d = xa.shape
    g = torch.Generator().manual_seed(seed)
    M, Mp = n_samples, max(n_samples // 4, 32)
    std_all = torch.as_tensor(noise.std_matrix(n, d), dtype=dtype)
    xt_all = torch.as_tensor(xa, dtype=dtype)
    means, ses, esss, flags = [], [], [], []
    fam = noise.family
    with torch.no_grad():
        for s in range(0, n, chunk):
            xt, std = xt_all[s:s + chunk], std_all[s:s + chunk]
            c = xt.shape[0]

            def logq(z):
                return _prior_log_prob(prior, z.reshape(-1, d)).reshape(z.shape[:2])

            # ---- pilot: 1/2 q + 1/2 l_x
            zq = _prior_rsample(prior, c * (Mp // 2), g).reshape(c, Mp // 2, d)
            zl = _lik_sample(fam, xt, std, Mp - Mp // 2, g)
            zp = torch.cat([zq, zl], 1)
            lq, ll = logq(zp), _lik_logpdf(fam, zp, xt, std)
            lr = torch.logaddexp(lq, ll) - math.log(2)
            lw = lq + ll - lr
            w = torch.softmax(lw, 1)
            m = (w[..., None] * zp).sum(1)
            v = (w[..., None] * (zp - m[:, None]) ** 2).sum(1)
            sd = torch.sqrt(torch.clamp(v, min=(0.05 * std) ** 2))
            # ---- final: 1/8 q + 1/8 l_x + 3/8 a + 3/8 a_wide
            nq, nl, na = M // 8, M // 8, 3 * M // 8
            nw = M - nq - nl - na
            z = torch.cat([
                _prior_rsample(prior, c * nq, g).reshape(c, nq, d),
                _lik_sample(fam, xt, std, nl, g),
                m[:, None] + sd[:, None] * torch.randn(c, na, d, generator=g, dtype=dtype),
                m[:, None] + 2 * sd[:, None] * torch.randn(c, nw, d, generator=g, dtype=dtype)], 1)
            perm = torch.randperm(M, generator=g)
            z = z[:, perm]
            lq, ll = logq(z), _lik_logpdf(fam, z, xt, std)
            comps = torch.stack([lq + math.log(1 / 8), ll + math.log(1 / 8),
                                 _gauss_logpdf(z, m, sd) + math.log(3 / 8),
                                 _gauss_logpdf(z, m, 2 * sd) + math.log(3 / 8)], 0)
            lr = torch.logsumexp(comps, 0)
            lw = lq + ll - lr
            w = torch.softmax(lw, 1)
            mean = (w[..., None] * z).sum(1)
            halves, hvars = [], []
            for part in (slice(0, M // 2), slice(M // 2, M)):
                wh = torch.softmax(lw[:, part], 1)
                mh = (wh[..., None] * z[:, part]).sum(1)
                halves.append(mh)
                hvars.append((wh[..., None] ** 2 * (z[:, part] - mh[:, None]) ** 2).sum(1))
            # s.e. of self-normalised IS (delta method): sum_i w_i^2 (z_i - mean)^2
            se = torch.sqrt((w[..., None] ** 2 * (z - mean[:, None]) ** 2).sum(1))
            flag = ((halves[0] - halves[1]).abs() > 5 * torch.sqrt(hvars[0] + hvars[1]) + 1e-12).any(1)
            ess = 1.0 / (w**2).sum(1)
            means.append(mean), ses.append(se), esss.append(ess), flags.append(flag)
    return ISResult(torch.cat(means).double().numpy(), torch.cat(ses).double().numpy(),
                    torch.cat(esss).double().numpy(), torch.cat(flags).numpy())


# ============================================================================ Langevin
def langevin_posterior_mean(prior, x, noise, step: float = 1e-2, n_chains: int = 100, n_steps: int = 1000,
                            burn_in: float = 0.6, thin: int = 2, score_cap: float = 50.0,
                            temperature: tuple[float, float] = (2.0, 1.0), seed: int = 0,
                            chunk: int = 64) -> np.ndarray:
    """ULA on log q(z) + log l_x(z): z <- z + h * cap(grad) + sqrt(2 h T) xi, with temperature T going
    linearly 2 -> 1 over the first half, score norm capped at 50, burn-in 60 %, thinning 2; the
    posterior mean is the average over chains and kept steps."""
    check_scalar(step, "step", float, min=0, inclusive="neither")
    check_scalar(n_chains, "n_chains", int, min=1)
    check_scalar(n_steps, "n_steps", int, min=2)
    xa = check_x(x, min_rows=1)
    noise = check_noise(noise, xa)
    model = getattr(prior, "model_", prior)
    dtype = next(model.parameters()).dtype
    n, d = xa.shape
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in range(0, n, chunk):
        xt = torch.as_tensor(xa[s:s + chunk], dtype=dtype)
        std = torch.as_tensor(noise.std_matrix(n, d)[s:s + chunk], dtype=dtype)
        c = xt.shape[0]
        z = xt[:, None, :].repeat(1, n_chains, 1)
        acc = torch.zeros(c, d, dtype=dtype)
        kept = 0
        start = int(burn_in * n_steps)
        for t in range(n_steps):
            frac = min(t / max(n_steps / 2, 1), 1.0)
            T = temperature[0] + (temperature[1] - temperature[0]) * frac
            zr = z.detach().requires_grad_(True)
            lp = model.log_prob(zr.reshape(-1, d)).reshape(c, n_chains) + \
                torch_log_lik(noise.family, xt[:, None, :] - zr, std[:, None, :])
            (grad,) = torch.autograd.grad(lp.sum(), zr)
            nrm = grad.norm(dim=-1, keepdim=True)
            grad = grad * torch.clamp(score_cap / (nrm + 1e-12), max=1.0)
            z = zr.detach() + step * grad + math.sqrt(2 * step * T) * torch.randn(
                z.shape, generator=g, dtype=dtype)
            if t >= start and (t - start) % thin == 0:
                acc += z.mean(1)
                kept += 1
        out.append(acc / kept)
    return torch.cat(out).double().numpy()


# ============================================================================ 1-D quadrature
def _prior_range(prior, model, xa: np.ndarray, smax: float, seed: int) -> tuple[float, float]:
    """An interval holding all but a negligible part of the prior and of every likelihood."""
    lo, hi = float(xa.min()) - 40 * smax, float(xa.max()) + 40 * smax
    if hasattr(prior, "weights_") or isinstance(prior, tuple):
        _, m, c = _gmm_params(prior)
        sd = np.sqrt(c[:, 0, 0])
        return min(lo, float((m[:, 0] - 12 * sd).min())), max(hi, float((m[:, 0] + 12 * sd).max()))
    with torch.no_grad():
        z = _prior_rsample(prior, 20000, torch.Generator().manual_seed(seed)).double().numpy()[:, 0]
    span = float(z.max() - z.min())
    return min(lo, float(z.min()) - 0.5 * span), max(hi, float(z.max()) + 0.5 * span)


def quadrature_posterior_mean(prior, x, noise, n_grid: int = 20001, seed: int = 0,
                              chunk: int = 256) -> np.ndarray:
    """E[Z | x_i] for a 1-D prior by quadrature: z_hat_i = sum_g z_g q(z_g) f_i(x_i - z_g) w_g / sum_g
    q(z_g) f_i(x_i - z_g) w_g on one uniform grid of ``n_grid`` points (trapezoid weights w_g) covering
    the prior (GMM: means +- 12 sd; otherwise 20000 prior draws widened by half their range) and every
    likelihood (x +- 40 noise sd).  Deterministic; exact up to the grid (error O(h^2))."""
    n_grid = check_scalar(n_grid, "n_grid", int, min=101)
    xa = check_x(x, min_rows=1)
    noise = check_noise(noise, xa)
    n, d = xa.shape
    if d != 1:
        raise ValueError(f"x: quadrature is for d = 1 (use importance_posterior_mean for d = {d})")
    if noise.full_cov:
        raise ValueError("noise: quadrature supports diagonal noise (std), not full covariances")
    std = noise.std_matrix(n, 1)
    if isinstance(prior, tuple) or hasattr(prior, "weights_") and not hasattr(prior, "model_"):
        w, m, c = _gmm_params(prior)
        sd = np.sqrt(c[:, 0, 0])
        lo, hi = _prior_range(prior, None, xa, float(std.max()), seed)
        grid = np.linspace(lo, hi, n_grid)
        comp = -0.5 * ((grid[:, None] - m[None, :, 0]) / sd) ** 2 - np.log(sd) - 0.5 * _LOG2PI + np.log(w)
        logq = np.logaddexp.reduce(comp, axis=1)
    else:
        model = getattr(prior, "model_", prior)
        if not callable(getattr(model, "log_prob", None)):
            raise TypeError("prior must be a fitted estimator, a module with log_prob or a GMM tuple")
        lo, hi = _prior_range(prior, model, xa, float(std.max()), seed)
        grid = np.linspace(lo, hi, n_grid)
        dtype = next(model.parameters()).dtype
        with torch.no_grad():
            logq = model.log_prob(torch.as_tensor(grid[:, None], dtype=dtype)).double().numpy()
    logw = np.full(n_grid, math.log(grid[1] - grid[0]))
    logw[[0, -1]] -= math.log(2.0)
    base = np.where(np.isfinite(logq), logq, -np.inf) + logw
    out = np.empty(n)
    gt = torch.as_tensor(grid, dtype=torch.float64)
    for s in range(0, n, chunk):
        xt = torch.as_tensor(xa[s:s + chunk, 0], dtype=torch.float64)
        st = torch.as_tensor(std[s:s + chunk, 0], dtype=torch.float64)
        ll = torch_log_lik(noise.family, (xt[:, None] - gt[None, :])[..., None], st[:, None, None]).numpy()
        lp = ll + base[None, :]
        lp -= lp.max(1, keepdims=True)
        p = np.exp(lp)
        out[s:s + chunk] = (p @ grid) / p.sum(1)
    return out[:, None]


# ============================================================================ dispatcher
def posterior_mean(prior, x, noise, method: str = "auto", **kw) -> np.ndarray:
    """E[Z | x] for a fitted convMMD prior: ``"closed"`` (GMM + Gaussian noise), ``"quadrature"`` (d = 1),
    ``"is"``, ``"langevin"``; ``"auto"`` = closed form when available, else quadrature in 1-D, else IS."""
    if method not in ("auto", "closed", "quadrature", "is", "langevin"):
        raise ValueError(f"method must be 'auto', 'closed', 'quadrature', 'is' or 'langevin', got {method!r}")
    if not isinstance(noise, NoiseModel):
        raise TypeError(f"noise must be a NoiseModel, got {type(noise).__name__}")
    is_gmm = hasattr(prior, "weights_") or isinstance(prior, tuple)
    if method == "closed" or (method == "auto" and is_gmm and noise.family == "gaussian"):
        if not is_gmm:
            raise ValueError("method='closed' needs a GMM prior")
        return gmm_posterior(prior, x, noise)[0]
    if method == "langevin":
        return langevin_posterior_mean(prior, x, noise, **kw)
    dim = np.ndim(x) == 2 and np.shape(x)[1] == 1
    if method == "quadrature" or (method == "auto" and dim):
        return quadrature_posterior_mean(prior, x, noise, **kw)
    return importance_posterior_mean(prior, x, noise, **kw).mean
