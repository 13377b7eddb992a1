"""Rate curves of the surrogates against exact P*, one independent task per configuration.

``run_case(case)`` computes P* once and, for every surrogate of the case, the KL curve over the
schedule tau = 0..T-1, TV (Pinsker everywhere; Monte Carlo +- 2 s.e. or exact enumeration at the fit
window), the normalised curves KL/(N sigma^2) and TV/(sqrt(N) sigma), the noise-alignment ratio a_tau,
the bound ingredients (reported only) and the late-step slope over the fit window:

* Gaussian window: the last 6 schedule points, dropping KL < 1e-12 (round-off); fewer than 3 left
  means "exact, no rate".
* Grid window: schedule points with 4 dz <= sigma <= 0.5, at least 4 points; S3 (schedule-free) is also
  fitted on 8 log-spaced sigma in [4 dz, 0.5].

``run_sweep(cases, backend=...)`` maps the cases through the harness task map (serial, processes, or
Ray when a cluster runs); each task is single-threaded numpy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from neurips26.bridge.chain import ENUM_MAX, chain_sinkhorn
from neurips26.bridge.errors import NotPositiveDefiniteError
from neurips26.bridge.gaussian import gaussian_ipf
from neurips26.bridge.metrics import (
    alignment_ratio,
    bound_ingredients,
    fit_slope,
    gaussian_window,
    grid_window,
    kl,
    pinsker,
    tv_exact,
    tv_mc,
)
from neurips26.bridge.priors import ChainPrior, GaussianPrior, GaussianTargets, discrete_targets
from neurips26.bridge.schedule import edm_sigmas
from neurips26.bridge.stacks import StackedProblem, stacked_annealed, stacked_ipf
from neurips26.bridge.surrogates import AnnealedTilt, EDMSampler, ProductTilt, SmoothedPotentials
from neurips26.harness.parallel import map_tasks
from neurips26.harness.validation import check_choice

KL_FLOOR = 1e-12  # Gaussian fits drop KL below this (round-off)
GAUSS_WINDOW = 6  # last schedule points of the Gaussian fit window
MIN_GAUSS_POINTS = 3
GRID_SIGMA_MAX = 0.5  # = 2 sigma_data
GRID_DZ_FACTOR = 4.0
MIN_GRID_POINTS = 4
S3_GRID_POINTS = 8


@dataclass(frozen=True)
class GaussianCase:
    N: int
    rho_z: float
    T: int
    h: int = 2
    w: int = 2
    surrogates: tuple = ("S1", "S2", "S3")
    with_s4: bool = False
    lam: str = "one"
    order: str = "gauss-seidel"
    slice_varying: bool = False
    tv_samples: int = 100_000
    tv_everywhere: bool = False
    seed: int = 0


@dataclass(frozen=True)
class DiscreteCase:
    N: int
    shape: str
    T: int
    G: int = 128
    L: float = 3.0
    ell: float = 0.5
    surrogates: tuple = ("S1", "S2", "S3")
    lam: str = "one"
    order: str = "gauss-seidel"
    slice_varying: bool = False
    tv_samples: int = 100_000
    seed: int = 0


@dataclass(frozen=True)
class StackedCase:
    """An n x n x n volume with one or two perpendicular stacks (S1 only; dense, n <= 6)."""

    n: int
    T: int
    stacks: int = 2
    rho_z: float = 0.5
    lam: float = 1.0


def _nan_list(xs) -> list:
    return [float(x) if x is not None and math.isfinite(x) else float("nan") for x in xs]


def _curve(laws, pstar, sigmas, N, window_of, tv_at, seed, tv_samples, enumerable) -> dict:
    """KL, TV, a_tau, bound ingredients and slope for one surrogate's laws along ``sigmas``."""
    kls = np.array([kl(p, pstar) if p is not None else np.nan for p in laws])
    win = window_of(kls)
    a = [alignment_ratio(p, pstar, float(s)) if p is not None else np.nan for p, s in zip(laws, sigmas)]
    tv = np.full(len(laws), np.nan)
    tv_2se = np.full(len(laws), np.nan)
    for i in range(len(laws)) if tv_at == "all" else win:
        if laws[i] is None:
            continue
        if enumerable:
            tv[i], tv_2se[i] = tv_exact(laws[i], pstar), 0.0
        else:
            tv[i], tv_2se[i] = tv_mc(laws[i], pstar, tv_samples, seed)
    ingredients = [bound_ingredients(laws[i], pstar, float(sigmas[i]), float(kls[i])) for i in win]
    out = {
        "kl": _nan_list(kls),
        "kl_norm": _nan_list(kls / (N * sigmas**2)),
        "pinsker": _nan_list([pinsker(k) if np.isfinite(k) else np.nan for k in kls]),
        "tv": _nan_list(tv),
        "tv_2se": _nan_list(tv_2se),
        "tv_norm": _nan_list(tv / (np.sqrt(N) * sigmas)),
        "tv_norm_2se": _nan_list(tv_2se / (np.sqrt(N) * sigmas)),
        "a": _nan_list(a),
        "window": [int(i) for i in win],
        "slope": fit_slope(sigmas[win], kls[win]) if len(win) >= 2 else float("nan"),
        "L_max": _nan_list([b["L_max"] for b in ingredients]),
        "c_post": _nan_list([b["c_post"] for b in ingredients]),
        "C_hat": _nan_list([b["C_hat"] for b in ingredients]),
    }
    return out


