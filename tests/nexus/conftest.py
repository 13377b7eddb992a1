import pytest
import torch

from neurips26.nexus import MicroBatch, tiny_llama


@pytest.fixture
def tiny64():
    """A tiny fp64 HF Llama and 4 single-source micro-batches of random tokens."""
    torch.manual_seed(0)
    model = tiny_llama(12, hidden=16, layers=1, heads=2, mlp=32, ctx=8, dtype=torch.float64)
    g = torch.Generator().manual_seed(1)
    mbs = [MicroBatch(s, torch.randint(0, 12, (2, 9), generator=g)) for s in ("a", "b", "c", "a")]
    return model, mbs
