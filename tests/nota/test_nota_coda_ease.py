"""CODA-Prompt and EASE baselines: shapes, prefix attention, frozen old parts (bitwise), learning on a toy."""
import math

import numpy as np
import pytest
import torch

from neurips26.nota.backbone import Attention, HybridViT
from neurips26.nota.cil import TrainSettings
from neurips26.nota.coda import CODAPrompt, gram_schmidt_rows, run_coda
from neurips26.nota.ease import EASE, run_ease


@pytest.fixture(scope="module")
def bb():
    torch.manual_seed(0)
    return HybridViT(dim=16, depth=2, heads=2).eval()


@pytest.fixture(scope="module")
def pbb():
    """A tiny backbone briefly pre-trained on toy classes 0-7 (a random one gives near-constant features)."""
    torch.manual_seed(0)
    net = HybridViT(dim=16, depth=2, heads=2, n_classes=8)
    x, y = toy(16, tuple(range(8)), seed=0)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    opt = torch.optim.AdamW(net.parameters(), 3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(30):
        idx = torch.randint(0, len(xs), (32,), generator=g)
        loss = torch.nn.functional.cross_entropy(net(xs[idx]), ys[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net.eval()


def toy(n_per=16, classes=(0, 1, 2, 3), seed=0):
    """Separable toy images: each class a fixed random pattern plus noise."""
    rng = np.random.default_rng(seed)
    pats = rng.random((max(classes) + 1, 32, 32), dtype=np.float32)
    y = np.repeat(classes, n_per)
    x = np.clip(pats[y] * 0.8 + 0.2 * rng.random((len(y), 32, 32), dtype=np.float32), 0, 1)
    return x.astype(np.float32), y


def test_prefix_attention_is_the_softmax_formula():
    torch.manual_seed(1)
    att = Attention(8, 2).double()
    x, pk, pv = (torch.randn(3, n, 8, dtype=torch.float64) for n in (5, 2, 2))
    got = att(x, (pk, pv))
    q, k, v = att.q(x), torch.cat([pk, att.k(x)], 1), torch.cat([pv, att.v(x)], 1)
    heads = []
    for h in range(2):
        s = slice(4 * h, 4 * h + 4)
        w = torch.softmax(q[..., s] @ k[..., s].transpose(1, 2) / math.sqrt(4), dim=-1)
        heads.append(w @ v[..., s])
    assert torch.allclose(got, att.proj(torch.cat(heads, -1)), atol=1e-12)
    assert torch.allclose(att(x), att(x, None))


def test_gram_schmidt_rows_orthonormal_to_old_and_each_other():
    g = torch.Generator().manual_seed(0)
    old = gram_schmidt_rows(torch.randn(3, 10, generator=g))
    new = gram_schmidt_rows(torch.randn(4, 10, generator=g), old)
    allv = torch.cat([old, new])
    assert torch.allclose(allv @ allv.T, torch.eye(7), atol=1e-5)
    with pytest.raises(ValueError, match="components"):
        gram_schmidt_rows(torch.randn(4, 10), torch.randn(7, 10))


def test_coda_shapes_weights_and_orthogonal_init(bb):
    m = CODAPrompt(bb, components=3, length=4)
    assert m.layers == (0,)                       # ceil(5 * 2 / 12) = 1 prompted block of 2
    g = torch.Generator().manual_seed(0)
    m.new_task([0, 1], g)
    m.new_task([2, 3], g)
    x = torch.rand(5, 32, 32)
    tok = bb.embed(x)
    with torch.no_grad():
        q = m.query(tok)
        alpha = m.weights(q)
        assert alpha.shape == (5, 6) and float(alpha.abs().max()) <= 1 + 1e-6
        want = torch.nn.functional.cosine_similarity(q[:, None] * m.attn[1][None, 0], m.keys[1][0][None], dim=2)
        assert torch.allclose(alpha[:, 3], want[:, 0], atol=1e-6)
        assert m(x).shape == (5, 4) and m.seen_classes == [0, 1, 2, 3]
        assert not torch.allclose(m.features(x), bb.features(x))        # the prompted second pass
        assert float(m.ortho_penalty()) < 1e-8                          # orthonormal at init
        keys = torch.cat(list(m.keys))
        assert torch.allclose(keys @ keys.T, torch.eye(6), atol=1e-5)
    assert m.trainable_params() == 3 * (4 * 16) + 2 * 3 * 16
    assert not m.prompts[0].requires_grad and m.prompts[1].requires_grad and not m.rows[0].requires_grad
    for bad in (dict(length=3), dict(components=0), dict(layers=(5,)), dict(ortho=-1.0)):
        with pytest.raises(ValueError):
            CODAPrompt(bb, **bad)


def test_coda_old_components_bitwise_frozen_and_it_learns(pbb):
    bb = pbb
    x, y = toy(16, (4, 5, 6, 7), seed=1)
    s = TrainSettings(epochs=8, batch=16, lr_adapter=1e-2)
    one = run_coda(bb, [[4, 5]], (x, y), (x, y), s, components=2, length=4, ortho=0.1)
    two = run_coda(bb, [[4, 5], [6, 7]], (x, y), (x, y), s, components=2, length=4, ortho=0.1)
    m1, m2 = one["model"], two["model"]
    for name in ("prompts", "keys", "attn", "rows"):
        assert torch.equal(getattr(m1, name)[0], getattr(m2, name)[0]), name       # task 1's parts unchanged
    assert all(torch.equal(a, b) for a, b in zip(bb.state_dict().values(), m2.backbone.state_dict().values()))
    for task_losses in two["losses"]:
        assert np.mean(task_losses[-4:]) < np.mean(task_losses[:4])             # CE (+ ortho) goes down
    assert two["acc"][0][0] > 0.75 and two["A_last"] > 0.5, (two["acc"], two["A_last"])   # chance: 0.5 / 0.25
    frozen = TrainSettings(epochs=4, batch=16, lr_adapter=1e-12)                 # prompts ~ at their init
    assert not torch.allclose(two["model"].prompts[1], run_coda(bb, [[4, 5], [6, 7]], (x, y), (x, y), frozen,
                                                                 components=2, length=4)["model"].prompts[1])
    assert two["stored_adapter_params"] == 2 * two["trainable_per_task"]


def test_ease_branch_starts_as_the_backbone_and_protos_shapes(bb):
    m = EASE(bb, width=4)
    g = torch.Generator().manual_seed(0)
    m.new_task([0, 1], g)
    x = torch.rand(6, 32, 32)
    tok = bb.embed(x)
    with torch.no_grad():
        assert torch.allclose(m.branch_features(tok, 0), bb.encode(tok), atol=1e-6)   # up = 0 at init
    m.update_prototypes(tok, np.array([0, 0, 0, 1, 1, 1]))
    m.new_task([2, 3], g)
    m.update_prototypes(tok, np.array([2, 2, 2, 3, 3, 3]))
    assert [p.shape for p in m.protos] == [(4, 16), (4, 16)]
    assert m.features(x).shape == (6, 32) and m(x).shape == (6, 4)       # one block pass per branch
    # old classes in the new subspace: a convex combination of the new classes' prototypes there
    f1 = m.subspace_features(tok)[1]
    new1 = torch.stack([f1[:3].mean(0), f1[3:].mean(0)])
    old0 = torch.nn.functional.normalize(m.protos[0][:2], dim=1)
    new0 = torch.nn.functional.normalize(m.protos[0][2:], dim=1)
    sim = torch.softmax(m.tau * old0 @ new0.T, dim=1)
    assert torch.allclose(m.protos[1][:2], sim @ new1, atol=1e-5)
    assert torch.allclose(m.protos[1][2:], new1, atol=1e-6)
    with pytest.raises(ValueError, match="width"):
        EASE(bb, width=0)


def test_ease_old_branches_bitwise_frozen_and_it_learns(pbb):
    bb = pbb
    x, y = toy(16, (4, 5, 6, 7), seed=1)
    s = TrainSettings(epochs=4, batch=16, lr_adapter=1e-2)
    one = run_ease(bb, [[4, 5]], (x, y), (x, y), s, width=4)
    two = run_ease(bb, [[4, 5], [6, 7]], (x, y), (x, y), s, width=4)
    b1, b2 = one["model"].branches[0], two["model"].branches[0]
    assert all(torch.equal(p, q) for p, q in zip(b1.parameters(), b2.parameters()))
    assert not any(p.requires_grad for p in b2.parameters())
    assert torch.equal(one["model"].protos[0], two["model"].protos[0][:2])    # old prototypes kept
    assert float(b1[0].up.abs().max()) > 0                                     # the branch trained (up != 0)
    for task_losses in two["losses"]:
        assert np.mean(task_losses[-4:]) < np.mean(task_losses[:4])
    assert two["A_last"] > 0.75                                                # chance 0.25
    assert two["stored_adapter_params"] == 2 * two["trainable_per_task"] + 2 * 4 * 16   # branches + protos
