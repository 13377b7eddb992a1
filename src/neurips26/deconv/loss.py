"""The convMMD loss: an unbiased MMD^2 between observed data and noise-convolved model samples.

Population quantity (translation-invariant kernel k with spectral density Lambda)::

    convMMD^2(P_Z, Q) = MMD_k^2(P_Z * F, Q * F) = int |phi_P(w) - phi_Q(w)|^2 |phi_eps(w)|^2 Lambda(w) dw

Minibatch estimator (b data points x, m simulated points y = G(U) + eps)::

    MMD^2_u = 1/(b(b-1)) sum_{i!=i'} k(x_i,x_i') + 1/(m(m-1)) sum_{j!=j'} k(y_j,y_j')
              - 2/(bm) sum_{i,j} k(x_i,y_j)

(unbiased, may be negative; never clamped), averaged over a set of bandwidths H.

Kernels: Laplace (default) ``k = exp(-||x-y||_1 / h)``, Gaussian ``k = exp(-||x-y||^2 / (2 h^2))``.

In 1-D the Laplace-kernel sums are computed exactly in O(b log b): after sorting the merged sample,
``sum_{a<=c} exp(-(c-a)/h) = exp(-c/h) * sum_{a<=c} exp(a/h)``, a prefix sum done as a
``torch.logcumsumexp`` (stable for any range/h, autograd-compatible).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

KERNELS = ("laplace", "gaussian")


# ---------------------------------------------------------------------------- validation
def check_kernel(kernel: str) -> str:
    if not isinstance(kernel, str) or kernel.lower() not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    return kernel.lower()


def check_bandwidths(bandwidths, name: str = "bandwidths") -> torch.Tensor:
    if isinstance(bandwidths, (int, float)) and not isinstance(bandwidths, bool):
        bandwidths = [float(bandwidths)]
    try:
        h = torch.as_tensor(np.asarray(bandwidths, dtype=np.float64)).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a sequence of positive floats, "
                        f"got {type(bandwidths).__name__}") from None
    if h.numel() == 0:
        raise ValueError(f"{name} must not be empty")
    if not torch.all(torch.isfinite(h)) or torch.any(h <= 0):
        raise ValueError(f"{name} must be finite and strictly positive, got {h.tolist()}")
    return h


# ---------------------------------------------------------------------------- dense kernels
def pairwise_distance(x: torch.Tensor, y: torch.Tensor, kernel: str = "laplace") -> torch.Tensor:
    """The kernel's distance: ||x - y||_1 (Laplace) or ||x - y||_2^2 (Gaussian), shape (b, m).
    Computed once and reused for every bandwidth."""
    if kernel == "laplace":
        return torch.cdist(x, y, p=1.0)
    return torch.cdist(x, y, p=2.0) ** 2


def kernel_from_distance(dist: torch.Tensor, h: float, kernel: str = "laplace") -> torch.Tensor:
    """k = exp(-D/h) (Laplace, D = L1 distance) or exp(-D/(2h^2)) (Gaussian, D = squared distance)."""
    return torch.exp(-dist / h) if kernel == "laplace" else torch.exp(-dist / (2.0 * h * h))


def kernel_matrix(x: torch.Tensor, y: torch.Tensor, h: float, kernel: str = "laplace") -> torch.Tensor:
    """k(x_i, y_j) for x (b, d), y (m, d): Laplace ``exp(-||x-y||_1/h)``,
    Gaussian ``exp(-||x-y||^2/(2h^2))``."""
    return kernel_from_distance(pairwise_distance(x, y, kernel), h, kernel)


# ---------------------------------------------------------------------------- fast 1-D Laplace path
def _laplace_self_sum_1d(a: torch.Tensor, h: float) -> torch.Tensor:
    """sum_{i != i'} exp(-|a_i - a_i'|/h) for a of shape (n,), exact, O(n log n).

    Sorted s_1 <= ... <= s_n:  sum_{i<j} exp(-(s_j - s_i)/h) = sum_j exp(-s_j/h + LSE_{i<j}(s_i/h)).
    """
    s, _ = torch.sort(a)
    u = s / h
    lcs = torch.logcumsumexp(u, dim=0)                          # LSE_{i<=j} u_i
    excl = torch.cat([u.new_full((1,), -math.inf), lcs[:-1]])   # LSE_{i<j} u_i
    return 2.0 * torch.exp(torch.logsumexp(excl[1:] - u[1:], dim=0))


def _laplace_cross_sum_1d(a: torch.Tensor, c: torch.Tensor, h: float) -> torch.Tensor:
    """sum_{i,j} exp(-|a_i - c_j|/h) for a (n,), c (m,), exact, O((n+m) log(n+m)).

    Merge and sort; for each c_j the a's before it contribute exp(-c_j/h) * sum exp(a_i/h) (a forward
    prefix log-sum-exp), the a's after it exp(c_j/h) * sum exp(-a_i/h) (a backward one).  Every pair
    is counted exactly once (ties give exp(0) = 1 either way).
    """
    v = torch.cat([a, c])
    is_a = torch.cat([torch.ones_like(a, dtype=torch.bool), torch.zeros_like(c, dtype=torch.bool)])
    s, order = torch.sort(v, stable=True)
    is_a = is_a[order]
    u = s / h
    neg_inf = torch.full_like(u, -math.inf)
    fwd = torch.logcumsumexp(torch.where(is_a, u, neg_inf), dim=0)                     # LSE_{a before} a/h
    bwd = torch.flip(torch.logcumsumexp(torch.flip(torch.where(is_a, -u, neg_inf), [0]), dim=0), [0])
    uc, fc, bc = u[~is_a], fwd[~is_a], bwd[~is_a]
    terms = torch.cat([fc - uc, bc + uc])
    return torch.exp(torch.logsumexp(terms, dim=0))


def _fast_terms(x: torch.Tensor, y: torch.Tensor, h: float) -> tuple:
    a, c = x[:, 0], y[:, 0]
    return _laplace_self_sum_1d(a, h), _laplace_self_sum_1d(c, h), _laplace_cross_sum_1d(a, c, h)


# ---------------------------------------------------------------------------- the estimator
def mmd2_unbiased(x: torch.Tensor, y: torch.Tensor, bandwidths, kernel: str = "laplace",
                  method: str = "auto") -> torch.Tensor:
    """Multi-bandwidth unbiased MMD^2_u between samples x (b, d) and y (m, d), averaged over h in H.

    method: ``"dense"`` (O(b m) kernel matrices), ``"fast"`` (1-D Laplace only, O((b+m) log(b+m)))
    or ``"auto"`` (fast when it applies).
    """
    kernel = check_kernel(kernel)
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError("x and y must be torch tensors")
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must be 2-D with the same number of columns, got {tuple(x.shape)}, "
                         f"{tuple(y.shape)}")
    b, m = x.shape[0], y.shape[0]
    if b < 2 or m < 2:
        raise ValueError(f"MMD^2_u needs at least 2 points per sample, got b = {b}, m = {m}")
    if method not in ("auto", "dense", "fast"):
        raise ValueError(f"method must be 'auto', 'dense' or 'fast', got {method!r}")
    fast_ok = kernel == "laplace" and x.shape[1] == 1
    if method == "fast" and not fast_ok:
        raise ValueError("method='fast' needs the Laplace kernel and 1-D data")
    use_fast = fast_ok and method != "dense"
    hs = check_bandwidths(bandwidths).tolist() if not isinstance(bandwidths, torch.Tensor) \
        else bandwidths.detach().reshape(-1).tolist()
    total = x.new_zeros(())
    if not use_fast:   # distances once, kernels per bandwidth
        dxx, dyy, dxy = (pairwise_distance(a, c, kernel) for a, c in ((x, x), (y, y), (x, y)))
    for h in hs:
        if use_fast:
            kxx, kyy, kxy = _fast_terms(x, y, h)
        else:
            kxx = kernel_from_distance(dxx, h, kernel).sum() - b      # k(x, x) = 1 on the diagonal
            kyy = kernel_from_distance(dyy, h, kernel).sum() - m
            kxy = kernel_from_distance(dxy, h, kernel).sum()
        total = total + kxx / (b * (b - 1)) + kyy / (m * (m - 1)) - 2.0 * kxy / (b * m)
    return total / len(hs)


# ---------------------------------------------------------------------------- bandwidth heuristic
def bandwidth_heuristic(x_obs, x_sim, quantiles: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7,
                                                                       0.8, 0.9),
                        max_pool: int = 2000, rng: np.random.Generator | int | None = 0) -> np.ndarray:
    """Multi-quantile bandwidths (the package's ``compute_bandwidth_median_heuristic``).

    Pool <= 2000 observations with <= 2000 simulated observations, take the pairwise Euclidean
    distances (upper triangle, drop < 1e-5) and return ``quantile_q(dist) / (log10(2 n_data) sqrt(d))``
    for q in ``quantiles`` — sorted, strictly positive.  Raises ValueError when all distances are < 1e-5.
    """
    xo = np.asarray(x_obs.detach().cpu() if isinstance(x_obs, torch.Tensor) else x_obs, dtype=np.float64)
    xs = np.asarray(x_sim.detach().cpu() if isinstance(x_sim, torch.Tensor) else x_sim, dtype=np.float64)
    if xo.ndim != 2 or xs.ndim != 2 or xo.shape[1] != xs.shape[1]:
        raise ValueError("x_obs and x_sim must be 2-D arrays with the same number of columns")
    q = np.asarray(quantiles, dtype=np.float64)
    if q.size == 0 or np.any((q <= 0) | (q >= 1)):
        raise ValueError(f"quantiles must lie in (0, 1), got {q.tolist()}")
    rng = np.random.default_rng(rng)
    if xo.shape[0] > max_pool:
        xo = xo[rng.choice(xo.shape[0], max_pool, replace=False)]
    if xs.shape[0] > max_pool:
        xs = xs[rng.choice(xs.shape[0], max_pool, replace=False)]
    n_data, d = xo.shape
    pool = torch.as_tensor(np.concatenate([xo, xs]))
    dist = torch.pdist(pool).numpy()   # upper triangle, Euclidean
    dist = dist[dist >= 1e-5]
    if dist.size == 0:
        raise ValueError("bandwidth heuristic: all pairwise distances are < 1e-5 (degenerate data); "
                         "pass bandwidths explicitly")
    h = np.quantile(dist, np.sort(q)) / (math.log10(2 * n_data) * math.sqrt(d))
    h = np.sort(h)
    if np.any(h <= 0):
        raise ValueError("bandwidth heuristic produced a non-positive bandwidth")
    return h


# ---------------------------------------------------------------------------- closed forms (Gaussian)
def gaussian_kernel_expectation(a: torch.Tensor, A: torch.Tensor, b: torch.Tensor, B: torch.Tensor,
                                h: float) -> torch.Tensor:
    """E k(X, X') for X ~ N(a, A), X' ~ N(b, B) independent, Gaussian kernel of bandwidth h::

        E k = h^d det(h^2 I + A + B)^{-1/2} exp(-1/2 (a-b)^T (h^2 I + A + B)^{-1} (a-b))

    Broadcasts over leading axes: a (..., d), A (..., d, d).
    """
    d = a.shape[-1]
    S = h * h * torch.eye(d, dtype=a.dtype) + A + B
    diff = (a - b).unsqueeze(-1)
    sol = torch.linalg.solve(S, diff)
    quad = (diff * sol).sum((-1, -2))
    return h**d * torch.exp(-0.5 * torch.logdet(S) - 0.5 * quad)


def gmm_convmmd_closed_form(logits: torch.Tensor, means: torch.Tensor, covs: torch.Tensor,
                            noise_cov: torch.Tensor, data: torch.Tensor, bandwidths) -> torch.Tensor:
    """Exact E[stratified GMM loss | data] for the Gaussian kernel and homoscedastic Gaussian noise.

    = U_data + sum_{k,k'} pi_k pi_k' E k(N(mu_k, S_k+N), N(mu_k', S_k'+N))
      - 2 sum_k pi_k mean_i E k(N(mu_k, S_k+N), x_i)

    (mean over bandwidths).  Differentiable in (logits, means, covs) — the test reference for the
    stochastic gradient of :func:`neurips26.deconv.sieves.stratified_gmm_loss`.
    """
    pi = torch.softmax(logits, 0)
    K, d = means.shape
    C = covs + noise_cov
    zero = torch.zeros(d, d, dtype=means.dtype)
    hs = check_bandwidths(bandwidths).tolist()
    total = means.new_zeros(())
    n = data.shape[0]
    for h in hs:
        kxx = (kernel_matrix(data, data, h, "gaussian").sum() - n) / (n * (n - 1))
        kmm = gaussian_kernel_expectation(means[:, None], C[:, None], means[None], C[None], h)  # (K, K)
        kxm = gaussian_kernel_expectation(means[:, None], C[:, None], data[None], zero, h)     # (K, n)
        total = total + kxx + pi @ kmm @ pi - 2.0 * (pi * kxm.mean(1)).sum()
    return total / len(hs)


def gaussian_mmd2_population(m1: float, s1: float, m2: float, s2: float, h: float) -> float:
    """Population Gaussian-kernel MMD^2 between N(m1, s1^2) and N(m2, s2^2) in 1-D (closed form)."""
    def ek(a, A, b, B):
        S = h * h + A + B
        return h / math.sqrt(S) * math.exp(-0.5 * (a - b) ** 2 / S)
    return ek(m1, s1**2, m1, s1**2) + ek(m2, s2**2, m2, s2**2) - 2 * ek(m1, s1**2, m2, s2**2)
