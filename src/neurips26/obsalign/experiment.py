"""Reproduction of ObsAlign on ObsBench: the phenomenon, negative transfer, omega's AUROC, mean accuracy.

Per seed: generate ObsBench (quick layout), train every method of the config in the same round loop,
measure per-source test accuracy (personalised and global models), unimodal accuracy ``acc(m, c)``,
negative transfer ``NT(m, c) = acc_NoAlign - acc`` per cell and per relation, and the AUROC of the
final omega for the ground-truth ``alignable(r)``. Verdicts rest on paired differences over seeds
(``harness.paper.paired``/``judge``: inside 2 s.e. is ``inconclusive``). As the issue says, if the
benchmark does not show the phenomenon, the other claims are ``inconclusive``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping

import numpy as np
import torch

from neurips26.harness import Claim
from neurips26.harness.paper import FAILS, HOLDS, INCONCLUSIVE, fmt_se, judge, mean_se, paired
from neurips26.harness.run import RunContext
from neurips26.harness.validation import check_choice, check_scalar
from neurips26.obsalign.federation import (
    METHODS,
    FedConfig,
    run_centralised,
    run_federation,
    source_accuracy,
    unimodal_accuracy,
)
from neurips26.obsalign.obsbench import (FULL_ETAS, FULL_LABEL_FRACTIONS, MODALITIES, SCARCE_LABEL_FRACTION,
                                         SourceSpec, full_blind, full_sources, make_obsbench, quick_sources)
from neurips26.obsalign.semireal import make_digits_tri, make_healthcare

PHEN_GAIN = 0.02  # AlwaysAlign - NoAlign on the label-scarce modality (audio), >= 2 pp
PHEN_NT_CELL = 0.10  # AlwaysAlign's worst non-alignable cell NT(m, c) >= 10 pp (mean over seeds)
NT_RATIO = 1 / 3  # ObsAlign NT on non-alignable relations <= 1/3 of AlwaysAlign's
KEEP_GAIN = 0.70  # ... while keeping >= 70% of its gain on alignable relations
AUROC_MIN = 0.75  # omega separates alignable relations
NOALIGN_SLACK = 0.005  # refutation check: ObsAlign unimodal mean >= NoAlign - 0.5 pp
K_SE = 2.0
SCARCE = 2  # audio: the label-scarce modality
BASELINES = ("local", "noalign", "alwaysalign", "protoimpute", "fedprox")
CENTRALISED = "centralised"  # pooled-data reference (reported, not a baseline ObsAlign must beat)

VOLATILE_METRICS = ("seconds.*",)


QUICK_LABEL_FRACTION = SCARCE_LABEL_FRACTION  # s2, s3: where the sweep shows the phenomenon (spec: 0.1)
# mid: the quick layout with more labels on s2, s3, where AlwaysAlign's mean NT on non-alignable relations is
# > 0 on the validation seeds 10-14 (+0.026 +- 0.010; at 0.02 it is -0.008 +- 0.016; `nt_nonalign` of
# phenomenon_sweep((PhenSetting(0.02), PhenSetting(0.05)))), so the NT ratio is defined (the phenomenon sweep
# found the audio gain not shown there, 0.0225 +- 0.0184: the gate may still make the claims inconclusive)
MID_LABEL_FRACTION = 0.05


@dataclass
class DataConfig:
    size_scale: float = 1.0  # multiplies every source's n
    unimodal_per_class: int = 60
    n_classes: int = 12
    layout: str = "quick"  # quick: the spec's s0..s4; full: full_sources (random, Dirichlet coverage)
    # the label-scarce sources' label fraction (quick: s2, s3; full: those observing audio) and the
    # noisy-correspondence rate (quick: s1; full: the noisy sources) -- a point of the full grids
    label_fraction: float = QUICK_LABEL_FRACTION
    eta: float = 0.6
    n_sources: int = 12  # full layout only, like alpha
    alpha: float = 0.5  # Dirichlet class coverage

    def __post_init__(self) -> None:
        check_choice(self.layout, "layout", ("quick", "full"))
        check_scalar(self.size_scale, "size_scale", float, min=0, inclusive="neither")
        check_scalar(self.label_fraction, "label_fraction", float, min=0, max=1)
        check_scalar(self.eta, "eta", float, min=0, max=1)


@dataclass(frozen=True)
class ThresholdPoint:
    """One point of ObsAlign's threshold sweep (chosen per seed on validation, never on test)."""

    tau_lo: float = 0.1
    n0: float = 5.0
    tau_hi: float = 0.5
    kappa: float = 1.0
    exponents: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)   # a_B, a_S, a_K, a_U

    def apply(self, fed: FedConfig, method):
        """(FedConfig, Method) with this point's thresholds."""
        return (replace(fed, tau_lo=self.tau_lo, tau_hi=self.tau_hi, kappa=self.kappa),
                replace(method, omega=replace(method.omega, n0=self.n0, exponents=self.exponents)))


