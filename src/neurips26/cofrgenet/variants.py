"""The compared variants: one config, how each variant's FFN is built, trained and timed.

Every variant trains the same HF model, on the same data, steps and seeds; only the feed-forward layer
differs (spec "Baselines"):

  B1   native FFN of the family (GPT-2 GELU-MLP 4x; Llama SwiGLU 8/3x; Mixtral SwiGLU experts; Mamba-2+SwiGLU)
  B1m  native FFN shrunk to GatedCF's parameter count (nearest width)
  B2   prior Cffn + clamp + Prop-1 custom gradient + dyadic schedule (faithful prior work; L=3, d=5, eps=0.01)
  B3   prior Cffn without the dyadic schedule
  P1   GatedCF, positive denominators, log-space ladder (proposed; L=2, d=4)
  P1s  GatedCF signed + logexp;  P2  GatedCF signed + clamp;  P3  prior Cffn + logexp, no schedule
  A1   GatedCF form='gated_input' (the spec's alternative reading; ablation, not in the default configs)

``experiment.py`` (the reproduction) and ``bench.py`` (the timings) both build on this module.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from neurips26.cofrgenet.data import Corpus
from neurips26.cofrgenet.hf import Mamba2WithFFN, build_model, ffn_factory, mamba2_ffn_width, swap_ffn, tiny_config
from neurips26.cofrgenet.layers import GatedCF, count_params, matched_width
from neurips26.cofrgenet.training import TrainConfig, lr_at, param_groups, train
from neurips26.harness.bench import Timing, time_interleaved
from neurips26.harness.validation import check_choice, check_scalar

VARIANTS = ("B1", "B1m", "B2", "B3", "P1", "P1s", "P2", "P3", "A1")
VARIANT_LABELS = {
    "B1": "native FFN", "B1m": "native FFN, param-matched", "B2": "prior Cffn + dyadic",
    "B3": "prior Cffn, no schedule", "P1": "GatedCF positive (log space)", "P1s": "GatedCF signed + logexp",
    "P2": "GatedCF signed + clamp", "P3": "prior Cffn + logexp", "A1": "GatedCF gated_input (ablation)",
}

# the model and corpus sizes of the seconds-long smoke scale (run and bench alike)
SMOKE_SIZES = dict(hidden=16, layers=1, heads=2, ctx=16, batch_size=4, max_chars=20_000)


@dataclass
class Config:
    """One reproduction's settings (defaults: the quick scale)."""

    families: tuple[str, ...] = ("llama",)
    variants: tuple[str, ...] = ("B1", "B1m", "B2", "B3", "P1")
    seed_offsets: tuple[int, ...] = (0,)      # training seeds of one run: the run's seed + each offset
    hidden: int = 96
    layers: int = 2
    heads: int = 4
    ctx: int = 64
    batch_size: int = 16
    steps: int = 150
    lr: float = 3e-3
    eval_every: int = 50
    n_val_windows: int = 256
    prior_ladders: int = 3
    prior_depth: int = 5
    prior_eps: float = 0.01
    gated_ladders: int = 2
    gated_depth: int = 4
    n_experts: int = 4
    top_k: int = 2
    probe_family: str = "llama"
    probe_layers: tuple[int, ...] = (6,)
    probe_depths: tuple[int, ...] = (8, 9)     # spec: d=8; odd d=9 starts the prior Cffn at its poles
    probe_steps: int = 100
    probe_variants: tuple[str, ...] = ("B3", "P1")     # full adds B2 (with schedule) and P3 (prior+logexp)
    # prior_needs_schedule is judged at the deep probe point (6 layers, odd CF depth 9: the prior Cffn
    # starts at its pole cap) with B2 (dyadic) vs B3 (none) over these seeds (issue 29, item 7)
    schedule_layers: int = 6
    schedule_depth: int = 9
    schedule_seed_offsets: tuple[int, ...] = (0, 1, 2)
    sources: tuple[str, ...] = ("shakespeare",)
    tokenizer: str = "char"
    bpe_vocab: int = 4096
    max_chars: int | None = None              # train on the first max_chars characters only (smoke)
    allow_synthetic: bool = False             # True: fall back to the synthetic corpus if the cache is missing
    threads: int | None = None                # None: the free cores (cpu count - 1-min load), 1..2
    time_limit_per_run_s: float = 150.0       # guard: a run past this stops early and is flagged
    time_budget_s: float | None = 900.0       # whole-run deadline for training: later runs are skipped and
                                              # a run still going at the deadline stops early (flagged)
    checkpoint_every: int = 0                 # >0: checkpoint each run into the output folder (resumable)
    autocast_bf16: bool = False
    throughput_steps: int = 3                 # train steps per interleaved throughput round
    throughput_rounds: int = 7                # paired rounds of the throughput claim (P1 vs B2)
    extra: dict[str, Any] = field(default_factory=dict)


