import numpy as np
import pytest

from neurips26.njord.simulator import OceanConfig, ShallowWater, check_mask, make_mask


def test_mask_recipe():
    m = make_mask(32, 0)
    assert m.sum() == 715  # spec: 715 wet cells with default_rng(0)
    assert not m[0].any() and not m[:, -1].any()


def test_bad_masks():
    with pytest.raises(ValueError, match="no wet cells"):
        check_mask(np.zeros((8, 8), bool))
    m = np.zeros((8, 8), bool)
    m[1:3, 1:3] = m[5:7, 5:7] = True
    with pytest.raises(ValueError, match="basins"):
        check_mask(m)
    assert check_mask(m, allow_multi_basin=True).sum() == 8


@pytest.mark.parametrize("namp", [0.0, 0.075])
def test_mass_conservation_and_land_faces(namp):
    cfg = OceanConfig(n=16, dx=60e3)
    sim = ShallowWater(cfg)
    rng = np.random.default_rng(0)
    s = sim.rest_state(2, rng)
    s = sim.run_days(s, 0.0, 5, rng, namp)
    total = (s["eta"] * sim.wet).sum((1, 2))
    tol = 1e-9 * max(np.abs(s["eta"] * sim.wet).sum(), 1e-3 * sim.mask.sum())
    assert np.abs(total).max() < tol
    assert np.all(s["u"][:, sim.umask == 0] == 0) and np.all(s["v"][:, sim.vmask == 0] == 0)
    assert np.all(s["eta"][:, ~sim.mask] == 0)
    assert np.abs(s["u"]).max() > 0  # the wind drives a circulation


def test_dt_rule():
    assert OceanConfig(dx=30e3).steps_per_day == 23  # spec review: 23 steps per day at 30 km


@pytest.mark.slow
def test_stable_365_days_quick_settings():
    sim = ShallowWater(OceanConfig())
    rng = np.random.default_rng(0)
    s = sim.run_days(sim.rest_state(1, rng), 0.0, 365, rng, 0.075)
    assert all(np.isfinite(s[k]).all() for k in ("eta", "u", "v", "T"))