def _points(sweep) -> tuple[ThresholdPoint, ...]:
    """Sweep entries as ``ThresholdPoint``s; a pair ``(tau_lo, n0)`` is accepted as shorthand."""
    out = []
    for i, p in enumerate(sweep):
        if isinstance(p, ThresholdPoint):
            out.append(p)
        elif isinstance(p, tuple) and len(p) == 2:
            out.append(ThresholdPoint(float(p[0]), float(p[1])))
        else:
            raise TypeError(f"sweep[{i}] must be a ThresholdPoint or a (tau_lo, n0) pair, got {p!r}")
    return tuple(out)


QUICK_SWEEP = ((0.1, 5.0), (0.05, 5.0), (0.2, 5.0), (0.1, 2.0))
# full: (tau_lo, n0) x tau_hi x kappa x the a_K / a_U exponents, one at a time around the default
FULL_SWEEP = (
    *QUICK_SWEEP, (0.1, 10.0),
    ThresholdPoint(tau_hi=0.3), ThresholdPoint(tau_hi=0.7), ThresholdPoint(kappa=0.5), ThresholdPoint(kappa=2.0),
    ThresholdPoint(exponents=(1.0, 1.0, 2.0, 1.0)), ThresholdPoint(exponents=(1.0, 1.0, 1.0, 0.5)),
)
SEMIREAL = ("digits_tri", "breast_cancer", "wine")


@dataclass
class ExperimentConfig:
    data: DataConfig = field(default_factory=DataConfig)
    fed: FedConfig = field(default_factory=FedConfig)
    methods: tuple[str, ...] = ("local", "noalign", "alwaysalign", "obsalign")
    seeds: tuple[int, ...] = (0, 1, 2)
    threads: int = 1
    # ObsAlign's thresholds chosen per seed on the validation split (mean per-source accuracy);
    # the first entry is the spec's default and wins ties. Empty: the default only.
    sweep: tuple = QUICK_SWEEP
    # further benchmarks run with the same methods (results under metrics["extra"]); the claims read
    # the primary one (data, fed above):
    grid: tuple[tuple[float, float], ...] = ()   # more (eta, label_fraction) points of the ObsBench layout
    regimes: tuple[str, ...] = ()                # more regimes ("vlm") at the primary data point
    semireal: tuple[str, ...] = ()               # among SEMIREAL

    def __post_init__(self) -> None:
        self.sweep = _points(self.sweep)
        for r in self.regimes:
            check_choice(r, "regimes", ("encoder", "vlm"))
        for b in self.semireal:
            check_choice(b, "semireal", SEMIREAL)
        for i, pt in enumerate(self.grid):
            if len(pt) != 2:
                raise ValueError(f"grid[{i}] must be an (eta, label_fraction) pair, got {pt!r}")


CONFIGS = {
    "smoke": ExperimentConfig(
        DataConfig(size_scale=0.2, unimodal_per_class=8), FedConfig(rounds=3, epochs=1, warmup=1), seeds=(0,),
        sweep=((0.1, 5.0), (0.2, 2.0)),
    ),
    "quick": ExperimentConfig(seeds=(0, 1, 2, 3, 4)),   # 5 seeds: the s.e. of the 3-seed run was too wide
    "mid": ExperimentConfig(DataConfig(label_fraction=MID_LABEL_FRACTION), seeds=(0, 1, 2, 3, 4)),
    "full": ExperimentConfig(
        DataConfig(n_classes=24, layout="full", label_fraction=0.1, eta=0.3),
        fed=FedConfig(rounds=50), methods=(*METHODS, CENTRALISED), seeds=tuple(range(10)), sweep=FULL_SWEEP,
        grid=tuple((e, lf) for e in FULL_ETAS for lf in FULL_LABEL_FRACTIONS if (e, lf) != (0.3, 0.1)),
        regimes=("vlm",), semireal=SEMIREAL,
    ),
}


