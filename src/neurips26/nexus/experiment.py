"""Reproduction of Nexus at laptop scale: same pretraining loss, closer per-source minima, better OOD.

Every method trains the same character-level HF Llama from the same initialisation on the same
stream of single-source micro-batches (drama / poetry / code / arithmetic, equal weights), K micro-
batches per outer step; only the optimizer differs. At the end (and every ``gs_every`` steps) each
model is measured on fixed held-out batches identical for every method: mixture and per-source val
loss, GS (M batches per source), closeness (F fine-tune steps per source), OOD loss (fortunes or
the folio spellings) and OOD arithmetic exact match ("a+b-c=" with 3 operands, 3 digits).

Verdicts compare Nexus with AdamW accumulation. With several seeds: the paired difference over
seeds, ``inconclusive`` within one seed standard deviation (k = sqrt(n) standard errors). With one
seed (quick): the paired difference over the measurement units (eval batches, prompts, source pairs),
``inconclusive`` within 2 standard errors.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import torch

from neurips26.harness import Claim
from neurips26.harness.paper import INCONCLUSIVE, SeedMetrics, judge, mean_se, seed_values
from neurips26.harness.run import RunContext
from neurips26.harness.validation import check_choice
from neurips26.nexus import data
from neurips26.nexus.measures import arithmetic_exact_match, batch_losses, closeness, gradient_similarity
from neurips26.nexus.methods import MIXED, build
from neurips26.nexus.schedule import SourceSampler

LOSS_TOL = 0.02       # "same pretraining loss": |mixture val loss difference| <= 0.02 nats/char
K_SINGLE = 2.0        # one seed: a difference inside 2 s.e. over eval units is inconclusive


@dataclass
class ModelConfig:
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    mlp: int = 256
    ctx: int = 64


@dataclass
class TrainConfig:
    steps: int = 150
    k: int = 4                 # micro-batches per outer step (= accumulation steps)
    micro_batch: int = 8
    lr: float = 3e-3           # AdamW, constant, torch-default betas / weight decay
    clip: float = 1.0
    ratio: float = 0.1         # Nexus r
    methods: tuple[str, ...] = ("adamw", "nexus")


@dataclass
class EvalConfig:
    gs_every: int = 50
    eval_every: int = 25       # mixture val and OOD loss along the run (the matched-loss comparison)
    gs_batches: int = 8        # M
    val_batches: int = 8       # per source
    ood_batches: int = 16
    arith_prompts: int = 200
    closeness_steps: int = 20  # F
    lr_ft: float = 1e-3
    sweep: tuple[float, ...] = ()   # r values for the Nexus sweep (full)


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    max_chars: int = 1_000_000  # per source
    tokenizer: str = "char"     # "char", or "bpe" (byte-level BPE of bpe_vocab tokens; losses in nats/char)
    bpe_vocab: int = 4096
    threads: int = 1            # torch threads; 1 on the shared 2-core box (2 spin-waits under load)
    seeds: tuple[int, ...] = (0,)


CONFIGS = {
    "smoke": Config(ModelConfig(16, 1, 2, 32, 16),
                    TrainConfig(steps=6, k=4, micro_batch=2, methods=("adamw", "nexus")),
                    EvalConfig(gs_every=3, eval_every=2, gs_batches=2, val_batches=2, ood_batches=2,
                               arith_prompts=12, closeness_steps=2), max_chars=20_000, threads=1),
    "quick": Config(),
    "full": Config(ModelConfig(256, 6, 8, 1024, 256), TrainConfig(steps=5000, k=8, micro_batch=16, lr=1e-3,
                   methods=("adamw", "nexus", "nexus_raw", "nexus_mixed", "muon", "nexus_muon", "fish",
                            "lookahead", "pcgrad", "gradvac")),
                   EvalConfig(gs_every=500, eval_every=250, gs_batches=8, val_batches=32, ood_batches=64,
                              arith_prompts=1000, closeness_steps=100, sweep=(0.02, 0.1, 0.5)),
                   max_chars=5_000_000, tokenizer="bpe", threads=8, seeds=(0, 1, 2)),
}
VOLATILE_METRICS = ("methods.*.seconds", "sweep.*.seconds")


# ----------------------------------------------------------------------------- run


def run(cfg: Config, ctx: RunContext) -> dict[str, Any]:
    torch.set_num_threads(cfg.threads)
    setup = _setup(cfg, ctx.seed)
    methods = {}
    for name in ctx.track(cfg.train.methods, desc="methods"):
        methods[name] = _train_and_measure(cfg, setup, name, cfg.train.ratio, ctx)
        ctx.log(f"nexus {name}: mix val {methods[name]['mix_val_loss']:.4f} GS {methods[name]['gs']:.3f} "
                f"({methods[name]['seconds']:.0f} s)")
    sweep = {}
    for r in cfg.eval.sweep:
        m = _train_and_measure(cfg, setup, "nexus", r, ctx, light=True)
        sweep[f"r={r:g}"] = {k: m[k] for k in ("mix_val_loss", "gs", "seconds")}
    out = {"data": setup["info"], "methods": {n: _scalars(m) for n, m in methods.items()}, "sweep": sweep,
           "compare": {n: compare_units(methods["adamw"], methods[n]) for n in methods if n != "adamw"}}
    _plots(ctx, methods, sweep)
    return out


def _setup(cfg: Config, seed: int) -> dict[str, Any]:
    texts, info = data.load_sources(cfg.max_chars, seed)
    check_choice(cfg.tokenizer, "tokenizer", ("char", "bpe"))
    vocab = data.CharVocab(list(texts.values())) if cfg.tokenizer == "char" else \
        data.BPEVocab(list(texts.values()), cfg.bpe_vocab)
    sources = data.make_sources(texts, vocab)
    which, ood = data.ood_text()
    info = dict(info, ood_text=which, vocab=len(vocab))
    ood_ids = vocab.encode(ood[: 200_000])
    ood_src = data.Source("ood", ood_ids, ood_ids)
    m, e = cfg.model, cfg.eval
    rng = np.random.default_rng([seed, 99])  # the fixed measurement batches: identical for every method
    b = cfg.train.micro_batch
    fixed = {
        "gs": {s.name: [s.batch(rng, b, m.ctx, "val") for _ in range(e.gs_batches)] for s in sources},
        "val": {s.name: [s.batch(rng, b, m.ctx, "val") for _ in range(e.val_batches)] for s in sources},
        "ft": {s.name: [s.batch(rng, b, m.ctx) for _ in range(e.closeness_steps)] for s in sources},
        "ood": [ood_src.batch(rng, b, m.ctx, "val") for _ in range(e.ood_batches)],
        "arith": data.ood_arithmetic(e.arith_prompts, seed),
    }
    return {"sources": sources, "vocab": vocab, "fixed": fixed, "info": info, "seed": seed}


def _train_and_measure(cfg: Config, setup: Mapping[str, Any], method: str, ratio: float, ctx: RunContext,
                       light: bool = False) -> dict[str, Any]:
    m, t, e, seed = cfg.model, cfg.train, cfg.eval, setup["seed"]
    torch.manual_seed(seed)
    model = data.tiny_llama(len(setup["vocab"]), m.hidden, m.layers, m.heads, m.mlp, m.ctx)
    opt = build(method, model, t.lr, ratio=ratio, clip=t.clip, seed=seed)
    sampler = SourceSampler(setup["sources"], k=t.k, micro_batch=t.micro_batch, ctx=m.ctx, seed=seed,
                            mixed=method in MIXED)
    loss_fn = lambda batch: data.lm_loss(model, batch)  # noqa: E731
    chars = setup["vocab"].token_chars
    eval_loss = lambda mod, batch: data.loss_per_char(mod, batch, chars)  # noqa: E731
    fixed = setup["fixed"]
    curve, cos, gs_steps, gs_curve, gs_pairs = [], [], [], [], []
    traj: dict[str, list] = {"step": [], "mix": [], "ood": []}
    t0 = time.perf_counter()
    for step in range(1, t.steps + 1):
        curve.append(opt.step(sampler.next_step(), loss_fn))
        cos.append(opt.last_stats.get("cos", math.nan))
        if not light and (step % e.gs_every == 0 or step == t.steps):
            g = gradient_similarity(model, eval_loss, fixed["gs"])
            gs_steps.append(step)
            gs_curve.append(g["gs"])
            gs_pairs.append(g["pairs"])
        if not light and (step % e.eval_every == 0 or step == t.steps):
            traj["step"].append(step)
            traj["mix"].append(float(np.mean([x for bs in fixed["val"].values()
                                              for x in batch_losses(model, eval_loss, bs)])))
            traj["ood"].append(float(np.mean(batch_losses(model, eval_loss, fixed["ood"]))))
    seconds = time.perf_counter() - t0
    val = {s: batch_losses(model, eval_loss, bs) for s, bs in fixed["val"].items()}
    mix_units = [x for s in sorted(val) for x in val[s]]
    out: dict[str, Any] = {"mix_val_loss": float(np.mean(mix_units)), "seconds": seconds, "curve": curve}
    if light:
        out["gs"] = gradient_similarity(model, eval_loss, fixed["gs"])["gs"]
        return out
    # GS of the run: the mean of the last two readings (one reading is noisy), per source pair
    last = gs_pairs[-2:]
    pair_units = {p: float(np.mean([r[p] for r in last])) for p in last[0]}
    clo = closeness(model, eval_loss, fixed["ft"], fixed["val"], lr_ft=e.lr_ft)
    ood = batch_losses(model, eval_loss, fixed["ood"])
    voc = setup["vocab"]
    arith = arithmetic_exact_match(model, voc.encode, voc.decode, fixed["arith"])
    finite_cos = [c for c in cos if math.isfinite(c)]
    out.update({
        "val": {s: float(np.mean(v)) for s, v in val.items()},
        "gs": float(np.mean(list(pair_units.values()))), "gs_steps": gs_steps, "gs_curve": gs_curve,
        "consecutive_cos": float(np.mean(finite_cos)) if finite_cos else math.nan,
        "c_dist": clo["c_dist"], "c_pair": clo["c_pair"], "dl": clo["dl"],
        "closeness": clo, "trajectory": traj, "ood_loss": float(np.mean(ood)),
        "ood_arith": float(np.mean(arith)),
        "units": {"mix": mix_units, "gs": pair_units, "c_pair": clo["pair"], "dl": clo["dl_s"], "ood": ood,
                  "arith": arith},
    })
    return out


def _scalars(m: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("mix_val_loss", "val", "gs", "gs_steps", "gs_curve", "consecutive_cos", "c_dist", "c_pair", "dl",
            "ood_loss", "ood_arith", "trajectory", "seconds")
    out = {k: m[k] for k in keep}
    out["final_train_loss"] = float(np.mean(m["curve"][-10:]))
    return out


def compare_units(base: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Paired differences ``other - base`` over each metric's measurement units: mean, se, n."""
    out = {}
    for key, ub in base["units"].items():
        uo = other["units"][key]
        diffs = [uo[k] - ub[k] for k in ub] if isinstance(ub, dict) else [a - b for a, b in zip(uo, ub)]
        mean, se, n = mean_se([float(d) for d in diffs])
        out[key] = {"mean": mean, "se": se, "n": n}
    out["ood_matched"] = matched_ood(base, other, out["ood"]["se"], out["ood"]["n"])
    return out


