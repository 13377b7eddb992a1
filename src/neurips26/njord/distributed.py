"""Scale-out (spec "Scale-out"): forecast start times sharded across ranks, ensemble members sharded
across ranks (or Ray tasks), metrics gathered by additive reductions.

Every function here runs per rank inside an initialised ``torch.distributed`` process group (under
``torchrun``, or ``neurips26.harness.distributed.launch_local`` for CPU checks); with no process group
they act as a world of one. Data-parallel *training* is ``training.train(..., distributed=True)``.

Additive reductions. With ``d_i = x_i - y`` per entry and M members in total,
``mean error = sum_i d_i / M``, unbiased ``var = (sum_i d_i^2 - (sum_i d_i)^2 / M) / (M - 1)``,
fair ``CRPS = sum_i |d_i| / M - sum_{i,j} |x_i - x_j| / (2 M (M - 1))`` -- every ``sum_i`` splits into
per-rank partial sums. The pairwise term of a rank's members ``i`` runs over all members ``j``, so each
rank receives the other ranks' member blocks (an all-gather; compute is sharded, memory is not).

Start times are split without padding or dropping (``shard``): torch's ``DistributedSampler``
pads an uneven split with duplicated samples unless ``drop_last`` -- the duplicated-sample pitfall
the spec names; here each start is scored exactly once and the per-lead sums carry their counts.
"""

from __future__ import annotations

import numpy as np
import torch

from neurips26.harness.parallel import map_tasks
from neurips26.harness.validation import check_scalar
from neurips26.njord.data import Dataset
from neurips26.njord.evaluation import model_ensemble, truth


def rank_world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def shard(n: int, rank: int, world: int) -> slice:
    """Contiguous, disjoint, covering slice of ``range(n)`` for ``rank`` (sizes differ by <= 1)."""
    n = check_scalar(n, "n", int, min=0)
    world = check_scalar(world, "world", int, min=1)
    rank = check_scalar(rank, "rank", int, min=0, max=world - 1)
    q, r = divmod(n, world)
    a = rank * q + min(rank, r)
    return slice(a, a + q + (rank < r))


def _all_reduce(a: np.ndarray) -> np.ndarray:
    import torch.distributed as dist

    if rank_world()[1] == 1:
        return a
    t = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))
    dist.all_reduce(t)
    return t.numpy()


def _all_gather(a: np.ndarray) -> list[np.ndarray]:
    import torch.distributed as dist

    world = rank_world()[1]
    if world == 1:
        return [a]
    out = [None] * world
    dist.all_gather_object(out, a)
    return out


def _finalise(sse, var, crps, count, M: int) -> dict:
    """Scores from per-lead sums (squared mean error, unbiased variance, CRPS, entry count)."""
    rmse_l, spread_l = np.sqrt(sse / count), np.sqrt(np.maximum(var, 0) / count)
    rmse, spr = float(np.sqrt(sse.sum() / count.sum())), float(np.sqrt(max(var.sum(), 0) / count.sum()))
    k = np.sqrt((M + 1) / M) if M > 1 else 0.0
    return dict(
        rmse_lead=rmse_l.tolist(),
        crps_lead=(crps / count).tolist(),
        spread_lead=spread_l.tolist(),
        ssr_lead=(k * spread_l / rmse_l).tolist(),
        rmse=rmse,
        crps=float(crps.sum() / count.sum()),
        spread=spr,
        ssr=float(k * spr / rmse),
        members=M,
    )


def _member_sums(block: np.ndarray, y: np.ndarray, blocks: list[np.ndarray]):
    """Per-entry partial sums of this rank's members: sum d, sum d^2, and the CRPS numerators."""
    d = block.astype(np.float64) - y[None]
    pair = np.zeros(y.shape)
    for other in blocks:
        pair += np.abs(block[:, None].astype(np.float64) - other[None]).sum((0, 1))
    return d.sum(0), (d**2).sum(0), np.abs(d).sum(0), pair


def member_sharded_scores(block: np.ndarray, y: np.ndarray, members: int) -> dict:
    """Scores of an ensemble whose members are split across ranks: ``block`` (m_r, S, L, N, C) is this
    rank's members, ``y`` (S, L, N, C) the truth on every rank, ``members`` the total M. Returns the
    ``evaluation.scores`` fields (rmse/crps/spread/ssr, per lead and overall), equal on every rank."""
    members = check_scalar(members, "members", int, min=2)
    if block.ndim != 5 or block.shape[1:] != y.shape:
        raise ValueError(f"block must have shape (m, *y.shape) = (m, {y.shape}), got {block.shape}")
    blocks = _all_gather(block)
    if sum(len(b) for b in blocks) != members:
        raise ValueError(f"the ranks hold {sum(len(b) for b in blocks)} members, members = {members}")
    sd, sd2, sad, pair = _member_sums(block, y, blocks)
    sd, sd2 = _all_reduce(np.stack([sd, sd2]))
    M = members
    # fair CRPS per entry: sum_i |d_i| / M - sum_ij |x_i - x_j| / (2 M (M - 1)), additive over ranks
    crps = _all_reduce((sad / M - pair / (2 * M * (M - 1))).sum((0, 2, 3)))
    sse = ((sd / M) ** 2).sum((0, 2, 3))
    var = ((sd2 - sd**2 / M) / (M - 1)).sum((0, 2, 3))
    count = np.full(y.shape[1], y.shape[0] * y.shape[2] * y.shape[3], float)
    return _finalise(sse, var, crps, count, M)


