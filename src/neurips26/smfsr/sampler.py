"""The SMFSR sampler: cosine time grid, N steps (default 1) from noise, colour fixes, tiled inference.

Step i of N on the grid t_k = 0.5 (1 - cos(pi k / N)), walked from t = 1 down to 0::

    z <- z - (t_cur - t_next) u_theta(z, r = t_next, t = t_cur | y)

N = 1 is the paper's default (one NFE: x_hat = eps - u(eps, 0, 1 | y)). ``start="lr"`` (the direct
LR -> HR ablation the released code keeps) starts from the bicubic-upsampled LR instead of noise.
A teacher v_phi is sampled by the same loop (it ignores r): Euler with N_T steps.

Colour fixes (the released code's AdaIN, and the wavelet alternative)::

    AdaIN:   o' = (o - mean_o) / std_o * std_ref + mean_ref      per channel, population std (the
             reference's moments in closed form from the LR: bicubic x4 is a linear map)
    wavelet: o' = high(o) + low(ref)                              low = 5-level dilated blur pyramid
"""

from __future__ import annotations

import math
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
    # a backbone's ``forward_at`` takes the one interval of a grid step for the whole batch (and, under
    # no_grad, reuses its cached interval conditioning); any other callable gets (B,) time vectors
    at = getattr(u_fn, "forward_at", None)
    B = z1.shape[0]
    if num_steps == 1:  # the grid is [0, 1]: z_0 = z_1 - u(z_1, 0, 1) (the same values, no grid)
        if at is not None:  # host floats: no device read-back for the interval
            return z1 - at(z1, 0.0, 1.0, y)
        zero = torch.zeros((), dtype=z1.dtype, device=z1.device)
        one = torch.ones((), dtype=z1.dtype, device=z1.device)
        return z1 - u_fn(z1, zero.expand(B), one.expand(B), y)
    grid = cosine_grid(num_steps, dtype=z1.dtype)  # on the host
    z = z1
    if at is not None:
        # host floats for forward_at (exact: the grid's values in z's dtype) and the step lengths
        # t_cur - t_next computed in z's dtype, as the tensor loop below does
        times, steps = grid.tolist(), (grid[1:] - grid[:-1]).tolist()
        for i in range(num_steps, 0, -1):
            z = z - steps[i - 1] * at(z, times[i - 1], times[i], y)
        return z
    grid = grid.to(z1.device)
    for i in range(num_steps, 0, -1):
        t_cur, t_next = grid[i], grid[i - 1]
        z = z - (t_cur - t_next) * u_fn(z, t_next.expand(B), t_cur.expand(B), y)
    return z


def _centre(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(mean, x - mean, population std) per channel over (H, W), each (B, C, 1, 1) but the centred map
    (shape of ``x``); two-pass, the std as the centred map's norm (torch.var_mean's Welford kernel is
    ~10x slower on these small maps)."""
    flat = x.flatten(-2)
    m = flat.mean(-1, keepdim=True)
    centred = flat - m
    sd = torch.linalg.vector_norm(centred, dim=-1, keepdim=True) * (flat.shape[-1] ** -0.5)
    return m.unsqueeze(-1), centred.view_as(x), sd.unsqueeze(-1)


def _mean_std(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and population std over (H, W), (B, C, 1, 1) each."""
    m, _, sd = _centre(x)
    return m, sd


def adain_color_fix(out: torch.Tensor, ref: torch.Tensor | None = None, eps: float = 1e-5,
                    ref_stats: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Per-channel AdaIN of ``out`` onto ``ref`` (population std for both; not clamped):
    o' = (o - mean_o) a + mean_ref, a = std_ref / (std_o + eps), with the centred map computed once
    (``_centre`` gives std_o as its norm; 7 kernels in all).

    ``ref_stats``: (mean_ref, std_ref) of shape (B, C, 1, 1) instead of ``ref`` (``reference_stats``
    gives them for the bicubic-upsampled LR without upsampling it)."""
    if ref_stats is None:
        if ref is None:
            raise ValueError("adain_color_fix needs ref or ref_stats")
        ref_stats = _mean_std(ref)
    mr, sr = ref_stats
    _, centred, so = _centre(out)
    return torch.addcmul(mr, centred, sr / (so + eps))


_STATS_CACHE: dict = {}
MAX_STATS_LR_PIXELS = 1024  # closed-form reference statistics up to 32 x 32 LR inputs (else upsample)


def _bicubic_moments(h: int, w: int, dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(m, Q) with up(y).mean() = y . m and up(y)^2 .mean() = y^T Q y for a flattened (h w) LR y
    (bicubic x4 is linear: up(y) = y M, so m = M 1 / (H W), Q = M M^T / (H W))."""
    key = (h, w, dtype, device)
    if key not in _STATS_CACHE:
        basis = torch.eye(h * w, dtype=torch.float64).view(h * w, 1, h, w)
        M = upsample(basis).reshape(h * w, -1)
        n = M.shape[1]
        _STATS_CACHE[key] = ((M.sum(1) / n).to(dtype=dtype, device=device),
                             (M @ M.T / n).to(dtype=dtype, device=device))
    return _STATS_CACHE[key]


def reference_stats(lr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel (mean, population std) of the bicubic-upsampled ``lr`` (B, C, 1, 1), the AdaIN
    reference, in closed form from the LR pixels for inputs of up to ``MAX_STATS_LR_PIXELS``."""
    B, C, h, w = lr.shape
    if h * w > MAX_STATS_LR_PIXELS:
        var, mean = torch.var_mean(upsample(lr), dim=(-2, -1), correction=0, keepdim=True)
        return mean, var.sqrt()
    m, Q = _bicubic_moments(h, w, lr.dtype, lr.device)
    y = lr.reshape(B * C, h * w)
    c = y.mean(1, keepdim=True)
    yc = y - c  # bicubic weights sum to 1, so up(y) - c = up(y - c): centring keeps a flat LR exactly flat
    mean_c = yc @ m
    std = (((yc @ Q) * yc).sum(1) - mean_c * mean_c).clamp(min=0).sqrt()
    return (mean_c + c[:, 0]).view(B, C, 1, 1), std.view(B, C, 1, 1)


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
    ref = upsample(lr) if (start == "lr" or color == "wavelet") else None  # AdaIN needs only its stats
    if noise is not None:
        if not isinstance(noise, torch.Tensor) or tuple(noise.shape) != out_shape:
            got = tuple(noise.shape) if isinstance(noise, torch.Tensor) else type(noise).__name__
            raise ValueError(f"noise must have the output shape {out_shape}, got {got}")
        if not math.isfinite(float(noise.abs().amax())):  # one reduction; NaN and Inf propagate
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
    if color == "adain":
        out = adain_color_fix(out, ref_stats=reference_stats(lr))
    elif color == "wavelet":
        out = wavelet_color_fix(out, ref)
    return out.clamp_(0, 1) if clamp else out


def diversity(samples: torch.Tensor) -> torch.Tensor:
    """Mean per-pixel std (x 255) over the K samples of axis 0 (K, B, C, H, W) -> (B,)."""
    if samples.ndim != 5:
        raise ValueError(f"samples must be (K, B, C, H, W), got {tuple(samples.shape)}")
    if samples.shape[0] < 2:
        raise ValueError(f"K must be >= 2 for diversity, got K = {samples.shape[0]}")
    return 255.0 * samples.std(0, correction=1).mean((1, 2, 3))
