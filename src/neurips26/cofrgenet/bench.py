"""`neurips26 bench cofrgenet`: forward+backward time of one FFN layer on [4096, p] tokens, as ratios to
SwiGLU (and to the prior Cffn), plus end-to-end train tokens/s of the quick config; every timing through
``harness.bench.time_interleaved`` (all layers of one width interleaved round by round, order alternating,
one warm-up round; medians, with p90 and n in each row's note).

Target (issue): GatedCF >= 0.8x SwiGLU throughput at equal width (judged at p=384) and faster than the
prior Cffn. Anchor from the spec: the public prior re-implementation trained at 0.37x its baseline.
``ctx.scale == "smoke"``: width 16 on 256 tokens, no torch.compile, the smoke model end to end (seconds).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable

import torch
import transformers

from neurips26.cofrgenet.data import load_corpus
from neurips26.cofrgenet.layers import Cffn, GatedCF, GeluMLP, SwiGLU
from neurips26.cofrgenet.variants import SMOKE_SIZES, Config, free_cores, throughput_timings
from neurips26.harness import BenchRow, RunContext
from neurips26.harness.bench import Timing, stat_note, time_interleaved

TOKENS = 4096
WIDTHS = (96, 384)
SMOKE_TOKENS = 256
SMOKE_WIDTHS = (16,)
ANCHOR = "SwiGLU (m=8p/3) eager"
LAYERS = ("GELU-MLP", "B2 Cffn+clamp", "P1 GatedCF", "P1s GatedCF signed+logexp", "P1e GatedCF a=exp(pre)",
          "P1 GatedCF compiled")


def _fwd_bwd(mod: Any, x: Any) -> Callable[[], None]:
    def f() -> None:
        mod.zero_grad(set_to_none=True)
        xx = x.detach().requires_grad_(True)
        mod(xx).sum().backward()
    return f


def layer_times(p: int, tokens: int = TOKENS, rounds: int = 5, number: int = 2, compile_p1: bool = True,
                seed: int = 0) -> tuple[dict[str, Timing], dict[str, int], str]:
    """Seconds per fwd+bwd of each layer kind at width p (interleaved Timings); matmul params; a note on
    torch.compile (empty when it compiled or was not asked for)."""
    torch.manual_seed(seed)
    x = torch.randn(tokens, p)
    mods = {"GELU-MLP": GeluMLP(p), "SwiGLU": SwiGLU(p), "B2 Cffn+clamp": Cffn(p, 3, 5, 0.01, "clamp"),
            "P1 GatedCF": GatedCF(p), "P1s GatedCF signed+logexp": GatedCF(p, denominators="signed"),
            "P1e GatedCF a=exp(pre)": GatedCF(p, positive_map="exp")}
    fns = {k: _fwd_bwd(m, x) for k, m in mods.items()}
    # the element-wise ladder alone (P1's gate on a fixed h): its share of P1's time
    p1 = mods["P1 GatedCF"]
    h = torch.randn(tokens, p1.m) * 0.02 * math.sqrt(p)

    def ladder() -> None:
        p1.zero_grad(set_to_none=True)
        c, _ = p1.gate(h)
        c.sum().backward()
    fns["P1 ladder only"] = ladder
    note = ""
    if compile_p1:
        try:
            comp = torch.compile(GatedCF(p))
            f = _fwd_bwd(comp, x)
            f()                                          # compile now (not timed)
            fns["P1 GatedCF compiled"] = f
        except Exception as e:  # noqa: BLE001 - any backend failure: report, do not abort the bench
            note = f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    timings = time_interleaved(*fns.values(), rounds=rounds, warmup=1, number=number)
    times = {k: t for k, t in zip(fns, timings) if t is not None}
    mm = {"GELU-MLP": 2 * p * 4 * p, "SwiGLU": 3 * p * math.ceil(8 * p / 3), "B2 Cffn+clamp": 2 * p * p,
          "P1 GatedCF": 3 * p * p, "P1s GatedCF signed+logexp": 3 * p * p, "P1 GatedCF compiled": 3 * p * p,
          "P1e GatedCF a=exp(pre)": 3 * p * p}
    return times, mm, note


def _row(name: str, ours: Timing, anchor: Timing, anchor_name: str, note: str) -> BenchRow:
    text = stat_note(ours, anchor, "ms")
    return BenchRow(name, ours.median * 1e3, anchor.median * 1e3, anchor_name, "ms", "lower",
                    f"{note}; {text}" if note else text)


def _throughput_row(name: str, ours: Timing, anchor: Timing, tokens: int, anchor_name: str, note: str) -> BenchRow:
    return BenchRow(name, tokens / ours.median, tokens / anchor.median, anchor_name, "tokens/s", "higher",
                    f"{note}; {stat_note(ours, anchor, 'ms')} per train step")


def bench(ctx: RunContext) -> list[BenchRow]:
    smoke = ctx.scale == "smoke"
    transformers.logging.set_verbosity_error()
    threads = 1 if smoke else free_cores()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    tokens = SMOKE_TOKENS if smoke else TOKENS
    rows: list[BenchRow] = []
    try:
        for p in ctx.track(SMOKE_WIDTHS if smoke else WIDTHS, desc="layer widths"):
            times, mm, compile_note = layer_times(p, tokens, rounds=3 if smoke else 5, number=1 if smoke else 2,
                                                  compile_p1=not smoke)
            sw = times["SwiGLU"]
            ctx.log(f"p={p}: " + ", ".join(f"{k} {1e3 * v.median:.1f} ms" for k, v in times.items()))
            share = times["P1 ladder only"].median / times["P1 GatedCF"].median
            for name in LAYERS:
                if name not in times:        # torch.compile not asked for (smoke) or failed: no timing
                    continue
                gflops = 6 * mm[name] * tokens / times[name].median / 1e9
                extra = f"matmul {gflops:.1f} GFLOP/s; {threads} thread(s), CPU fp32"
                if name == "P1 GatedCF":
                    extra += f"; element-wise ladder = {100 * share:.0f}% of P1 time"
                    if compile_note:
                        extra += f"; compiled row missing: {compile_note}"
                if name.startswith("P1"):
                    extra += "; target ratio >= 0.8 (prior re-impl. anchor: 0.37x end-to-end)"
                rows.append(_row(f"{name} fwd+bwd [{tokens},{p}]", times[name], sw, ANCHOR, extra))
            rows.append(_row(f"P1 GatedCF vs prior Cffn fwd+bwd [{tokens},{p}]", times["P1 GatedCF"],
                             times["B2 Cffn+clamp"], "B2 prior Cffn+clamp (Prop-1 Function)",
                             "target: ratio > 1 (faster than the prior component)"))
        # end-to-end train tokens/s (quick config; smoke: the smoke model), interleaved in one process
        cfg = replace(Config(), **SMOKE_SIZES) if smoke else Config()
        corpus = load_corpus(cfg.sources, cfg.tokenizer, allow_synthetic=True, max_chars=cfg.max_chars)
        timings, per_step = throughput_timings("llama", ("B1", "B2", "P1"), cfg, corpus, 0,
                                               steps_per_round=1 if smoke else 5, rounds=3 if smoke else 5)
        src = (f"{'smoke' if smoke else 'quick'} Llama config (p={cfg.hidden}, {cfg.layers} layers, ctx {cfg.ctx}, "
               f"batch {cfg.batch_size}), corpus {corpus.source}")
        rows.append(_throughput_row("P1 end-to-end train tokens/s vs native SwiGLU", timings["P1"], timings["B1"],
                                    per_step, "B1 native Llama SwiGLU", src))
        rows.append(_throughput_row("P1 end-to-end train tokens/s vs prior Cffn", timings["P1"], timings["B2"],
                                    per_step, "B2 prior Cffn + dyadic", src))
    finally:
        torch.set_num_threads(before)
    return rows
