"""Data-parallel NextLat training: DDP or FSDP2 (``fully_shard`` per decoder layer), one step = the 1-process step.

Every rank draws the same global batch (same seeded sampler) and takes its rows ``b[rank::world]``; the
losses are position-local means, so with equal row counts and equal valid-position counts per rank
(packed LM windows, fixed-length rows) the average of the ranks' gradients is the gradient of the global
batch and N ranks reproduce the single-process step (tested on 2 gloo ranks for DDP and FSDP2, GPT and
NextLat d = 2). With masks that leave different counts per rank (padded rows) the ranks' means are
averaged, as in the official Lightning Fabric DDP trainer.

* ``"ddp"``:   ``DistributedDataParallel`` around the whole wrapper (trunk, head, psi replicated);
  gradients all-reduced in buckets during backward.
* ``"fsdp2"``: ``fully_shard`` on every HF decoder layer, then on the wrapper (embeddings, final norm,
  head and the tiny psi form the root group); parameters are DTensors sharded over ranks, gathered
  layer by layer for forward/backward. The optimiser is built on the sharded parameters, the clip norm
  is the global one, and the trained full weights are written back into ``model`` at the end (a sharded
  copy is trained, so ``model`` stays an ordinary module for evaluation and decoding).

Run under ``torchrun`` (each rank calls ``train_data_parallel`` after ``init_process_group``) or, on one
machine, through ``neurips26.harness.distributed.launch_local`` (gloo processes; what the tests do).
"""

from __future__ import annotations

import copy
from typing import Callable

import torch
import torch.distributed as dist

from neurips26.harness.validation import check_choice
from neurips26.nextlat.training import adamw_steps, check_train_args

STRATEGIES = ("ddp", "fsdp2")
PRECISIONS = ("fp32", "bf16")


def decoder_layers(model) -> list[torch.nn.Module]:
    """The transformer blocks of a wrapped HF causal LM (``model.model.base_model.layers`` or GPT-2's ``h``)."""
    base = model.model.base_model if hasattr(model, "model") and hasattr(model.model, "base_model") else model.base_model
    for name in ("layers", "h"):
        if hasattr(base, name):
            return list(getattr(base, name))
    raise ValueError(f"cannot find the decoder layers of {type(base).__name__} (expected .layers or .h)")


def rank_rows(ids: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """This rank's rows ``ids[rank::world]`` of a global batch (the batch must split evenly)."""
    if ids.shape[0] % world:
        raise ValueError(f"global batch of {ids.shape[0]} rows does not split evenly over world={world} ranks")
    return ids[rank::world]


def train_data_parallel(model: torch.nn.Module, batches: Callable[[int], torch.Tensor], steps: int,
                        lr: float = 3e-3, clip: float = 1.0, weight_decay: float = 0.0,
                        loss_fn: Callable | None = None, strategy: str = "ddp",
                        precision: str = "fp32") -> list[float]:
    """``steps`` AdamW steps of ``model`` on this rank's rows of ``batches(step)``, gradients averaged over ranks.

    Call on every rank of an initialised process group. Returns the global per-step loss (the mean of
    the ranks' losses). ``loss_fn(module, ids)`` (default ``module(ids).loss``) is called with the
    wrapped module. After the call ``model`` holds the trained weights on every rank.

    precision: ``"fp32"``, or ``"bf16"`` mixed precision with float32 master weights and AdamW state:
    under FSDP2 ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` (layers gathered as bf16
    copies for forward and backward, gradients reduce-scattered in float32); under DDP the forward and
    loss run in ``torch.autocast(dtype=bf16)`` and the float32 gradients are all-reduced.
    """
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    precision = check_choice(precision, "precision", PRECISIONS)
    steps, lr, clip = check_train_args(steps, lr, clip)
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("train_data_parallel needs an initialised process group (torchrun or launch_local)")
    rank, world = dist.get_rank(), dist.get_world_size()
    loss_fn = loss_fn or (lambda mm, ids: mm(ids).loss)
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        # find_unused_parameters: psi gets no gradient when lambda = 0 (the GPT baseline)
        work = DDP(model, find_unused_parameters=True)
        if precision == "bf16":
            device, fp32_loss = next(model.parameters()).device.type, loss_fn

            def loss_fn(mm, ids):
                with torch.autocast(device, dtype=torch.bfloat16):
                    return fp32_loss(mm, ids)
    else:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if precision == "bf16" else MixedPrecisionPolicy())
        work = copy.deepcopy(model)
        for layer in decoder_layers(work):
            fully_shard(layer, mp_policy=mp)
        fully_shard(work, mp_policy=mp)

    def global_mean(loss: torch.Tensor) -> float:
        g = loss.detach().clone()
        dist.all_reduce(g, op=dist.ReduceOp.SUM)
        return float(g) / world

    losses = adamw_steps(work, lambda step: rank_rows(batches(step), rank, world), steps, lr, clip,
                         weight_decay, loss_fn, record=global_mean)
    if strategy == "fsdp2":
        full = {k: (v.full_tensor() if hasattr(v, "full_tensor") else v) for k, v in work.state_dict().items()}
        model.load_state_dict(full)
    model.eval()
    return losses


__all__ = ["PRECISIONS", "STRATEGIES", "decoder_layers", "rank_rows", "train_data_parallel"]
