"""SMFSR at laptop scale: teacher -> SplitMeanFlow (1 NFE) -> GAN + VSD, against the baselines.

quick: grey HR 16 x 16 / LR 4 x 4 pairs cut from Real-ESRGAN-degraded 64 x 64 crops of the skimage /
sklearn training images, ``mlp`` backbone, batch 128; teacher 1,200 steps, SplitMeanFlow 1,200, GAN 300;
baselines bicubic, direct LR -> HR (start="lr", stage-2 losses, as many steps as the GAN stage),
teacher 20-step and 1-step Euler, MeanFlow-JVP trained for the (CPU) seconds the SplitMeanFlow
stage took. Evaluation on 1K test pairs (astronaut, coffee, chelsea, china, flower) with K = 8 noise
seeds shared by every stochastic method (so differences are paired per noise seed).

Verdicts over seeds: with several run seeds (``run_paper(..., seeds=...)``) a claim's per-seed values
are the run seeds' means; with one run seed they are the K noise seeds of that run (evaluation noise
only: the training noise of one run is not covered — the README says which).
"""

from __future__ import annotations

import copy
import itertools
import time
from dataclasses import dataclass

import numpy as np
import torch

from neurips26.harness.paper import (Claim, INCONCLUSIVE, fmt_se, get_path, judge, mean_se, seed_values, verdict)
from neurips26.harness.validation import check_choice
from neurips26.smfsr.base import bicubic_sr
from neurips26.smfsr.bench import stand_in_features
from neurips26.smfsr.data import PoolConfig, get_pool
from neurips26.smfsr.metrics import fid, gmsd, haarpsi, hf_ratio, kid, ms_ssim, psnr, ssim, swd
from neurips26.smfsr.models import build_backbone, make_student
from neurips26.smfsr.refine import RefineConfig, refine
from neurips26.smfsr.resshift import ResShiftSchedule, resshift_sample, sinsr_sample, train_resshift, train_sinsr
from neurips26.smfsr.sampler import adain_color_fix, diversity, reference_stats, super_resolve
from neurips26.smfsr.training import train_meanflow, train_splitmeanflow, train_teacher

# verdict thresholds (config knobs of the claims; used by statements and checks alike)
HF_BLURRY = 0.5          # "HF ratio << 1"
WITHIN = 0.25            # "within ~25%" of teacher-20 on SWD and HF ratio
JVP_SLACK = 1.05         # "SplitMeanFlow >= MeanFlow-JVP": SWD no worse than 1.05 x JVP's
PSNR_COST_DB = 1.0       # stage 2 costs <= 1 dB PSNR
K_SE = 2.0               # judge: beyond k standard errors
MIN_TRAINED = 0.5        # a claim on a stage that ran < this fraction of its planned steps is inconclusive

# stage-2 ablations (spec baseline 6): each a RefineConfig override, trained from the same stage-1 EMA with
# the same seed as the full stage 2 (so the differences are paired)
ABLATIONS = {"no_vsd": {"lam_vsd": 0.0}, "no_adv": {"lam_adv": 0.0}, "patchgan": {"discriminator": "patchgan"}}

BUDGET_CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}

VOLATILE_METRICS = ("seconds.*", "train.*.seconds", "train.*.stopped_by_time", "budget.*", "pool.*.seconds",
                    "pool.*.cached")


# ---------------------------------------------------------------------------- configs
@dataclass(frozen=True)
class DataConfig:
    channels: int = 1
    patch: int = 16          # HR patch side (LR = patch / 4)
    crop: int = 64           # degraded crop side
    n_train: int = 20000
    n_test: int = 1000


@dataclass(frozen=True)
class TrainConfig:
    batch: int = 128
    lr: float = 1e-3
    teacher_steps: int = 1200
    smf_steps: int = 1200
    gan_steps: int = 300
    jvp_steps: int | None = None  # None: MeanFlow-JVP gets the SplitMeanFlow stage's seconds (budget clock)
    p_bnd: float = 0.5       # ASSUMPTION
    p_one: float = 0.1       # ASSUMPTION
    boundary: str = "teacher"  # ASSUMPTION: frozen-teacher boundary targets ("data": eps - x)
    ema: float = 0.999
    ema_warmup: bool = True  # ASSUMPTION: d_n = min(0.999, (1 + n) / (10 + n)); without it the 0.999 EMA of
                             # a 1,200-step stage keeps 30% of the teacher init (training.EMA)
    refine: RefineConfig = RefineConfig()
    ablations: tuple = ()    # names in ABLATIONS run after stage 2 (quick: none, for the time budget)
    resshift: bool = False   # the ResShift (T = 15) and SinSR (1 step) baselines (smoke, mid, full; not quick:
                             # under load quick's 170 CPU s are spent before them, 0 steps in the h12 run)
    resshift_steps: int | None = None  # None: the teacher's step count (both are trained from scratch alike)
    sinsr_steps: int | None = None     # None: the SplitMeanFlow stage's seconds (equal-time distillation,
                                       # as MeanFlow-JVP; a SinSR step rolls the 15-step teacher out)
    resshift_schedule: ResShiftSchedule = ResShiftSchedule()


