"""Reproduction of BIP's allocation claims on the synthetic ArcFace-like gallery (a).

One seed per ``run`` (``ctx.seed`` draws the gallery, the held-out reals and every sampler);
``CONFIGS[scale].seeds`` are the seeds judged together (paired standard errors via harness.paper).
The image side (renderer, encoder, GapGen, v-LFW protocols) is not implemented: its claims are
``inconclusive`` with that reason.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from neurips26.harness import FAILS, INCONCLUSIVE, Claim, RunContext, verdict
from neurips26.harness.paper import fmt_se, judge, mean_se, seed_values
from neurips26.bip.allocator import GapAllocator, enrollment_robustness
from neurips26.bip.baselines import (b1_uniform_sphere, b2_in_manifold, b3_rejection, b4_hyperface,
                                     b5_orthogonal)
from neurips26.bip.capacity import containment_fraction, packing_bounds
from neurips26.bip.gallery import (Subspace, impostor_scores, margin, maxcos, maxcos_faiss, pca_report,
                                   synthetic_gallery, tau_far)


@dataclass(frozen=True)
class Config:
    seeds: tuple = (0, 1, 2)
    N: int = 3000                 # enrolled reals
    N_new: int = 3000             # held-out reals enrolled later
    M: int = 12_000               # virtuals (= 4N)
    D: int = 64
    k: int = 32
    alpha: float = 0.3
    far: float = 1e-4
    delta: float = 0.05           # tau_m = tau_c - delta (center-only gallery)
    n_iter: int = 15
    batch: int = 10_000
    faiss_subset: int = 10_000    # the faiss path is exercised on this many virtuals
    b4_n: int = 4000              # B4 packs min(M, b4_n) virtuals (O(n^2 D) per step)
    b4_steps: int = 100
    plots: bool = True


CONFIGS = {
    "smoke": Config(seeds=(0,), N=400, N_new=400, M=800, n_iter=5, batch=400, faiss_subset=500, b4_n=200,
                    b4_steps=10, far=1e-3, plots=False),
    "quick": Config(),
    "full": Config(seeds=tuple(range(5)), N=360_000, N_new=360_000, M=10_000_000, D=512, k=256,
                   far=1e-6, batch=1_000_000, b4_n=4000),
}

ZERO = 0                      # collisions allowed for the repulsion allocator
B2_COLLIDE_MIN = 0.10         # B2 (random in-manifold) collision rate must exceed this
RESIDUAL_OK = 1e-6            # residual energy of realizable virtuals
RESIDUAL_HIGH = 0.1           # B1 / B5 mean residual must exceed this
ACCEPT_MIN = 0.9              # first-pass acceptance of every batch up to M = 4N
ROBUST_RATIO = 5.0            # per-identity hit rate: new reals vs reals / vs virtuals
K_SE = 2.0


def run(cfg: Config, ctx: RunContext) -> dict:
    torch.manual_seed(ctx.seed)
    R, U = synthetic_gallery(cfg.N, cfg.D, cfg.k, cfg.alpha, seed=ctx.seed)
    new, _ = synthetic_gallery(cfg.N_new, cfg.D, cfg.k, cfg.alpha, seed=ctx.seed + 10_000, basis=U)
    n_pairs = None if cfg.N <= 6000 else int(100 / cfg.far)
    tau_c = tau_far(impostor_scores(R, n_pairs, seed=ctx.seed), cfg.far)
    theta_sep, tau_m = margin(tau_c, delta=cfg.delta)
    rep = pca_report(R)
    sub = Subspace(R)
    ctx.log(f"bip seed {ctx.seed}: tau_c={tau_c:.4f} tau_m={tau_m:.4f} k_0.99={sub.k}")
    m: dict = {"gallery": {"tau_c": tau_c, "tau_m": tau_m, "theta_sep": theta_sep,
                           "k": {str(q): v for q, v in rep.k.items()}, "pr": rep.participation_ratio,
                           "subspace_k": sub.k}}
    t0 = time.perf_counter()
    alloc = GapAllocator(R, tau_c, tau_m, sub, n_iter=cfg.n_iter, batch=cfg.batch, seed=ctx.seed)
    V = alloc.allocate(cfg.M)
    seconds = time.perf_counter() - t0
    a = alloc.audit(seed=ctx.seed)
    m["repulsion"] = {"n": a.n_virtual, "real_collisions": a.real_collisions,
                      "virtual_collisions": a.virtual_collisions,
                      "subset_virtual_collisions": a.subset_virtual_collisions,
                      "max_residual": a.max_residual, "outside_containment": a.outside_containment,
                      "acceptance": [b.acceptance for b in alloc.log],
                      "min_acceptance": min(b.acceptance for b in alloc.log),
                      "mean_maxcos_real": float(a.maxcos_real.mean()), "seconds": seconds}
    n_f = min(cfg.faiss_subset, V.shape[0])
    m["faiss_check"] = {"n": n_f, "max_abs_diff": float((maxcos_faiss(V[:n_f], R) - maxcos(V[:n_f], R))
                                                        .abs().max())}
    m["baselines"] = _baselines(cfg, ctx, R, sub, tau_c)
    m["robustness"] = {"repulsion": enrollment_robustness(new, R, V, tau_c),
                       "b2": enrollment_robustness(new, R, b2_in_manifold(cfg.M, sub, ctx.seed + 1), tau_c)}
    a_frac = containment_fraction(sub, seed=ctx.seed)
    m["capacity"] = packing_bounds(sub.k, cfg.N, tau_c, theta_sep, a=a_frac) | {"a": a_frac, "M": cfg.M}
    if cfg.plots:
        _plots(ctx, rep, alloc, a, m)
    return m


def _rates(V: torch.Tensor, R: torch.Tensor, sub: Subspace, tau_c: float) -> dict:
    mc = maxcos(V, R)
    vv = maxcos(V, V, exclude_self=True)
    return {"n": int(V.shape[0]), "real_collision_rate": float((mc >= tau_c).float().mean()),
            "virtual_collision_rate": float((vv >= tau_c).float().mean()),
            "mean_residual": float(sub.residual(V).mean()), "mean_maxcos_real": float(mc.mean())}


def _baselines(cfg: Config, ctx: RunContext, R, sub, tau_c) -> dict:
    s = ctx.seed
    out = {"b1": _rates(b1_uniform_sphere(cfg.M, cfg.D, s + 1), R, sub, tau_c),
           "b2": _rates(b2_in_manifold(cfg.M, sub, s + 1), R, sub, tau_c),
           "b5": _rates(b5_orthogonal(cfg.M, sub, s + 1), R, sub, tau_c)}
    t0 = time.perf_counter()
    kept, curve = b3_rejection(cfg.M, R, sub, tau_c, batch=cfg.batch, seed=s + 1)
    out["b3"] = _rates(kept, R, sub, tau_c) | {"acceptance": curve, "seconds": time.perf_counter() - t0}
    b4 = b4_hyperface(min(cfg.M, cfg.b4_n), R, sub, steps=cfg.b4_steps, seed=s + 1)
    out["b4"] = _rates(b4, R, sub, tau_c)
    return out


def _plots(ctx, rep, alloc, a, m) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(13, 3.5))
    ax[0].semilogy(np.arange(1, rep.eigvals.size + 1), rep.eigvals, ".-")
    ax[0].set(title="PCA spectrum of real centers", xlabel="index", ylabel="eigenvalue")
    ax[1].hist(a.maxcos_real, 60, alpha=0.7, label="repulsion")
    ax[1].axvline(m["gallery"]["tau_c"], color="k", ls="--", label="tau_c")
    ax[1].set(title="maxcos(v, R)", xlabel="cos")
    ax[1].legend()
    ax[2].plot(np.cumsum([b.size for b in alloc.log]), [b.acceptance for b in alloc.log], "o-",
               label="repulsion")
    b3 = m["baselines"]["b3"]["acceptance"]
    ax[2].plot(np.arange(1, len(b3) + 1) * alloc.batch, b3, "s-", label="B3 rejection")
    ax[2].set(title="acceptance vs proposals", xlabel="candidates", ylim=(0, 1.05))
    ax[2].legend()
    ctx.save_plot(fig, "allocation.png")


# ---- claims -----------------------------------------------------------------------------------

def _all_seeds(m, path) -> list[float]:
    return seed_values(m, path)


def _check_zero(m):
    rc = _all_seeds(m, "repulsion.real_collisions")
    vc = _all_seeds(m, "repulsion.virtual_collisions")
    b2, se, n = mean_se(_all_seeds(m, "baselines.b2.real_collision_rate"))
    zero = all(x <= ZERO for x in rc + vc)
    b2v = judge(b2, se, n, B2_COLLIDE_MIN, K_SE, "higher")
    v = FAILS if not zero else b2v
    return v, (f"repulsion collisions (real, virtual) max over {len(rc)} seeds = ({max(rc):g}, {max(vc):g}) "
               f"at "
               f"M={get(m, 'capacity.M')}; B2 real-collision rate {fmt_se(b2, se, n)}")


def get(m, path):
    from neurips26.harness.paper import get_path
    return get_path(m, path)


def _check_residual(m):
    res = max(_all_seeds(m, "repulsion.max_residual"))
    b1 = min(_all_seeds(m, "baselines.b1.mean_residual"))
    b5 = min(_all_seeds(m, "baselines.b5.mean_residual"))
    return verdict(res <= RESIDUAL_OK and b1 >= RESIDUAL_HIGH and b5 >= RESIDUAL_HIGH), \
        f"repulsion max residual {res:.2g}; B1 mean {b1:.3g}, B5 mean {b5:.3g} (min over seeds)"


def _check_acceptance(m):
    acc = min(_all_seeds(m, "repulsion.min_acceptance"))
    return verdict(acc >= ACCEPT_MIN), f"min first-pass batch acceptance up to M = 4N: {acc:.3f} (all seeds)"


def _check_robust(m):
    r, se, n = mean_se(_all_seeds(m, "robustness.repulsion.ratio"))
    a, _, _ = mean_se(_all_seeds(m, "robustness.repulsion.hit_virtual"))
    b, _, _ = mean_se(_all_seeds(m, "robustness.repulsion.hit_real"))
    return judge(r, se, n, ROBUST_RATIO, K_SE, "higher"), \
        f"per-identity ratio {fmt_se(r, se, n)} ((a) = {a:.3f}, (b) = {b:.3f})"


def _check_capacity(m):
    lo = min(_all_seeds(m, "capacity.lower"))
    return verdict(lo >= get(m, "capacity.M")), f"greedy lower bound {lo:.3g} vs M = {get(m, 'capacity.M')}"


def _image_side(m):
    return INCONCLUSIVE, ("not measured: only the renderer and the ArcFace head exist; missing are the "
                          "small conv FR encoder trained on renderer images "
                          "(200 ids x 8 at 24x24, 5 epochs), "
                          "the check-8 TAR test, v-LFW protocols 1-3 on images, GapGen stage 0 "
                          "(feature-to-face) and the curriculum with its image-level collision audit")


def _million(m):
    return INCONCLUSIVE, "1M photorealistic images need a pretrained face generator; not measurable here"


CLAIMS = [
    Claim("zero_collisions",
          f"Repulsion allocation gives {ZERO} real and {ZERO} virtual-virtual collisions (exact audit) "
          f"at M = 4N "
          f"while B2 random in-manifold sampling collides > {B2_COLLIDE_MIN:.0%} (by {K_SE:g} s.e.)",
          "abstract: 10M virtuals, 0 collisions vs 360K reals", _check_zero),
    Claim("realizable_residual",
          f"Repulsion virtuals have residual energy <= {RESIDUAL_OK:g} while B1/B5 exceed {RESIDUAL_HIGH:g}",
          "abstract: no usable orthogonal room; gaps inside the real manifold", _check_residual),
    Claim("acceptance_up_to_4N",
          f"First-pass acceptance stays >= {ACCEPT_MIN} up to M = 4N",
          "abstract: allocation not bounded by a fixed count", _check_acceptance),
    Claim("gap_capacity",
          "The greedy lower packing bound on gap capacity is >= M = 4N",
          "abstract: gaps vastly exceed any foreseeable enrollment scale", _check_capacity),
    Claim("enrollment_robustness",
          f"New reals hit virtuals at a per-identity rate >= {ROBUST_RATIO:g}x lower than they hit reals",
          "abstract: provisioned ids stay non-colliding under later enrollment", _check_robust),
    Claim("gapgen_curriculum",
          "GapGen with curriculum beats stage 0 on identity consistency with 0 image-level collisions",
          "abstract: GapGen curriculum into non-colliding regions", _image_side),
    Claim("million_images", "1M photorealistic virtual face images",
          "abstract: 1M photorealistic images", _million),
]

VOLATILE_METRICS: tuple[str, ...] = ("repulsion.seconds", "baselines.b3.seconds")
