"""Image-quality metrics, all offline and weight-free (written here; piq is only an optional cross-check).

Full-reference (lower/higher as noted; images (B, C, H, W) in [0, 1], computed on the BT.601 Y channel):

- ``psnr``:   10 log10(1 / MSE) per image (higher better), ``border`` pixels cropped.
- ``ssim``:   Wang et al. 2004 with a uniform 7 x 7 window and sample covariances, K1 = 0.01,
              K2 = 0.03, averaged over the valid region (skimage's ``structural_similarity`` defaults).
- ``ms_ssim``: Wang et al. 2003, Gaussian window (11, sigma 1.5; shrunk for small images), weights
              (0.0448, 0.2856, 0.3001, 0.2363, 0.1333) renormalised over the scales that fit.
- ``gmsd``:   Xue et al. 2014, std of the gradient-magnitude similarity (Prewitt, c = 170 / 255^2;
              lower better).
- ``haarpsi``: Reisenhofer et al. 2018 (grey form), Haar wavelets at 3 scales, C = 30, alpha = 4.2
              (0-255 scale).

Distribution / realism:

- ``swd``:    sliced Wasserstein distance, PGGAN protocol: Laplacian pyramid down to 8 px, 7 x 7
              descriptors (128 per image per level, all positions where fewer are valid), per-level
              channel normalisation, 512 projections x 4 repeats, x 1e3; one value per level + their mean.
- ``hf_ratio``: power above the LR Nyquist (0.125 cycles/px at HR scale) of SR over that of HR.
- ``fid`` / ``kid``: Frechet distance and unbiased polynomial-kernel MMD on given feature vectors
              (local stand-in features: not comparable to published FID).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from neurips26.harness.validation import check_scalar
from neurips26.smfsr.base import check_image, to_y


def _pair(sr, hr):
    sr = check_image(sr, "sr")
    hr = check_image(hr, "hr")
    if sr.shape != hr.shape:
        raise ValueError(f"sr and hr must have the same shape, got {tuple(sr.shape)} and {tuple(hr.shape)}")
    return to_y(sr.double()), to_y(hr.double())


def _crop(x, border):
    return x[..., border:x.shape[-2] - border, border:x.shape[-1] - border] if border else x


def psnr(sr: torch.Tensor, hr: torch.Tensor, border: int = 0) -> torch.Tensor:
    """PSNR (dB) on Y per image, shape (B,)."""
    a, b = _pair(sr, hr)
    border = check_scalar(border, "border", int, min=0)
    a, b = _crop(a, border), _crop(b, border)
    mse = (a - b).pow(2).mean((1, 2, 3)).clamp(min=1e-12)
    return 10 * torch.log10(1.0 / mse)


def _box(x, win):
    return F.avg_pool2d(x, win, stride=1)


def ssim(sr: torch.Tensor, hr: torch.Tensor, win: int = 7, border: int = 0) -> torch.Tensor:
    """SSIM on Y per image (B,), skimage's defaults (uniform window, sample covariance, valid region)."""
    a, b = _pair(sr, hr)
    a, b = _crop(a, border), _crop(b, border)
    if min(a.shape[-2:]) < win:
        raise ValueError(f"images must be at least win = {win} pixels, got {tuple(a.shape[-2:])}")
    n = win * win
    cov = n / (n - 1)
    ma, mb = _box(a, win), _box(b, win)
    va = cov * (_box(a * a, win) - ma * ma)
    vb = cov * (_box(b * b, win) - mb * mb)
    vab = cov * (_box(a * b, win) - ma * mb)
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    s = ((2 * ma * mb + c1) * (2 * vab + c2)) / ((ma ** 2 + mb ** 2 + c1) * (va + vb + c2))
    return s.mean((1, 2, 3))


def _gauss1d(win: int, sigma: float, dtype) -> torch.Tensor:
    x = torch.arange(win, dtype=dtype) - (win - 1) / 2
    g = torch.exp(-x ** 2 / (2 * sigma ** 2))
    return g / g.sum()