@dataclass(frozen=True)
class EvalConfig:
    k_seeds: int = 8         # noise seeds per LR (diversity; the paired samples of the verdicts)
    teacher_steps: int = 20
    n_diversity: int = 1000  # LR inputs on which diversity is computed (all of the quick test pool)
    swd_max_desc: int = 2048  # SWD descriptors per level (budget knob; None = all, PGGAN)
    swd_repeats: int = 1      # SWD repeats (PGGAN: 4)
    swd_dirs: int = 128       # SWD random projections per repeat (PGGAN: 512)


@dataclass(frozen=True)
class BudgetShares:
    """The fraction of ``time_budget_s`` each training stage may use, counted cumulatively (a stage that
    finishes early hands its time on; MeanFlow-JVP gets the seconds the SplitMeanFlow stage took); on a
    slow machine every stage is shortened, not only the last ones."""
    teacher: float = 0.2
    smf: float = 0.25
    jvp: float = 0.25        # booked for the JVP baseline, which trains for the seconds stage 1 took
    gan: float = 0.2         # a GAN step (discriminator, VSD, MS-SSIM) costs ~10 stage-1 steps: on a
    direct: float = 0.1      # loaded box these two are cut first (their claims then say so)
    ablation: float = 0.2    # each stage-2 ablation (only when ``TrainConfig.ablations`` asks for them)
    resshift: float = 0.1    # the ResShift baseline (from scratch, the teacher's steps)
    sinsr: float = 0.15      # booked for SinSR, which trains for the seconds stage 1 took


@dataclass(frozen=True)
class Config:
    backbone: str = "mlp"
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    eval: EvalConfig = EvalConfig()
    time_budget_s: float = 170.0
    budget: BudgetShares = BudgetShares()
    seeds: tuple = (0,)
    budget_clock: str = "cpu"  # "cpu" (process CPU seconds) or "wall"; see _run
    # how run_paper runs the seeds when no backend is asked for: "process" runs them side by side on the cores
    # (each seed is independent and its budget is counted in its own CPU seconds, so nothing timed changes)
    seed_backend: str = "serial"
    threads: int | None = 1  # torch intra-op threads (None: leave torch's setting): a 256-wide MLP at batch 128 is 30x slower with 2
                             # threads than with 1 on a shared 2-core box (measured: 109 vs 3.4 ms a forward)


CONFIGS = {
    "smoke": Config(data=DataConfig(n_train=256, n_test=32),
                    train=TrainConfig(batch=32, teacher_steps=10, smf_steps=10, gan_steps=2, jvp_steps=5,
                                      ablations=tuple(ABLATIONS), resshift=True, resshift_steps=5, sinsr_steps=3),
                    eval=EvalConfig(k_seeds=2, teacher_steps=3, n_diversity=16, swd_max_desc=256),
                    time_budget_s=600.0),
    # verdicts over 3 training seeds (each with K = 8 noise seeds), run side by side
    "quick": Config(seeds=(0, 1, 2), seed_backend="process"),
    # quick plus the stage-2 ablations and the ResShift / SinSR baselines, the budget grown by their shares
    # (0.2 x 3 + 0.1 + 0.15 of quick's 170 s)
    "mid": Config(seeds=(0, 1, 2), seed_backend="process",
                  train=TrainConfig(ablations=tuple(ABLATIONS), resshift=True),
                  time_budget_s=170.0 * 1.85),
    "full": Config(backbone="dit",
                   data=DataConfig(channels=3, patch=64, crop=256, n_train=100000, n_test=2000),
                   train=TrainConfig(teacher_steps=30000, smf_steps=30000, gan_steps=10000,
                                     ablations=tuple(ABLATIONS), resshift=True,
                                     refine=RefineConfig(disc_img=64, fake_lr=1e-4)),
                   eval=EvalConfig(teacher_steps=20), time_budget_s=float("inf"), seeds=(0, 1, 2),
                   threads=None),
}


