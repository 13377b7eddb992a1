"""Acceptance checks 1, 2, 3, 13, 15 of the spec: the convMMD loss and its fast 1-D path."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate

from neurips26.deconv.loss import (bandwidth_heuristic, gaussian_kernel_expectation, gaussian_mmd2_population,
                                   mmd2_unbiased)


def test_unbiased_same_law_mean_zero():
    g = torch.Generator().manual_seed(0)
    vals = []
    for _ in range(50):
        x = torch.randn(300, 1, generator=g, dtype=torch.float64)
        y = torch.randn(300, 1, generator=g, dtype=torch.float64)
        vals.append(float(mmd2_unbiased(x, y, [0.5, 1.0], "laplace")))
    vals = np.array(vals)
    assert abs(vals.mean()) < 3 * vals.std(ddof=1) / math.sqrt(50)
    assert (vals < 0).any()  # not clamped


def test_gaussian_kernel_matches_closed_form():
    g = torch.Generator().manual_seed(1)
    vals = []
    for _ in range(50):
        x = torch.randn(1000, 1, generator=g, dtype=torch.float64)
        y = torch.randn(1000, 1, generator=g, dtype=torch.float64) + 1.0
        vals.append(float(mmd2_unbiased(x, y, [1.0], "gaussian")))
    exact = gaussian_mmd2_population(0, 1, 1, 1, 1.0)
    assert exact == pytest.approx(0.17727, abs=1e-5)
    assert np.mean(vals) == pytest.approx(exact, rel=0.05)


def test_fourier_identity():
    """convMMD^2 = int |phi_P - phi_Q|^2 |phi_eps|^2 Lambda dw (P=N(0,1), Q=N(.5,1.5^2), s=.7, h=1)."""
    s, h = 0.7, 1.0
    closed = gaussian_mmd2_population(0.0, math.sqrt(1 + s**2), 0.5, math.sqrt(1.5**2 + s**2), h)

    def integrand(w):
        pp = np.exp(-0.5 * w**2)
        pq = np.exp(0.5j * w - 0.5 * 1.5**2 * w**2)
        lam = h / math.sqrt(2 * math.pi) * math.exp(-0.5 * h**2 * w**2)
        return abs(pp - pq) ** 2 * math.exp(-(s * w) ** 2) * lam

    quad, _ = integrate.quad(integrand, -np.inf, np.inf, epsabs=1e-13, epsrel=1e-12)
    assert closed == pytest.approx(quad, abs=1e-6)
    # the expectation helper agrees with the scalar closed form
    one = torch.eye(1, dtype=torch.float64)
    e = gaussian_kernel_expectation(torch.tensor([0.0], dtype=torch.float64), one,
                                    torch.tensor([1.0], dtype=torch.float64), one, 1.0)
    assert float(e) == pytest.approx(1 / math.sqrt(3) * math.exp(-0.5 / 3), rel=1e-12)


@pytest.mark.parametrize("kernel", ["laplace", "gaussian"])
def test_translation_equivariance(kernel):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(200, 2, generator=g, dtype=torch.float64)
    y = torch.randn(150, 2, generator=g, dtype=torch.float64) * 1.3
    c = torch.tensor([3.7, -12.0], dtype=torch.float64)
    a = mmd2_unbiased(x, y, [0.3, 1.0], kernel)
    b = mmd2_unbiased(x + c, y + c, [0.3, 1.0], kernel)
    assert float(a) == pytest.approx(float(b), abs=1e-6)


def _grads(x, y, h, method):
    x = x.clone().requires_grad_(True)
    y = y.clone().requires_grad_(True)
    v = mmd2_unbiased(x, y, h, "laplace", method=method)
    gx, gy = torch.autograd.grad(v, [x, y])
    return v, gx, gy


@pytest.mark.parametrize("scale,h", [(1.0, [0.3, 1.0]), (800.0, [1.0])])
def test_fast_path_equals_dense_values_and_grads(scale, h):
    g = torch.Generator().manual_seed(3)
    x = (torch.rand(400, 1, generator=g, dtype=torch.float64) - 0.5) * scale
    y = (torch.rand(300, 1, generator=g, dtype=torch.float64) - 0.3) * scale
    vf, gxf, gyf = _grads(x, y, h, "fast")
    vd, gxd, gyd = _grads(x, y, h, "dense")
    assert float(vf.detach()) == pytest.approx(float(vd.detach()), rel=1e-10, abs=1e-14)
    assert torch.allclose(gxf, gxd, rtol=1e-10, atol=1e-14)
    assert torch.allclose(gyf, gyd, rtol=1e-10, atol=1e-14)


def test_fast_path_with_ties_values():
    x = torch.tensor([[0.0], [1.0], [1.0], [2.5], [0.0]], dtype=torch.float64)
    y = torch.tensor([[1.0], [0.0], [3.0], [2.5]], dtype=torch.float64)
    vf = mmd2_unbiased(x, y, [0.7, 2.0], "laplace", method="fast")
    vd = mmd2_unbiased(x, y, [0.7, 2.0], "laplace", method="dense")
    assert float(vf) == pytest.approx(float(vd), rel=1e-10)


def test_bandwidth_heuristic_positive_sorted_and_degenerate():
    rng = np.random.default_rng(0)
    h = bandwidth_heuristic(rng.standard_normal((500, 2)), rng.standard_normal((500, 2)))
    assert len(h) == 9 and np.all(h > 0) and np.all(np.diff(h) > 0)
    # value: quantile of pairwise distances / (log10(2 n) sqrt(d))
    x = np.array([[0.0], [1.0], [3.0]])
    h1 = bandwidth_heuristic(x, np.array([[6.0]]), quantiles=(0.5,))
    d = np.array([1, 3, 6, 2, 5, 3], dtype=float)
    assert h1[0] == pytest.approx(np.quantile(d, 0.5) / math.log10(6), rel=1e-12)
    with pytest.raises(ValueError, match="1e-5"):
        bandwidth_heuristic(np.zeros((10, 1)), np.zeros((10, 1)))


@pytest.mark.parametrize("kwargs,match", [
    (dict(kernel="cauchy"), "kernel"),
    (dict(bandwidths=[]), "bandwidths"),
    (dict(bandwidths=[1.0, -1.0]), "bandwidths"),
    (dict(bandwidths=[float("nan")]), "bandwidths"),
    (dict(method="fast", kernel="gaussian"), "fast"),
])
def test_bad_loss_inputs(kwargs, match):
    x = torch.randn(10, 1)
    args = dict(bandwidths=[1.0], kernel="laplace") | kwargs
    with pytest.raises(ValueError, match=match):
        mmd2_unbiased(x, x + 1, **args)


def test_loss_too_few_points():
    with pytest.raises(ValueError, match="at least 2"):
        mmd2_unbiased(torch.randn(1, 1), torch.randn(5, 1), [1.0])
