"""The reproduction (spec "Experiments"): X1 isomorphism limit, X2 prediction (graph level), X3 node
level, X4 improvement over the baselines, X5 architecture ranking.

One run is one seed (the harness runs the config's ``seeds`` and hands the claims every seed):

- X1: gamma on the 1-WL-equivalent pairs and the 10 CSL classes, for GIN/GCN/SAGE with ``const`` and
  ``rwse`` features and f_WL (float64).
- X2: the n = 6 atlas codebooks; per architecture and objective (untrained, CE, CE + augmentation,
  contrastive + Lipschitz control): gamma, L1_hat, gamma / L1_hat, r*, the exhaustive r_emp
  (restricted to identifiable samples, censored at r_max), alignment probability at several p.
- X3: karate (club labels, 4 labelled nodes per class drawn with the seed), GCN: certified accuracy vs
  radius for the margin-Lipschitz and smoothing certificates and the attack upper curve.
- X4 reads X2/X3: ours vs CE. X5: Spearman over model variants of mean gamma / L1_hat vs mean r_emp.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy import stats

from neurips26.gnn_margin.embeddings import make_embedding
from neurips26.gnn_margin.families import (
    codebook,
    csl_graphs,
    r_comb,
    real_graph,
    sbm_graph,
    wl_equivalent_pairs,
)
from neurips26.gnn_margin.margins import (
    ExhaustivePerturbations,
    NoisySamples,
    alignment_lower_bound,
    embedding_margin,
    radii,
    spearman,
)
from neurips26.gnn_margin.node_robustness import (
    NodeClassifier,
    empirical_node_radius,
    lipschitz_certificate,
    smoothing_certify,
)
from neurips26.gnn_margin.plots import plot_x2, plot_x3
from neurips26.gnn_margin.training import TrainConfig, train_graph_embedding, train_node_classifier
from neurips26.gnn_margin.wl import WLHistogram
from neurips26.harness.paper import FAILS, HOLDS, INCONCLUSIVE, Claim, fmt_se, judge, mean_se, seed_values

DT = torch.float64
ZERO_TOL = 1e-6  # "gamma = 0" (spec X1, float64)
SPEARMAN_MIN = 0.3  # Spearman(gamma / L1_hat, r_emp) must exceed this, pooled ...
P_MAX = 0.05  # ... with p below this
ACC_SLACK = 0.05  # clean accuracy within 5 points of CE
K_SE = 2.0  # a difference counts when beyond 2 standard errors over seeds
OURS_GRAPH, BASE = "contrastive", "ce"
OURS_NODE = "margin"


# ---------------------------------------------------------------------------- configs
@dataclass(frozen=True)
class X1Config:
    archs: tuple = ("gin", "gcn", "sage")
    features: tuple = ("const", "rwse")
    rwse_steps: tuple = (8, 16)
    width: int = 32
    pairs: bool = True
    csl: bool = True
    n_random_pairs: int = 2


@dataclass(frozen=True)
class X2Config:
    n: int = 6
    d_mins: tuple = (3, 4)
    archs: tuple = (("gin", "const"), ("gcn", "const"), ("sage", "degree_onehot"))
    objectives: tuple = ("untrained", "ce", "ce_aug", "contrastive")
    r_max: int = 2
    ps: tuple = (0.02, 0.05, 0.1)
    n_samples: int = 200
    width: int = 32
    steps: int = 100
    p_train: float = 0.05
    lipschitz: str = "spectral"
    wl_iterations: int = 3


@dataclass(frozen=True)
class X3Config:
    graph: str = "karate"
    extra_graphs: tuple = ()  # e.g. ("sbm",): 3 x 40 SBM, exhaustive r <= r_exhaustive only, no claim
    arch: str = "gcn"
    objectives: tuple = ("untrained", "ce", "ce_aug", "margin")
    labelled_per_class: int = 4
    epochs: int = 200
    width: int = 32
    lipschitz: str = "spectral"
    mu: float = 1.0
    cert_r_max: int = 3
    r_exhaustive: int = 1
    greedy_budget: int = 3
    beta: float = 0.1
    n0: int = 100
    n: int = 1000
    alpha: float = 0.01


@dataclass(frozen=True)
class Config:
    x1: X1Config = field(default_factory=X1Config)
    x2: X2Config = field(default_factory=X2Config)
    x3: X3Config = field(default_factory=X3Config)
    seeds: tuple = (0, 1, 2)


CONFIGS = {
    "smoke": Config(
        x1=X1Config(archs=("gin",), rwse_steps=(8,), width=8, csl=True, n_random_pairs=0),
        x2=X2Config(
            d_mins=(5,),
            archs=(("gin", "const"),),
            objectives=("untrained", "ce", "contrastive"),
            r_max=1,
            ps=(0.05,),
            n_samples=10,
            width=8,
            steps=3,
            wl_iterations=2,
        ),
        x3=X3Config(
            objectives=("ce", "margin"), epochs=3, width=8, cert_r_max=1, greedy_budget=1, n0=5, n=20
        ),
        seeds=(0,),
    ),
    "quick": Config(),
    "full": Config(
        x1=X1Config(
            archs=("gin", "gcn", "sage"),
            features=("const", "rwse", "degree_onehot"),
            width=64,
            n_random_pairs=6,
        ),
        x2=X2Config(n=7, d_mins=(3, 4, 5), r_max=3, width=64, steps=500),
        x3=X3Config(n=10000, epochs=200, width=64, greedy_budget=5, extra_graphs=("sbm",)),
        seeds=tuple(range(10)),
    ),
}

VOLATILE_METRICS: tuple = ()


# ---------------------------------------------------------------------------- run (orchestration)
def run(cfg: Config, ctx) -> dict:
    seed = ctx.seed
    metrics = {
        "x1": run_x1(cfg.x1, seed, ctx),
        "x2": run_x2(cfg.x2, seed, ctx),
        "x3": run_x3(cfg.x3, seed, ctx),
    }
    metrics["x4"] = analyse_x4(metrics)
    metrics["x5"] = analyse_x5(metrics["x2"])
    plot_x2(metrics["x2"], ctx)
    plot_x3(metrics["x3"], ctx)
    return metrics


def _seed_model(seed: int, *parts) -> None:
    """Seed torch for one model from the run seed and the model's name (stable across processes)."""
    torch.manual_seed(seed * 1_000_003 + zlib.crc32("/".join(map(str, parts)).encode()))


