"""EDM schedule (check 7) and smoothing identities (check 8)."""

import numpy as np
import pytest

from neurips26.bridge import edm_sigmas, smooth_gaussian, smoothing_matrix
from neurips26.bridge.schedule import check_schedule, log_smooth_grid


def test_edm_schedule_values():
    s = edm_sigmas(18)
    assert s.shape == (19,) and s[-1] == 0.0
    assert abs(s[0] - 80) < 1e-12 * 80 and abs(s[17] - 0.002) < 1e-12 * 0.002
    assert np.all(np.diff(s[:-1]) < 0)
    i = np.arange(18)
    ref = (80 ** (1 / 7) + i / 17 * (0.002 ** (1 / 7) - 80 ** (1 / 7))) ** 7
    assert np.allclose(s[:-1], ref, rtol=1e-15, atol=0)
    assert edm_sigmas(2, append_zero=False).tolist() == pytest.approx([80.0, 0.002], rel=1e-12)


def test_edm_schedule_matches_k_diffusion_if_installed():
    kd = pytest.importorskip("k_diffusion")
    import torch

    ref = kd.sampling.get_sigmas_karras(18, 0.002, 80.0, rho=7.0).numpy()
    assert np.allclose(edm_sigmas(18), ref, rtol=1e-6, atol=0)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        ref64 = kd.sampling.get_sigmas_karras(18, 0.002, 80.0, rho=7.0).numpy()
    finally:
        torch.set_default_dtype(old)
    assert np.allclose(edm_sigmas(18), ref64, rtol=1e-10, atol=0)


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"sigma_min": 0.0}, "sigma_min"),
        ({"sigma_min": -1.0}, "sigma_min"),
        ({"sigma_max": 0.001}, "sigma_max"),
        ({"rho": 0.0}, "rho"),
        ({"T": 1}, "T"),
    ],
)
def test_edm_bad_parameters(kw, name):
    with pytest.raises(ValueError, match=name):
        edm_sigmas(**kw)


def test_schedule_must_be_strictly_decreasing():
    with pytest.raises(ValueError, match="strictly decreasing"):
        check_schedule([1.0, 0.5, 0.5, 0.1])
    with pytest.raises(ValueError, match="positive"):
        check_schedule([1.0, -0.5])
    assert check_schedule([1.0, 0.5, 0.0]).tolist() == [1.0, 0.5]


def test_gaussian_smoothing_adds_variance():
    u, V = np.ones(3), np.diag([1.0, 2.0, 3.0])
    u2, V2 = smooth_gaussian(u, V, 0.5)
    assert np.array_equal(u2, u) and np.allclose(V2, V + 0.25 * np.eye(3))


def test_grid_smoothing_matrix_identities():
    z = np.linspace(-3, 3, 512)
    dz = z[1] - z[0]
    M = smoothing_matrix(z, 0.3)
    assert np.allclose(M.sum(axis=0), 1.0, atol=1e-12)
    assert np.array_equal(smoothing_matrix(z, dz / 20), np.eye(512))
    assert np.max(np.abs(smoothing_matrix(z, dz / 8) - np.eye(512))) < 1e-12  # -> I as sigma -> 0 (e^-32)
    s = sig = 0.5
    p = np.exp(-(z**2) / (2 * s**2))
    p /= p.sum()
    q = np.exp(-(z**2) / (2 * (s**2 + sig**2)))
    q /= q.sum()
    assert np.abs(smoothing_matrix(z, sig) @ p - q).sum() < 1e-3
    assert np.allclose(np.exp(log_smooth_grid(np.log(p), z, sig)), smoothing_matrix(z, sig) @ p, atol=1e-15)
