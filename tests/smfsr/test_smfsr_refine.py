"""Acceptance checks 7 (VSD) and 8 (discriminator), stage 2 and the direct baseline on a tiny pool."""

import os

import pytest
import torch

from neurips26.smfsr.discriminator import (DinoProjectedDiscriminator, build_discriminator, diff_augment,
                                           hinge_d_loss, hinge_g_loss, save_backbone)
from neurips26.smfsr.lora import lora_copy, lora_parameters
from neurips26.smfsr.models import build_backbone, make_student
from neurips26.smfsr.refine import RefineConfig, generate, refine, vsd_grad, vsd_loss
from neurips26.smfsr.training import PoolLike


def test_check7_vsd_identities():
    torch.manual_seed(0)
    teacher = build_backbone("mlp")
    x_hat = torch.rand(8, 1, 16, 16, requires_grad=True)
    lr = torch.rand(8, 1, 4, 4)
    t = torch.rand(8) * 0.96 + 0.02
    eps = torch.randn(8, 1, 16, 16)
    same = vsd_grad(x_hat, teacher, teacher, lr, t, eps)
    assert torch.all(same == 0) and vsd_loss(x_hat, same).item() == 0
    fake = build_backbone("mlp")
    grad = vsd_grad(x_hat, teacher, fake, lr, t, eps)
    assert grad.abs().max() > 0
    vsd_loss(x_hat, grad).backward()
    assert torch.allclose(x_hat.grad, 2 * grad / grad.numel(), atol=1e-9)


def test_check8_frozen_backbone_and_hinge_values():
    d = DinoProjectedDiscriminator.tiny(img=16)
    x = torch.rand(8, 1, 16, 16)
    d(x).sum().backward()
    assert all(not p.requires_grad and p.grad is None for p in d.backbone.parameters())
    assert all(p.grad is not None for p in d.heads.parameters() if p.requires_grad)
    zeros = torch.zeros(8)
    assert hinge_d_loss(zeros, zeros).item() == 2.0
    assert hinge_g_loss(zeros).item() == 0.0


def test_check8_safetensors_round_trip_and_missing_path(tmp_path):
    d = DinoProjectedDiscriminator.tiny(img=16, seed=3).eval()
    path = tmp_path / "vit.safetensors"
    save_backbone(d, path)
    e = DinoProjectedDiscriminator.tiny(img=16, seed=99, checkpoint=path).eval()
    e.heads.load_state_dict(d.heads.state_dict())
    x = torch.rand(4, 3, 16, 16)
    assert torch.equal(d(x), e(x))
    missing = str(tmp_path / "nope.safetensors")
    with pytest.raises(FileNotFoundError, match="nope.safetensors"):
        DinoProjectedDiscriminator.tiny(checkpoint=missing)
    with pytest.raises(FileNotFoundError, match="nope.safetensors"):
        DinoProjectedDiscriminator.from_timm(checkpoint=missing)
    with pytest.raises(FileNotFoundError, match="no_dir"):
        DinoProjectedDiscriminator.from_hf(tmp_path / "no_dir")
    with pytest.raises(ValueError, match="discriminator"):
        build_discriminator("stylegan")


def test_check8_from_timm_round_trip(tmp_path):
    timm = pytest.importorskip("timm", reason="timm not installed (it needs torchvision)")
    m = timm.create_model("vit_small_patch16_dinov3", pretrained=False, num_classes=0, depth=4)
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, str(tmp_path / "w.safetensors"))
    a = DinoProjectedDiscriminator.from_timm(checkpoint=tmp_path / "w.safetensors", depth=4)
    b = DinoProjectedDiscriminator.from_timm(checkpoint=tmp_path / "w.safetensors", depth=4)
    b.heads.load_state_dict(a.heads.state_dict())
    x = torch.rand(2, 3, 224, 224)
    assert torch.equal(a.eval()(x), b.eval()(x))


def test_from_hf_local_vit(tmp_path):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.ViTConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                                 intermediate_size=64, image_size=32, patch_size=8)
    transformers.ViTModel(cfg).save_pretrained(tmp_path / "vit")
    d = DinoProjectedDiscriminator.from_hf(tmp_path / "vit", resolution=32)
    assert d.taps == [0, 1, 2, 3]
    out = d(torch.rand(2, 1, 16, 16))
    assert out.shape == (2,) and torch.isfinite(out).all()
    assert os.environ.get("HF_HUB_OFFLINE") == "1"


