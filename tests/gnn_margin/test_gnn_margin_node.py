"""Node level: smoothing == brute-force Neyman-Pearson (acceptance 8), the margin-Lipschitz certificate
survives exhaustive attack (acceptance 7), attacks, training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neurips26.gnn_margin import families as F
from neurips26.gnn_margin.embeddings import make_embedding, spectral
from neurips26.gnn_margin.graphs import flip_batch, flip_sets
from neurips26.gnn_margin.node_robustness import (
    NodeClassifier,
    brute_force_bounds,
    clopper_pearson_lower,
    empirical_node_radius,
    exhaustive_attack,
    greedy_attack,
    lipschitz_certificate,
    margins,
    smoothing_bounds,
    smoothing_certify,
    smoothing_radius,
)
from neurips26.gnn_margin.training import TrainConfig, train_graph_embedding, train_node_classifier

KARATE, CLUB = F.real_graph("karate")


# ---------------------------------------------------------------------------- acceptance 8
@pytest.mark.parametrize("beta", [0.1, 0.3])
@pytest.mark.parametrize("r", [1, 2, 3])
def test_smoothing_equals_brute_force_neyman_pearson(beta, r):
    for D in (r, 6, 10):
        for p_a in (0.55, 0.8, 0.9, 0.97, 0.99, 0.999):
            ours = smoothing_bounds(p_a, beta, r)
            brute = brute_force_bounds(p_a, beta, r, D)
            np.testing.assert_allclose(ours, brute, atol=1e-10)


def test_smoothing_radius_known_values_and_monotone():
    assert smoothing_radius(0.9, 0.1) == 0
    assert smoothing_radius(0.99, 0.1) == 1
    assert smoothing_radius(0.5, 0.1) == -1
    grid = np.linspace(0.51, 0.99999, 200)
    for beta in (0.1, 0.3):
        radii = [smoothing_radius(float(p), beta) for p in grid]
        assert all(a <= b for a, b in zip(radii, radii[1:]))
    lo, up = smoothing_bounds(0.8, 0.2, 0)
    assert lo == pytest.approx(0.8) and up == pytest.approx(0.2)


def test_clopper_pearson_matches_closed_form():
    # k = n: the one-sided lower bound is alpha^(1/n)
    assert clopper_pearson_lower(1000, 1000, 0.01) == pytest.approx(0.01 ** (1 / 1000))
    assert clopper_pearson_lower(0, 10, 0.01) == 0.0
    assert clopper_pearson_lower(700, 1000, 0.01) < 0.7


def test_smoothing_bad_input():
    clf = NodeClassifier(make_embedding("gcn"), 2)
    with pytest.raises(ValueError, match="n0 must be < n"):
        smoothing_certify(clf, KARATE, n0=100, n=100)
    with pytest.raises(ValueError, match="alpha must be in"):
        smoothing_certify(clf, KARATE, n0=10, n=100, alpha=1.0)
    with pytest.raises(ValueError, match="beta must be in"):
        smoothing_certify(clf, KARATE, beta=0.0)


# ---------------------------------------------------------------------------- acceptance 7 (node level)
def _biased_classifier(seed=0):
    """A GCN classifier whose head bias dominates: large margins for class 0, small Lipschitz head."""
    torch.manual_seed(seed)
    clf = NodeClassifier(make_embedding("gcn", dtype=torch.float64), 2)
    with torch.no_grad():
        clf.head.weight.mul_(0.001)
        clf.head.bias.copy_(torch.tensor([0.5, 0.0]))
    return clf


def test_lipschitz_certificate_non_vacuous_and_survives_exhaustive_attack():
    clf = _biased_classifier()
    y = np.zeros(34, dtype=int)
    cert = lipschitz_certificate(clf, KARATE, y, r_max=2)
    assert (cert >= 1).all()
    assert not exhaustive_attack(clf, KARATE, y, 1).any()
    # and by construction of the bound: the margin change over all single flips is below the budget
    with torch.no_grad():
        m0 = margins(clf(KARATE)[0], y)
        mm = margins(clf(flip_batch(KARATE, flip_sets(561, 1)), validate=False), y)
    W = clf.head.weight.detach()
    assert (
        float((mm - m0).abs().max()) <= float((W[0] - W[1]).norm()) * clf.embedding.node_bounds(KARATE, 1)[-1]
    )


def test_certified_nodes_of_a_trained_net_survive_all_single_flips():
    torch.manual_seed(0)
    clf = NodeClassifier(make_embedding("gcn", dtype=torch.float64), 2)
    train = np.array([0, 1, 2, 3, 33, 32, 31, 30])
    train_node_classifier(clf, KARATE, CLUB, train, "margin", TrainConfig(steps=60))
    cert = lipschitz_certificate(clf, KARATE, CLUB, r_max=1)
    emp = empirical_node_radius(clf, KARATE, CLUB, r_exhaustive=1, greedy_budget=1)
    assert (np.minimum(cert, 1) <= emp).all()
    assert ((cert >= 0) == (emp >= 0)).all()  # both say "correct" exactly for the correct nodes


def test_smoothing_certify_shapes_and_constant_classifier():
    clf = _biased_classifier()
    out = smoothing_certify(clf, KARATE, beta=0.1, n0=20, n=200, seed=0)
    assert (out["pred"] == 0).all()
    np.testing.assert_allclose(out["p_a"], clopper_pearson_lower(200, 200, 0.01))
    assert (out["radius"] == smoothing_radius(float(out["p_a"][0]), 0.1)).all()


def test_attacks_upper_bound_and_budget_errors():
    torch.manual_seed(1)
    clf = NodeClassifier(make_embedding("gin", dtype=torch.float64), 2)
    y = CLUB
    r1 = exhaustive_attack(clf, KARATE, y, 1)
    emp = empirical_node_radius(clf, KARATE, y, r_exhaustive=1, greedy_budget=2, nodes=np.arange(5))
    with torch.no_grad():
        wrong = margins(clf(KARATE)[0], y).numpy() <= 0
    assert (emp[wrong[:5]] == -1).all()
    assert ((emp == 0) == (r1[:5] & ~wrong[:5])).all()
    assert greedy_attack(clf, KARATE, y, 0, 1) in (1, 2)
    with pytest.raises(ValueError, match="C\\(n,2\\) <= 600"):
        exhaustive_attack(clf, F.sbm_graph(seed=0)[0], np.zeros(120, dtype=int), 2)


# ---------------------------------------------------------------------------- training
def test_graph_training_objectives_reduce_loss_and_spectral_norm_applies():
    cb = F.codebook(6, 4)
    for objective in ("ce", "ce_aug", "contrastive"):
        torch.manual_seed(0)
        f = make_embedding("gin")
        h = train_graph_embedding(f, cb, objective, TrainConfig(steps=30), seed=0)
        assert h["loss_last"] < h["loss_first"], objective
    assert all(abs(k - 1) < 0.3 for k in f.kappas())  # three spectrally normalised weights per product
    assert spectral(f.layers[0].mlp[0].weight) == pytest.approx(
        f.kappas()[0] / spectral(f.layers[0].mlp[2].weight)
    )
    with pytest.raises(ValueError, match="objective must be one of"):
        train_graph_embedding(f, cb, "mse")
    with pytest.raises(ValueError, match="lipschitz must be one of"):
        TrainConfig(lipschitz="clip")


def test_penalty_lowers_spectral_norms():
    cb = F.codebook(6, 4)
    torch.manual_seed(0)
    a = make_embedding("gcn")
    train_graph_embedding(a, cb, "contrastive", TrainConfig(steps=40, lipschitz="none"))
    torch.manual_seed(0)
    b = make_embedding("gcn")
    train_graph_embedding(b, cb, "contrastive", TrainConfig(steps=40, lipschitz="penalty", penalty=10.0))
    assert max(b.kappas()) < max(a.kappas())
