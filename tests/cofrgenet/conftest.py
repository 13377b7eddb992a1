import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The CI box is shared: 2 cores, several test processes. One intra-op thread avoids OpenMP
    oversubscription (which slowed tiny models ~100x here); restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
