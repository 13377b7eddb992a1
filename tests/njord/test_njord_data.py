import numpy as np
import pytest

from neurips26.njord.baselines import Climatology, persistence
from neurips26.njord.data import from_xarray, pseudo_observations, to_grid, to_nodes, to_xarray, to_zarr


def test_nodes_grid_roundtrip_and_mask_shape(small_ds):
    raw, ds = small_ds
    f = raw["fields"][0, :2].astype(float)
    nodes = to_nodes(f, ds.mask)
    np.testing.assert_array_equal(to_grid(nodes, ds.mask)[:, ds.mask], f[:, ds.mask])
    with pytest.raises(ValueError, match="mask shape"):
        to_nodes(f, ds.mask[:-1])


def test_normalisation_stats(small_ds):
    _, ds = small_ds
    tr = ds.x[:, ds.train]
    np.testing.assert_allclose(tr.mean((0, 1, 2)), 0, atol=1e-4)
    np.testing.assert_allclose(tr.std((0, 1, 2)), 1, atol=1e-3)
    np.testing.assert_allclose(np.diff(tr, axis=1).std((0, 1, 2)), ds.norm.diff_std, rtol=1e-3)


def test_xarray_zarr_roundtrip(small_ds, tmp_path):
    pytest.importorskip("xarray")
    pytest.importorskip("zarr")
    import xarray as xr

    _, ds = small_ds
    to_zarr(ds, tmp_path / "d.zarr")
    back = xr.open_zarr(str(tmp_path / "d.zarr"))
    raw = from_xarray(back.isel(trajectory=0))
    np.testing.assert_array_equal(raw["mask"], ds.mask)
    np.testing.assert_allclose(
        to_nodes(raw["fields"][0], ds.mask), ds.norm.inverse(ds.x[0]), rtol=1e-5, atol=1e-5
    )
    assert set(to_xarray(ds).data_vars) >= {"ssh", "u", "v", "T"}


def test_pseudo_observations_seeded_and_sparse(rng):
    truth = rng.normal(size=(5, 200, 4))
    i1, v1 = pseudo_observations(truth, np.ones(4), seed=3)
    i2, v2 = pseudo_observations(truth, np.ones(4), seed=3)
    assert i1.shape == (5, 10) and v1.shape == (5, 10, 2)
    np.testing.assert_array_equal(v1, v2)
    err = v1 - truth[np.arange(5)[:, None], i1][..., [0, 3]]
    assert 0.05 < err.std() < 0.15  # noise 0.1 x climatological std


def test_baselines(rng):
    x = rng.normal(size=(2, 30, 7, 4))
    p = persistence(x[0, :3], 4)
    assert p.shape == (3, 4, 7, 4) and np.all(p[:, 3] == x[0, :3])
    c = Climatology(x, np.arange(30.0))
    np.testing.assert_allclose(c.predict([40.0])[0], x.mean((0, 1)))
    e = c.ensemble([40.0, 41.0], 5, seed=0)
    assert e.shape == (5, 2, 7, 4) and e.std(0).mean() > 0
    with pytest.raises(ValueError, match="leads"):
        persistence(x[0], 0)