# ---------------------------------------------------------------------------- run
def run(cfg: Config, ctx) -> dict:
    before = torch.get_num_threads()
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    try:
        return _run(cfg, ctx)
    finally:
        torch.set_num_threads(before)


def _run(cfg: Config, ctx) -> dict:
    seed = ctx.seed
    torch.manual_seed(seed)
    d, tr = cfg.data, cfg.train
    pools = {}  # built (or read from the cache) before the training clock starts
    for split, n in (("train", d.n_train), ("test", d.n_test)):
        pc = PoolConfig(split=split, n=n, channels=d.channels, crop=d.crop, patch=d.patch,
                        seed=0 if split == "train" else 1)
        pools[split] = get_pool(pc, backend="auto")  # an uncached build uses the CPUs' processes
        how = "cached" if pools[split].cached else f"built in {pools[split].seconds:.1f}s"
        ctx.log(f"smfsr: {split} pool {n} pairs ({how})")
    train_pool, test = pools["train"], pools["test"]

    # time_budget_s counts training only, never pool synthesis, on ``BUDGET_CLOCKS[cfg.budget_clock]``:
    # "cpu" = this process's CPU seconds (one torch thread: the compute a stage got, whatever else runs
    # on the machine), "wall" = wall-clock seconds
    clock = BUDGET_CLOCKS[check_choice(cfg.budget_clock, "budget_clock", tuple(BUDGET_CLOCKS))]
    wall0 = time.perf_counter()
    t_start = clock()
    deadline = t_start + cfg.time_budget_s

    planned = [t_start]

    def until(share: float) -> float:
        """A stage's deadline: the end of its share of the budget counted cumulatively from the start
        (time a fast earlier stage left unused rolls over), at least its own share from now, within
        the whole budget."""
        planned[0] += share * cfg.time_budget_s
        return min(deadline, max(planned[0], clock() + share * cfg.time_budget_s))

    teacher = build_backbone(cfg.backbone, d.channels, d.patch)
    t_log = train_teacher(teacher, train_pool, tr.teacher_steps, tr.batch, tr.lr, seed,
                          until(cfg.budget.teacher), clock=clock)
    ctx.log(f"smfsr: teacher {t_log.steps} steps {t_log.seconds:.1f}s")
    student = make_student(teacher)
    ema, s_log = train_splitmeanflow(student, teacher, train_pool, tr.smf_steps, tr.batch, tr.lr, tr.p_bnd,
                                     tr.p_one, tr.boundary, False, tr.ema, seed + 1,
                                     deadline=until(cfg.budget.smf), ema_warmup=tr.ema_warmup, clock=clock)
    smf1 = ema.model
    ctx.log(f"smfsr: SplitMeanFlow {s_log.steps} steps {s_log.seconds:.1f}s")
    # equal time on the budget clock (smoke: a fixed step count, so that two runs of one seed agree)
    jvp_seconds = s_log.seconds if tr.jvp_steps is None else None
    jvp_ema, j_log = train_meanflow(make_student(teacher), train_pool, tr.jvp_steps, jvp_seconds,
                                    batch=tr.batch, lr=tr.lr, ema_decay=tr.ema, seed=seed + 1,
                                    deadline=deadline, ema_warmup=tr.ema_warmup, clock=clock)
    until(cfg.budget.jvp)  # its share is booked; only the whole budget may cut the equal-time baseline
    ctx.log(f"smfsr: MeanFlow-JVP {j_log.steps} steps in the same {j_log.seconds:.1f}s")
    smf2, g_log, g_parts = refine(smf1, teacher, train_pool, tr.gan_steps, tr.batch, tr.refine, seed + 2,
                                  until(cfg.budget.gan), clock=clock)
    direct, dr_log, _ = refine(make_student(teacher), teacher, train_pool, tr.gan_steps, tr.batch,
                               RefineConfig(**{**tr.refine.__dict__, "start": "lr"}), seed + 3,
                               until(cfg.budget.direct), clock=clock)
    ctx.log(f"smfsr: GAN {g_log.steps} steps, direct {dr_log.steps} steps")
    ablated, ab_train = {}, {}
    for name in tr.ablations:
        if name not in ABLATIONS:
            raise ValueError(f"unknown ablation {name!r}; choose from {sorted(ABLATIONS)}")
        a_cfg = RefineConfig(**{**tr.refine.__dict__, **ABLATIONS[name]})
        ablated[f"smf2_{name}"], a_log, _ = refine(smf1, teacher, train_pool, tr.gan_steps, tr.batch, a_cfg,
                                                  seed + 2, until(cfg.budget.ablation), clock=clock)
        ab_train[f"ablation_{name}"] = {**a_log.summary(), "seconds": a_log.seconds, "planned": tr.gan_steps}
        ctx.log(f"smfsr: stage-2 ablation {name}: {a_log.steps} steps")
    rs_train, samplers = {}, {}
    if tr.resshift:
        sched = tr.resshift_schedule
        rs = build_backbone(cfg.backbone, d.channels, d.patch)
        rs_steps = tr.teacher_steps if tr.resshift_steps is None else tr.resshift_steps
        r_log = train_resshift(rs, train_pool, rs_steps, tr.batch, tr.lr, sched, seed + 4,
                               deadline=until(cfg.budget.resshift), clock=clock)
        sin = copy.deepcopy(rs)  # SinSR's student starts from the ResShift teacher
        sin_seconds = s_log.seconds if tr.sinsr_steps is None else None
        n_log = train_sinsr(sin, rs, train_pool, tr.sinsr_steps, tr.batch, tr.lr, sched, seed + 5,
                            deadline=until(cfg.budget.sinsr), clock=clock, seconds=sin_seconds)
        rs_train = {"resshift": {**r_log.summary(), "seconds": r_log.seconds, "planned": rs_steps},
                    "sinsr": {**n_log.summary(), "seconds": n_log.seconds}}
        ctx.log(f"smfsr: ResShift {r_log.steps} steps, SinSR {n_log.steps} steps in {n_log.seconds:.1f}s")
        stats = reference_stats(test.lr)  # the same AdaIN colour fix as every other sampler

        def fixed(x):
            return adain_color_fix(x, ref_stats=stats).clamp_(0, 1)

        calls = itertools.count()  # one per evaluation noise: each sample gets its own per-step noise

        samplers = {f"resshift_{sched.steps}": lambda eps: fixed(resshift_sample(
                        rs, test.lr, sched, noise=eps,
                        generator=torch.Generator().manual_seed(1000 * seed + next(calls)), clamp=False)),
                    "sinsr": lambda eps: fixed(sinsr_sample(sin, test.lr, sched, noise=eps, clamp=False))}
    train_seconds = clock() - t_start
    train_wall = time.perf_counter() - wall0

    methods = evaluate(cfg, test, teacher, smf1, smf2, jvp_ema.model, direct, seed, smf1_raw=student,
                       extra=ablated, samplers=samplers)
    samples = methods.pop("_samples")
    flat_frac = methods.pop("_flat_frac")
    if ctx.scale != "smoke":  # plots cost seconds the contract's smoke run does not have
        plots(ctx, test, samples)
        perception_distortion_plot(ctx, methods)
    return {
        "methods": methods,
        "train": {"teacher": {**t_log.summary(), "seconds": t_log.seconds, "planned": tr.teacher_steps},
                  "smf": {**s_log.summary(), "seconds": s_log.seconds, "planned": tr.smf_steps},
                  "meanflow_jvp": {**j_log.summary(), "seconds": j_log.seconds},
                  "gan": {**g_log.summary(), "seconds": g_log.seconds, "parts": g_parts,
                          "planned": tr.gan_steps},
                  "direct": {**dr_log.summary(), "seconds": dr_log.seconds, "planned": tr.gan_steps},
                  **ab_train, **rs_train},
        "pool": {"train": {"n": len(train_pool), "cached": train_pool.cached, "seconds": train_pool.seconds},
                 "test": {"n": len(test), "cached": test.cached, "seconds": test.seconds}},
        "budget": {"time_budget_s": cfg.time_budget_s, "clock": cfg.budget_clock, "train_seconds": train_seconds,
                   "train_wall_seconds": train_wall, "exceeded": bool(clock() > deadline)},
        "seconds": {"total": time.perf_counter() - wall0},
        "eval": {"flat_lr_frac": flat_frac, "n_diversity": min(cfg.eval.n_diversity, len(test))},
        "nfe": {"bicubic": 0, "direct": 1, "teacher_1": 1, "teacher_20": cfg.eval.teacher_steps, "smf1": 1,
                "smf2": 1, "meanflow_jvp": 1,
                **({f"resshift_{tr.resshift_schedule.steps}": tr.resshift_schedule.steps, "sinsr": 1}
                   if tr.resshift else {})},
    }


