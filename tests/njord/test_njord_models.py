import numpy as np
import pytest
import torch

from neurips26.njord.bench import count_calls
from neurips26.njord.data import to_nodes
from neurips26.njord.models import DeterministicTwin, Njord, kl_diag_gaussians
from neurips26.njord.training import TrainConfig, batch_tensors, train, windows


def _models(ds, mesh):
    torch.manual_seed(0)
    args = (mesh, 4, 3, ds.static, ds.norm.diff_mean, ds.norm.diff_std)
    return Njord(*args, d_h=8).eval(), DeterministicTwin(*args, d_h=8).eval()


def _inputs(ds, T=3, B=2):
    t = np.arange(2, 2 + B)
    f = torch.from_numpy(np.stack([ds.forcing[t + i] for i in range(T)], 1))
    return torch.from_numpy(ds.x[0, t - 2]), torch.from_numpy(ds.x[0, t - 1]), f


def test_kl_closed_form_matches_torch():
    g = torch.Generator().manual_seed(0)
    d = dict(generator=g, dtype=torch.float64)
    mq, sq, mp = torch.randn(50, **d), torch.rand(50, **d) + 0.1, torch.randn(50, **d)
    sp = torch.rand(50, **d) + 0.2
    ref = torch.distributions.kl_divergence(
        torch.distributions.Normal(mq, sq), torch.distributions.Normal(mp, sp)
    )
    torch.testing.assert_close(kl_diag_gaussians(mq, sq, mp, sp), ref, atol=1e-6, rtol=0)
    ref1 = torch.distributions.kl_divergence(
        torch.distributions.Normal(mq, sq), torch.distributions.Normal(mp, 1.0)
    )
    torch.testing.assert_close(kl_diag_gaussians(mq, sq, mp), ref1, atol=1e-6, rtol=0)


def test_reparameterised_moments():
    torch.manual_seed(0)
    mu, sigma = torch.randn(64), torch.rand(64) + 0.1
    z = mu + sigma * torch.randn(1563, 64)  # 1e5 samples
    s = ((z - mu) / sigma).flatten()
    assert abs(float(s.mean())) < 0.01 and abs(float(s.std()) - 1) < 0.01


