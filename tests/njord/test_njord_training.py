"""Training schedule (validation-chosen checkpoint, CRPS units), activation checkpointing, save/load."""

import dataclasses

import numpy as np
import pytest
import torch

from neurips26.njord.metrics import crps_fair
from neurips26.njord.models import DeterministicTwin, Forecaster, Njord
from neurips26.njord.training import TrainConfig, batch_tensors, train, validation_score, windows


@pytest.fixture(scope="module")
def ds60(small_ds):
    """The small dataset re-split so that its validation split (6 days) holds 2-lead windows."""
    return dataclasses.replace(small_ds[1], train=range(0, 10), val=range(10, 16), test=range(16, 20))


@pytest.fixture(scope="module")
def mesh60(small_mesh):
    return small_mesh


def _njord(ds, mesh, d_h=8):
    torch.manual_seed(0)
    return Njord(mesh, 4, 3, ds.static, ds.norm.diff_mean, ds.norm.diff_std, d_h=d_h)


def test_validation_chooses_the_best_checkpoint(ds60, mesh60):
    """The kept state is the validated one with the lowest validation CRPS, and rescoring it gives that
    CRPS again (the checkpoint really was restored, not the last state)."""
    m = _njord(ds60, mesh60)
    cfg = TrainConfig(steps_1=2, steps_2=3, unroll_stages=(1, 2), batch=2, val_every=1, val_starts=4,
                      val_members=3, val_leads=2, lr=3e-2)
    h = train(m, ds60, cfg)
    crps = [v["crps"] for v in h["val"]]
    assert [v["step"] for v in h["val"]] == [2, 3, 4, 5]
    assert [v["unroll"] for v in h["val"]] == [1, 1, 1, 2]  # steps_2 = 3 split over 2 stages: 2 steps of 1, 1 of 2
    assert h["chosen"]["val_crps"] == min(crps)
    assert h["chosen"]["step"] == h["val"][int(np.argmin(crps))]["step"]
    again = validation_score(m, ds60, cfg)["crps"]
    assert again == pytest.approx(min(crps), rel=1e-5)
    assert all(len(v["ssr_lead"]) == 2 for v in h["val"])


def test_validation_is_off_by_default_and_checks_its_split(ds60, mesh60, small_ds):
    m = _njord(ds60, mesh60)
    h = train(m, ds60, TrainConfig(steps_1=1, steps_2=1, batch=1))
    assert h["val"] == [] and "chosen" not in h
    with pytest.raises(ValueError, match="crps_units"):
        train(m, ds60, TrainConfig(steps_1=1, steps_2=0, crps_units="bogus"))
    with pytest.raises(ValueError, match="validation split"):
        validation_score(m, small_ds[1], TrainConfig(val_leads=5))


def test_crps_is_scale_equivariant_so_diff_std_units_rescale_the_term(ds60):
    """CRPS(ens/s, y/s) = CRPS(ens, y)/s per channel: the diff_std units multiply the term by 1/dstd."""
    g = torch.Generator().manual_seed(0)
    ens, y = torch.randn(2, 3, 5, 4, generator=g), torch.randn(3, 5, 4, generator=g)
    s = torch.as_tensor(ds60.norm.diff_std, dtype=torch.float32)
    torch.testing.assert_close(crps_fair(ens / s, y / s), crps_fair(ens, y) / s)


def test_activation_checkpointing_gives_equal_gradients(ds60, mesh60):
    m = _njord(ds60, mesh60)
    x2, x1, f, tgt = batch_tensors(ds60, windows(ds60, ds60.train, 2)[:2], 2)

    def grads(on):
        m.set_checkpointing(on)
        m.zero_grad()
        torch.manual_seed(3)
        pred, kl = m.posterior_step(x2, x1, f[:, 0], tgt[:, 0])
        ens = m.rollout(x2, x1, f, members=2, generator=torch.Generator().manual_seed(4))
        ((pred - tgt[:, 0]).pow(2).mean() + kl.mean() + crps_fair(ens, tgt).mean()).backward()
        return [p.grad.clone() for p in m.parameters() if p.grad is not None]

    a, b = grads(False), grads(True)
    assert len(a) == len(b) > 10
    for ga, gb in zip(a, b):
        torch.testing.assert_close(ga, gb, rtol=1e-5, atol=1e-7)
    assert all(layer.checkpoint for layer in m.modules() if hasattr(layer, "edge_index"))


