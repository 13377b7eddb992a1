"""DDP and FSDP per task: two gloo ranks (each on half of every batch) train the same adapters as one process."""
import numpy as np
import pytest
import torch

from neurips26.nota.backbone import HybridViT
from neurips26.nota.cil import TrainSettings
from neurips26.nota.scale import launch_local, train_one_task


@pytest.mark.parametrize("method", ["nota", pytest.param("sd_lora", marks=pytest.mark.slow),
                                    pytest.param("hnota", marks=pytest.mark.slow)])
def test_two_rank_ddp_and_fsdp_equal_single_process(method):
    """DDP, and FSDP2 fully_shard per block (the cores sharded with the frozen block weights, dW after the
    all-gather; scalar alphas replicated with their gradients averaged), both == one process."""
    torch.manual_seed(0)
    bb = HybridViT(dim=16, depth=2, heads=2).eval()
    rng = np.random.default_rng(0)
    x, y = rng.random((32, 32, 32), dtype=np.float32), np.repeat([0, 1], 16)
    job = {"backbone": bb, "method": method, "seed": 3, "x": x, "y": y,
           "settings": TrainSettings(epochs=2, batch=8), "adapter_kwargs": {"bond": 2, "rank": 1}}
    single = train_one_task(job)
    both = launch_local(job, world=2, mode=("ddp", "fsdp"))
    assert any("rows" in k for k in single) and any(("cores" in k or ".a" in k) for k in single)
    for mode in ("ddp", "fsdp"):
        assert set(single) == set(both[mode]), mode
        for k in single:
            assert single[k].shape == both[mode][k].shape, (mode, k)
            assert torch.allclose(single[k], both[mode][k], atol=1e-5), (mode, k)
    start = train_one_task({**job, "settings": TrainSettings(epochs=1, batch=8, lr_adapter=0.0, lr_rows=0.0)})
    assert any(not torch.allclose(single[k], start[k]) for k in single)       # it did train
    with pytest.raises(ValueError, match="divisible"):
        launch_local({**job, "settings": TrainSettings(batch=7)}, world=2)
    with pytest.raises(ValueError, match="mode"):
        launch_local(job, world=2, mode="zero3")
    with pytest.raises(ValueError, match="process group"):
        train_one_task(job, fsdp=True)                                         # no torchrun / init
