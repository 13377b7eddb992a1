import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from neurips26.njord.mesh import build_mesh, kmeans_mesh, land_cells_on_segment, rectangular_mesh
from neurips26.njord.simulator import make_mask

MASK = make_mask(24, 0)


@pytest.fixture(scope="module")
def km():
    return kmeans_mesh(MASK, r1=8.0, r=4.0, levels=3)


def _check_invariants(m, strict_m2g=True):
    N = int(MASK.sum())
    for pos in m.levels:
        assert MASK[pos[:, 1].astype(int), pos[:, 0].astype(int)].all()
    assert all(a > b for a, b in zip(m.sizes[:-1], m.sizes[1:]))
    assert set(np.unique(m.g2m[0])) == set(range(N))
    deg = np.bincount(m.m2g[1], minlength=N)
    assert deg.min() >= 1 and deg.max() <= 4 and (deg == 4).mean() > 0.9
    for lvl, (pos, e, rep) in enumerate(zip(m.levels, m.m2m, m.repair)):
        n = len(pos)
        if n > 1:
            adj = coo_matrix((np.ones(e.shape[1]), (e[0], e[1])), shape=(n, n))
            assert connected_components(adj, directed=False)[0] == 1
        lcm = m.info["land_cross"][lvl]
        for k in np.nonzero(~rep)[0]:
            assert land_cells_on_segment(MASK, pos[e[0, k]], pos[e[1, k]]) < lcm
    for lvl in range(len(m.levels) - 1):
        assert np.bincount(m.down[lvl][1], minlength=m.sizes[lvl]).max() == 1  # one parent each


def test_kmeans_invariants(km):
    assert km.info["land_nodes"] == 0
    _check_invariants(km)


def test_same_seed_same_hash(km):
    assert kmeans_mesh(MASK, r1=8.0, r=4.0, levels=3).hash() == km.hash()


def test_rectangular_matched_and_invariant(km):
    rm = rectangular_mesh(MASK, km.sizes)
    _check_invariants(rm)
    for a, b in zip(rm.sizes, km.sizes):
        assert abs(a - b) <= max(2, 0.25 * b)


def test_bad_inputs():
    with pytest.raises(ValueError, match="k_1"):
        kmeans_mesh(MASK, sizes=[int(MASK.sum()), 3])
    with pytest.raises(ValueError, match="strictly decreasing"):
        kmeans_mesh(MASK, sizes=[20, 20])
    with pytest.raises(ValueError, match="kind"):
        build_mesh("icosahedral", MASK)
    with pytest.raises(ValueError, match="no wet"):
        kmeans_mesh(np.zeros((10, 10), bool))
