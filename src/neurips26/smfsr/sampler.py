"""The SMFSR sampler: cosine time grid, N steps (default 1) from noise, colour fixes, tiled inference.

Step i of N on the grid t_k = 0.5 (1 - cos(pi k / N)), walked from t = 1 down to 0::

    z <- z - (t_cur - t_next) u_theta(z, r = t_next, t = t_cur | y)

N = 1 is the paper's default (one NFE: x_hat = eps - u(eps, 0, 1 | y)). ``start="lr"`` (the direct
LR -> HR ablation the released code keeps) starts from the bicubic-upsampled LR instead of noise.
A teacher v_phi is sampled by the same loop (it ignores r): Euler with N_T steps.

Colour fixes (the released code's AdaIN, and the wavelet alternative)::

    AdaIN:   o' = (o - mean_o) / std_o * std_ref + mean_ref      per channel, population std
    wavelet: o' = high(o) + low(ref)                              low = 5-level dilated blur pyramid
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.smfsr.base import SCALE, check_image, upsample
from neurips26.smfsr.flows import cosine_grid

STARTS = ("noise", "lr")
COLOR_FIXES = (None, "adain", "wavelet")


def euler_sample(u_fn: Callable, z1: torch.Tensor, y, num_steps: int = 1) -> torch.Tensor:
    """Walk the cosine grid from t = 1 to 0 with ``u_fn(z, r, t, y)``; returns z_0."""
    num_steps = check_scalar(num_steps, "num_steps", int, min=1)
    grid = cosine_grid(num_steps, dtype=z1.dtype).to(z1.device)
    z = z1
    B = z1.shape[0]
    for i in range(num_steps, 0, -1):
        t_cur, t_next = grid[i], grid[i - 1]
        u = u_fn(z, t_next.expand(B), t_cur.expand(B), y)
        z = z - (t_cur - t_next) * u
    return z


def adain_color_fix(out: torch.Tensor, ref: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Per-channel AdaIN of ``out`` onto ``ref`` (population std for both; not clamped)."""
    mo, so = out.mean((-2, -1), keepdim=True), out.std((-2, -1), keepdim=True, correction=0)
    mr, sr = ref.mean((-2, -1), keepdim=True), ref.std((-2, -1), keepdim=True, correction=0)
    return (out - mo) / (so + eps) * sr + mr


def _wavelet_blur(x: torch.Tensor, radius: int) -> torch.Tensor:
    k = torch.tensor([[1, 2, 1], [2, 4, 2], [1, 2, 1]], dtype=x.dtype, device=x.device) / 16
    k = k.expand(x.shape[1], 1, 3, 3)
    x = F.pad(x, (radius,) * 4, mode="replicate")
    return F.conv2d(x, k, groups=x.shape[1], dilation=radius)