def matched_ood(base: Mapping[str, Any], other: Mapping[str, Any], se: float, n: int) -> dict[str, Any]:
    """OOD loss of ``other`` where its mixture val loss equals ``base``'s final one, minus ``base``'s final.

    Read off ``other``'s trajectory by linear interpolation between the two readings around the
    crossing (the spec's "compare at the step where the curves cross"); NaN when the curve never
    reaches that loss. ``se``/``n`` are those of the final per-batch OOD difference (the noise scale).
    """
    target = base["mix_val_loss"]
    tr = other["trajectory"]
    for i in range(1, len(tr["mix"])):
        a, b = tr["mix"][i - 1], tr["mix"][i]
        if (a - target) * (b - target) <= 0 and a != b:
            f = (a - target) / (a - b)
            step = tr["step"][i - 1] + f * (tr["step"][i] - tr["step"][i - 1])
            ood = tr["ood"][i - 1] + f * (tr["ood"][i] - tr["ood"][i - 1])
            return {"mean": ood - base["ood_loss"], "se": se, "n": n, "step": step}
    return {"mean": math.nan, "se": se, "n": n, "step": math.nan}


# ----------------------------------------------------------------------------- claim analysis

def seed_path(metrics: Mapping[str, Any], path: str) -> list[float]:
    return seed_values(metrics, path)


