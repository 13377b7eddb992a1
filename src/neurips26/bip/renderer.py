"""The seeded, batched, differentiable procedural face renderer (spec "Reproduction" (b)).

14 identity parameters p ~ N(0, 1) set the geometry and tones; per-image nuisance (rotation, shift, scale,
eye openness, mouth curvature, background, a linear illumination gradient, pixel noise) comes from a
``torch.Generator``. Shapes are ``sigmoid(-sdf / 0.03)`` composited back to front (background, hair,
face, eyes, brows, nose, mouth). Coordinates in [-1, 1]; y grows downwards.
"""

from __future__ import annotations

import math

import torch

from neurips26.harness.validation import check_scalar

N_ID = 14
EDGE = 0.03


def sample_nuisance(B: int, gen: torch.Generator) -> dict:
    """Per-image nuisance draws (the spec's distributions)."""
    r = lambda *s: torch.randn(*s, generator=gen)        # noqa: E731
    u = lambda *s: torch.rand(*s, generator=gen)         # noqa: E731
    ang = u(B) * 2 * math.pi
    return {"rot": r(B) * math.radians(8), "shift": r(B, 2) * 0.04, "scale": 1 + r(B) * 0.04,
            "eye_open": 0.6 + 0.4 * u(B), "mouth_curve": r(B) * 0.06, "bg": 0.25 + 0.25 * u(B),
            "illum_dir": torch.stack([torch.cos(ang), torch.sin(ang)], 1), "illum": 0.3 * u(B)}


def _fill(sdf: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(-sdf / EDGE)


def render(ids: torch.Tensor, size: int = 24, gen: torch.Generator | None = None,
           nuisance: dict | None = None, noise: float = 0.02) -> torch.Tensor:
    """Images (B, 1, size, size) in [0, 1] for identity parameters ``ids`` (B, 14)."""
    if not isinstance(ids, torch.Tensor) or ids.ndim != 2 or ids.shape[1] != N_ID:
        raise ValueError(f"ids must be a (B, {N_ID}) tensor, got {getattr(ids, 'shape', type(ids))}")
    if not bool(torch.isfinite(ids).all()):
        raise ValueError("ids must be finite")
    size = check_scalar(size, "size", int, min=8)
    noise = check_scalar(noise, "noise", float, min=0)
    B = ids.shape[0]
    gen = gen if gen is not None else torch.Generator().manual_seed(0)
    nz = nuisance if nuisance is not None else sample_nuisance(B, gen)
    p = ids
    lin = torch.linspace(-1, 1, size)
    yy, xx = torch.meshgrid(lin, lin, indexing="ij")
    X, Y = xx[None], yy[None]
    c, s = torch.cos(nz["rot"])[:, None, None], torch.sin(nz["rot"])[:, None, None]
    sc = nz["scale"][:, None, None]
    Xs, Ys = X - nz["shift"][:, 0, None, None], Y - nz["shift"][:, 1, None, None]
    x = (c * Xs + s * Ys) / sc                 # face-frame coordinates
    y = (-s * Xs + c * Ys) / sc

    def col(i):
        return p[:, i, None, None]

    ax, ay = 0.62 + 0.06 * col(0), 0.80 + 0.06 * col(1)
    face_sdf = (torch.sqrt((x / ax) ** 2 + (y / ay) ** 2) - 1) * torch.minimum(ax, ay)
    hair_line = -0.50 + 0.08 * col(12)
    hair_sdf = torch.maximum((torch.sqrt((x / (ax + 0.08)) ** 2 + ((y + 0.05) / (ay + 0.08)) ** 2) - 1) * ay,
                             y - hair_line)
    eye_dx, eye_y, eye_r = 0.30 + 0.04 * col(2), -0.12 + 0.04 * col(3), 0.085 + 0.015 * col(4)
    openness = nz["eye_open"][:, None, None]
    eyes = 0
    brows = 0
    tilt, thick = 0.15 * col(5), 0.035 + 0.008 * col(6)
    for side in (-1.0, 1.0):
        ex = x - side * eye_dx
        eyes = eyes + _fill(torch.sqrt(ex ** 2 + ((y - eye_y) / openness) ** 2) - eye_r)
        by = eye_y - eye_r - 0.08 + side * tilt * ex
        brows = brows + _fill(torch.maximum((y - by).abs() - thick, ex.abs() - 1.4 * eye_r))
    nose_len, nose_w = 0.22 + 0.05 * col(7), 0.05 + 0.012 * col(8)
    ny = y - (eye_y + 0.05)
    nose = _fill(torch.maximum(x.abs() - nose_w * (ny / nose_len).clamp(0, 1),
                               torch.maximum(-ny, ny - nose_len)))
    mw, mh = 0.22 + 0.05 * col(9), 0.42 + 0.04 * col(10)
    curve = nz["mouth_curve"][:, None, None]
    my = y - (mh + curve * (1 - (x / mw).clamp(-1, 1) ** 2))
    mouth = _fill(torch.maximum(my.abs() - 0.025, x.abs() - mw))
    skin, hair_lv = 0.68 + 0.08 * col(11), 0.18 + 0.06 * col(13)
    img = nz["bg"][:, None, None].expand(B, size, size)
    img = img + _fill(hair_sdf) * (hair_lv - img)
    img = img + _fill(face_sdf) * (skin - img)
    img = img + eyes.clamp(0, 1) * (0.08 - img)
    img = img + brows.clamp(0, 1) * (hair_lv - img)
    img = img + nose * (skin - 0.12 - img)
    img = img + mouth * (0.3 - img)
    d = nz["illum_dir"]
    img = img * (1 + nz["illum"][:, None, None] * (d[:, 0, None, None] * X + d[:, 1, None, None] * Y) / 2)
    if noise:
        img = img + noise * torch.randn(B, size, size, generator=gen)
    return img.clamp(0, 1)[:, None]
