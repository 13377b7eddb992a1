"""Scale-out hooks for stage 1: data-parallel SplitMeanFlow (``torch.distributed`` DDP), mixed precision
and gradient checkpointing. FSDP / ZeRO-2 for the SD3.5-medium stage 2 are not implemented here.

DDP (``ddp_splitmeanflow``): every rank draws the *global* batch's indices and random draws (eps, (r, t),
lam) from the same seeded generator and keeps its contiguous slice, so a step on ``world`` ranks is the
single-process step on the whole batch: the per-rank mean losses over equal slices, averaged by DDP's
all-reduce, are the global mean (tested: 2 gloo ranks == 1 process). Launch with ``torchrun`` (each
rank calls ``ddp_splitmeanflow(job, ddp=True)`` after ``init_process_group``) or, for CPU checks, with
``launch_local`` (gloo processes on this machine).

Mixed precision: ``mixed_precision()`` is ``torch.autocast`` (bf16 on CPU, fp16/bf16 on CUDA) around
the loss; gradient checkpointing: ``enable_checkpointing(model)`` recomputes every backbone block in
backward (``SRBackbone.run_block``).
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist

from neurips26.harness.distributed import launch_local as _launch
from neurips26.harness.validation import check_choice, check_scalar
from neurips26.smfsr.models import SRBackbone, build_backbone, make_student
from neurips26.smfsr.training import draw_split_batch, splitmeanflow_loss_from


def enable_checkpointing(model: SRBackbone, on: bool = True) -> SRBackbone:
    """Turn gradient checkpointing of the backbone's blocks on (or off); returns the model."""
    if not isinstance(model, SRBackbone):
        raise TypeError(f"model must be an SRBackbone, got {type(model).__name__}")
    model.grad_checkpointing = bool(on)
    return model


def mixed_precision(device: str = "cpu", dtype: torch.dtype | None = None):
    """``torch.autocast`` for the loss computation: bf16 on CPU, fp16 on CUDA by default."""
    device = check_choice(device, "device", ("cpu", "cuda"))
    dtype = dtype or (torch.bfloat16 if device == "cpu" else torch.float16)
    return torch.autocast(device_type=device, dtype=dtype)


def ddp_splitmeanflow(job: dict, ddp: bool = False) -> dict:
    """``job["steps"]`` SplitMeanFlow steps (plain SGD-free Adam, lr ``job["lr"]``) of a student made from
    ``job["teacher_state"]`` on ``job["hr"], job["lr_img"]``; with ``ddp`` each rank of the initialised
    process group trains on its slice of every global batch. Returns the student's state dict."""
    torch.manual_seed(0)
    teacher = build_backbone(job.get("backbone", "mlp"), job.get("channels", 1), job.get("hr_size", 16))
    teacher.load_state_dict(job["teacher_state"])
    teacher.eval().requires_grad_(False)
    student = make_student(teacher)
    if "student_state" in job:
        student.load_state_dict(job["student_state"])
    if job.get("checkpointing"):
        enable_checkpointing(student)
    rank, world = (dist.get_rank(), dist.get_world_size()) if ddp else (0, 1)
    batch = job["batch"]
    if batch % world:
        raise ValueError(f"batch={batch} must be divisible by the world size {world}")
    per = batch // world
    model = torch.nn.parallel.DistributedDataParallel(student) if ddp else student
    opt = torch.optim.Adam(model.parameters(), lr=job.get("lr", 1e-3))
    g = torch.Generator().manual_seed(job.get("seed", 0))
    hr_all, lr_all = job["hr"], job["lr_img"]
    for _ in range(job["steps"]):
        idx = torch.randint(0, hr_all.shape[0], (batch,), generator=g)
        hr, y = hr_all[idx], lr_all[idx]
        draws = draw_split_batch(hr, g, job.get("p_bnd", 0.5), job.get("p_one", 0.1))
        sl = slice(rank * per, (rank + 1) * per)
        draws = {k: v[sl] for k, v in draws.items()}
        amp = mixed_precision() if job.get("amp") else contextlib.nullcontext()
        with amp:
            # targets through the bare module (no grad, no DDP hooks); the prediction through DDP
            loss = _ddp_loss(model, student, teacher, hr[sl], y[sl], draws, job.get("boundary", "teacher"))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return {k: v.detach().clone() for k, v in student.state_dict().items()}


def _ddp_loss(model, student, teacher, hr, y, draws, boundary):
    class _Split(torch.nn.Module):  # grad-free target calls use ``student``; the graded one ``model``
        def forward(self, z, r, t, lr):
            return model(z, r, t, lr) if torch.is_grad_enabled() else student(z, r, t, lr)

    return splitmeanflow_loss_from(_Split(), teacher, hr, y, draws, boundary)


def launch_local(job: dict, world: int = 2) -> dict:
    """``ddp_splitmeanflow(job, ddp=True)`` on ``world`` local gloo processes; rank 0's student state."""
    world = check_scalar(world, "world", int, min=1)
    if job["batch"] % world:
        raise ValueError(f"batch={job['batch']} must be divisible by world={world} (equal slices)")
    return _launch(ddp_splitmeanflow, job, True, world=world)[0]
