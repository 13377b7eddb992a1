"""Stage 2: GAN refinement with variational score distillation (VSD), and the direct LR -> HR baseline.

Generator (1 NFE, differentiable)::  G(eps, y) = eps - u_theta(eps, 0, 1 | y)      (start="noise")
                                     G(y)      = up(y) - u_theta(up(y), 0, 1 | y)  (start="lr": the
                                                 OSEDiff-style direct baseline, deterministic)

    L_G = lam_rec ||G - x||^2 + lam_perc (1 - MS-SSIM(G, x)) + lam_vsd L_VSD + lam_adv (-E D(G))

VSD (OSEDiff's formulation rewritten for flows; ``vsd_loss``)::

    t' ~ U[0.02, 0.98],  z' = (1 - t') x_hat + t' eps'
    x0_real = z' - t' v_real(z', t'),  x0_fake = z' - t' v_fake(z', t')          (no grad)
    w = mean |x_hat - x0_real| per sample,  grad = (x0_fake - x0_real) / w
    L_VSD = mean((x_hat - sg(x_hat - grad))^2)          =>  d L_VSD / d x_hat = 2 grad / numel

fake score update: || v_fake(z', t') - (eps' - sg(x_hat)) ||^2 (flow matching on generated samples).
Discriminator: hinge on DiffAugment-ed real and fake; only its heads train (Adam 1e-4, betas (0, 0.99)).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.smfsr.base import upsample
from neurips26.smfsr.discriminator import build_discriminator, diff_augment, hinge_d_loss, hinge_g_loss
from neurips26.smfsr.flows import interpolate
from neurips26.smfsr.lora import lora_copy
from neurips26.smfsr.metrics import ms_ssim
from neurips26.smfsr.sampler import STARTS
from neurips26.smfsr.training import TrainLog, adam, draw_batch


FAKE_SCORES = ("full", "lora")


@dataclass(frozen=True)
class RefineConfig:
    """Stage-2 knobs (ASSUMPTION: OSEDiff-like weights; the paper's are not public)."""
    lam_rec: float = 1.0
    lam_perc: float = 2.0
    lam_vsd: float = 1.0
    lam_adv: float = 0.1
    discriminator: str = "dino"      # or "patchgan" (ablation)
    start: str = "noise"             # "lr": the direct LR -> HR baseline
    g_lr: float = 1e-4
    d_lr: float = 1e-4
    fake_lr: float = 1e-3            # 1e-4 at full scale
    t_min: float = 0.02
    t_max: float = 0.98
    disc_img: int = 16
    disc_batch: int | None = 32      # ASSUMPTION (laptop cost): D and the adversarial term see this many
                                     # samples of each batch; None = all
    fake_score: str = "full"         # "full" copy of the teacher (laptop) or "lora" (OSEDiff; full scale)
    lora_rank: int = 4


def generate(model, lr: torch.Tensor, eps: torch.Tensor | None, start: str = "noise") -> torch.Tensor:
    """One differentiable NFE: x_hat = z1 - u(z1, 0, 1 | y), z1 = eps (noise start) or up(y) (LR start)."""
    start = check_choice(start, "start", STARTS)
    z1 = eps if start == "noise" else upsample(lr)
    B = z1.shape[0]
    zeros, ones = torch.zeros(B, dtype=z1.dtype), torch.ones(B, dtype=z1.dtype)
    return z1 - model(z1, zeros, ones, lr)


def vsd_grad(x_hat: torch.Tensor, real_v, fake_v, lr: torch.Tensor, t: torch.Tensor, eps: torch.Tensor
             ) -> torch.Tensor:
    """grad = (x0_fake - x0_real) / mean|x_hat - x0_real| at z' = (1 - t) x_hat + t eps (no grad)."""
    with torch.no_grad():
        xd = x_hat.detach()
        z = interpolate(xd, eps, t)
        tt = t.view(-1, *([1] * (xd.ndim - 1)))
        x0_real = z - tt * real_v(z, t, t, lr)
        x0_fake = z - tt * fake_v(z, t, t, lr)
        w = (xd - x0_real).abs().mean(dim=tuple(range(1, xd.ndim)), keepdim=True).clamp(min=1e-8)
        return (x0_fake - x0_real) / w


def vsd_loss(x_hat: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """L_VSD = mean((x_hat - sg(x_hat - grad))^2)."""
    return (x_hat - (x_hat - grad).detach()).pow(2).mean()


def fake_score_loss(fake_v, x_hat: torch.Tensor, lr: torch.Tensor, t: torch.Tensor, eps: torch.Tensor
                    ) -> torch.Tensor:
    """Flow matching of the fake score on generated samples: || v_fake(z', t') - (eps' - sg(x_hat)) ||^2."""
    xd = x_hat.detach()
    z = interpolate(xd, eps, t)
    return (fake_v(z, t, t, lr) - (eps - xd)).pow(2).mean()


def refine(student, teacher, pool, steps: int, batch: int = 128, cfg: RefineConfig | None = None,
           seed: int = 0, deadline: float | None = None, clock=time.perf_counter):
    """Stage 2 on a copy of ``student``; returns (generator model, TrainLog, parts) where parts has the
    last-50-step means of each loss term. The real score is the frozen ``teacher``; the fake score a
    trainable full copy of it, or a LoRA of it (``cfg.fake_score="lora"``, rank ``cfg.lora_rank``)."""
    cfg = cfg or RefineConfig()
    steps = check_scalar(steps, "steps", int, min=0)
    check_choice(cfg.start, "start", STARTS)
    use_adv, use_vsd = cfg.lam_adv > 0, cfg.lam_vsd > 0
    g = torch.Generator().manual_seed(seed)
    gen = copy.deepcopy(student).train().requires_grad_(True)
    teacher = teacher.eval().requires_grad_(False)
    check_choice(cfg.fake_score, "fake_score", FAKE_SCORES)
    fake = None
    if use_vsd:
        fake = (copy.deepcopy(teacher).requires_grad_(True) if cfg.fake_score == "full"
                else lora_copy(teacher, cfg.lora_rank)).train()
    fake_params = [p for p in fake.parameters() if p.requires_grad] if use_vsd else []
    disc = build_discriminator(cfg.discriminator, gen.channels, cfg.disc_img).train() if use_adv else None
    gen_params = list(gen.parameters())
    d_params = [p for p in disc.parameters() if p.requires_grad] if use_adv else []
    opt_g = adam(gen_params, lr=cfg.g_lr)
    opt_f = adam(fake_params, lr=cfg.fake_lr) if use_vsd else None
    opt_d = adam(d_params, lr=cfg.d_lr, betas=(0.0, 0.99)) if use_adv else None
    log = TrainLog()
    parts = {k: [] for k in ("rec", "perc", "vsd", "adv", "d", "fake")}
    t0 = clock()
    for _ in range(steps):
        if deadline is not None and clock() >= deadline:
            log.stopped_by_time = True
            break
        hr, y = draw_batch(pool, batch, g)
        eps = torch.randn(hr.shape, generator=g, dtype=hr.dtype)
        x_hat = generate(gen, y, eps, cfg.start)
        loss = cfg.lam_rec * (x_hat - hr).pow(2).mean()
        parts["rec"].append(float(loss.detach()))
        if cfg.lam_perc > 0:
            perc = 1 - ms_ssim(x_hat.clamp(0, 1), hr, differentiable=True).mean()
            loss = loss + cfg.lam_perc * perc
            parts["perc"].append(float(perc.detach()))
        if use_vsd:
            tv = cfg.t_min + (cfg.t_max - cfg.t_min) * torch.rand(hr.shape[0], generator=g, dtype=hr.dtype)
            ev = torch.randn(hr.shape, generator=g, dtype=hr.dtype)
            lv = vsd_loss(x_hat, vsd_grad(x_hat, teacher, fake, y, tv, ev))
            loss = loss + cfg.lam_vsd * lv
            parts["vsd"].append(float(lv.detach()))
        if use_adv:
            # One D pass serves both players: the heads do not change between the generator's and the
            # discriminator's update, and the frozen backbone's features of the fake batch are the same
            # with or without the generator's graph, so D(aug(x_hat)) here equals the D step's
            # D(aug(sg(x_hat))) in value; the generator's loss only updates gen's parameters and the
            # hinge loss only D's heads (``backward(inputs=...)``). Real and fake share one call when
            # BatchNormLocal's groups of 8 cannot straddle the halves (nb a multiple of 8).
            nb = hr.shape[0] if cfg.disc_batch is None else min(cfg.disc_batch, hr.shape[0])
            fake_aug = diff_augment(x_hat[:nb].clamp(0, 1), g)
            real_aug = diff_augment(hr[:nb], g)
            if nb % 8 == 0:
                d_fake, d_real = disc(torch.cat([fake_aug, real_aug])).split(nb)
            else:
                d_fake, d_real = disc(fake_aug), disc(real_aug)
            la = hinge_g_loss(d_fake)
            loss = loss + cfg.lam_adv * la
            parts["adv"].append(float(la.detach()))
        opt_g.zero_grad(set_to_none=True)
        loss.backward(inputs=gen_params, retain_graph=use_adv)
        opt_g.step()
        if use_adv:
            opt_d.zero_grad(set_to_none=True)
            ld = hinge_d_loss(d_real, d_fake)
            ld.backward(inputs=d_params)
            opt_d.step()
            parts["d"].append(float(ld.detach()))
        if use_vsd:
            opt_f.zero_grad(set_to_none=True)
            lf = fake_score_loss(fake, x_hat, y, tv, torch.randn(hr.shape, generator=g, dtype=hr.dtype))
            lf.backward()
            opt_f.step()
            parts["fake"].append(float(lf.detach()))
        log.losses.append(float(loss.detach()))
        log.steps += 1
    log.seconds = clock() - t0
    gen.eval().requires_grad_(False)
    summary = {k: (sum(v[-50:]) / len(v[-50:]) if v else None) for k, v in parts.items()}
    return gen, log, summary
