"""L2P baseline: key-query prompt selection, two-pass inference, frozen backbone and rows."""
import numpy as np
import pytest
import torch

from neurips26.nota.backbone import HybridViT
from neurips26.nota.cil import TrainSettings
from neurips26.nota.l2p import L2P, run_l2p


@pytest.fixture(scope="module")
def bb():
    torch.manual_seed(0)
    return HybridViT(dim=16, depth=1, heads=2).eval()


def test_selection_picks_the_most_similar_keys(bb):
    m = L2P(bb, pool=6, length=2, top_k=2)
    x = torch.rand(3, 32, 32)
    with torch.no_grad():
        q = torch.nn.functional.normalize(bb.features(x), dim=1)
        m.keys.copy_(torch.randn(6, 16))
        m.keys[4] = q[0] * 5            # key 4 points exactly at image 0's query
    tokens, pull = m.select(x)
    assert tokens.shape == (3, 4, 16)
    assert torch.equal(tokens[0, :2], m.prompts[4])
    assert 0 <= float(pull.detach()) <= 2
    m.new_task([7, 9])
    with torch.no_grad():
        assert m(x).shape == (3, 2) and m.seen_classes == [7, 9]
        assert not torch.allclose(m.features(x), bb.features(x))     # the prompted second pass


def test_run_l2p_keeps_backbone_and_old_rows(bb):
    rng = np.random.default_rng(0)
    x, y = rng.random((32, 32, 32), dtype=np.float32), np.repeat([0, 1, 2, 3], 8)
    before = {k: v.clone() for k, v in bb.state_dict().items()}
    r = run_l2p(bb, [[0, 1], [2, 3]], (x, y), (x, y), TrainSettings(epochs=1, batch=16))
    model = r["model"]
    assert all(torch.equal(before[k], v) for k, v in bb.state_dict().items())
    assert not model.rows[0].requires_grad and model.rows[1].requires_grad
    assert r["trainable_per_task"] == 10 * 5 * 16 + 10 * 16 and len(r["A_t"]) == 2
    with pytest.raises(ValueError, match="top_k"):
        L2P(bb, pool=3, top_k=5)
