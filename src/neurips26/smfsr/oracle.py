"""The analytic Gaussian oracle: exact v and u for x | y ~ N(mu(y), sigma^2 I), mu = a y.

With z_t = (1 - t) x + t eps, z_t | y ~ N((1 - t) mu, s(t)^2 I) where::

    s(t)^2 = (1 - t)^2 sigma^2 + t^2
    v(z, t) = E[eps - x | z_t = z] = (z - (1 - t) mu) (t - (1 - t) sigma^2) / s(t)^2 - mu
    z_r     = (z_t - (1 - t) mu) s(r) / s(t) + (1 - r) mu          (the probability-flow map t -> r)
    u(z_t, r, t) = (z_t - z_r) / (t - r)                             (v at r = t)

One Euler step of the teacher from noise, eps - v(eps, 1), is the conditional mean mu for every eps;
the exact one-step map eps - u(eps, 0, 1) = sigma eps + mu reproduces the whole distribution.
"""

from __future__ import annotations

import torch

from neurips26.harness.validation import check_scalar
from neurips26.smfsr.flows import bcast


class GaussianOracle:
    """Exact flows of x | y ~ N(a y, sigma^2 I) in ``d = len(a)`` dimensions; y of shape (B,) or (B, 1).

    Every method takes batched tensors (z of shape (B, d), times of shape (B,)) and is written with
    differentiable torch ops, so ``torch.func.jvp`` goes through it.
    """

    def __init__(self, a, sigma: float = 0.5, dtype: torch.dtype = torch.float64):
        self.sigma = check_scalar(sigma, "sigma", float, min=0, inclusive="neither")
        self.a = torch.as_tensor(a, dtype=dtype).reshape(-1)
        if self.a.numel() < 1 or not torch.all(torch.isfinite(self.a)):
            raise ValueError("a must be a non-empty finite vector")
        self.dim = self.a.numel()

    def mean(self, y: torch.Tensor) -> torch.Tensor:
        y = torch.as_tensor(y, dtype=self.a.dtype).reshape(-1, 1)
        return y * self.a

    def s(self, t: torch.Tensor) -> torch.Tensor:
        return torch.sqrt((1 - t) ** 2 * self.sigma ** 2 + t ** 2)

    def v(self, z: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        mu, tt = self.mean(y), bcast(t, z)
        return (z - (1 - tt) * mu) * (tt - (1 - tt) * self.sigma ** 2) / (self.s(tt) ** 2) - mu

    def flow(self, z_t: torch.Tensor, r: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        mu, tt, rr = self.mean(y), bcast(t, z_t), bcast(r, z_t)
        return (z_t - (1 - tt) * mu) * self.s(rr) / self.s(tt) + (1 - rr) * mu

    def u(self, z_t: torch.Tensor, r: torch.Tensor, t: torch.Tensor, y: torch.Tensor,
          tol: float = 0.0) -> torch.Tensor:
        """Average velocity; v where t - r <= tol (the 0/0 point r = t)."""
        gap = bcast(t - r, z_t)
        near = gap <= tol
        safe = torch.where(near, torch.ones_like(gap), gap)
        u = (z_t - self.flow(z_t, r, t, y)) / safe
        return torch.where(near, self.v(z_t, t, y), u)

    def __call__(self, z, r, t, y):
        """As a ``u_fn(z, r, t, y)`` for the samplers and targets."""
        return self.u(z, r, t, y)

    def sample_marginal(self, t: torch.Tensor, y: torch.Tensor, generator: torch.Generator | None = None
                        ) -> torch.Tensor:
        """z_t ~ N((1 - t) mu, s(t)^2 I)."""
        n = t.shape[0]
        e = torch.randn(n, self.dim, generator=generator, dtype=self.a.dtype)
        tt = bcast(t, e)
        return (1 - tt) * self.mean(y) + self.s(tt) * e

    def sample_data(self, y: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        mu = self.mean(y)
        return mu + self.sigma * torch.randn(mu.shape, generator=generator, dtype=self.a.dtype)