def _sources(data: DataConfig, seed: int) -> list[SourceSpec]:
    if data.layout == "full":
        return full_sources(seed, data.n_sources, data.n_classes, data.eta, data.label_fraction, data.alpha,
                            n=max(int(300 * data.size_scale), 20))
    return quick_sources(data.label_fraction, data.eta, data.size_scale)


def _obsbench(data: DataConfig, fed: FedConfig, seed: int):
    return make_obsbench(seed, _sources(data, seed), data.n_classes,
                         blind=full_blind(data.n_classes) if data.layout == "full" else None,
                         unimodal_per_class=data.unimodal_per_class, regime=fed.regime, d_vlm=fed.d)


def _semireal(name: str, seed: int, fed: FedConfig):
    if fed.regime != "encoder":
        raise ValueError("the semi-real benchmarks run in the encoder regime")
    return make_digits_tri(seed) if name == "digits_tri" else make_healthcare(seed, name)


def run(cfg: ExperimentConfig, ctx: RunContext) -> dict[str, Any]:
    torch.set_num_threads(cfg.threads)
    out = evaluate_methods(_obsbench(cfg.data, cfg.fed, ctx.seed), cfg, ctx)
    _plot(ctx, out["methods"], cfg.methods)
    if "omega" in out and 0 < out["n_alignable"] < out["n_relations"]:
        _plot_roc(ctx, np.ravel(out["alignable"]), np.ravel(out["omega"]), out["omega_auroc"])
    extra = []
    for eta, lf in cfg.grid:
        data = replace(cfg.data, eta=eta, label_fraction=lf)
        extra.append({"bench": "obsbench", "regime": cfg.fed.regime, "eta": eta, "label_fraction": lf,
                      **evaluate_methods(_obsbench(data, cfg.fed, ctx.seed), cfg, ctx)})
    for regime in cfg.regimes:
        fed = replace(cfg.fed, regime=regime)
        c2 = replace(cfg, fed=fed)
        extra.append({"bench": "obsbench", "regime": regime, "eta": cfg.data.eta,
                      "label_fraction": cfg.data.label_fraction,
                      **evaluate_methods(_obsbench(cfg.data, fed, ctx.seed), c2, ctx)})
    for name in cfg.semireal:
        b = _semireal(name, ctx.seed, cfg.fed)
        names = tuple(f"m{m}" for m in range(b.n_modalities))   # feature groups, not image/text/audio
        extra.append({"bench": name, "regime": "encoder", **evaluate_methods(b, cfg, ctx, names)})
    if extra:
        out["extra"] = extra
    return out


