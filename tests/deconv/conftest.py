import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Small tensors on a loaded 2-core box: 1 intra-op thread is much faster; restored afterwards."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
