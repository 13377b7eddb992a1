"""Acceptance checks 7 and 8: posterior denoising (closed form, IS, Tweedie, Langevin, Bayes rule)."""

import numpy as np
import pytest

from neurips26.deconv import (NoiseModel, gmm_posterior, importance_posterior_mean, langevin_posterior_mean,
                              posterior_mean, tweedie_gmm)
from neurips26.deconv.data import make_dataset
from neurips26.deconv.sieves import GMMSieve
import torch

PRIOR = (np.array([0.3, 0.7]), np.array([[-2.0], [1.5]]), np.array([[[0.25]], [[1.0]]]))


def _prior_module():
    g = GMMSieve(2, 1, dtype=torch.float64)
    with torch.no_grad():
        g.logits.copy_(torch.log(torch.tensor([0.3, 0.7])))
        g.means.copy_(torch.tensor([[-2.0], [1.5]]))
        g.log_diag.copy_(torch.log(torch.tensor([[0.5], [1.0]])))
    return g


def test_closed_form_equals_is_and_tweedie():
    rng = np.random.default_rng(0)
    x = rng.uniform(-4, 4, (20, 1))
    noise = NoiseModel("gaussian", std=0.6)
    mean, cov = gmm_posterior(PRIOR, x, noise)
    r = importance_posterior_mean(_prior_module(), x, noise, n_samples=8192, seed=1)
    assert np.all(np.abs(r.mean - mean) < 4 * r.se)
    assert np.mean(np.abs(r.mean - mean)) < 0.01
    assert not r.flagged.any()
    np.testing.assert_allclose(tweedie_gmm(PRIOR, x, noise), mean, atol=1e-6)
    # posterior mean and variance against quadrature
    grid = np.linspace(-12, 12, 40001)
    prior = 0.3 * np.exp(-0.5 * ((grid + 2) / 0.5) ** 2) / 0.5 + 0.7 * np.exp(-0.5 * (grid - 1.5) ** 2)
    post = prior[None] * np.exp(-0.5 * ((x - grid[None]) / 0.6) ** 2)
    post /= post.sum(1, keepdims=True)
    qm = post @ grid
    qv = post @ grid**2 - qm**2
    np.testing.assert_allclose(mean[:, 0], qm, atol=1e-6)
    np.testing.assert_allclose(cov[:, 0, 0], qv, atol=1e-6)


def test_point_mass_prior_gives_prior_mean():
    prior = (np.array([1.0]), np.array([[0.7]]), np.array([[[1e-6]]]))
    x = np.array([[-3.0], [0.0], [5.0]])
    mean, _ = gmm_posterior(prior, x, NoiseModel("gaussian", std=1.0))
    np.testing.assert_allclose(mean, 0.7, atol=1e-5)


def test_laplace_is_closed_form_rejected_and_langevin_close():
    x = np.array([[-2.0], [0.5], [2.0]])
    noise = NoiseModel("laplace", std=0.8)
    with pytest.raises(ValueError, match="noise"):
        gmm_posterior(PRIOR, x, noise)
    r = importance_posterior_mean(_prior_module(), x, noise, n_samples=4096, seed=0)
    # quadrature reference with the Laplace likelihood
    grid = np.linspace(-12, 12, 20001)
    prior = 0.3 * np.exp(-0.5 * ((grid + 2) / 0.5) ** 2) / 0.5 + 0.7 * np.exp(-0.5 * (grid - 1.5) ** 2)
    b = 0.8 / np.sqrt(2)
    ref = [np.sum(grid * prior * np.exp(-np.abs(xi - grid) / b))
           / np.sum(prior * np.exp(-np.abs(xi - grid) / b))
           for xi in x[:, 0]]
    np.testing.assert_allclose(r.mean[:, 0], ref, atol=5 * r.se.max() + 1e-3)
    lv = langevin_posterior_mean(_prior_module(), x, noise, n_chains=50, n_steps=600, seed=0)
    np.testing.assert_allclose(lv[:, 0], ref, atol=0.1)


def test_posterior_mean_is_bayes_rule():
    rng = np.random.default_rng(3)
    n = 5000
    k = rng.choice(2, n, p=PRIOR[0])
    z = PRIOR[1][k, 0] + np.sqrt(PRIOR[2][k, 0, 0]) * rng.standard_normal(n)
    noise = NoiseModel("gaussian", std=0.8)
    x = (z + 0.8 * rng.standard_normal(n))[:, None]
    pm = gmm_posterior(PRIOR, x, noise)[0][:, 0]
    mse_pm = np.mean((pm - z) ** 2)
    mse_id = np.mean((x[:, 0] - z) ** 2)
    # best linear shrinkage (oracle least squares)
    A = np.stack([x[:, 0], np.ones(n)], 1)
    coef = np.linalg.lstsq(A, z, rcond=None)[0]
    mse_lin = np.mean((A @ coef - z) ** 2)
    assert mse_pm <= mse_id and mse_pm <= mse_lin