def evaluate_methods(bench, cfg: ExperimentConfig, ctx: RunContext,
                     names: tuple[str, ...] = MODALITIES) -> dict[str, Any]:
    """Every method of ``cfg`` on ``bench``: accuracies, NT per cell/relation, omega and its AUROC."""
    K, C = bench.n_modalities, bench.n_classes
    methods: dict[str, Any] = {}
    acc: dict[str, np.ndarray] = {}
    seconds: dict[str, float] = {}
    omega = None
    sweep: list[dict[str, Any]] = []
    for name in ctx.track(cfg.methods, desc="methods"):
        t0 = time.perf_counter()
        if name == "obsalign" and cfg.sweep:
            res, sweep = _tuned_obsalign(bench, cfg, ctx.seed)
        elif name == CENTRALISED:
            res = run_centralised(bench, cfg.fed, seed=ctx.seed)
        else:
            res = run_federation(bench, name, cfg.fed, seed=ctx.seed)
        seconds[name] = time.perf_counter() - t0
        acc[name] = unimodal_accuracy(bench, res.models, res.guidance)
        src = source_accuracy(bench, res.models, res.guidance)
        gsrc = source_accuracy(bench, [res.global_model] * len(bench.sources), res.guidance)
        methods[name] = {
            "mean_acc": float(np.mean(src)),
            "worst_acc": float(np.min(src)),
            "global_mean_acc": float(np.mean(gsrc)),
            "unimodal_mean": float(np.nanmean(acc[name])),
            "unimodal": {names[m]: float(np.nanmean(acc[name][m])) for m in range(K)},
            "round_acc": res.round_acc,
        }
        if name == "obsalign":
            omega = res.omega
        ctx.log(f"seed {ctx.seed} {name}: mean acc {methods[name]['mean_acc']:.3f} ({seconds[name]:.1f} s)")
    align = bench.alignable
    rel_align = _relations(align)  # (pairs, C)
    cell_nonalign = np.array(
        [[any(not align[m, m2, c] for m2 in range(K) if m2 != m) for c in range(C)] for m in range(K)]
    )
    mean_or_none = lambda a: float(np.nanmean(a)) if np.isfinite(a).any() else None  # noqa: E731
    if "noalign" in acc:
        for name in cfg.methods:
            nt = acc["noalign"] - acc[name]  # NT(m, c)
            nt_rel = _relations(nt, mean_of_sides=True)
            methods[name]["nt_cells"] = np.nan_to_num(nt).tolist()
            methods[name]["nt_nonalign"] = mean_or_none(nt_rel[~rel_align])
            methods[name]["gain_align"] = mean_or_none(-nt_rel[rel_align])
            methods[name]["frac_nt_gt2pp_nonalign"] = mean_or_none((nt_rel[~rel_align] > 0.02).astype(float))
    out: dict[str, Any] = {
        "sweep": sweep,
        "methods": methods,
        "seconds": seconds,
        "alignable": rel_align.astype(int).tolist(),
        "cell_nonalign": cell_nonalign.astype(int).tolist(),
        "n_alignable": int(rel_align.sum()),
        "n_relations": int(rel_align.size),
    }
    if omega is not None:
        from sklearn.metrics import roc_auc_score

        scores = _relations(omega)
        out["omega"] = scores.tolist()
        y = rel_align.ravel()
        out["omega_auroc"] = float(roc_auc_score(y, scores.ravel())) if 0 < y.sum() < y.size else None
    return out


def _relations(a: np.ndarray, mean_of_sides: bool = False) -> np.ndarray:
    """Per unordered relation ``(m < m', c)``, rows in the order (0, 1), (0, 2), ..., (pairs, C): from a
    (K, K, C) array its ``a[m, m', c]``; with ``mean_of_sides`` from a (K, C) array of cells
    ``NT(r) = 0.5 [NT(m, c) + NT(m', c)]``."""
    K = a.shape[0]
    iu = [(m, m2) for m in range(K) for m2 in range(m + 1, K)]
    return np.array([0.5 * (a[m] + a[m2]) if mean_of_sides else a[m, m2] for m, m2 in iu])


def _tuned_obsalign(bench, cfg: ExperimentConfig, seed: int):
    """Run ObsAlign at every point of the sweep; keep the best on validation (never test)."""
    best, best_val, rows, chosen = None, -1.0, [], 0
    for pt in _points(cfg.sweep):
        fed, method = pt.apply(cfg.fed, METHODS["obsalign"])
        res = run_federation(bench, method, fed, seed=seed)
        val = float(np.mean(source_accuracy(bench, res.models, res.guidance, split="val")))
        rows.append({**asdict(pt), "val_mean_acc": val})
        if val > best_val:
            best, best_val, chosen = res, val, len(rows) - 1
    for i, r in enumerate(rows):
        r["chosen"] = int(i == chosen)
    return best, rows


# ---- the phenomenon sweep (validation only) -------------------------------------------------------

SWEEP_SEEDS = (10, 11, 12, 13, 14)   # disjoint from the reproduction's seeds; validation split only


@dataclass(frozen=True)
class PhenSetting:
    """One point of the phenomenon sweep: the generator's knobs on the quick layout, and the rounds."""

    label_fraction: float = 0.1   # of the label-scarce sources s2, s3
    eta: float = 0.6              # of the noisy source s1
    size_scale: float = 1.0
    rounds: int = 12


PHEN_SWEEP = (
    PhenSetting(0.02), PhenSetting(0.03), PhenSetting(0.05), PhenSetting(0.1),
    PhenSetting(0.02, rounds=20), PhenSetting(0.05, rounds=20),
    PhenSetting(0.02, eta=0.3), PhenSetting(0.02, eta=0.9),
    PhenSetting(0.05, size_scale=2.0), PhenSetting(0.1, size_scale=2.0),
)


