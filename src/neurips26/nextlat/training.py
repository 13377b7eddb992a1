"""The one trainer every objective shares (AdamW, constant lr, gradient clipping), and batch samplers."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from neurips26.harness.validation import check_scalar


def train(model: torch.nn.Module, batches: Callable[[int], torch.Tensor], steps: int, lr: float = 3e-3,
          clip: float = 1.0, weight_decay: float = 0.0, loss_fn: Callable | None = None) -> list[float]:
    """``steps`` AdamW steps on ``batches(step)``; ``loss_fn(model, ids)`` (default ``model(ids).loss``).

    Returns the per-step training loss.
    """
    steps, lr, clip = check_train_args(steps, lr, clip)
    losses = adamw_steps(model, batches, steps, lr, clip, weight_decay, loss_fn)
    model.eval()
    return losses


def check_train_args(steps: int, lr: float, clip: float) -> tuple[int, float, float]:
    return (check_scalar(steps, "steps", int, min=0), check_scalar(lr, "lr", float, min=0, inclusive="neither"),
            check_scalar(clip, "clip", float, min=0, inclusive="neither"))


def adamw_steps(module: torch.nn.Module, batches: Callable[[int], torch.Tensor], steps: int, lr: float,
                clip: float, weight_decay: float, loss_fn: Callable | None,
                record: Callable[[torch.Tensor], float] | None = None) -> list[float]:
    """The loop both trainers run (one process here, one rank in ``distributed.train_data_parallel``):
    per step ``loss_fn(module, batches(step))``, backward, global-norm clip at ``clip``, AdamW step.
    ``record(loss)`` is the float logged per step (default the loss itself). Leaves ``module`` in train mode."""
    loss_fn = loss_fn or (lambda m, ids: m(ids).loss)
    record = record or (lambda loss: float(loss.detach()))
    opt = torch.optim.AdamW(module.parameters(), lr=lr, weight_decay=weight_decay)
    module.train()
    losses = []
    for step in range(steps):
        loss = loss_fn(module, batches(step))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), clip)  # global norm (DTensor-aware for FSDP2)
        opt.step()
        losses.append(record(loss))
    return losses


def row_sampler(rows: np.ndarray, batch: int, seed: int) -> Callable[[int], torch.Tensor]:
    """Batches of ``batch`` rows drawn with replacement (seeded) from a [n, T] id array."""
    rng = np.random.default_rng(seed)
    t = torch.from_numpy(np.ascontiguousarray(rows))

    def sample(_step: int) -> torch.Tensor:
        return t[torch.from_numpy(rng.integers(0, len(rows), size=batch))]

    return sample


def window_sampler(stream: np.ndarray, batch: int, ctx: int, seed: int) -> Callable[[int], torch.Tensor]:
    """Random contiguous windows of ``ctx`` tokens from a 1-D token stream (seeded)."""
    rng = np.random.default_rng(seed)
    t = torch.from_numpy(np.ascontiguousarray(stream))

    def sample(_step: int) -> torch.Tensor:
        starts = rng.integers(0, len(stream) - ctx, size=batch)
        return torch.stack([t[s: s + ctx] for s in starts])

    return sample
