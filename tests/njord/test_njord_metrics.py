import math
import warnings

import numpy as np
import pytest
import torch

from neurips26.njord.metrics import (
    crps_fair,
    crps_sorted,
    crps_standard,
    rank_histogram,
    rmse_ensmean,
    spread,
    ssr,
)


def test_m1_is_mae_with_warning(rng):
    ens, y = rng.normal(size=(1, 50)), rng.normal(size=50)
    with pytest.warns(UserWarning, match="MAE"):
        c = crps_fair(ens, y)
    np.testing.assert_allclose(c, np.abs(ens[0] - y))
    np.testing.assert_allclose(crps_standard(ens, y), np.abs(ens[0] - y))


def test_sorted_equals_pairwise(rng):
    ens, y = rng.normal(size=(7, 30, 4)), rng.normal(size=(30, 4))
    np.testing.assert_allclose(crps_sorted(ens, y, fair=True), crps_fair(ens, y), atol=1e-6)
    np.testing.assert_allclose(crps_sorted(ens, y, fair=False), crps_standard(ens, y), atol=1e-6)
    t = torch.tensor(ens)
    np.testing.assert_allclose(crps_sorted(t, torch.tensor(y)).numpy(), crps_fair(ens, y), atol=1e-6)


def test_standard_matches_properscoring(rng):
    ps = pytest.importorskip("properscoring")
    ens, y = rng.normal(size=(9, 200)), rng.normal(size=200)
    np.testing.assert_allclose(crps_standard(ens, y), ps.crps_ensemble(y, ens.T), atol=1e-6)


def test_fair_unbiased_standard_biased(rng):
    n = 200_000
    y, x = rng.normal(size=n), rng.normal(size=(2, n))
    fair = crps_fair(x, y).mean()
    assert abs(fair - 1 / math.sqrt(math.pi)) < 0.01 / math.sqrt(math.pi)
    std = crps_standard(x, y).mean()
    assert abs(std - 1.5 / math.sqrt(math.pi)) < 0.01  # 0.846, biased high


def test_ssr_calibrated_ensemble(rng):
    sigma = rng.uniform(0.5, 2.0, size=10_000)
    draws = rng.normal(size=(11, 10_000)) * sigma
    ens, y = draws[:10], draws[10]
    assert abs(ssr(ens, y) - 1) < 0.03
    assert ssr(ens, y, corrected=False) < ssr(ens, y)


def test_spread_zero_for_copies_and_rmse(rng):
    x = rng.normal(size=(1, 20))
    assert spread(np.repeat(x, 8, 0)) == 0.0
    assert rmse_ensmean(np.zeros((3, 4)), np.ones(4)) == 1.0


def test_rank_histogram_flat_for_exchangeable(rng):
    d = rng.normal(size=(9, 50_000))
    h = rank_histogram(d[:8], d[8])
    assert h.sum() == 50_000 and len(h) == 9
    assert np.abs(h / h.mean() - 1).max() < 0.06


def test_bad_ensemble_size():
    with pytest.raises(ValueError, match="ensemble size"), warnings.catch_warnings():
        crps_fair(np.zeros((0, 3)), np.zeros(3))