def difference(metrics: Mapping[str, Any], unit: str,
               method: str = "nexus") -> tuple[float, float, int, float, str]:
    """(mean, se, n, k, over) of ``method - adamw`` for ``unit``: over seeds when there are >= 2, else
    over the run's measurement units. ``k`` is the noise band in s.e.: one seed std over seeds, 2 s.e.
    over units."""
    per_seed = getattr(metrics, "per_seed", None)
    if isinstance(metrics, SeedMetrics) and per_seed and len(per_seed) >= 2:
        # the per-seed paired difference (mean over units of method - adamw), then over seeds
        mean, se, n = mean_se(seed_values(metrics, f"compare.{method}.{unit}.mean"))
        return mean, se, n, math.sqrt(n), "seeds"
    c = metrics["compare"][method][unit]
    return float(c["mean"]), float(c["se"]), int(c["n"]), K_SINGLE, "units"


def _fmt(mean: float, se: float, n: int, over: str, fmt: str) -> str:
    se_text = fmt.format(se).lstrip("+") if math.isfinite(se) else "n/a"
    return f"{fmt.format(mean)} ± {se_text} (n={n} {'seeds' if over == 'seeds' else 'eval units'})"


def _better(metrics: Mapping[str, Any], unit: str, better: str, fmt: str = "{:+.4f}") -> tuple[str, str]:
    mean, se, n, k, over = difference(metrics, unit)
    v = judge(mean, se, n, 0.0, k=k, better=better)
    return v, f"nexus - adamw = {_fmt(mean, se, n, over, fmt)}, band {k:.2g} s.e."


