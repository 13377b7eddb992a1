"""InfLoRA baseline: designed down-projection orthogonal to the memory, DualGPM update and switch."""
import numpy as np
import pytest
import torch

from neurips26.nota.backbone import HybridViT
from neurips26.nota.cil import TrainSettings
from neurips26.nota.inflora import DualGPM, design_down_projection, run_inflora, threshold


def low_rank_cov(d, r, seed):
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    h = torch.randn(200, r, generator=g, dtype=f64) @ torch.randn(r, d, generator=g, dtype=f64)
    return h.T @ h, h


def test_threshold_schedule():
    assert threshold(0, 10) == 0.95 and threshold(5, 10, 0.9, 1.0) == pytest.approx(0.95)


def test_memory_captures_energy_and_design_is_orthogonal():
    mem = DualGPM(16)
    cov, h = low_rank_cov(16, 3, 0)
    mem.update(cov, 0.99)
    assert mem.mode == "remove" and mem.basis.shape[1] == 3
    p = mem.occupied()
    assert torch.allclose(h @ p, h, atol=1e-8)                       # the task's inputs lie in the memory
    cov2, h2 = low_rank_cov(16, 4, 1)
    a = design_down_projection(cov2, mem, 2).double()
    assert a.shape == (2, 16)
    assert (a @ mem.basis).abs().max() < 1e-6                        # new A is blind to old inputs
    assert torch.allclose(a @ a.T, torch.eye(2, dtype=torch.float64) / 3, atol=1e-6)


def test_memory_switches_to_retain_and_keeps_projecting():
    mem = DualGPM(8)
    cov, h = low_rank_cov(8, 5, 2)                                    # 5 > 8/2: switch
    mem.update(cov, 0.999)
    assert mem.mode == "retain" and mem.basis.shape[1] == 3
    assert torch.allclose(h @ mem.occupied(), h, atol=1e-8)
    cov2, _ = low_rank_cov(8, 8, 3)
    a = design_down_projection(cov2, mem, 2).double()
    assert (a @ mem.occupied() @ h.T).abs().max() < 1e-6 * h.abs().max()
    mem.update(cov2, 0.999)
    assert mem.mode == "retain" and mem.basis.shape[1] < 3


def test_run_inflora_trains_only_b():
    torch.manual_seed(0)
    bb = HybridViT(dim=16, depth=1, heads=2).eval()
    rng = np.random.default_rng(0)
    x, y = rng.random((32, 32, 32), dtype=np.float32), np.repeat([0, 1, 2, 3], 8)
    r = run_inflora(bb, [[0, 1], [2, 3]], (x, y), (x, y), TrainSettings(epochs=1, batch=16), rank=2)
    model = r["model"]
    assert r["trainable_per_task"] == sum(lay.base.out_features * 2 for lay in model.layers)
    assert all(not ad.a.requires_grad for lay in model.layers for ad in lay.adapters)
    assert len(r["A_t"]) == 2 and all(m[0] in ("remove", "retain") for m in r["memory"])
    with pytest.raises(ValueError, match="lam_e"):
        run_inflora(bb, [[0, 1]], (x, y), (x, y), lam_b=0.99, lam_e=0.9)
