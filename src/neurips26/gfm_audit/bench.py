"""Performance: the finder vs the authors' per-row loop, report time, torch L-BFGS sweep vs sklearn lbfgs,
kNN vs sklearn brute force, feature extraction, and the rerun (resume) cache.

Every timing goes through ``neurips26.harness.bench.compare`` (interleaved rounds, medians; statistic and
n in each row's note). The finder's timed region starts from a loaded ``ResultTable`` whose key columns
are integer codes (string factorising is loading, done before timing); the anchor is the authors'
algorithm (dict of lists keyed by the tuple, a Python summary per group) on the same table.
``ctx.scale == "smoke"`` shrinks every row to seconds.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from neurips26.gfm_audit.canon import default_aliases
from neurips26.gfm_audit.finder import ResultTable, find_disagreements
from neurips26.gfm_audit.harness import (
    C_GRID,
    Protocol,
    Runner,
    digits_task,
    knn_predict,
    multispectral_task,
    sweep,
)
from neurips26.gfm_audit.harness.grid import Cell, run_cells, task_spec
from neurips26.gfm_audit.harness.probes import standardise
from neurips26.gfm_audit.harness.zoo import harness_models
from neurips26.gfm_audit.report import audit, write_report
from neurips26.gfm_audit.schema import ResultRecord
from neurips26.harness import BenchRow, RunContext
from neurips26.harness.bench import compare

SCALING_MAX = 15.0  # 1e6-row time <= 15x the 1e5-row time (near-linear)
REPORT_MAX_S = 5.0  # report at 1e5 rows under 5 s
FINDER_MIN_SPEEDUP = 10.0  # finder >= 10x the authors' loop at 1e6 rows
PROBE_MAX_RATIO = 1.0  # torch sweep time / sklearn sweep time <= 1.0 at the same accuracy


@dataclass(frozen=True)
class Sizes:
    finder_rows: tuple = (10_000, 100_000, 1_000_000)
    finder_rounds: tuple = (5, 3, 3)
    report_rows: int = 100_000
    probe_n: int = 1000
    probe_d: int = 128
    probe_grid: int = 40
    probe_rounds: int = 3
    knn_train: int = 5000
    knn_query: int = 1000
    knn_d: int = 128
    extract_n: int = 1000
    rerun_n: int = 600


SIZES = {
    "quick": Sizes(),
    "full": Sizes(),
    "smoke": Sizes(
        finder_rows=(1000, 10_000),
        finder_rounds=(1, 1),
        report_rows=2000,
        probe_n=200,
        probe_d=16,
        probe_grid=5,
        probe_rounds=1,
        knn_train=500,
        knn_query=100,
        knn_d=16,
        extract_n=64,
        rerun_n=120,
    ),
}


def synthetic_table(n: int, seed: int = 0) -> ResultTable:
    """``n`` synthetic result rows as a loaded table (codes built here, outside any timed region)."""
    rng = np.random.default_rng(seed)
    n_models, n_bench, n_papers = max(10, n // 500), max(5, n // 3000), max(20, n // 200)
    cols = {
        "model": np.char.add("m", rng.integers(0, n_models, n).astype(str)),
        "benchmark": np.char.add("b", rng.integers(0, n_bench, n).astype(str)),
        "metric": rng.choice(["accuracy", "f1", "miou", "kappa", "map"], n),
        "eval": rng.choice(["linear", "finetune", "knn", "other"], n),
        "regime": rng.choice(["full", "full", "full", "10%"], n),
        "paper": np.char.add("p", rng.integers(0, n_papers, n).astype(str)),
    }
    return ResultTable.from_columns(cols, np.round(rng.uniform(0, 100, n), 2), rng.random(n) < 0.001)


def _records(n: int, seed: int = 0) -> list[ResultRecord]:
    rng = np.random.default_rng(seed)
    m = rng.integers(0, max(10, n // 500), n)
    b = rng.integers(0, max(5, n // 3000), n)
    p = rng.integers(0, max(20, n // 200), n)
    v = np.round(rng.uniform(0, 100, n), 2)
    ev = rng.choice(["linear probe", "fine-tune", "kNN"], n)
    return [
        ResultRecord.model_construct(
            paper_id=f"p{p[i]}",
            model_name_raw=f"m{m[i]}",
            model_name=f"m{m[i]}",
            benchmark_name_raw=f"b{b[i]}",
            benchmark_name=f"b{b[i]}",
            metric_name="accuracy",
            metric_value=float(v[i]),
            metric_scale="percent",
            higher_is_better=True,
            evaluation_strategy=str(ev[i]),
            train_regime="full",
            num_training_samples=None,
            split=None,
            provenance="unknown",
            copied_from=None,
            n_seeds=None,
            std=None,
            ci_low=None,
            ci_high=None,
            harness=None,
            table_ref=f"T{i}",
            synthetic=True,
            note=None,
        )
        for i in range(n)
    ]


def _finder_rows(s: Sizes) -> list[BenchRow]:
    rows, medians = [], {}
    for n, rounds in zip(s.finder_rows, s.finder_rounds):
        t = synthetic_table(n)
        fast = find_disagreements(t)
        ref = find_disagreements(t, method="reference")
        same = [(g.key, g.spread) for g in fast] == [(g.key, g.spread) for g in ref]
        row = compare(
            f"finder strict groups, {n:.0e} rows",
            lambda: find_disagreements(t),
            lambda: find_disagreements(t, method="reference"),
            anchor_name="authors' per-row loop",
            unit="s",
            rounds=rounds,
            warmup=0 if n >= 1_000_000 else 1,
            note=f"{len(fast)} groups, identical to the loop: {same}",
        )
        if n >= 1_000_000:
            met = row.anchor is not None and row.anchor >= FINDER_MIN_SPEEDUP * row.ours
            row = dataclasses.replace(
                row,
                note=f"{row.note}; target >= {FINDER_MIN_SPEEDUP:g}x at 1e6 rows ({'met' if met else 'missed'})",
            )
        medians[n] = row.ours
        rows.append(row)
    ns = sorted(medians)
    if len(ns) >= 2:
        a, b = ns[-2], ns[-1]
        ratio = medians[b] / medians[a]
        rows.append(
            BenchRow(
                f"finder scaling {b:.0e} / {a:.0e} rows",
                ratio,
                None,
                "linear scaling",
                "x",
                note=f"time ratio for {b // a}x rows; target <= {SCALING_MAX:g} "
                f"({'met' if ratio <= SCALING_MAX else 'missed'}); no anchor: a property of ours",
            )
        )
    return rows


def _report_row(s: Sizes) -> BenchRow:
    recs = _records(s.report_rows)
    al = default_aliases()
    out = Path(tempfile.mkdtemp(prefix="gfm_audit_bench_"))

    def go():
        write_report(audit([], recs, al), out, plots=False)

    row = compare(
        f"report (audit + files), {s.report_rows:.0e} rows",
        go,
        None,
        anchor_name="none",
        unit="s",
        rounds=3,
        warmup=0,
        missing="no external audit tool; target < 5 s",
    )
    return BenchRow(
        row.name,
        row.ours,
        None,
        row.anchor_name,
        row.unit,
        note=f"{'met' if row.ours < REPORT_MAX_S else 'missed'} the {REPORT_MAX_S:g} s target; {row.note}",
    )


def _probe_features(s: Sizes):
    task = digits_task()
    rng = np.random.default_rng(0)
    x = task.x.reshape(len(task.x), -1)
    proj = rng.standard_normal((x.shape[1], s.probe_d))
    f = np.maximum(x @ proj, 0)  # a random ReLU projection, d features
    tr, va, te = (task.splits[k] for k in ("train", "val", "test"))
    tr = tr[: int(0.8 * s.probe_n)]
    va = va[: int(0.2 * s.probe_n)]
    ftr, fva, fte = standardise(f[tr], f[va], f[te])
    return ftr, task.y[tr], fva, task.y[va], fte, task.y[te]


def _probe_row(s: Sizes) -> BenchRow:
    from sklearn.linear_model import LogisticRegression

    ftr, ytr, fva, yva, fte, yte = _probe_features(s)
    grid = [float(c) for c in np.logspace(-6, 4, s.probe_grid)] if s.probe_grid != 40 else list(C_GRID)
    acc = {}

    def ours():
        probe, info = sweep(ftr, ytr, fva, yva, grid, merge_val=False)
        acc["ours"] = probe.score(fte, yte)

    def sk():
        best, best_c = -1.0, None
        for c in grid:
            m = LogisticRegression(C=c, max_iter=1000).fit(ftr, ytr)
            a = m.score(fva, yva)
            if a >= best:
                best, best_c = a, c
        acc["sklearn"] = LogisticRegression(C=best_c, max_iter=1000).fit(ftr, ytr).score(fte, yte)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = compare(
            f"probe C sweep ({len(grid)} C), {len(ftr)}x{ftr.shape[1]}",
            ours,
            sk,
            anchor_name="sklearn LogisticRegression(lbfgs, max_iter=1000)",
            unit="s",
            rounds=s.probe_rounds,
            warmup=1,  # torch's first L-BFGS call pays ~0.9 s of one-off set-up here
        )
    gap = 100 * abs(acc["ours"] - acc["sklearn"])
    return BenchRow(
        row.name,
        row.ours,
        row.anchor,
        row.anchor_name,
        row.unit,
        note=f"test acc at selected C: ours {100 * acc['ours']:.1f}, sklearn {100 * acc['sklearn']:.1f} "
        f"(gap {gap:.1f} points; same = within 1); time ours / sklearn {row.ours / row.anchor:.2f}, target "
        f"<= {PROBE_MAX_RATIO:g} ({'met' if row.ours <= PROBE_MAX_RATIO * row.anchor and gap <= 1 else 'missed'}); "
        f"torch warm-started float32 <=100 iters; {row.note}",
    )


def _knn_row(s: Sizes) -> BenchRow:
    from sklearn.neighbors import KNeighborsClassifier

    rng = np.random.default_rng(0)
    xtr = rng.standard_normal((s.knn_train, s.knn_d))
    ytr = rng.integers(0, 10, s.knn_train)
    xq = rng.standard_normal((s.knn_query, s.knn_d))
    ref = KNeighborsClassifier(5, algorithm="brute").fit(xtr, ytr)
    agree = float(np.mean(knn_predict(xtr, ytr, xq, 5) == ref.predict(xq)))
    return compare(
        f"kNN k=5 predict, {s.knn_query} queries x {s.knn_train} train, d={s.knn_d}",
        lambda: knn_predict(xtr, ytr, xq, 5),
        lambda: ref.predict(xq),
        anchor_name="sklearn KNeighborsClassifier(brute)",
        unit="ms",
        rounds=5,
        note=f"agreement {agree:.3f} (ties: sklearn by index order, ours by distance sum)",
    )


def _extract_rows(s: Sizes, smoke: bool) -> list[BenchRow]:
    task = multispectral_task(max(s.extract_n, 60), size=8 if smoke else 16)
    models = harness_models(task, ("rcf", "resnet18"), 16 if smoke else 128, 4 if smoke else 32)
    x = Runner.inputs(task, Protocol())
    rows = []
    for name, entry in models.items():
        m = entry.build(task, 0)
        rows.append(
            compare(
                f"feature extraction {name}",
                lambda m=m: m.forward_features(x),
                None,
                anchor_name="none",
                unit="img/s",
                work=float(len(x)),
                rounds=3,
                missing="no shared reference extractor (torchgeo-bench needs Python >= 3.12)",
            )
        )
    return rows


def _rerun_row(s: Sizes, smoke: bool) -> BenchRow:
    """The grid through ``run_cells`` (map_tasks tasks, shards merged by key), then the same grid again."""
    spec = task_spec("multispectral", n=s.rerun_n, size=8)
    models = harness_models(None, ("rcf", "raw_pca"), 16, 4)
    protos = [Protocol("knn"), Protocol("linear", c_grid=(1e-2, 1.0), max_iter=20)]
    path = Path(tempfile.mkdtemp(prefix="gfm_audit_rerun_")) / "rows.jsonl"
    cells = [Cell(spec, e, p, seed) for e in models.values() for p in protos for seed in (0, 1)]
    t0 = time.perf_counter()
    first_res = run_cells(cells, path)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = run_cells(cells, path)
    second = time.perf_counter() - t0
    st = again.stats
    hit = st["skipped"] / st["cells"]
    same = again.rows == first_res.rows
    return BenchRow(
        f"rerun of a {len(cells)}-cell grid (resume, run_cells)",
        second,
        first,
        "first run of the same grid",
        "s",
        note=f"cache hit rate {100 * hit:.0f}% ({st['skipped']}/{st['cells']} rows skipped, "
        f"{st['computed']} computed; rows identical: {same}); single timing each (a resume is stateful)",
    )


def bench(ctx: RunContext) -> list[BenchRow]:
    """Every row single-threaded: torch and BLAS (sklearn's OpenBLAS) alike, so ratios compare like with
    like (two BLAS / OpenMP threads on a loaded 2-core machine made one sklearn sweep 40x slower here)."""
    from neurips26.gfm_audit.harness.grid import thread_limit

    with thread_limit(1):
        return _bench(ctx)


def _bench(ctx: RunContext) -> list[BenchRow]:
    torch.set_num_threads(1)
    smoke = ctx.scale == "smoke"
    s = SIZES.get(ctx.scale, SIZES["quick"])
    rows = _finder_rows(s)
    rows.append(_report_row(s))
    rows.append(_probe_row(s))
    rows.append(_knn_row(s))
    rows += _extract_rows(s, smoke)
    rows.append(_rerun_row(s, smoke))
    return rows
