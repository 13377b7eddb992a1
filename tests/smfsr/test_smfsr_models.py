"""Backbones, the interval embedding (check 12), the sampler (checks 6, 10, 11), tiling, bad input."""

import pytest
import torch

from neurips26.smfsr.base import upsample
from neurips26.smfsr.models import build_backbone, make_student
from neurips26.smfsr.sampler import (adain_color_fix, diversity, super_resolve, wavelet_color_fix,
                                     wavelet_decompose)


def _inputs(C=1, H=16, B=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, C, H, H, generator=g), torch.rand(B, C, H // 4, H // 4, generator=g),
            torch.rand(B, generator=g))


@pytest.mark.parametrize("name, C, H", [("mlp", 1, 16), ("dit", 3, 16), ("unet", 3, 16)])
def test_check12_student_equals_teacher_at_step_zero(name, C, H):
    torch.manual_seed(0)
    kw = {"dim": 32, "depth": 2, "heads": 2} if name == "dit" else {}
    teacher = build_backbone(name, C, H, **kw)
    if name == "dit":  # adaLN-Zero makes a fresh DiT output 0: perturb so the check is not trivial
        for p in teacher.parameters():
            p.data.add_(0.05 * torch.randn_like(p))
    student = make_student(teacher)
    z, lr, t = _inputs(C, H)
    v = teacher(z, t, t, lr)
    assert v.abs().max() > 0
    assert (student(z, t, t, lr) - v).abs().max() < 1e-6
    r = t * 0.3  # residual form: the teacher's output for every r at step 0
    assert (student(z, r, t, lr) - v).abs().max() < 1e-6
    assert student(z, r, t, lr).shape == z.shape


def test_released_interval_form_is_not_teacher_preserving():
    torch.manual_seed(0)
    teacher = build_backbone("mlp")
    z, lr, t = _inputs()
    released = make_student(teacher, mode="released")
    assert (released(z, t, t, lr) - teacher(z, t, t, lr)).abs().max() > 1e-4


def test_mlp_bicubic_matrix_equals_interpolate():
    m = build_backbone("mlp")
    lr = torch.rand(5, 1, 4, 4)
    fast = (lr.reshape(5, -1) @ m.up_matrix).view(5, 1, 16, 16)
    assert torch.allclose(fast, upsample(lr), atol=1e-6)


def test_backbone_bad_inputs():
    with pytest.raises(ValueError, match="backbone"):
        build_backbone("resnet")
    m = build_backbone("mlp")
    z, lr, t = _inputs()
    with pytest.raises(ValueError, match="z must be"):
        m(z.repeat(1, 3, 1, 1), t, t, lr)
    with pytest.raises(ValueError, match="4 x lr size"):
        m(z, t, t, lr[..., :3, :3])
    with pytest.raises(ValueError, match="r must be <= t"):
        m(z, t, t * 0.5, lr)
    with pytest.raises(ValueError, match="lie in"):
        m(z, t, t + 2, lr)
    with pytest.raises(ValueError, match="teacher already"):
        make_student(make_student(m))


def test_check6_sampler_n1_is_one_forward():
    torch.manual_seed(0)
    s = make_student(build_backbone("mlp"))
    z, lr, _ = _inputs()
    one = z - s(z, torch.zeros(4), torch.ones(4), lr)
    out = super_resolve(s, lr, 1, noise=z, color=None, clamp=False)
    assert torch.allclose(out, one, atol=1e-6)


def test_check10_adain_moments():
    g = torch.Generator().manual_seed(0)
    out = torch.randn(3, 3, 16, 16, generator=g) * 2 + 1
    ref = torch.rand(3, 3, 16, 16, generator=g)
    fixed = adain_color_fix(out, ref)
    for a, b in ((fixed.mean((-2, -1)), ref.mean((-2, -1))),
                 (fixed.std((-2, -1), correction=0), ref.std((-2, -1), correction=0))):
        assert (a - b).abs().max() < 1e-5