PER_NOISE = ("psnr", "swd", "hf_ratio")                        # the claims' metrics: every noise seed
ONCE = ("ssim", "ms_ssim", "gmsd", "haarpsi", "fid", "kid")       # reported on the first noise seed


def _claim_scores(sr, hr, seed, ev: EvalConfig) -> dict:
    return {"psnr": float(psnr(sr, hr).mean()),
            "swd": swd(sr, hr, seed=seed, dirs=ev.swd_dirs, repeats=ev.swd_repeats,
                       max_desc=ev.swd_max_desc)["mean"],
            "hf_ratio": hf_ratio(sr, hr)}


def _other_scores(sr, hr, feats_hr) -> dict:
    f = stand_in_features(sr)
    return {"ssim": float(ssim(sr, hr).mean()), "ms_ssim": float(ms_ssim(sr, hr).mean()),
            "gmsd": float(gmsd(sr, hr).mean()), "haarpsi": float(haarpsi(sr, hr).mean()),
            "fid": fid(f, feats_hr), "kid": kid(f, feats_hr)}


def evaluate(cfg: Config, test, teacher, smf1, smf2, jvp, direct, seed: int, smf1_raw=None,
             extra: dict | None = None, samplers: dict | None = None) -> dict:
    """Every method on the test pool; stochastic ones over K shared noise seeds (``per_noise`` lists of
    the claims' metrics; the other metrics on the first noise seed)."""
    hr, lr = test.hr, test.lr
    K, nd = cfg.eval.k_seeds, min(cfg.eval.n_diversity, len(test))
    feats_hr = stand_in_features(hr)
    gen = torch.Generator().manual_seed(10_000 + seed)
    noises = [torch.randn(hr.shape, generator=gen) for _ in range(K)]
    runners = {
        "bicubic": lambda eps: bicubic_sr(lr),
        "direct": lambda eps: super_resolve(direct, lr, 1, start="lr"),
        "teacher_1": lambda eps: super_resolve(teacher, lr, 1, noise=eps),
        "teacher_20": lambda eps: super_resolve(teacher, lr, cfg.eval.teacher_steps, noise=eps),
        "meanflow_jvp": lambda eps: super_resolve(jvp, lr, 1, noise=eps),
        "smf1": lambda eps: super_resolve(smf1, lr, 1, noise=eps),
        "smf2": lambda eps: super_resolve(smf2, lr, 1, noise=eps),
        "smf1_lr_start": lambda eps: super_resolve(smf1, lr, 1, start="lr"),
    }
    if smf1_raw is not None:  # stage 1's raw (non-EMA) weights: how much the EMA lags
        runners["smf1_raw"] = lambda eps: super_resolve(smf1_raw, lr, 1, noise=eps)
    for name, model in (extra or {}).items():  # stage-2 ablations (1 NFE from noise)
        runners[name] = lambda eps, model=model: super_resolve(model, lr, 1, noise=eps)
    runners.update(samplers or {})  # other noise-started samplers eps -> SR (ResShift, SinSR)
    deterministic = ("bicubic", "direct", "smf1_lr_start")  # no noise input: scored once, repeated K times
    # AdaIN maps an output onto its reference's per-channel mean and std, so for an LR whose bicubic
    # reference is flat (std 0: e.g. a black 4 x 4 patch) every sample becomes that constant: zero
    # diversity by the colour fix's definition, whatever the generator did. Diversity is therefore also
    # reported before the colour fix (``diversity_raw``) and over the non-flat LR inputs.
    # flat = what AdaIN sees as flat: the reference std it uses is exactly 0 (a constant LR; computed
    # from F.interpolate's float output a constant 1/255 patch has std 4e-10 instead, by rounding)
    flat = reference_stats(lr[:nd])[1].flatten(1).amax(1) == 0
    raw_runners = {
        "smf1": lambda eps: super_resolve(smf1, lr, 1, noise=eps, color=None),
        "smf2": lambda eps: super_resolve(smf2, lr, 1, noise=eps, color=None),
        "smf1_lr_start": lambda eps: super_resolve(smf1, lr, 1, start="lr", color=None),
        "direct": lambda eps: super_resolve(direct, lr, 1, start="lr", color=None),
    }
    out, samples = {}, {}
    for name, fn in runners.items():
        per = {k: [] for k in PER_NOISE}
        srs = []
        for k, eps in enumerate(noises):
            sr = fn(eps)
            srs.append(sr[:nd])
            if k == 0:
                once = _other_scores(sr, hr, feats_hr)
            sc = ({key: v[0] for key, v in per.items()} if name in deterministic and k > 0
                  else _claim_scores(sr, hr, seed + k, cfg.eval))
            for key, val in sc.items():
                per[key].append(val)
        stack = torch.stack(srs)
        div = diversity(stack)
        out[name] = {**{key: float(np.mean(v)) for key, v in per.items()}, **once, "per_noise": per,
                     "diversity": float(div.mean()), "diversity_min": float(div.min()),
                     "diversity_min_nonflat": float(div[~flat].min()) if (~flat).any() else float("nan"),
                     "zero_diversity_frac": float((div == 0).double().mean()),
                     "zero_diversity_on_flat_only": bool(torch.all(flat[div == 0]))}
        if name in raw_runners:  # the generator's own spread, before AdaIN (1 NFE each: cheap)
            raw = diversity(torch.stack([raw_runners[name](eps)[:nd] for eps in noises]))
            out[name].update(diversity_raw=float(raw.mean()), diversity_raw_min=float(raw.min()))
        samples[name] = stack[:, :8]
    out["_samples"] = samples
    out["_flat_frac"] = float(flat.double().mean())
    return out