def test_save_load_gives_identical_forecasts(ds60, mesh60, tmp_path):
    x2, x1, f, _ = batch_tensors(ds60, windows(ds60, ds60.train, 3)[:2], 3)
    for m in (_njord(ds60, mesh60).eval(), DeterministicTwin(mesh60, 4, 3, ds60.static, ds60.norm.diff_mean,
                                                              ds60.norm.diff_std, d_h=8).eval()):
        path = m.save_pretrained(tmp_path / type(m).__name__, norm=ds60.norm)
        r = Forecaster.from_pretrained(path)
        assert type(r) is type(m) and not r.training
        with torch.no_grad():
            a = m.rollout(x2, x1, f, members=3, generator=torch.Generator().manual_seed(5))
            b = r.rollout(x2, x1, f, members=3, generator=torch.Generator().manual_seed(5))
        assert torch.equal(a, b)
        assert r.gt.mesh.hash() == mesh60.hash()
        np.testing.assert_array_equal(r.norm.std, ds60.norm.std)
        np.testing.assert_array_equal(r.norm.diff_mean, ds60.norm.diff_mean)
    with pytest.raises(ValueError, match="path"):
        Forecaster.from_pretrained(tmp_path / "nothing")


def _strip(ds):
    from neurips26.njord.simulator import OceanConfig, boundary_strip

    return boundary_strip(OceanConfig(n=16, dx=60e3, sponge_width=3, sponge_sides="e"), ds.mask)


def test_boundary_strip_is_the_sponge_zone(ds60):
    """The strip = the wet cells within sponge_width columns of the east-most wet column; the rest interior."""
    from neurips26.njord.simulator import OceanConfig, boundary_strip

    m_b = _strip(ds60)
    cols = np.nonzero(ds60.mask)[1]
    np.testing.assert_array_equal(m_b == 1, cols > cols.max() - 3)
    assert set(np.unique(m_b)) == {0.0, 1.0}
    with pytest.raises(ValueError, match="sponge_width"):
        boundary_strip(OceanConfig(n=16, dx=60e3), ds60.mask)  # closed basin, no width


@pytest.mark.parametrize("kind", ["njord_crps", "njord_elbo", "twin"])
def test_boundary_loss_ignores_strip_targets_except_through_the_overwrite(ds60, mesh60, kind):
    """With a boundary strip the loss covers the interior only: changing the strip's targets at the last
    step leaves it unchanged, while changing them at the first step changes it (the overwritten strip
    feeds the second step). Without the strip both change it. Njord's encoder is conditioned on the whole
    target, strip included (the boundary truth is known), so its two terms are isolated: the CRPS term
    (prior rollout) as the difference of the loss with and without it under the same posterior samples,
    and the ELBO (likelihood + KL) with the encoder fed the unchanged target -- so a likelihood summed
    over the strip too would move it."""
    from neurips26.njord.training import _loss_njord, _loss_twin

    m = _njord(ds60, mesh60) if kind != "twin" else _twin(ds60, mesh60)
    m_b = torch.from_numpy(_strip(ds60))
    xp2, xp1, f, tgt = batch_tensors(ds60, windows(ds60, ds60.train, 2)[:2], 2)
    cfg = TrainConfig()
    if kind == "njord_elbo":  # the encoder sees the unmodified target; the likelihood the modified one
        post, step = m.posterior_step, iter(range(10**6))
        m.posterior_step = lambda a, b, f_t, x_t: post(a, b, f_t, tgt[:, next(step) % tgt.shape[1]])

    def loss(t, mb):
        if kind == "njord_crps":
            out = []
            for crps in (True, False):
                torch.manual_seed(3)  # the same posterior samples in both calls
                out.append(float(_loss_njord(m, xp2, xp1, f, t, cfg, 1.0, crps, mb)[0].detach()))
            return out[0] - out[1]
        if kind == "njord_elbo":
            torch.manual_seed(3)
            return float(_loss_njord(m, xp2, xp1, f, t, cfg, 1.0, False, mb)[0].detach())
        return float(_loss_twin(m, xp2, xp1, f, t, cfg, mb)[0].detach())

    strip = m_b == 1
    last, first = tgt.clone(), tgt.clone()
    last[:, 1, strip] += 1.0
    first[:, 0, strip] += 1.0
    base = loss(tgt, m_b)
    assert loss(last, m_b) == pytest.approx(base, rel=1e-6, abs=1e-9)
    assert abs(loss(first, m_b) - base) > 1e-4
    assert abs(loss(last, None) - loss(tgt, None)) > 1e-4


def _twin(ds, mesh):
    torch.manual_seed(0)
    return DeterministicTwin(mesh, 4, 3, ds.static, ds.norm.diff_mean, ds.norm.diff_std, d_h=8)


def test_boundary_validation_scores_the_interior_with_the_overwrite(ds60, mesh60):
    """validation_score with a strip = scoring the overwritten rollout on the interior cells by hand."""
    m = _twin(ds60, mesh60).eval()
    m_b = _strip(ds60)
    cfg = TrainConfig(val_starts=3, val_leads=2)
    v = validation_score(m, ds60, cfg, boundary=m_b)
    win = windows(ds60, ds60.val, 2)
    win = win[np.unique(np.linspace(0, len(win) - 1, 3).astype(int))]
    xp2, xp1, f, y = batch_tensors(ds60, win, 2)
    with torch.no_grad():
        e = m.rollout(xp2, xp1, f, boundary=(torch.from_numpy(m_b), y))[0]
    inner = m_b == 0
    want = (e[:, :, inner] - y[:, :, inner]).abs().mean((0, 2, 3))
    np.testing.assert_allclose(v["crps_lead"], want.numpy(), rtol=1e-6)
    assert v["crps"] != pytest.approx(validation_score(m, ds60, cfg)["crps"], rel=1e-6)
    with pytest.raises(ValueError, match="boundary"):
        train(m, ds60, TrainConfig(steps_1=1, steps_2=0, batch=1), boundary=np.ones(len(m_b)))


