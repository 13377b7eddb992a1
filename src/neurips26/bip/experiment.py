"""Reproduction of BIP's allocation claims on the synthetic ArcFace-like gallery (a).

One seed per ``run`` (``ctx.seed`` draws the gallery, the held-out reals and every sampler);
``CONFIGS[scale].seeds`` are the seeds judged together (paired standard errors via harness.paper).
The mini image pipeline (``_image_side``): renderer identities -> FR encoder with an ArcFace head ->
gap allocation among the encoder's real centers -> GapGen stage 0 and the curriculum (and its
baselines) -> image-level collisions, realism, v-LFW protocols 1-4; guarded by ``time_budget_s``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from neurips26.harness import FAILS, INCONCLUSIVE, Claim, RunContext, verdict
from neurips26.harness.paper import fmt_se, judge, mean_se, paired, seed_values
from neurips26.harness.validation import check_choice, check_scalar
from neurips26.bip.allocator import GapAllocator, audit, enrollment_robustness
from neurips26.bip.baselines import (b1_uniform_sphere, b2_in_manifold, b3_rejection, b4_hyperface,
                                     b5_orthogonal)
from neurips26.bip.capacity import containment_fraction, packing_bounds
from neurips26.bip.encoder import EncoderConfig, embed, identity_centers, train_encoder
from neurips26.bip.gallery import (Subspace, impostor_scores, margin, maxcos, maxcos_faiss, pca_report,
                                   synthetic_gallery, tau_far, within_spread)
from neurips26.bip.gapgen import (GapGen, GapGenConfig, frechet_distance, identity_consistency,
                                  image_collisions)
from neurips26.bip.renderer import N_ID, render
from neurips26.bip.vlfw import (all_pair_scores, protocol1, protocol2, protocol3_detector,
                                protocol3_registry, protocol4, tar_at_far)


@dataclass(frozen=True)
class ImageConfig:
    """The mini image pipeline (spec "quick" item 3)."""
    enabled: bool = True
    n_ids: int = 200              # real identities rendered for the enrolled gallery
    n_img: int = 8                # images per real identity
    size: int = 24
    n_test_ids: int = 50          # unseen identities for the encoder's TAR
    n_test_img: int = 4
    encoder: EncoderConfig = EncoderConfig()
    far: float = 1e-3             # image-level impostor FAR for tau_c (ASSUMPTION knob)
    delta: float = 0.05           # tau_m = tau_c - delta (ASSUMPTION: m * rho with m >= 1 is recorded too)
    n_virtual: int = 200
    k_img: int = 4                # provisioned images per virtual
    # a larger draw of the curriculum generator's images per virtual (reported, not judged): the raw count of
    # k_img images is a rare-event count (rate ~1e-4), this draw estimates its rate and the margin to tau_c
    k_tail: int = 32
    n_probe: int = 2              # protocol 4: fresh probe images per enrolled real / provisioned virtual
    alloc_iter: int = 15
    rho_margins: tuple = (1, 2)   # also allocate with tau_m = cos(arccos(tau_c) + m rho) (spec default m = 2)
    rho_batches: int = 4          # batch budget of those allocations
    # stage_epochs 6 (was 3): the generated embeddings' offset from their target is mostly a per-virtual
    # bias of G (cos(mean over z, v) 0.95-0.97 vs a z-spread of cos 0.99), which more epochs at the targets
    # shrink: collision rate 0.74/1.37/0.59% -> 0.33/0.11/0.23% (seeds 0-2, 32 images per virtual, outside
    # the run), consistency 0.925/0.925/0.935 -> 0.964/0.967/0.945
    # + final_lr_decay and 6 extra final-stage epochs (session 13, same stage 0 per seed, outside the run):
    # collision rate over 32 images per virtual 1.74/0.45/0.25% (the session-12 defaults, another draw) ->
    # 0/0/0.016%, lr decay alone 0.016/0.016/0.047%, 6 extra final epochs alone 0/0/0.55%; consistency
    # 0.929/0.946/0.953 -> 0.980/0.977/0.971. Quick keeps the decay only: with the 6 extra epochs the quick
    # run took 314 s on a quiet box (runs/bip/run-q13; 5-minute target), the decay costs nothing
    gapgen: GapGenConfig = GapGenConfig(stage0_epochs=2, stage_epochs=6, sigma_intra=0.03, advance=1.0,
                                        final_lr_decay=True)
    max_redraws: int = 3          # verified provisioning: redraws of an image that collides before a virtual retires
    detector_epochs: int = 2
    # per seed; training loops stop at their epoch boundary past it. A cut makes the image metrics
    # depend on the machine's speed (recorded as budget.cut); smoke has no budget so that the same
    # seed always gives the same metrics.
    # 150 s: the image side takes ~40 s a seed on a quiet 2-core box and 60-100 s at load average ~20,
    # where a 60 s budget cut the GapGen curriculum after its first stage
    time_budget_s: float = 150.0
    # how the budget is counted: "cpu" = this process's CPU seconds (time.process_time), so that the load of
    # other processes (seeds run side by side, other jobs on the box) cannot cut training and change a
    # verdict (session 14: a wall-clock budget cut seed 1 of the lead's quick run, where the encoder took 134 s
    # wall against 9 s on seed 0); "wall" = time.perf_counter
    budget_clock: str = "cpu"


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
    virtual_shards: int = 2       # the sharded virtual index (faiss IndexShards) checked inside the run
    sharded_M: int = 3000         # ... on an allocation of this many virtuals (flat faiss search) ...
    sharded_batch: int = 1000     # ... in batches of this size (later batches search the sharded V)
    b4_n: int = 4000              # B4 packs min(M, b4_n) virtuals (O(n^2 D) per step)
    b4_steps: int = 100
    images: ImageConfig = ImageConfig()
    plots: bool = True
    # torch / faiss intra-op threads inside a seed (None: leave them); with "process" the seeds run side by
    # side, one per core (harness.run_paper; every budget counts CPU seconds, nothing timed is judged)
    threads: int | None = 1
    seed_backend: str = "serial"


CONFIGS = {
    "smoke": Config(seeds=(0,), N=400, N_new=400, M=800, n_iter=5, batch=400, faiss_subset=500, b4_n=200,
                    sharded_M=300, sharded_batch=100,
                    b4_steps=10, far=1e-3, plots=False,
                    images=ImageConfig(n_ids=40, n_img=4, n_test_ids=10, n_virtual=20, k_img=4,
                                       encoder=EncoderConfig(epochs=6), far=1e-2, alloc_iter=3,
                                       gapgen=GapGenConfig(stage0_epochs=1, stage_epochs=1, advance=1.0),
                                       detector_epochs=1, time_budget_s=float("inf"))),
    "quick": Config(seed_backend="process"),
    "full": Config(seeds=tuple(range(5)), N=360_000, N_new=360_000, M=10_000_000, D=512, k=256,
                   far=1e-6, batch=1_000_000, b4_n=4000, threads=None,
                   images=ImageConfig(n_ids=5000, n_img=20, size=32, n_test_ids=1000, n_virtual=25_000,
                                      far=1e-4, encoder=EncoderConfig(epochs=20),
                                      gapgen=GapGenConfig(stage0_epochs=20, stages=3, stage_epochs=10),
                                      time_budget_s=float("inf"))),
}

ZERO = 0                      # collisions allowed for the repulsion allocator
B2_COLLIDE_MIN = 0.10         # B2 (random in-manifold) collision rate must exceed this
RESIDUAL_OK = 1e-6            # residual energy of realizable virtuals
RESIDUAL_HIGH = 0.1           # B1 / B5 mean residual must exceed this
ACCEPT_MIN = 0.9              # first-pass acceptance of every batch up to M = 4N
ROBUST_RATIO = 5.0            # per-identity hit rate: new reals vs reals / vs virtuals
K_SE = 2.0


def run(cfg: Config, ctx: RunContext) -> dict:
    if cfg.threads is None:
        return _run(cfg, ctx)
    try:
        import faiss
    except ImportError:                       # the allocator's torch paths do not need it
        faiss = None
    before = torch.get_num_threads(), faiss.omp_get_max_threads() if faiss else None
    torch.set_num_threads(check_scalar(cfg.threads, "threads", int, min=1))
    if faiss:
        faiss.omp_set_num_threads(cfg.threads)
    try:
        return _run(cfg, ctx)
    finally:
        torch.set_num_threads(before[0])
        if faiss:
            faiss.omp_set_num_threads(before[1])


def _run(cfg: Config, ctx: RunContext) -> dict:
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
    m["sharded"] = _sharded_check(cfg, R, tau_c, tau_m, sub, V, a, ctx.seed)
    m["baselines"] = _baselines(cfg, ctx, R, sub, tau_c)
    m["robustness"] = {"repulsion": enrollment_robustness(new, R, V, tau_c),
                       "b2": enrollment_robustness(new, R, b2_in_manifold(cfg.M, sub, ctx.seed + 1), tau_c)}
    a_frac = containment_fraction(sub, seed=ctx.seed)
    m["capacity"] = packing_bounds(sub.k, cfg.N, tau_c, theta_sep, a=a_frac) | {"a": a_frac, "M": cfg.M}
    if cfg.plots:
        _plots(ctx, rep, alloc, a, m)
    if cfg.images.enabled:
        m["image"] = _image_side(cfg.images, ctx, cfg.plots)
    return m


def _sharded_check(cfg: Config, R, tau_c: float, tau_m: float, sub: Subspace, V, a, seed: int) -> dict:
    """The scale-out virtual index inside the run (``gallery.VirtualIndex``: ``cfg.virtual_shards`` faiss
    ``IndexFlatIP`` shards behind ``IndexShards``, range search shard by shard and merged).

    1. The main allocation's virtuals audited across the shards (the cross-shard audit) must give the
       1-shard audit's collision counts.
    2. An allocation of ``cfg.sharded_M`` virtuals with the faiss flat search, in batches of
       ``cfg.sharded_batch`` (so later batches search the sharded V index), with
       ``GapAllocator(virtual_shards=S)`` and audited with ``shards=S``, must be bitwise the same
       allocation with one shard, with the same audit."""
    S = cfg.virtual_shards
    t0 = time.perf_counter()
    a_s = audit(V, R, tau_c, sub, seed=seed, shards=S)
    out = {"shards": S, "main_audit": {"real_collisions": a_s.real_collisions,
                                       "virtual_collisions": a_s.virtual_collisions},
           "main_audit_equal": (a_s.real_collisions, a_s.virtual_collisions)
           == (a.real_collisions, a.virtual_collisions), "seconds": {"main_audit": time.perf_counter() - t0}}
    n_s = min(cfg.sharded_M, cfg.M)                  # virtuals of the sharded allocation
    b_s = min(cfg.sharded_batch, n_s)                # its batch size
    runs = {}
    for shards in (1, S):
        t0 = time.perf_counter()
        al = GapAllocator(R, tau_c, tau_m, sub, n_iter=cfg.n_iter, batch=b_s,
                          search="flat", virtual_shards=shards, seed=seed)
        Vs = al.allocate(n_s)
        runs[shards] = (Vs, al.audit(seed=seed))
        out["seconds"][f"allocate_{shards}"] = time.perf_counter() - t0
    (v1, a1), (vs, av) = runs[1], runs[S]
    out |= {"n": int(vs.shape[0]), "batches": -(-n_s // b_s),
            "audit": {"real_collisions": av.real_collisions, "virtual_collisions": av.virtual_collisions},
            "audit_one_shard": {"real_collisions": a1.real_collisions, "virtual_collisions": a1.virtual_collisions},
            "equal_to_one_shard": bool(v1.shape == vs.shape and torch.equal(v1, vs))
            and (av.real_collisions, av.virtual_collisions) == (a1.real_collisions, a1.virtual_collisions)}
    return out


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


def _render_ids(n_ids: int, n_img: int, size: int, gen: torch.Generator,
                p: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n_img renderer images of each of n_ids identities p ~ N(0, I_14) (or the given p);
    (images, labels, p)."""
    p = torch.randn(n_ids, N_ID, generator=gen) if p is None else p
    return (render(p.repeat_interleave(n_img, 0), size, gen), torch.arange(n_ids).repeat_interleave(n_img), p)


