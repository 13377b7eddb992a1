"""Scale-out hooks: DDP on 2 gloo ranks == 1 process, gradient checkpointing == plain, bf16 autocast."""

import pytest
import torch

from neurips26.smfsr.bench import _saved_bytes
from neurips26.smfsr.models import build_backbone, make_student
from neurips26.smfsr.scale import ddp_splitmeanflow, enable_checkpointing, launch_local, mixed_precision
from neurips26.smfsr.training import splitmeanflow_loss


def _job(steps=3, **kw):
    torch.manual_seed(0)
    teacher = build_backbone("mlp")
    g = torch.Generator().manual_seed(1)
    return {"teacher_state": teacher.state_dict(), "hr": torch.rand(64, 1, 16, 16, generator=g),
            "lr_img": torch.rand(64, 1, 4, 4, generator=g), "batch": 16, "steps": steps, "seed": 3, **kw}


@pytest.mark.slow
def test_ddp_two_gloo_ranks_equal_one_process():
    job = _job()
    single = ddp_splitmeanflow(job)
    multi = launch_local(job, world=2)
    start = make_student(build_backbone("mlp")).state_dict()
    moved = False
    for k, v in single.items():
        assert torch.allclose(v, multi[k], atol=1e-5, rtol=1e-4), k
        moved |= not torch.equal(v, start[k])
    assert moved  # the steps did train
    with pytest.raises(ValueError, match="divisible"):
        launch_local({**job, "batch": 15}, world=2)


def test_gradient_checkpointing_gives_the_same_gradients_and_saves_less():
    torch.manual_seed(0)
    for name, C, H in (("mlp", 1, 16), ("dit", 3, 16), ("unet", 3, 16)):
        kw = {"depth": 2, "dim": 64} if name == "dit" else {}
        teacher = build_backbone(name, C, H, **kw)
        student = make_student(teacher)
        hr, lr = torch.rand(8, C, H, H), torch.rand(8, C, H // 4, H // 4)

        def grads():
            student.zero_grad(set_to_none=True)
            loss = splitmeanflow_loss(student, teacher, hr, lr, torch.Generator().manual_seed(0))
            loss.backward()
            return loss.detach(), [p.grad.clone() for p in student.parameters()]

        l0, g0 = grads()
        plain = _saved_bytes(lambda: splitmeanflow_loss(student, teacher, hr, lr, torch.Generator().manual_seed(0)))
        enable_checkpointing(student)
        l1, g1 = grads()
        ckpt = _saved_bytes(lambda: splitmeanflow_loss(student, teacher, hr, lr, torch.Generator().manual_seed(0)))
        enable_checkpointing(student, False)
        assert torch.allclose(l0, l1) and all(torch.allclose(a, b, atol=1e-6) for a, b in zip(g0, g1)), name
        assert ckpt < plain, (name, ckpt, plain)
    with pytest.raises(TypeError, match="SRBackbone"):
        enable_checkpointing(torch.nn.Linear(2, 2))


def test_bf16_autocast_loss_is_close_and_trains():
    torch.manual_seed(0)
    teacher = build_backbone("mlp")
    student = make_student(teacher)
    hr, lr = torch.rand(32, 1, 16, 16), torch.rand(32, 1, 4, 4)
    ref = splitmeanflow_loss(student, teacher, hr, lr, torch.Generator().manual_seed(0))
    with mixed_precision("cpu"):
        low = splitmeanflow_loss(student, teacher, hr, lr, torch.Generator().manual_seed(0))
    assert abs(low.float().item() - ref.item()) < 0.05 * ref.item()
    low.backward()
    assert all(torch.isfinite(p.grad).all() for p in student.parameters() if p.grad is not None)
    with pytest.raises(ValueError, match="device"):
        mixed_precision("tpu")