# ---------------------------------------------------------------------------- plots
def plots(ctx, test, samples) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["bicubic", "direct", "teacher_1", "teacher_20", "meanflow_jvp", "smf1", "smf2"]
    fig, ax = plt.subplots(6, len(names) + 1, figsize=(1.4 * (len(names) + 1), 1.4 * 6))
    for i in range(6):
        ax[i, 0].imshow(test.hr[i, 0], cmap="gray", vmin=0, vmax=1)
        for j, n in enumerate(names):
            ax[i, j + 1].imshow(samples[n][0, i, 0], cmap="gray", vmin=0, vmax=1)
    for j, n in enumerate(["HR"] + names):
        ax[0, j].set_title(n, fontsize=7)
    for a in ax.flat:
        a.axis("off")
    ctx.save_plot(fig, "sr_crops")
    fig, ax = plt.subplots(1, 4, figsize=(8, 2.2))
    for j, n in enumerate(["teacher_20", "smf1", "smf2", "direct"]):
        ax[j].imshow(samples[n][:, 0, 0].std(0) * 255, cmap="magma")
        ax[j].set_title(f"{n} std x255", fontsize=7)
        ax[j].axis("off")
    ctx.save_plot(fig, "diversity_maps")


def perception_distortion_plot(ctx, methods) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    for n, m in methods.items():
        ax.scatter(m["psnr"], m["swd"])
        ax.annotate(n, (m["psnr"], m["swd"]), fontsize=7)
    ax.set_xlabel("PSNR (dB, higher = less distortion)")
    ax.set_ylabel("SWD (lower = more realistic)")
    ctx.save_plot(fig, "perception_distortion")


