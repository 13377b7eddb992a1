"""The FR encoder's ArcFace head (additive angular margin, s = 30, m = 0.3).

The small conv encoder of the image side is not implemented yet (see
the README's "Missing" list); the head is used on any embedding.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from neurips26.harness.validation import check_scalar


class ArcFaceHead(nn.Module):
    """logits_j = s cos(theta_j + m [j = y]), theta_j = angle(normalize(x), normalize(W_j)).

    When theta_y + m > pi the margin-free monotone fallback ``cos(theta) - m sin(m)`` is used (the
    insightface ``easy_margin=False`` rule).
    """

    def __init__(self, dim: int, n_classes: int, s: float = 30.0, m: float = 0.3):
        super().__init__()
        self.s = check_scalar(s, "s", float, min=0, inclusive="neither")
        self.m = check_scalar(m, "m", float, min=0, max=math.pi / 2)
        self.weight = nn.Parameter(torch.randn(check_scalar(n_classes, "n_classes", int, min=1),
                                               check_scalar(dim, "dim", int, min=1)) * 0.01)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        cos = F.normalize(x, dim=1) @ F.normalize(self.weight, dim=1).T
        cos_y = cos.gather(1, y[:, None]).clamp(-1 + 1e-7, 1 - 1e-7)
        sin_y = torch.sqrt(1 - cos_y ** 2)
        target = cos_y * math.cos(self.m) - sin_y * math.sin(self.m)
        target = torch.where(cos_y > math.cos(math.pi - self.m), target, cos_y - self.m * math.sin(self.m))
        return self.s * cos.scatter(1, y[:, None], target)

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.forward(x, y), y)
