"""`neurips26 bench cofrgenet`: forward+backward time of one FFN layer on [4096, p] tokens, as ratios to
SwiGLU (and to the prior Cffn) measured in the same process, interleaved round-robin (median of reps),
plus end-to-end train tokens/s of the quick configs.

Target (issue): GatedCF >= 0.8x SwiGLU throughput at equal width (judged at p=384) and faster than the
prior Cffn. Anchor from the spec: the public prior re-implementation trained at 0.37x its baseline.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np

from neurips26.harness import BenchRow, RunContext

TOKENS = 4096
WIDTHS = (96, 384)


def _fwd_bwd(mod: Any, x: Any) -> Callable[[], None]:
    def f() -> None:
        mod.zero_grad(set_to_none=True)
        xx = x.detach().requires_grad_(True)
        mod(xx).sum().backward()
    return f


def _time_round_robin(fns: dict[str, Callable[[], None]], reps: int, inner: int) -> dict[str, float]:
    """Median seconds per call of each fn, calls interleaved so load drift hits all alike."""
    for f in fns.values():
        f()                                        # warm-up
    ts: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                f()
            ts[k].append((time.perf_counter() - t0) / inner)
    return {k: float(np.median(v)) for k, v in ts.items()}


def layer_times(p: int, tokens: int = TOKENS, reps: int = 5, inner: int = 2, compile_p1: bool = True,
                seed: int = 0) -> tuple[dict[str, float], dict[str, int], str]:
    """Seconds per fwd+bwd of each layer kind at width p; matmul params; a note on torch.compile."""
    import torch

    from neurips26.cofrgenet.layers import Cffn, GatedCF, GeluMLP, SwiGLU

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
    times = _time_round_robin(fns, reps, inner)
    mm = {"GELU-MLP": 2 * p * 4 * p, "SwiGLU": 3 * p * math.ceil(8 * p / 3), "B2 Cffn+clamp": 2 * p * p,
          "P1 GatedCF": 3 * p * p, "P1s GatedCF signed+logexp": 3 * p * p, "P1 GatedCF compiled": 3 * p * p,
          "P1e GatedCF a=exp(pre)": 3 * p * p}
    return times, mm, note


def bench(ctx: RunContext) -> list[BenchRow]:
    import torch
    import transformers

    from neurips26.cofrgenet.experiment import CONFIGS, free_cores, interleaved_throughput

    transformers.logging.set_verbosity_error()
    threads = free_cores()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    rows: list[BenchRow] = []
    try:
        for p in ctx.track(WIDTHS, desc="layer widths"):
            times, mm, note = layer_times(p)
            sw = times["SwiGLU"]
            ctx.log(f"p={p}: " + ", ".join(f"{k} {1e3 * v:.1f} ms" for k, v in times.items()))
            share = times["P1 ladder only"] / times["P1 GatedCF"]
            for name in ("GELU-MLP", "B2 Cffn+clamp", "P1 GatedCF", "P1s GatedCF signed+logexp",
                         "P1e GatedCF a=exp(pre)", "P1 GatedCF compiled"):
                if name not in times:
                    rows.append(BenchRow(f"{name} fwd+bwd [{TOKENS},{p}]", float("nan"), sw * 1e3,
                                         "SwiGLU (m=8p/3) eager", "ms", "lower", note))
                    continue
                gflops = 6 * mm[name] * TOKENS / times[name] / 1e9
                extra = f"matmul {gflops:.1f} GFLOP/s; {threads} thread(s), CPU fp32"
                if name == "P1 GatedCF":
                    extra += f"; element-wise ladder = {100 * share:.0f}% of P1 time"
                if name.startswith("P1"):
                    extra += "; target ratio >= 0.8 (prior re-impl. anchor: 0.37x end-to-end)"
                rows.append(BenchRow(f"{name} fwd+bwd [{TOKENS},{p}]", times[name] * 1e3, sw * 1e3,
                                     "SwiGLU (m=8p/3) eager", "ms", "lower", extra))
            rows.append(BenchRow(f"P1 GatedCF vs prior Cffn fwd+bwd [{TOKENS},{p}]", times["P1 GatedCF"] * 1e3,
                                 times["B2 Cffn+clamp"] * 1e3, "B2 prior Cffn+clamp (Prop-1 Function)", "ms",
                                 "lower", "target: ratio > 1 (faster than the prior component)"))
        # end-to-end train tokens/s of the quick configs, interleaved in one process
        from neurips26.cofrgenet.data import load_corpus

        cfg = CONFIGS["quick"]
        corpus = load_corpus(cfg.sources, cfg.tokenizer, allow_synthetic=True)
        tps = interleaved_throughput("llama", ("B1", "B2", "P1"), cfg, corpus, 0, steps_per_round=5, rounds=3)
        src = f"quick Llama config (p={cfg.hidden}, {cfg.layers} layers, ctx {cfg.ctx}, batch {cfg.batch_size}), " \
              f"corpus {corpus.source}"
        rows.append(BenchRow("P1 end-to-end train tokens/s vs native SwiGLU", tps["P1"], tps["B1"],
                             "B1 native Llama SwiGLU", "tokens/s", "higher", src))
        rows.append(BenchRow("P1 end-to-end train tokens/s vs prior Cffn", tps["P1"], tps["B2"],
                             "B2 prior Cffn + dyadic", "tokens/s", "higher", src))
    finally:
        torch.set_num_threads(before)
    return rows
