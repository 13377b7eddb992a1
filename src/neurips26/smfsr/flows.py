"""Flow utilities in MeanFlow conventions, the interval-splitting target, the MeanFlow-JVP target.

Conventions (MeanFlow, Geng et al. 2025; used everywhere in this package)::

    z_t = (1 - t) x + t eps,      t in [0, 1], t = 1 is noise            (interpolate)
    v   = eps - x                                                     (conditional velocity)
    u(z_t, r, t) = 1/(t - r) int_r^t v(z_tau, tau) dtau,  r <= t,  u(z, t, t) = v(z, t)
    z_r = z_t - (t - r) u(z_t, r, t)                                  (displace)
    one step:  x_hat = eps - u(eps, 0, 1 | y)

Interval Splitting Consistency (SplitMeanFlow, Guo et al. 2025), r <= s <= t::

    (t - r) u(z_t, r, t) = (s - r) u(z_s, r, s) + (t - s) u(z_t, s, t)

with s = (1 - lam) t + lam r (so t - s = lam (t - r), s - r = (1 - lam)(t - r))::

    u(z_t, r, t) = (1 - lam) u(z_s, r, s) + lam u(z_t, s, t),   z_s = z_t - (t - s) u(z_t, s, t)

MeanFlow identity (the s -> t limit; what the JVP baseline regresses on)::

    u = v - (t - r) (v . d_z u + d_t u),   loss || u_theta - sg(v - (t - r) JVP(u_theta; (v, 0, 1))) ||^2
    adaptive weight w = 1 / (||Delta||^2 + c)^p, c = 1e-3, p = 1 (detached)

A velocity or average-velocity model is any callable ``u_fn(z, r, t, y)`` with ``z`` of shape
(B, ...), ``r``/``t`` of shape (B,), and ``y`` the LR condition (or None); the teacher is the same
callable evaluated at r = t. Times are broadcast over the trailing dimensions of ``z``.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import torch

from neurips26.harness.validation import check_scalar

UFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Optional[torch.Tensor]], torch.Tensor]


# ---------------------------------------------------------------------------- validation
def check_times(r: torch.Tensor, t: torch.Tensor, n: int | None = None, tol: float = 1e-6) -> None:
    """``ValueError`` unless 0 <= r <= t <= 1 elementwise (up to ``tol``), finite, shape (n,)."""
    for name, x in (("r", r), ("t", t)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.ndim != 1 or (n is not None and x.shape[0] != n):
            raise ValueError(f"{name} must have shape ({n if n is not None else 'B'},), got {tuple(x.shape)}")
        if not torch.all(torch.isfinite(x)):
            raise ValueError(f"{name} must be finite")
        if torch.any(x < -tol) or torch.any(x > 1 + tol):
            raise ValueError(f"{name} must lie in [0, 1], got range "
                             f"[{x.min().item():.4g}, {x.max().item():.4g}]")
    if torch.any(r > t + tol):
        raise ValueError("r must be <= t elementwise (r > t found)")


def bcast(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``t`` of shape (B,) viewed as (B, 1, ..., 1) to broadcast against ``like``."""
    return t.reshape(t.shape[0], *([1] * (like.ndim - 1))).to(like.dtype)


