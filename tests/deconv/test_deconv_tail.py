"""Issue 11, the tail pathology: pilot init, weight-floor re-seeding, validation-MMD stopping.

The far component the issue saw: on the quick config's dataset A, seed 0 (laplace_mix_1d, n = 1000,
heteroscedastic Laplace noise), the spec's k-means++ init kept a broad component far in the left tail
(weight 0.08, mean -5.7, sd 2.6 at 150 epochs; weight 0.06, sd 3.4 at the default 500), which inflated
the sample sd (3.06 vs 2.64) and failed the W1 criterion on that seed.
"""

import numpy as np
import pytest
import torch

from neurips26.deconv import ConvMMDGMM, NoiseModel, TrainConfig
from neurips26.deconv.baselines import ExtremeDeconvolution
from neurips26.deconv.data import ISE_GRID, cdf_from_pdf, ise, make_dataset, w1_from_cdfs
from neurips26.deconv.sieves import GMMSieve

Q5 = (0.1, 0.3, 0.5, 0.7, 0.9)


def _mixture_moments(w, mu, C):
    m = w @ mu
    second = np.einsum("k,kij->ij", w, C + np.einsum("ki,kj->kij", mu, mu))
    return m, second - np.outer(m, m)


# ------------------------------------------------------------------ building blocks (fast)
def test_split_component_preserves_moments_and_reseeds():
    g = GMMSieve(3, 2, dtype=torch.float64)
    w = np.array([0.001, 0.6, 0.399])
    mu = np.array([[9.0, -9.0], [0.0, 1.0], [2.0, 0.0]])
    C = np.array([[[4.0, 0.0], [0.0, 4.0]], [[2.0, 0.8], [0.8, 1.0]], [[0.3, 0.0], [0.0, 0.2]]])
    g.set_mixture(w, mu, C)
    np.testing.assert_allclose(g.weights.detach().numpy(), w, atol=1e-12)
    np.testing.assert_allclose(g.covs.detach().numpy(), C, atol=1e-12)
    g.split_component(0, 1)
    w2, mu2, C2 = (a.detach().numpy() for a in (g.weights, g.means, g.covs))
    # the two halves carry the split component's mass, mean and covariance (the dead one is gone)
    m_old, V_old = _mixture_moments(w[1:2] / w[1], mu[1:2], C[1:2])
    m_new, V_new = _mixture_moments(w2[:2] / w2[:2].sum(), mu2[:2], C2[:2])
    np.testing.assert_allclose(m_new, m_old, atol=1e-12)
    np.testing.assert_allclose(V_new, V_old, atol=1e-12)
    np.testing.assert_allclose(w2, [0.3005, 0.3005, 0.399], atol=1e-12)
    assert np.abs(mu2[0]).max() < 3                         # no longer at (9, -9)
    np.testing.assert_allclose(C2[2], C[2], atol=1e-12)     # the others untouched


def test_weight_floor_reseeds_a_starved_component():
    ds = make_dataset("gauss_mix_1d", 300, "gaussian", hetero=False, noise_sd=0.5, seed=0)
    cfg = TrainConfig(epochs=100, batch_size=100, dtype="float64")
    est = ConvMMDGMM(3, 8, TrainConfig(epochs=1, batch_size=100, dtype="float64")).fit(ds.x, noise=ds.noise)
    opt = torch.optim.AdamW(est.model_.parameters(), lr=1e-2)
    est.model_.set_mixture([0.005, 0.5, 0.495], [[12.0], [-2.0], [1.5]], [[[9.0]], [[0.3]], [[1.0]]])
    loss = est.model_.log_prob(torch.zeros(3, 1, dtype=torch.float64)).sum()
    loss.backward()
    opt.step()                                               # give Adam some state to reset
    est._start_training(cfg)
    assert est.weight_floor_ == pytest.approx(0.1 / 3)
    est._end_epoch(23, cfg, opt, None, None)                  # epoch 24: not a check epoch
    assert est.reseeds_ == []
    est._end_epoch(24, cfg, opt, None, None)                  # epoch 25: check
    assert [r[:3] for r in est.reseeds_] == [(25, 0, 1)] and est.reseeds_[0][3] == pytest.approx(0.005, rel=0.05)
    assert est.weights_.min() >= 0.1 / 3 and np.abs(est.means_[:, 0]).max() < 4
    for p in est.model_.parameters():
        assert torch.all(opt.state[p]["exp_avg"][[0, 1]] == 0)
    est.model_.set_mixture([0.005, 0.5, 0.495], [[12.0], [-2.0], [1.5]], [[[9.0]], [[0.3]], [[1.0]]])
    est._end_epoch(99, cfg, opt, None, None)                  # after 80 % of the epochs: left alone
    assert len(est.reseeds_) == 1
    off = ConvMMDGMM(3, 8, weight_floor=0.0)
    off.model_ = est.model_
    off._start_training(cfg)
    off._end_epoch(24, cfg, opt, None, None)
    assert off.reseeds_ == []