def phenomenon_point(st: PhenSetting, seed: int, unimodal_per_class: int = 60) -> dict[str, float]:
    """AlwaysAlign - NoAlign on the scarce modality and AlwaysAlign's worst non-alignable cell NT, on the
    generator's unimodal *validation* sets (never the test sets)."""
    specs = quick_sources(st.label_fraction, st.eta, st.size_scale)
    bench = make_obsbench(seed, specs, unimodal_per_class=unimodal_per_class)
    cfg = replace(FedConfig(), rounds=st.rounds)
    acc = {}
    for name in ("noalign", "alwaysalign"):
        res = run_federation(bench, name, cfg, seed=seed, eval_every_round=False)
        acc[name] = unimodal_accuracy(bench, res.models, res.guidance, split="val")
    K, C, al = bench.n_modalities, bench.n_classes, bench.alignable
    nonal = np.array([[any(not al[m, m2, c] for m2 in range(K) if m2 != m) for c in range(C)] for m in range(K)])
    nt_raw = acc["noalign"] - acc["alwaysalign"]
    nt = np.nan_to_num(nt_raw)
    return {"gain": float(np.nanmean(acc["alwaysalign"][SCARCE]) - np.nanmean(acc["noalign"][SCARCE])),
            "worst_nt": float(nt[nonal].max()),
            # AlwaysAlign's mean NT on non-alignable relations (the negative_transfer claim's denominator)
            "nt_nonalign": float(np.nanmean(_relations(nt_raw, mean_of_sides=True)[~_relations(al)])),
            "noalign_scarce": float(np.nanmean(acc["noalign"][SCARCE])),
            "noalign_mean": float(np.nanmean(acc["noalign"])),
            "alwaysalign_mean": float(np.nanmean(acc["alwaysalign"]))}


def phenomenon_sweep(settings=PHEN_SWEEP, seeds=SWEEP_SEEDS, threads: int = 1) -> list[dict[str, Any]]:
    """The recorded sweep behind the quick setting: each setting over ``seeds``, with the verdict rule of
    the phenomenon claim (gain >= 2 pp by 2 s.e. and mean worst cell NT >= 10 pp)."""
    torch.set_num_threads(threads)
    rows = []
    for st in settings:
        pts = [phenomenon_point(st, s) for s in seeds]
        gain, se, n = mean_se([p["gain"] for p in pts])
        worst = float(np.mean([p["worst_nt"] for p in pts]))
        shown = judge(gain, se, n, PHEN_GAIN, K_SE) == HOLDS and worst >= PHEN_NT_CELL
        rows.append({"setting": asdict(st), "seeds": list(seeds), "gain": gain, "gain_se": se,
                     "worst_nt": worst, "shown": bool(shown),
                     **{k: float(np.mean([p[k] for p in pts]))
                        for k in ("noalign_scarce", "noalign_mean", "alwaysalign_mean")},
                     "nt_nonalign": float(np.mean([p["nt_nonalign"] for p in pts])),
                     "nt_nonalign_se": mean_se([p["nt_nonalign"] for p in pts])[1],
                     "per_seed_gain": [p["gain"] for p in pts]})
    return rows