# ---------------------------------------------------------------------------- X1
def run_x1(cfg: X1Config, seed: int, ctx) -> dict:
    """gamma of each 1-WL-equivalent pair / the CSL family, per (arch, features)."""
    fams = {}
    if cfg.pairs:
        fams.update({name: [G, H] for name, G, H in wl_equivalent_pairs(seed, cfg.n_random_pairs)})
    if cfg.csl:
        fams["csl"] = csl_graphs()[0]
    out: dict = {"families": {}}
    for name, fam in ctx.track(fams.items(), desc="X1"):
        row = {}
        n_max = max(g.shape[0] for g in fam)
        for arch in cfg.archs:
            for feat in cfg.features:
                for k in cfg.rwse_steps if feat == "rwse" else (None,):
                    _seed_model(seed, "x1", name, arch, feat, k)
                    f = make_embedding(
                        arch, features=feat, width=cfg.width, rwse_steps=k or 8, n_max=n_max + 1, dtype=DT
                    )
                    row[f"{arch}/{feat}{k or ''}"] = float(embedding_margin(f, fam).min())
        row["wl"] = float(embedding_margin(WLHistogram(3), fam).min())
        out["families"][name] = row
    const_keys = [k for k in next(iter(out["families"].values())) if k.endswith("/const") or k == "wl"]
    out["const_max_gamma"] = max(row[k] for row in out["families"].values() for k in const_keys)
    rw = {
        name: min(v for k, v in row.items() if "/rwse" in k)
        for name, row in out["families"].items()
        if any("/rwse" in k for k in row)
    }
    out["rwse_min_gamma"] = {name: v for name, v in rw.items()}
    out["rwse_min_gamma_csl"] = rw.get("csl", math.nan)
    return out


# ---------------------------------------------------------------------------- X2
def _evaluate_graph_model(f, fam, P: ExhaustivePerturbations, noise: dict, r_cap: int) -> dict:
    R = radii(f, fam, r_max=r_cap)
    r_emp, _ = P.empirical_radius(f)
    out = {k: np.asarray(v).tolist() for k, v in R.items()}
    out["r_emp"] = r_emp.tolist()
    out["violations"] = int((np.minimum(R["r_star"], P.r_max) > r_emp).sum())
    out["alpha"] = {}
    for p, N in noise.items():
        al = N.alignment_probability(f)
        lb = [alignment_lower_bound(int(r), fam[0].shape[0], p) for r in R["r_star"]]
        out["alpha"][str(p)] = {
            "alpha_mean": al["alpha_mean"],
            "alpha_per_graph": al["alpha"].tolist(),  # NaN where no sample was identifiable
            "alpha_min": al["alpha_min"],
            "aligned_mean": float(al["aligned"].mean()),
            "binomial_bound_mean": float(np.mean(lb)),
            "bound_violations": _bound_violations(al["aligned"], lb, N.source),
        }
    return out


