"""Scale-out of the batched mirror maps: shard a game batch across ``torch.distributed`` ranks.

Each rank maps its contiguous slice of the (B, m) batch with ``Regularizer.mirror_torch`` (on its own
device) and one ``all_gather`` at the end reassembles the batch on every rank -- no other
communication, the maps are row-independent. Without an initialised process group it is the
single-process torch path. Grids over (game, eta, regularizer, strategy, seed) are sharded one level
up with ``harness.parallel.map_tasks`` (Ray when running, process pool otherwise).
"""

from __future__ import annotations

import numpy as np

from neurips26.ftrl_surplus.regularizers import regularizer


def shard_bounds(B: int, world: int, rank: int) -> tuple[int, int]:
    """The contiguous slice [a, b) of a batch of B rows that ``rank`` of ``world`` maps."""
    base, extra = divmod(B, world)
    a = rank * base + min(rank, extra)
    return a, a + base + (1 if rank < extra else 0)


def sharded_mirror(reg, theta, device: "str | None" = None):
    """grad Phi(theta) for a (B, m) batch, split across the ranks of the default process group.

    theta: numpy array or torch tensor (every rank holds the whole batch); device: where this rank
    computes (default: cuda when available, else cpu). Returns a numpy (B, m) array on every rank.
    """
    import torch
    import torch.distributed as dist

    reg = regularizer(reg)
    th = torch.as_tensor(np.asarray(theta, dtype=np.float64) if not isinstance(theta, torch.Tensor)
                         else theta, dtype=torch.float64)
    if th.ndim != 2 or th.numel() == 0:
        raise ValueError(f"theta must be a non-empty (B, m) batch, got shape {tuple(th.shape)}")
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if not (dist.is_available() and dist.is_initialized()):
        return reg.mirror_torch(th.to(dev)).cpu().numpy()
    world, rank = dist.get_world_size(), dist.get_rank()
    B, m = th.shape
    a, b = shard_bounds(B, world, rank)
    local = reg.mirror_torch(th[a:b].to(dev)) if b > a else th.new_zeros((0, m), device=dev)
    # all_gather needs equal sizes: pad every shard to the largest one
    size = -(-B // world)
    pad = torch.zeros((size, m), dtype=torch.float64, device=dev)
    pad[: b - a] = local
    gathered = [torch.zeros_like(pad) for _ in range(world)]
    dist.all_gather(gathered, pad)
    parts = [g[: shard_bounds(B, world, r)[1] - shard_bounds(B, world, r)[0]] for r, g in enumerate(gathered)]
    return torch.cat(parts).cpu().numpy()
