"""Scale-out: data-parallel CIL training per task (``torch.distributed`` DDP), launched by ``torchrun`` or,
for CPU checks, by ``launch_local`` (gloo processes on this machine).

Under torchrun every rank calls ``run_cil(..., ddp=True)`` after ``init_process_group``: each rank trains
on its slice of every global batch through ``DistributedDataParallel(TaskHead(model))`` (only the current
adapters and rows carry gradients, so the all-reduce is small) and recomputes the normalization from the
replicated parameters (no extra collective). ``mode="fsdp"`` trains the same task fully sharded instead
(torch FSDP2 ``fully_shard`` per transformer block, ``cil.fsdp_head``): each block's frozen weights and the
MPO cores / LoRA factors inside it are sharded over the ranks and all-gathered together, so ``dW`` is
materialised after the gather; the trained tensors are gathered back at the end of the task.
Sweeps over (method, seed, rho, bond, T) as Ray Tune trials are in ``sweep.py``.
"""
from __future__ import annotations

import torch

from neurips26.harness.distributed import launch_local as _launch
from neurips26.harness.validation import check_choice, check_scalar
from neurips26.nota.cil import CILModel, TrainSettings, train_task

MODES = ("ddp", "fsdp")


def _train_modes(job: dict, modes: tuple[str, ...]) -> dict:
    """This rank's ``train_one_task`` in each of ``modes``, in turn: {mode: tensors}."""
    return {m: train_one_task(job, ddp=m == "ddp", fsdp=m == "fsdp") for m in modes}


def train_one_task(job: dict, ddp: bool = False, fsdp: bool = False) -> dict:
    """Build ``job["backbone"]`` (a module) into a ``CILModel`` of ``job["method"]``, train one task on
    ``job["x"], job["y"]`` and return the trainable adapter/row tensors (name -> tensor)."""
    torch.manual_seed(job["seed"])
    model = CILModel(job["backbone"], job["method"], **job.get("adapter_kwargs", {}))
    g = torch.Generator().manual_seed(job["seed"])
    model.new_task(sorted(set(job["y"].tolist())), g)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    train_task(model, job["x"], job["y"], job["settings"], g, ddp=ddp, fsdp=fsdp)
    params = dict(model.named_parameters())
    return {n: params[n].detach().clone() for n in names}


def launch_local(job: dict, world: int = 2, mode: str | tuple[str, ...] = "ddp") -> dict:
    """``train_one_task`` data-parallel (``mode="ddp"``) or fully sharded (``"fsdp"``) on ``world`` local
    gloo processes; rank 0's trained tensors. A tuple of modes runs each in turn in the same processes and
    returns {mode: tensors}."""
    world = check_scalar(world, "world", int, min=1)
    modes = (mode,) if isinstance(mode, str) else tuple(mode)
    if not modes:
        raise ValueError("mode must name at least one of ('ddp', 'fsdp')")
    modes = tuple(check_choice(m, "mode", MODES) for m in modes)
    if job["settings"].batch % world:
        raise ValueError(f"batch={job['settings'].batch} must be divisible by world={world} (equal slices)")
    states = _launch(_train_modes, job, modes, world=world)[0]
    return states[mode] if isinstance(mode, str) else states


__all__ = ["MODES", "TrainSettings", "launch_local", "train_one_task"]
