"""LoRA (Hu et al. 2021) for the stage-2 fake score: a frozen copy of the teacher plus low-rank updates.

Every ``nn.Linear`` W (out x in) of the copied module becomes::

    y = W x + b + (alpha / rank) B A x,    A ~ Kaiming-uniform (rank x in),  B = 0 (out x rank)

so the LoRA fake score equals the teacher exactly at step 0, and only A, B train (OSEDiff's fake score is
a LoRA of the diffusion prior of rank 4; the laptop default is a full copy, ``RefineConfig.fake_score``).
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from neurips26.harness.validation import check_scalar


class LoRALinear(nn.Module):
    """``base`` (frozen) + (alpha / rank) B A; B zero-initialised."""

    def __init__(self, base: nn.Linear, rank: int = 4, alpha: float | None = None):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"base must be an nn.Linear, got {type(base).__name__}")
        self.rank = check_scalar(rank, "rank", int, min=1)
        self.scale = (float(alpha) if alpha is not None else float(rank)) / rank
        self.base = base.requires_grad_(False)
        w = base.weight
        self.lora_a = nn.Parameter(torch.empty(rank, base.in_features, dtype=w.dtype, device=w.device))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank, dtype=w.dtype, device=w.device))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.scale * F.linear(F.linear(x, self.lora_a), self.lora_b)


def lora_copy(module: nn.Module, rank: int = 4, alpha: float | None = None) -> nn.Module:
    """A deep copy of ``module`` with every ``nn.Linear`` wrapped in ``LoRALinear`` and everything else
    frozen; the copy computes exactly what ``module`` does until the LoRA factors train."""
    rank = check_scalar(rank, "rank", int, min=1)
    out = copy.deepcopy(module).requires_grad_(False)
    targets = [(name, m) for name, m in out.named_modules() if isinstance(m, nn.Linear)]
    if not targets:
        raise ValueError(f"{type(module).__name__} has no nn.Linear layer to adapt")
    for name, lin in targets:
        parent_name, _, attr = name.rpartition(".")
        parent = out.get_submodule(parent_name) if parent_name else out
        setattr(parent, attr, LoRALinear(lin, rank, alpha))
    return out


def lora_parameters(module: nn.Module) -> list[nn.Parameter]:
    """The trainable LoRA factors (A, B) of a ``lora_copy``."""
    return [p for n, p in module.named_parameters() if n.endswith(("lora_a", "lora_b"))]
