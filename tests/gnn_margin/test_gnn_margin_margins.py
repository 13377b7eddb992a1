"""Margins, alignment, the radius algebra and certificate soundness at graph level (acceptance 7)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from neurips26.gnn_margin import families as F
from neurips26.gnn_margin.embeddings import apply_spectral_norm, make_embedding
from neurips26.gnn_margin.flip_distance import flip_distance
from neurips26.gnn_margin.graphs import flip_batch, flip_sets
from neurips26.gnn_margin.margins import (
    ExhaustivePerturbations,
    NoisySamples,
    alignment_lower_bound,
    alignment_margins,
    certified_radius,
    embedding_margin,
    identifiable,
    is_noisy_expressive,
    lipschitz_hat,
    normalised_margin,
    parallel_empirical_radius,
    radii,
    spearman,
)
from neurips26.gnn_margin.wl import WLHistogram

CB4 = F.codebook(6, 4)


class Lookup(torch.nn.Module):
    """A toy embedding: a fixed vector per graph (by edge count), with beta = L * r."""

    def __init__(self, table, L=1.0):
        super().__init__()
        self.table, self.L = table, L

    def forward(self, A, validate=True):
        A = np.asarray(A)
        A = A[None] if A.ndim == 2 else A
        return torch.tensor([self.table[int(a.sum()) // 2] for a in A], dtype=torch.float64)

    def graph_bound(self, A, r, A_perturbed=None):
        return self.L * r


def _distinct_edge_counts(k):
    out, seen = [], set()
    for A in F.atlas_graphs(4):
        e = int(A.sum()) // 2
        if e not in seen:
            seen.add(e)
            out.append(A)
    return out[:k]


def test_margin_and_alignment_known_values():
    e = torch.tensor([[0.0, 0.0], [3.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    a = alignment_margins(torch.tensor([[0.5, 0.0]], dtype=torch.float64), e, np.array([0]))
    assert a[0] == pytest.approx(min(2.5, math.hypot(0.5, 1)) - 0.5)
    a = alignment_margins(torch.tensor([[0.0, 0.9]], dtype=torch.float64), e, np.array([0]))
    assert a[0] < 0  # closer to graph 2 than to its source
    fam = _distinct_edge_counts(3)
    edges = [int(A.sum()) // 2 for A in fam]
    f = Lookup({edges[0]: [0.0, 0.0], edges[1]: [3.0, 0.0], edges[2]: [0.0, 1.0]})
    np.testing.assert_allclose(embedding_margin(f, fam), [0.5, 1.5, 0.5])


def test_radius_algebra_closed_form():
    A = CB4[0]
    for gamma, L in [(0.5, 0.2), (1.0, 0.25), (0.3, 1.0), (2.0, 0.7)]:
        f = Lookup({}, L)
        assert certified_radius(f, A, gamma) == math.ceil(gamma / L) - 1
    assert certified_radius(Lookup({}, 1.0), A, 0.0) == -1
    assert certified_radius(Lookup({}, 0.01), A, 1.0, r_max=5) == 5
    assert alignment_lower_bound(2, 6, 0.05) == pytest.approx(stats.binom.cdf(2, 15, 0.05))
    assert alignment_lower_bound(-1, 6, 0.05) == 0.0
    assert alignment_lower_bound(0, 6, 0.0) == 1.0


def test_isomorphism_limit_margin():
    """r = 0: aligned for every G <=> all embeddings distinct <=> gamma(family) > 0."""
    torch.manual_seed(0)
    f = make_embedding("gin", dtype=torch.float64)
    G, H = F.wl_equivalent_pairs()[1][1:]  # C8 vs 2 C4
    fam = [G, H, F.csl_graph(3, 8)]
    g = embedding_margin(f, fam)
    assert g[0] == 0 and g[1] == 0 and g[2] > 0
    r_emp, _ = ExhaustivePerturbations.build(CB4, 0).empirical_radius(f)
    assert ((r_emp >= 0) == (embedding_margin(f, CB4) > 0)).all()
    fr = make_embedding("gin", features="rwse", dtype=torch.float64)
    assert embedding_margin(fr, fam).min() > 0


def test_identifiability_exact_rule():
    fam = np.stack(CB4)
    pert = flip_batch(fam[0], flip_sets(15, 1))
    ok = identifiable(pert, np.zeros(15, dtype=int), fam)
    assert ok.all()  # d_min = 4: every single flip (|F| < 2) is identifiable
    for k in (0, 5, 10):
        pert2 = flip_batch(fam[k], flip_sets(15, 2)[::7])
        ok2 = identifiable(pert2, np.full(len(pert2), k), fam)
        for G, ok in zip(pert2, ok2):
            d = [flip_distance(G, H) for H in fam]
            assert ok == (d[k] < min(d[:k] + d[k + 1 :]))
    P = ExhaustivePerturbations.build(CB4, 2)
    assert 0 < P.ident[P.size == 2].sum() < (P.size == 2).sum()


@pytest.mark.parametrize("arch", ["gin", "gcn", "sage", "wl"])
def test_certificate_soundness_exhaustive(arch):
    """Every |F| <= r*(G) is aligned: min(r*, r_max) <= r_emp on the d_min = 4 codebook."""
    torch.manual_seed(0)
    if arch == "wl":
        f = WLHistogram(3)
    else:
        f = apply_spectral_norm(
            make_embedding(
                arch, features="degree_onehot" if arch == "sage" else "const", n_max=6, dtype=torch.float64
            )
        ).eval()
    P = ExhaustivePerturbations.build(CB4, 2)
    r_emp, _ = P.empirical_radius(f)
    R = radii(f, CB4, r_max=15)
    assert (np.minimum(R["r_star"], 2) <= r_emp).all()


def test_certificate_non_vacuous_case_verified_by_search():
    """A bound-friendly toy: beta = L r small, so r* > 0; exhaustive search confirms it."""
    fam = _distinct_edge_counts(4)[::3]
    edges = [int(A.sum()) // 2 for A in fam]
    table = {e: [float(e), 0.0] for e in range(7)}
    f = Lookup(table, L=1.0)  # |Delta f| = |Delta edges| <= r: exactly Lipschitz 1 in r
    gamma = embedding_margin(f, fam)
    assert gamma[0] == 0.5 * abs(edges[0] - edges[1])
    r_star = [certified_radius(f, A, float(g), 6) for A, g in zip(fam, gamma)]
    r_emp, _ = ExhaustivePerturbations.build(fam, 3).empirical_radius(f)
    assert all(min(rs, 3) <= re for rs, re in zip(r_star, r_emp))


def test_lipschitz_hat_and_normalised_margin():
    torch.manual_seed(0)
    f = make_embedding("gin", dtype=torch.float64)
    A = CB4[3]
    L = lipschitz_hat(f, A)
    pert = flip_batch(A, flip_sets(15, 1))
    manual = float((f(pert) - f(A)).norm(dim=-1).max())
    assert L == pytest.approx(manual)
    assert L <= f.graph_bound(A, 1)
    nm = normalised_margin(f, CB4)
    np.testing.assert_allclose(nm * np.array([lipschitz_hat(f, B) for B in CB4]), embedding_margin(f, CB4))


def test_alignment_probability_and_binomial_bound():
    torch.manual_seed(0)
    f = make_embedding("gin", dtype=torch.float64)
    N = NoisySamples.draw(CB4, 0.05, 100, seed=0)
    out = N.alignment_probability(f)
    assert out["alpha"].shape == (11,) and 0 <= out["alpha_min"] <= out["alpha_mean"] <= 1
    N0 = NoisySamples.draw(CB4, 0.0, 5, seed=0)
    al0 = N0.alignment_probability(f)
    np.testing.assert_array_equal(al0["aligned"], (embedding_margin(f, CB4) > 0).astype(float))
    R = radii(f, CB4)
    lb = np.array([alignment_lower_bound(int(r), 6, 0.05) for r in R["r_star"]])
    assert (out["aligned"] >= lb - 3 * np.sqrt(lb * (1 - lb) / 100) - 1e-12).all()


def test_spearman_wrapper():
    assert spearman([1, 2, 3, 4], [2, 4, 6, 9])[0] == pytest.approx(1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3])[0])


def test_bad_family_inputs():
    with pytest.raises(ValueError, match="empty"):
        embedding_margin(make_embedding("gin"), [])
    with pytest.raises(ValueError, match="isomorphic duplicates: graphs 0 and 1"):
        embedding_margin(make_embedding("gin"), [CB4[0], CB4[0]])
    with pytest.raises(ValueError, match="p must be in"):
        NoisySamples.draw(CB4, 1.5)


def test_parallel_radius_search_equals_batched():
    torch.manual_seed(0)
    f = make_embedding("gin", dtype=torch.float64)
    ref, _ = ExhaustivePerturbations.build(CB4, 2).empirical_radius(f)
    np.testing.assert_array_equal(parallel_empirical_radius(f, CB4, 2, backend="serial"), ref)


@pytest.mark.slow
def test_parallel_radius_search_process_pool():
    torch.manual_seed(0)
    f = make_embedding("gin", dtype=torch.float64)
    ref, _ = ExhaustivePerturbations.build(CB4, 2).empirical_radius(f)
    np.testing.assert_array_equal(parallel_empirical_radius(f, CB4, 2, backend="process", workers=2), ref)


def test_noisy_expressivity_generalises_isomorphism():
    torch.manual_seed(0)
    f = make_embedding("gin", dtype=torch.float64)
    cb5 = F.codebook(6, 5)
    gamma = embedding_margin(f, cb5)
    assert is_noisy_expressive(f, cb5, 0) == bool((gamma > 0).all())
    r_emp, _ = ExhaustivePerturbations.build(cb5, 2).empirical_radius(f)
    for r in (1, 2):
        assert is_noisy_expressive(f, cb5, r) == bool((r_emp >= r).all())
    G, H = F.wl_equivalent_pairs()[0][1:]  # C6 vs 2 C3: never expressive, not even at r = 0
    assert not is_noisy_expressive(f, [G, H], 0)
