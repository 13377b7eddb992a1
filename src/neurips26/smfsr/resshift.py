"""ResShift (Yue et al., NeurIPS 2023) and SinSR (Wang et al., CVPR 2024) at laptop scale, on our backbones.

ResShift: a Markov chain that shifts the residual e_0 = y - x_0 (y = bicubic-upsampled LR, x_0 = HR) into
the image over T steps (pixel space here; the paper works in a VQ-GAN latent)::

    q(x_t | x_0, y)          = N(x_0 + eta_t (y - x_0), kappa^2 eta_t I)                 (marginal)
    q(x_t | x_{t-1}, y)      = N(x_{t-1} + alpha_t (y - x_0), kappa^2 alpha_t I),  alpha_t = eta_t - eta_{t-1}
    q(x_{t-1} | x_t, x_0, y) = N((eta_{t-1}/eta_t) x_t + (alpha_t/eta_t) x_0, kappa^2 (eta_{t-1}/eta_t) alpha_t I)

eta schedule (the paper's eq. 10): sqrt(eta_t) = sqrt(eta_1) b0^(beta_t), beta_t = ((t-1)/(T-1))^p (T-1),
b0 = exp(log(eta_T / eta_1) / (2 (T-1))), with sqrt(eta_1) = 0.04, eta_T = 0.999, p = 0.3, T = 15, kappa = 2.
The network f_theta(x_t, y, t) predicts x_0 (loss || f - x_0 ||^2, t uniform on 1..T); sampling starts at
x_T = y + kappa sqrt(eta_T) eps and draws the posterior with x_0 := f (T NFE; x_0 = f at t = 1).

SinSR: one-step distillation of ResShift's *deterministic* sampler (the DDIM-like map that keeps every
marginal: x_{t-1} = x0 + eta_{t-1} (y - x0) + kappa sqrt(eta_{t-1}) eps_hat, eps_hat the noise implied by x_t),
which makes x_T -> x_0 a fixed function of (x_T, y). The student (initialised from the teacher) maps x_T
to that x_0 in one step (L_distill = || f(x_T, T) - F_teacher(x_T) ||^2); the consistency-preserving loss
uses the ground truth: an inverse network g learns the map x_0 -> x_T on the teacher's pairs
(L_inverse = || g(x0_teacher, 0) - x_T ||^2), and L_gt = || f(sg(g(x_gt, 0)), T) - x_gt ||^2 asks the
one-step map to reproduce the HR image from its inverted noise. SinSR runs g as the same network at t = 0;
ASSUMPTION (knob ``shared_inverse``): at laptop scale g is a separate copy of the student by default (the
256-wide MLP sharing both maps learnt neither in our test: the x_T regression, variance kappa^2 = 4,
dominates the loss). The time input is t / T (0 for the inverse direction) through the backbone's
embedding at r = t.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from neurips26.harness.validation import check_scalar
from neurips26.smfsr.base import check_image, upsample
from neurips26.smfsr.training import TrainLog, _loop, draw_batch


@dataclass(frozen=True)
class ResShiftSchedule:
    """The eta schedule (paper eq. 10) with its T, kappa, sqrt(eta_1), eta_T and power p."""
    steps: int = 15
    kappa: float = 2.0
    sqrt_eta_1: float = 0.04
    eta_T: float = 0.999
    power: float = 0.3

    def etas(self, dtype=torch.float64) -> torch.Tensor:
        """(eta_0 = 0, eta_1, ..., eta_T): T + 1 values, increasing."""
        T = check_scalar(self.steps, "steps", int, min=2)
        if not 0 < self.sqrt_eta_1 ** 2 < self.eta_T < 1:
            raise ValueError(f"need 0 < eta_1 < eta_T < 1, got eta_1 = {self.sqrt_eta_1 ** 2}, eta_T = {self.eta_T}")
        t = torch.arange(1, T + 1, dtype=torch.float64)
        beta = ((t - 1) / (T - 1)) ** self.power * (T - 1)
        b0 = math.exp(math.log(self.eta_T / self.sqrt_eta_1 ** 2) / (2 * (T - 1)))
        sqrt_eta = self.sqrt_eta_1 * b0 ** beta
        return torch.cat([torch.zeros(1, dtype=torch.float64), sqrt_eta ** 2]).to(dtype)


def _col(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return v.to(like.dtype).view(-1, *([1] * (like.ndim - 1)))


def q_sample(x0: torch.Tensor, y_up: torch.Tensor, t: torch.Tensor, sched: ResShiftSchedule,
             noise: torch.Tensor) -> torch.Tensor:
    """x_t = x_0 + eta_t (y - x_0) + kappa sqrt(eta_t) eps (the marginal q(x_t | x_0, y)); t in 1..T, (B,)."""
    eta = _col(sched.etas()[t], x0)
    return x0 + eta * (y_up - x0) + sched.kappa * eta.sqrt() * noise


def _predict_x0(model, x: torch.Tensor, lr: torch.Tensor, t: torch.Tensor, T: int) -> torch.Tensor:
    """f_theta(x_t, y, t): the backbone at r = t = t / T (one time input), predicting x_0."""
    tau = (t.to(x.dtype) / T)
    return model(x, tau, tau, lr)


def resshift_loss(model, hr: torch.Tensor, lr: torch.Tensor, sched: ResShiftSchedule,
                  generator: torch.Generator) -> torch.Tensor:
    """|| f_theta(x_t, y, t) - x_0 ||^2, t ~ U{1..T}, x_t from the marginal."""
    n = hr.shape[0]
    t = torch.randint(1, sched.steps + 1, (n,), generator=generator)
    x_t = q_sample(hr, upsample(lr), t, sched, torch.randn(hr.shape, generator=generator, dtype=hr.dtype))
    return (_predict_x0(model, x_t, lr, t, sched.steps) - hr).pow(2).mean()


def train_resshift(model, pool, steps: int | None, batch: int = 128, lr: float = 1e-3,
                   sched: ResShiftSchedule = ResShiftSchedule(), seed: int = 0, deadline: float | None = None,
                   clock=None, seconds: float | None = None) -> TrainLog:
    """Train the ResShift x_0-predictor in place (Adam; ``steps``, ``seconds`` or until ``deadline``, all on
    ``clock``)."""
    import time
    g = torch.Generator().manual_seed(seed)
    model.train()

    def step():
        hr, y = draw_batch(pool, batch, g)
        return resshift_loss(model, hr, y, sched, g)

    log = _loop(step, model.parameters(), steps, seconds, lr, deadline=deadline, clock=clock or time.perf_counter)
    model.eval()
    return log


def start_state(lr: torch.Tensor, sched: ResShiftSchedule, noise: torch.Tensor) -> torch.Tensor:
    """x_T = y + kappa sqrt(eta_T) eps (the chain's prior; eta_T ~ 1)."""
    return upsample(lr) + sched.kappa * math.sqrt(float(sched.etas()[-1])) * noise


def _checked_start(model, lr: torch.Tensor, noise: torch.Tensor | None, generator) -> tuple:
    """The validated LR batch and the starting noise eps (drawn when not given) of the 4x output shape."""
    lr = check_image(lr, "lr", channels=getattr(model, "channels", None))
    B, C, h, w = lr.shape
    shape = (B, C, 4 * h, 4 * w)
    if noise is None:
        noise = torch.randn(shape, generator=generator, dtype=lr.dtype)
    elif tuple(noise.shape) != shape:
        raise ValueError(f"noise must have the output shape {shape}, got {tuple(noise.shape)}")
    return lr, noise


@torch.no_grad()
def resshift_sample(model, lr: torch.Tensor, sched: ResShiftSchedule = ResShiftSchedule(),
                    noise: torch.Tensor | None = None, generator: torch.Generator | None = None,
                    deterministic: bool = False, clamp: bool = True) -> torch.Tensor:
    """T-step ResShift sampling from x_T = y + kappa sqrt(eta_T) eps.

    Stochastic (the paper's): x_{t-1} ~ N((eta_{t-1}/eta_t) x_t + (alpha_t/eta_t) f, kappa^2 (eta_{t-1}/eta_t) alpha_t).
    Deterministic (SinSR's teacher map): x_{t-1} = f + eta_{t-1} (y - f) + kappa sqrt(eta_{t-1}) eps_hat,
    eps_hat = (x_t - f - eta_t (y - f)) / (kappa sqrt(eta_t)). Both give x_0 = f at t = 1 (eta_0 = 0)."""
    lr, noise = _checked_start(model, lr, noise, generator)
    x = teacher_map(model, lr, sched, start_state(lr, sched, noise), generator, deterministic)
    return x.clamp(0, 1) if clamp else x


@torch.no_grad()
def teacher_map(model, lr: torch.Tensor, sched: ResShiftSchedule, x_T: torch.Tensor,
                generator: torch.Generator | None = None, deterministic: bool = True) -> torch.Tensor:
    """The T-step chain from a given x_T (``deterministic``: SinSR's marginal-preserving ODE-like map)."""
    etas = sched.etas()
    y_up = upsample(lr)
    T, k = sched.steps, sched.kappa
    x = x_T
    for t in range(T, 0, -1):
        tt = torch.full((x.shape[0],), t)
        f = _predict_x0(model, x, lr, tt, T)
        e_t, e_p = float(etas[t]), float(etas[t - 1])
        if t == 1:
            x = f
        elif deterministic:
            eps_hat = (x - f - e_t * (y_up - f)) / (k * math.sqrt(e_t))
            x = f + e_p * (y_up - f) + k * math.sqrt(e_p) * eps_hat
        else:
            a = e_t - e_p
            mean = (e_p / e_t) * x + (a / e_t) * f
            x = mean + k * math.sqrt(e_p / e_t * a) * torch.randn(x.shape, generator=generator, dtype=x.dtype)
    return x


def sinsr_losses(student, teacher, hr: torch.Tensor, lr: torch.Tensor, sched: ResShiftSchedule,
                 generator: torch.Generator, lam_inv: float = 1.0, lam_gt: float = 1.0, inverse=None) -> dict:
    """SinSR's three terms on one batch (the module docstring): distill, inverse, consistency (gt);
    ``inverse``: the network g (None: the student itself at t = 0, SinSR's shared form)."""
    inverse = student if inverse is None else inverse
    B, T = hr.shape[0], sched.steps
    x_T = start_state(lr, sched, torch.randn(hr.shape, generator=generator, dtype=hr.dtype))
    x0_teacher = teacher_map(teacher, lr, sched, x_T, deterministic=True)
    tT, t0 = torch.full((B,), T), torch.zeros(B, dtype=torch.long)
    distill = (_predict_x0(student, x_T, lr, tT, T) - x0_teacher).pow(2).mean()
    inv = (_predict_x0(inverse, x0_teacher, lr, t0, T) - x_T).pow(2).mean()
    with torch.no_grad():
        x_T_gt = _predict_x0(inverse, hr, lr, t0, T)
    gt = (_predict_x0(student, x_T_gt, lr, tT, T) - hr).pow(2).mean()
    return {"distill": distill, "inverse": inv, "gt": gt, "total": distill + lam_inv * inv + lam_gt * gt}


def train_sinsr(student, teacher, pool, steps: int | None, batch: int = 128, lr: float = 1e-3,
                sched: ResShiftSchedule = ResShiftSchedule(), seed: int = 0, lam_inv: float = 1.0,
                lam_gt: float = 1.0, shared_inverse: bool = False, deadline: float | None = None,
                clock=None, seconds: float | None = None) -> TrainLog:
    """Distil the (frozen) ResShift teacher into the one-step ``student`` in place (SinSR); the inverse
    network is the student itself (``shared_inverse``) or a copy of its initial weights trained alongside."""
    import copy
    import time
    g = torch.Generator().manual_seed(seed)
    teacher.eval()
    student.train()
    inverse = None if shared_inverse else copy.deepcopy(student)
    params = list(student.parameters()) + ([] if inverse is None else list(inverse.parameters()))

    def step():
        hr, y = draw_batch(pool, batch, g)
        return sinsr_losses(student, teacher, hr, y, sched, g, lam_inv, lam_gt, inverse)["total"]

    log = _loop(step, params, steps, seconds, lr, deadline=deadline, clock=clock or time.perf_counter)
    student.eval()
    return log


@torch.no_grad()
def sinsr_sample(student, lr: torch.Tensor, sched: ResShiftSchedule = ResShiftSchedule(),
                 noise: torch.Tensor | None = None, generator: torch.Generator | None = None,
                 clamp: bool = True) -> torch.Tensor:
    """One step: x_0 = f(x_T, y, T), x_T = y + kappa sqrt(eta_T) eps."""
    lr, noise = _checked_start(student, lr, noise, generator)
    x = _predict_x0(student, start_state(lr, sched, noise), lr, torch.full((len(lr),), sched.steps), sched.steps)
    return x.clamp(0, 1) if clamp else x
