"""Reproduction: the sweeping law (E1), the steep/non-steep dichotomy (E2), alternation in random games
(E3), the price of best response (E4), bilateral noise (E5) and susceptibility (E6).

The abstract has no numbers, so each claim's "paper figure" is the law, checked against the exact
predictions of ``predictions.py``. Seeds: E1/E2 draw the gaps, E3 the random games, E4/E6 the game's
gaps, E5 the noise from ``default_rng(seed)``; the deterministic laws must hold on every seed, the
fractions and noise ratios are judged over seeds (``paired``/``judge``: inside 2 s.e. is inconclusive).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from neurips26.ftrl_surplus.games import core_appendix_game, random_game, solve_game
from neurips26.ftrl_surplus.learners import FTRL
from neurips26.ftrl_surplus.predictions import (alternation_rate, elimination_round, matched_eta,
                                                predicted_susceptibility, price_of_best_response, sandwich,
                                                sweeping_limit)
from neurips26.ftrl_surplus.regularizers import regularizer
from neurips26.ftrl_surplus.simulator import play
from neurips26.ftrl_surplus.strategies import (AADConstant, FixedMaxMin, MyopicBestResponse,
                                               SweepThenAlternate, search_delta)
from neurips26.ftrl_surplus.uncertainty import bilateral_play
from neurips26.harness import INCONCLUSIVE, Claim, RunContext, verdict
from neurips26.harness.paper import fmt_se, judge, mean_se, seed_values
from neurips26.harness.parallel import map_tasks

FOUR = ("entropic", "euclidean", "tsallis-0.5", "tsallis-1.5")
FIVE = FOUR + ("log_barrier",)


# ---------------------------------------------------------------------------- configs
@dataclass
class E1:
    k: int = 3
    n_sub: tuple = (0, 1, 2, 4, 8, 16)
    etas: tuple = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
    T: int = 5000
    regularizers: tuple = FIVE


@dataclass
class E2:
    k: int = 3
    n_sub: int = 4
    etas: tuple = (0.1,)
    T: int = 20_000
    regularizers: tuple = FIVE


@dataclass
class E3:
    sizes: tuple = (5,)
    games: int = 20
    etas: tuple = (0.03, 0.1)
    T: int = 5000
    learners: tuple = ("entropic", "euclidean")
    baselines: tuple = ("FixedMaxMin", "MyopicBestResponse", "AADConstant")
    aad_method: str = "pga"  # projected gradient ascent (tested equal to cvxpy's log-sum-exp solve)


@dataclass
class E4:
    Ts: tuple = (1000, 10_000)
    eta_grid: tuple = (-3.0, 0.0, 25)  # numpy.logspace(start, stop, num)


@dataclass
class E5:
    sigmas: tuple = (0.0, 0.01, 0.03, 0.1, 0.3)
    eta: float = 0.05
    T: int = 2000


@dataclass
class E6:
    T: int = 10_000
    regularizers: tuple = FIVE
    strategies: tuple = ("FixedMaxMin", "SweepThenAlternate")  # full adds MyopicBestResponse


@dataclass
class Config:
    e1: E1 = field(default_factory=E1)
    e2: E2 = field(default_factory=E2)
    e3: E3 = field(default_factory=E3)
    e4: E4 = field(default_factory=E4)
    e5: E5 = field(default_factory=E5)
    e6: E6 = field(default_factory=E6)
    seeds: tuple = (0, 1, 2)
    backend: str = "serial"
    plots: bool = True


CONFIGS = {
    "smoke": Config(e1=E1(n_sub=(0, 2, 4), etas=(0.05, 0.2, 0.5), T=300,
                          regularizers=("entropic", "euclidean")),
                    e2=E2(T=600, regularizers=("entropic", "euclidean")),
                    e3=E3(sizes=(3,), games=4, etas=(0.1,), T=300, baselines=("FixedMaxMin",)),
                    e4=E4(Ts=(200, 800), eta_grid=(-2.0, 0.0, 7)),
                    e5=E5(sigmas=(0.0, 0.1), T=200), e6=E6(T=400, regularizers=("entropic", "euclidean"),
                                                           strategies=("FixedMaxMin", "SweepThenAlternate")),
                    seeds=(0,), plots=False),
    "quick": Config(),
    "full": Config(e1=E1(T=20_000), e2=E2(etas=(0.01, 0.1, 0.5), T=1_000_000),
                   e3=E3(sizes=(3, 5, 8, 12, 20), games=200, etas=(0.01, 0.03, 0.1, 0.3), T=10_000),
                   e4=E4(Ts=(1000, 10_000, 100_000, 1_000_000)), e5=E5(T=20_000), 
                   e6=E6(T=100_000, strategies=("FixedMaxMin", "SweepThenAlternate", "MyopicBestResponse")),
                   seeds=(0, 1, 2, 3, 4), backend="auto"),
}

#: no wall-clock metrics are recorded
VOLATILE_METRICS: tuple = ()

# named thresholds, used by the claims' statements and their checks
ZERO_TOL = 1e-9            # |S_T| <= ZERO_TOL * T when N_sub = 0
SLOPE_BAND = (0.85, 1.10)  # log-log slope of S_T vs 1/eta (spec E1)
ALT_FACTOR = 0.5           # S_T >= ALT_FACTOR * rho * T ...
ALT_FRACTION = 0.9         # ... in at least this fraction of non-pure random games
SQRT_BAND = (0.4, 0.6)     # E4 fitted slope 0.5 +- 0.1
RANK_NOISE = 0.10          # predicted Sus closer than 10% => a swapped pair is noise, not a refutation
NOISE_SIGMA = 0.01         # E5: the smallest noise level judged
NOISE_KEEP = 0.5           # E5: S_T / S_T(noise-free) >= this at sigma_o = sigma_l = NOISE_SIGMA


# ---------------------------------------------------------------------------- run
def run(cfg: Config, ctx: RunContext) -> dict:
    seed = ctx.seed
    metrics = {"e1": sweeping_law(cfg.e1, seed, cfg.backend), "e2": dichotomy(cfg.e2, seed),
               "e3": alternation_random_games(cfg.e3, seed, cfg.backend), "e4": price_of_br(cfg.e4, seed),
               "e5": bilateral(cfg.e5, seed), "e6": susceptibility(cfg.e6, seed)}
    if cfg.plots:
        plot_all(metrics, ctx)
    return metrics


# ---------------------------------------------------------------------------- E1 sweeping law
def _e1_cell(task: tuple) -> dict:
    reg, n_sub, k, etas, T, seed = task
    A = core_appendix_game(k, n_sub, seed=seed)
    sol = solve_game(A)
    r = play(A, FTRL(reg, np.array(etas)), FixedMaxMin(), T)
    S = r.total
    band = [sandwich(reg, sol.gaps, e, T) for e in etas]
    lim = [sweeping_limit(reg, sol.m, sol.k, e) if reg != "log_barrier" else math.inf for e in etas]
    return {"S_T": S.tolist(), "lo": [b[0] for b in band], "hi": [b[1] for b in band], "limit": lim,
            "k": sol.k, "m": sol.m}


def sweeping_law(cfg: E1, seed: int, backend: str) -> dict:
    tasks = [(reg, n, cfg.k, tuple(cfg.etas), cfg.T, seed) for reg in cfg.regularizers for n in cfg.n_sub]
    cells = map_tasks(_e1_cell, tasks, backend=backend, desc="E1", progress=False)
    out: dict = {"etas": list(cfg.etas), "n_sub": list(cfg.n_sub), "T": cfg.T, "reg": {}}
    inside, total, zero = 0, 0, 0.0
    for (reg, n, *_), c in zip(tasks, cells):
        d = out["reg"].setdefault(reg, {"S_T": [], "lo": [], "hi": [], "limit": []})
        for key in ("S_T", "lo", "hi", "limit"):
            d[key].append(c[key])
        tol = 1e-9 * max(1.0, max(abs(s) for s in c["S_T"]))
        inside += sum(lo - tol <= s <= hi + tol for s, lo, hi in zip(c["S_T"], c["lo"], c["hi"]))
        total += len(c["S_T"])
        if n == 0:
            zero = max(zero, max(abs(s) for s in c["S_T"]) / cfg.T)
    grows, slopes, frac_limit = True, {}, {}
    logx = np.log(1.0 / np.array(cfg.etas))
    for reg, d in out["reg"].items():
        S = np.array(d["S_T"])                               # (n_sub, eta)
        grows &= bool(np.all(np.diff(S * np.array(cfg.etas)[None], axis=0) > 0))
        pos = [i for i, n in enumerate(cfg.n_sub) if n > 0]
        if reg != "log_barrier" and pos:
            slopes[reg] = [float(np.polyfit(logx, np.log(S[i]), 1)[0]) for i in pos]
            lim = np.array(d["limit"])[pos]
            frac_limit[reg] = float(np.median(S[pos] / lim))
    out |= {"inside_fraction": inside / total, "zero_max_per_round": zero, "grows_with_n_sub": grows,
            "slopes": slopes, "slope_min": min((min(v) for v in slopes.values()), default=math.nan),
            "slope_max": max((max(v) for v in slopes.values()), default=math.nan),
            "median_S_over_limit": frac_limit}
    return out


# ---------------------------------------------------------------------------- E2 dichotomy
def dichotomy(cfg: E2, seed: int) -> dict:
    A = core_appendix_game(cfg.k, cfg.n_sub, seed=seed)
    sol = solve_game(A)
    out: dict = {"T": cfg.T, "etas": list(cfg.etas), "reg": {}}
    ok = True
    for reg in cfg.regularizers:
        r = play(A, FTRL(reg, np.array(cfg.etas)), FixedMaxMin(), cfg.T)
        S = r.cumulative
        rows = []
        for i, eta in enumerate(cfg.etas):
            s = r.surplus[i]
            pred = elimination_round(reg, sol.k, sol.delta_min, eta)
            zero = np.flatnonzero(s <= 1e-12)
            # first round from which s_t stays 0
            elim = None
            if zero.size and zero[-1] == cfg.T - 1:
                run_start = cfg.T - 1
                while run_start > 0 and s[run_start - 1] <= 1e-12:
                    run_start -= 1
                elim = run_start + 1
            lim = sweeping_limit(reg, sol.m, sol.k, eta) if reg != "log_barrier" else math.inf
            reach = np.flatnonzero(S[i] >= 0.99 * lim) if math.isfinite(lim) else np.array([])
            row = {"eta": eta, "eliminated_at": elim, "predicted": None if math.isinf(pred) else pred,
                   "S_T": float(S[i, -1]), "limit": lim, "s_T": float(s[-1]),
                   "rounds_to_99": int(reach[0]) + 1 if reach.size else None,
                   "curve_t": _log_grid(cfg.T), "curve_S": [float(S[i, t - 1]) for t in _log_grid(cfg.T)]}
            # log10 of the smallest suboptimal mass of y_{T+1} (exact in log space: entropic underflows)
            log_tail = float(np.min(regularizer(reg).log_mirror(-eta * cfg.T * sol.gaps)[~sol.optimal]))
            row["log10_tail"] = log_tail / math.log(10) if math.isfinite(log_tail) else None
            # (s_t may round to 0 once the tail is below 1e-16: that is not an elimination)
            if regularizer(reg).steep:
                row_ok = math.isfinite(log_tail)  # y_{t,j} > 0: never eliminated
            else:
                row_ok = elim is not None and elim <= pred
            row["law_holds"] = bool(row_ok)
            ok &= row_ok
            rows.append(row)
        out["reg"][reg] = rows
    out["dichotomy_holds"] = bool(ok)
    return out


def _log_grid(T: int, n: int = 60) -> list[int]:
    return sorted({int(t) for t in np.unique(np.round(np.logspace(0, math.log10(T), n)))})


# ---------------------------------------------------------------------------- E3 alternation
def _e3_cell(task: tuple) -> dict:
    reg, eta, n, games, T, baselines, aad_method, seed = task
    rng = np.random.default_rng([seed, n])
    As = [random_game(n, rng=rng) for _ in range(games)]
    sols = [solve_game(A) for A in As]
    keep = [i for i, s in enumerate(sols) if not s.pure]
    if not keep:
        return {"pure_fraction": 1.0, "n_games": 0}
    A = np.stack([As[i] for i in keep])
    S_sol = [sols[i] for i in keep]
    lr = FTRL(reg, eta)
    rho = np.array([alternation_rate(reg, s.A, search_delta(s.A, s)[0], s.optimal, eta) for s in S_sol])
    alt = play(A, lr, SweepThenAlternate(), T, solutions=S_sol).total
    strategies = {"FixedMaxMin": FixedMaxMin(), "MyopicBestResponse": MyopicBestResponse(),
                  "AADConstant": AADConstant(aad_method)}
    per = {"SweepThenAlternate": (alt / (eta * T)).tolist()}
    for name in baselines:
        per[name] = (play(A, lr, strategies[name], T, solutions=S_sol).total / (eta * T)).tolist()
    ratio = alt / (rho * T)
    return {"pure_fraction": 1 - len(keep) / games, "n_games": len(keep),
            "fraction_alt": float(np.mean(alt >= ALT_FACTOR * rho * T)), "min_ratio": float(ratio.min()),
            "S_over_etaT": per}


def alternation_random_games(cfg: E3, seed: int, backend: str) -> dict:
    tasks = [(reg, eta, n, cfg.games, cfg.T, tuple(cfg.baselines), cfg.aad_method, seed)
             for reg in cfg.learners for eta in cfg.etas for n in cfg.sizes]
    cells = map_tasks(_e3_cell, tasks, backend=backend, desc="E3", progress=False)
    out: dict = {"cells": [{"reg": t[0], "eta": t[1], "n": t[2]} | c for t, c in zip(tasks, cells)]}
    fr = [c["fraction_alt"] for c in cells if c["n_games"]]
    out["fraction_min"] = float(min(fr)) if fr else math.nan
    out["min_ratio"] = float(min(c["min_ratio"] for c in cells if c["n_games"])) if fr else math.nan
    out["pure_fraction"] = float(np.mean([c["pure_fraction"] for c in cells]))
    return out


# ---------------------------------------------------------------------------- E4 price of best response
def _e4_game(seed: int) -> np.ndarray:
    return core_appendix_game(3, 4, seed=seed, xi_scale=0.0)


def price_of_br(cfg: E4, seed: int) -> dict:
    A = _e4_game(seed)
    sol = solve_game(A)
    etas = np.logspace(*cfg.eta_grid[:2], int(cfg.eta_grid[2]))
    _, score = search_delta(A, sol)
    sig_sweep = regularizer("entropic").sweeping_susceptibility(sol.m, sol.k)
    sig_alt = 0.5 * score * regularizer("entropic").hessian_scale(sol.k)
    rows = []
    for T in cfg.Ts:
        S = play(A, FTRL("entropic", etas), SweepThenAlternate(), T, solutions=[sol] * etas.size).total
        i = int(np.argmin(S))
        rows.append({"T": T, "min_S": float(S[i]), "argmin_eta": float(etas[i]),
                     "predicted": price_of_best_response(sig_sweep, sig_alt, T)[0], "S_T": S.tolist()})
    Ts = np.array(cfg.Ts, dtype=float)
    slope = float(np.polyfit(np.log(Ts), np.log([r["min_S"] for r in rows]), 1)[0])
    return {"rows": rows, "etas": etas.tolist(), "slope": slope, "sigma_sweep": sig_sweep,
            "sigma_alt": sig_alt}


# ---------------------------------------------------------------------------- E5 bilateral uncertainty
def bilateral(cfg: E5, seed: int) -> dict:
    A = _e4_game(seed)
    lr = FTRL("entropic", cfg.eta)
    out: dict = {"sigmas": list(cfg.sigmas)}
    for name, strategy, variant in (("SweepThenAlternate", SweepThenAlternate(), "A"),
                                    ("MyopicBR-A", MyopicBestResponse(), "A"),
                                    ("MyopicBR-B", MyopicBestResponse(), "B")):
        grid = np.zeros((len(cfg.sigmas), len(cfg.sigmas)))
        for j, sl in enumerate(cfg.sigmas):  # one batched play over the sigma_o grid per sigma_l
            grid[:, j] = bilateral_play(A, lr, strategy, cfg.T, np.array(cfg.sigmas), sl, variant,
                                        seed=1000 * seed + j).total
        base = grid[0, 0]
        out[name] = {"S_T": grid.tolist(), "ratio": (grid / base).tolist()}
    if NOISE_SIGMA in cfg.sigmas:
        i = cfg.sigmas.index(NOISE_SIGMA)
        out["ratio_small_noise"] = out["SweepThenAlternate"]["ratio"][i][i]
    return out


# ---------------------------------------------------------------------------- E6 susceptibility
def susceptibility(cfg: E6, seed: int) -> dict:
    A = _e4_game(seed)
    sol = solve_game(A)
    _, score = search_delta(A, sol)
    strategies = {"FixedMaxMin": FixedMaxMin(), "SweepThenAlternate": SweepThenAlternate(),
                  "MyopicBestResponse": MyopicBestResponse()}
    rows = {}
    for reg in cfg.regularizers:
        h = regularizer(reg)
        eta = matched_eta(h, sol.m, cfg.T)
        sig_alt = 0.5 * score * h.hessian_scale(sol.k)
        S = {n: float(play(A, FTRL(h, eta), strategies[n], cfg.T, solutions=[sol]).total[0])
             for n in cfg.strategies}
        pred = (predicted_susceptibility(h, sol.m, sol.k, sig_alt, cfg.T, eta)
                if h.finite_on_boundary else math.inf)
        rows[reg] = {"eta_h": eta, "sigma_alt": sig_alt, "S_T": S, "Sus": max(S.values()) / math.sqrt(cfg.T),
                     "predicted": pred}
    return {"T": cfg.T, "rows": rows}


def rank_agreement(rows: dict) -> tuple[str, str]:
    """Measured vs predicted ranking of the finite-prediction regularizers; near-ties are noise."""
    regs = [r for r, v in rows.items() if math.isfinite(v["predicted"])]
    if len(regs) < 2:
        return INCONCLUSIVE, "fewer than two regularizers with a finite prediction"
    meas = sorted(regs, key=lambda r: -rows[r]["Sus"])
    pred = sorted(regs, key=lambda r: -rows[r]["predicted"])
    text = f"measured {' > '.join(meas)}; predicted {' > '.join(pred)}"
    if meas == pred:
        return verdict(True), text
    swapped = [(a, b) for i, a in enumerate(pred) for b in pred[i + 1:] if meas.index(a) > meas.index(b)]
    close = all(abs(rows[a]["predicted"] - rows[b]["predicted"]) <= RANK_NOISE * rows[b]["predicted"]
                for a, b in swapped)
    note = " (swaps within the 10% noise)" if close else ""
    return (INCONCLUSIVE if close else verdict(False)), text + note


# ---------------------------------------------------------------------------- plots
def plot_all(m: dict, ctx: RunContext) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    e1 = m["e1"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for reg, d in e1["reg"].items():
        S = np.array(d["S_T"])
        i = len(e1["etas"]) // 2
        eta = e1["etas"][i]
        (ln,) = axes[0].plot(e1["n_sub"], eta * S[:, i], "o-", label=reg)
        axes[0].plot(e1["n_sub"], eta * np.array(d["lo"])[:, i], "--", color=ln.get_color(), lw=0.8)
        if reg != "log_barrier":
            pos = [j for j, n in enumerate(e1["n_sub"]) if n > 0]
            axes[1].loglog(1 / np.array(e1["etas"]), S[pos[-1]], "o-", label=reg)
    axes[0].set(xlabel="N_sub", ylabel=f"eta * S_T (eta={e1['etas'][len(e1['etas']) // 2]})",
                title="E1 sweeping law (dashed: S_cont(T))")
    axes[1].set(xlabel="1/eta", ylabel="S_T", title=f"E1 S_T vs 1/eta (N_sub={e1['n_sub'][-1]})")
    axes[0].legend(fontsize=7)
    axes[1].legend(fontsize=7)
    ctx.save_plot(fig, "e1_sweeping_law")

    fig, ax = plt.subplots(figsize=(6, 4))
    for reg, rows in m["e2"]["reg"].items():
        r = rows[0]
        norm = r["limit"] if math.isfinite(r["limit"]) else r["S_T"]
        ax.semilogx(r["curve_t"], np.array(r["curve_S"]) / norm, label=reg)
        if r["predicted"]:
            ax.axvline(r["predicted"], ls=":", lw=0.8)
    ax.set(xlabel="t", ylabel="S_t / S_limit (log-barrier: / S_T)",
           title=f"E2 dichotomy, eta={m['e2']['etas'][0]}")
    ax.legend(fontsize=7)
    ctx.save_plot(fig, "e2_dichotomy")

    cells = m["e3"]["cells"]
    fig, ax = plt.subplots(figsize=(8, 4))
    data, labels = [], []
    for c in cells:
        for name, v in c.get("S_over_etaT", {}).items():
            data.append(v)
            labels.append(f"{c['reg'][:4]} {c['eta']} n={c['n']}\n{name[:10]}")
    if data:
        ax.boxplot(data)
        ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=5, rotation=90)
    ax.set(ylabel="S_T / (eta T)", title="E3 random games")
    ctx.save_plot(fig, "e3_alternation")

    e4 = m["e4"]
    fig, ax = plt.subplots(figsize=(5, 4))
    Ts = [r["T"] for r in e4["rows"]]
    ax.loglog(Ts, [r["min_S"] for r in e4["rows"]], "o-", label=f"min_eta S_T (slope {e4['slope']:.3f})")
    ax.loglog(Ts, [r["predicted"] for r in e4["rows"]], "k--", label="2 sqrt(sigma_sweep sigma_alt T)")
    ax.set(xlabel="T", ylabel="surplus", title="E4 price of best response")
    ax.legend(fontsize=7)
    ctx.save_plot(fig, "e4_sqrtT")

    e5 = m["e5"]
    fig, ax = plt.subplots(figsize=(5, 4))
    im = ax.imshow(np.array(e5["SweepThenAlternate"]["ratio"]), origin="lower", cmap="viridis")
    ax.set_xticks(range(len(e5["sigmas"])), e5["sigmas"])
    ax.set_yticks(range(len(e5["sigmas"])), e5["sigmas"])
    ax.set(xlabel="sigma_l", ylabel="sigma_o", title="E5 S_T / S_T(noise-free)")
    fig.colorbar(im)
    ctx.save_plot(fig, "e5_noise")

    rows = m["e6"]["rows"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    regs = list(rows)
    ax.bar(np.arange(len(regs)) - 0.2, [rows[r]["Sus"] for r in regs], 0.4, label="measured")
    ax.bar(np.arange(len(regs)) + 0.2, [min(rows[r]["predicted"], 10) for r in regs], 0.4,
           label="predicted (capped at 10)")
    ax.set_xticks(range(len(regs)), regs, fontsize=7)
    ax.set(ylabel="Sus = S_T / sqrt(T)", title="E6 susceptibility at matched eta_h")
    ax.legend(fontsize=7)
    ctx.save_plot(fig, "e6_susceptibility")


# ---------------------------------------------------------------------------- claims
def _all_seeds(m, path: str) -> list[float]:
    return seed_values(m, path)


def check_zero(m):
    worst = max(_all_seeds(m, "e1.zero_max_per_round"))
    return verdict(worst <= ZERO_TOL), f"max |S_T|/T at N_sub = 0: {worst:.2g} (needs <= {ZERO_TOL:g})"


def check_sandwich(m):
    fr = min(_all_seeds(m, "e1.inside_fraction"))
    grows = all(v for v in _all_seeds(m, "e1.grows_with_n_sub"))
    runs = getattr(m, "per_seed", None) or [m]
    lim = runs[0]["e1"]["median_S_over_limit"]
    text = (f"{fr:.0%} of (h, N_sub, eta) cells inside [S_cont, S_cont + f(0)]; eta*S_T increasing in "
            f"N_sub: {grows}; median S_T/limit {', '.join(f'{k} {v:.2f}' for k, v in lim.items())}")
    return verdict(fr == 1.0 and grows), text


def check_slope(m):
    lo, hi = min(_all_seeds(m, "e1.slope_min")), max(_all_seeds(m, "e1.slope_max"))
    if math.isnan(lo):
        return INCONCLUSIVE, "no N_sub > 0 cell"
    return (verdict(SLOPE_BAND[0] <= lo and hi <= SLOPE_BAND[1]),
            f"slopes {lo:.3f}-{hi:.3f} over h (log-barrier excluded) and N_sub > 0 (needs {SLOPE_BAND})")


def check_dichotomy(m):
    runs = getattr(m, "per_seed", None) or [m]
    ok = all(r["e2"]["dichotomy_holds"] for r in runs)
    parts = []
    for reg, rows in runs[0]["e2"]["reg"].items():
        r = rows[0]
        if r["predicted"] is not None:
            parts.append(f"{reg} eliminated at t={r['eliminated_at']} (bound {r['predicted']:.0f})")
        else:
            parts.append(f"{reg} min y_sub(T) = 1e{r['log10_tail']:.0f} > 0" if r["log10_tail"] is not None
                         else f"{reg} eliminated")
    return verdict(ok), "; ".join(parts)


def check_alternation(m):
    fr = seed_values(m, "e3.fraction_min")
    mean, se, n = mean_se(fr)
    ratio = min(seed_values(m, "e3.min_ratio"))
    return judge(mean, se, n, ALT_FRACTION, better="higher"), (
        f"worst-cell fraction with S_T >= {ALT_FACTOR} rho T: {fmt_se(mean, se, n)} (needs >= "
               f"{ALT_FRACTION}); min S_T/(rho T) {ratio:.2f}; pure games "
               f"{np.mean(seed_values(m, 'e3.pure_fraction')):.0%} skipped")


def check_sqrt(m):
    slopes = seed_values(m, "e4.slope")
    runs = getattr(m, "per_seed", None) or [m]
    rows = runs[0]["e4"]["rows"]
    detail = ", ".join(f"T={r['T']}: {r['min_S']:.2f} vs {r['predicted']:.2f}" for r in rows)
    ok = all(SQRT_BAND[0] <= s <= SQRT_BAND[1] for s in slopes)
    return (verdict(ok),
            f"slopes {min(slopes):.3f}-{max(slopes):.3f} (needs {SQRT_BAND}); min_eta S_T {detail}")


def check_ranking(m):
    runs = getattr(m, "per_seed", None) or [m]
    verdicts = [rank_agreement(r["e6"]["rows"]) for r in runs]
    vs = {v for v, _ in verdicts}
    if vs == {"holds"}:
        return "holds", verdicts[0][1] + f" ({len(runs)} seed(s))"
    if "fails" in vs:
        return "fails", next(t for v, t in verdicts if v == "fails")
    return INCONCLUSIVE, next(t for v, t in verdicts if v != "holds")


def check_noise(m):
    vals = seed_values(m, "e5.ratio_small_noise")
    mean, se, n = mean_se(vals)
    return (judge(mean, se, n, NOISE_KEEP, better="higher"),
            f"S_T/S_T(0) at sigma_o = sigma_l = {NOISE_SIGMA}: {fmt_se(mean, se, n)} "
            f"(needs > {NOISE_KEEP} by 2 s.e.)")


CLAIMS = [
    Claim("zero_surplus_N0", f"N_sub = 0 gives zero surplus under FixedMaxMin (|S_T| <= {ZERO_TOL:g} T)",
          "surplus vanishes when N_sub = 0", check_zero),
    Claim("sweeping_law", "eta*S_T grows with N_sub and lies in the sandwich around S_cont(T) -> sigma_sweep",
          "Omega(N_sub / eta) for a fixed max-min optimizer", check_sandwich),
    Claim("inverse_rate", f"log-log slope of S_T vs 1/eta in {SLOPE_BAND} (log-barrier excluded)",
          "S_T ~ 1/eta (slope 1)", check_slope),
    Claim("dichotomy", "Euclidean/Tsallis-1.5 eliminate suboptimal actions by the predicted round; steep "
          "learners keep every y_{t,j} > 0 (a vanishing tail)",
          "non-steep saturate in finite time, steep do not",
          check_dichotomy),
    Claim("alternation", f"S_T >= {ALT_FACTOR} rho T in >= {ALT_FRACTION:.0%} of non-pure random games "
          "(entropic, Euclidean)", "Omega(eta T) surplus w.h.p. in random games", check_alternation),
    Claim("price_of_best_response", f"min over eta of S_T grows like sqrt T (slope in {SQRT_BAND})",
          "no constant eta avoids regret-scale surplus (sqrt T)", check_sqrt),
    Claim("susceptibility_ranking", "ranking of regularizers by measured Sus at matched eta_h = ranking by "
          "sigma_sweep/eta_h + sigma_alt eta_h T", "a susceptibility measure ranks regularizers",
          check_ranking),
    Claim("bilateral_noise", f"surplus survives small bilateral noise (ratio > {NOISE_KEEP} at sigma = "
          f"{NOISE_SIGMA})", "discussion of bilateral payoff uncertainty (no figure)", check_noise),
]
