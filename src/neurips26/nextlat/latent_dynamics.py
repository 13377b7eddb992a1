"""The latent dynamics model psi: h_hat = h + MLP(Norm([e(x_next); h])) (spec M2, official code).

Concatenation order is embedding first; Norm is a bias-free LayerNorm over 2p (``norm="rms"`` for the
RMSNorm variant of one port); the MLP is Linear(2p->m) GELU Linear(m->m) GELU Linear(m->p) without
biases, initialised N(0, 0.02); m = 128 * round(proj_factor * 2p / 128) (Python round, half to even).
"""

from __future__ import annotations

import torch
from torch import nn

from neurips26.harness.validation import check_choice, check_scalar

INIT_STD = 0.02


def latent_width(p: int, proj_factor: float) -> int:
    """m = 128 * round(proj_factor * 2p / 128); ValueError when that is below 128."""
    p = check_scalar(p, "p", int, min=1)
    proj_factor = check_scalar(proj_factor, "proj_factor", float, min=0, inclusive="neither")
    m = 128 * round(proj_factor * 2 * p / 128)
    if m < 128:
        raise ValueError(f"proj_factor={proj_factor} with p={p} gives MLP width m={m} < 128 "
                         f"(m = 128 * round(proj_factor * 2p / 128)); use a larger proj_factor")
    return m


class LatentDynamics(nn.Module):
    """psi(h, e) -> next latent; ``h`` and ``e`` are [..., p]."""

    def __init__(self, p: int, proj_factor: float = 1.0, dropout: float = 0.0, norm: str = "layernorm"):
        super().__init__()
        self.p = check_scalar(p, "p", int, min=1)
        self.m = latent_width(p, proj_factor)
        dropout = check_scalar(dropout, "dropout", float, min=0, max=1, inclusive="left")
        norm = check_choice(norm, "norm", ("layernorm", "rms"))
        self.norm = nn.LayerNorm(2 * p, bias=False) if norm == "layernorm" else nn.RMSNorm(2 * p)
        self.drop = nn.Dropout(dropout)
        self.mlp = nn.Sequential(nn.Linear(2 * p, self.m, bias=False), nn.GELU(),
                                 nn.Linear(self.m, self.m, bias=False), nn.GELU(),
                                 nn.Linear(self.m, p, bias=False))
        for layer in self.mlp:
            if isinstance(layer, nn.Linear):
                nn.init.normal_(layer.weight, mean=0.0, std=INIT_STD)

    def forward(self, h: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        if h.shape != e.shape or h.shape[-1] != self.p:
            raise ValueError(f"h and e must both be [..., {self.p}], got {tuple(h.shape)} "
                             f"and {tuple(e.shape)}")
        return h + self.mlp(self.norm(torch.cat([e, self.drop(h)], dim=-1)))