def test_phase_two_clip_is_its_own_and_norms_are_recorded(ds60, mesh60):
    """clip_2 applies to phase (b) only: with clip 1e-9 in both phases AdamW's steps are ~lr * 1e-9 / eps
    (gradients far below eps = 1e-8), with clip_2 = inf phase (b)'s steps are ~lr, so the weights move much
    further; the pre-clip gradient norms are recorded, one per step. A bad clip_2 is named."""
    cfg = TrainConfig(steps_1=2, steps_2=2, unroll=2, batch=2, clip=1e-9, clip_2=float("inf"))
    moved = {}
    for c2 in (None, float("inf")):
        m = _twin(ds60, mesh60)
        w0 = [p.detach().clone() for p in m.parameters()]
        h = train(m, ds60, dataclasses.replace(cfg, clip_2=c2))
        moved[c2] = max(float((p - q).abs().max()) for p, q in zip(m.parameters(), w0))
        assert len(h["grad_norm"]) == 4 and min(h["grad_norm"]) > 1e-6
    assert moved[float("inf")] > 10 * moved[None] > 0
    with pytest.raises(ValueError, match="clip_2"):
        train(_twin(ds60, mesh60), ds60, dataclasses.replace(cfg, clip_2=0.0))


def test_boundary_loss_keeps_the_whole_grid_normaliser(ds60, mesh60):
    """With a strip the ELBO and the CRPS are divided by the whole grid's entry count N d_x, as without:
    over one step (the overwrite feeds nothing) and the same posterior / prior samples, the free loss
    minus the strip-trained loss is exactly the strip's likelihood and CRPS over N d_x, and the KL term
    (loss at lambda_KL = 1 minus at 0) is the same in both -- not x N / N_interior."""
    from neurips26.njord.models import gaussian_nll
    from neurips26.njord.training import _loss_njord, loss_sigma

    m = _njord(ds60, mesh60)
    m_b = torch.from_numpy(_strip(ds60))
    xp2, xp1, f, tgt = batch_tensors(ds60, windows(ds60, ds60.train, 1)[:3], 1)
    cfg = TrainConfig(lambda_crps=5.0)
    N, C = tgt.shape[2:]

    def loss(mb, lam):
        torch.manual_seed(3)
        return float(_loss_njord(m, xp2, xp1, f, tgt, cfg, lam, True, mb)[0].detach())

    with torch.no_grad():
        torch.manual_seed(3)  # the draws of _loss_njord, in its order: posterior sample, then 2 members
        pred, kl = m.posterior_step(xp2, xp1, f[:, 0], tgt[:, 0])
        ens = m.rollout(xp2, xp1, f, members=2)
    sigma, strip = loss_sigma(m, cfg), m_b == 1
    nll_strip = gaussian_nll(tgt[:, 0, strip], pred[:, strip], sigma).sum((1, 2)).mean()
    crps_strip = crps_fair(ens[:, :, :, strip] / sigma, tgt[:, :, strip] / sigma).sum((2, 3)).mean()
    want = float(nll_strip + cfg.lambda_crps * crps_strip) / (N * C)
    assert want > 1e-3
    assert loss(None, 1.0) - loss(m_b, 1.0) == pytest.approx(want, rel=1e-4)
    kl_term = float(kl.sum((1, 2)).mean()) / (N * C)
    assert kl_term > 1e-6
    for mb in (None, m_b):
        assert loss(mb, 1.0) - loss(mb, 0.0) == pytest.approx(kl_term, rel=1e-3)


def test_infinite_clip_means_no_clipping(ds60, mesh60):
    """clip = inf (and clip_2 = inf) trains without clipping: the same weights as a clip no gradient
    reaches (1e30), and the pre-clip norms are recorded; a zero or NaN clip is refused, naming clip."""
    cfg = TrainConfig(steps_1=2, steps_2=1, unroll=2, batch=2)
    out = {}
    for c in (float("inf"), 1e30):
        m = _twin(ds60, mesh60)
        h = train(m, ds60, dataclasses.replace(cfg, clip=c))
        out[c] = [p.detach().clone() for p in m.parameters()]
        assert len(h["grad_norm"]) == 3 and all(np.isfinite(h["grad_norm"]))
    for a, b in zip(out[float("inf")], out[1e30]):
        assert torch.equal(a, b)
    for bad in (0.0, float("nan"), -1.0):
        with pytest.raises(ValueError, match="clip"):
            train(_twin(ds60, mesh60), ds60, dataclasses.replace(cfg, clip=bad))
