"""Leaf helpers shared by every module: image checks at the API boundary, bicubic resize, Y channel.

Images are float tensors in [0, 1], shaped (B, C, H, W) (a 3-D (C, H, W) image is promoted to a
batch of one by ``check_image``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

SCALE = 4  # x4 super-resolution throughout (the paper's setting)


def check_image(x, name: str, channels: int | None = None, min_size: int = 1, unit_range: bool = True,
                batch: bool = True) -> torch.Tensor:
    """``x`` as a (B, C, H, W) float tensor; TypeError/ValueError naming ``name`` otherwise.

    Checks: a torch float tensor, 3-D or 4-D, ``channels`` channels (when given), both sides >=
    ``min_size``, finite, in [0, 1] when ``unit_range``.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a float tensor in [0, 1], got dtype {x.dtype}")
    if x.ndim == 3 and batch:
        x = x.unsqueeze(0)
    if x.ndim != 4:
        raise ValueError(f"{name} must be 3-D (C, H, W) or 4-D (B, C, H, W), got shape {tuple(x.shape)}")
    if channels is not None and x.shape[1] != channels:
        raise ValueError(f"{name} must have {channels} channel(s), got {x.shape[1]} (shape {tuple(x.shape)})")
    if min(x.shape[-2:]) < min_size:
        raise ValueError(f"{name} must be at least {min_size} x {min_size} pixels, got {tuple(x.shape[-2:])}")
    lo, hi = torch.aminmax(x)  # one pass; NaN propagates into both, Inf into one
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{name} must be finite (NaN/Inf found)")
    if unit_range and (lo < 0 or hi > 1):
        raise ValueError(f"{name} must lie in [0, 1], got range [{lo:.4g}, {hi:.4g}]")
    return x


def check_pair(hr: torch.Tensor, lr: torch.Tensor, scale: int = SCALE) -> None:
    """``ValueError`` unless HR is exactly ``scale`` x LR in both spatial sizes and batch/channels agree."""
    if hr.shape[:2] != lr.shape[:2]:
        raise ValueError(f"hr and lr must share batch and channels, got {tuple(hr.shape)} and "
                         f"{tuple(lr.shape)}")
    if hr.shape[-2] != scale * lr.shape[-2] or hr.shape[-1] != scale * lr.shape[-1]:
        raise ValueError(f"hr size {tuple(hr.shape[-2:])} must be {scale} x lr size {tuple(lr.shape[-2:])}")


def upsample(lr: torch.Tensor, scale: int = SCALE) -> torch.Tensor:
    """Bicubic x``scale`` (align_corners=False), not clamped (the network's condition)."""
    return F.interpolate(lr, scale_factor=scale, mode="bicubic", align_corners=False)


def bicubic_sr(lr: torch.Tensor, scale: int = SCALE) -> torch.Tensor:
    """The bicubic baseline: upsample and clamp to [0, 1]."""
    lr = check_image(lr, "lr")
    return upsample(lr, scale).clamp(0, 1)


def to_y(x: torch.Tensor) -> torch.Tensor:
    """BT.601 luma in [0, 1] of an RGB batch ((16 + 65.481 R + 128.553 G + 24.966 B) / 255); grey as is."""
    if x.shape[1] == 1:
        return x
    w = torch.tensor([65.481, 128.553, 24.966], dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return ((x * w).sum(1, keepdim=True) + 16.0) / 255.0