def _impostor_and_mated(e: torch.Tensor, y: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    s, mated = all_pair_scores(e.numpy().astype(float), y.numpy())
    return s, mated


def _generator_metrics(gg: GapGen, enc, V, R, tau_c, real_feats, k: int) -> tuple[dict, torch.Tensor]:
    """Identity consistency at the virtuals, image-level collisions of the k provisioned images per
    virtual, the feature Frechet distance to the real images; returns (metrics, provisioned images)."""
    ic = identity_consistency(gg, V, k)
    imgs = gg.sample(V, k)
    feats = embed(enc, imgs, features=True)
    emb = torch.nn.functional.normalize(feats, dim=1)                 # = enc(imgs), without a second pass
    hit = (maxcos(emb, R) >= tau_c).view(V.shape[0], k).any(1)        # virtuals with a colliding image
    v_mc = maxcos(V, R)
    return {"ic": float(ic.mean()), "ic_sd": float(ic.std()),
            "collisions": image_collisions(emb, R, tau_c) | {"virtuals": int(hit.sum())},
            "colliding_virtual_maxcos": float(v_mc[hit].mean()) if bool(hit.any()) else None,
            "virtual_maxcos": float(v_mc.mean()),
            "frechet": frechet_distance(real_feats, feats)}, imgs


def _image_side(cfg: ImageConfig, ctx: RunContext, plots: bool) -> dict:
    """The mini image pipeline; every training loop stops at its epoch boundary past the deadline (a value
    of ``clock``: CPU seconds of this process or wall seconds, ``cfg.budget_clock``)."""
    clock = {"cpu": time.process_time, "wall": time.perf_counter}[check_choice(cfg.budget_clock, "budget_clock",
                                                                                 ("cpu", "wall"))]
    t0, c0 = time.perf_counter(), clock()
    deadline = c0 + cfg.time_budget_s
    gen = torch.Generator().manual_seed(ctx.seed + 20_000)
    X, y, p_real = _render_ids(cfg.n_ids, cfg.n_img, cfg.size, gen)
    Xt, yt, _ = _render_ids(cfg.n_test_ids, cfg.n_test_img, cfg.size, gen)
    Xp, yp, _ = _render_ids(cfg.n_ids, cfg.n_probe, cfg.size, gen, p=p_real)   # fresh probes (protocol 4)
    enc, losses = train_encoder(X, y, cfg.encoder, seed=ctx.seed, deadline=deadline, clock=clock)
    t_enc = time.perf_counter() - t0
    e, et = embed(enc, X), embed(enc, Xt)
    st, mt = _impostor_and_mated(et, yt)
    out: dict = {"encoder": {"epochs": len(losses), "loss": losses, "seconds": t_enc,
                             "tar_unseen": {str(f): tar_at_far(st, mt, f) for f in (1e-2, 1e-3)}}}
    # the enrolled gallery in the encoder's space: centers, tau_c from image impostors, spread rho
    R = identity_centers(e, y)
    s, mated = _impostor_and_mated(e, y)
    tau_c = tau_far(torch.as_tensor(s[~mated]), cfg.far)
    rho, _ = within_spread(e, y)
    rep = pca_report(R)
    sub = Subspace(R)
    _, tau_m = margin(tau_c, delta=cfg.delta)
    real_ic = float((e * R[y]).sum(1).mean())
    out["gallery"] = {"tau_c": tau_c, "tau_m": tau_m, "rho": rho, "subspace_k": sub.k,
                      "k": {str(q): v for q, v in rep.k.items()}, "pr": rep.participation_ratio,
                      "tau_m_margin": {str(mm): margin(tau_c, rho, mm)[1] for mm in (1, 2)},
                      "real_level_ic": real_ic}
    # virtual identities in the gaps (acceptance can be low on this tight gallery: floor 0, <= 8 batches)
    alloc = GapAllocator(R, tau_c, tau_m, sub, n_iter=cfg.alloc_iter, batch=cfg.n_virtual, floor=0.0,
                         seed=ctx.seed)
    V = alloc.allocate(cfg.n_virtual, max_batches=8)
    a = alloc.audit(seed=ctx.seed)
    out["allocation"] = {"n": a.n_virtual, "real_collisions": a.real_collisions,
                         "virtual_collisions": a.virtual_collisions,
                         "first_pass": alloc.log[0].acceptance}
    out["allocation_rho_margin"] = _rho_margin_allocation(R, tau_c, rho, sub, cfg, ctx.seed)
    ctx.log(f"bip seed {ctx.seed} images: encoder {t_enc:.0f} s, tau_c={tau_c:.3f} rho={rho:.3f} "
            f"k={sub.k}, {a.n_virtual} virtuals")
    if a.n_virtual < 2:
        out["gapgen"] = {"skipped": f"only {a.n_virtual} virtuals allocated"}
        return out
    # GapGen: stage 0, then the curriculum with and without the non-collision term from the same stage 0
    real_feats = embed(enc, X, features=True)
    g0 = GapGen(enc, R, tau_m, sub.P, cfg.gapgen, size=cfg.size, seed=ctx.seed).train_stage0(X, deadline=deadline,
                                                                                          clock=clock)
    t_s0 = time.perf_counter()
    gc = g0.copy().train_curriculum(V, real_ic, deadline=deadline, clock=clock)
    gn = g0.copy().train_curriculum(V, real_ic, lambda_nc=0.0, deadline=deadline, clock=clock)
    # a training loop can only have stopped early if the deadline passed before the last one ended
    training_cut = clock() > deadline
    gens = {"stage0": g0, "curriculum": gc, "no_nc": gn}
    out["gapgen"], imgs = {}, {}
    for name, gg in gens.items():
        out["gapgen"][name], imgs[name] = _generator_metrics(gg, enc, V, R, tau_c, real_feats, cfg.k_img)
    out["gapgen"]["curriculum"]["history"] = gc.history
    # verified provisioning: every image exactly checked against R before it is provisioned (raw rates above)
    for name in ("stage0", "curriculum"):
        pv = gens[name].provision(V, cfg.k_img, tau_c, cfg.max_redraws)
        n_col = image_collisions(pv["embeddings"], R, tau_c)["count"] if pv["images"].shape[0] else 0
        out["gapgen"][name]["provisioned"] = {"virtuals": int(pv["kept"].sum()),
                                              "retired": int((~pv["kept"]).sum()), "draws": pv["draws"],
                                              "rejected": pv["rejected"], "collisions": n_col}
    b2 = sub.sample(V.shape[0], torch.Generator().manual_seed(ctx.seed + 1))
    out["gapgen"]["curriculum_at_b2"] = image_collisions(embed(enc, gc.sample(b2, cfg.k_img)), R, tau_c)
    # the reference level: images of never-enrolled real identities against the enrolled centers
    out["gapgen"]["unseen_real_images"] = image_collisions(et, R, tau_c)
    # the tail: k_tail images per virtual from the curriculum generator (the expected raw count of k_img
    # images is rate x n_virtual x k_img); margin = tau_c - the largest maxcos to a real center
    if check_scalar(cfg.k_tail, "k_tail", int, min=0):
        tail = image_collisions(embed(enc, gc.sample(V, cfg.k_tail)), R, tau_c)
        out["gapgen"]["curriculum_tail"] = tail | {"k": cfg.k_tail, "margin": tau_c - tail["max_maxcos"],
                                                   "raw_margin": tau_c - out["gapgen"]["curriculum"]
                                                   ["collisions"]["max_maxcos"]}
    out["gapgen"]["seconds"] = {"stage0": t_s0 - t0 - t_enc, "curricula": time.perf_counter() - t_s0}
    # v-LFW protocols 1-4 on the curriculum's provisioned images (k_img per virtual)
    vi = gc.sample(V, cfg.k_img)
    ve, vy = embed(enc, vi), torch.arange(V.shape[0]).repeat_interleave(cfg.k_img)
    fmr_real = float((s[~mated] >= tau_c).mean())
    det, det_s, det_y = protocol3_detector(X, vi, epochs=cfg.detector_epochs, seed=ctx.seed)
    def per_fold(n_ids, k):                   # View-2 at 1/10 scale (30 per fold) where the set allows
        return max(1, min(30, n_ids * k * (k - 1) // 2 // 10))
    out["vlfw"] = {"p1": protocol1(ve.numpy().astype(float), vy.numpy(), seed=ctx.seed,
                                   per_fold=per_fold(V.shape[0], cfg.k_img)),
                   "p1_real_unseen": protocol1(et.numpy().astype(float), yt.numpy(), seed=ctx.seed,
                                               per_fold=per_fold(cfg.n_test_ids, cfg.n_test_img)),
                   "p2": protocol2(e.numpy().astype(float), ve.numpy().astype(float), tau_c, fmr_real),
                   "p3_registry": protocol3_registry(e.numpy().astype(float), ve.numpy().astype(float),
                                                     V.numpy().astype(float), tau_c),
                   "p3_detector": det,
                   "p4": _protocol4(enc, gc, R, V, Xp, yp, et, b2, cfg)}
    out["lfw_subset"] = _lfw_sanity(X, vi, cfg, ctx.seed)
    out["budget"] = {"time_budget_s": cfg.time_budget_s, "clock": cfg.budget_clock,
                     "seconds": time.perf_counter() - t0, "clock_seconds": clock() - c0,
                     "cut": clock() > deadline, "training_cut": training_cut}
    if plots:
        _image_plots(ctx, X, imgs, V, ve, vy, et, yt, det_s, det_y, e, cfg)
    return out


def _rho_margin_allocation(R, tau_c: float, rho: float, sub: Subspace, cfg: ImageConfig, seed: int) -> dict:
    """The spec's default margin on an image gallery: theta_sep = arccos(tau_c) + m rho (m = 1, 2),
    tau_m = cos(theta_sep), with and without density containment (same batches and budget as the
    delta-margin allocation). Records how many virtuals fit and, without containment, which share of
    them lies inside the containment region (the spec's "gaps inside the manifold")."""
    out = {}
    for mm in cfg.rho_margins:
        theta, tau_m = margin(tau_c, rho, mm)
        row = {"theta_sep": theta, "tau_m": tau_m}
        for cont in (True, False):
            al = GapAllocator(R, tau_c, tau_m, sub, n_iter=cfg.alloc_iter, batch=cfg.n_virtual, floor=0.0,
                              containment=cont, seed=seed)
            V = al.allocate(cfg.n_virtual, max_batches=cfg.rho_batches)
            a = al.audit(seed=seed)
            row["contained" if cont else "free"] = {
                "n": a.n_virtual, "real_collisions": a.real_collisions, "virtual_collisions": a.virtual_collisions,
                "first_pass": al.log[0].acceptance,
                "inside_share": float(sub.inside(V).float().mean()) if V.shape[0] else None}
        out[str(mm)] = row
    return out


def _protocol4(enc, gg: GapGen, R, V, Xp, yp, et, b2, cfg: ImageConfig) -> dict:
    """v-LFW protocol 4 (open-set identification against R u V, outputs (identity, is_virtual)).

    Mated probes: fresh renderer images of the enrolled reals (``cfg.n_probe`` each, not the images
    the centers were built from) and fresh GapGen images of the provisioned virtuals (``cfg.n_probe``
    each). Non-mated probes: the unseen real identities' images and GapGen images at as many
    in-manifold points (B2 seeds) that were never enrolled."""
    n_v = V.shape[0]
    pv = embed(enc, gg.sample(V, cfg.n_probe))
    n_nm = max(1, et.shape[0] // cfg.n_probe)
    pn = embed(enc, gg.sample(b2[:n_nm], cfg.n_probe))
    probes = torch.cat([embed(enc, Xp), pv, et, pn]).numpy().astype(float)
    ids = np.r_[yp.numpy(), R.shape[0] + np.repeat(np.arange(n_v), cfg.n_probe),
                -np.ones(et.shape[0] + pn.shape[0], int)]
    isv = np.r_[np.zeros(Xp.shape[0], bool), np.ones(pv.shape[0], bool), np.zeros(et.shape[0], bool),
                np.ones(pn.shape[0], bool)]
    return protocol4(R.numpy().astype(float), V.numpy().astype(float), probes, ids, isv, fpir=(1e-2, 1e-1))


def _lfw_sanity(real_images: torch.Tensor, virtual_images: torch.Tensor, cfg: ImageConfig, seed: int) -> dict:
    """scikit-image's ``lfw_subset`` (100 real 25x25 faces + 100 non-faces, no identity labels), only as
    a sanity set: a face-vs-non-face CNN trained on it must separate its held-out half, and then says
    which share of renderer / GapGen images it takes for faces."""
    try:
        from skimage import data
        lfw = data.lfw_subset()
    except Exception as err:  # noqa: BLE001 - an absent or unreadable data file is a skip, with the reason
        return {"skipped": f"skimage.data.lfw_subset() unavailable: {type(err).__name__}: {err}"}
    x = torch.as_tensor(np.asarray(lfw, dtype=np.float32))[:, None]
    if x.max() > 1:
        x = x / 255.0
    x = torch.nn.functional.interpolate(x, size=(cfg.size, cfg.size), mode="bilinear", align_corners=False)
    x = x.clamp(0, 1)
    faces, nonfaces = x[:100], x[100:]             # the first 100 are faces (skimage docs)
    m, _, _ = protocol3_detector(nonfaces, faces, epochs=max(cfg.detector_epochs, 5), seed=seed,
                                 also={"renderer": real_images[:200], "gapgen": virtual_images[:200]})
    return {"face_vs_nonface_auc": m["auc"], "face_vs_nonface_eer": m["eer"],
            "face_rate": m["also"], "note": "no identity labels: a realism/detector sanity set only"}


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


def _image_plots(ctx, X, imgs, V, ve, vy, et, yt, det_s, det_y, e, cfg) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import roc_curve

    n_show, k = min(6, V.shape[0]), 4
    rows = [("real", X[: n_show * cfg.n_img: cfg.n_img // 2 if cfg.n_img >= 2 else 1][: n_show * 2])]
    rows += [(name, im[: n_show * k]) for name, im in imgs.items()]
    fig, ax = plt.subplots(len(rows), 1, figsize=(n_show * k * 0.55, len(rows) * 0.75))
    for a, (name, im) in zip(np.atleast_1d(ax), rows):
        a.imshow(torch.cat(list(im[:, 0]), 1).numpy(), cmap="gray", vmin=0, vmax=1)
        a.set_axis_off()
        a.set_title(name + (" (2 images of 6 reals each)" if name == "real" else f" ({k} images of 6 virtuals)"),
                    fontsize=7, loc="left")
    ctx.save_plot(fig, "gapgen_grid.png")
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    for name, emb, lab in (("P1 virtual verification", ve, vy), ("real verification (unseen ids)", et, yt)):
        sc, mt = _impostor_and_mated(emb, lab)
        fpr, tpr, _ = roc_curve(mt, sc)
        ax[0].semilogx(np.maximum(fpr, 1e-6), tpr, label=name)
    ax[0].set(title="v-LFW verification ROC", xlabel="FAR", ylabel="TAR", xlim=(1e-5, 1))
    ax[0].legend(fontsize=7)
    fpr, tpr, _ = roc_curve(det_y, det_s)
    ax[1].plot(fpr, tpr, label="P3a image CNN")
    reg = np.concatenate([(e @ V.T).max(1).values.numpy(), (ve @ V.T).max(1).values.numpy()])
    fpr, tpr, _ = roc_curve(np.r_[np.zeros(e.shape[0]), np.ones(ve.shape[0])], reg)
    ax[1].plot(fpr, tpr, label="P3b registry lookup")
    ax[1].plot([0, 1], [0, 1], "k:", lw=0.8)
    ax[1].set(title="real-vs-virtual detection ROC", xlabel="FPR", ylabel="TPR")
    ax[1].legend(fontsize=7)
    ctx.save_plot(fig, "vlfw_roc.png")


# ---- claims -----------------------------------------------------------------------------------

def _all_seeds(m, path) -> list[float]:
    return seed_values(m, path)


def _check_zero(m):
    rc = _all_seeds(m, "repulsion.real_collisions")
    vc = _all_seeds(m, "repulsion.virtual_collisions")
    b2, se, n = mean_se(_all_seeds(m, "baselines.b2.real_collision_rate"))
    # the scale-out path: the same virtuals audited across the sharded virtual index, and a sharded
    # allocation that must be the 1-shard one (sharded.*, see _sharded_check)
    src = _all_seeds(m, "sharded.main_audit.real_collisions")
    svc = _all_seeds(m, "sharded.main_audit.virtual_collisions")
    same = _all_seeds(m, "sharded.main_audit_equal") + _all_seeds(m, "sharded.equal_to_one_shard")
    s_coll = _all_seeds(m, "sharded.audit.real_collisions") + _all_seeds(m, "sharded.audit.virtual_collisions")
    zero = all(x <= ZERO for x in rc + vc + src + svc + s_coll) and all(same)
    b2v = judge(b2, se, n, B2_COLLIDE_MIN, K_SE, "higher")
    v = FAILS if not zero else b2v
    return v, (f"repulsion collisions (real, virtual) max over {len(rc)} seeds = ({max(rc):g}, {max(vc):g}) "
               f"at "
               f"M={get(m, 'capacity.M')}; B2 real-collision rate {fmt_se(b2, se, n)}; the same virtuals "
               f"audited across {get(m, 'sharded.shards'):g} faiss shards: ({max(src):g}, {max(svc):g}); "
               f"a {get(m, 'sharded.shards'):g}-shard allocation of {get(m, 'sharded.n'):g} (flat faiss) is the "
               f"1-shard one on {int(sum(_all_seeds(m, 'sharded.equal_to_one_shard')))} of {len(rc)} seeds, "
               f"max collisions {max(s_coll):g}")


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


def _check_gapgen(m):
    try:
        d, se, n = paired(m, "image.gapgen.curriculum.ic", "image.gapgen.stage0.ic")
        coll = _all_seeds(m, "image.gapgen.curriculum.collisions.count")
        n0 = _all_seeds(m, "image.gapgen.stage0.collisions.count")
        nb2 = _all_seeds(m, "image.gapgen.curriculum_at_b2.count")
        cv = _all_seeds(m, "image.gapgen.curriculum.collisions.virtuals")
        rate_c = _all_seeds(m, "image.gapgen.curriculum.collisions.rate")
        rate_u = _all_seeds(m, "image.gapgen.unseen_real_images.rate")
        prov = {key: _all_seeds(m, f"image.gapgen.curriculum.provisioned.{key}")
                for key in ("collisions", "rejected", "draws", "retired")}
    except KeyError:
        return INCONCLUSIVE, "image pipeline not run (images.enabled = False)"
    try:
        t_rate = _all_seeds(m, "image.gapgen.curriculum_tail.rate")
        t_k = get(m, "image.gapgen.curriculum_tail.k")
        raw_margin = _all_seeds(m, "image.gapgen.curriculum_tail.raw_margin")
        tail = (f"; tail ({t_k:g} images per virtual, reported, not judged): rate "
                f"{', '.join(f'{r:.3%}' for r in t_rate)} per seed, expected raw count "
                f"{', '.join(f'{r * n:.2f}' for r, n in zip(t_rate, _all_seeds(m, 'image.gapgen.curriculum.collisions.n')))}"
                f"; margin tau_c - max maxcos of the raw images "
                f"{', '.join(f'{x:.3g}' for x in raw_margin)}")
    except KeyError:
        tail = ""
    runs = getattr(m, "per_seed", None) or [m]
    cut = [i for i, r in enumerate(runs) if r.get("image", {}).get("budget", {}).get("training_cut")]
    v = judge(d, se, n, 0.0, K_SE, "higher")
    if max(coll) > ZERO:
        v = FAILS
    if cut:                     # training stopped early: the method was not run as configured
        v = INCONCLUSIVE
    return v, (("time budget cut the image side on " + f"{len(cut)} of {n} seeds; " if cut else "") +
               f"identity consistency curriculum - stage 0 = {fmt_se(d, se, n)}; image-level collisions "
               f"at tau_c: curriculum max {max(coll):g} over seeds (from at most {max(cv):g} virtuals; "
               f"stage 0 max {max(n0):g}; the curriculum generator at B2 in-manifold points min {min(nb2):g}), "
               f"of {get(m, 'image.gapgen.curriculum.collisions.n'):g} images; rate {np.mean(rate_c):.2%} vs "
               f"{np.mean(rate_u):.2%} for images of unseen real identities (mean over seeds); verified "
               f"provisioning (each image checked against R, redrawn on a hit): max {max(prov['collisions']):g} "
               f"collisions, {sum(prov['rejected']):g} of {sum(prov['draws']):g} draws redrawn, "
               f"{sum(prov['retired']):g} virtuals retired over seeds (the verdict judges the raw generator)"
               + tail)


def _million(m):
    return INCONCLUSIVE, "1M photorealistic images need a pretrained face generator; not measurable here"


CLAIMS = [
    Claim("zero_collisions",
          f"Repulsion allocation gives {ZERO} real and {ZERO} virtual-virtual collisions (exact audit) "
          f"at M = 4N "
          f"while B2 random in-manifold sampling collides > {B2_COLLIDE_MIN:.0%} (by {K_SE:g} s.e.); "
          f"a 2-shard virtual index reproduces the 1-shard audit, and a 2-shard allocation is bitwise the "
          f"1-shard one with zero collisions",
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
          f"GapGen with curriculum beats stage 0 on identity consistency (by {K_SE:g} s.e.) with "
          f"{ZERO} image-level collisions at tau_c",
          "abstract: GapGen curriculum into non-colliding regions", _check_gapgen),
    Claim("million_images", "1M photorealistic virtual face images",
          "abstract: 1M photorealistic images", _million),
]

VOLATILE_METRICS: tuple[str, ...] = ("repulsion.seconds", "sharded.seconds.*", "baselines.b3.seconds",
                                     "image.encoder.seconds", "image.gapgen.seconds.*", "image.budget.seconds",
                                     "image.budget.clock_seconds")
