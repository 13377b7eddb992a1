"""Performance: convMMD fits vs NPMLE-EM and XD, fast 1-D Laplace path vs dense, denoising throughput,
peak memory of the loss. Every timing goes through ``harness.bench`` (ours and the anchor in interleaved
rounds, medians; the statistic and n in each row's note), torch on 1 intra-op thread.
``ctx.scale == "smoke"`` shrinks every row to seconds (n = 200, 2 epochs, b = 256, no memory row).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import torch

from neurips26.deconv.baselines import NPMLE, ExtremeDeconvolution
from neurips26.deconv.data import make_dataset
from neurips26.deconv.denoise import gmm_posterior, importance_posterior_mean
from neurips26.deconv.estimators import ConvMMDFlow, ConvMMDGMM, FlowConfig, TrainConfig
from neurips26.deconv.loss import mmd2_unbiased
from neurips26.harness import BenchRow, RunContext
from neurips26.harness.bench import compare, stat_note, time_interleaved

Q5 = (0.1, 0.3, 0.5, 0.7, 0.9)
PACKAGE_EPOCHS = 500            # TrainConfig's default


@dataclass(frozen=True)
class BenchSizes:
    n: int = 2000               # observations per fit
    epochs: int = 40            # convMMD epochs per fit row (the package default is 500)
    batch: int = 512
    fit_rounds: int = 3         # interleaved rounds of the four fits
    loss_sizes: tuple = (512, 4096)
    loss_rounds: int = 5
    memory: bool = True         # the peak-memory row (two fresh interpreters)
    n_denoise: int = 512
    is_samples: int = 8192
    denoise_rounds: int = 3


SIZES = {"quick": BenchSizes(), "full": BenchSizes(),
         "smoke": BenchSizes(n=200, epochs=2, batch=100, fit_rounds=1, loss_sizes=(256,), loss_rounds=2,
                             memory=False, n_denoise=64, is_samples=256, denoise_rounds=1)}


def _loss_row(b: int, rounds: int) -> BenchRow:
    g = torch.Generator().manual_seed(b)
    x = torch.randn(b, 1, generator=g)
    y = torch.randn(b, 1, generator=g) + 0.3
    h = [0.2, 0.5, 1.0]
    return compare(f"1-D Laplace convMMD loss, b={b}, 3 bandwidths: O(b log b) vs dense O(b^2)",
                   lambda: mmd2_unbiased(x, y, h, method="fast"),
                   lambda: mmd2_unbiased(x, y, h, method="dense"),
                   "dense kernel matrices", unit="ms", rounds=rounds,
                   note="target >= 10x at b=4096 (issue)" if b == 4096 else "")


_MEM_CODE = """
import resource, torch, sys
torch.set_num_threads(1)
from neurips26.deconv.loss import mmd2_unbiased
b, method = int(sys.argv[1]), sys.argv[2]
x = torch.randn(b, 1, requires_grad=True); y = torch.randn(b, 1) + 0.3
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
mmd2_unbiased(x, y, [0.2, 0.5, 1.0], method=method).backward()
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024.0)
"""


def _peak_mb(b: int, method: str) -> float | None:
    """Peak resident-memory growth (MiB) of one loss + backward in a fresh interpreter."""
    try:
        r = subprocess.run([sys.executable, "-c", _MEM_CODE, str(b), method], capture_output=True, text=True,
                           timeout=300)
        return float(r.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError, OSError):
        return None


def _memory_row(b: int = 4096, repeats: int = 2) -> BenchRow:
    """Peak RSS growth of loss + backward, fast vs dense, the largest of ``repeats`` fresh interpreters
    each (ru_maxrss can miss growth when the machine reclaims pages under memory pressure)."""
    name = f"peak memory of loss+backward at b={b} (fast vs dense)"
    fast = [m for m in (_peak_mb(b, "fast") for _ in range(repeats)) if m is not None]
    dense = [m for m in (_peak_mb(b, "dense") for _ in range(repeats)) if m is not None]
    mf = max(fast) if fast else None
    md = max(dense) if dense else None
    if mf is None or md is None or md < 1.0:
        return BenchRow(name, max(mf or 0.0, 1.0), None, "dense kernel matrices", "MiB",
                        note=f"measurement failed: dense RSS growth {md} MiB (below ru_maxrss resolution or "
                             f"the subprocess failed; memory pressure on the machine?)")
    return BenchRow(name, max(mf, 1.0), md, "dense kernel matrices", "MiB",
                    note=f"ru_maxrss growth in a fresh interpreter, the largest of {repeats} each, float32; "
                         f"fast path measured {mf:.2f} MiB, floored at 1 MiB (resolution), so the ratio is a "
                         f"lower bound")


def _fit_rows(ctx: RunContext, d: int, sz: BenchSizes) -> list[BenchRow]:
    """convMMD-GMM, convMMD-NSF, NPMLE-EM and XD fits on the same data, in interleaved rounds."""
    name = "laplace_mix_1d" if d == 1 else "moons"
    ds = make_dataset(name, sz.n, "gaussian", hetero=True, seed=0)
    cfg = TrainConfig(epochs=sz.epochs, batch_size=sz.batch, lr=1e-2, bandwidth_quantiles=Q5)
    fcfg = TrainConfig(epochs=sz.epochs, batch_size=sz.batch, lr=1e-3, bandwidth_quantiles=Q5)
    k = 6 if d == 1 else 10
    fitted: dict[str, list] = {"gmm": [], "flow": [], "npmle": [], "xd": []}
    fns = (lambda: fitted["gmm"].append(ConvMMDGMM(k, 32, cfg).fit(ds.x, noise=ds.noise)),
           lambda: fitted["flow"].append(ConvMMDFlow(FlowConfig(), fcfg).fit(ds.x, noise=ds.noise)),
           lambda: fitted["npmle"].append(NPMLE().fit(ds.x, noise=ds.noise)),
           lambda: fitted["xd"].append(ExtremeDeconvolution(k).fit(ds.x, noise=ds.noise)))
    t_gmm, t_flow, t_np, t_xd = time_interleaved(*fns, rounds=sz.fit_rounds, warmup=0)
    npm, xd = fitted["npmle"][-1], fitted["xd"][-1]
    ctx.log(f"[bench {d}-D] GMM {t_gmm.median:.2f}s flow {t_flow.median:.2f}s NPMLE {t_np.median:.2f}s "
            f"({npm.n_iter_} it) XD {t_xd.median:.2f}s ({xd.n_iter_} it)")
    tag = f"{d}-D n={sz.n}"
    steps = max(1, sz.n // sz.batch)
    note = (f"convMMD: {sz.epochs} epochs x {steps} steps (package default is {PACKAGE_EPOCHS} epochs: "
            f"x{PACKAGE_EPOCHS // sz.epochs})")
    step_gmm = statistics.median(g.train_seconds_ / g.n_steps_ for g in fitted["gmm"])
    step_flow = statistics.median(f.train_seconds_ / f.n_steps_ for f in fitted["flow"])
    it_np = statistics.median(t / m.n_iter_ for t, m in zip(t_np.samples, fitted["npmle"]))
    it_xd = statistics.median(t / m.n_iter_ for t, m in zip(t_xd.samples, fitted["xd"]))
    bw = statistics.median(g.bandwidth_seconds_ for g in fitted["gmm"])
    return [
        BenchRow(f"fit seconds {tag}: convMMD-GMM (K={k}) vs NPMLE-EM", t_gmm.median, t_np.median, "NPMLE-EM",
                 "s", note=f"{note}; NPMLE {npm.n_iter_} EM iterations; {stat_note(t_gmm, t_np, 's')}"),
        BenchRow(f"fit seconds {tag}: convMMD-GMM (K={k}) vs XD", t_gmm.median, t_xd.median, "XD (EM)", "s",
                 note=f"{note}; XD {xd.n_iter_} iterations; {stat_note(t_gmm, t_xd, 's')}"),
        BenchRow(f"fit seconds {tag}: convMMD-NSF vs NPMLE-EM", t_flow.median, t_np.median, "NPMLE-EM", "s",
                 note=f"{note}; {stat_note(t_flow, t_np, 's')}"),
        BenchRow(f"fit seconds {tag}: convMMD-NSF vs XD", t_flow.median, t_xd.median, "XD (EM)", "s",
                 note=f"{note}; {stat_note(t_flow, t_xd, 's')}"),
        BenchRow(f"seconds per step {tag}: convMMD-GMM step vs NPMLE-EM iteration", step_gmm, it_np,
                 "NPMLE-EM iteration", "s",
                 note=f"median over the {t_gmm.n} interleaved fits (fit's own step timer); bandwidth "
                      f"heuristic once per fit: {bw:.2f} s (excluded)"),
        BenchRow(f"seconds per step {tag}: convMMD-NSF step vs XD iteration", step_flow, it_xd,
                 "XD iteration", "s",
                 note=f"median over the {t_flow.n} interleaved fits (fit's own step timer)"),
    ]


def _denoise_rows(sz: BenchSizes) -> list[BenchRow]:
    ds = make_dataset("laplace_mix_1d", sz.n, "gaussian", hetero=True, seed=1)
    est = ConvMMDGMM(6, 32, TrainConfig(epochs=sz.epochs, batch_size=sz.batch, lr=1e-2,
                                        bandwidth_quantiles=Q5)).fit(ds.x, noise=ds.noise)
    m = sz.n_denoise
    x, sub = ds.x[:m], ds.noise.subset(np.arange(m))
    npm = NPMLE().fit(ds.x, noise=ds.noise)
    r = sz.denoise_rounds
    return [
        compare(f"denoising throughput: IS (M={sz.is_samples}) vs GMM closed form",
                lambda: importance_posterior_mean(est, x, sub, n_samples=sz.is_samples),
                lambda: gmm_posterior(est, x, sub), "GMM closed form", unit="obs/s", work=m, rounds=r),
        compare("denoising throughput: GMM closed form vs NPMLE posterior mean",
                lambda: gmm_posterior(est, x, sub),
                lambda: npm.posterior_mean(x, sub), "NPMLE (300 atoms)", unit="obs/s", work=m, rounds=r),
    ]


def bench(ctx: RunContext) -> list[BenchRow]:
    sz = SIZES.get(ctx.scale, SIZES["quick"])
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows: list[BenchRow] = []
        for b in sz.loss_sizes:
            rows.append(_loss_row(b, sz.loss_rounds if b <= 1000 else max(1, sz.loss_rounds - 2)))
            ctx.log(f"[bench] loss b={b}: fast {rows[-1].ours:.2f} ms, dense {rows[-1].anchor:.2f} ms")
        if sz.memory:
            rows.append(_memory_row())
        rows += _fit_rows(ctx, 1, sz)
        rows += _fit_rows(ctx, 2, sz)
        rows += _denoise_rows(sz)
        return rows
    finally:
        torch.set_num_threads(old)