def check_variants(variants: tuple[str, ...], name: str = "variants") -> tuple[str, ...]:
    for v in variants:
        check_choice(v, name, VARIANTS)
    return tuple(variants)


# ----------------------------------------------------------------------------- building a variant

def variant_spec(name: str, cfg: Config, family: str, p: int, n_layers: int,
                 depth: int | None = None) -> tuple[Any, bool]:
    """(FFN factory or None for native, dyadic schedule on?) of variant ``name``."""
    check_choice(name, "variant", VARIANTS)
    prior = dict(ladders=cfg.prior_ladders, depth=depth or cfg.prior_depth, eps=cfg.prior_eps)
    gated = dict(ladders=cfg.gated_ladders, depth=depth or cfg.gated_depth)
    if name == "B1":
        if family == "mamba2":
            return ffn_factory("swiglu", m=mamba2_ffn_width(p)), False
        return None, False
    if name == "B1m":
        target = count_params(GatedCF(p, **gated))
        if family == "gpt2":
            return ffn_factory("gelu", m=matched_width(target, p, "gelu")), False
        return ffn_factory("swiglu", m=matched_width(target, p, "swiglu")), False
    if name == "B2":
        return ffn_factory("cffn", division="clamp", **prior), True
    if name == "B3":
        return ffn_factory("cffn", division="clamp", **prior), False
    if name == "P3":
        return ffn_factory("cffn", division="logexp", **prior), False
    if name == "P1":
        return ffn_factory("gatedcf", n_layers=n_layers, denominators="positive", **gated), False
    if name == "P1s":
        return ffn_factory("gatedcf", n_layers=n_layers, denominators="signed", division="logexp",
                           eps=cfg.prior_eps, **gated), False
    if name == "A1":
        return ffn_factory("gatedcf", n_layers=n_layers, form="gated_input", **gated), False
    return ffn_factory("gatedcf", n_layers=n_layers, denominators="signed", division="clamp",   # P2
                       eps=cfg.prior_eps, **gated), False


def build_variant(name: str, family: str, cfg: Config, vocab_size: int, n_layers: int, seed: int,
                  depth: int | None = None) -> tuple[torch.nn.Module, bool]:
    """The HF model of ``family`` (seeded init) with variant ``name``'s FFN; (model, dyadic schedule on?)."""
    torch.manual_seed(seed)
    model = build_model(family, tiny_config(family, vocab_size, cfg.hidden, n_layers, cfg.heads, cfg.ctx,
                                            cfg.n_experts, cfg.top_k))
    factory, dyadic = variant_spec(name, cfg, family, cfg.hidden, n_layers, depth)
    if factory is not None:
        swap_ffn(model, factory, family)
    return model, dyadic