@pytest.mark.parametrize("m", [100, 130, 65536])
def test_is_sample_count_validated(m):
    with pytest.raises(ValueError, match="n_samples"):
        importance_posterior_mean(_prior_module(), np.zeros((2, 1)), NoiseModel("gaussian", std=1.0),
                                  n_samples=m)


def test_dispatcher_errors():
    with pytest.raises(ValueError, match="method"):
        posterior_mean(PRIOR, np.zeros((2, 1)), NoiseModel("gaussian", std=1.0), method="mcmc")
    with pytest.raises(ValueError, match="noise"):
        tweedie_gmm(PRIOR, np.zeros((2, 1)), NoiseModel("gaussian", std=np.ones((2, 1)) * [[1.0], [2.0]]))
    with pytest.raises(TypeError, match="prior"):
        importance_posterior_mean(object(), np.zeros((2, 1)), NoiseModel("gaussian", std=1.0))


# ------------------------------------------------------------- issue 11: 1-D posterior means by quadrature
def _quad_ref(w, m, sd, x, s, family):
    """Independent reference: scipy.integrate.quad with the likelihood's kink (z = x) as a breakpoint."""
    from scipy import integrate, stats

    def prior(z):
        return float(np.sum(w * stats.norm.pdf(z, m, sd)))

    def lik(z):
        if family == "gaussian":
            return stats.norm.pdf(x - z, 0, s)
        return stats.laplace.pdf(x - z, 0, s / np.sqrt(2))
    lo, hi = min(m.min() - 12 * sd.max(), x - 40 * s), max(m.max() + 12 * sd.max(), x + 40 * s)
    num = integrate.quad(lambda z: z * prior(z) * lik(z), lo, hi, points=[x], limit=400, epsabs=0)[0]
    den = integrate.quad(lambda z: prior(z) * lik(z), lo, hi, points=[x], limit=400, epsabs=0)[0]
    return num / den


def test_quadrature_posterior_mean_matches_closed_form_and_scipy():
    from neurips26.deconv import quadrature_posterior_mean
    w, m, sd = np.array([0.3, 0.7]), np.array([-2.0, 1.5]), np.array([0.4, 0.9])
    prior = (w, m[:, None], (sd**2)[:, None, None])
    x = np.array([[-3.0], [-1.0], [0.2], [1.4], [4.0]])
    g = NoiseModel("gaussian", std=0.5)
    np.testing.assert_allclose(quadrature_posterior_mean(prior, x, g), gmm_posterior(prior, x, g)[0],
                               atol=1e-7)
    s = np.array([[0.3], [0.5], [0.8], [0.5], [1.0]])
    lap = NoiseModel("laplace", std=s)
    got = quadrature_posterior_mean(prior, x, lap)[:, 0]
    ref = np.array([_quad_ref(w, m, sd, float(x[i, 0]), float(s[i, 0]), "laplace") for i in range(len(x))])
    np.testing.assert_allclose(got, ref, atol=5e-6)
    fine = quadrature_posterior_mean(prior, x, lap, n_grid=40001)[:, 0]      # O(h^2): halving h quarters it
    assert np.max(np.abs(fine - ref)) < np.max(np.abs(got - ref)) / 3


def test_quadrature_is_the_1d_default_and_agrees_with_is_on_a_fitted_prior():
    from neurips26.deconv import ConvMMDGMM, TrainConfig, importance_posterior_mean, quadrature_posterior_mean
    ds = make_dataset("laplace_mix_1d", 300, "laplace", hetero=True, seed=0)
    est = ConvMMDGMM(3, 8, TrainConfig(epochs=5, batch_size=100, dtype="float64")).fit(ds.x, noise=ds.noise)
    x, nm = ds.x[:40], ds.noise.subset(np.arange(40))
    q = quadrature_posterior_mean(est, x, nm)
    np.testing.assert_array_equal(est.posterior_mean(x, nm), q)               # auto -> quadrature in 1-D
    tup = (est.weights_, est.means_, est.covariances_)
    np.testing.assert_allclose(quadrature_posterior_mean(tup, x, nm), q, atol=1e-8)  # model path = numpy path
    r = importance_posterior_mean(est, x, nm, n_samples=4096)
    assert np.all(np.abs(r.mean - q) < 6 * r.se + 1e-3)
    with pytest.raises(ValueError, match="d = 1"):
        quadrature_posterior_mean(tup, np.zeros((3, 2)), NoiseModel("gaussian", std=0.5))