def _bound_violations(aligned: np.ndarray, bound: list, source: np.ndarray) -> int:
    """Members whose aligned count is below the 0.1% binomial quantile of the lower bound (an empirical
    frequency near the bound is sampling noise, not a violation)."""
    n = int((source == 0).sum())
    floor = stats.binom.ppf(0.001, n, np.clip(bound, 0, 1))
    return int((np.round(aligned * n) < floor).sum())


def run_x2(cfg: X2Config, seed: int, ctx) -> dict:
    """Per codebook, architecture and objective: margins, radii, r_emp, alignment probability."""
    out: dict = {"codebooks": {}, "r_max": cfg.r_max}
    tcfg = TrainConfig(steps=cfg.steps, p=cfg.p_train, lipschitz=cfg.lipschitz)
    for d_min in cfg.d_mins:
        fam = codebook(cfg.n, d_min)
        P = ExhaustivePerturbations.build(fam, cfg.r_max)
        noise = {
            p: NoisySamples.draw(fam, p, cfg.n_samples, seed=seed * 1009 + d_min * 31 + int(1000 * p))
            for p in cfg.ps
        }
        book: dict = {
            "size": len(fam),
            "r_comb": r_comb(d_min),
            "identifiable_fraction": float(P.ident.mean()) if len(P.ident) else math.nan,
            "models": {},
        }
        book["models"]["wl/untrained"] = _evaluate_graph_model(
            WLHistogram(cfg.wl_iterations), fam, P, noise, cfg.n * (cfg.n - 1) // 2
        )
        jobs = [(a, ft, o) for a, ft in cfg.archs for o in cfg.objectives]
        for arch, feat, obj in ctx.track(jobs, desc=f"X2 d_min={d_min}"):
            _seed_model(seed, "x2", d_min, arch)  # same init for every objective: a paired comparison
            f = make_embedding(arch, features=feat, width=cfg.width, n_max=cfg.n, dtype=DT)
            hist = train_graph_embedding(f, fam, obj, tcfg, seed=seed)
            f.eval()
            row = _evaluate_graph_model(f, fam, P, noise, cfg.n * (cfg.n - 1) // 2)
            row["loss_last"] = hist["loss_last"]
            book["models"][f"{arch}/{obj}"] = row
        out["codebooks"][str(d_min)] = book
    out["summary"] = analyse_x2(out, cfg)
    return out


def analyse_x2(x2: dict, cfg: X2Config) -> dict:
    """Pooled Spearman, soundness counts and per-objective means (the numbers the claims read)."""
    norm, remp, pos, alpha_pg = [], [], [], []
    per_arch: dict = {}
    by_obj: dict = {o: {"r_emp": [], "alpha": [], "clean": [], "rstar_pos": []} for o in cfg.objectives}
    violations = bound_viol = 0
    rstar_all = []
    p_mid = str(cfg.ps[len(cfg.ps) // 2])
    for book in x2["codebooks"].values():
        for key, row in book["models"].items():
            arch, obj = key.split("/")
            violations += row["violations"]
            bound_viol += sum(a["bound_violations"] for a in row["alpha"].values())
            rstar_all += row["r_star"]
            norm += row["normalised"]
            remp += row["r_emp"]
            alpha_pg += row["alpha"][p_mid]["alpha_per_graph"]
            pos += [g > 0 for g in row["gamma"]]
            pa = per_arch.setdefault(arch, ([], []))
            pa[0].extend(row["normalised"])
            pa[1].extend(row["r_emp"])
            if obj in by_obj:
                by_obj[obj]["r_emp"] += row["r_emp"]
                by_obj[obj]["alpha"].append(row["alpha"][p_mid]["alpha_mean"])
                by_obj[obj]["clean"].append(float(np.mean([g > 0 for g in row["gamma"]])))
                by_obj[obj]["rstar_pos"].append(float(np.mean([r >= 1 for r in row["r_star"]])))
    rho, p = spearman(norm, remp)
    pos = np.asarray(pos)
    rho_pos, p_pos = spearman(np.asarray(norm)[pos], np.asarray(remp)[pos])
    alpha_pg = np.asarray(alpha_pg, dtype=float)
    has = np.isfinite(alpha_pg)
    rho_a, p_a = spearman(np.asarray(norm)[has], alpha_pg[has])
    return {
        "spearman": {
            "rho": rho,
            "p": p,
            "n": len(norm),
            "rho_positive_margin": rho_pos,
            "p_positive_margin": p_pos,
            "rho_alpha": rho_a,  # Spearman(gamma / L1_hat, alpha at the middle p), graphs with samples
            "p_alpha": p_a,
            "per_arch": {a: dict(zip(("rho", "p"), spearman(*v))) for a, v in per_arch.items()},
        },
        "violations": violations,
        "binomial_bound_violations": bound_viol,
        "r_star_fraction_positive": float(np.mean(np.asarray(rstar_all) >= 1)),
        "alpha_p": float(p_mid),
        "objectives": {
            o: {
                "mean_r_emp": float(np.mean(v["r_emp"])),
                "alpha": float(np.nanmean(v["alpha"])),
                "clean_identification": float(np.mean(v["clean"])),
                "r_star_fraction_positive": float(np.mean(v["rstar_pos"])),
            }
            for o, v in by_obj.items()
            if v["r_emp"]
        },
    }


# ---------------------------------------------------------------------------- X3
def _node_graph(name: str, seed: int):
    return sbm_graph(seed=seed) if name == "sbm" else real_graph(name)


def run_x3(cfg: X3Config, seed: int, ctx) -> dict:
    """Node level on karate: clean accuracy, certified-accuracy curves, empirical radii per objective
    (plus ``extra_graphs`` under ``extra``, searched exhaustively at r <= r_exhaustive only)."""
    out = _run_node_level(cfg, *_node_graph(cfg.graph, seed), seed, ctx, cfg.greedy_budget)
    if cfg.extra_graphs:
        out["extra"] = {
            g: _run_node_level(cfg, *_node_graph(g, seed), seed, ctx, cfg.r_exhaustive)
            for g in cfg.extra_graphs
        }
    return out


def _run_node_level(cfg: X3Config, A, y, seed: int, ctx, greedy_budget: int) -> dict:
    rng = np.random.default_rng(seed)
    train = np.concatenate(
        [rng.choice(np.flatnonzero(y == c), cfg.labelled_per_class, replace=False) for c in np.unique(y)]
    )
    test = np.setdiff1d(np.arange(len(y)), train)
    out: dict = {"n_test": int(len(test)), "objectives": {}}
    radii_grid = list(range(cfg.cert_r_max + 1))
    tcfg = TrainConfig(steps=cfg.epochs, lipschitz=cfg.lipschitz, mu=cfg.mu)
    for obj in ctx.track(cfg.objectives, desc="X3"):
        _seed_model(seed, "x3", cfg.arch)
        clf = NodeClassifier(make_embedding(cfg.arch, width=cfg.width, dtype=DT), int(y.max()) + 1)
        train_node_classifier(clf, A, y, train, obj, tcfg, seed=seed)
        clf.eval()
        with torch.no_grad():
            pred = clf(A)[0].argmax(-1).numpy()
        cert = lipschitz_certificate(clf, A, y, cfg.cert_r_max)[test]
        sm = smoothing_certify(clf, A, cfg.beta, cfg.n0, cfg.n, cfg.alpha, seed=seed)
        sm_ok = (sm["pred"] == y)[test]
        emp = empirical_node_radius(clf, A, y, cfg.r_exhaustive, greedy_budget, nodes=test)
        out["objectives"][obj] = {
            "clean_accuracy": float((pred == y)[test].mean()),
            "lipschitz_radius": cert.tolist(),
            "empirical_radius": emp.tolist(),
            "mean_r_emp": float(emp.mean()),
            # the attack radius is censored at the search budget: compare within it
            "violations": int((np.minimum(cert, greedy_budget) > emp).sum()),
            "curves": {
                "radius": radii_grid,
                "lipschitz": [float((cert >= r).mean()) for r in radii_grid],
                "smoothing": [float((sm_ok & (sm["radius"][test] >= r)).mean()) for r in radii_grid],
                "attack": [float((emp >= r).mean()) for r in radii_grid],
            },
            "smoothing_p_a_mean": float(sm["p_a"][test].mean()),
        }
    return out


# ---------------------------------------------------------------------------- X4, X5
def analyse_x4(m: dict) -> dict:
    """Ours minus CE at graph level (X2 pooled) and node level (X3)."""
    g = m["x2"]["summary"]["objectives"]
    nd = m["x3"]["objectives"]
    out: dict = {}
    if OURS_GRAPH in g and BASE in g:
        out["graph"] = {
            k: g[OURS_GRAPH][k] - g[BASE][k]
            for k in ("mean_r_emp", "alpha", "clean_identification", "r_star_fraction_positive")
        }
    if "untrained" in g and OURS_GRAPH in g:
        out["graph_vs_untrained_r_star_positive"] = (
            g[OURS_GRAPH]["r_star_fraction_positive"] - g["untrained"]["r_star_fraction_positive"]
        )
    if OURS_NODE in nd and BASE in nd:
        out["node"] = {k: nd[OURS_NODE][k] - nd[BASE][k] for k in ("mean_r_emp", "clean_accuracy")}
        out["node"]["certified_at_1"] = (nd[OURS_NODE]["curves"]["lipschitz"][1:2] or [0])[0] - (
            nd[BASE]["curves"]["lipschitz"][1:2] or [0]
        )[0]
    return out


def analyse_x5(x2: dict) -> dict:
    """Spearman over model variants (codebook x architecture x objective) of mean normalised margin
    vs mean r_emp: the architecture ranking by margin against the ranking by robustness."""
    xs, ys = [], []
    for book in x2["codebooks"].values():
        for key, row in book["models"].items():
            xs.append(float(np.mean(row["normalised"])))
            ys.append(float(np.mean(row["r_emp"])))
    rho, p = spearman(xs, ys)
    return {"rho": rho, "p": p, "n_variants": len(xs)}


# ---------------------------------------------------------------------------- claims
def _all_seeds(m, path):
    return seed_values(m, path)


def check_isomorphism_limit(m) -> tuple[str, str]:
    worst = max(_all_seeds(m, "x1.const_max_gamma"))
    ok = worst <= ZERO_TOL
    mism = []
    for run in getattr(m, "per_seed", None) or [m]:
        for book in run["x2"]["codebooks"].values():
            wl = np.asarray(book["models"]["wl/untrained"]["gamma"]) > 0
            gin = book["models"].get("gin/untrained")
            if gin is not None:
                mism.append(int(((np.asarray(gin["gamma"]) > 0) != wl).sum()))
    text = (
        f"max gamma over 1-WL-equivalent pairs + CSL (const MPNNs, f_WL) = {worst:.2g} "
        f"(needs <= {ZERO_TOL:g}); codebook graphs where GIN(const) gamma>0 disagrees with f_WL: "
        f"{sum(mism) if mism else 'n/a'}"
    )
    if not mism:
        return INCONCLUSIVE, text + " (no untrained GIN in X2)"
    return (HOLDS if ok and sum(mism) == 0 else FAILS), text


def check_rwse(m) -> tuple[str, str]:
    vals = _all_seeds(m, "x1.rwse_min_gamma_csl")
    if any(math.isnan(v) for v in vals):
        return INCONCLUSIVE, "no rwse run on CSL"
    return (
        HOLDS if min(vals) > ZERO_TOL else FAILS
    ), f"min gamma on the 10 CSL classes with rwse = {min(vals):.2g} (needs > {ZERO_TOL:g}; tiny margin)"


def check_sound(m) -> tuple[str, str]:
    g = sum(_all_seeds(m, "x2.summary.violations"))
    b = sum(_all_seeds(m, "x2.summary.binomial_bound_violations"))
    node = 0
    for run in getattr(m, "per_seed", None) or [m]:
        node += sum(o["violations"] for o in run["x3"]["objectives"].values())
        node += sum(
            o["violations"] for g in run["x3"].get("extra", {}).values() for o in g["objectives"].values()
        )
    frac = mean_se(_all_seeds(m, "x2.summary.r_star_fraction_positive"))[0]
    text = (
        f"graph r* > r_emp: {g}; node Lipschitz radius > attack radius: {node}; P[aligned] < binomial "
        f"bound beyond sampling noise: {b}; share of graphs with r* >= 1: {frac:.2f}"
    )
    return (HOLDS if g == 0 and node == 0 else FAILS), text


def check_spearman(m) -> tuple[str, str]:
    mean, se, n = mean_se(_all_seeds(m, "x2.summary.spearman.rho"))
    pmax = max(_all_seeds(m, "x2.summary.spearman.p"))
    rp, _, _ = mean_se(_all_seeds(m, "x2.summary.spearman.rho_positive_margin"))
    ra, _, _ = mean_se(_all_seeds(m, "x2.summary.spearman.rho_alpha"))
    v = judge(mean, se, n, SPEARMAN_MIN, K_SE)
    if v == HOLDS and not pmax < P_MAX:
        v = INCONCLUSIVE
    return v, (
        f"pooled Spearman = {fmt_se(mean, se, n)} (max p = {pmax:.2g}); gamma>0 graphs only: "
        f"{rp:.2f}; Spearman(gamma/L1_hat, alpha) = {ra:.2f} (needs > {SPEARMAN_MIN} by {K_SE:g} s.e., "
        f"p < {P_MAX})"
    )


def _improvement(m, level: str, keys: tuple, acc_key: str) -> tuple[str, str]:
    verdicts, parts = [], []
    for k in keys:
        mean, se, n = mean_se(_all_seeds(m, f"x4.{level}.{k}"))
        verdicts.append(judge(mean, se, n, 0.0, K_SE))
        parts.append(f"d{k} = {fmt_se(mean, se, n)}")
    acc, acc_se, n = mean_se(_all_seeds(m, f"x4.{level}.{acc_key}"))
    acc_ok = judge(acc, acc_se, n, -ACC_SLACK, K_SE)
    parts.append(f"d{acc_key} = {fmt_se(acc, acc_se, n)} (needs > -{ACC_SLACK})")
    if all(v == HOLDS for v in verdicts) and acc_ok == HOLDS:
        v = HOLDS
    elif FAILS in verdicts or acc_ok == FAILS:
        v = FAILS
    else:
        v = INCONCLUSIVE
    return v, "; ".join(parts)


def check_graph_training(m) -> tuple[str, str]:
    return _improvement(m, "graph", ("mean_r_emp", "alpha"), "clean_identification")


def check_node_training(m) -> tuple[str, str]:
    return _improvement(m, "node", ("mean_r_emp",), "clean_accuracy")


def check_nonvacuous(m) -> tuple[str, str]:
    mean, se, n = mean_se(_all_seeds(m, "x4.graph_vs_untrained_r_star_positive"))
    return judge(
        mean, se, n, 0.0, K_SE
    ), f"share of graphs with r* >= 1, contrastive+Lipschitz minus untrained = {fmt_se(mean, se, n)}"


def check_ranking(m) -> tuple[str, str]:
    mean, se, n = mean_se(_all_seeds(m, "x5.rho"))
    return judge(mean, se, n, 0.0, K_SE), (
        f"Spearman over model variants (mean gamma/L1_hat vs mean r_emp) = "
        f"{fmt_se(mean, se, n)} (needs > 0, better than chance)"
    )


CLAIMS = [
    Claim(
        "isomorphism_limit",
        "The margin generalises isomorphism: gamma = 0 exactly where 1-WL fails, > 0 otherwise",
        "abstract (no number)",
        check_isomorphism_limit,
    ),
    Claim(
        "rwse_breaks_limit",
        "Structural features (rwse) give gamma > 0 on 1-WL-equivalent CSL classes",
        "abstract (no number)",
        check_rwse,
    ),
    Claim(
        "certificates_sound",
        "Certified radii are never violated (r* <= r_emp; node certificate <= attack)",
        "abstract: certified robustness, explicit radius",
        check_sound,
    ),
    Claim(
        "margin_predicts",
        f"Spearman(gamma / L1_hat, r_emp) > {SPEARMAN_MIN} pooled, p < {P_MAX}",
        "abstract: criteria predict robustness",
        check_spearman,
    ),
    Claim(
        "training_improves_graph",
        "Contrastive + Lipschitz training raises mean r_emp and alignment "
        f"probability over CE at clean identification within {ACC_SLACK * 100:.0f} points",
        "abstract: criteria improve robustness",
        check_graph_training,
    ),
    Claim(
        "training_improves_node",
        "Margin + Lipschitz training raises the node-level empirical radius over CE "
        f"at clean accuracy within {ACC_SLACK * 100:.0f} points (karate, GCN)",
        "abstract: criteria improve robustness",
        check_node_training,
    ),
    Claim(
        "lipschitz_nonvacuous",
        "Lipschitz-controlled training makes graph-level certified radii non-vacuous "
        "(more r* >= 1 than untrained)",
        "spec §4/§6 (no number)",
        check_nonvacuous,
    ),
    Claim(
        "architecture_ranking",
        "Ranking by normalised margin matches ranking by empirical robustness",
        "abstract (X5, no number)",
        check_ranking,
    ),
]
