"""Training (spec §6): (a) 1-step ELBO, (b) unrolled ELBO + fair CRPS from 2 prior trajectories,
per-entry means (KL sum divided by the same grid-entry count as the likelihood), AdamW, cosine decay,
grad-norm clip 1.0. The deterministic twin is trained with the same schedule on the weighted MSE
(NLL with the fixed per-channel sigma). Optional KL warm-up and free bits (ASSUMPTION)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from neurips26.harness.validation import check_scalar
from neurips26.njord.data import Dataset
from neurips26.njord.metrics import crps_fair
from neurips26.njord.models import DeterministicTwin, Njord, gaussian_nll


@dataclass(frozen=True)
class TrainConfig:
    steps_1: int = 150  # 1-step ELBO / MSE
    steps_2: int = 150  # unrolled + CRPS
    unroll: int = 2
    batch: int = 8
    lr: float = 1e-3
    lambda_kl: float = 1.0
    lambda_crps: float = 1.0
    kl_warmup: int = 0  # steps of linear KL warm-up (0 = off)
    free_bits: float = 0.0  # per top-level entry (0 = off)
    clip: float = 1.0


def windows(ds: Dataset, split: range, length: int) -> np.ndarray:
    """(traj, t) pairs whose window t-2 .. t+length-1 lies inside ``split``."""
    ts = [t for t in split if t - 2 >= split.start and t + length - 1 < split.stop]
    return np.array([(k, t) for k in range(ds.x.shape[0]) for t in ts], int)


def batch_tensors(ds: Dataset, idx: np.ndarray, length: int):
    k, t = idx[:, 0], idx[:, 1]
    x = ds.x
    xp2 = torch.from_numpy(x[k, t - 2])
    xp1 = torch.from_numpy(x[k, t - 1])
    tgt = torch.from_numpy(np.stack([x[k, t + i] for i in range(length)], 1))
    f = torch.from_numpy(np.stack([ds.forcing[t + i] for i in range(length)], 1))
    return xp2, xp1, f, tgt


def _loss_njord(model: Njord, xp2, xp1, f, tgt, cfg: TrainConfig, lam_kl: float, crps: bool):
    sigma = model.diff_std
    a, b = xp2, xp1
    loss, kls = 0.0, []
    ent = tgt.shape[2] * tgt.shape[3]
    for t in range(tgt.shape[1]):
        pred, kl = model.posterior_step(a, b, f[:, t], tgt[:, t])
        kl_e = kl.sum((1, 2)) if cfg.free_bits <= 0 else kl.clamp(min=cfg.free_bits).sum((1, 2))
        nll = gaussian_nll(tgt[:, t], pred, sigma).sum((1, 2))
        loss = loss + ((nll + lam_kl * kl_e) / ent).mean()
        kls.append(float(kl.detach().sum((1, 2)).mean() / ent))
        a, b = b, pred
    loss = loss / tgt.shape[1]
    if crps:
        ens = model.rollout(xp2, xp1, f, members=2)
        loss = loss + cfg.lambda_crps * crps_fair(ens, tgt).mean()
    return loss, float(np.mean(kls))


def _loss_twin(model: DeterministicTwin, xp2, xp1, f, tgt):
    pred = model.rollout(xp2, xp1, f, members=1)[0]
    return gaussian_nll(tgt, pred, model.diff_std).mean(), 0.0


def train(model, ds: Dataset, cfg: TrainConfig, seed: int = 0, log=None) -> dict:
    """Train ``model`` (Njord or DeterministicTwin) in place; returns the loss / KL history."""
    check_scalar(cfg.batch, "batch", int, min=1)
    check_scalar(cfg.unroll, "unroll", int, min=1)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    total = cfg.steps_1 + cfg.steps_2
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(total, 1))
    win = {1: windows(ds, ds.train, 1), cfg.unroll: windows(ds, ds.train, cfg.unroll)}
    hist = {"loss": [], "kl": []}
    model.train()
    for step in range(total):
        length = 1 if step < cfg.steps_1 else cfg.unroll
        idx = win[length][rng.integers(0, len(win[length]), cfg.batch)]
        xp2, xp1, f, tgt = batch_tensors(ds, idx, length)
        if isinstance(model, Njord):
            lam = cfg.lambda_kl * (min(1.0, (step + 1) / cfg.kl_warmup) if cfg.kl_warmup else 1.0)
            loss, kl = _loss_njord(model, xp2, xp1, f, tgt, cfg, lam, crps=step >= cfg.steps_1)
        else:
            loss, kl = _loss_twin(model, xp2, xp1, f, tgt)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        opt.step()
        sched.step()
        hist["loss"].append(float(loss.detach()))
        hist["kl"].append(kl)
    model.eval()
    return hist