# ---------------------------------------------------------------------------- claims
def _values(m, method: str, key: str) -> list[float]:
    """Per-seed values: run seeds' means when the run has several, else the K noise seeds of one run."""
    runs = getattr(m, "per_seed", None)
    if runs and len(runs) > 1:
        return [float(get_path(r, f"methods.{method}.{key}")) for r in runs]
    return [float(x) for x in get_path(m, f"methods.{method}.per_noise.{key}")]


def _cut(m, stages) -> str | None:
    """Why a verdict would not be evidence: a stage cut by the time budget below MIN_TRAINED of its plan."""
    cut = []
    runs = getattr(m, "per_seed", None) or [m]
    for st in stages:
        for i, r in enumerate(runs):  # any run seed's stage
            tr = get_path(r, f"train.{st}")
            if tr.get("planned") and tr["steps"] < MIN_TRAINED * tr["planned"]:
                cut.append(f"{st} {tr['steps']}/{tr['planned']} steps" + (f" (run {i})" if len(runs) > 1 else ""))
    return ("training cut by the time budget (" + ", ".join(cut) + "); ") if cut else None


def _guard(m, stages, verdict_text):
    v, text = verdict_text
    why = _cut(m, stages)
    return (INCONCLUSIVE, why + "measured: " + text) if why else (v, text)