def run_gaussian_case(case: GaussianCase) -> dict:
    prior = GaussianPrior.ar1(case.N, case.h, case.w, rho_z=case.rho_z)
    targets = GaussianTargets.default(case.N, case.h, case.w, slice_varying=case.slice_varying)
    pstar = gaussian_ipf(prior, targets)
    sigmas = edm_sigmas(case.T)[:-1]

    def window_of(kls):
        idx = gaussian_window(sigmas, kls, GAUSS_WINDOW, KL_FLOOR)
        return idx if len(idx) >= MIN_GAUSS_POINTS else np.array([], dtype=int)

    makers = {
        "S1": AnnealedTilt(order=case.order, lam=case.lam),
        "S2": ProductTilt(),
        "S3": SmoothedPotentials(undefined="none"),
    }
    res = {
        "case": asdict(case),
        "family": "gaussian",
        "sigmas": sigmas.tolist(),
        "ipf_sweeps": pstar.info["sweeps"],
        "ipf_residual": pstar.info["residual"],
        "kl_pstar_R": kl(pstar, type(pstar).untilted(prior)),
        "surrogates": {},
    }
    for name in case.surrogates:
        laws = makers[name].laws(prior, targets, sigmas, pstar)
        res["surrogates"][name] = _curve(
            laws,
            pstar,
            sigmas,
            case.N,
            window_of,
            "all" if case.tv_everywhere else "window",
            case.seed,
            case.tv_samples,
            False,
        )
    if case.with_s4:
        law, info = EDMSampler(solver="heun").sample_law(prior, targets, sigmas, pstar)
        res["S4"] = {"kl": kl(law, pstar), "start_mismatch": info["start_mismatch"]}
    return res


def run_discrete_case(case: DiscreteCase) -> dict:
    prior = ChainPrior.create(case.N, case.G, case.L, case.ell)
    mu = discrete_targets(prior, case.shape, slice_varying=case.slice_varying)
    pstar = chain_sinkhorn(prior, mu)
    sigmas = edm_sigmas(case.T)[:-1]
    enumerable = case.G**case.N <= ENUM_MAX
    lo = GRID_DZ_FACTOR * prior.dz

    def window_of(kls):
        idx = grid_window(sigmas, prior.dz, GRID_SIGMA_MAX, GRID_DZ_FACTOR)
        return idx if len(idx) >= MIN_GRID_POINTS else np.array([], dtype=int)

    makers = {
        "S1": AnnealedTilt(order=case.order, lam=case.lam),
        "S2": ProductTilt(),
        "S3": SmoothedPotentials(),
    }
    res = {
        "case": asdict(case),
        "family": "discrete",
        "sigmas": sigmas.tolist(),
        "sinkhorn_sweeps": pstar.info["sweeps"],
        "sinkhorn_residual": pstar.info["residual"],
        "kl_pstar_R": kl(pstar, type(pstar).untilted(prior)),
        "dz": prior.dz,
        "surrogates": {},
    }
    for name in case.surrogates:
        laws = makers[name].laws(prior, mu, sigmas, pstar)
        res["surrogates"][name] = _curve(
            laws, pstar, sigmas, case.N, window_of, "window", case.seed, case.tv_samples, enumerable
        )
    if "S3" in case.surrogates and lo < GRID_SIGMA_MAX:
        grid_sig = np.geomspace(GRID_SIGMA_MAX, lo, S3_GRID_POINTS)
        laws = SmoothedPotentials().laws(prior, mu, grid_sig, pstar)
        res["S3_grid"] = _curve(
            laws,
            pstar,
            grid_sig,
            case.N,
            lambda k: np.arange(len(k)),
            "window",
            case.seed,
            case.tv_samples,
            enumerable,
        ) | {"sigmas": grid_sig.tolist()}
    return res


def run_stacked_case(case: StackedCase) -> dict:
    problem = StackedProblem.create((case.n,) * 3, case.stacks, rho_z=case.rho_z)
    pstar = stacked_ipf(problem)
    target = pstar.dense()
    sigmas = edm_sigmas(case.T)[:-1]
    kls = np.array([kl(p, target) for p in stacked_annealed(problem, sigmas, case.lam)])
    n_marg = len(problem.constraints)
    win = gaussian_window(sigmas, kls, GAUSS_WINDOW, KL_FLOOR)
    return {
        "case": asdict(case),
        "family": "stacked",
        "sigmas": sigmas.tolist(),
        "ipf_sweeps": pstar.info["sweeps"],
        "ipf_residual": pstar.info["residual"],
        "n_marginals": n_marg,
        "kl": _nan_list(kls),
        "kl_norm": _nan_list(kls / (n_marg * sigmas**2)),
        "window": [int(i) for i in win],
        "slope": fit_slope(sigmas[win], kls[win]) if len(win) >= 2 else float("nan"),
    }


def run_case(case: "GaussianCase | DiscreteCase | StackedCase") -> dict:
    """One configuration's curves (a module-level function, so processes and Ray can run it)."""
    if isinstance(case, StackedCase):
        return run_stacked_case(case)
    if isinstance(case, GaussianCase):
        return run_gaussian_case(case)
    if isinstance(case, DiscreteCase):
        return run_discrete_case(case)
    raise TypeError(f"case must be a GaussianCase, DiscreteCase or StackedCase, got {type(case).__name__}")


def run_sweep(cases, backend: str = "serial", workers: int | None = None, progress: bool = False) -> list:
    """``[run_case(c) for c in cases]`` through the harness task map (``backend`` as in ``map_tasks``)."""
    check_choice(backend, "backend", ("auto", "serial", "process", "ray"))
    return map_tasks(
        run_case, list(cases), backend=backend, workers=workers, desc="bridge cases", progress=progress
    )


__all__ = ["DiscreteCase", "GaussianCase", "NotPositiveDefiniteError", "StackedCase", "run_case", "run_sweep"]