def check_same_loss(metrics: Mapping[str, Any]) -> tuple[str, str]:
    """holds: |difference| <= LOSS_TOL; fails: beyond LOSS_TOL by more than the noise band."""
    mean, se, n, k, over = difference(metrics, "mix")
    text = f"mix val loss nexus - adamw = {_fmt(mean, se, n, over, '{:+.4f}')} (tol {LOSS_TOL} nats/char)"
    if not math.isfinite(mean):
        return INCONCLUSIVE, text
    if abs(mean) > LOSS_TOL:
        text += "; Nexus lower (not matched)" if mean < 0 else "; Nexus higher (worse)"
    if abs(mean) <= LOSS_TOL:
        return "holds", text
    if math.isfinite(se) and abs(mean) - k * se > LOSS_TOL:
        return "fails", text
    return INCONCLUSIVE, text


def check_gs(metrics: Mapping[str, Any]) -> tuple[str, str]:
    return _better(metrics, "gs", "higher", "{:+.3f}")


def check_closeness(metrics: Mapping[str, Any]) -> tuple[str, str]:
    """holds when both C_pair and Delta L_s are smaller beyond the noise; fails when either is larger."""
    vp, tp = _better(metrics, "c_pair", "lower", "{:+.4f}")
    vd, td = _better(metrics, "dl", "lower", "{:+.4f}")
    v = "holds" if vp == vd == "holds" else "fails" if "fails" in (vp, vd) else INCONCLUSIVE
    return v, f"C_pair: {tp}; Delta L_s: {td}"