def test_pilot_is_xd_with_moment_matched_gaussian_noise():
    """init='pilot' = 50 XD EM iterations from the k-means++ init with Gaussian noise of the same sd."""
    ds = make_dataset("laplace_mix_1d", 400, "laplace", hetero=True, seed=1)
    est = ConvMMDGMM(4, 8, TrainConfig(epochs=1, batch_size=100, lr=1e-12, dtype="float64"),
                     weight_floor=0.0).fit(ds.x, noise=ds.noise)
    ref_init = ConvMMDGMM(4, 8, TrainConfig(epochs=1, batch_size=100, lr=1e-12, dtype="float64"),
                          init="kmeans++").fit(ds.x, noise=ds.noise)
    g = NoiseModel("gaussian", std=ds.noise.std)
    # ref_init trained one step at lr 1e-12: its parameters are the k-means++ init to ~1e-11
    init = (ref_init.weights_, ref_init.means_, ref_init.covariances_)
    xd = ExtremeDeconvolution(4, max_iter=50).fit(ds.x, noise=g, init=init)
    np.testing.assert_allclose(est.pilot_[1], xd.means_, atol=1e-6)
    np.testing.assert_allclose(est.means_, xd.means_, atol=1e-6)     # the sieve starts at the pilot
    np.testing.assert_allclose(est.weights_, xd.weights_, atol=1e-6)
    # the pilot raises the (Gaussian-approximated) log-likelihood of the noisy data over the init
    assert xd.loglik_path_[-1] > xd.loglik_path_[0] + 10


def test_validation_stopping_returns_the_best_parameters():
    ds = make_dataset("laplace_mix_1d", 400, "laplace", hetero=True, seed=2)
    cfg = TrainConfig(epochs=80, batch_size=100, validation_fraction=0.25, validation_every=5,
                      validation_patience=3, bandwidth_quantiles=Q5, dtype="float64")
    est = ConvMMDGMM(3, 8, cfg, init="kmeans++").fit(ds.x, noise=ds.noise)
    assert est.n_validation_ == 100 and len(est.validation_index_) == 100
    epochs, vals = zip(*est.validation_loss_)
    assert list(epochs) == list(range(5, 5 * len(epochs) + 1, 5))
    assert est.best_epoch_ == epochs[int(np.argmin(vals))]
    if est.stopped_epoch_ < 80:          # stopped: patience checks after the best one
        assert est.stopped_epoch_ == est.best_epoch_ + 5 * 3
    # the returned model is the best one: recomputing its validation loss gives the recorded minimum
    vi = est.validation_index_
    xv = torch.as_tensor(ds.x[vi], dtype=torch.float64)
    sv = torch.as_tensor(ds.noise.std[vi], dtype=torch.float64)
    again = est._validation_loss(xv, sv, None, torch.as_tensor(est.bandwidths_), est.seed_)
    assert again == pytest.approx(min(vals), rel=1e-9, abs=1e-12)
    # training used only the other 300 rows: one step of batch 100 per 100 rows
    assert est.n_steps_ == 3 * len(est.epoch_loss_)


@pytest.mark.parametrize("kw, match", [
    ({"init": "random"}, "init must be 'pilot' or 'kmeans\\+\\+'"),
    ({"weight_floor": 0.6}, "weight_floor"),
    ({"reseed_every": 0}, "reseed_every"),
    ({"pilot_iter": 0}, "pilot_iter"),
    ({"config": TrainConfig(epochs=2, validation_fraction=0.7)}, "validation_fraction"),
    ({"config": TrainConfig(epochs=2, validation_every=0)}, "validation_every"),
])
def test_tail_options_are_validated(kw, match):
    ds = make_dataset("laplace_mix_1d", 60, "laplace", hetero=True, seed=0)
    with pytest.raises(ValueError, match=match):
        ConvMMDGMM(**({"n_components": 3, "config": TrainConfig(epochs=2)} | kw)).fit(ds.x, noise=ds.noise)


