"""Acceptance check 12: the NSF sieve (zuko) — normalised density, differentiable rsample, fit + denoise."""

import numpy as np
import pytest
import torch

pytest.importorskip("zuko", reason="zuko not installed (flow sieve)")

from neurips26.deconv import ConvMMDFlow, FlowConfig, NoiseModel, TrainConfig, importance_posterior_mean  # noqa: E402
from neurips26.deconv.data import make_dataset  # noqa: E402
from neurips26.deconv.sieves import FlowSieve  # noqa: E402


def test_flow_log_prob_integrates_to_one_and_rsample_differentiable():
    torch.manual_seed(0)
    f = FlowSieve(1, blocks=2, bins=8, hidden=16, loc=[0.5], scale=[2.0], dtype=torch.float64)
    grid = torch.linspace(-120, 120, 200_001, dtype=torch.float64)[:, None]
    mass = torch.trapezoid(f.log_prob(grid).exp(), grid[:, 0])
    assert float(mass.detach()) == pytest.approx(1.0, abs=1e-3)
    z = f.rsample(64, torch.Generator().manual_seed(1))
    z.pow(2).mean().backward()
    grads = [p.grad for p in f.parameters() if p.grad is not None]
    assert grads and sum(float(g.abs().sum()) for g in grads) > 0


def test_flow_fit_improves_loss_and_denoises():
    ds = make_dataset("laplace_mix_1d", 400, "laplace", hetero=True, seed=0)
    est = ConvMMDFlow(FlowConfig(blocks=1, bins=6, hidden=8),
                      TrainConfig(epochs=30, batch_size=200, lr=5e-3, seed=0)).fit(ds.x, noise=ds.noise)
    first, last = np.mean(est.loss_history_[:6]), np.mean(est.loss_history_[-6:])
    assert last < first
    assert est.sample(10).shape == (10, 1)
    r = importance_posterior_mean(est, ds.x[:16], ds.noise.subset(np.arange(16)), n_samples=256)
    assert np.all(np.isfinite(r.mean))


def test_flow_tail_bound_checked_in_denoiser():
    ds = make_dataset("laplace_mix_1d", 200, "gaussian", hetero=False, noise_sd=0.5, seed=0)
    est = ConvMMDFlow(FlowConfig(blocks=1, bins=4, hidden=4, tail_bound=3.0),
                      TrainConfig(epochs=1, batch_size=100)).fit(ds.x, noise=ds.noise)
    with pytest.raises(ValueError, match="tail bound"):
        importance_posterior_mean(est, np.array([[1e3]]), NoiseModel("gaussian", std=0.5), n_samples=128)


def test_flow_early_stopping_stops():
    ds = make_dataset("gauss_mix_1d", 200, "gaussian", hetero=False, noise_sd=0.5, seed=0)
    est = ConvMMDFlow(FlowConfig(blocks=1, bins=4, hidden=4),
                      TrainConfig(epochs=400, batch_size=100, lr=0.0 + 1e-9, early_stopping=True, patience=5))
    est.fit(ds.x, noise=ds.noise)
    assert est.stopped_epoch_ < 400
