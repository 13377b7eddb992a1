import numpy as np
import pytest

from neurips26.njord.data import build_dataset
from neurips26.njord.mesh import kmeans_mesh
from neurips26.njord.simulator import DataConfig, OceanConfig, generate


@pytest.fixture(scope="session")
def small_ds():
    raw = generate(DataConfig(OceanConfig(n=16, dx=60e3), spinup_days=3, days=20), cache=False)
    return raw, build_dataset(raw)


@pytest.fixture(scope="session")
def small_mesh(small_ds):
    return kmeans_mesh(small_ds[1].mask, r1=6.0, r=4.0, levels=2)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
