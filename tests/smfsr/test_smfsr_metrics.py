"""Metrics: golden values from skimage, identities, orderings, bad input."""

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from neurips26.smfsr.metrics import fid, gmsd, haarpsi, hf_ratio, kid, ms_ssim, psnr, ssim, swd


@pytest.fixture
def imgs():
    g = torch.Generator().manual_seed(0)
    hr = torch.rand(6, 1, 32, 32, generator=g)
    hr = torch.nn.functional.avg_pool2d(hr, 3, 1, 1)  # some structure
    sr = (hr + 0.05 * torch.randn(hr.shape, generator=g)).clamp(0, 1)
    return sr, hr


def test_psnr_ssim_match_skimage(imgs):
    sr, hr = imgs
    for i in range(3):
        a, b = sr[i, 0].double().numpy(), hr[i, 0].double().numpy()
        assert abs(psnr(sr[i:i + 1], hr[i:i + 1]).item() - peak_signal_noise_ratio(b, a, data_range=1)) < 1e-6
        ref = structural_similarity(b, a, data_range=1, win_size=7)
        assert abs(ssim(sr[i:i + 1], hr[i:i + 1]).item() - ref) < 1e-6


def test_identities(imgs):
    _, hr = imgs
    assert torch.allclose(ms_ssim(hr, hr), torch.ones(6, dtype=torch.float64))
    assert torch.allclose(gmsd(hr, hr), torch.zeros(6, dtype=torch.float64), atol=1e-7)
    assert torch.allclose(haarpsi(hr, hr), torch.ones(6, dtype=torch.float64), atol=1e-6)
    small = hr[..., :16, :16].contiguous()  # every 7 x 7 position used (< 128 per image): no sampling
    assert swd(small, small)["mean"] == 0
    assert abs(hf_ratio(hr, hr) - 1) < 1e-12


def test_orderings(imgs):
    sr, hr = imgs
    worse = (hr + 0.2 * torch.randn(hr.shape, generator=torch.Generator().manual_seed(1))).clamp(0, 1)
    assert ms_ssim(sr, hr).mean() > ms_ssim(worse, hr).mean()
    assert gmsd(sr, hr).mean() < gmsd(worse, hr).mean()
    assert haarpsi(sr, hr).mean() > haarpsi(worse, hr).mean()
    blurry = torch.nn.functional.avg_pool2d(hr, 5, 1, 2)
    assert hf_ratio(blurry, hr) < 0.5


def test_swd_detects_a_shift_in_distribution():
    g = torch.Generator().manual_seed(0)
    a = torch.rand(40, 1, 16, 16, generator=g)
    b = torch.rand(40, 1, 16, 16, generator=g)
    c = torch.nn.functional.avg_pool2d(torch.rand(40, 1, 16, 16, generator=g), 3, 1, 1)
    res = swd(a, b, dirs=128, repeats=1)
    assert len(res["levels"]) == 2  # 16 and 8 px levels on 16 x 16 patches
    assert res["mean"] < swd(c, b, dirs=128, repeats=1)["mean"]


def test_fid_kid():
    g = np.random.default_rng(0)
    a = g.normal(size=(400, 5))
    assert abs(fid(a, a)) < 1e-6
    shifted = a + 1.0
    assert abs(fid(a, shifted) - 5.0) < 1e-6  # ||mu_a - mu_b||^2 with equal covariances
    assert kid(a, g.normal(size=(400, 5))) < kid(a, shifted)
    with pytest.raises(ValueError, match="features"):
        fid(a, a[:, :3])


def test_bad_input():
    x = torch.rand(2, 1, 16, 16)
    with pytest.raises(ValueError, match="same shape"):
        psnr(x, torch.rand(2, 1, 8, 8))
    with pytest.raises(ValueError, match="finite"):
        ssim(x * float("nan"), x)
    with pytest.raises(TypeError, match="float"):
        psnr((x * 255).byte(), x)


def test_separable_gaussian_blur_equals_the_2d_convolution():
    """MS-SSIM's moments: the banded-matmul blur == F.conv2d with the 2-D window (float64), values and grads."""
    import torch.nn.functional as F

    from neurips26.smfsr.metrics import _blur_valid, _gauss, _gauss1d
    g = torch.Generator().manual_seed(0)
    x = torch.rand(3, 5, 16, 12, generator=g, dtype=torch.float64, requires_grad=True)
    for win in (7, 5, 3):
        sigma = 1.5 * win / 11
        ref = F.conv2d(x, _gauss(win, sigma, torch.float64).expand(5, 1, -1, -1), groups=5)
        out = _blur_valid(x, _gauss1d(win, sigma, torch.float64))
        assert out.shape == ref.shape
        assert (out - ref).abs().max() < 1e-12
        w = torch.rand(ref.shape, generator=g, dtype=torch.float64)
        ga, = torch.autograd.grad((ref * w).sum(), x)
        gb, = torch.autograd.grad((out * w).sum(), x)
        assert (ga - gb).abs().max() < 1e-12


def test_swd_subset_patches_equal_rows_of_the_full_unfold():
    """The max_desc fast path cuts exactly the descriptors the full unfold + index would give."""
    from neurips26.smfsr.metrics import _descriptors, _patches_at
    g = torch.Generator().manual_seed(0)
    level = torch.rand(6, 2, 16, 13, generator=g, dtype=torch.float64)
    full = _descriptors(level, 10 ** 6, g)  # every position (L = 10 * 7 <= n)
    L = 10 * 7
    idx = torch.randperm(6 * L, generator=g)[:50]
    assert torch.equal(_patches_at(level, idx // L, idx % L), full[idx])


def test_separable_haar_filter_equals_the_2d_filter():
    import math

    import torch.nn.functional as F

    from neurips26.smfsr.metrics import _haar
    x = torch.rand(2, 1, 20, 17, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for scale in (1, 2, 3):
        n = 2 ** scale
        low = torch.full((n,), 1 / math.sqrt(n), dtype=x.dtype)
        high = low.clone()
        high[: n // 2] *= -1
        for vertical in (False, True):
            k = torch.outer(low, high) if not vertical else torch.outer(high, low)
            xp = F.pad(x, ((n - 1) // 2, n // 2, (n - 1) // 2, n // 2))
            ref = F.conv2d(xp, k.flip(0, 1)[None, None])
            assert (_haar(x, scale, vertical) - ref).abs().max() < 1e-12