def test_twin_zero_spread_njord_spread_and_seeded(small_ds, small_mesh):
    _, ds = small_ds
    nj, tw = _models(ds, small_mesh)
    xp2, xp1, f = _inputs(ds)
    with torch.no_grad():
        e_tw = tw.rollout(xp2, xp1, f, members=4)
        assert float(e_tw.var(0, unbiased=True).max()) == 0.0
        a = nj.rollout(xp2, xp1, f, members=4, generator=torch.Generator().manual_seed(1))
        b = nj.rollout(xp2, xp1, f, members=4, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    assert float(a.std(0).mean()) > 0


def test_one_forward_per_member_per_step(small_ds, small_mesh):
    _, ds = small_ds
    nj, _ = _models(ds, small_mesh)
    c = count_calls(nj, ds, windows(ds, ds.train, 3)[:2], 3, 5)
    assert c["prior"] == 3 and c["decoder"] == 3 and c["encoder"] == 0
    assert set(c["rows"]) == {10} and set(nj.prior.calls) == {10}


def test_land_invariance(small_ds, small_mesh):
    raw, ds = small_ds
    nj, _ = _models(ds, small_mesh)
    f = raw["fields"][0, :3].astype(np.float64)
    g = f.copy()
    g[:, ~ds.mask] = 1e6  # garbage on land
    xa, xb = ds.norm(to_nodes(f, ds.mask)), ds.norm(to_nodes(g, ds.mask))
    np.testing.assert_array_equal(xa, xb)
    ta = [torch.from_numpy(x[None]) for x in xa]
    fo = torch.from_numpy(ds.forcing[2:3][:, None])
    with torch.no_grad():
        p = nj.rollout(ta[0], ta[1], fo, members=2, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(p).all()


def test_bad_inputs(small_ds, small_mesh):
    _, ds = small_ds
    nj, _ = _models(ds, small_mesh)
    xp2, xp1, f = _inputs(ds)
    with pytest.raises(ValueError, match="x_prev1"):
        nj.rollout(xp2, xp1[:, :, :3], f)
    bad = xp1.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        nj.rollout(xp2, bad, f)
    with pytest.raises(ValueError, match="members"):
        nj.rollout(xp2, xp1, f, members=0)
    with pytest.raises(ValueError, match="static"):
        Njord(small_mesh, 4, 3, ds.static[:-1], ds.norm.diff_mean, ds.norm.diff_std, d_h=8)


def test_train_runs_both_phases_with_kl(small_ds, small_mesh):
    _, ds = small_ds
    nj, _ = _models(ds, small_mesh)
    h = train(nj, ds, TrainConfig(steps_1=1, steps_2=1, batch=1, kl_warmup=2, free_bits=0.01))
    assert len(h["loss"]) == 2 and all(np.isfinite(h["loss"])) and all(k >= 0 for k in h["kl"])


@pytest.mark.slow
def test_training_reduces_loss_and_crps_phase(small_ds, small_mesh):
    _, ds = small_ds
    nj, tw = _models(ds, small_mesh)
    idx = windows(ds, ds.train, 2)[:4]
    xp2, xp1, f, tgt = batch_tensors(ds, idx, 2)
    with torch.no_grad():
        before = float((tw.rollout(xp2, xp1, f, members=1)[0] - tgt).abs().mean())
    h = train(tw, ds, TrainConfig(steps_1=15, steps_2=5, batch=4, lr=3e-3))
    with torch.no_grad():
        after = float((tw.rollout(xp2, xp1, f, members=1)[0] - tgt).abs().mean())
    assert after < before
    h = train(nj, ds, TrainConfig(steps_1=2, steps_2=2, batch=2))
    assert len(h["kl"]) == 4 and all(k >= 0 for k in h["kl"])


def test_grid_input_carries_standardised_increments(small_ds, small_mesh):
    """Regression: the pair (X^{t-2}, X^{t-1}) enters as X^{t-1} and the diff-standardised increment, and
    the encoder sees the target increment, so a daily step of ~1% of a channel's std is O(1) input."""
    _, ds = small_ds
    njord, _ = _models(ds, small_mesh)
    x2, x1, f = _inputs(ds)
    k = torch.randn(x1.shape, generator=torch.Generator().manual_seed(1))
    x_true = x1 + njord.diff_mean + njord.diff_std * k
    gin = njord.grid_input(x2, x1, f[:, 0], x_true)
    d = 4
    torch.testing.assert_close(gin[..., :d], x1)
    torch.testing.assert_close(gin[..., d : 2 * d], (x1 - x2 - njord.diff_mean) / njord.diff_std)
    torch.testing.assert_close(gin[..., -d:], k, atol=1e-4, rtol=1e-4)
    assert gin.shape[-1] == njord.d_in + d


def test_twin_overfits_one_batch_below_persistence(small_ds, small_mesh):
    """Overfit check: on one fixed batch the twin must get well below persistence in 80 steps. (At this
    smoke size the old raw-X^{t-2} input passed too; at quick size it reached only 0.72-0.92 per channel
    after 150 steps; the regression for that is the grid-input test above.)"""
    _, ds = small_ds
    torch.manual_seed(0)
    m = DeterministicTwin(small_mesh, 4, 3, ds.static, ds.norm.diff_mean, ds.norm.diff_std, d_h=16)
    x2, x1, f, tgt = batch_tensors(ds, windows(ds, ds.train, 1)[:4], 1)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    for _ in range(80):
        loss = ((m.rollout(x2, x1, f)[0] - tgt) / m.diff_std).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        err = ((m.rollout(x2, x1, f)[0] - tgt) / m.diff_std).pow(2).mean()
    pers = ((x1[:, None] - tgt) / m.diff_std).pow(2).mean()
    assert float(err / pers) < 0.5


def test_open_boundary_overwrite(small_ds, small_mesh):
    """Boundary-strip nodes take the given states exactly at every step; the interior's first step is the
    free forecast's (the overwrite acts after the step) and later steps feel the boundary."""
    from neurips26.njord.models import DeterministicTwin as Twin

    ds = small_ds[1]
    torch.manual_seed(0)
    m = Twin(small_mesh, 4, 3, ds.static, ds.norm.diff_mean, ds.norm.diff_std, d_h=8).eval()
    N = ds.x.shape[2]
    t = np.array([2, 5])
    xp2, xp1 = torch.from_numpy(ds.x[0, t - 2]), torch.from_numpy(ds.x[0, t - 1])
    f = torch.from_numpy(np.stack([ds.forcing[t + i] for i in range(3)], 1))
    xb = torch.from_numpy(np.stack([ds.x[0, t + i] for i in range(3)], 1)) + 5.0
    mb = torch.zeros(N)
    mb[: N // 5] = 1.0
    with torch.no_grad():
        free = m.rollout(xp2, xp1, f)
        bnd = m.rollout(xp2, xp1, f, boundary=(mb, xb))
    inner = mb == 0
    assert torch.equal(bnd[0][:, :, ~inner], xb[:, :, ~inner])
    torch.testing.assert_close(bnd[0, :, 0][:, inner], free[0, :, 0][:, inner])
    assert (bnd[0, :, 2][:, inner] - free[0, :, 2][:, inner]).abs().max() > 1e-4
    with pytest.raises(ValueError, match="boundary mask"):
        m.rollout(xp2, xp1, f, boundary=(torch.zeros(N + 1), xb))
    with pytest.raises(ValueError, match="boundary states"):
        m.rollout(xp2, xp1, f, boundary=(mb, xb[:, :2]))


def test_reuse_static_embeddings_same_loss_and_gradients(small_ds, small_mesh):
    """Embedding the static edge / mesh-node features once per loss (``reuse_static``) gives the same
    loss and gradients as embedding them in every network call, and the cache is dropped after."""
    from neurips26.njord.training import _loss_njord

    ds = small_ds[1]
    nj, _ = _models(ds, small_mesh)
    nj.train()
    idx = windows(ds, ds.train, 3)[:2]
    b = batch_tensors(ds, idx, 3)
    cfg = TrainConfig()
    grads = []
    for reuse in (False, True):
        nj.zero_grad()
        torch.manual_seed(5)
        if reuse:
            with nj.reuse_static():
                loss, _ = _loss_njord(nj, *b, cfg, 1.0, True)
        else:
            loss, _ = _loss_njord(nj, *b, cfg, 1.0, True)
        loss.backward()
        grads.append((loss.detach(), [p.grad.clone() for p in nj.parameters() if p.grad is not None]))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-6, atol=1e-7)
    assert len(grads[0][1]) == len(grads[1][1]) > 0
    for a, c in zip(grads[0][1], grads[1][1]):
        torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-7)
    assert all(m.cache is None for m in nj.modules() if hasattr(m, "cache") and not callable(m.cache))


def test_zero_init_output_starts_from_persistence(small_ds, small_mesh):
    """With a zero-initialised output head the untrained forecast is X^{t-1} + dmean for every member
    (the latent has no effect yet), and one optimiser step moves it away."""
    ds = small_ds[1]
    nj, tw = _models(ds, small_mesh)
    xp2, xp1, f = _inputs(ds, T=1)
    for m in (nj.zero_init_output(), tw.zero_init_output()):
        with torch.no_grad():
            ens = m.rollout(xp2, xp1, f, members=3)
        torch.testing.assert_close(ens, (xp1 + m.diff_mean).expand(3, -1, -1, -1)[:, :, None], rtol=0, atol=0)
    hist = train(nj, ds, TrainConfig(steps_1=1, steps_2=0, batch=2))
    assert np.isfinite(hist["loss"]).all()
    with torch.no_grad():
        assert not torch.equal(nj.rollout(xp2, xp1, f, members=1)[0, :, 0], xp1 + nj.diff_mean)