def sweep_table(rows: list[dict[str, Any]]) -> str:
    """The sweep as a markdown table (for the README)."""
    out = ["| label fraction (s2, s3) | eta (s1) | size x | rounds | AlwaysAlign - NoAlign, audio (val) | "
           "worst non-alignable cell NT | NoAlign audio | shown |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        st = r["setting"]
        out.append(f"| {st['label_fraction']:g} | {st['eta']:g} | {st['size_scale']:g} | {st['rounds']} | "
                   f"{fmt_se(r['gain'], r['gain_se'], len(r['seeds']))} | {r['worst_nt']:.3f} | "
                   f"{r['noalign_scarce']:.3f} | {'yes' if r['shown'] else 'no'} |")
    return "\n".join(out)


# ---- claim analysis ------------------------------------------------------------------------------


def _runs(m: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return getattr(m, "per_seed", None) or [m]


def phenomenon(m: Mapping[str, Any]) -> tuple[str, str]:
    mean, se, n = paired(
        m,
        f"methods.alwaysalign.unimodal.{MODALITIES[SCARCE]}",
        f"methods.noalign.unimodal.{MODALITIES[SCARCE]}",
    )
    v_gain = judge(mean, se, n, PHEN_GAIN, K_SE)
    cells = np.mean([np.array(r["methods"]["alwaysalign"]["nt_cells"]) for r in _runs(m)], axis=0)
    nonalign = np.mean([np.array(r["cell_nonalign"]) for r in _runs(m)], axis=0) > 0.5
    worst = float(cells[nonalign].max()) if nonalign.any() else float("nan")
    cell_ok = worst >= PHEN_NT_CELL
    if v_gain == FAILS or not cell_ok:
        v = FAILS
    else:
        v = v_gain
    return v, (
        f"AlwaysAlign - NoAlign on audio = {fmt_se(mean, se, n)} (needs >= {PHEN_GAIN:g} by {K_SE:g} s.e.); "
        f"worst non-alignable cell NT = {worst:.3f} (needs >= {PHEN_NT_CELL:g})"
    )


def _gated(check):
    def wrapped(m: Mapping[str, Any]) -> tuple[str, str]:
        v, text = check(m)
        pv, _ = phenomenon(m)
        if pv != HOLDS and v != INCONCLUSIVE:
            return INCONCLUSIVE, f"benchmark did not show the phenomenon ({pv}); measured: {text}"
        return v, text

    return wrapped


def negative_transfer(m: Mapping[str, Any]) -> tuple[str, str]:
    runs = _runs(m)
    d_nt = [
        r["methods"]["obsalign"]["nt_nonalign"] - NT_RATIO * r["methods"]["alwaysalign"]["nt_nonalign"]
        for r in runs
    ]
    d_gain = [
        r["methods"]["obsalign"]["gain_align"] - KEEP_GAIN * r["methods"]["alwaysalign"]["gain_align"]
        for r in runs
    ]
    v1 = judge(*mean_se(d_nt), 0.0, K_SE, better="lower")
    v2 = judge(*mean_se(d_gain), 0.0, K_SE, better="higher")
    aa_gain = float(np.mean([r["methods"]["alwaysalign"]["gain_align"] for r in runs]))
    if aa_gain <= 0:
        v2 = INCONCLUSIVE
    aa_nt_mean = float(np.mean([r["methods"]["alwaysalign"]["nt_nonalign"] for r in runs]))
    no_harm = aa_nt_mean <= 0   # AlwaysAlign shows no mean NT to reduce: the ratio is undefined
    if no_harm:
        v1 = INCONCLUSIVE
    v = FAILS if FAILS in (v1, v2) else (HOLDS if v1 == v2 == HOLDS else INCONCLUSIVE)
    obs_nt = mean_se([r["methods"]["obsalign"]["nt_nonalign"] for r in runs])
    aa_nt = mean_se([r["methods"]["alwaysalign"]["nt_nonalign"] for r in runs])
    obs_g = mean_se([r["methods"]["obsalign"]["gain_align"] for r in runs])
    return v, (
        f"NT non-alignable: ObsAlign {fmt_se(*obs_nt)} vs AlwaysAlign {fmt_se(*aa_nt)} "
        f"(needs <= {NT_RATIO:.2f}x; undefined if AlwaysAlign's <= 0{': it is' if no_harm else ''}); "
        f"gain alignable: ObsAlign {fmt_se(*obs_g)} vs AlwaysAlign "
        f"{aa_gain:.3g} (needs >= {KEEP_GAIN:g}x; undefined if AlwaysAlign's <= 0)"
    )


def omega_auroc(m: Mapping[str, Any]) -> tuple[str, str]:
    from sklearn.metrics import roc_auc_score

    runs = _runs(m)
    vals = [r["omega_auroc"] for r in runs if r.get("omega_auroc") is not None]
    y = np.concatenate([np.ravel(r["alignable"]) for r in runs])
    s = np.concatenate([np.ravel(r["omega"]) for r in runs])
    pooled_auc = float(roc_auc_score(y, s)) if 0 < y.sum() < y.size else float("nan")
    mean, se, n = mean_se(vals)
    return judge(mean, se, n, AUROC_MIN, K_SE), (
        f"AUROC per seed {fmt_se(mean, se, n)}, pooled {pooled_auc:.3f} "
        f"(needs >= {AUROC_MIN:g} by {K_SE:g} s.e.)"
    )


def best_baseline(m: Mapping[str, Any]) -> tuple[str, str]:
    runs = _runs(m)
    present = [b for b in BASELINES if b in runs[0]["methods"]]
    best = max(present, key=lambda b: np.mean([r["methods"][b]["mean_acc"] for r in runs]))
    mean, se, n = paired(m, "methods.obsalign.mean_acc", f"methods.{best}.mean_acc")
    return judge(
        mean, se, n, 0.0, K_SE
    ), f"ObsAlign - {best} (best baseline) mean acc = {fmt_se(mean, se, n)}"


def not_below_noalign(m: Mapping[str, Any]) -> tuple[str, str]:
    mean, se, n = paired(m, "methods.obsalign.unimodal_mean", "methods.noalign.unimodal_mean")
    return judge(mean, se, n, -NOALIGN_SLACK, K_SE), (
        f"ObsAlign - NoAlign unimodal mean = {fmt_se(mean, se, n)} (needs >= -{NOALIGN_SLACK:g})"
    )


# ---- plots ---------------------------------------------------------------------------------------


def _plot_roc(ctx: RunContext, y: np.ndarray, score: np.ndarray, auc: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(y, score)
    fig, ax = plt.subplots(figsize=(3.5, 3.5))
    ax.plot(fpr, tpr, label=f"omega (AUROC {auc:.2f})")
    ax.plot([0, 1], [0, 1], "k:", lw=0.8)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.legend(fontsize=7)
    ctx.save_plot(fig, f"omega_roc_seed{ctx.seed}")


def _plot(ctx: RunContext, methods: Mapping[str, Any], names: tuple[str, ...]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name in names:
        ax.plot(range(1, len(methods[name]["round_acc"]) + 1), methods[name]["round_acc"], label=name)
    ax.set_xlabel("round")
    ax.set_ylabel("mean per-source accuracy")
    ax.legend(fontsize=7)
    ctx.save_plot(fig, f"accuracy_per_round_seed{ctx.seed}")
    have = [n for n in names if "nt_cells" in methods[n] and n != "noalign"]
    if have:
        fig, axes = plt.subplots(1, len(have), figsize=(3.2 * len(have), 2.2), squeeze=False)
        for ax, name in zip(axes[0], have):
            im = ax.imshow(np.array(methods[name]["nt_cells"]), cmap="coolwarm", vmin=-0.3, vmax=0.3)
            ax.set_title(f"NT {name}", fontsize=8)
            ax.set_yticks(range(len(MODALITIES)), MODALITIES, fontsize=7)
            ax.set_xlabel("class", fontsize=7)
        fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8)
        ctx.save_plot(fig, f"negative_transfer_seed{ctx.seed}")


CLAIMS = [
    Claim(
        "phenomenon",
        f"The benchmark shows the trade-off: AlwaysAlign beats NoAlign on the label-scarce modality "
        f"by >= {PHEN_GAIN * 100:g} pp and has NT >= {PHEN_NT_CELL * 100:g} pp on a non-alignable cell",
        "abstract: 'alignment is not free' (no numbers)",
        phenomenon,
    ),
    Claim(
        "negative_transfer",
        f"ObsAlign's mean NT on non-alignable relations <= {NT_RATIO:.2f}x AlwaysAlign's "
        f"while keeping >= {KEEP_GAIN:.0%} of its gain on alignable ones",
        "abstract: 'sharply reduced negative transfer' (no numbers)",
        _gated(negative_transfer),
    ),
    Claim(
        "omega_auroc",
        f"omega separates alignable relations (AUROC >= {AUROC_MIN:g})",
        "abstract: relation-level observability (no numbers)",
        _gated(omega_auroc),
    ),
    Claim(
        "best_overall",
        "ObsAlign's mean per-source accuracy >= the best baseline (paired over seeds)",
        "abstract: 'best overall performance' (no numbers)",
        _gated(best_baseline),
    ),
    Claim(
        "not_below_noalign",
        f"Gating does not remove the gains with the harm: ObsAlign unimodal mean >= NoAlign "
        f"- {NOALIGN_SLACK * 100:g} pp",
        "spec refutation condition",
        not_below_noalign,
    ),
]