def _n_text(m) -> str:
    runs = getattr(m, "per_seed", None)
    return "run seeds" if runs and len(runs) > 1 else "noise seeds of one run"


def check_stochasticity(m):
    """Every run seed: the 1-NFE generator's spread before the colour fix is > 0 for every LR input, and
    after AdaIN it is > 0 for every LR input whose bicubic reference is not flat (AdaIN sends a flat
    reference's samples to one constant by its definition; their fraction is reported); the LR-start
    runs are exactly deterministic (== 0)."""
    runs = getattr(m, "per_seed", None) or [m]
    raw = min(seed_values(m, "methods.smf1.diversity_raw_min"))
    ada = min(seed_values(m, "methods.smf1.diversity_min_nonflat"))
    flat_only = all(seed_values(m, "methods.smf1.zero_diversity_on_flat_only"))
    flat = seed_values(m, "eval.flat_lr_frac")
    zero = seed_values(m, "methods.smf1.zero_diversity_frac")
    lr_start = max(seed_values(m, "methods.smf1_lr_start.diversity_raw"))
    direct = max(seed_values(m, "methods.direct.diversity_raw"))
    mean = float(np.mean(seed_values(m, "methods.smf1.diversity")))
    ok = raw > 0 and ada > 0 and flat_only and lr_start == 0 and direct == 0
    return verdict(ok), (f"SMFSR-1 diversity (x255) min over LR before the colour fix {raw:.3g}, after AdaIN "
                         f"{ada:.3g} on non-flat LR (mean {mean:.3g}); AdaIN zeroes it on {max(zero):.2%} of "
                         f"LR inputs, {'all' if flat_only else 'not all'} with a flat reference ({max(flat):.2%} "
                         f"flat); start='lr' {lr_start:.3g},"
                         f" direct {direct:.3g} (needs > 0 and == 0; {len(runs)} run seed(s))")


def _rel_gap(m, key):
    a, b = _values(m, "smf1", key), _values(m, "teacher_20", key)
    return [abs(x - y) / abs(y) for x, y in zip(a, b)]


def check_close_to_teacher(m):
    parts, verdicts = [], []
    for key in ("swd", "hf_ratio"):
        mean, se, n = mean_se(_rel_gap(m, key))
        verdicts.append(judge(mean, se, n, WITHIN, K_SE, "lower"))
        parts.append(f"|SMFSR-1 - teacher-20| / teacher-20 on {key} = {fmt_se(mean, se, n)}")
    v = "holds" if all(x == "holds" for x in verdicts) else ("fails" if "fails" in verdicts else INCONCLUSIVE)
    return _guard(m, ("teacher", "smf"), (v, "; ".join(parts) + f" (needs <= {WITHIN} by {K_SE:g} s.e., "
                                                              f"{_n_text(m)})"))


def check_blurry_baselines(m):
    parts, verdicts = [], []
    for name in ("teacher_1", "direct"):
        mean, se, n = mean_se(_values(m, name, "hf_ratio"))
        se = se if se == se else 0.0
        verdicts.append(judge(mean, se, max(n, 2), HF_BLURRY, K_SE, "lower"))
        parts.append(f"{name} HF ratio {fmt_se(mean, se, n)}")
    v = "holds" if all(x == "holds" for x in verdicts) else ("fails" if "fails" in verdicts else INCONCLUSIVE)
    return _guard(m, ("teacher", "direct"), (v, "; ".join(parts) + f" (needs < {HF_BLURRY})"))


def check_stage2(m):
    a, b = _values(m, "smf2", "swd"), _values(m, "smf1", "swd")
    ms, ss, n = mean_se([x - y for x, y in zip(a, b)])
    v1 = judge(ms, ss, n, 0.0, K_SE, "lower")
    p2, p1 = _values(m, "smf2", "psnr"), _values(m, "smf1", "psnr")
    mp, sp, n2 = mean_se([y - x for x, y in zip(p2, p1)])
    v2 = judge(mp, sp, n2, PSNR_COST_DB, K_SE, "lower")
    v = "holds" if v1 == v2 == "holds" else ("fails" if "fails" in (v1, v2) else INCONCLUSIVE)
    return _guard(m, ("teacher", "smf", "gan"),
                  (v, f"SWD(stage 1+2) - SWD(stage 1) = {fmt_se(ms, ss, n)} "
                  f"(needs < 0); PSNR cost {fmt_se(mp, sp, n2)} dB (needs <= {PSNR_COST_DB}); {_n_text(m)}"))


