"""Training (spec §6): (a) 1-step ELBO, (b) unrolled ELBO + fair CRPS from 2 prior trajectories,
per-entry means (KL sum divided by the same grid-entry count as the likelihood), AdamW, cosine decay,
grad-norm clip 1.0 (phase (b) may have its own, ``clip_2``). The deterministic twin is trained with the same schedule on the weighted MSE
(NLL with the fixed per-channel sigma). Optional KL warm-up and free bits (ASSUMPTION).

Phase (b) may be a curriculum of unroll lengths (``unroll_stages``, steps_2 split evenly). With
``val_every > 0`` the model is scored on the VALIDATION split (never test) at the end of phase (a),
every ``val_every`` phase-(b) steps and at the end of each stage -- fair CRPS of an ensemble of
``val_members`` prior samples (MAE for the twin), mean over leads 1..``val_leads`` -- and the best
checkpoint is kept, so how long the unrolled phase runs (and whether it runs at all) is chosen on
validation. ASSUMPTION: Graph-EFM picks its checkpoints on validation loss; the criterion is ours.

``train(..., distributed=True)`` is data-parallel training inside an initialised
``torch.distributed`` process group (spec "Scale-out"): the model is wrapped in
``DistributedDataParallel``, every rank draws the same global batch of forecast start times (same
seeded generator) and trains on its slice ``idx[rank::world]`` (``batch`` divisible by the world
size), so the all-reduced (averaged) gradient is the full-batch gradient and the run equals a
one-process run with the same ``batch`` up to float summation order (tested)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from neurips26.harness.validation import check_scalar
from neurips26.njord.data import Dataset
from neurips26.njord.metrics import crps_fair
from neurips26.njord.models import DeterministicTwin, Njord, gaussian_nll


@dataclass(frozen=True)
class TrainConfig:
    steps_1: int = 150  # 1-step ELBO / MSE
    steps_2: int = 150  # unrolled + CRPS
    unroll: int = 2
    batch: int = 8
    lr: float = 1e-3
    lambda_kl: float = 1.0
    lambda_crps: float = 1.0
    kl_warmup: int = 0  # steps of linear KL warm-up (0 = off)
    free_bits: float = 0.0  # per top-level entry (0 = off)
    clip: float = 1.0  # grad-norm clip (phase (a), and (b) unless clip_2); inf = no clipping
    # grad-norm clip of phase (b) (unrolled + CRPS); None = ``clip``. Phase (b)'s gradient norm is
    # several times phase (a)'s (the CRPS term), so one clip for both binds much harder in phase (b).
    # With Adam the clip does not cut the step in proportion (Adam divides by the running RMS of the
    # gradients), it sets how large phase (b)'s gradients are relative to phase (a)'s in that RMS.
    clip_2: float | None = None
    # units of the CRPS term: "diff_std" scores (ens - y) / sigma per channel, the units of the
    # per-entry NLL (sigma = dstd with the default loss_weights), so lambda_crps = 1 makes the two
    # terms O(1) of each other
    # (spec §6 (c)); "state" scores standardised states, ~dstd (0.006-0.04) times smaller.
    crps_units: str = "diff_std"
    # per-channel likelihood sigma (spec §1: sigma_j = diff_std_j / sqrt(w_j)). "diff_std": w_j = 1,
    # sigma_j = diff_std_j (neural-lam's default): the loss is the MSE of the increments in diff-std
    # units, which weights a slow channel (T: diff_std 0.006) ~37x more than a fast one (u: 0.034).
    # "state": w_j = diff_std_j^2 / mean_k diff_std_k^2, i.e. one sigma = rms_k diff_std_k for every
    # channel: the loss is the MSE in standardised STATE units -- the units every score and claim uses
    # -- at the same overall scale (sum_j 1/sigma_j^2 unchanged on average, so the NLL/KL balance holds).
    loss_weights: str = "diff_std"
    unroll_stages: tuple[int, ...] = ()  # phase (b) curriculum, e.g. (2, 4); () = (unroll,)
    val_every: int = 0  # 0 = keep the last state; else score on validation and keep the best
    val_starts: int = 12  # evenly spaced validation starts
    val_members: int = 4
    val_leads: int = 5


def windows(ds: Dataset, split: range, length: int) -> np.ndarray:
    """(traj, t) pairs whose window t-2 .. t+length-1 lies inside ``split``."""
    ts = [t for t in split if t - 2 >= split.start and t + length - 1 < split.stop]
    return np.array([(k, t) for k in range(ds.x.shape[0]) for t in ts], int)


def batch_tensors(ds: Dataset, idx: np.ndarray, length: int):
    k, t = idx[:, 0], idx[:, 1]
    x = ds.x
    xp2 = torch.from_numpy(x[k, t - 2])
    xp1 = torch.from_numpy(x[k, t - 1])
    tgt = torch.from_numpy(np.stack([x[k, t + i] for i in range(length)], 1))
    f = torch.from_numpy(np.stack([ds.forcing[t + i] for i in range(length)], 1))
    return xp2, xp1, f, tgt


def loss_sigma(model, cfg: TrainConfig) -> torch.Tensor:
    """The per-channel likelihood sigma of ``cfg.loss_weights`` (see ``TrainConfig``)."""
    if cfg.loss_weights == "diff_std":
        return model.diff_std
    if cfg.loss_weights == "state":
        return model.diff_std.pow(2).mean().sqrt().expand_as(model.diff_std)
    raise ValueError(f"loss_weights must be 'diff_std' or 'state', got {cfg.loss_weights!r}")


def _loss_njord(model: Njord, xp2, xp1, f, tgt, cfg: TrainConfig, lam_kl: float, crps: bool, m_b=None):
    """Per-entry ELBO (+ fair CRPS), Graph-EFM's (spec §6) over one normaliser, the whole grid's entry
    count ``N d_x``::

        loss = 1/T sum_t mean_b [ sum_{n in I, j} NLL(X^t_nj) + lambda_KL KL(q_t || p_t) ] / (N d_x)
               + lambda_CRPS / (T N d_x) sum_t mean_b sum_{n in I, j} CRPS_fair(X^t_nj)

    with ``I`` every cell (no boundary) or the interior ``m_b == 0``. ``m_b`` (N,): an open boundary
    strip (spec §7): its states are overwritten with the truth after every step (``X = m_b X_true +
    (1 - m_b) X_hat``) and only the likelihood and the CRPS are masked to the interior (Graph-EFM
    masks its likelihood and CRPS, not its KL). The normaliser is ``N d_x`` with or without a strip,
    so each interior entry and the KL weigh the same in a strip-trained and a free model (dividing by
    the interior count ``|I| d_x`` would raise the KL's weight by ``N / |I|``)."""
    sigma = loss_sigma(model, cfg)
    inner = slice(None) if m_b is None else m_b == 0
    a, b = xp2, xp1
    loss, kls = 0.0, []
    ent = tgt.shape[2] * tgt.shape[3]  # N d_x: the whole grid, with or without a strip
    for t in range(tgt.shape[1]):
        pred, kl = model.posterior_step(a, b, f[:, t], tgt[:, t])
        kl_e = kl.sum((1, 2)) if cfg.free_bits <= 0 else kl.clamp(min=cfg.free_bits).sum((1, 2))
        nll = gaussian_nll(tgt[:, t, inner], pred[:, inner], sigma).sum((1, 2))  # sum_{n in I, j} NLL
        loss = loss + ((nll + lam_kl * kl_e) / ent).mean()  # [NLL_I + lambda_KL KL] / (N d_x)
        kls.append(float(kl.detach().sum((1, 2)).mean() / ent))
        if m_b is not None:  # X = m_b X_true + (1 - m_b) X_hat feeds the next step
            pred = m_b[None, :, None] * tgt[:, t] + (1 - m_b[None, :, None]) * pred
        a, b = b, pred
    loss = loss / tgt.shape[1]
    if crps:
        ens = model.rollout(xp2, xp1, f, members=2, boundary=None if m_b is None else (m_b, tgt))
        scale = sigma if cfg.crps_units == "diff_std" else 1.0
        c = crps_fair(ens[:, :, :, inner] / scale, tgt[:, :, inner] / scale)  # (B, T, |I|, d_x)
        # lambda_CRPS sum_I CRPS / (T N d_x) = lambda_CRPS mean_I CRPS * |I| / N (|I| / N = 1.0 free)
        loss = loss + cfg.lambda_crps * c.mean() * (c.shape[2] / tgt.shape[2])
    return loss, float(np.mean(kls))


def _loss_twin(model: DeterministicTwin, xp2, xp1, f, tgt, cfg: TrainConfig, m_b=None):
    """Weighted MSE (NLL with the fixed sigma) of the rollout, ``1/(T N d_x) sum_t sum_{n in I, j}
    NLL(X^t_nj)`` (batch mean), with ``I`` and the normaliser as in ``_loss_njord``."""
    pred = model.rollout(xp2, xp1, f, members=1, boundary=None if m_b is None else (m_b, tgt))[0]
    sigma = loss_sigma(model, cfg)
    inner = slice(None) if m_b is None else m_b == 0
    nll = gaussian_nll(tgt[:, :, inner], pred[:, :, inner], sigma)  # (B, T, |I|, d_x)
    return nll.mean() * (nll.shape[2] / tgt.shape[2]), 0.0  # sum_I NLL / (T N d_x) = mean_I NLL * |I| / N


class _StepLoss(torch.nn.Module):
    """The training loss as a module's ``forward`` (what ``DistributedDataParallel`` wraps: its
    gradient all-reduce is armed by the forward call)."""

    def __init__(self, model, cfg: TrainConfig, m_b=None):
        super().__init__()
        self.model, self.cfg, self.m_b = model, cfg, m_b

    def forward(self, xp2, xp1, f, tgt, lam_kl: float, crps: bool):
        with self.model.reuse_static():  # static embeddings once per loss, not once per network call
            if isinstance(self.model, Njord):
                loss, kl = _loss_njord(self.model, xp2, xp1, f, tgt, self.cfg, lam_kl, crps, self.m_b)
            else:
                loss, kl = _loss_twin(self.model, xp2, xp1, f, tgt, self.cfg, self.m_b)
        return loss, torch.tensor(kl, dtype=torch.float64)


@torch.no_grad()
def validation_score(model, ds: Dataset, cfg: TrainConfig, seed: int = 0, boundary=None) -> dict:
    """Fair CRPS (MAE for the twin), RMSE and corrected SSR per lead on ``val_starts`` evenly spaced
    starts of the validation split, in standardised units. ``boundary`` (N,): the open boundary strip
    (overwritten with the truth, scored on the interior only)."""
    win = windows(ds, ds.val, cfg.val_leads)
    if len(win) == 0:
        raise ValueError(f"the validation split has no window of {cfg.val_leads} leads")
    win = win[np.unique(np.linspace(0, len(win) - 1, min(cfg.val_starts, len(win))).astype(int))]
    xp2, xp1, f, y = batch_tensors(ds, win, cfg.val_leads)
    M = cfg.val_members if isinstance(model, Njord) else 1
    was = model.training
    model.eval()
    m_b = None if boundary is None else torch.as_tensor(boundary, dtype=xp1.dtype)
    ens = model.rollout(xp2, xp1, f, members=M, generator=torch.Generator().manual_seed(seed),
                        boundary=None if m_b is None else (m_b, y))
    model.train(was)
    if m_b is not None:
        ens, y = ens[:, :, :, m_b == 0], y[:, :, m_b == 0]
    err = ens.mean(0) - y
    rmse = err.pow(2).mean((0, 2, 3)).sqrt()
    crps = (crps_fair(ens, y) if M > 1 else (ens[0] - y).abs()).mean((0, 2, 3))
    out = dict(crps_lead=crps.tolist(), rmse_lead=rmse.tolist(), crps=float(crps.mean()))
    if M > 1:
        sp = ens.var(0, correction=1).mean((0, 2, 3)).sqrt()
        out["ssr_lead"] = (np.sqrt((M + 1) / M) * sp / rmse).tolist()
    return out


def train(model, ds: Dataset, cfg: TrainConfig, seed: int = 0, log=None, distributed: bool = False,
          boundary=None) -> dict:
    """Train ``model`` (Njord or DeterministicTwin) in place; returns the loss / KL history (and the
    pre-clip gradient norm per step) and, with ``val_every > 0``, the validation curve and the chosen
    checkpoint (step, unroll).

    ``boundary`` (N,) in [0, 1]: an open regional boundary strip (spec §7): its states are overwritten
    with the truth after every step of the training rollouts, and the loss and the validation scores
    cover the interior (``boundary == 0``) only.

    ``distributed=True``: DDP over forecast start times in the current process group (module doc);
    the logged loss is the mean over ranks; every rank scores validation identically and keeps the
    same checkpoint."""
    check_scalar(cfg.batch, "batch", int, min=1)
    rank, world = 0, 1
    if distributed:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("distributed=True needs an initialised torch.distributed process group")
        rank, world = dist.get_rank(), dist.get_world_size()
        if cfg.batch % world:
            raise ValueError(f"batch = {cfg.batch} must be divisible by the world size {world}")
    check_scalar(cfg.unroll, "unroll", int, min=1)
    check_scalar(cfg.val_every, "val_every", int, min=0)
    check_scalar(cfg.clip, "clip", float, min=0.0, inclusive="neither", finite=False)  # inf: no clip
    if cfg.clip_2 is not None:
        check_scalar(cfg.clip_2, "clip_2", float, min=0.0, inclusive="neither", finite=False)  # inf: no clip
    clip_2 = cfg.clip if cfg.clip_2 is None else cfg.clip_2
    if cfg.crps_units not in ("diff_std", "state"):
        raise ValueError(f"crps_units must be 'diff_std' or 'state', got {cfg.crps_units!r}")
    loss_sigma(model, cfg)  # validates loss_weights
    m_b = None
    if boundary is not None:
        m_b = torch.as_tensor(np.asarray(boundary, np.float32))
        if m_b.shape != (ds.x.shape[2],) or not ((m_b >= 0) & (m_b <= 1)).all() or not (m_b == 0).any():
            raise ValueError(f"boundary must be ({ds.x.shape[2]},) in [0, 1] with an interior (zeros), "
                             f"got shape {tuple(m_b.shape)}")
    stages = tuple(cfg.unroll_stages) or (cfg.unroll,)
    for u in stages:
        check_scalar(u, "unroll_stages entry", int, min=1)
    rng = np.random.default_rng(seed)  # the global batch: identical on every rank
    torch.manual_seed(seed + rank)  # latent noise: independent per rank
    total = cfg.steps_1 + cfg.steps_2
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(total, 1))
    # phase (b) step k runs unroll stages[k * len(stages) // steps_2]
    per_step = [1] * cfg.steps_1 + [stages[k * len(stages) // max(cfg.steps_2, 1)] for k in range(cfg.steps_2)]
    win = {u: windows(ds, ds.train, u) for u in set(per_step)}
    hist: dict = {"loss": [], "kl": [], "val": [], "grad_norm": []}
    best = None

    def validate(step, unroll):
        nonlocal best
        v = validation_score(model, ds, cfg, seed=seed, boundary=m_b) | dict(step=step, unroll=unroll)
        hist["val"].append(v)
        if best is None or v["crps"] < best[0]:
            best = (v["crps"], step, unroll, {k: t.detach().clone() for k, t in model.state_dict().items()})

    runner = _StepLoss(model, cfg, m_b)
    if distributed:
        from torch.nn.parallel import DistributedDataParallel

        # broadcasts rank 0's weights to every rank; Njord's latent maps embed edge sets (e.g. m2g)
        # that a given loss does not reach, hence find_unused_parameters
        runner = DistributedDataParallel(runner, find_unused_parameters=isinstance(model, Njord))
    model.train()
    for step in range(total):
        length = per_step[step]
        idx = win[length][rng.integers(0, len(win[length]), cfg.batch)][rank::world]
        xp2, xp1, f, tgt = batch_tensors(ds, idx, length)
        lam = cfg.lambda_kl * (min(1.0, (step + 1) / cfg.kl_warmup) if cfg.kl_warmup else 1.0)
        loss, kl = runner(xp2, xp1, f, tgt, lam, step >= cfg.steps_1)
        opt.zero_grad()
        loss.backward()  # under DDP: gradients averaged over ranks = the full-batch gradient
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip if step < cfg.steps_1 else clip_2)
        hist["grad_norm"].append(float(gnorm))  # before clipping
        opt.step()
        sched.step()
        logged = torch.stack([loss.detach().double(), kl.double()])
        if distributed:
            dist.all_reduce(logged)
            logged /= world
        hist["loss"].append(float(logged[0]))
        hist["kl"].append(float(logged[1]))
        if cfg.val_every and (
            step + 1 == cfg.steps_1
            or (step >= cfg.steps_1 and (step + 1 - cfg.steps_1) % cfg.val_every == 0)
            or step + 1 == total
            or (step + 1 < total and per_step[step + 1] != length and step >= cfg.steps_1)
        ):
            validate(step + 1, length)
        if log is not None:
            log(step, hist)
    if best is not None:
        model.load_state_dict(best[3])
        hist["chosen"] = dict(step=best[1], unroll=best[2], val_crps=best[0])
    model.eval()
    return hist