def check_ood_loss(metrics: Mapping[str, Any]) -> tuple[str, str]:
    """At matched loss: the final OOD losses when the mixture losses match (|diff| <= LOSS_TOL), else
    Nexus's OOD loss at the point of its run where its mixture loss equals AdamW's final one."""
    mix = difference(metrics, "mix")[0]
    if math.isfinite(mix) and abs(mix) <= LOSS_TOL:
        v, text = _better(metrics, "ood", "lower")
        return v, f"final, losses matched: {text}"
    mean, se, n, k, over = difference(metrics, "ood_matched")
    if not math.isfinite(mean):
        return INCONCLUSIVE, (f"mixture losses differ by {mix:+.3f} and Nexus's curve never crosses "
                              f"AdamW's final loss: no matched-loss comparison")
    v = judge(mean, se, n, 0.0, k=k, better="lower")
    step = np.mean(seed_path(metrics, "compare.nexus.ood_matched.step"))
    return v, (f"at matched mixture loss (Nexus step ~{step:.0f}, final losses differ by {mix:+.3f}): "
               f"nexus - adamw = {_fmt(mean, se, n, over, '{:+.4f}')}, band {k:.2g} s.e.")


def check_ood_arith(metrics: Mapping[str, Any]) -> tuple[str, str]:
    mean, se, n, k, over = difference(metrics, "arith")
    base = metrics["methods"]["adamw"]["ood_arith"]
    v = judge(mean, se, n, 0.0, k=k, better="higher")
    return v, f"exact match nexus - adamw = {_fmt(mean, se, n, over, '{:+.3f}')} (adamw {base:.3f})"


CLAIMS = [
    Claim("same_loss", f"Nexus reaches the same mixture val loss as AdamW (|diff| <= {LOSS_TOL} nats/char)",
          "same pretraining loss (130M-3B)", check_same_loss),
    Claim("higher_gs", "Nexus raises the gradient similarity GS between sources over AdamW",
          "maximizes gradient similarity", check_gs),
    Claim("closer_minima", "per-source minima are closer under Nexus: smaller C_pair and Delta L_s",
          "per-source minima close (closeness is second order)", check_closeness),
    Claim("ood_loss", "Nexus has lower out-of-distribution loss at matched pretraining loss",
          "3B: OOD loss -0.012", check_ood_loss),
    Claim("ood_reasoning", "Nexus has higher OOD arithmetic exact match (GSM8k stand-in)",
          "3B: GSM8k up to +15.0%", check_ood_arith),
]


# ----------------------------------------------------------------------------- plots


def _plots(ctx: RunContext, methods: Mapping[str, Any], sweep: Mapping[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(14, 3.5))
    for name, m in methods.items():
        c = np.asarray(m["curve"])
        w = max(1, len(c) // 20)
        ax[0].plot(np.convolve(c, np.ones(w) / w, mode="valid"), label=name)
        ax[1].plot(m["trajectory"]["step"], m["trajectory"]["mix"], marker=".", label=f"{name} mixture val")
        ax[1].plot(m["trajectory"]["step"], m["trajectory"]["ood"], ls="--", label=f"{name} OOD")
        ax[2].plot(m["gs_steps"], m["gs_curve"], marker="o", label=name)
    ax[0].set(xlabel="outer step", ylabel="nats/char", title="train loss (Nexus: mean inner loss at phi)")
    ax[1].set(xlabel="outer step", ylabel="nats/char", title="held-out losses")
    ax[2].set(xlabel="outer step", ylabel="GS", title="gradient similarity")
    ax[1].legend(fontsize=7)
    ax[0].legend()
    ctx.save_plot(fig, "loss_and_gs")
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
    names = list(methods)
    ax[0].bar(names, [methods[n]["c_pair"] for n in names])
    ax[0].set(title="C_pair (lower = closer minima)")
    ax[1].bar(names, [methods[n]["dl"] for n in names])
    ax[1].set(title="mean Delta L_s after F fine-tune steps")
    ctx.save_plot(fig, "closeness")
    if sweep:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        rs = list(sweep)
        ax.plot([sweep[r]["mix_val_loss"] for r in rs], [sweep[r]["gs"] for r in rs], "o-")
        for r in rs:
            ax.annotate(r, (sweep[r]["mix_val_loss"], sweep[r]["gs"]))
        ax.set(xlabel="mixture val loss", ylabel="GS", title="Nexus r sweep")
        ctx.save_plot(fig, "r_sweep")
