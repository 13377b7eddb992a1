"""Acceptance check 9 (degradation invariants), the FFT blur fast path, the pair pool."""

import pytest
import torch

from neurips26.smfsr.data import PoolConfig, TEST_IMAGES, TRAIN_IMAGES, get_pool, load_image
from neurips26.smfsr.degradation import (DegradationConfig, KernelConfig, degrade, filter2d, filter2d_direct,
                                         final_sinc_kernels, jpeg, jpeg_pil, quant_tables, random_kernels,
                                         _fast_size)
from neurips26.smfsr.metrics import psnr


def test_check9_shape_grid_and_seed():
    hr = torch.rand(16, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    a = degrade(hr, torch.Generator().manual_seed(5))
    b = degrade(hr, torch.Generator().manual_seed(5))
    assert a.shape == (16, 3, 16, 16)
    assert torch.equal(a, b)
    assert a.min() >= 0 and a.max() <= 1
    assert torch.allclose(a * 255, (a * 255).round(), atol=1e-4)
    c = degrade(hr, torch.Generator().manual_seed(6))
    assert not torch.equal(a, c)


@pytest.mark.parametrize("channels, use_jpeg", [(1, True), (3, True), (3, False)])
def test_blocked_degradation_is_bitwise_the_one_call(channels, use_jpeg):
    """The per-sample steps run in blocks (``block``) give bitwise the single-block result (block >= B: every
    step on the whole batch at once, the pre-blocking code path), and the same random-number consumption
    (the generator ends in the same state)."""
    hr = torch.rand(37, channels, 64, 64, generator=torch.Generator().manual_seed(3))
    cfg = DegradationConfig(jpeg=use_jpeg)
    outs, states = [], []
    for block in (1000, 16, 5):
        g = torch.Generator().manual_seed(11)
        outs.append(degrade(hr, g, cfg, block=block))
        states.append(g.get_state())
    assert all(torch.equal(o, outs[0]) for o in outs[1:])
    assert all(torch.equal(s, states[0]) for s in states[1:])
    with pytest.raises(ValueError, match="block"):
        degrade(hr, torch.Generator(), cfg, block=0)


def test_check9_kernels_sum_to_one():
    g = torch.Generator().manual_seed(0)
    for cfg in (KernelConfig(), KernelConfig(sigma=(0.2, 1.5), sinc_prob=1.0)):
        k = random_kernels(500, cfg, g)
        assert (k.sum((1, 2)) - 1).abs().max() < 1e-6
    assert (final_sinc_kernels(200, 0.8, g).sum((1, 2)) - 1).abs().max() < 1e-6


def test_check9_jpeg_quality_orders_psnr():
    x = torch.from_numpy(load_image("astronaut", 3)[:128, :128].transpose(2, 0, 1).copy())[None]
    for codec in (jpeg, jpeg_pil):
        assert psnr(codec(x, 95), x) > psnr(codec(x, 30), x) + 3


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("quality", [30, 60, 95])
def test_torch_jpeg_matches_pil(channels, quality):
    """The batched torch JPEG is libjpeg's (PIL) round trip within a few 8-bit levels: per image PSNR
    between the two >= 40 dB on a photo, >= 35 dB on white noise (the worst case: every coefficient
    near a rounding boundary), mean |diff| < 1.5 (photo) / 3 (noise) levels, the same distortion vs the
    input (0.3 dB)."""
    g = torch.Generator().manual_seed(quality)
    photo = torch.from_numpy(load_image("astronaut", channels)[:100, :90].transpose(2, 0, 1).copy())[None]
    noise = torch.rand(1, channels, 100, 90, generator=g)  # odd sizes: partial MCUs are padded
    x = torch.cat([photo, noise])
    a, b = jpeg(x, [quality, quality]), jpeg_pil(x, quality)
    assert a.shape == x.shape and torch.allclose(a * 255, (a * 255).round(), atol=1e-3)
    for i, (floor_db, levels) in enumerate(((40, 1.5), (35, 3.0))):
        assert psnr(a[i:i + 1], b[i:i + 1]) >= floor_db
        assert (a[i] - b[i]).abs().mean() * 255 < levels
        assert abs(psnr(a[i:i + 1], x[i:i + 1]) - psnr(b[i:i + 1], x[i:i + 1])) < 0.3


def test_quant_tables_are_ijg():
    t = quant_tables(torch.tensor([50, 100, 10]), (16,) * 64)
    assert t[0, 0, 0] == 16 and t[1, 0, 0] == 1 and t[2, 0, 0] == 80  # s = 100, 0, 500


def test_fast_fft_size():
    assert [_fast_size(n) for n in (84, 116, 37, 11)] == [84, 120, 40, 12]


def test_fft_blur_equals_grouped_conv():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(6, 3, 40, 29, generator=g, dtype=torch.float64)  # 29 + 20 = 49 = 7^2, 60: padded FFT
    k = random_kernels(6, KernelConfig(), g)
    assert torch.allclose(filter2d(x, k), filter2d_direct(x, k), atol=1e-10)
    x32 = torch.rand(4, 1, 23, 37, generator=g)
    k32 = random_kernels(4, KernelConfig(), g)
    out = filter2d(x32, k32)
    assert out.dtype == torch.float32 and torch.allclose(out, filter2d_direct(x32, k32), atol=1e-5)


def test_no_jpeg_option_and_bad_input():
    hr = torch.rand(4, 1, 64, 64)
    out = degrade(hr, torch.Generator().manual_seed(0), DegradationConfig(jpeg=False))
    assert out.shape == (4, 1, 16, 16)
    with pytest.raises(ValueError, match="divisible"):
        degrade(torch.rand(2, 1, 62, 62), torch.Generator())
    with pytest.raises(ValueError, match="at least"):
        degrade(torch.rand(2, 1, 4, 4), torch.Generator())
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        degrade(hr * 2, torch.Generator())


def test_split_is_the_specs():
    assert set(TEST_IMAGES) == {"astronaut", "coffee", "chelsea", "china", "flower"}
    assert "motorcycle_right" not in TRAIN_IMAGES and not set(TEST_IMAGES) & set(TRAIN_IMAGES)
    assert load_image("china", 1).shape == (427, 640, 1)


def test_pool_is_seeded_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    cfg = PoolConfig(split="test", n=40, chunk=16)
    a = get_pool(cfg)
    assert not a.cached and a.hr.shape == (40, 1, 16, 16) and a.lr.shape == (40, 1, 4, 4)
    b = get_pool(cfg)
    assert b.cached and torch.equal(a.hr, b.hr) and torch.equal(a.lr, b.lr)
    assert list(tmp_path.glob("smfsr/pool-*.pt"))
    assert PoolConfig(split="test", n=40, seed=1).key() != cfg.key()


def test_pool_built_once_when_asked_side_by_side(tmp_path, monkeypatch):
    """Two callers asking for one missing pool at once (the quick run's seed processes): one builds it,
    the other waits on the lock and reads the cached copy (flock locks conflict between open files, so
    two threads stand in for two processes)."""
    import threading
    import time

    import neurips26.smfsr.data as data

    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    cfg = PoolConfig(split="test", n=24, chunk=8)
    real, builds, building, missing = data.build_pool, [], threading.Event(), []

    def slow_build(*a, **k):
        builds.append(1)
        building.set()
        time.sleep(0.5)  # the second caller arrives while the pool is being built
        return real(*a, **k)

    def second():
        building.wait(30)  # only once the first caller is inside the build (the pool file is still missing)
        missing.append(not (tmp_path / "smfsr" / f"pool-{cfg.key()}.pt").exists())
        out[1] = get_pool(cfg)

    monkeypatch.setattr(data, "build_pool", slow_build)
    out = [None, None]
    threads = [threading.Thread(target=lambda: out.__setitem__(0, get_pool(cfg))), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert missing == [True] and len(builds) == 1   # the second caller did contend for the missing pool
    assert sorted(p.cached for p in out) == [False, True]
    assert torch.equal(out[0].hr, out[1].hr) and torch.equal(out[0].lr, out[1].lr)
    assert not get_pool(cfg, cache=False).cached and len(builds) == 2  # cache=False always builds


def test_pool_builds_when_its_lock_file_cannot_be_opened(tmp_path, monkeypatch):
    """A lock file that cannot be opened (here a directory in its place; another user's file or a read-only
    cache alike) does not stop the build: it runs unlocked, as before the lock existed."""
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    cfg = PoolConfig(split="test", n=8, chunk=8)
    (tmp_path / "smfsr" / f"pool-{cfg.key()}.lock").mkdir(parents=True)
    a = get_pool(cfg)
    assert not a.cached and a.hr.shape[0] == 8 and get_pool(cfg).cached


def test_block_dct_gemm_is_the_2d_dct():
    """D kron D on a row-major block == scipy's orthonormal 2-D DCT-II of the block (float64, 1e-9)."""
    import numpy as np
    import scipy.fft

    from neurips26.smfsr.degradation import _dct2_matrix

    blocks = torch.rand(50, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 255
    ours = (blocks.reshape(50, 64) @ _dct2_matrix(torch.float64).T).reshape(50, 8, 8)
    ref = scipy.fft.dctn(blocks.numpy(), type=2, norm="ortho", axes=(1, 2))
    assert np.abs(ours.numpy() - ref).max() < 1e-9


@pytest.mark.parametrize("channels", [1, 3])
def test_jpeg_is_a_real_jpeg_degradation(channels):
    """Error falls monotonically with quality (PSNR at 10 < 30 < 50 < 70 < 90, as PIL's), and at low
    quality the codec leaves blocking artefacts: the mean jump across the 8-pixel block seams exceeds the
    jump between the neighbouring columns inside the blocks by > 1.5x (a smooth image has none)."""
    x = torch.from_numpy(load_image("coffee", channels)[:96, :128].transpose(2, 0, 1).copy())[None]
    for codec in (jpeg, jpeg_pil):
        p = [psnr(codec(x, q), x) for q in (10, 30, 50, 70, 90)]
        assert all(a < b for a, b in zip(p, p[1:])), (codec.__name__, p)
    smooth = torch.nn.functional.avg_pool2d(x, 9, stride=1, padding=4, count_include_pad=False)
    for img, blocky in ((jpeg(smooth, 10), True), (smooth, False)):
        d = (img[..., 1:] - img[..., :-1]).abs().mean(dim=(0, 1, 2))   # jump between columns c and c + 1
        seam = d[7::8].mean() / d[torch.arange(d.numel()) % 8 != 7].mean()
        assert (seam > 1.5) == blocky, float(seam)