def score_sums(ens: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-lead additive sums over the held starts and cells: squared ensemble-mean error, unbiased
    variance, fair CRPS (MAE for M = 1), entry count; ``ens`` (M, S, L, n, C), ``y`` (S, L, n, C) ->
    (4, L). Summed over ranks (or domain parts), ``_finalise`` turns them into the scores."""
    M = ens.shape[0]
    sd, sd2, sad, pair = _member_sums(ens, y, [ens])
    if M > 1:  # CRPS_F = sum_i |d_i| / M - sum_ij |x_i - x_j| / (2 M (M - 1))
        crps = (sad / M - pair / (2 * M * (M - 1))).sum((0, 2, 3))
        var = ((sd2 - sd**2 / M) / (M - 1)).sum((0, 2, 3))
    else:
        crps, var = sad.sum((0, 2, 3)), np.zeros(y.shape[1])
    count = np.full(y.shape[1], float(y.shape[0] * y.shape[2] * y.shape[3]))
    return np.stack([((sd / M) ** 2).sum((0, 2, 3)), var, crps, count])


def start_sharded_scores(ens: np.ndarray, y: np.ndarray) -> dict:
    """Scores when each rank holds all M members of its own start times: ``ens`` (M, S_r, L, N, C),
    ``y`` (S_r, L, N, C); per-lead sums and counts all-reduced (a rank may hold no start)."""
    if ens.ndim != 5 or ens.shape[1:] != y.shape:
        raise ValueError(f"ens must have shape (M, *y.shape), got {ens.shape} and {y.shape}")
    sse, var, crps, count = _all_reduce(score_sums(ens, y))
    return _finalise(sse, var, crps, count, ens.shape[0])


@torch.no_grad()
def evaluate_sharded(model, ds: Dataset, starts: np.ndarray, leads: int, members: int, shard_by: str = "starts",
                     seed: int = 0) -> dict:
    """Per-rank ensemble evaluation of ``model`` on ``starts``: ``shard_by="starts"`` gives each rank a
    contiguous slice of the starts (all members; seeds per start chunk are the rank's), ``"members"``
    gives each rank ``shard(members)`` members of every start (generator seeded ``seed + rank``).
    Scores are all-reduced, so every rank returns the same dict."""
    leads = check_scalar(leads, "leads", int, min=1)
    members = check_scalar(members, "members", int, min=1)
    rank, world = rank_world()
    if shard_by == "starts":
        mine = starts[shard(len(starts), rank, world)]
        y = truth(ds, mine, leads)
        ens = (model_ensemble(model, ds, mine, leads, members, seed=seed + rank) if len(mine)
               else np.zeros((members,) + y.shape, np.float32))
        return start_sharded_scores(ens, y)
    if shard_by == "members":
        m = shard(members, rank, world)
        y = truth(ds, starts, leads)
        n_mine = m.stop - m.start
        block = (model_ensemble(model, ds, starts, leads, n_mine, seed=seed + rank) if n_mine
                 else np.zeros((0,) + y.shape, np.float32))
        return member_sharded_scores(block, y, members)
    raise ValueError(f"shard_by must be 'starts' or 'members', got {shard_by!r}")


def ray_available() -> tuple[bool, str]:
    """(True, version) if Ray can be imported, else (False, the reason)."""
    try:
        import ray
    except ImportError as e:  # not a dependency of this project
        return False, f"ray is not installed ({e}); pip install ray to shard members over Ray tasks"
    return True, ray.__version__


def _member_block(job) -> np.ndarray:
    """One Ray task of ``ray_member_ensemble``: ``m`` members with generator seed ``s``."""
    model, ds, starts, leads, m, s = job
    torch.set_num_threads(1)
    return model_ensemble(model, ds, starts, leads, m, seed=s)


def ray_member_ensemble(model, ds: Dataset, starts: np.ndarray, leads: int, members: int, tasks: int = 2,
                        seed: int = 0) -> np.ndarray:
    """Members sharded over ``tasks`` Ray tasks (each runs ``shard(members)`` members, generator seeded
    ``seed + task``; through ``harness.parallel.map_tasks``); returns the gathered (members, S, L, N, C)
    ensemble. Needs Ray (see ``ray_available``); raises ImportError naming the reason otherwise."""
    tasks = check_scalar(tasks, "tasks", int, min=1)
    members = check_scalar(members, "members", int, min=tasks)
    ok, why = ray_available()
    if not ok:
        raise ImportError(why)
    jobs = [(model, ds, starts, leads, len(range(members)[shard(members, t, tasks)]), seed + t)
            for t in range(tasks)]
    return np.concatenate(map_tasks(_member_block, jobs, backend="ray", workers=tasks, progress=False), 0)


__all__ = ["evaluate_sharded", "member_sharded_scores", "rank_world", "ray_available", "ray_member_ensemble",
           "shard", "start_sharded_scores"]
