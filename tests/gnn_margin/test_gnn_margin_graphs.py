"""Graphs, flips, noise channels, the flip distance and its bounds, the families (acceptance 5, 9)."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from neurips26.gnn_margin import families as F
from neurips26.gnn_margin.flip_distance import (
    degree_lower_bound,
    flip_distance,
    flip_distance_matrix,
    lower_bound,
    qap_upper_bound,
    spectral_lower_bound,
)
from neurips26.gnn_margin.graphs import (
    check_adjacency,
    check_budget,
    check_family,
    check_features,
    check_probability,
    flip,
    flip_batch,
    flip_sets,
    noise_masks,
    noisy_graphs,
    to_networkx,
    upper,
)

ATLAS6 = F.atlas_graphs(6)


# ---------------------------------------------------------------------------- bad input
def test_bad_adjacency_named():
    with pytest.raises(ValueError, match="A must be square"):
        check_adjacency(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="symmetric"):
        check_adjacency(np.array([[0, 1], [0, 0]]))
    with pytest.raises(ValueError, match="binary"):
        check_adjacency(np.array([[0, 2], [2, 0]]))
    with pytest.raises(ValueError, match="self loops"):
        check_adjacency(np.eye(3))
    assert check_adjacency(np.eye(3), allow_self_loops=True).sum() == 3
    with pytest.raises(ValueError, match="finite"):
        check_adjacency(np.array([[0, np.nan], [np.nan, 0]]))


def test_bad_features_probability_budget():
    with pytest.raises(ValueError, match="X must be finite"):
        check_features(np.array([[np.nan], [1.0]]), 2)
    with pytest.raises(ValueError, match="one row per node"):
        check_features(np.ones((3, 2)), 4)
    for p in (-0.1, 1.5):
        with pytest.raises(ValueError, match="p must be in"):
            check_probability(p)
    with pytest.raises(ValueError, match="r must be"):
        check_budget(-1, 5)
    with pytest.raises(ValueError, match="r must be"):
        check_budget(11, 5)
    assert check_budget(10, 5) == 10


def test_family_empty_and_duplicates_named():
    with pytest.raises(ValueError, match="empty"):
        check_family([])
    c6 = nx.to_numpy_array(nx.cycle_graph(6), dtype=np.uint8)
    p = np.random.default_rng(0).permutation(6)
    with pytest.raises(ValueError, match="graphs 0 and 2"):
        check_family([c6, ATLAS6[0], c6[np.ix_(p, p)]])
    assert len(check_family([c6, ATLAS6[0], c6[np.ix_(p, p)]], dedupe=True)) == 2


# ---------------------------------------------------------------------------- flips and noise
def test_flip_toggles_pairs_and_batch_agrees():
    A = ATLAS6[10]
    sets = flip_sets(15, 2)
    assert sets.shape == (105, 2)
    batch = flip_batch(A, sets)
    for k in (0, 17, 104):
        np.testing.assert_array_equal(batch[k], flip(A, sets[k]))
        assert np.abs(upper(batch[k]).astype(int) - upper(A)).sum() == 2
    np.testing.assert_array_equal(flip(flip(A, [3, 7]), [7, 3]), A)
    with pytest.raises(ValueError, match="repeat"):
        flip(A, [1, 1])


def test_noise_channel_rates():
    A = F.real_graph("karate")[0]
    m = noise_masks(A, 0.1, 400, rng=0)
    assert abs(m.mean() - 0.1) < 0.005
    edge = upper(A).astype(bool)
    m2 = noise_masks(A, p_add=0.01, p_del=0.5, n_samples=400, rng=1)
    assert abs(m2[:, edge].mean() - 0.5) < 0.02 and abs(m2[:, ~edge].mean() - 0.01) < 0.003
    G = noisy_graphs(A, 0.0, 3, rng=0)
    assert (G == A).all()
    with pytest.raises(ValueError, match="not both"):
        noise_masks(A, 0.1, p_add=0.1, p_del=0.1)


# ---------------------------------------------------------------------------- d_F (acceptance 5)
def test_flip_distance_invariance_symmetry_triangle():
    rng = np.random.default_rng(0)
    for k in range(20):
        A = ATLAS6[k * 5]
        p = rng.permutation(6)
        assert flip_distance(A, A[np.ix_(p, p)]) == 0
    D = flip_distance_matrix(ATLAS6)
    assert (D == D.T).all() and (np.diag(D) == 0).all()
    off = D + np.eye(len(D), dtype=int) * 99
    assert off.min() == 1  # distinct atlas graphs are non-isomorphic
    trip = rng.integers(0, len(ATLAS6), size=(200, 3))
    assert all(D[a, c] <= D[a, b] + D[b, c] for a, b, c in trip)
    # a flip set of size r moves d_F by at most r
    assert flip_distance(ATLAS6[40], flip(ATLAS6[40], [0, 5, 9])) <= 3


def test_bounds_sandwich_exact():
    rng = np.random.default_rng(1)
    for _ in range(25):
        a, b = rng.integers(0, len(ATLAS6), 2)
        G, H = ATLAS6[a], ATLAS6[b]
        exact = flip_distance(G, H)
        assert degree_lower_bound(G, H) <= exact + 1e-9
        assert spectral_lower_bound(G, H) <= exact + 1e-9
        assert lower_bound(G, H) <= exact <= qap_upper_bound(G, H, seeds=(0, 1, 2))


def test_exact_distance_refuses_large_n_and_pads():
    big = np.zeros((9, 9), dtype=np.uint8)
    with pytest.raises(ValueError, match="n <= 8.*lower_bound"):
        flip_distance(big, big)
    # padding: a triangle vs a triangle plus an isolated node
    tri = nx.to_numpy_array(nx.complete_graph(3), dtype=np.uint8)
    assert flip_distance(tri, np.pad(tri, ((0, 1), (0, 1)))) == 0


def test_rook_shrikhande_cospectral_zero_bound():
    R, S = F.rook_4x4(), F.shrikhande()
    assert spectral_lower_bound(R, S) < 1e-9 and degree_lower_bound(R, S) == 0
    assert qap_upper_bound(R, S, seeds=(0,)) > 0


# ---------------------------------------------------------------------------- families (acceptance 9)
def test_atlas_counts_and_codebooks():
    assert [len(F.atlas_graphs(n)) for n in (5, 6)] == [21, 112]
    assert len(F.atlas_graphs(6, connected=False)) == 156
    for d_min, size in zip((2, 3, 4, 5), (57, 16, 11, 5)):
        cb = F.codebook(6, d_min)
        assert len(cb) == size
        D = flip_distance_matrix(cb)
        assert (D + np.eye(size, dtype=int) * 99).min() >= d_min
        assert F.separation(cb).min() >= d_min
    assert [F.r_comb(d) for d in (2, 3, 4, 5)] == [0, 1, 1, 2]


def test_wl_equivalent_pairs_are_wl_equal_not_isomorphic():
    for name, G, H in F.wl_equivalent_pairs(seed=0):
        g, h = to_networkx(G), to_networkx(H)
        assert not nx.is_isomorphic(g, h), name
        assert nx.weisfeiler_lehman_graph_hash(g, iterations=4) == nx.weisfeiler_lehman_graph_hash(
            h, iterations=4
        )
    dec, bic = F.decalin(), F.bicyclopentyl()
    assert dec.shape == (10, 10) and dec.sum() // 2 == 11 and bic.sum() // 2 == 11
    R = F.rook_4x4()
    assert R.sum(0).tolist() == [6] * 16 and R.sum() // 2 == 48


def test_csl_and_real_graphs():
    reps, lab = F.csl_graphs()
    assert len(reps) == 10 and all(A.sum(0).tolist() == [4] * 41 for A in reps)
    assert len(check_family(reps)) == 10
    rel, lab = F.csl_graphs(relabelings=2, seed=0)
    assert len(rel) == 20 and nx.is_isomorphic(to_networkx(rel[0]), to_networkx(reps[0]))
    A, y = F.real_graph("karate")
    assert A.shape == (34, 34) and A.sum() // 2 == 78 and set(y.tolist()) == {0, 1}
    assert F.real_graph("les_miserables")[0].sum() // 2 == 254
    assert F.real_graph("florentine_families")[0].sum() // 2 == 20
    assert F.real_graph("davis_southern_women")[0].sum() // 2 == 89
    S, yb = F.sbm_graph(seed=0)
    assert S.shape == (120, 120) and np.bincount(yb).tolist() == [40, 40, 40]
    with pytest.raises(ValueError, match="name must be one of"):
        F.real_graph("cora")


def test_random_family_certified_separation():
    fam = F.random_family(n=10, p=0.3, d_min=4, size=6, max_draws=300, seed=0)
    assert 1 <= len(fam) <= 6
    for a in range(len(fam)):
        for b in range(a + 1, len(fam)):
            assert lower_bound(fam[a], fam[b]) >= 4
    assert math.comb(34, 2) == 561
