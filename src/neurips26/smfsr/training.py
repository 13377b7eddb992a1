"""Stage 0 (LR-conditioned rectified-flow teacher), stage 1 (SplitMeanFlow distillation) and the
MeanFlow-JVP student baseline, with EMA.

Stage 0::  L_FM = E || v_phi(z_t, t | y) - (eps - x) ||^2,  t ~ logit-normal(0, 1)

Stage 1 (one step; ``splitmeanflow_loss``)::

    (r, t, kind) ~ sample_split_intervals(p_bnd, p_one);  z_t = (1 - t) x + t eps
    boundary (r = t):  target = v_phi(z_t, t | y)   (frozen teacher; or eps - x with boundary="data")
    split:             lam ~ U(0, 1), s = (1 - lam) t + lam r, u2 = u_theta(z_t, s, t),
                       z_s = z_t - (t - s) u2, u1 = u_theta(z_s, r, s),
                       target = (1 - lam) u1 + lam u2     (no grad)
    loss = mean(w || u_theta(z_t, r, t | y) - sg(target) ||^2),   EMA(theta) with decay 0.999

MeanFlow-JVP (``meanflow_loss``)::  (r, t) ~ MeanFlow's sampler;
target = sg(v - (t - r) JVP(u_theta; (v, 0, 1))) with v = eps - x and MeanFlow's adaptive weight.

A *pool* is anything with ``hr``/``lr`` tensors of equal length (``degradation.PairPool``); batches
are drawn with replacement from it with the caller's generator.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import torch

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.smfsr.flows import (BOUNDARY, interpolate, logit_normal, meanflow_target,
                                   sample_meanflow_intervals, sample_split_intervals, split_target, velocity,
                                   weighted_loss)

BOUNDARY_TARGETS = ("teacher", "data")


class EMA:
    """Exponential moving average of a model's parameters (a frozen copy, ``.model``).

    theta_ema <- d_n theta_ema + (1 - d_n) theta after update n (n = 1, 2, ...), with d_n = ``decay``, or
    with ``warmup`` d_n = min(decay, (1 + n) / (10 + n)) (the usual EMA warm-up, e.g. diffusers'
    ``EMAModel``): a plain 0.999 EMA after 1,200 steps still puts 0.999^1200 = 30% of its weight on the
    initialisation (here the teacher), a lag the warm-up removes while d_n -> decay.
    """

    def __init__(self, model: torch.nn.Module, decay: float = 0.999, warmup: bool = False):
        self.decay = check_scalar(decay, "decay", float, min=0, max=1)
        self.warmup = bool(warmup)
        self.updates = 0
        self.model = copy.deepcopy(model).requires_grad_(False).eval()

    def current_decay(self) -> float:
        """d_n of the next update."""
        n = self.updates + 1
        return min(self.decay, (1 + n) / (10 + n)) if self.warmup else self.decay

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        d = self.current_decay()
        self.updates += 1
        for pe, p in zip(self.model.parameters(), model.parameters()):
            pe.lerp_(p.detach(), 1 - d)
        for be, b in zip(self.model.buffers(), model.buffers()):
            be.copy_(b)


@dataclass
class TrainLog:
    """What a training loop did: steps done, seconds, the loss curve (every step)."""
    steps: int = 0
    seconds: float = 0.0
    losses: list[float] = field(default_factory=list)
    stopped_by_time: bool = False

    def summary(self) -> dict:
        tail = self.losses[-50:] or [float("nan")]
        return {"steps": self.steps, "final_loss": sum(tail) / len(tail),
                "stopped_by_time": self.stopped_by_time}


def adam(params, lr: float, betas=(0.9, 0.999)) -> torch.optim.Adam:
    """Adam with the fused kernel where torch has one for these parameters (CPU/CUDA floats): the same
    update rule as the default per-tensor loop, ~3x faster on these models' 24 small tensors (0.9 vs
    2.6 ms a step for the quick student, measured on one thread); the default implementation otherwise."""
    params = list(params)
    try:
        return torch.optim.Adam(params, lr=lr, betas=betas, fused=True)
    except (RuntimeError, ValueError, TypeError):
        return torch.optim.Adam(params, lr=lr, betas=betas)


def draw_batch(pool, batch: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    idx = torch.randint(0, pool.hr.shape[0], (batch,), generator=generator)
    return pool.hr[idx], pool.lr[idx]


def _loop(step_fn, params, steps: int | None, seconds: float | None, lr: float, betas=(0.9, 0.999),
          after=None, deadline: float | None = None, clock=time.perf_counter) -> TrainLog:
    """Adam on ``params``; ``step_fn()`` returns the loss. Stops after ``steps`` steps, or after
    ``seconds`` of wall-clock (for time-matched baselines), or at the absolute ``deadline``, both read on
    ``clock`` (``time.perf_counter``; ``time.process_time`` counts this process's CPU seconds only)."""
    opt = adam(params, lr=lr, betas=betas)
    log = TrainLog()
    t0 = clock()
    while True:
        if steps is not None and log.steps >= steps:
            break
        now = clock()  # one clock read a step (process_time is a system call)
        if seconds is not None and now - t0 >= seconds:
            break
        if deadline is not None and now >= deadline:
            log.stopped_by_time = True
            break
        loss = step_fn()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if after is not None:
            after()
        log.losses.append(float(loss.detach()))
        log.steps += 1
    log.seconds = clock() - t0
    return log


def teacher_loss(teacher, hr: torch.Tensor, lr: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Flow matching: || v_phi(z_t, t | y) - (eps - x) ||^2 with t ~ logit-normal(0, 1)."""
    n = hr.shape[0]
    eps = torch.randn(hr.shape, generator=generator, dtype=hr.dtype)
    t = logit_normal(n, 0.0, 1.0, generator, dtype=hr.dtype)
    z = interpolate(hr, eps, t)
    return (teacher(z, t, t, lr) - velocity(hr, eps)).pow(2).mean()


def train_teacher(teacher, pool, steps: int, batch: int = 128, lr: float = 1e-3, seed: int = 0,
                  deadline: float | None = None, clock=time.perf_counter) -> TrainLog:
    """Stage 0: train the LR-conditioned rectified-flow teacher in place."""
    steps = check_scalar(steps, "steps", int, min=0)
    batch = check_scalar(batch, "batch", int, min=1)
    g = torch.Generator().manual_seed(seed)
    teacher.train()

    def step():
        hr, y = draw_batch(pool, batch, g)
        return teacher_loss(teacher, hr, y, g)

    log = _loop(step, teacher.parameters(), steps, None, lr, deadline=deadline, clock=clock)
    teacher.eval()
    return log


def draw_split_batch(hr: torch.Tensor, generator: torch.Generator, p_bnd: float = 0.5, p_one: float = 0.1
                     ) -> dict:
    """The random draws of one SplitMeanFlow step for a batch shaped like ``hr``: eps, (r, t, kind), lam."""
    n = hr.shape[0]
    eps = torch.randn(hr.shape, generator=generator, dtype=hr.dtype)
    r, t, kind = sample_split_intervals(n, p_bnd, p_one, generator, dtype=hr.dtype)
    lam = torch.rand(n, generator=generator, dtype=hr.dtype)
    return {"eps": eps, "r": r, "t": t, "kind": kind, "lam": lam}


def splitmeanflow_loss_from(student, teacher, hr: torch.Tensor, lr: torch.Tensor, draws: dict,
                            boundary: str = "teacher", adaptive: bool = False) -> torch.Tensor:
    """The SplitMeanFlow loss on given draws (``draw_split_batch``); a data-parallel rank passes its
    slice of the global batch's draws (``scale.ddp_splitmeanflow``)."""
    boundary = check_choice(boundary, "boundary", BOUNDARY_TARGETS)
    eps, r, t, kind, lam = (draws[k] for k in ("eps", "r", "t", "kind", "lam"))
    z = interpolate(hr, eps, t)
    target = torch.empty_like(hr)
    bnd = kind == BOUNDARY
    if bnd.any():
        if boundary == "teacher":
            with torch.no_grad():
                target[bnd] = teacher(z[bnd], t[bnd], t[bnd], lr[bnd]).to(target.dtype)  # (autocast)
        else:
            target[bnd] = velocity(hr[bnd], eps[bnd])
    sp = ~bnd
    if sp.any():
        target[sp] = split_target(student, z[sp], r[sp], t[sp], lam[sp], lr[sp]).to(target.dtype)
    pred = student(z, r, t, lr)
    return weighted_loss(pred, target.detach(), adaptive)


def splitmeanflow_loss(student, teacher, hr: torch.Tensor, lr: torch.Tensor, generator: torch.Generator,
                       p_bnd: float = 0.5, p_one: float = 0.1, boundary: str = "teacher",
                       adaptive: bool = False) -> torch.Tensor:
    """One SplitMeanFlow loss (see the module docstring). Targets carry no gradient."""
    boundary = check_choice(boundary, "boundary", BOUNDARY_TARGETS)
    return splitmeanflow_loss_from(student, teacher, hr, lr, draw_split_batch(hr, generator, p_bnd, p_one),
                                   boundary, adaptive)


def train_splitmeanflow(student, teacher, pool, steps: int | None, batch: int = 128, lr: float = 1e-3,
                        p_bnd: float = 0.5, p_one: float = 0.1, boundary: str = "teacher",
                        adaptive: bool = False, ema_decay: float = 0.999, seed: int = 0,
                        seconds: float | None = None, deadline: float | None = None,
                        ema_warmup: bool = False, clock=time.perf_counter) -> tuple[EMA, TrainLog]:
    """Stage 1: SplitMeanFlow distillation of ``teacher`` into ``student`` (in place); returns (EMA, log)."""
    batch = check_scalar(batch, "batch", int, min=1)
    teacher.eval().requires_grad_(False)
    ema = EMA(student, ema_decay, ema_warmup)
    g = torch.Generator().manual_seed(seed)
    student.train()

    def step():
        hr, y = draw_batch(pool, batch, g)
        return splitmeanflow_loss(student, teacher, hr, y, g, p_bnd, p_one, boundary, adaptive)

    log = _loop(step, student.parameters(), steps, seconds, lr, after=lambda: ema.update(student),
                deadline=deadline, clock=clock)
    student.eval()
    return ema, log


def meanflow_loss(student, hr: torch.Tensor, lr: torch.Tensor, generator: torch.Generator,
                  adaptive: bool = True, ratio_neq: float = 0.25) -> torch.Tensor:
    """MeanFlow-JVP: || u_theta - sg(v - (t - r) JVP(u_theta; (v, 0, 1))) ||^2, adaptive weight (p = 1)."""
    n = hr.shape[0]
    eps = torch.randn(hr.shape, generator=generator, dtype=hr.dtype)
    r, t = sample_meanflow_intervals(n, -0.4, 1.0, ratio_neq, generator, dtype=hr.dtype)
    z = interpolate(hr, eps, t)
    v = velocity(hr, eps)
    target, u = meanflow_target(student, z, r, t, v, lr, with_output=True)
    return weighted_loss(u, target, adaptive)


def train_meanflow(student, pool, steps: int | None = None, seconds: float | None = None, batch: int = 128,
                   lr: float = 1e-3, adaptive: bool = True, ema_decay: float = 0.999, seed: int = 0,
                   deadline: float | None = None, ema_warmup: bool = False, clock=time.perf_counter
                   ) -> tuple[EMA, TrainLog]:
    """The MeanFlow-JVP student, for ``steps`` steps or ``seconds`` of wall-clock (equal-time baseline)."""
    if steps is None and seconds is None:
        raise ValueError("give steps or seconds")
    ema = EMA(student, ema_decay, ema_warmup)
    g = torch.Generator().manual_seed(seed)
    student.train()

    def step():
        hr, y = draw_batch(pool, batch, g)
        return meanflow_loss(student, hr, y, g, adaptive)

    log = _loop(step, student.parameters(), steps, seconds, lr, after=lambda: ema.update(student),
                deadline=deadline, clock=clock)
    student.eval()
    return ema, log


@dataclass
class PoolLike:
    """The least a training pool is: aligned ``hr`` (N, C, H, W) and ``lr`` (N, C, H/4, W/4) tensors."""
    hr: torch.Tensor
    lr: torch.Tensor
