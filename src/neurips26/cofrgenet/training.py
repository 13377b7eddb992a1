"""The training loop shared by every variant (spec M6): AdamW (0.9, 0.95), weight decay 0.1 on 2-D
projection weights only (never on ladder parameters), linear warmup then cosine to 10% of the peak,
gradient clipping, per-step logging (loss, grad norm, max |FFN output|, pole hits, NaN/Inf flag,
tokens/s), fixed val windows, checkpoint + resume, optional dyadic schedule and a wall-time guard.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from neurips26.cofrgenet.data import Corpus
from neurips26.cofrgenet.layers import Cffn, DyadicSchedule, GatedCF, GatedCFExperts
from neurips26.harness.validation import check_scalar


@dataclass
class TrainConfig:
    steps: int = 150
    batch_size: int = 16
    ctx: int = 64
    lr: float = 3e-3
    warmup_frac: float = 0.05
    min_lr_frac: float = 0.1
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    dyadic: bool = False            # prior work's incremental schedule on Cffn W columns
    eval_every: int = 50
    n_val_windows: int = 64
    log_every: int = 1
    time_limit_s: float | None = None   # stop early (flagged) past this wall time
    checkpoint_path: str | None = None
    checkpoint_every: int = 0       # 0: only at the end (when checkpoint_path is set)
    autocast_bf16: bool = False     # bf16 autocast (GPU); ladders stay fp32 inside

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "ctx", "eval_every", "n_val_windows", "log_every"):
            check_scalar(getattr(self, name), name, int, min=1)
        for name in ("lr", "grad_clip"):
            check_scalar(getattr(self, name), name, float, min=0, inclusive="neither")
        check_scalar(self.warmup_frac, "warmup_frac", float, min=0, max=1, inclusive="left")
        check_scalar(self.min_lr_frac, "min_lr_frac", float, min=0, max=1)
        check_scalar(self.weight_decay, "weight_decay", float, min=0)
        if self.time_limit_s is not None:
            check_scalar(self.time_limit_s, "time_limit_s", float, min=0)
        check_scalar(self.checkpoint_every, "checkpoint_every", int, min=0)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup over warmup_frac*T steps, then cosine from lr to min_lr_frac*lr at step T."""
    warm = int(cfg.warmup_frac * cfg.steps)
    if warm > 0 and step < warm:
        return cfg.lr * (step + 1) / warm
    prog = min(1.0, (step - warm) / max(1, cfg.steps - warm))
    return cfg.lr * (cfg.min_lr_frac + (1 - cfg.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * prog)))


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Decay only 2-D projection weights (Linear / HF Conv1D / fused MoE expert weights), selected by
    module type, never by ndim: ladder parameters (Cffn W, V; GatedCF alpha, beta, gamma) are 2-D/3-D
    too and must not decay (decay pulls beta toward the poles of signed ladders)."""
    ladder = {id(t) for m in model.modules() if isinstance(m, (Cffn, GatedCF, GatedCFExperts))
              for t in m.ladder_parameters()}
    decay_ids: set[int] = set()
    for m in model.modules():
        cls = type(m).__name__
        if isinstance(m, nn.Linear) or cls == "Conv1D":
            decay_ids.add(id(m.weight))
        elif cls.endswith("Experts") and cls != "CFExperts":
            decay_ids.update(id(t) for t in m.parameters(recurse=False) if t.dim() >= 2)
    decay, no_decay = [], []
    for t in model.parameters():
        if not t.requires_grad:
            continue
        (decay if id(t) in decay_ids and id(t) not in ladder else no_decay).append(t)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def cf_modules(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(m, (Cffn, GatedCF, GatedCFExperts))]


def _logits(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = model(input_ids=x)
    return out.logits if hasattr(out, "logits") else out[0]


@torch.no_grad()
def evaluate(model: nn.Module, windows: np.ndarray, batch_size: int = 32) -> float:
    """Mean next-token cross-entropy (nats/token) over the fixed val windows."""
    was = model.training
    model.eval()
    tot, n = 0.0, 0
    for i in range(0, len(windows), batch_size):
        w = torch.from_numpy(windows[i:i + batch_size])
        logits = _logits(model, w[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1),
                               reduction="sum")
        tot += float(loss)
        n += w[:, 1:].numel()
    model.train(was)
    return tot / n


@dataclass
class TrainLog:
    step: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    max_abs_ffn: list[float] = field(default_factory=list)
    pole_hits: list[int] = field(default_factory=list)
    pole_frac: list[float] = field(default_factory=list)
    nonfinite: list[bool] = field(default_factory=list)
    val_step: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)


def train(model: nn.Module, corpus: Corpus, cfg: TrainConfig, seed: int = 0,
          on_step: Callable[[int, dict[str, float]], None] | None = None, resume: bool = True) -> dict[str, Any]:
    """Train ``model`` (a causal LM taking ``input_ids``) on ``corpus`` with the M6 recipe.

    Returns JSON-serialisable metrics: final val loss, history, tokens/s (training steps only), pole
    hits, NaN/Inf count, divergence flag (loss > 2x initial or non-finite), steps done. With
    ``cfg.checkpoint_path`` set, state is saved there and a later call resumes from it.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(corpus, Corpus):
        raise TypeError(f"corpus must be a neurips26.cofrgenet.data.Corpus, got {type(corpus).__name__}")
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"cfg must be a TrainConfig, got {type(cfg).__name__}")
    if len(corpus.train) <= cfg.ctx + 1:
        raise ValueError(f"corpus train split ({len(corpus.train)} tokens) shorter than ctx+1={cfg.ctx + 1}")
    opt = torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas)
    cfm = cf_modules(model)
    depths = [m.depth for m in cfm if isinstance(m, Cffn)]
    schedule = DyadicSchedule(cfg.steps, max(depths)) if cfg.dyadic and depths else None
    rng = np.random.default_rng(seed)
    windows = corpus.val_windows(cfg.n_val_windows, cfg.ctx)
    log = TrainLog()
    start, train_time, n_tokens, first_loss = 0, 0.0, 0, None
    ckpt = Path(cfg.checkpoint_path) if cfg.checkpoint_path else None
    if ckpt is not None and resume and ckpt.is_file():
        state = torch.load(ckpt, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        log = TrainLog(**state["log"])
        start, train_time, n_tokens, first_loss = state["step"], state["train_time"], state["n_tokens"], \
            state["first_loss"]
    model.train()
    t_begin = time.perf_counter()
    stopped_early = False
    step = start
    for step in range(start, cfg.steps):
        if cfg.time_limit_s is not None and time.perf_counter() - t_begin > cfg.time_limit_s:
            stopped_early = True
            break
        t0 = time.perf_counter()
        lr = lr_at(step, cfg)
        for g in opt.param_groups:
            g["lr"] = lr
        batch = torch.from_numpy(corpus.batch(rng, cfg.batch_size, cfg.ctx))
        x, y = batch[:, :-1], batch[:, 1:]
        dev = "cuda" if any(p.is_cuda for p in model.parameters()) else "cpu"
        with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=cfg.autocast_bf16):
            logits = _logits(model, x.to(dev))
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.to(dev).reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if schedule is not None:
            schedule.apply(model, step)               # frozen CF depth levels get exactly zero grad
        gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip))
        lval = float(loss.detach())
        bad = not (math.isfinite(lval) and math.isfinite(gnorm))
        if not bad:
            opt.step()                                # a non-finite step is flagged and skipped
        train_time += time.perf_counter() - t0
        n_tokens += x.numel()
        if first_loss is None:
            first_loss = lval
        hits = sum(int(m.stats["pole_hits"]) for m in cfm if m.stats)
        elems = sum(float(m.stats["n_elements"]) for m in cfm if m.stats) or 1.0
        max_ffn = max((float(m.stats["max_abs_out"]) for m in cfm if m.stats), default=float("nan"))
        if step % cfg.log_every == 0 or step == cfg.steps - 1:
            log.step.append(step)
            log.loss.append(lval)
            log.lr.append(lr)
            log.grad_norm.append(gnorm)
            log.max_abs_ffn.append(max_ffn)
            log.pole_hits.append(hits)
            log.pole_frac.append(hits / elems)
            log.nonfinite.append(bad)
        if (step + 1) % cfg.eval_every == 0 or step == cfg.steps - 1:
            log.val_step.append(step + 1)
            log.val_loss.append(evaluate(model, windows))
        if ckpt is not None and cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0:
            _save(ckpt, model, opt, rng, log, step + 1, train_time, n_tokens, first_loss)
        if on_step is not None:
            on_step(step, {"loss": lval, "grad_norm": gnorm, "lr": lr})
    else:
        step = cfg.steps
    if ckpt is not None:
        _save(ckpt, model, opt, rng, log, step, train_time, n_tokens, first_loss)
    done = step if stopped_early else cfg.steps
    if not log.val_step or log.val_step[-1] != done:
        log.val_step.append(done)
        log.val_loss.append(evaluate(model, windows))
    n_bad = int(sum(log.nonfinite))
    losses = np.asarray(log.loss, dtype=float)
    # divergence (spec): any train loss > 2x the initial loss, any non-finite step, or a non-finite /
    # > 2x-initial final val loss
    thresh = 2 * first_loss if first_loss is not None and math.isfinite(first_loss) else math.inf
    diverged = bool(n_bad > 0 or not math.isfinite(log.val_loss[-1]) or log.val_loss[-1] > thresh or
                    (len(losses) > 0 and float(np.nanmax(losses)) > thresh))
    return {
        "val_loss": log.val_loss[-1],
        "final_train_loss": float(np.mean(losses[-10:])) if len(losses) else float("nan"),
        "first_loss": first_loss,
        "steps_done": int(done),
        "stopped_early": stopped_early,
        "tokens_per_s": n_tokens / train_time if train_time > 0 else float("nan"),
        "train_seconds": train_time,
        "nonfinite_steps": n_bad,
        "diverged": diverged,
        "pole_hits_total": int(sum(log.pole_hits)),
        "pole_frac_mean": float(np.mean(log.pole_frac)) if log.pole_frac else 0.0,
        "max_abs_ffn": float(np.nanmax(log.max_abs_ffn)) if cfm and log.max_abs_ffn else None,
        "history": asdict(log),
    }


def _save(path: Path, model: nn.Module, opt: torch.optim.Optimizer, rng: np.random.Generator, log: TrainLog,
          step: int, train_time: float, n_tokens: int, first_loss: float | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "rng": rng.bit_generator.state,
                "torch_rng": torch.get_rng_state(), "log": asdict(log), "step": step,
                "train_time": train_time, "n_tokens": n_tokens, "first_loss": first_loss}, tmp)
    tmp.replace(path)
