"""The torch path of the mirror maps equals numpy; sharding over torch.distributed ranks."""

import numpy as np
import pytest

from neurips26.ftrl_surplus import DEFAULT_FIVE, regularizer
from neurips26.ftrl_surplus.sharded import shard_bounds, sharded_mirror

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", DEFAULT_FIVE + ("tsallis-0.25",))
def test_torch_path_equals_numpy(name):
    reg = regularizer(name)
    th = np.random.default_rng(0).normal(size=(64, 9)) * np.linspace(0.01, 40, 64)[:, None]
    np.testing.assert_allclose(reg.mirror_torch(torch.from_numpy(th)).numpy(), reg.mirror(th), atol=1e-12)
    assert reg.mirror_torch(torch.from_numpy(th[0])).shape == (9,)
    with pytest.raises(TypeError, match="theta"):
        reg.mirror_torch(th)
    with pytest.raises(ValueError, match="theta"):
        reg.mirror_torch(torch.tensor([0.0, float("nan")]))


def test_shard_bounds_cover_the_batch():
    for B in (1, 7, 64):
        for world in (1, 3, 8):
            spans = [shard_bounds(B, world, r) for r in range(world)]
            assert spans[0][0] == 0 and spans[-1][1] == B
            assert all(spans[i][1] == spans[i + 1][0] for i in range(world - 1))


def test_sharded_mirror_single_process_and_gloo_group(tmp_path):
    dist = pytest.importorskip("torch.distributed")
    th = np.random.default_rng(1).normal(size=(11, 5)) * 3
    ref = regularizer("tsallis-0.5").mirror(th)
    np.testing.assert_allclose(sharded_mirror("tsallis-0.5", th, device="cpu"), ref, atol=1e-12)
    if not dist.is_available():
        pytest.skip("torch.distributed unavailable")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        np.testing.assert_allclose(sharded_mirror("tsallis-0.5", th, device="cpu"), ref, atol=1e-12)
    finally:
        dist.destroy_process_group()