def ffn_params(model: torch.nn.Module) -> int:
    """Parameters of the feed-forward layers (every expert of an MoE; the Mamba-2 FFN wrapper's FFN)."""
    total = 0
    for mod in model.modules():
        if isinstance(mod, Mamba2WithFFN):
            total += sum(t.numel() for t in mod.ffn.parameters())
        elif type(mod).__name__ in ("GPT2Block", "LlamaDecoderLayer", "MixtralDecoderLayer"):
            mlp = mod.mlp
            experts = getattr(mlp, "experts", None)
            total += sum(t.numel() for t in (experts if experts is not None else mlp).parameters())
    return total


def train_variant(name: str, family: str, cfg: Config, corpus: Corpus, seed: int, n_layers: int,
                  steps: int, depth: int | None = None, ckpt: str | None = None) -> dict[str, Any]:
    """Build the HF model of ``family``, swap in variant ``name``'s FFN, train it; returns its metrics."""
    model, dyadic = build_variant(name, family, cfg, corpus.vocab_size, n_layers, seed, depth)
    tcfg = TrainConfig(steps=steps, batch_size=cfg.batch_size, ctx=cfg.ctx, lr=cfg.lr, dyadic=dyadic,
                       eval_every=min(cfg.eval_every, steps), n_val_windows=cfg.n_val_windows,
                       time_limit_s=cfg.time_limit_per_run_s, checkpoint_path=ckpt,
                       checkpoint_every=cfg.checkpoint_every, autocast_bf16=cfg.autocast_bf16)
    res = train(model, corpus, tcfg, seed=seed)
    res["params_total"] = count_params(model)
    res["ffn_params"] = ffn_params(model)
    res["dyadic"] = dyadic
    return res


# ----------------------------------------------------------------------------- throughput

def _train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    logits = model(input_ids=x).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def throughput_timings(family: str, variants: tuple[str, ...], cfg: Config, corpus: Corpus, seed: int,
                       steps_per_round: int | None = None,
                       rounds: int | None = None) -> tuple[dict[str, Timing], int]:
    """Seconds per train step of each variant, timed by ``harness.bench.time_interleaved``: the same batch,
    the same process, the variants interleaved round by round (order alternating) after one warm-up
    round, so load drift on a shared box hits every variant alike. Returns ({variant: Timing}, tokens
    per step)."""
    k = check_scalar(steps_per_round or cfg.throughput_steps, "steps_per_round", int, min=1)
    r = check_scalar(rounds or cfg.throughput_rounds, "rounds", int, min=1)
    rng = np.random.default_rng(seed)
    batch = torch.from_numpy(corpus.batch(rng, cfg.batch_size, cfg.ctx))
    x, y = batch[:, :-1], batch[:, 1:]
    fns = []
    for v in check_variants(variants):
        model, _ = build_variant(v, family, cfg, corpus.vocab_size, cfg.layers, seed)
        opt = torch.optim.AdamW(param_groups(model, 0.1), lr=lr_at(0, TrainConfig(lr=cfg.lr)))
        fns.append(functools.partial(_train_step, model, opt, x, y))
    timings = time_interleaved(*fns, rounds=r, warmup=1, number=k)
    return dict(zip(variants, timings)), int(x.numel())  # type: ignore[arg-type]


def interleaved_throughput(family: str, variants: tuple[str, ...], cfg: Config, corpus: Corpus, seed: int,
                           steps_per_round: int | None = None,
                           rounds: int | None = None) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Train tokens/s of each variant from ``throughput_timings``: (at the median round, in every round)."""
    timings, tokens = throughput_timings(family, variants, cfg, corpus, seed, steps_per_round, rounds)
    med = {v: tokens / t.median for v, t in timings.items()}
    per_round = {v: [tokens / s for s in t.samples] for v, t in timings.items()}
    return med, per_round


def free_cores(cap: int = 2) -> int:
    """Cores not busy right now (cpu count minus the 1-minute load), between 1 and ``cap``: on a shared
    box, more torch threads than free cores makes OpenMP spin and tiny models run ~100x slower."""
    cap = check_scalar(cap, "cap", int, min=1)
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        load = 0.0
    return int(max(1, min(cap, (os.cpu_count() or 1) - round(load))))
