"""The Real-ESRGAN second-order degradation (x4plus config), re-implemented in batched torch.

basicsr is never imported. Order (Wang et al. 2021, ``RealESRGANModel.feed_data``)::

    1st: blur k1 -> random resize (once per batch) -> Gaussian | Poisson noise -> JPEG
    2nd: blur k2 (p 0.8) -> resize to H/4 * scale2 (once per batch) -> noise ->
         {resize to H/4 + final sinc, then JPEG}  or  {JPEG, then resize to H/4 + final sinc}  (p 0.5 each)
    clamp to [0, 1], round to the 8-bit grid

Kernels (``random_kernels``, all drawn at once on a 21 x 21 grid, zero outside the drawn odd size
7..21, normalised to sum 1): iso / aniso Gaussian, generalised iso / aniso (exp(-0.5 q^beta)),
plateau iso / aniso (1 / (1 + q^beta)) with probs [0.45, 0.25, 0.12, 0.03, 0.12, 0.03], where
q = x^T Sigma^-1 x, Sigma = R diag(sx^2, sy^2) R^T; with prob ``sinc_prob`` a circular low-pass
(sinc) kernel c J1(c r) / (2 pi r) instead, cutoff U(pi/3, pi) for size < 13 else U(pi/5, pi).
Poisson noise: vals = 2^ceil(log2(#unique 8-bit levels)), out = img + scale (Poisson(img vals)/vals - img);
grey noise applies one map to all channels. JPEG: a batched torch DCT-quantise round trip (``jpeg``;
PIL per image, ``jpeg_pil``, is the reference it is tested against).
"""

from __future__ import annotations

import io
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from neurips26.harness.validation import check_scalar
from neurips26.smfsr.base import SCALE, check_image

KMAX = 21
KERNEL_TYPES = ("iso", "aniso", "generalized_iso", "generalized_aniso", "plateau_iso", "plateau_aniso")
RESIZE_MODES = ("area", "bilinear", "bicubic")


@dataclass(frozen=True)
class KernelConfig:
    probs: tuple = (0.45, 0.25, 0.12, 0.03, 0.12, 0.03)
    sigma: tuple = (0.2, 3.0)
    beta_g: tuple = (0.5, 4.0)
    beta_p: tuple = (1.0, 2.0)
    sinc_prob: float = 0.1


@dataclass(frozen=True)
class DegradationConfig:
    """Every Real-ESRGAN x4plus parameter (the defaults are that config's values)."""
    kernel1: KernelConfig = field(default_factory=KernelConfig)
    kernel2: KernelConfig = field(default_factory=lambda: KernelConfig(sigma=(0.2, 1.5)))
    resize_prob: tuple = (0.2, 0.7, 0.1)
    resize_range: tuple = (0.15, 1.5)
    gaussian_noise_prob: float = 0.5
    noise_range: tuple = (1.0, 30.0)
    poisson_scale_range: tuple = (0.05, 3.0)
    gray_noise_prob: float = 0.4
    jpeg_range: tuple = (30, 95)
    second_blur_prob: float = 0.8
    resize_prob2: tuple = (0.3, 0.4, 0.3)
    resize_range2: tuple = (0.3, 1.2)
    gaussian_noise_prob2: float = 0.5
    noise_range2: tuple = (1.0, 25.0)
    poisson_scale_range2: tuple = (0.05, 2.5)
    gray_noise_prob2: float = 0.4
    jpeg_range2: tuple = (30, 95)
    final_sinc_prob: float = 0.8
    jpeg: bool = True  # False: skip both JPEG steps (the bench's "without JPEG" row)

    def to_dict(self) -> dict:
        return asdict(self)


def _uniform(n, lo, hi, g):
    return lo + (hi - lo) * torch.rand(n, generator=g, dtype=torch.float64)


def _grid():
    ax = torch.arange(KMAX, dtype=torch.float64) - KMAX // 2
    yy, xx = torch.meshgrid(ax, ax, indexing="ij")
    return xx, yy