def test_wavelet_fix_takes_low_from_ref_and_high_from_out():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 1, 32, 32, generator=g)
    high, low = wavelet_decompose(x)
    assert torch.allclose(high + low, x, atol=1e-6)
    ref = torch.rand(2, 1, 32, 32, generator=g)
    fixed = wavelet_color_fix(x, ref)
    assert torch.allclose(fixed, high + wavelet_decompose(ref)[1], atol=1e-6)


def test_check11_noise_start_is_stochastic_lr_start_is_not():
    torch.manual_seed(0)
    s = make_student(build_backbone("mlp"))
    lr = torch.rand(6, 1, 4, 4)
    g = torch.Generator().manual_seed(0)
    noisy = torch.stack([super_resolve(s, lr, 1, generator=g) for _ in range(4)])
    direct = torch.stack([super_resolve(s, lr, 1, start="lr") for _ in range(4)])
    assert torch.all(diversity(noisy) > 0)
    assert torch.all(diversity(direct) == 0)
    with pytest.raises(ValueError, match="K must be >= 2"):
        diversity(noisy[:1])


def test_tiled_inference_matches_per_tile_sampling():
    torch.manual_seed(0)
    s = make_student(build_backbone("mlp"))
    lr = torch.rand(1, 1, 8, 8)
    noise = torch.randn(1, 1, 32, 32)
    out = super_resolve(s, lr, 1, noise=noise, tile=16, overlap=0, color=None, clamp=False)
    tl = super_resolve(s, lr[..., :4, :4], 1, noise=noise[..., :16, :16], color=None, clamp=False)
    assert torch.allclose(out[..., :16, :16], tl, atol=1e-6)
    blended = super_resolve(s, lr, 1, noise=noise, tile=16, overlap=8)
    assert blended.shape == (1, 1, 32, 32) and torch.isfinite(blended).all()


def test_sampler_bad_inputs():
    s = make_student(build_backbone("mlp"))
    lr = torch.rand(2, 1, 4, 4)
    with pytest.raises(ValueError, match="num_steps"):
        super_resolve(s, lr, 0)
    with pytest.raises(ValueError, match="noise must have the output shape"):
        super_resolve(s, lr, noise=torch.randn(2, 1, 8, 8))
    with pytest.raises(ValueError, match="start"):
        super_resolve(s, lr, start="bicubic")
    with pytest.raises(TypeError, match="float"):
        super_resolve(s, (lr * 255).to(torch.uint8))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        super_resolve(s, lr + 1)
    with pytest.raises(ValueError, match="finite"):
        super_resolve(s, lr * float("nan"))
    with pytest.raises(ValueError, match="3-D"):
        super_resolve(s, lr[0, 0])
    with pytest.raises(ValueError, match="channel"):
        super_resolve(s, torch.rand(2, 3, 4, 4))


def test_closed_form_reference_stats_equal_the_upsampled_reference():
    from neurips26.smfsr.base import upsample
    from neurips26.smfsr.sampler import MAX_STATS_LR_PIXELS, reference_stats

    g = torch.Generator().manual_seed(0)
    for shape in ((5, 1, 4, 4), (3, 3, 6, 5), (2, 1, 40, 40)):  # the last one takes the upsample path
        lr = torch.rand(shape, generator=g, dtype=torch.float64)
        mean, std = reference_stats(lr)
        ref = upsample(lr)
        assert torch.allclose(mean, ref.mean((-2, -1), keepdim=True), atol=1e-10)
        assert torch.allclose(std, ref.std((-2, -1), correction=0, keepdim=True), atol=1e-8)
    assert 40 * 40 > MAX_STATS_LR_PIXELS
    flat = torch.full((2, 1, 4, 4), 0.3)
    assert torch.all(reference_stats(flat)[1] == 0)  # a flat LR stays exactly flat
    out = torch.rand(4, 1, 16, 16, generator=g)
    lr = torch.rand(4, 1, 4, 4, generator=g)
    a = adain_color_fix(out, upsample(lr))
    b = adain_color_fix(out, ref_stats=reference_stats(lr))
    assert torch.allclose(a, b, atol=1e-5)
    with pytest.raises(ValueError, match="ref"):
        adain_color_fix(out)
