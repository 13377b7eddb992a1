"""Reproduction of Gated CoFrGeNet at laptop scale: every variant trains the same HF model, on the same
data, steps and seeds; only the feed-forward layer differs.

Variants (spec "Baselines"):
  B1   native FFN of the family (GPT-2 GELU-MLP 4x; Llama SwiGLU 8/3x; Mixtral SwiGLU experts; Mamba-2+SwiGLU)
  B1m  native FFN shrunk to GatedCF's parameter count (nearest width)
  B2   prior Cffn + clamp + Prop-1 custom gradient + dyadic schedule (faithful prior work; L=3, d=5, eps=0.01)
  B3   prior Cffn without the dyadic schedule
  P1   GatedCF, positive denominators, log-space ladder (proposed; L=2, d=4)
  P1s  GatedCF signed + logexp;  P2  GatedCF signed + clamp;  P3  prior Cffn + logexp, no schedule
  A1   GatedCF form='gated_input' (the spec's alternative reading; ablation, not in the default configs)
Depth-stability probe: B3 (and B2 in `full`) vs P1 at more layers and deeper CF ladders.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neurips26.harness import FAILS, HOLDS, INCONCLUSIVE, Claim, RunContext

VARIANTS = ("B1", "B1m", "B2", "B3", "P1", "P1s", "P2", "P3", "A1")
VARIANT_LABELS = {
    "B1": "native FFN", "B1m": "native FFN, param-matched", "B2": "prior Cffn + dyadic",
    "B3": "prior Cffn, no schedule", "P1": "GatedCF positive (log space)", "P1s": "GatedCF signed + logexp",
    "P2": "GatedCF signed + clamp", "P3": "prior Cffn + logexp", "A1": "GatedCF gated_input (ablation)",
}


@dataclass
class Config:
    families: tuple[str, ...] = ("llama",)
    variants: tuple[str, ...] = ("B1", "B1m", "B2", "B3", "P1")
    seeds: tuple[int, ...] = (0,)             # offsets added to the run's --seed
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
    sources: tuple[str, ...] = ("shakespeare",)
    tokenizer: str = "char"
    bpe_vocab: int = 4096
    allow_synthetic: bool = False             # True: fall back to the synthetic corpus if the cache is missing
    threads: int | None = None                # None: the free cores (cpu count - 1-min load), 1..2
    time_limit_per_run_s: float = 150.0       # guard: a run past this stops early and is flagged
    time_budget_s: float | None = 500.0       # whole-run deadline for training: later runs are skipped and
                                              # a run still going at the deadline stops early (flagged)
    checkpoint_every: int = 0                 # >0: checkpoint each run into the output folder (resumable)
    autocast_bf16: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


CONFIGS = {
    "quick": Config(),
    "full": Config(families=("gpt2", "llama", "mixtral", "mamba2"), variants=VARIANTS[:-1], seeds=(0, 1, 2),
                   hidden=384, layers=8, heads=6, ctx=256, batch_size=32, steps=5000, lr=1e-3, eval_every=250,
                   n_val_windows=256, probe_layers=(4, 8, 16), probe_depths=(4, 8, 16), probe_steps=2000,
                   probe_variants=("B2", "B3", "P1", "P3"), sources=("shakespeare", "milton", "python_stdlib"),
                   tokenizer="bpe", time_limit_per_run_s=6 * 3600.0, time_budget_s=None, checkpoint_every=500),
}


# ----------------------------------------------------------------------------- building a variant

def variant_spec(name: str, cfg: Config, family: str, p: int, n_layers: int,
                 depth: int | None = None) -> tuple[Any, bool]:
    """(FFN factory or None for native, dyadic schedule on?) of variant ``name``."""
    from neurips26.cofrgenet.hf import ffn_factory, mamba2_ffn_width
    from neurips26.cofrgenet.layers import GatedCF, count_params, matched_width

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
    if name == "P2":
        return ffn_factory("gatedcf", n_layers=n_layers, denominators="signed", division="clamp",
                           eps=cfg.prior_eps, **gated), False
    raise ValueError(f"variant must be one of {VARIANTS}, got {name!r}")


def interleaved_throughput(family: str, variants: tuple[str, ...], cfg: Config, corpus: Any, seed: int,
                           steps_per_round: int | None = None, rounds: int | None = None,
                           per_round: bool = False) -> Any:
    """Train tokens/s of each variant measured round-robin (same batch, same process, interleaved in
    time, median over rounds), so load drift on a shared box hits every variant alike.

    per_round=True returns (median tokens/s per variant, tokens/s per variant per round)."""
    import torch

    from neurips26.cofrgenet.hf import build_model, swap_ffn, tiny_config
    from neurips26.cofrgenet.train import TrainConfig, lr_at, param_groups

    k = steps_per_round or int(cfg.extra.get("throughput_steps", 3))
    r = rounds or int(cfg.extra.get("throughput_rounds", 7))
    rng = np.random.default_rng(seed)
    batch = torch.from_numpy(corpus.batch(rng, cfg.batch_size, cfg.ctx))
    x, y = batch[:, :-1], batch[:, 1:]
    setups = {}
    for v in variants:
        torch.manual_seed(seed)
        model = build_model(family, tiny_config(family, corpus.vocab_size, cfg.hidden, cfg.layers, cfg.heads,
                                                cfg.ctx, cfg.n_experts, cfg.top_k))
        factory, _ = variant_spec(v, cfg, family, cfg.hidden, cfg.layers)
        if factory is not None:
            swap_ffn(model, factory, family)
        opt = torch.optim.AdamW(param_groups(model, 0.1), lr=lr_at(0, TrainConfig(lr=cfg.lr)))
        setups[v] = (model, opt)

    def step(model: Any, opt: Any) -> None:
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for model, opt in setups.values():   # warm-up
        step(model, opt)
    times: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(r):
        for v, (model, opt) in setups.items():
            t0 = time.perf_counter()
            for _ in range(k):
                step(model, opt)
            times[v].append(time.perf_counter() - t0)
    med = {v: float(k * x.numel() / np.median(ts)) for v, ts in times.items()}
    if per_round:
        return med, {v: [float(k * x.numel() / t) for t in ts] for v, ts in times.items()}
    return med


def _ffn_params(model: Any) -> int:
    from neurips26.cofrgenet.hf import Mamba2WithFFN

    total = 0
    for mod in model.modules():
        if isinstance(mod, Mamba2WithFFN):
            total += sum(t.numel() for t in mod.ffn.parameters())
        elif type(mod).__name__ in ("GPT2Block", "LlamaDecoderLayer", "MixtralDecoderLayer"):
            mlp = mod.mlp
            experts = getattr(mlp, "experts", None)
            total += sum(t.numel() for t in (experts if experts is not None else mlp).parameters())
    return total


def train_variant(name: str, family: str, cfg: Config, corpus: Any, seed: int, n_layers: int,
                  steps: int, depth: int | None = None, ckpt: str | None = None) -> dict[str, Any]:
    """Build the HF model of ``family``, swap in variant ``name``'s FFN, train it; returns its metrics."""
    import torch

    from neurips26.cofrgenet.hf import build_model, swap_ffn, tiny_config
    from neurips26.cofrgenet.layers import count_params
    from neurips26.cofrgenet.train import TrainConfig, train

    torch.manual_seed(seed)
    model = build_model(family, tiny_config(family, corpus.vocab_size, cfg.hidden, n_layers, cfg.heads,
                                            cfg.ctx, cfg.n_experts, cfg.top_k))
    factory, dyadic = variant_spec(name, cfg, family, cfg.hidden, n_layers, depth)
    if factory is not None:
        swap_ffn(model, factory, family)
    tcfg = TrainConfig(steps=steps, batch_size=cfg.batch_size, ctx=cfg.ctx, lr=cfg.lr, dyadic=dyadic,
                       eval_every=min(cfg.eval_every, steps), n_val_windows=cfg.n_val_windows,
                       time_limit_s=cfg.time_limit_per_run_s, checkpoint_path=ckpt,
                       checkpoint_every=cfg.checkpoint_every, autocast_bf16=cfg.autocast_bf16)
    res = train(model, corpus, tcfg, seed=seed)
    res["params_total"] = count_params(model)
    res["ffn_params"] = _ffn_params(model)
    res["dyadic"] = dyadic
    return res