# ------------------------------------------------------------------ the issue's case (slow)
def _far_components(est, lo=-4.5, broad=2.0, min_w=0.02):
    w, m, sd = est.weights_, est.means_[:, 0], np.sqrt(est.covariances_[:, 0, 0])
    return [(round(float(a), 3), round(float(b), 2), round(float(c), 2))
            for a, b, c in zip(w, m, sd) if a >= min_w and (b < lo or c > broad)]


def _metrics(est, ds):
    tp, p = ds.latent.pdf(ISE_GRID), est.pdf(ISE_GRID[:, None])
    sd_err = float(est.sample(20000, random_state=1).std() - ds.z.std())
    return ise(p, tp), w1_from_cdfs(cdf_from_pdf(p), cdf_from_pdf(tp)), sd_err


@pytest.mark.slow
@pytest.mark.parametrize("epochs", [150, 500])
def test_far_component_of_the_issue_is_gone(epochs):
    """Quick dataset A, seed 0, at the quick budget (150 epochs) and the package default (500): the old
    init keeps the far broad component (sample sd +0.4 / +0.2); the default (pilot + weight floor) has none,
    a sample sd within 0.1 of the latents' and a W1 at least 25 % lower."""
    ds = make_dataset("laplace_mix_1d", 1000, "laplace", hetero=True, seed=0)
    cfg = TrainConfig(epochs=epochs, batch_size=500, bandwidth_quantiles=Q5, seed=0)
    old = ConvMMDGMM(6, 32, cfg, init="kmeans++", weight_floor=0.0).fit(ds.x, noise=ds.noise)
    new = ConvMMDGMM(6, 32, cfg).fit(ds.x, noise=ds.noise)
    (ise_o, w1_o, sd_o), (ise_n, w1_n, sd_n) = _metrics(old, ds), _metrics(new, ds)
    far = _far_components(old)
    assert len(far) == 1 and far[0][0] > 0.05 and far[0][1] < -4.5 and far[0][2] > 2.0, far   # the bug
    assert sd_o > 0.15
    assert _far_components(new) == []
    assert abs(sd_n) < 0.1
    assert w1_n < 0.75 * w1_o
    assert ise_n < 1.1 * ise_o


@pytest.mark.slow
def test_tail_fix_does_not_regress_over_seeds():
    """Seeds 0-2 of quick dataset A at 150 epochs: mean W1 and |sample sd error| improve, mean ISE does not
    get worse by more than 25 % (measured: W1 0.187 -> 0.112, ISE 0.0082 -> 0.0092 vs 0.0082)."""
    old_m, new_m = [], []
    for seed in range(3):
        ds = make_dataset("laplace_mix_1d", 1000, "laplace", hetero=True, seed=seed)
        cfg = TrainConfig(epochs=150, batch_size=500, bandwidth_quantiles=Q5, seed=seed)
        old_m.append(_metrics(ConvMMDGMM(6, 32, cfg, init="kmeans++", weight_floor=0.0)
                              .fit(ds.x, noise=ds.noise), ds))
        new_m.append(_metrics(ConvMMDGMM(6, 32, cfg).fit(ds.x, noise=ds.noise), ds))
    o, n = np.array(old_m), np.array(new_m)
    assert n[:, 1].mean() < o[:, 1].mean()
    assert np.abs(n[:, 2]).mean() < np.abs(o[:, 2]).mean()
    assert n[:, 0].mean() < 1.25 * o[:, 0].mean()


@pytest.mark.slow
def test_pilot_init_defuses_the_learning_rate_trap():
    """The issue's lr case (n = 600, seed 3) at lr 1e-3 written out: the k-means++ init gives ISE 0.064; the
    pilot init starts near the solution, so the slow rate no longer matters (measured ISE 0.0077)."""
    ds = make_dataset("laplace_mix_1d", 600, "laplace", hetero=True, seed=3)
    cfg = TrainConfig(epochs=500, lr=1e-3)
    old = ConvMMDGMM(6, config=cfg, init="kmeans++", weight_floor=0.0).fit(ds.x, noise=ds.noise)
    new = ConvMMDGMM(6, config=cfg).fit(ds.x, noise=ds.noise)
    assert _metrics(old, ds)[0] > 0.04
    assert _metrics(new, ds)[0] < 0.015