# ---------------------------------------------------------------------------- conventions
def interpolate(x: torch.Tensor, eps: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """z_t = (1 - t) x + t eps."""
    tt = bcast(t, x)
    return (1 - tt) * x + tt * eps


def velocity(x: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """Conditional velocity v = eps - x (d z_t / d t)."""
    return eps - x


def displace(z_t: torch.Tensor, u: torch.Tensor, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """z_r = z_t - (t - r) u(z_t, r, t)."""
    return z_t - bcast(t - r, z_t) * u


def cosine_grid(num_steps: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """t_k = 0.5 (1 - cos(pi k / N)), k = 0..N (ascending; the sampler walks it from 1 to 0)."""
    num_steps = check_scalar(num_steps, "num_steps", int, min=1)
    k = torch.arange(num_steps + 1, dtype=torch.float64)
    g = 0.5 * (1 - torch.cos(math.pi * k / num_steps))
    g[0], g[-1] = 0.0, 1.0  # exact end points
    return g.to(dtype)


# ---------------------------------------------------------------------------- (t, r) samplers
def logit_normal(n: int, mean: float = 0.0, std: float = 1.0, generator: torch.Generator | None = None,
                 eps: float = 1e-4, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """t = sigmoid(mean + std * N(0, 1)) clamped to [eps, 1 - eps] (the released code's sampler)."""
    n = check_scalar(n, "n", int, min=1)
    std = check_scalar(std, "std", float, min=0, inclusive="neither")
    z = torch.randn(n, generator=generator, dtype=torch.float64) * std + check_scalar(mean, "mean", float)
    return torch.sigmoid(z).clamp(eps, 1 - eps).to(dtype)


BOUNDARY, ONE_STEP, SPLIT = 0, 1, 2


def sample_split_intervals(n: int, p_bnd: float = 0.5, p_one: float = 0.1,
                           generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(r, t, kind) for SplitMeanFlow stage 1.

    t ~ logit-normal(0, 1), r = U(0, 1) t; then one categorical draw per sample: with prob ``p_bnd``
    r = t (kind BOUNDARY), with prob ``p_one`` (r, t) = (0, 1) (kind ONE_STEP, the inference interval),
    else keep (r, t) (kind SPLIT). The cases are exclusive, so p_bnd + p_one <= 1.
    """
    n = check_scalar(n, "n", int, min=1)
    p_bnd = check_scalar(p_bnd, "p_bnd", float, min=0, max=1)
    p_one = check_scalar(p_one, "p_one", float, min=0, max=1)
    if p_bnd + p_one > 1 + 1e-12:
        raise ValueError(f"p_bnd + p_one must be <= 1 (exclusive cases), got {p_bnd} + {p_one}")
    t = logit_normal(n, 0.0, 1.0, generator, dtype=torch.float64)
    r = torch.rand(n, generator=generator, dtype=torch.float64) * t
    c = torch.rand(n, generator=generator, dtype=torch.float64)
    kind = torch.full((n,), SPLIT, dtype=torch.long)
    kind[c < p_bnd] = BOUNDARY
    kind[(c >= p_bnd) & (c < p_bnd + p_one)] = ONE_STEP
    r = torch.where(kind == BOUNDARY, t, r)
    one = kind == ONE_STEP
    r = torch.where(one, torch.zeros_like(r), r)
    t = torch.where(one, torch.ones_like(t), t)
    return r.to(dtype), t.to(dtype), kind


def sample_meanflow_intervals(n: int, mean: float = -0.4, std: float = 1.0, ratio_neq: float = 0.25,
                              generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32
                              ) -> tuple[torch.Tensor, torch.Tensor]:
    """MeanFlow's sampler: two logit-normal(mean, std) draws sorted (t >= r); a fraction
    1 - ``ratio_neq`` of samples gets r = t."""
    n = check_scalar(n, "n", int, min=1)
    ratio_neq = check_scalar(ratio_neq, "ratio_neq", float, min=0, max=1)
    a = logit_normal(n, mean, std, generator, dtype=torch.float64)
    b = logit_normal(n, mean, std, generator, dtype=torch.float64)
    t, r = torch.maximum(a, b), torch.minimum(a, b)
    eq = torch.rand(n, generator=generator, dtype=torch.float64) >= ratio_neq
    r = torch.where(eq, t, r)
    return r.to(dtype), t.to(dtype)


# ---------------------------------------------------------------------------- targets
def split_target(u_fn: UFn, z_t: torch.Tensor, r: torch.Tensor, t: torch.Tensor, lam: torch.Tensor,
                 y: torch.Tensor | None = None) -> torch.Tensor:
    """The interval-splitting target (no gradient):
    s = (1 - lam) t + lam r;  u2 = u(z_t, s, t);  z_s = z_t - (t - s) u2;  u1 = u(z_s, r, s);
    target = (1 - lam) u1 + lam u2."""
    with torch.no_grad():
        s = (1 - lam) * t + lam * r
        u2 = u_fn(z_t, s, t, y)
        z_s = displace(z_t, u2, s, t)
        u1 = u_fn(z_s, r, s, y)
        lam_b = bcast(lam, z_t)
        return ((1 - lam_b) * u1 + lam_b * u2).detach()


def meanflow_target(u_fn: UFn, z_t: torch.Tensor, r: torch.Tensor, t: torch.Tensor, v: torch.Tensor,
                    y: torch.Tensor | None = None, with_output: bool = False):
    """MeanFlow's target sg(v - (t - r) (v . d_z u + d_t u)) via ``torch.func.jvp`` with tangent
    (v, 0, 1) in (z, r, t). With ``with_output`` also returns u(z_t, r, t) (the jvp's primal, which
    keeps its autograd graph for the loss)."""
    def f(z, rr, tt):
        return u_fn(z, rr, tt, y)

    u, dudt = torch.func.jvp(f, (z_t, r, t), (v, torch.zeros_like(r), torch.ones_like(t)))
    target = (v - bcast(t - r, z_t) * dudt).detach()
    return (target, u) if with_output else target


def per_sample_sq(delta: torch.Tensor) -> torch.Tensor:
    """||Delta||^2 per sample (sum over all but the batch axis)."""
    return delta.reshape(delta.shape[0], -1).pow(2).sum(1)


def adaptive_weight(sq: torch.Tensor, p: float = 1.0, c: float = 1e-3) -> torch.Tensor:
    """MeanFlow's adaptive loss weight w = 1 / (||Delta||^2 + c)^p, detached."""
    return 1.0 / (sq.detach() + c).pow(p)


def weighted_loss(pred: torch.Tensor, target: torch.Tensor, adaptive: bool = False, p: float = 1.0,
                  c: float = 1e-3) -> torch.Tensor:
    """mean(w * ||pred - sg(target)||^2 / D): plain MSE for w = 1, MeanFlow's weighting otherwise
    (w is applied to the per-sample sum of squares, as MeanFlow does)."""
    delta = pred - target.detach()
    if not adaptive:
        return delta.pow(2).mean()
    sq = per_sample_sq(delta)
    return (adaptive_weight(sq, p, c) * sq).mean()
