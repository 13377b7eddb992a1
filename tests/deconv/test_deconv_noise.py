"""Acceptance check 14 (noise models) and the noise/data bad-input checks."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from neurips26.deconv import ConvMMDGMM, NoiseModel, TrainConfig
from neurips26.deconv.noise import torch_noise


@pytest.mark.parametrize("family", ["gaussian", "laplace"])
def test_noise_sd_and_scale(family):
    s = 0.7
    nm = NoiseModel(family, std=s)
    e = nm.sample(100_000, 1, rng=0)[:, 0]
    assert e.std() == pytest.approx(s, rel=0.02)
    t = torch_noise(family, torch.full((100_000, 1), s, dtype=torch.float64),
                    torch.Generator().manual_seed(0))
    assert float(t.std()) == pytest.approx(s, rel=0.02)
    if family == "laplace":
        # Laplace scale b = s / sqrt(2): mean absolute deviation = b
        assert np.mean(np.abs(e)) == pytest.approx(s / math.sqrt(2), rel=0.02)


@pytest.mark.parametrize("family", ["gaussian", "laplace"])
def test_noise_density_matches_scipy_and_integrates(family):
    s = np.array([[0.4], [1.3]])
    nm = NoiseModel(family, std=s)
    r = np.linspace(-3, 3, 7)
    lp = nm.log_pdf(np.stack([r, r], 0)[..., None])       # (2, 7)
    ref = stats.norm(scale=s) if family == "gaussian" else stats.laplace(scale=s / math.sqrt(2))
    np.testing.assert_allclose(lp, ref.logpdf(r[None]), atol=1e-10)
    grid = np.linspace(-30, 30, 200_001)
    dens = np.exp(nm.log_pdf(np.stack([grid, grid], 0)[..., None]))
    np.testing.assert_allclose(np.trapezoid(dens, grid, axis=1), 1.0, atol=1e-6)


def test_char_fn_and_full_cov():
    nm = NoiseModel("laplace", std=0.8)
    assert nm.char_fn(np.array([1.5]))[0, 0] == pytest.approx(1 / (1 + 0.64 * 2.25 / 2))
    cov = np.array([[1.0, 0.3], [0.3, 0.5]])
    g = NoiseModel("gaussian", cov=cov)
    r = np.array([[0.2, -0.4]])
    assert g.log_pdf(r)[0] == pytest.approx(stats.multivariate_normal(cov=cov).logpdf(r[0]), abs=1e-10)
    e = g.sample(200_000, 2, rng=1)
    np.testing.assert_allclose(np.cov(e.T), cov, atol=0.01)


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(family="cauchy", std=1.0), ValueError, "family"),
    (dict(family="gaussian", std=0.0), ValueError, "std"),
    (dict(family="laplace", std=[[-1.0]]), ValueError, "std"),
    (dict(family="gaussian", std=np.nan), ValueError, "std"),
    (dict(family="gaussian", std="a"), TypeError, "std"),
    (dict(family="gaussian", cov=[[1.0, 2.0], [0.0, 1.0]]), ValueError, "cov"),
    (dict(family="gaussian", cov=[[1.0, 2.0], [2.0, 1.0]]), ValueError, "cov"),
    (dict(family="laplace", cov=[[1.0]]), ValueError, "cov"),
])
def test_bad_noise(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        NoiseModel(**kwargs)


def _est():
    return ConvMMDGMM(2, 4, TrainConfig(epochs=1, batch_size=10))


@pytest.mark.parametrize("x,noise,exc,match", [
    (np.zeros(20), NoiseModel("gaussian", std=1.0), ValueError, "X must be 2-D"),
    (np.zeros((1, 1)), NoiseModel("gaussian", std=1.0), ValueError, "X needs at least 2"),
    (np.array([[0.0], [np.nan], [1.0]]), NoiseModel("gaussian", std=1.0), ValueError, "X must be finite"),
    (np.array([[0.0], [np.inf], [1.0]]), NoiseModel("gaussian", std=1.0), ValueError, "X must be finite"),
    (np.zeros((20, 1)), NoiseModel("gaussian", std=np.ones((19, 1))), ValueError, "noise"),
    (np.zeros((20, 2)), NoiseModel("gaussian", std=np.ones((20, 3))), ValueError, "noise"),
    (np.zeros((20, 1)), "gaussian", TypeError, "noise"),
    (np.zeros((20, 1)), 0.5, TypeError, r"noise must be a neurips26.deconv.NoiseModel.*'laplace'"),
    (np.zeros((20, 1)), None, ValueError, "noise is required"),
])
def test_bad_fit_inputs(x, noise, exc, match):
    with pytest.raises(exc, match=match):
        _est().fit(x, noise=noise)


def test_dtype_mismatch_between_x_and_noise():
    x = torch.zeros(20, 1, dtype=torch.float32)
    noise = NoiseModel("gaussian", std=torch.ones(20, 1, dtype=torch.float64))
    with pytest.raises(TypeError, match="noise: dtype"):
        _est().fit(x, noise=noise)


@pytest.mark.parametrize("cfg,match", [
    (dict(batch_size=1), "batch_size"), (dict(epochs=0), "epochs"), (dict(kernel="rbf"), "kernel"),
    (dict(bandwidths=[]), "bandwidths"), (dict(bandwidths=[0.0]), "bandwidths"), (dict(lr=-1.0), "lr"),
])
def test_bad_training_config(cfg, match):
    with pytest.raises(ValueError, match=match):
        ConvMMDGMM(2, 4, TrainConfig(**({"epochs": 1} | cfg))).fit(np.random.randn(30, 1),
                                                                noise=NoiseModel("gaussian", std=0.5))


def test_bad_sieve_sizes():
    """Checked in fit (scikit-learn: the constructor only stores), naming the argument."""
    x, nm = np.random.randn(30, 1), NoiseModel("gaussian", std=0.5)
    with pytest.raises(ValueError, match="n_components"):
        ConvMMDGMM(0).fit(x, noise=nm)
    with pytest.raises(TypeError, match="n_components"):
        ConvMMDGMM(2.5).fit(x, noise=nm)