def _gauss(win: int, sigma: float, dtype) -> torch.Tensor:
    """The 2-D window (1, 1, win, win) = outer(g, g) of the normalised 1-D Gaussian ``_gauss1d``."""
    g = _gauss1d(win, sigma, dtype)
    return (g[:, None] * g[None])[None, None]


def _band(n: int, g: torch.Tensor) -> torch.Tensor:
    """(n - w + 1, n) banded matrix M, M[i, i + a] = g[a]: ``M @ x`` is the valid 1-D correlation with g."""
    w = g.numel()
    m = n - w + 1
    idx = torch.arange(m, device=g.device)[:, None] + torch.arange(w, device=g.device)[None]
    return torch.zeros(m, n, dtype=g.dtype, device=g.device).scatter_(1, idx, g.expand(m, w).contiguous())


def _blur_valid(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Valid correlation of every (H, W) map of ``x`` with outer(g, g), separably: two matrix products
    with banded matrices (equal to ``F.conv2d(x, outer(g, g))`` per channel up to rounding; ~5x cheaper
    forward + backward than the grouped 7 x 7 convolution on the 16 x 16 quick patches)."""
    H, W = x.shape[-2:]
    bw = _band(W, g)
    bh = bw if H == W else _band(H, g)                      # square maps: one band matrix
    x = x @ bw.T                                            # rows: (..., H, W')
    return (x.transpose(-1, -2) @ bh.T).transpose(-1, -2)   # columns: (..., H', W')


MS_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)


def _ssim_gauss(a, b, g):
    # the five local moments in one separable blur (1-D Gaussian ``g``; one pair of matmuls for all five)
    C = a.shape[1]
    m = _blur_valid(torch.cat([a, b, a * a, b * b, a * b], dim=1), g)
    ma, mb, saa, sbb, sab = m.split(C, dim=1)
    va, vb, vab = saa - ma ** 2, sbb - mb ** 2, sab - ma * mb
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    cs = (2 * vab + c2) / (va + vb + c2)
    lum = (2 * ma * mb + c1) / (ma ** 2 + mb ** 2 + c1)
    return (lum * cs).mean((1, 2, 3)), cs.mean((1, 2, 3))


def ms_ssim(sr: torch.Tensor, hr: torch.Tensor, scales: int | None = None, differentiable: bool = False
            ) -> torch.Tensor:
    """MS-SSIM on Y per image (B,). ``scales``: as many of 5 as keep the coarsest side >= 7 px."""
    if differentiable:
        a, b = to_y(sr), to_y(hr)
    else:
        a, b = _pair(sr, hr)
    side = min(a.shape[-2:])
    if scales is None:
        scales = max(1, min(5, int(math.floor(math.log2(side / 7))) + 1))
    scales = check_scalar(scales, "scales", int, min=1, max=5)
    last = side // 2 ** (scales - 1)
    if last < 3:
        raise ValueError(f"images of side {side} are too small for {scales} MS-SSIM scales")
    win = min(11, last if last % 2 else last - 1)
    k = _gauss1d(win, 1.5 * win / 11, a.dtype).to(a.device)
    w = torch.tensor(MS_WEIGHTS[:scales], dtype=a.dtype)
    w = w / w.sum()
    out = torch.ones(a.shape[0], dtype=a.dtype)
    for i in range(scales):
        s, cs = _ssim_gauss(a, b, k)
        val = s if i == scales - 1 else cs
        out = out * val.clamp(min=1e-8) ** w[i]
        if i < scales - 1:
            a, b = F.avg_pool2d(a, 2), F.avg_pool2d(b, 2)
    return out


def gmsd(sr: torch.Tensor, hr: torch.Tensor) -> torch.Tensor:
    """GMSD on Y per image (B,) (lower is better); 2 x 2 mean-pool downsampling first, as the paper."""
    a, b = _pair(sr, hr)
    if min(a.shape[-2:]) >= 8:
        a, b = F.avg_pool2d(a, 2), F.avg_pool2d(b, 2)
    px = torch.tensor([[1, 0, -1], [1, 0, -1], [1, 0, -1]], dtype=a.dtype) / 3
    kx, ky = px[None, None], px.t()[None, None]

    def mag(x):
        x = F.pad(x, (1, 1, 1, 1), mode="replicate")
        return torch.sqrt(F.conv2d(x, kx) ** 2 + F.conv2d(x, ky) ** 2)

    c = 170.0 / 255.0 ** 2
    ma, mb = mag(a), mag(b)
    gms = (2 * ma * mb + c) / (ma ** 2 + mb ** 2 + c)
    return gms.flatten(1).std(1, correction=0)


def _haar(x, scale, vertical):
    n = 2 ** scale
    low = torch.full((n,), 1 / math.sqrt(n), dtype=x.dtype)
    high = low.clone()
    high[: n // 2] *= -1
    rows, cols = (low, high) if not vertical else (high, low)  # k = outer(rows, cols), separable
    pad_l, pad_r = (n - 1) // 2, n // 2  # 'same' size (MATLAB conv2 'same' alignment)
    xp = F.pad(x, (pad_l, pad_r, pad_l, pad_r))
    # conv2d(xp, k.flip(0, 1)) as a column pass then a row pass (2n instead of n^2 taps a pixel)
    xp = F.conv2d(xp, rows.flip(0).view(1, 1, n, 1))
    return F.conv2d(xp, cols.flip(0).view(1, 1, 1, n))


def haarpsi(sr: torch.Tensor, hr: torch.Tensor, C: float = 30.0, alpha: float = 4.2) -> torch.Tensor:
    """HaarPSI on Y per image (B,), in (0, 1], higher is better (grey form of Reisenhofer et al.)."""
    a, b = _pair(sr, hr)
    a, b = a * 255.0, b * 255.0
    if min(a.shape[-2:]) >= 64:
        a, b = F.avg_pool2d(a, 2), F.avg_pool2d(b, 2)
    num = torch.zeros(a.shape[0], dtype=a.dtype)
    den = torch.zeros(a.shape[0], dtype=a.dtype)
    for vertical in (False, True):
        ca = [_haar(a, j, vertical).abs() for j in (1, 2, 3)]
        cb = [_haar(b, j, vertical).abs() for j in (1, 2, 3)]
        sim = sum((2 * ca[j] * cb[j] + C) / (ca[j] ** 2 + cb[j] ** 2 + C) for j in (0, 1)) / 2
        weight = torch.maximum(ca[2], cb[2])
        lsim = torch.sigmoid(alpha * sim)
        num += (lsim * weight).sum((1, 2, 3))
        den += weight.sum((1, 2, 3))
    y = (num / den.clamp(min=1e-12)).clamp(1e-12, 1 - 1e-12)
    return (torch.log(y / (1 - y)) / alpha) ** 2


# ---------------------------------------------------------------------------- realism
def _binomial(C, dtype):
    k = torch.tensor([1, 4, 6, 4, 1], dtype=dtype) / 16
    return (k[:, None] * k[None]).expand(C, 1, 5, 5)


def _down(x):
    return F.conv2d(F.pad(x, (2, 2, 2, 2), mode="reflect"), _binomial(x.shape[1], x.dtype), stride=2,
                    groups=x.shape[1])


def _up(x, size):
    up = torch.zeros(x.shape[:2] + size, dtype=x.dtype)
    up[..., ::2, ::2] = x
    return F.conv2d(F.pad(up, (2, 2, 2, 2), mode="reflect"), 4 * _binomial(x.shape[1], x.dtype),
                    groups=x.shape[1])


def laplacian_pyramid(x: torch.Tensor, min_size: int = 8) -> list[torch.Tensor]:
    """Levels from fine to coarse; the coarsest (side ``min_size``) is the Gaussian level itself."""
    levels = []
    cur = x
    while min(cur.shape[-2:]) > min_size:
        low = _down(cur)
        levels.append(cur - _up(low, tuple(cur.shape[-2:])))
        cur = low
    levels.append(cur)
    return levels


def _descriptors(level: torch.Tensor, n: int, g: torch.Generator, size: int = 7) -> torch.Tensor:
    B, C, H, W = level.shape
    patches = F.unfold(level, size)  # (B, C*49, L)
    L = patches.shape[-1]
    if L <= n:
        return patches.transpose(1, 2).reshape(B * L, C * size * size)
    idx = torch.stack([torch.randperm(L, generator=g)[:n] for _ in range(B)])
    sel = torch.gather(patches, 2, idx[:, None, :].expand(B, patches.shape[1], n))
    return sel.transpose(1, 2).reshape(B * n, C * size * size)


def _patches_at(level: torch.Tensor, b: torch.Tensor, pos: torch.Tensor, size: int = 7) -> torch.Tensor:
    """The 7 x 7 descriptors of images ``b`` at positions ``pos`` (row-major over the valid positions),
    laid out as ``F.unfold`` lays them out: (n, C * size * size); the same values as gathering rows of the
    full unfold, without building it."""
    C, W = level.shape[1], level.shape[-1]
    nw = W - size + 1
    y, x = pos // nw, pos % nw
    d = torch.arange(size, device=level.device)
    c = torch.arange(C, device=level.device)
    out = level[b[:, None, None, None], c[None, :, None, None], (y[:, None] + d[None])[:, None, :, None],
                (x[:, None] + d[None])[:, None, None, :]]
    return out.reshape(b.shape[0], C * size * size)


def _swd_1(a: torch.Tensor, b: torch.Tensor, g: torch.Generator, dirs: int, repeats: int) -> float:
    total = 0.0
    for _ in range(repeats):
        d = torch.randn(a.shape[1], dirs, generator=g, dtype=torch.float64).to(a.dtype)
        d = d / d.norm(dim=0, keepdim=True)
        pa, _ = torch.sort((a @ d).t().contiguous(), dim=1)  # sort along contiguous rows (much faster)
        pb, _ = torch.sort((b @ d).t().contiguous(), dim=1)
        total += float((pa - pb).abs().mean())
    return total / repeats


def swd(sr: torch.Tensor, hr: torch.Tensor, seed: int = 0, per_image: int = 128, dirs: int = 512,
        repeats: int = 4, max_desc: int | None = None) -> dict:
    """SWD between the SR and HR sets (x 1e3, lower is more realistic): {"levels": [...], "mean": m}.

    ``max_desc``: at most this many descriptors per level and set (a seeded random subset, the same
    count for both; None = all, the PGGAN protocol) -- the experiment's budget knob."""
    sr = check_image(sr, "sr").double()
    hr = check_image(hr, "hr").double()
    if sr.shape != hr.shape:
        raise ValueError(f"sr and hr must have the same shape, got {tuple(sr.shape)} and {tuple(hr.shape)}")
    g = torch.Generator().manual_seed(seed)
    vals = []
    for la, lb in zip(laplacian_pyramid(sr), laplacian_pyramid(hr)):
        if min(la.shape[-2:]) < 7:
            continue
        B, L = la.shape[0], (la.shape[-2] - 6) * (la.shape[-1] - 6)
        if L <= per_image and max_desc is not None and B * L > max_desc:
            # every position is a descriptor (no per-image draw): draw the subset's indices exactly as
            # below and cut only those patches (the full unfold of a 1K-patch level is 40 MB of doubles)
            ia = torch.randperm(B * L, generator=g)[:max_desc]
            ib = torch.randperm(B * L, generator=g)[:max_desc]
            da, db = _patches_at(la, ia // L, ia % L), _patches_at(lb, ib // L, ib % L)
        else:
            da, db = _descriptors(la, per_image, g), _descriptors(lb, per_image, g)
            if max_desc is not None and da.shape[0] > max_desc:  # subset first: the statistics below are
                da = da[torch.randperm(da.shape[0], generator=g)[:max_desc]]  # then those of what is compared
                db = db[torch.randperm(db.shape[0], generator=g)[:max_desc]]
        C = la.shape[1]
        both = torch.cat([da, db]).view(-1, C, 49)
        mu = both.mean((0, 2), keepdim=True)
        sd = both.std((0, 2), keepdim=True).clamp(min=1e-8)
        da = ((da.view(-1, C, 49) - mu) / sd).flatten(1).float()
        db = ((db.view(-1, C, 49) - mu) / sd).flatten(1).float()
        vals.append(1e3 * _swd_1(da, db, g, dirs, repeats))
    return {"levels": vals, "mean": float(np.mean(vals))}


def hf_energy(x: torch.Tensor, cutoff: float = 0.125) -> torch.Tensor:
    """Per-image power above radial frequency ``cutoff`` (cycles/px) of the Y channel (mean removed)."""
    y = to_y(x.double())
    y = y - y.mean((-2, -1), keepdim=True)
    P = torch.fft.fft2(y).abs() ** 2
    fy = torch.fft.fftfreq(y.shape[-2], dtype=torch.float64)
    fx = torch.fft.fftfreq(y.shape[-1], dtype=torch.float64)
    mask = torch.sqrt(fy[:, None] ** 2 + fx[None] ** 2) > cutoff
    return (P * mask).sum((1, 2, 3)) / (y.shape[-1] * y.shape[-2])


def hf_ratio(sr: torch.Tensor, hr: torch.Tensor, cutoff: float = 0.125) -> float:
    """HF energy of SR over that of HR (summed over the set): ~1 realistic detail, << 1 blurry."""
    sr, hr = check_image(sr, "sr"), check_image(hr, "hr")
    cutoff = check_scalar(cutoff, "cutoff", float, min=0, max=0.5, inclusive="neither")
    return float(hf_energy(sr, cutoff).sum() / hf_energy(hr, cutoff).sum().clamp(min=1e-20))


def fid(fa: torch.Tensor, fb: torch.Tensor) -> float:
    """Frechet distance between Gaussians fitted to feature sets (N, D)."""
    from scipy import linalg

    a, b = np.asarray(fa, dtype=np.float64), np.asarray(fb, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or min(len(a), len(b)) < 2:
        raise ValueError(f"features must be (N, D) with N >= 2 and equal D, got {a.shape} and {b.shape}")
    ma, mb = a.mean(0), b.mean(0)
    ca, cb = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    covmean = np.real(linalg.sqrtm(ca @ cb))
    return float(((ma - mb) ** 2).sum() + np.trace(ca + cb - 2 * covmean))


def kid(fa: torch.Tensor, fb: torch.Tensor) -> float:
    """Unbiased MMD^2 with the polynomial kernel (x.y / D + 1)^3 (Binkowski et al. 2018)."""
    a, b = np.asarray(fa, dtype=np.float64), np.asarray(fb, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or min(len(a), len(b)) < 2:
        raise ValueError(f"features must be (N, D) with N >= 2 and equal D, got {a.shape} and {b.shape}")
    d = a.shape[1]
    k = lambda x, y: (x @ y.T / d + 1) ** 3  # noqa: E731
    kaa, kbb, kab = k(a, a), k(b, b), k(a, b)
    m, n = len(a), len(b)
    return float((kaa.sum() - np.trace(kaa)) / (m * (m - 1)) + (kbb.sum() - np.trace(kbb)) / (n * (n - 1))
                 - 2 * kab.mean())
