"""The spherical K-means mesh: nodes on the unit sphere and wet, spherical-Delaunay edge counts, no
land crossings on great-circle arcs, connectivity, date-line edges, no cap 'lid' chords, model on it."""

import numpy as np
import pytest
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from neurips26.njord.mesh import _Sphere, build_mesh, lonlat_to_xyz, spherical_kmeans_mesh, xyz_to_lonlat
from neurips26.njord.models import Njord

LAT = np.arange(-86.25, 90, 7.5)  # 24 rows
LON = np.arange(-176.25, 180, 7.5)  # 48 columns, periodic


def continent_mask():
    """Ocean everywhere but one meridional continent (lon 0-37.5, lat -60..60): edges must go round it."""
    la, lo = np.meshgrid(LAT, LON, indexing="ij")
    return ~((lo > 0) & (lo < 37.5) & (np.abs(la) < 60))


@pytest.fixture(scope="module")
def sm():
    return spherical_kmeans_mesh(continent_mask(), LAT, LON, r1=6.0, r=4.0, levels=3)


def _undirected(e):
    return {(min(a, b), max(a, b)) for a, b in e.T}


def test_nodes_on_sphere_and_wet(sm):
    geo = _Sphere(continent_mask(), LAT, LON)
    assert sm.info["land_nodes"] == 0 and sm.info["geometry"] == "sphere"
    for pos in sm.levels:
        np.testing.assert_allclose(np.linalg.norm(pos, axis=1), 1.0, atol=1e-12)
        assert not any(geo.on_land(p) for p in pos)
    assert all(a > b for a, b in zip(sm.sizes[:-1], sm.sizes[1:]))


def test_edges_avoid_land_and_levels_connect(sm):
    geo = _Sphere(continent_mask(), LAT, LON)
    for lvl, (pos, e, rep) in enumerate(zip(sm.levels, sm.m2m, sm.repair)):
        n = len(pos)
        adj = coo_matrix((np.ones(e.shape[1]), (e[0], e[1])), shape=(n, n))
        assert connected_components(adj, directed=False)[0] == 1
        lcm = sm.info["land_cross"][lvl]
        for k in np.nonzero(~rep)[0]:
            assert geo.land(pos[e[0, k]], pos[e[1, k]]) < lcm
    # the continent is really in the way: some level-1 spherical Delaunay edge crossed it and was removed
    pos = sm.levels[0]
    full = geo.candidates(pos)
    assert len(full) > len(_undirected(sm.m2m[0][:, ~sm.repair[0]]))
    assert any(geo.land(pos[a], pos[b]) >= 2 for a, b in full)
    deg = np.bincount(sm.m2g[1], minlength=len(sm.grid_pos))
    assert deg.min() >= 1 and deg.max() <= 4


def test_all_ocean_sphere_is_a_triangulation_across_the_date_line():
    """On an all-ocean sphere the level-1 graph is a full spherical triangulation: 3n - 6 edges (Euler),
    none removed or repaired, and edges cross the date line (no seam) while staying short."""
    m = spherical_kmeans_mesh(np.ones((len(LAT), len(LON)), bool), LAT, LON, r1=8.0, r=4.0, levels=2)
    n = m.sizes[0]
    und = _undirected(m.m2m[0])
    assert len(und) == 3 * n - 6 and m.info["repair_edges"] == 0
    lat, lon = xyz_to_lonlat(m.levels[0])
    geo = _Sphere(np.ones((len(LAT), len(LON)), bool), LAT, LON)
    lengths = np.array([geo.dist(m.levels[0][a], m.levels[0][b]) for a, b in und])
    seam = [(a, b) for a, b in und if lon[a] * lon[b] < 0 and abs(lon[a]) > 150 and abs(lon[b]) > 150]
    assert seam and max(geo.dist(m.levels[0][a], m.levels[0][b]) for a, b in seam) < 3 * np.median(lengths)
    assert lengths.max() < 4 * np.median(lengths)


def test_regional_cap_has_no_lid_chords():
    """A regional lat/lon patch: its convex hull has flat 'lid' facets spanning the patch; they are not
    spherical Delaunay facets and must not become edges."""
    lat, lon = np.arange(40.25, 70, 0.5), np.arange(0.25, 30, 0.5)
    mask = np.ones((len(lat), len(lon)), bool)
    m = spherical_kmeans_mesh(mask, lat, lon, r1=9.0, r=4.0, levels=2, area_weights=True)
    assert not m.info["periodic"]
    geo = _Sphere(mask, lat, lon)
    pos = m.levels[0]
    tri = lambda f: {(min(a, b), max(a, b)) for s in f for a, b in ((s[0], s[1]), (s[1], s[2]), (s[0], s[2]))}
    lid_only = tri(geo.facets(pos, lid=True)) - tri(geo.facets(pos))
    assert lid_only  # the raw hull of a patch has chords across it ...
    assert not lid_only & _undirected(m.m2m[0])  # ... and none is an edge
    # an arc leaving the grid counts its outside cells as land: a chord between two corners of the
    # poleward edge (the great circle bulges north of the parallel) crosses many
    j = len(lat) - 1
    p, q = lonlat_to_xyz(lat[j], lon[0]), lonlat_to_xyz(lat[j], lon[-1])
    assert geo.land(p, q) >= 2
    # area weights: clusters smaller in latitude where cos(phi) is larger (more weight per cell)
    la = xyz_to_lonlat(m.levels[0])[0]
    assert (la < 55).sum() > (la > 55).sum()


def test_same_seed_same_hash_and_bad_input(sm):
    assert spherical_kmeans_mesh(continent_mask(), LAT, LON, r1=6.0, r=4.0, levels=3).hash() == sm.hash()
    with pytest.raises(ValueError, match="mask shape"):
        spherical_kmeans_mesh(continent_mask()[:, :10], LAT, LON)
    with pytest.raises(ValueError, match="lat"):
        spherical_kmeans_mesh(continent_mask(), LAT * 2, LON)
    with pytest.raises(ValueError, match="no wet"):
        spherical_kmeans_mesh(np.zeros((len(LAT), len(LON)), bool), LAT, LON)
    two = np.ones((len(LAT), len(LON)), bool)
    two[10:12] = False  # a land belt round the globe: two basins
    with pytest.raises(ValueError, match="basins"):
        spherical_kmeans_mesh(two, LAT, LON)
    assert build_mesh("spherical", two, lat=LAT, lon=LON, allow_multi_basin=True).kind == "spherical"


def test_lonlat_round_trip():
    la, lo = np.meshgrid(LAT, LON, indexing="ij")
    back = xyz_to_lonlat(lonlat_to_xyz(la, lo))
    np.testing.assert_allclose(back[0], la, atol=1e-10)
    np.testing.assert_allclose(back[1], lo, atol=1e-10)


def test_njord_runs_on_the_spherical_mesh(sm):
    N = len(sm.grid_pos)
    torch.manual_seed(0)
    m = Njord(sm, 4, 3, np.zeros((N, 2), np.float32), np.zeros(4), np.ones(4), d_h=8).eval()
    assert m.gt.feats["m2m0"].shape[1] == 4 and m.gt.node_feats[0].shape[1] == 3
    x = torch.randn(2, N, 4)
    out = m.rollout(x, x, torch.zeros(2, 2, N, 3), members=3)
    assert out.shape == (3, 2, 2, N, 4) and torch.isfinite(out).all()
    assert out.std(0).mean() > 0
