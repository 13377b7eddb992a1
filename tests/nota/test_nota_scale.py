"""DDP per task: two gloo ranks (each on half of every batch) train the same adapters as one process."""
import numpy as np
import pytest
import torch

from neurips26.nota.backbone import HybridViT
from neurips26.nota.cil import TrainSettings
from neurips26.nota.scale import launch_local, train_one_task


@pytest.mark.parametrize("method", ["nota", pytest.param("sd_lora", marks=pytest.mark.slow)])
def test_two_rank_ddp_equals_single_process(method):
    torch.manual_seed(0)
    bb = HybridViT(dim=16, depth=1, heads=2).eval()
    rng = np.random.default_rng(0)
    x, y = rng.random((32, 32, 32), dtype=np.float32), np.repeat([0, 1], 16)
    job = {"backbone": bb, "method": method, "seed": 3, "x": x, "y": y,
           "settings": TrainSettings(epochs=2, batch=8), "adapter_kwargs": {"bond": 2, "rank": 1}}
    single = train_one_task(job)
    ddp = launch_local(job, world=2)
    assert set(single) == set(ddp) and any("rows" in k for k in single)
    for k in single:
        assert torch.allclose(single[k], ddp[k], atol=1e-5), k
    start = train_one_task({**job, "settings": TrainSettings(epochs=1, batch=8, lr_adapter=0.0, lr_rows=0.0)})
    assert any(not torch.allclose(single[k], start[k]) for k in single)       # it did train
    with pytest.raises(ValueError, match="divisible"):
        launch_local({**job, "settings": TrainSettings(batch=7)}, world=2)
