"""NIQE with the basicsr 1.4.2 pristine parameters (skips when the verified sdist is not available)."""

import numpy as np
import pytest
import torch

from neurips26.harness.cache import cache_dir
from neurips26.smfsr.data import load_image
from neurips26.smfsr.niqe import BASICSR_SDIST, aggd_fit, load_pristine_params, niqe


@pytest.fixture(scope="module")
def params():
    path = cache_dir("smfsr") / "sdist" / BASICSR_SDIST
    if not path.exists():
        pytest.skip(f"{path} not present (offline); neurips26.smfsr.niqe.fetch_sdist() fetches it once")
    return load_pristine_params(path)


def test_params_shapes(params):
    assert params["mu"].shape == (36,) and params["cov"].shape == (36, 36)
    assert params["window"].shape == (7, 7)
    assert abs(params["window"].sum() - 1) < 1e-6


def test_niqe_orders_clean_blurred_noisy(params):
    x = torch.from_numpy(load_image("astronaut", 3)[:256, :256].transpose(2, 0, 1).copy())
    clean = niqe(x, params)
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(0))
    noisy = niqe((x + 0.08 * noise).clamp(0, 1), params)
    small = torch.nn.functional.interpolate(x[None], scale_factor=0.25, mode="bicubic", antialias=True)
    blurred = niqe(torch.nn.functional.interpolate(small, scale_factor=4, mode="bicubic").clamp(0, 1), params)
    assert clean < blurred and clean < noisy


def test_aggd_fit_recovers_gaussian_shape():
    x = np.random.default_rng(0).normal(0, 2.0, 200000)
    alpha, bl, br = aggd_fit(x)
    beta = 2.0 * np.sqrt(2.0)  # sigma sqrt(Gamma(1/2) / Gamma(3/2)) for alpha = 2
    assert abs(alpha - 2.0) < 0.05 and abs(bl - beta) < 0.05 and abs(br - beta) < 0.05


def test_bad_input(params, tmp_path):
    with pytest.raises(ValueError, match="at least 192"):
        niqe(torch.rand(1, 1, 64, 64), params)
    with pytest.raises(FileNotFoundError, match="missing.tar.gz"):
        load_pristine_params(tmp_path / "missing.tar.gz")