def _size_mask(sizes: torch.Tensor) -> torch.Tensor:
    xx, yy = _grid()
    half = (sizes.to(torch.float64) // 2)[:, None, None]
    return (xx.abs()[None] <= half) & (yy.abs()[None] <= half)


def _radii() -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct radii of the 21 x 21 grid (66 of 441 taps) and each tap's index into them."""
    xx, yy = _grid()
    r2 = (xx ** 2 + yy ** 2).flatten()
    u, inv = torch.unique(r2, return_inverse=True)
    return torch.sqrt(u), inv


_RADII = _radii()


def sinc_kernels(cutoff: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """Circular low-pass kernels c J1(c r) / (2 pi r) (centre c^2 / (4 pi)), (B, 21, 21), sum 1. The Bessel
    function is evaluated once per distinct radius and spread to the taps (the same values per tap)."""
    ru, inv = _RADII
    c = cutoff[:, None]
    safe = torch.where(ru == 0, torch.ones_like(ru), ru)
    k = c * torch.special.bessel_j1(c * safe) / (2 * math.pi * safe)
    k = torch.where(ru == 0, c ** 2 / (4 * math.pi), k)
    k = k[:, inv].view(-1, KMAX, KMAX) * _size_mask(sizes)
    return k / k.sum((1, 2), keepdim=True)


def random_kernels(n: int, cfg: KernelConfig, g: torch.Generator) -> torch.Tensor:
    """``n`` Real-ESRGAN blur kernels, (n, 21, 21) float64, each summing to 1."""
    sizes = 2 * torch.randint(3, 11, (n,), generator=g) + 1  # odd 7..21
    kind = torch.multinomial(torch.tensor(cfg.probs, dtype=torch.float64), n, replacement=True, generator=g)
    iso = (kind % 2) == 0
    sx = _uniform(n, *cfg.sigma, g)
    sy = torch.where(iso, sx, _uniform(n, *cfg.sigma, g))
    theta = torch.where(iso, torch.zeros(n, dtype=torch.float64), _uniform(n, -math.pi, math.pi, g))
    beta = torch.ones(n, dtype=torch.float64)
    gen = (kind == 2) | (kind == 3)
    plat = (kind == 4) | (kind == 5)
    beta = torch.where(gen, _uniform(n, *cfg.beta_g, g), beta)
    beta = torch.where(plat, _uniform(n, *cfg.beta_p, g), beta)
    xx, yy = _grid()
    c, s = torch.cos(theta)[:, None, None], torch.sin(theta)[:, None, None]
    xr = c * xx[None] + s * yy[None]
    yr = -s * xx[None] + c * yy[None]
    q = (xr / sx[:, None, None]) ** 2 + (yr / sy[:, None, None]) ** 2
    b = beta[:, None, None]
    k = torch.where(plat[:, None, None], 1.0 / (1.0 + q.pow(b)), torch.exp(-0.5 * q.pow(b)))
    k = k * _size_mask(sizes)
    k = k / k.sum((1, 2), keepdim=True)
    use_sinc = torch.rand(n, generator=g, dtype=torch.float64) < cfg.sinc_prob
    if use_sinc.any():
        lo = torch.where(sizes < 13, torch.full((n,), math.pi / 3, dtype=torch.float64),
                         torch.full((n,), math.pi / 5, dtype=torch.float64))
        cutoff = lo + (math.pi - lo) * torch.rand(n, generator=g, dtype=torch.float64)
        idx = torch.nonzero(use_sinc).flatten()  # sinc kernels only where used (the same values)
        k[idx] = sinc_kernels(cutoff[idx], sizes[idx])
    return k


def final_sinc_kernels(n: int, prob: float, g: torch.Generator) -> torch.Tensor:
    """Final-stage kernels: sinc (size odd 7..21, cutoff U(pi/3, pi)) with prob ``prob``, else identity."""
    sizes = 2 * torch.randint(3, 11, (n,), generator=g) + 1
    cutoff = _uniform(n, math.pi / 3, math.pi, g)
    use = torch.rand(n, generator=g, dtype=torch.float64) < prob
    k = torch.zeros(n, KMAX, KMAX, dtype=torch.float64)
    k[:, KMAX // 2, KMAX // 2] = 1.0  # the identity (pulse) kernel
    idx = torch.nonzero(use).flatten()
    k[idx] = sinc_kernels(cutoff[idx], sizes[idx])
    return k


def filter2d_direct(img: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
    """Reference per-sample blur (B, C, H, W) by kernels (B, k, k): reflect padding, one grouped conv
    (correlation, as basicsr's filter2D)."""
    B, C, H, W = img.shape
    p = kernels.shape[-1] // 2
    x = F.pad(img, (p, p, p, p), mode=_pad_mode(H, W, p)).reshape(1, B * C, H + 2 * p, W + 2 * p)
    w = kernels.to(img.dtype).repeat_interleave(C, dim=0).unsqueeze(1)
    return F.conv2d(x, w, groups=B * C).reshape(B, C, H, W)


def _pad_mode(H: int, W: int, p: int) -> str:
    return "reflect" if min(H, W) > p else "replicate"


def _fast_size(n: int) -> int:
    """The least m >= n whose prime factors are 2, 3, 5 and 7 (a fast FFT length)."""
    m = n
    while True:
        r = m
        for f in (2, 3, 5, 7):
            while r % f == 0:
                r //= f
        if r == 1:
            return m
        m += 1


def filter2d(img: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
    """The same blur as ``filter2d_direct`` by one batched FFT (equal to float rounding; tested), several
    times faster for 21 x 21 kernels: correlation = circular convolution of the padded image with the
    flipped kernel. Computed in the image's dtype (float32 images: float32 FFTs)."""
    B, C, H, W = img.shape
    k = kernels.shape[-1]
    p = k // 2
    dt = torch.float64 if img.dtype == torch.float64 else torch.float32
    x = F.pad(img.to(dt), (p, p, p, p), mode=_pad_mode(H, W, p))
    # FFT sizes >= the padded size with small prime factors: the circular wrap only reaches the first
    # 2p outputs, which are cut away
    Hp, Wp = _fast_size(H + 2 * p), _fast_size(W + 2 * p)
    kf = torch.zeros(B, Hp, Wp, dtype=dt)
    kf[:, :k, :k] = kernels.to(dt).flip(-1, -2)
    out = torch.fft.irfft2(torch.fft.rfft2(x, s=(Hp, Wp)) * torch.fft.rfft2(kf)[:, None], s=(Hp, Wp))
    return out[..., 2 * p:2 * p + H, 2 * p:2 * p + W].to(img.dtype)


def _unique_levels(q: torch.Tensor) -> torch.Tensor:
    """Number of distinct 8-bit levels per sample of q (values on the 1/255 grid), by one bincount."""
    B = q.shape[0]
    idx = (q.reshape(B, -1) * 255).round().long().clamp(0, 255) + 256 * torch.arange(B)[:, None]
    counts = torch.bincount(idx.reshape(-1), minlength=256 * B).view(B, 256)
    return (counts > 0).sum(1).to(torch.float64)


def _gray(x: torch.Tensor) -> torch.Tensor:
    if x.shape[1] == 1:
        return x
    w = torch.tensor([0.299, 0.587, 0.114], dtype=x.dtype).view(1, 3, 1, 1)
    return (x * w).sum(1, keepdim=True)


def add_noise(x: torch.Tensor, g: torch.Generator, gauss_prob: float, sigma_range, poisson_range,
              gray_prob: float) -> torch.Tensor:
    """Per sample: Gaussian noise (sigma/255) w.p. ``gauss_prob``, else Poisson; grey w.p. ``gray_prob``.
    Each of the four kinds is drawn only for the samples that use it (batched per kind)."""
    B = x.shape[0]
    use_gauss = torch.rand(B, generator=g) < gauss_prob
    gray = torch.rand(B, generator=g) < gray_prob
    sigma = (_uniform(B, *sigma_range, g) / 255.0).to(x.dtype).view(B, 1, 1, 1)
    scale = _uniform(B, *poisson_range, g).to(x.dtype).view(B, 1, 1, 1)
    noise = torch.empty_like(x)
    for gauss_kind in (True, False):
        for gray_kind in (False, True):
            idx = torch.nonzero((use_gauss == gauss_kind) & (gray == gray_kind)).flatten()
            if idx.numel() == 0:
                continue
            xi = x[idx]
            if gauss_kind:
                shape = (idx.numel(), 1) + x.shape[2:] if gray_kind else xi.shape
                n = torch.randn(shape, generator=g, dtype=x.dtype).expand_as(xi) * sigma[idx]
            else:  # Poisson on the 8-bit image; vals = 2^ceil(log2(#unique levels))
                q = torch.clamp(((_gray(xi) if gray_kind else xi) * 255.0).round(), 0, 255) / 255.0
                vals = (2 ** torch.ceil(torch.log2(_unique_levels(q).clamp(min=2)))).to(x.dtype)
                vals = vals.view(-1, 1, 1, 1)
                n = ((torch.poisson(q * vals, generator=g) / vals - q) * scale[idx]).expand_as(xi)
            noise[idx] = n
    return x + noise


def jpeg_pil(x: torch.Tensor, quality) -> torch.Tensor:
    """Reference: PIL (libjpeg) JPEG encode/decode of each image at its quality (int or per-sample
    sequence); 8-bit output. ``jpeg`` is the batched torch equivalent (tested within tolerance)."""
    from PIL import Image

    B, C = x.shape[:2]
    qs = [int(quality)] * B if np.isscalar(quality) else [int(q) for q in quality]
    arr = (x.clamp(0, 1) * 255.0).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
    out = np.empty_like(arr)
    for i in range(B):
        im = Image.fromarray(arr[i, :, :, 0] if C == 1 else arr[i], mode="L" if C == 1 else "RGB")
        buf = io.BytesIO()
        im.save(buf, format="JPEG", quality=qs[i])
        buf.seek(0)
        dec = np.asarray(Image.open(buf).convert("L" if C == 1 else "RGB"))
        out[i] = dec[..., None] if C == 1 else dec
    return torch.from_numpy(out).permute(0, 3, 1, 2).to(x.dtype) / 255.0


# IJG (JPEG Annex K) base quantisation tables, luminance and chrominance
_QY = (16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
       14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
       49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99)
_QC = (17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99, 24, 26, 56, 99, 99, 99, 99, 99,
       47, 66, 99, 99, 99, 99, 99, 99) + (99,) * 32


def quant_tables(quality: torch.Tensor, base) -> torch.Tensor:
    """IJG quality scaling (libjpeg ``jpeg_quality_scaling``): (B, 8, 8) tables, entries in [1, 255]."""
    q = quality.to(torch.float64).clamp(1, 100)
    s = torch.where(q < 50, torch.floor(5000 / q), 200 - 2 * q)
    t = torch.tensor(base, dtype=torch.float64).view(1, 8, 8)
    return torch.floor((t * s.view(-1, 1, 1) + 50) / 100).clamp(1, 255)


def _dct_matrix() -> torch.Tensor:
    n = torch.arange(8, dtype=torch.float64)
    d = torch.cos((2 * n[None, :] + 1) * n[:, None] * math.pi / 16) * math.sqrt(2 / 8)
    d[0] /= math.sqrt(2)
    return d  # orthonormal: the JPEG DCT-II (1/4 C(u) C(v) sum ...)


_KRON: dict = {}


def _dct2_matrix(dtype: torch.dtype) -> torch.Tensor:
    """(64, 64) D kron D: the 2-D DCT of a row-major 8 x 8 block, vec(D X D^T) = (D kron D) vec(X)."""
    k = _KRON.get(dtype)
    if k is None:
        D = _dct_matrix()
        k = _KRON[dtype] = torch.kron(D, D).to(dtype)
    return k


def _block_codec(plane: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """DCT -> quantise -> dequantise -> IDCT of (B, H, W) planes (H, W multiples of 8) in [0, 255]:
    C = D X D^T per block as one (blocks, 64) x (64, 64) product with D kron D (and its transpose back)."""
    B, H, W = plane.shape
    K = _dct2_matrix(plane.dtype)
    blk = (plane - 128).reshape(B, H // 8, 8, W // 8, 8).transpose(2, 3).reshape(B, -1, 64)
    coef = blk @ K.T
    t = table.to(plane.dtype).reshape(B, 1, 64)
    rec = (torch.round(coef / t) * t) @ K                 # orthonormal: the inverse is the transpose
    rec = rec.add_(128).round_().clamp_(0, 255)
    return rec.reshape(B, H // 8, W // 8, 8, 8).transpose(2, 3).reshape(B, H, W)


# JFIF colour transforms (ITU-R BT.601, full range); chroma offsets of 128 added after / removed before
_RGB2YCC = torch.tensor([[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5], [0.5, -0.418688, -0.081312]])
_YCC2RGB = torch.tensor([[1.0, 0.0, 1.402], [1.0, -0.344136, -0.714136], [1.0, 1.772, 0.0]])


def jpeg(x: torch.Tensor, quality) -> torch.Tensor:
    """Batched JPEG round trip in torch, libjpeg's baseline path as PIL runs it: JFIF YCbCr, 4:2:0 chroma
    (2 x 2 means; fancy = bilinear upsampling), 8 x 8 DCT quantised with the IJG tables at each image's
    quality (int or per-sample sequence), edge-replicated padding to whole MCUs; 8-bit output. Equal to
    ``jpeg_pil`` within a few 8-bit levels (tested), not bit-exact (libjpeg's integer DCT). The colour
    transforms are one 3 x 3 product each, the block DCT one GEMM over all blocks (``_block_codec``)."""
    B, C, H, W = x.shape
    q = torch.full((B,), int(quality)) if np.isscalar(quality) else torch.as_tensor(list(quality))
    v = (x.clamp(0, 1) * 255.0).round().to(torch.float32)
    m = 8 if C == 1 else 16
    ph, pw = (-H) % m, (-W) % m
    if ph or pw:
        v = F.pad(v, (0, pw, 0, ph), mode="replicate")
    if C == 1:
        out = _block_codec(v[:, 0], quant_tables(q, _QY))[:, None]
    else:
        ycc = torch.einsum("ij,bjhw->bihw", _RGB2YCC, v)     # [Y, Cb, Cr] = M [R, G, B] (+ 128 on Cb, Cr)
        ycc[:, 1:] += 128
        ycc = ycc.round_()
        y = _block_codec(ycc[:, 0], quant_tables(q, _QY))
        chroma = F.avg_pool2d(ycc[:, 1:].clamp_(0, 255), 2)
        tc = quant_tables(q, _QC).repeat_interleave(2, 0)
        Hc, Wc = chroma.shape[-2:]
        chroma = _block_codec(chroma.reshape(2 * B, Hc, Wc), tc).reshape(B, 2, Hc, Wc)
        chroma = F.interpolate(chroma, scale_factor=2, mode="bilinear", align_corners=False) - 128
        out = torch.einsum("ij,bjhw->bihw", _YCC2RGB, torch.cat([y[:, None], chroma], 1))
        out = out.round_().clamp_(0, 255)                   # [R, G, B] = M^-1 [Y, Cb - 128, Cr - 128]
    return out[..., :H, :W].to(x.dtype) / 255.0


def _resize(x, size=None, scale=None, mode="bilinear"):
    kw = {} if mode == "area" else {"align_corners": False}
    if size is not None:
        return F.interpolate(x, size=size, mode=mode, **kw)
    return F.interpolate(x, scale_factor=scale, mode=mode, **kw)


def _random_scale(probs, rng, g) -> float:
    kind = int(torch.multinomial(torch.tensor(probs, dtype=torch.float64), 1, generator=g))
    u = float(torch.rand(1, generator=g, dtype=torch.float64))
    if kind == 0:
        return 1 + (rng[1] - 1) * u
    if kind == 1:
        return rng[0] + (1 - rng[0]) * u
    return 1.0


def _random_mode(g) -> str:
    return RESIZE_MODES[int(torch.randint(0, 3, (1,), generator=g))]


def _jpeg_q(B, rng, g):
    return torch.randint(int(rng[0]), int(rng[1]) + 1, (B,), generator=g).tolist()


DEGRADE_BLOCK = 64  # samples per block of the deterministic per-sample steps (no effect on the output)


def _blocked(fn, n: int, block: int) -> torch.Tensor:
    """``fn(slice)`` over consecutive blocks of ``block`` of the ``n`` samples, concatenated. Every step run
    this way is per-sample independent (blur, resize, JPEG), so the result equals ``fn(slice(0, n))``
    bitwise; the blocks keep the FFT / DCT intermediates cache-sized (on one core a 512-sample 64 x 64 RGB
    blur is ~2.7x faster in blocks of 16-64 than in one call)."""
    if n <= block:
        return fn(slice(0, n))
    return torch.cat([fn(slice(i, min(i + block, n))) for i in range(0, n, block)])


def _blur_subset(x: torch.Tensor, kernels: torch.Tensor, use: torch.Tensor) -> torch.Tensor:
    """``x`` with the samples where ``use`` blurred by their kernels (the others unchanged)."""
    idx = torch.nonzero(use).flatten()
    if idx.numel() == 0:
        return x
    if idx.numel() == x.shape[0]:
        return filter2d(x, kernels)
    x = x.clone()
    x[idx] = filter2d(x[idx], kernels[idx])
    return x


def degrade(hr: torch.Tensor, generator: torch.Generator, cfg: DegradationConfig | None = None,
            scale: int = SCALE, block: int = DEGRADE_BLOCK) -> torch.Tensor:
    """LR (B, C, H/4, W/4) on the 8-bit grid from HR (B, C, H, W) in [0, 1] (the module docstring's order).

    Every random draw is made for the whole batch in the order below (the random-resize scales and modes
    once per batch); the per-sample deterministic steps then run in blocks of ``block`` samples, which
    changes nothing in the output (bitwise; tested) but keeps the working set in cache."""
    cfg = cfg or DegradationConfig()
    hr = check_image(hr, "hr", min_size=2 * scale)
    block = check_scalar(block, "block", int, min=1)
    H, W = hr.shape[-2:]
    if H % scale or W % scale:
        raise ValueError(f"hr size {(H, W)} must be divisible by the scale {scale}")
    g = generator
    B = hr.shape[0]
    k1 = random_kernels(B, cfg.kernel1, g)
    s1 = _random_scale(cfg.resize_prob, cfg.resize_range, g)
    mode1 = _random_mode(g)
    x = _blocked(lambda sl: _resize(filter2d(hr[sl], k1[sl]), scale=s1, mode=mode1), B, block)
    x = add_noise(x, g, cfg.gaussian_noise_prob, cfg.noise_range, cfg.poisson_scale_range,
                  cfg.gray_noise_prob)
    if cfg.jpeg:
        q1 = _jpeg_q(B, cfg.jpeg_range, g)
        x = _blocked(lambda sl: jpeg(x[sl], q1[sl]), B, block)
    else:
        x = x.clamp(0, 1)
    k2 = random_kernels(B, cfg.kernel2, g)
    use2 = torch.rand(B, generator=g, dtype=torch.float64) < cfg.second_blur_prob
    s2 = _random_scale(cfg.resize_prob2, cfg.resize_range2, g)
    size2 = (max(1, int(H / scale * s2)), max(1, int(W / scale * s2)))
    mode2 = _random_mode(g)
    x = _blocked(lambda sl: _resize(_blur_subset(x[sl], k2[sl], use2[sl]), size=size2, mode=mode2), B, block)
    x = add_noise(x, g, cfg.gaussian_noise_prob2, cfg.noise_range2, cfg.poisson_scale_range2,
                  cfg.gray_noise_prob2)
    ks = final_sinc_kernels(B, cfg.final_sinc_prob, g)
    mode = _random_mode(g)
    q2 = _jpeg_q(B, cfg.jpeg_range2, g)
    sinc_first = float(torch.rand(1, generator=g)) < 0.5
    out = (H // scale, W // scale)

    def final(sl):
        y = x[sl]
        if sinc_first:
            y = filter2d(_resize(y, size=out, mode=mode), ks[sl])
            y = jpeg(y, q2[sl]) if cfg.jpeg else y
        else:
            y = jpeg(y, q2[sl]) if cfg.jpeg else y
            y = filter2d(_resize(y, size=out, mode=mode), ks[sl])
        return (y.clamp(0, 1) * 255.0).round() / 255.0

    return _blocked(final, B, block)