# ----------------------------------------------------------------------------- the run

def _cached(ctx: RunContext, key: str, cfg: Config, fn: Any) -> dict[str, Any]:
    """Finished runs are kept as JSON in the output folder, so an interrupted run resumes."""
    d = ctx.out_dir / "variants"
    d.mkdir(exist_ok=True)
    path = d / f"{key}.json"
    cdict = dataclasses.asdict(cfg)
    cdict = json.loads(json.dumps(cdict))
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("config") == cdict:
            return saved["result"]
    res = fn()
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"config": cdict, "result": res}))
    tmp.replace(path)
    return res


def _summary(runs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    vals = [r["val_loss"] for r in runs.values()]
    return {
        "val_loss_mean": float(np.mean(vals)),
        "val_loss_std": float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0,
        "tokens_per_s_mean": float(np.mean([r["tokens_per_s"] for r in runs.values()])),
        "params_total": int(next(iter(runs.values()))["params_total"]),
        "ffn_params": int(next(iter(runs.values()))["ffn_params"]),
        "nonfinite_steps": int(sum(r["nonfinite_steps"] for r in runs.values())),
        "diverged_any": bool(any(r["diverged"] for r in runs.values())),
        "stopped_early_any": bool(any(r["stopped_early"] for r in runs.values())),
        "pole_frac_mean": float(np.mean([r["pole_frac_mean"] for r in runs.values()])),
        "n_seeds": len(runs),
    }


def free_cores(cap: int = 2) -> int:
    """Cores not busy right now (cpu count minus the 1-minute load), between 1 and ``cap``: on a shared
    box, more torch threads than free cores makes OpenMP spin and tiny models run ~100x slower."""
    import os

    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        load = 0.0
    return int(max(1, min(cap, (os.cpu_count() or 1) - round(load))))


def run(cfg: Config, ctx: RunContext) -> dict[str, Any]:
    import torch
    import transformers

    from neurips26.cofrgenet.hf import check_family

    for fam in cfg.families + (cfg.probe_family,):
        check_family(fam)
    bad = [v for v in cfg.variants + cfg.probe_variants if v not in VARIANTS]
    if bad:
        raise ValueError(f"variants must be among {VARIANTS}, got {bad}")
    transformers.logging.set_verbosity_error()
    threads = cfg.threads if cfg.threads is not None else free_cores()
    threads_before = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    try:
        return _run(cfg, ctx, threads)
    finally:
        torch.set_num_threads(threads_before)


def _run(cfg: Config, ctx: RunContext, threads: int) -> dict[str, Any]:
    from neurips26.cofrgenet.data import load_corpus

    t_start = time.perf_counter()
    corpus = load_corpus(cfg.sources, cfg.tokenizer, allow_synthetic=cfg.allow_synthetic,
                         bpe_vocab=cfg.bpe_vocab, seed=ctx.seed)
    ctx.log(f"cofrgenet: {threads} torch thread(s); corpus {corpus.source} ({corpus.tokenizer}, vocab {corpus.vocab_size}, "
            f"{len(corpus.train):,} train / {len(corpus.val):,} val tokens)")
    seeds = [ctx.seed + s for s in cfg.seeds]
    jobs = [("main", fam, v, s, cfg.layers, None, cfg.steps) for fam in cfg.families for v in cfg.variants
            for s in seeds]
    jobs += [("probe", cfg.probe_family, v, s, nl, d, cfg.probe_steps) for nl in cfg.probe_layers
             for d in cfg.probe_depths for v in cfg.probe_variants for s in seeds]
    runs: dict[str, Any] = {}
    probe_runs: dict[str, Any] = {}
    skipped: list[str] = []
    for kind, fam, v, s, nl, d, steps in ctx.track(jobs, desc="cofrgenet runs", total=len(jobs)):
        key = f"{kind}-{fam}-{v}-L{nl}-d{d or 0}-s{s}"
        ckpt = str(ctx.out_dir / "checkpoints" / f"{key}.pt") if cfg.checkpoint_every else None
        t0 = time.perf_counter()
        if cfg.time_budget_s is not None and t0 - t_start > cfg.time_budget_s:
            skipped.append(key)       # claims that need it come out inconclusive (metric missing)
            ctx.log(f"  {key}: skipped, time budget of {cfg.time_budget_s:.0f} s spent")
            continue
        limit = cfg.time_limit_per_run_s
        if cfg.time_budget_s is not None:
            limit = min(limit, cfg.time_budget_s - (t0 - t_start))
        run_cfg = dataclasses.replace(cfg, time_limit_per_run_s=limit)
        job = functools.partial(train_variant, v, fam, run_cfg, corpus, s, nl, steps, d, ckpt)
        res = _cached(ctx, key, cfg, job)
        ctx.log(f"  {key}: val {res['val_loss']:.3f}  {res['tokens_per_s']:.0f} tok/s  "
                f"diverged={res['diverged']}  ({time.perf_counter() - t0:.1f} s)")
        if kind == "main":
            runs.setdefault(fam, {}).setdefault(v, {})[s] = res
        else:
            probe_runs.setdefault(f"L{nl}_d{d}", {}).setdefault(v, {})[s] = res
    summary = {fam: {v: _summary(r) for v, r in vs.items()} for fam, vs in runs.items()}
    throughput = {}
    for fam in ctx.track(list(summary), desc="interleaved throughput"):
        throughput[fam], rounds = interleaved_throughput(fam, tuple(summary[fam]), cfg, corpus, seeds[0],
                                                         per_round=True)
        for v, tps in throughput[fam].items():
            summary[fam][v]["tokens_per_s_interleaved"] = tps
            summary[fam][v]["tokens_per_s_rounds"] = rounds[v]
        ctx.log(f"  throughput {fam}: " + ", ".join(f"{v} {t:,.0f}" for v, t in throughput[fam].items()))
    probe = {k: {v: _summary(r) for v, r in vs.items()} for k, vs in probe_runs.items()}
    metrics = {
        "corpus": corpus.source, "tokenizer": corpus.tokenizer, "vocab_size": corpus.vocab_size,
        "seeds": seeds, "summary": summary, "probe": probe, "skipped_runs": skipped, "threads": threads,
        "curves": {fam: {v: {str(s): {"val_step": r["history"]["val_step"], "val_loss": r["history"]["val_loss"],
                                      "pole_frac": r["history"]["pole_frac"]}
                             for s, r in rs.items()} for v, rs in vs.items()} for fam, vs in runs.items()},
        "probe_curves": {k: {v: {str(s): {"step": r["history"]["step"], "loss": r["history"]["loss"]}
                                 for s, r in rs.items()} for v, rs in vs.items()} for k, vs in probe_runs.items()},
        "wall_seconds": time.perf_counter() - t_start,
    }
    _plots(metrics, ctx)
    return metrics


def _plots(m: dict[str, Any], ctx: RunContext) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fams = list(m["curves"])
    if not fams and not m["probe_curves"]:
        return                                # nothing ran (time budget): no plots
    fig, axes = plt.subplots(1, len(fams) + (1 if m["probe_curves"] else 0), figsize=(5 * (len(fams) + 1), 3.6),
                             squeeze=False)
    for ax, fam in zip(axes[0], fams):
        for v, rs in m["curves"][fam].items():
            for i, (s, c) in enumerate(rs.items()):
                ax.plot(c["val_step"], c["val_loss"], marker=".", color=f"C{VARIANTS.index(v)}",
                        label=f"{v}: {VARIANT_LABELS[v]}" if i == 0 else None, alpha=0.8)
        ax.set(title=f"{fam}: val loss", xlabel="step", ylabel="val loss (nats/token)")
        ax.legend(fontsize=7)
    if m["probe_curves"]:
        ax = axes[0][-1]
        for k, vs in m["probe_curves"].items():
            for v, rs in vs.items():
                for s, c in rs.items():
                    ax.plot(c["step"], c["loss"], lw=0.8, label=f"{k} {v} s{s}")
        ax.set(title="depth probe: train loss", xlabel="step", ylabel="loss")
        ax.legend(fontsize=6)
    ctx.save_plot(fig, "val_loss_curves.png")

    if not fams:
        return
    fig, ax = plt.subplots(figsize=(1.2 + 1.2 * sum(len(v) for v in m["summary"].values()), 3.6))
    labels, vals, cols = [], [], []
    for fam, vs in m["summary"].items():
        for v, s in vs.items():
            labels.append(f"{fam}\n{v}")
            vals.append(s["tokens_per_s_mean"])
            cols.append(f"C{VARIANTS.index(v)}")
    ax.bar(range(len(vals)), vals, color=cols)
    ax.set_xticks(range(len(vals)), labels, fontsize=7)
    ax.set(ylabel="train tokens/s", title="end-to-end training throughput")
    ctx.save_plot(fig, "throughput.png")

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for fam, vs in m["curves"].items():
        for v, rs in vs.items():
            c = next(iter(rs.values()))
            ax.plot(c["pole_frac"], color=f"C{VARIANTS.index(v)}", label=f"{fam} {v}")
    ax.set(xlabel="step", ylabel="fraction of ladder elements with |K_d| < eps", title="pole hits")
    ax.legend(fontsize=7)
    ctx.save_plot(fig, "pole_hits.png")


# ----------------------------------------------------------------------------- claims

def _families(m: dict[str, Any]) -> dict[str, Any]:
    """The per-family summaries; KeyError (-> inconclusive) when no main run finished."""
    if not m["summary"]:
        raise KeyError("summary (no main run finished)")
    return m["summary"]


def _guard(*stats: dict[str, Any]) -> str | None:
    if any(s["stopped_early_any"] for s in stats):
        return "a compared run hit the time guard and stopped early"
    return None


def _check_similar(m: dict[str, Any]) -> tuple[str, str]:
    parts, ok = [], True
    for fam, s in _families(m).items():
        p1, b2 = s["P1"], s["B2"]
        if (g := _guard(p1, b2)):
            return INCONCLUSIVE, g
        tol = max(p1["val_loss_std"], b2["val_loss_std"])   # within 1 std over seeds (0 with one seed)
        good = p1["val_loss_mean"] <= b2["val_loss_mean"] + tol and p1["nonfinite_steps"] == 0
        ok &= good
        parts.append(f"{fam}: P1 {p1['val_loss_mean']:.3f} vs B2 {b2['val_loss_mean']:.3f}"
                     + (f" (±{tol:.3f})" if tol else ""))
    return (HOLDS if ok else FAILS), "; ".join(parts) + f" val nats/token ({len(m['seeds'])} seed(s))"


def _check_throughput(m: dict[str, Any]) -> tuple[str, str]:
    """P1 vs B2 train-step throughput, paired by round (adjacent in time): holds if P1 is faster in at
    least 80% of the rounds, fails if slower in at least 80%, otherwise inconclusive (within load noise)."""
    parts, verdicts = [], []
    for fam, s in _families(m).items():
        p1, b2 = s["P1"]["tokens_per_s_interleaved"], s["B2"]["tokens_per_s_interleaved"]
        pr, br = s["P1"].get("tokens_per_s_rounds", [p1]), s["B2"].get("tokens_per_s_rounds", [b2])
        wins = sum(a > b for a, b in zip(pr, br))
        n = len(pr)
        verdicts.append(HOLDS if wins >= 0.8 * n else FAILS if n - wins >= 0.8 * n else INCONCLUSIVE)
        parts.append(f"{fam}: P1 {p1:,.0f} vs B2 {b2:,.0f} tok/s ({p1 / b2:.2f}x median; P1 faster in {wins}/{n} "
                     f"paired rounds; in-training {s['P1']['tokens_per_s_mean']:,.0f} vs "
                     f"{s['B2']['tokens_per_s_mean']:,.0f})")
    v = HOLDS if all(x == HOLDS for x in verdicts) else FAILS if FAILS in verdicts else INCONCLUSIVE
    return v, "; ".join(parts) + " (train step, CPU)"


def _check_deep(m: dict[str, Any]) -> tuple[str, str]:
    """Spec criterion (c): P1 without schedule trains stably at every probe point, while the prior Cffn
    without schedule (B3) diverges or ends worse than P1 at some (large d / depth) probe point."""
    if not m["probe"]:
        raise KeyError("probe")
    parts, p1_stable, prior_worse_somewhere = [], True, False
    for k, s in m["probe"].items():
        p1, b3 = s["P1"], s["B3"]
        if (g := _guard(p1, b3)):
            return INCONCLUSIVE, g
        p1_ok = not p1["diverged_any"] and p1["nonfinite_steps"] == 0
        b3_bad = b3["diverged_any"] or b3["val_loss_mean"] > p1["val_loss_mean"]
        p1_stable &= p1_ok
        prior_worse_somewhere |= b3_bad
        text = (f"{k}: P1 {p1['val_loss_mean']:.3f}{' DIVERGED' if not p1_ok else ''}, "
                f"B3 {b3['val_loss_mean']:.3f}{' DIVERGED' if b3['diverged_any'] else ''}")
        if "P3" in s:
            p3 = s["P3"]
            text += f", P3 (prior+logexp) {p3['val_loss_mean']:.3f}{' DIVERGED' if p3['diverged_any'] else ''}"
        if "B2" in s:
            text += f", B2 (dyadic) {s['B2']['val_loss_mean']:.3f}"
        parts.append(text)
    text = "; ".join(parts) + " (val; no schedule unless noted)"
    if not p1_stable:
        return FAILS, text
    if prior_worse_somewhere:
        return HOLDS, text
    return INCONCLUSIVE, text + " - P1 is stable but the prior Cffn is stable and better at every probe point"


def _check_native(m: dict[str, Any]) -> tuple[str, str]:
    parts, ok = [], True
    for fam, s in _families(m).items():
        p1, b1 = s["P1"], s["B1"]
        ratio = p1["val_loss_mean"] / b1["val_loss_mean"]
        good = ratio <= 1.05 and p1["ffn_params"] < b1["ffn_params"]
        ok &= good
        parts.append(f"{fam}: P1/B1 val = {ratio:.4f} with {p1['ffn_params']:,} vs {b1['ffn_params']:,} FFN params")
        if "B1m" in s:
            parts[-1] += f"; param-matched native {s['B1m']['val_loss_mean']:.3f} vs P1 {p1['val_loss_mean']:.3f}"
    return (HOLDS if ok else FAILS), "; ".join(parts)


def _check_prior_schedule(m: dict[str, Any]) -> tuple[str, str]:
    parts, ok = [], True
    for fam, s in _families(m).items():
        b2, b3 = s["B2"]["val_loss_mean"], s["B3"]["val_loss_mean"]
        ok &= b3 > b2
        parts.append(f"{fam}: B3 (no schedule) {b3:.3f} vs B2 (dyadic) {b2:.3f} ({100 * (b3 / b2 - 1):+.1f}%)")
    return (HOLDS if ok else FAILS), "; ".join(parts)


CLAIMS = [
    Claim("similar_or_better", "GatedCF (P1) performs similarly or better than the prior CF component (B2)",
          "'similarly or significantly better' (abstract; no numbers)", _check_similar),
    Claim("higher_throughput", "GatedCF trains with higher throughput than the prior CF component",
          "'higher throughput' (abstract); prior re-impl. ran at 0.37x its baseline", _check_throughput),
    Claim("deep_stable_without_schedule",
          "log/exp division trains deeper CF nets stably without incremental (dyadic) training",
          "'deeper CoFrGeNets train stably without incremental training' (abstract)", _check_deep),
    Claim("near_native_fewer_params", "GatedCF stays within 5% val loss of the native FFN with fewer params",
          "prior: competitive with 2/3 to 1/2 of the params (spec criterion d)", _check_native),
    Claim("prior_needs_schedule", "the prior Cffn degrades without its dyadic schedule (prior-work claim)",
          "10-80% degradation without dyadic training (prior work, secondary source)", _check_prior_schedule),
]
