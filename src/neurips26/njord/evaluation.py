"""Forecast evaluation on the test split: ensembles of every method against the truth, per-lead
and per-start scores in standardised units (per-channel training std), masked to wet cells."""

from __future__ import annotations

import numpy as np
import torch

from neurips26.njord.data import Dataset, to_nodes
from neurips26.njord.metrics import crps_fair, rank_histogram, spread
from neurips26.njord.simulator import OceanConfig, oracle_ensemble
from neurips26.njord.training import windows


def test_starts(ds: Dataset, leads: int, stride: int = 1) -> np.ndarray:
    """(traj, t) of the first forecast day t (history t-2, t-1) inside the test split."""
    return windows(ds, ds.test, leads)[::stride]


def truth(ds: Dataset, starts: np.ndarray, leads: int) -> np.ndarray:
    return np.stack([ds.x[starts[:, 0], starts[:, 1] + i] for i in range(leads)], 1)


@torch.no_grad()
def model_ensemble(
    model, ds: Dataset, starts: np.ndarray, leads: int, members: int, seed: int = 0, chunk: int = 16,
    boundary: np.ndarray | None = None,
) -> np.ndarray:
    """(members, S, leads, N, C); members batched, one model call per step per chunk of starts.
    ``boundary`` (N,): an open boundary strip overwritten with the truth after every step (spec §7;
    score the interior only)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for a in range(0, len(starts), chunk):
        xp2, xp1, f = rollout_inputs(ds, starts[a : a + chunk], leads)
        bnd = None if boundary is None else (torch.as_tensor(boundary, dtype=xp1.dtype),
                                              torch.from_numpy(truth(ds, starts[a : a + chunk], leads)))
        out.append(model.rollout(xp2, xp1, f, members=members, generator=g, boundary=bnd).numpy())
    return np.concatenate(out, 1)


def rollout_inputs(ds: Dataset, starts: np.ndarray, leads: int) -> tuple[torch.Tensor, ...]:
    """The two states before each start (``x_{t-2}``, ``x_{t-1}``) and the forcing of its ``leads`` steps."""
    k, t = starts[:, 0], starts[:, 1]
    f = torch.from_numpy(np.stack([ds.forcing[t + i] for i in range(leads)], 1))
    return torch.from_numpy(ds.x[k, t - 2]), torch.from_numpy(ds.x[k, t - 1]), f


def oracle(
    raw: dict, ds: Dataset, ocean: OceanConfig, starts: np.ndarray, leads: int, members: int, seed: int = 0
) -> np.ndarray:
    """Oracle ensemble in standardised node units, (members, S, leads, N, C)."""
    res = []
    for j, (k, t) in enumerate(starts):
        snaps = oracle_ensemble(
            ocean, ds.mask, raw["states"][k, t - 1], float(ds.days[t - 1]), leads, members, seed=seed + j
        )
        res.append(ds.norm(to_nodes(snaps, ds.mask)))
    return np.stack(res, 1)


def scores(ens: np.ndarray, y: np.ndarray) -> dict:
    """Per-lead and per-start scores; ``ens`` (M, S, L, N, C), ``y`` (S, L, N, C)."""
    M = ens.shape[0]
    mean = ens.mean(0)
    se = (mean - y) ** 2
    crps = crps_fair(ens, y) if M > 1 else np.abs(ens[0] - y)
    out = dict(
        rmse_lead=np.sqrt(se.mean((0, 2, 3))).tolist(),
        crps_lead=crps.mean((0, 2, 3)).tolist(),
        spread_lead=[spread(ens[:, :, i]) for i in range(ens.shape[2])],
        rmse=float(np.sqrt(se.mean())),
        crps=float(crps.mean()),
        rmse_channel=np.sqrt(se.mean((0, 1, 2))).tolist(),
        crps_channel=crps.mean((0, 1, 2)).tolist(),
        spread=spread(ens),
    )
    out["ssr"] = float(np.sqrt((M + 1) / M) * out["spread"] / out["rmse"]) if M > 1 else 0.0
    out["ssr_uncorrected"] = float(out["spread"] / out["rmse"]) if M > 1 else 0.0
    out["ssr_lead"] = [
        float(np.sqrt((M + 1) / M) * s / r) if M > 1 else 0.0
        for s, r in zip(out["spread_lead"], out["rmse_lead"])
    ]
    out["per_start"] = dict(
        mse=se.mean((1, 2, 3)).tolist(),
        crps=crps.mean((1, 2, 3)).tolist(),
        mse_last=se[:, -1].mean((1, 2)).tolist(),
    )
    if M > 1:
        out["rank_hist"] = rank_histogram(ens, y).tolist()
    return out


def pseudo_obs_scores(
    ens: np.ndarray, y: np.ndarray, idx: np.ndarray, vals: np.ndarray, channels=(0, 3)
) -> dict:
    """RMSE / CRPS against sparse noisy pseudo-observations (EMULATION of class-4 scoring).
    ``idx`` (S, k) observed nodes of each start's lead-1 day, ``vals`` (S, k, len(channels))."""
    S = ens.shape[1]
    sel = ens[:, np.arange(S)[:, None], 0, idx][..., list(channels)]  # (M, S, k, c)
    err = sel.mean(0) - vals
    crps = crps_fair(sel, vals) if sel.shape[0] > 1 else np.abs(sel[0] - vals)
    return dict(rmse=float(np.sqrt((err**2).mean())), crps=float(crps.mean()))
