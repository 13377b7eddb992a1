"""Gallery geometry, thresholds, capacity, v-LFW and ArcFace pieces (acceptance checks 1, 2, 6, 7, 9, 11)."""

import math

import numpy as np
import pytest
import torch

from neurips26.bip import (ArcFaceHead, Subspace, as_unit, cap_fraction, collisions, impostor_scores, margin,
                           maxcos, maxcos_faiss, packing_bounds, pca_report, synthetic_gallery, tau_far,
                           ten_fold_accuracy, within_spread, log10_ellipsoid_ratio)


def _unit(n, d, seed):
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed))
    return x / x.norm(dim=1, keepdim=True)


def test_check1_faiss_flat_equals_brute_force():
    pytest.importorskip("faiss")
    q, r = _unit(2000, 64, 0), _unit(5000, 64, 1)
    assert float((maxcos_faiss(q, r) - maxcos(q, r)).abs().max()) < 1e-6


def test_check2_tau_far_on_uniform_vectors():
    far = 1e-3
    g = torch.Generator().manual_seed(0)
    a, b = _unit(100_000, 16, 2), _unit(100_000, 16, 3)
    tau = tau_far((a * b).sum(1), far)
    fa, fb = _unit(1_000_000, 16, 4), _unit(1_000_000, 16, 5)
    emp = float(((fa * fb).sum(1) > tau).double().mean())
    assert abs(emp - far) < 3e-4
    del g


def test_tau_far_refuses_to_extrapolate_and_validates_far():
    s = torch.randn(5000)
    with pytest.raises(ValueError, match="extrapolate"):
        tau_far(s, 1e-3)                      # 5 pairs above
    for bad in (0.0, 0.5, -0.1):
        with pytest.raises(ValueError, match="far"):
            tau_far(s, bad)


def test_exact_impostor_scores_count_all_pairs():
    R, _ = synthetic_gallery(50, seed=0)
    s = impostor_scores(R)
    assert s.numel() == 50 * 49 // 2
    full = R @ R.T
    iu = torch.triu_indices(50, 50, 1)
    assert torch.allclose(s.sort().values, full[iu[0], iu[1]].sort().values)


def test_gallery_a_matches_the_prototype_threshold():
    R, _ = synthetic_gallery(2000, seed=0)
    s = impostor_scores(R)
    assert abs(float(s.mean())) < 0.01 and abs(float(s.std()) - 0.21) < 0.01
    assert 0.66 < tau_far(s, 1e-4) < 0.70


def test_check6_cap_fraction():
    assert cap_fraction(3, math.pi / 2) == pytest.approx(0.5, abs=1e-12)
    assert cap_fraction(3, 0.3) == pytest.approx((1 - math.cos(0.3)) / 2, rel=1e-10)    # Archimedes
    th = np.linspace(0, math.pi, 50)
    vals = [cap_fraction(7, t) for t in th]
    assert np.all(np.diff(vals) >= 0) and vals[-1] == pytest.approx(1.0)
    assert cap_fraction(5, 0.6) == pytest.approx(0.02155, abs=1e-5)
    x = _unit(1_000_000, 5, 7)
    mc = float((x[:, 0] >= math.cos(0.6)).double().mean())
    assert abs(mc - cap_fraction(5, 0.6)) / cap_fraction(5, 0.6) < 0.05


def test_packing_bounds_reviewer_values():
    b = packing_bounds(32, 3000, 0.68, math.acos(0.63))
    assert 2.0e4 < b["lower"] < 2.6e4 and 2e12 < b["upper"] < 4e12
    assert b["upper"] > b["lower"]


def test_ellipsoid_ratio():
    assert log10_ellipsoid_ratio([4.0, 1.0], [1.0, 1.0], 2) == pytest.approx(math.log10(2.0))


def test_check7_pca_dimension_counts():
    R, _ = synthetic_gallery(2000, D=64, k=32, seed=0)
    rep = pca_report(R)
    assert rep.k[0.99] <= 33 and 27 <= rep.k[0.95] <= 31 and 20 < rep.participation_ratio < 26
    iso = pca_report(_unit(5000, 64, 1))
    assert iso.k[0.95] >= 55


def test_subspace_residual_and_containment():
    R, U = synthetic_gallery(2000, seed=0)
    sub = Subspace(R)
    assert sub.k == 32
    assert float(sub.inside(R).float().mean()) > 0.97
    v = _unit(100, 64, 3)
    r = sub.residual(v)
    assert torch.allclose(r, 1 - (v @ sub.P).pow(2).sum(1), atol=1e-5)
    assert float(sub.residual(sub.project(v)).max()) < 1e-10
    with pytest.raises(ValueError, match="k=65"):
        Subspace(R, k=65)


def test_margin_and_spread():
    th, tm = margin(0.68)
    assert tm == pytest.approx(0.63) and th == pytest.approx(math.acos(0.63))
    th, tm = margin(0.5, rho=0.1, m=2)
    assert th == pytest.approx(math.acos(0.5) + 0.2) and tm == pytest.approx(math.cos(th))
    c = _unit(3, 8, 0)
    imgs = torch.cat([c, c])
    rho, centers = within_spread(imgs, torch.tensor([0, 1, 2, 0, 1, 2]))
    assert rho == pytest.approx(0.0, abs=1e-3) and torch.allclose(centers, c, atol=1e-6)


def test_collisions_center_and_strict():
    R, _ = synthetic_gallery(100, seed=0)
    assert bool(collisions(R[:5], R, 0.99).all())
    with pytest.raises(ValueError, match="strict"):
        collisions(R[:5], R, 0.9, mode="strict")
    assert bool(collisions(R[:5], R, 0.99, mode="strict", images=R).all())


def test_bad_embeddings():
    with pytest.raises(ValueError, match="finite|NaN"):
        as_unit(np.array([[np.nan, 1.0]]), "reals")
    with pytest.raises(ValueError, match="zero-norm"):
        as_unit(np.zeros((2, 3)), "reals")
    with pytest.raises(ValueError, match="dimension"):
        as_unit(np.eye(3), "virtuals", dim=4)
    with pytest.raises(ValueError, match="empty|at least"):
        as_unit(np.zeros((0, 3)), "reals")
    with pytest.raises(ValueError, match="unit-norm"):
        as_unit(2 * np.eye(3), "reals")


def test_check9_arcface_logits_and_gradcheck():
    head = ArcFaceHead(2, 3, s=30.0, m=0.3).double()
    angles = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    with torch.no_grad():
        head.weight.copy_(torch.stack([torch.cos(angles), torch.sin(angles)], 1))
    x = torch.tensor([[1.0, 0.0], [math.cos(0.5), math.sin(0.5)]], dtype=torch.float64)
    y = torch.tensor([1, 2])
    logits = head(x, y).detach()
    assert logits[0, 1] == pytest.approx(30 * math.cos(1.0 + 0.3))
    assert logits[1, 2] == pytest.approx(30 * math.cos(1.5 + 0.3))
    assert logits[0, 0] == pytest.approx(30.0)                       # non-target: s cos theta
    h = ArcFaceHead(3, 4).double()
    xs = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: h(a, torch.tensor([0, 1, 2, 3])), (xs,))


def test_check11_ten_fold_accuracy():
    rng = np.random.default_rng(0)
    mated = np.tile(np.r_[np.ones(30, bool), np.zeros(30, bool)], 10)
    sep = np.where(mated, 1.0 + rng.random(600), rng.random(600))
    assert ten_fold_accuracy(sep, mated) == 1.0
    assert abs(ten_fold_accuracy(rng.random(600), mated) - 0.5) < 0.05
