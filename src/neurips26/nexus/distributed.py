"""Counting DDP reducer rounds per outer step: synchronous Nexus (K) vs accumulation under no_sync (1).

``reducer_rounds(method, k)`` starts ``world`` gloo processes on this machine (``harness.distributed.launch_local``, fork), wraps a tiny
Llama in DDP with a counting communication hook, runs two outer steps of ``method`` on a
source-synchronised sampler, and returns the hook calls per outer step on rank 0 (each call is one
bucket all-reduce). For ``"nexus"`` every inner backward synchronises g_k (phi stays identical on the
ranks); for ``"adamw"`` the first K - 1 backwards run under ``no_sync``.
"""

from __future__ import annotations

import numpy as np
import torch

from neurips26.harness.distributed import launch_local
from neurips26.harness.validation import check_choice, check_scalar
from neurips26.nexus.baselines import GradAccumulation
from neurips26.nexus.data import Source, lm_loss, tiny_llama
from neurips26.nexus.optimizer import Nexus
from neurips26.nexus.schedule import SourceSampler


def _rank_steps(method: str, k: int) -> list[int]:
    """This rank's bucket all-reduces per outer step (two outer steps)."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(tiny_llama(20, hidden=16, layers=1, heads=2, mlp=32, ctx=8))
    calls = [0]

    def hook(state, bucket):
        calls[0] += 1
        return allreduce_hook(state, bucket)

    model.register_comm_hook(None, hook)
    rng = np.random.default_rng(0)
    srcs = [Source(n, rng.integers(0, 20, 3000), rng.integers(0, 20, 300)) for n in ("a", "b", "c")]
    sampler = SourceSampler(srcs, k=k, micro_batch=2, ctx=8, seed=0, rank=rank)
    outer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt = Nexus(model.parameters(), outer=outer, log_cos=False) if method == "nexus" else \
        GradAccumulation(list(model.parameters()), outer, ddp=model)
    per_step = []
    for _ in range(2):
        before = calls[0]
        opt.step(sampler.next_step(), lambda b: lm_loss(model, b))
        per_step.append(calls[0] - before)
    return per_step


def reducer_rounds(method: str, k: int, world: int = 2, timeout: float = 120.0) -> int:
    """DDP bucket all-reduces per outer step of ``method`` (``"nexus"`` or ``"adamw"``) on rank 0."""
    check_choice(method, "method", ("nexus", "adamw"))
    k = check_scalar(k, "k", int, min=1)
    world = check_scalar(world, "world", int, min=2)
    steps = launch_local(_rank_steps, method, k, world=world, start_method="fork", timeout=timeout)[0]
    if len(set(steps)) != 1:
        raise RuntimeError(f"reducer rounds differ between outer steps: {steps}")
    return steps[0]