def test_diff_augment_is_differentiable_and_seeded():
    x = torch.rand(4, 3, 16, 16, requires_grad=True)
    a = diff_augment(x, torch.Generator().manual_seed(0))
    b = diff_augment(x, torch.Generator().manual_seed(0))
    assert torch.equal(a, b)
    a.sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_refine_and_direct_run_and_direct_is_deterministic():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    pool = PoolLike(torch.rand(64, 1, 16, 16, generator=g), torch.rand(64, 1, 4, 4, generator=g))
    teacher = build_backbone("mlp")
    student = make_student(teacher)
    gen, log, parts = refine(student, teacher, pool, 3, 16)
    assert log.steps == 3 and all(parts[k] is not None for k in ("rec", "perc", "vsd", "adv", "d", "fake"))
    assert not torch.equal(gen.out.weight, student.out.weight)
    direct, _, _ = refine(student, teacher, pool, 2, 16, RefineConfig(start="lr", discriminator="patchgan"))
    lr = pool.lr[:4]
    assert torch.equal(generate(direct, lr, None, "lr"), generate(direct, lr, None, "lr"))


def test_lora_fake_score_starts_at_the_teacher_and_trains_only_its_factors():
    torch.manual_seed(0)
    teacher = build_backbone("mlp")
    fake = lora_copy(teacher, rank=4)
    z, lr, t = torch.randn(8, 1, 16, 16), torch.rand(8, 1, 4, 4), torch.rand(8)
    assert torch.equal(fake(z, t, t, lr), teacher(z, t, t, lr))  # B = 0: exactly the teacher
    trainable = [n for n, p in fake.named_parameters() if p.requires_grad]
    assert trainable and all(n.endswith(("lora_a", "lora_b")) for n in trainable)
    n_lora = sum(p.numel() for p in lora_parameters(fake))
    assert n_lora < 0.2 * sum(p.numel() for p in teacher.parameters())
    before = {n: p.clone() for n, p in teacher.named_parameters()}
    g = torch.Generator().manual_seed(0)
    pool = PoolLike(torch.rand(32, 1, 16, 16, generator=g), torch.rand(32, 1, 4, 4, generator=g))
    _, _, parts = refine(make_student(teacher), teacher, pool, 2, 16,
                         RefineConfig(fake_score="lora", discriminator="patchgan"))
    assert parts["fake"] is not None
    assert all(torch.equal(p, before[n]) for n, p in teacher.named_parameters())  # the teacher is untouched
    opt = torch.optim.SGD(lora_parameters(fake), lr=1.0)
    fake(z, t, t, lr).pow(2).mean().backward()
    opt.step()
    assert not torch.equal(fake(z, t, t, lr), teacher(z, t, t, lr))
    with pytest.raises(ValueError, match="rank"):
        lora_copy(teacher, rank=0)
    with pytest.raises(ValueError, match="fake_score"):
        refine(make_student(teacher), teacher, pool, 1, 16, RefineConfig(fake_score="half"))


def test_one_pass_discriminator_step_equals_separate_calls():
    """The fused D call (fake and real halves in one batch; G and D losses from the same logits) gives
    the generator and the heads the gradients of the reference's separate calls (SN frozen in eval)."""
    torch.manual_seed(0)
    disc = build_discriminator("dino", 1, 16).eval()
    fake = torch.rand(16, 1, 16, 16, requires_grad=True)
    real = torch.rand(16, 1, 16, 16)
    heads = [p for p in disc.parameters() if p.requires_grad]
    d_fake, d_real = disc(torch.cat([fake, real])).split(16)
    g_fused, = torch.autograd.grad(hinge_g_loss(d_fake), fake, retain_graph=True)
    h_fused = torch.autograd.grad(hinge_d_loss(d_real, d_fake), heads)
    g_ref, = torch.autograd.grad(hinge_g_loss(disc(fake)), fake)
    h_ref = torch.autograd.grad(hinge_d_loss(disc(real), disc(fake.detach())), heads)
    assert torch.allclose(g_fused, g_ref, atol=1e-6)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(h_fused, h_ref))


def test_discriminator_fast_paths_equal_their_modules():
    torch.manual_seed(0)
    disc = build_discriminator("dino", 1, 16).eval()
    head = disc.heads[0]
    x = torch.randn(4, 64, 16)
    assert torch.allclose(head._circular(head.res, x), head.res(x), atol=1e-5)
    assert torch.allclose(head._pointwise(head.inp, x), head.inp(x), atol=1e-5)
    img = torch.randn(4, 3, 16, 16)
    emb, gh, gw = disc.backbone.embed_patches(img)
    assert (gh, gw) == (4, 4)
    assert torch.allclose(emb, disc.backbone.patch_embed(img).flatten(2).transpose(1, 2), atol=1e-5)