def wavelet_decompose(x: torch.Tensor, levels: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """(high, low) with x = high + low; low is the a-trous blur after ``levels`` levels."""
    high = torch.zeros_like(x)
    low = x
    for i in range(levels):
        blurred = _wavelet_blur(low, 2 ** i)
        high = high + (low - blurred)
        low = blurred
    return high, low


def wavelet_color_fix(out: torch.Tensor, ref: torch.Tensor, levels: int = 5) -> torch.Tensor:
    """High frequencies of ``out`` plus low frequencies of ``ref``."""
    return wavelet_decompose(out, levels)[0] + wavelet_decompose(ref, levels)[1]


def color_fix(out: torch.Tensor, ref: torch.Tensor, kind: str | None) -> torch.Tensor:
    kind = check_choice(kind, "color_fix", COLOR_FIXES)
    if kind is None:
        return out
    return adain_color_fix(out, ref) if kind == "adain" else wavelet_color_fix(out, ref)


def gaussian_window(size: int, dtype=torch.float32) -> torch.Tensor:
    """2-D Gaussian blending weights (sigma = size / 4), max 1."""
    x = torch.arange(size, dtype=torch.float64) - (size - 1) / 2
    g = torch.exp(-x ** 2 / (2 * (size / 4) ** 2))
    return (g[:, None] * g[None]).to(dtype)


def _tile_starts(n: int, tile: int, stride: int) -> list[int]:
    if n <= tile:
        return [0]
    starts = list(range(0, n - tile + 1, stride))
    if starts[-1] != n - tile:
        starts.append(n - tile)
    return starts


@torch.no_grad()
def super_resolve(model, lr: torch.Tensor, num_steps: int = 1, start: str = "noise",
                  noise: torch.Tensor | None = None, generator: torch.Generator | None = None,
                  color: str | None = "adain", tile: int | None = None, overlap: int = 0,
                  vae=None, clamp: bool = True) -> torch.Tensor:
    """SR of ``lr`` (B, C, h, w) in [0, 1] by ``model(z, r, t, lr)``; returns (B, C, 4h, 4w).

    num_steps: sampler steps N (>= 1; 1 = SMFSR's one NFE).
    start:     ``"noise"`` (the paper) or ``"lr"`` (direct LR -> HR ablation; deterministic).
    noise:     the starting noise (shape of the output); drawn from ``generator`` when None.
    color:     ``"adain"`` (default, to the bicubic LR), ``"wavelet"`` or None.
    tile, overlap: HR tile size and overlap for tiled inference (Gaussian-weighted blending); the
               noise is drawn once for the whole image and cropped per tile.
    vae:       optional hook with ``encode(img)`` / ``decode(latent)`` for latent-space models
               (full scale); None = pixel space (laptop scale).
    """
    channels = getattr(model, "channels", None)
    lr = check_image(lr, "lr", channels=channels, min_size=1)
    num_steps = check_scalar(num_steps, "num_steps", int, min=1)
    start = check_choice(start, "start", STARTS)
    check_choice(color, "color", COLOR_FIXES)
    B, C, h, w = lr.shape
    out_shape = (B, C, SCALE * h, SCALE * w)
    ref = upsample(lr)
    if noise is not None:
        if not isinstance(noise, torch.Tensor) or tuple(noise.shape) != out_shape:
            got = tuple(noise.shape) if isinstance(noise, torch.Tensor) else type(noise).__name__
            raise ValueError(f"noise must have the output shape {out_shape}, got {got}")
        if not torch.all(torch.isfinite(noise)):
            raise ValueError("noise must be finite")
    if start == "noise":
        z1 = noise if noise is not None else torch.randn(out_shape, generator=generator, dtype=lr.dtype)
    else:
        z1 = ref
    if vae is not None:
        z1 = vae.encode(z1) if start == "lr" else z1
    H, W = out_shape[-2:]
    if tile is None or (tile >= H and tile >= W):
        out = euler_sample(model, z1, lr, num_steps)
    else:
        tile = check_scalar(tile, "tile", int, min=SCALE)
        overlap = check_scalar(overlap, "overlap", int, min=0, max=tile - SCALE)
        if tile % SCALE or overlap % SCALE:
            raise ValueError(f"tile ({tile}) and overlap ({overlap}) must be multiples of the scale {SCALE}")
        stride = tile - overlap
        acc = torch.zeros(out_shape, dtype=lr.dtype)
        wsum = torch.zeros(out_shape, dtype=lr.dtype)
        win = gaussian_window(tile, lr.dtype)
        for i in _tile_starts(H, tile, stride):
            for j in _tile_starts(W, tile, stride):
                zt = z1[..., i:i + tile, j:j + tile]
                lt = lr[..., i // SCALE:(i + tile) // SCALE, j // SCALE:(j + tile) // SCALE]
                o = euler_sample(model, zt, lt, num_steps)
                acc[..., i:i + tile, j:j + tile] += o * win
                wsum[..., i:i + tile, j:j + tile] += win
        out = acc / wsum
    if vae is not None:
        out = vae.decode(out)
    out = color_fix(out, ref, color)
    return out.clamp(0, 1) if clamp else out


def diversity(samples: torch.Tensor) -> torch.Tensor:
    """Mean per-pixel std (x 255) over the K samples of axis 0 (K, B, C, H, W) -> (B,)."""
    if samples.ndim != 5:
        raise ValueError(f"samples must be (K, B, C, H, W), got {tuple(samples.shape)}")
    if samples.shape[0] < 2:
        raise ValueError(f"K must be >= 2 for diversity, got K = {samples.shape[0]}")
    return 255.0 * samples.std(0, correction=1).mean((1, 2, 3))
