"""Sieves Q_theta for the latent law: a Gaussian mixture and a neural spline flow (zuko).

Both are ``nn.Module``s with ``rsample(n, generator)`` (reparameterised, differentiable) and
``log_prob(z)``.  The GMM's component index is not reparameterisable, so its convMMD loss uses the
*stratified weighted estimator* :func:`stratified_gmm_loss` (pi enters analytically).
"""

from __future__ import annotations

import functools
import math
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from neurips26.deconv.loss import _laplace_self_sum_1d, check_kernel, kernel_from_distance, pairwise_distance
from neurips26.deconv.noise import torch_noise


# ============================================================================ Gaussian mixture
class GMMSieve(nn.Module):
    """Q_theta = sum_k pi_k N(mu_k, L_k L_k^T), pi = softmax(alpha), diag(L_k) = exp(log_diag_k)."""

    def __init__(self, n_components: int, dim: int, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.n_components, self.dim = n_components, dim
        self.logits = nn.Parameter(torch.zeros(n_components, dtype=dtype))
        self.means = nn.Parameter(torch.zeros(n_components, dim, dtype=dtype))
        self.log_diag = nn.Parameter(torch.zeros(n_components, dim, dtype=dtype))
        self.offdiag = nn.Parameter(torch.zeros(n_components, dim, dim, dtype=dtype))

    @property
    def weights(self) -> torch.Tensor:
        return torch.softmax(self.logits, 0)

    @property
    def chol(self) -> torch.Tensor:
        """L_k: strictly-lower part free, diagonal exp(log_diag) > 0."""
        return torch.tril(self.offdiag, -1) + torch.diag_embed(torch.exp(self.log_diag))

    @property
    def covs(self) -> torch.Tensor:
        L = self.chol
        return L @ L.transpose(-1, -2)

    @torch.no_grad()
    def init_from_data(self, x: np.ndarray, mean_noise_cov: np.ndarray, rng: np.random.Generator,
                       lloyd_iters: int = 0) -> None:
        """k-means++ seeding of the means on a random subset of x (optionally refined by Lloyd
        iterations); covariances
        (cov(x) - mean noise cov)/K projected to PSD with floor 1e-3 I; uniform weights."""
        K, d = self.n_components, self.dim
        sub = x[rng.choice(x.shape[0], min(x.shape[0], 2000), replace=False)]
        centres = [sub[rng.integers(sub.shape[0])]]
        for _ in range(1, K):
            d2 = np.min(((sub[:, None, :] - np.asarray(centres)[None]) ** 2).sum(-1), axis=1)
            p = d2 / d2.sum() if d2.sum() > 0 else np.full(sub.shape[0], 1.0 / sub.shape[0])
            centres.append(sub[rng.choice(sub.shape[0], p=p)])
        centres = np.asarray(centres)
        # Lloyd refinement of the ++ seeds (outlier seeds move to cluster means)
        for _ in range(lloyd_iters):
            lab = np.argmin(((sub[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)
            for k in range(K):
                if np.any(lab == k):
                    centres[k] = sub[lab == k].mean(0)
        cov = np.atleast_2d(np.cov(x.T)) - mean_noise_cov
        cov = cov / K
        w, V = np.linalg.eigh((cov + cov.T) / 2)
        cov = (V * np.maximum(w, 1e-3)) @ V.T
        L = np.linalg.cholesky(cov)
        dt = self.means.dtype
        self.means.copy_(torch.as_tensor(np.asarray(centres), dtype=dt))
        self.log_diag.copy_(torch.as_tensor(np.log(np.diag(L)), dtype=dt).expand(K, d))
        self.offdiag.copy_(torch.as_tensor(np.tril(L, -1), dtype=dt).expand(K, d, d))
        self.logits.zero_()

    @torch.no_grad()
    def set_mixture(self, weights: np.ndarray, means: np.ndarray, covs: np.ndarray,
                    cov_floor: float = 1e-3) -> None:
        """Set (pi, mu, Sigma) directly (e.g. from a pilot fit); covariances projected to PSD with floor
        ``cov_floor`` I, weights floored at 1e-6 before the log."""
        K, d = self.n_components, self.dim
        w = np.maximum(np.asarray(weights, dtype=np.float64).reshape(K), 1e-6)
        C = np.asarray(covs, dtype=np.float64).reshape(K, d, d)
        ev, V = np.linalg.eigh((C + np.swapaxes(C, 1, 2)) / 2)
        C = np.einsum("kij,kj,klj->kil", V, np.maximum(ev, cov_floor), V)
        L = np.linalg.cholesky(C)
        dt = self.means.dtype
        self.logits.copy_(torch.as_tensor(np.log(w / w.sum()), dtype=dt))
        self.means.copy_(torch.as_tensor(np.asarray(means, dtype=np.float64).reshape(K, d), dtype=dt))
        self.log_diag.copy_(torch.as_tensor(np.log(np.diagonal(L, axis1=1, axis2=2)), dtype=dt))
        self.offdiag.copy_(torch.as_tensor(np.tril(L, -1), dtype=dt))

    @torch.no_grad()
    def split_component(self, dead: int, src: int) -> None:
        """Re-seed component ``dead`` by splitting component ``src`` along its principal axis:
        mu_src -/+ (1/2) sqrt(lam) v, Sigma' = Sigma_src - (1/4) lam v v^T, weight (pi_src + pi_dead)/2 each.
        The two halves have the mean and covariance of the split component (moment preserving)."""
        w = self.weights.double().numpy()
        mu = self.means.double().numpy()
        C = self.covs.double().numpy()
        ev, V = np.linalg.eigh(C[src])
        lam, v = ev[-1], V[:, -1]
        off = 0.5 * math.sqrt(max(lam, 0.0)) * v
        Cn = C[src] - 0.25 * lam * np.outer(v, v)
        w_new = w.copy()
        w_new[src] = w_new[dead] = 0.5 * (w[src] + w[dead])
        mu_new, C_new = mu.copy(), C.copy()
        mu_new[src], mu_new[dead] = mu[src] - off, mu[src] + off
        C_new[src] = C_new[dead] = Cn
        self.set_mixture(w_new, mu_new, C_new, cov_floor=1e-12)

    def rsample_components(self, n_per: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """z_{k,b} = mu_k + L_k u_{k,b}, shape (K, n_per, d) (reparameterised)."""
        u = torch.randn(self.n_components, n_per, self.dim, generator=generator, dtype=self.means.dtype)
        return self.means[:, None, :] + torch.einsum("kij,kbj->kbi", self.chol, u)

    def rsample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Ancestral sample (component index drawn, not differentiable in pi)."""
        k = torch.multinomial(self.weights.detach(), n, replacement=True, generator=generator)
        u = torch.randn(n, self.dim, generator=generator, dtype=self.means.dtype)
        return self.means[k] + torch.einsum("nij,nj->ni", self.chol[k], u)

    def log_prob(self, z: torch.Tensor) -> torch.Tensor:
        comp = torch.distributions.MultivariateNormal(self.means, scale_tril=self.chol)
        return torch.logsumexp(comp.log_prob(z[:, None, :]) + torch.log_softmax(self.logits, 0), dim=1)


def stratified_gmm_loss(gmm: GMMSieve, xb: torch.Tensor, noise_std: torch.Tensor, bandwidths,
                        kernel: str = "laplace", samples_per_component: int = 32,
                        generator: torch.Generator | None = None,
                        noise_family: str = "gaussian",
                        noise_chol: torch.Tensor | None = None) -> torch.Tensor:
    """Stratified weighted convMMD^2 estimator for a GMM sieve (unbiased in loss and gradient).

    For each component k draw B latents z_{kb} = mu_k + L_k u_{kb} and noisy copies
    x~_{kb} = z_{kb} + eps_{kb}, eps_{kb} ~ F_{sigma(b)} (sigma: B batch indices drawn once per step,
    shared by the components — heteroscedastic pairing).  Then per bandwidth::

        loss = U_data + sum_{k,k'} pi_k pi_k' kappa_{kk'} - 2 sum_k pi_k mean_{b,i} k(x~_{kb}, x_i)
        kappa_{kk'} = mean_{b,b'} k(x~_{kb}, x~_{k'b'}) (k != k'),  mean_{b != b'} (k = k')

    averaged over the bandwidths.  ``noise_std`` (b, d) and ``noise_chol`` (b, d, d) are the noise of
    the batch rows ``xb``.
    """
    kernel = check_kernel(kernel)
    K, B = gmm.n_components, samples_per_component
    nb, d = xb.shape
    sigma = torch.randint(nb, (B,), generator=generator)
    z = gmm.rsample_components(B, generator)                                # (K, B, d)
    std = noise_std[sigma].expand(K, B, d).reshape(K * B, d)
    chol = None if noise_chol is None else noise_chol[sigma].expand(K, B, d, d).reshape(K * B, d, d)
    xt = z.reshape(K * B, d) + torch_noise(noise_family, std, generator, chol)
    pi = gmm.weights
    eye = torch.eye(K, dtype=xb.dtype)
    hs = bandwidths.tolist() if isinstance(bandwidths, torch.Tensor) else list(bandwidths)
    total = xb.new_zeros(())
    fast_data = kernel == "laplace" and d == 1
    dxx = None if fast_data else pairwise_distance(xb, xb, kernel)   # distances once per step
    dmm, dmx = pairwise_distance(xt, xt, kernel), pairwise_distance(xt, xb, kernel)
    for h in hs:
        if fast_data:
            kxx = _laplace_self_sum_1d(xb[:, 0], h)
        else:
            kxx = kernel_from_distance(dxx, h, kernel).sum() - nb
        u_data = kxx / (nb * (nb - 1))
        kmm = kernel_from_distance(dmm, h, kernel).reshape(K, B, K, B).sum((1, 3))   # block sums
        # diagonal blocks: drop b = b' (k(x,x) = 1), normalise by B(B-1); off-diagonal by B^2
        kappa = (kmm - eye * B) / (B * B - eye * B)
        cross = kernel_from_distance(dmx, h, kernel).reshape(K, B, nb).mean((1, 2))
        total = total + u_data + pi @ kappa @ pi - 2.0 * (pi * cross).sum()
    return total / len(hs)


# ============================================================================ neural spline flow
@functools.cache
def _make_rqs_class():
    """zuko's monotonic RQ spline with the package's stability choices: tail bound B (linear tails
    outside [-B, B]), derivatives d_min + (d_max - d_min) sigmoid(.), d_min = 1e-3, d_max = 10,
    width/height logits divided by sqrt(hidden), inverse discriminant clamped at 1e-14."""
    import zuko

    class _BoundedRQS(zuko.transforms.MonotonicRQSTransform):
        def __init__(self, widths, heights, derivatives, bound: float = 30.0, d_min: float = 1e-3,
                     d_max: float = 10.0, logit_scale: float = 1.0, **kwargs) -> None:
            zuko.transforms.Transform.__init__(self, **kwargs)
            widths = F.pad(F.softmax(widths / logit_scale, dim=-1), (1, 0), value=0)
            heights = F.pad(F.softmax(heights / logit_scale, dim=-1), (1, 0), value=0)
            derivs = d_min + (d_max - d_min) * torch.sigmoid(derivatives)
            self.horizontal = bound * (2 * torch.cumsum(widths, dim=-1) - 1)
            self.vertical = bound * (2 * torch.cumsum(heights, dim=-1) - 1)
            self.derivatives = F.pad(derivs, (1, 1), value=1.0)   # slope 1 at the knots: linear tails

        def _inverse(self, y):
            k = self.searchsorted(self.vertical, y) - 1
            mask, x0, x1, y0, y1, d0, d1, s = self.bin(k)
            y_ = mask * (y - y0)
            a = (y1 - y0) * (s - d0) + y_ * (d0 + d1 - 2 * s)
            b = (y1 - y0) * d0 - y_ * (d0 + d1 - 2 * s)
            c = -s * y_
            disc = torch.clamp(b**2 - 4 * a * c, min=1e-14)
            z = 2 * c / (-b - disc.sqrt())
            return torch.where(mask, x0 + z * (x1 - x0), y)

    _BoundedRQS.__module__, _BoundedRQS.__qualname__ = __name__, "_BoundedRQS"   # picklable by name
    return _BoundedRQS


def __getattr__(name: str):
    """Lazy module attribute ``_BoundedRQS`` (zuko is imported only when a flow is built or unpickled)."""
    if name == "_BoundedRQS":
        return _make_rqs_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class FlowSieve(nn.Module):
    """Autoregressive RQ neural spline flow (zuko MAF with a bounded RQS univariate transform).

    Latent z = loc + scale * f(u), u ~ N(0, I), f = [RQ block -> elementwise affine] x blocks; loc/scale
    are the data mean/sd (standardisation, fixed buffers).  ``rsample`` is differentiable.
    """

    def __init__(self, dim: int, blocks: int = 4, bins: int = 16, hidden: int = 32, layers: int = 2,
                 tail_bound: float = 30.0, d_min: float = 1e-3, d_max: float = 10.0,
                 loc=None, scale=None, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        import zuko
        from zuko.flows import Flow, MaskedAutoregressiveTransform, UnconditionalDistribution, \
            UnconditionalTransform
        rqs = partial(_make_rqs_class(), bound=tail_bound, d_min=d_min, d_max=d_max,
                      logit_scale=math.sqrt(hidden))
        transforms = []
        for i in range(blocks):
            order = torch.arange(dim) if i % 2 == 0 else torch.flipud(torch.arange(dim))
            transforms.append(MaskedAutoregressiveTransform(
                features=dim, order=order, univariate=rqs,
                shapes=[(bins,), (bins,), (bins - 1,)], hidden_features=[hidden] * layers))
            transforms.append(UnconditionalTransform(
                zuko.transforms.MonotonicAffineTransform, torch.zeros(dim), torch.zeros(dim)))
        base = UnconditionalDistribution(zuko.distributions.DiagNormal, torch.zeros(dim), torch.ones(dim),
                                         buffer=True)
        self.flow = Flow(transforms, base).to(dtype)
        self.dim, self.tail_bound = dim, tail_bound
        self.register_buffer("loc", torch.zeros(dim, dtype=dtype) if loc is None
                             else torch.as_tensor(loc, dtype=dtype).reshape(dim))
        self.register_buffer("scale", torch.ones(dim, dtype=dtype) if scale is None
                             else torch.as_tensor(scale, dtype=dtype).reshape(dim))

    def rsample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        dist = self.flow()
        u = torch.randn(n, self.dim, generator=generator, dtype=self.loc.dtype)
        y = dist.transform.inv(u)      # zuko's transform maps data -> base; sampling inverts it
        return self.loc + self.scale * y

    def log_prob(self, z: torch.Tensor) -> torch.Tensor:
        y = (z - self.loc) / self.scale
        return self.flow().log_prob(y) - torch.log(self.scale).sum()