def check_vs_jvp(m):
    a, b = _values(m, "smf1", "swd"), _values(m, "meanflow_jvp", "swd")
    mean, se, n = mean_se([x - JVP_SLACK * y for x, y in zip(a, b)])
    steps = get_path(m, "train.meanflow_jvp.steps"), get_path(m, "train.smf.steps")
    runs = getattr(m, "per_seed", None) or [m]
    if any(get_path(r, "train.meanflow_jvp").get("stopped_by_time") for r in runs):
        return INCONCLUSIVE, ("the whole time budget cut MeanFlow-JVP before the SplitMeanFlow stage's "
                              f"seconds (not equal time); measured SWD(SMF) - {JVP_SLACK} SWD(JVP) = "
                              f"{fmt_se(mean, se, n)}")
    return _guard(m, ("teacher",), (judge(mean, se, n, 0.0, K_SE, "lower"),
                  f"SWD(SMF) - {JVP_SLACK} SWD(JVP) = {fmt_se(mean, se, n)} (needs < 0); "
                  f"JVP {steps[0]} steps vs SMF {steps[1]} in equal training time; {_n_text(m)}"))


def check_ablations(m):
    """Removing a stage-2 component (VSD, the adversarial term) or swapping the DINO discriminator for a
    PatchGAN raises SWD: SWD(ablation) - SWD(full stage 2) > 0 beyond K_SE s.e., per ablation."""
    ran = [a for a in ABLATIONS if f"smf2_{a}" in get_path(m, "methods")]
    if not ran:
        return INCONCLUSIVE, ("not run at this scale (TrainConfig.ablations is empty: the quick time budget); "
                              "full runs " + ", ".join(ABLATIONS))
    parts, verdicts = [], []
    for a in ran:
        mean, se, n = mean_se([x - y for x, y in zip(_values(m, f"smf2_{a}", "swd"), _values(m, "smf2", "swd"))])
        verdicts.append(judge(mean, se, n, 0.0, K_SE, "higher"))
        parts.append(f"{a}: SWD - SWD(stage 2) = {fmt_se(mean, se, n)}")
    v = "holds" if all(x == "holds" for x in verdicts) else ("fails" if "fails" in verdicts else INCONCLUSIVE)
    return _guard(m, ("teacher", "smf", "gan") + tuple(f"ablation_{a}" for a in ran),
                  (v, "; ".join(parts) + f" (needs > 0; {_n_text(m)})"))


def check_sota(m):
    return INCONCLUSIVE, ("needs the SD3.5-medium student, DINOv3 and RealSR/DRealSR/RealLQ250 with "
                          "MUSIQ/MANIQA/CLIPIQA weights; not measurable at laptop scale")


CLAIMS = [
    Claim("noise_start_stochastic", "The noise start keeps stochasticity: SMFSR diversity > 0 for every LR "
          "(before the colour fix; after AdaIN on every non-flat LR), start='lr' / direct LR->HR diversity == 0", "abstract (qualitative)", check_stochasticity),
    Claim("stage1_close_to_teacher20", f"SMFSR stage 1 at 1 NFE is within {WITHIN:.0%} of teacher-20 on SWD "
          "and HF-energy ratio", "abstract: distils the multi-step trajectory into 1 NFE",
          check_close_to_teacher),
    Claim("one_step_baselines_blurry",
          f"Teacher 1-step Euler and direct LR->HR are blurry (HF ratio < {HF_BLURRY})",
          "abstract: direct restoration weakens detail synthesis", check_blurry_baselines),
    Claim("stage2_improves_realism", f"Stage 2 (GAN + VSD) lowers SWD at <= {PSNR_COST_DB:g} dB PSNR cost",
          "abstract: GAN + VSD compensates for missing refinement", check_stage2),
    Claim("split_vs_jvp", f"SplitMeanFlow >= MeanFlow-JVP at equal training time (one-thread CPU seconds; "
          f"SWD <= {JVP_SLACK} x JVP's)",
          "SplitMeanFlow: JVP-free interval splitting", check_vs_jvp),
    Claim("stage2_ablations", "Each stage-2 part matters: without VSD, without the adversarial term, or with "
          "a PatchGAN instead of the DINO discriminator, SWD is higher than with the full stage 2",
          "spec baseline 6 (ablations; no paper numbers)", check_ablations),
    Claim("sota_one_step", "State of the art perceptual quality among one-step diffusion Real-ISR methods",
          "abstract (no numbers)", check_sota),
]
