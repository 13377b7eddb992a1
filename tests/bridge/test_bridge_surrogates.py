"""Surrogates S1-S4 and the metrics: checks 9, 10, 11 (S3), 13; the rate behaviour on small cases."""

import numpy as np
import pytest

from neurips26.bridge import (
    AnnealedTilt,
    ChainLaw,
    ChainPrior,
    EDMSampler,
    GaussianPrior,
    GaussianTargets,
    NotPositiveDefiniteError,
    ProductTilt,
    SmoothedPotentials,
    TiltedGaussian,
    alignment_ratio,
    bound_ingredients,
    chain_sinkhorn,
    discrete_targets,
    edm_sigmas,
    fit_slope,
    gaussian_ipf,
    kl,
    kl_mc,
    pinsker,
    tv_exact,
    tv_mc,
)
from neurips26.bridge.metrics import gaussian_window, grid_window, posterior_concentration


@pytest.fixture(scope="module")
def gauss():
    prior, targets = GaussianPrior.ar1(4, 2, 2, rho_z=0.5), GaussianTargets.default(4, 2, 2)
    return prior, targets, gaussian_ipf(prior, targets)


def test_s1_reproduces_the_reviewed_curve(gauss):
    """The spec's 2x2 prototype: KL 3.67 (sigma = 80) -> 1.2e-2 (0.30) -> 1.5e-7 (0.002)."""
    prior, targets, pstar = gauss
    s = edm_sigmas(18)
    kls = np.array([kl(p, pstar) for p in AnnealedTilt().laws(prior, targets, s)])
    assert kls[0] == pytest.approx(3.67, abs=0.01)
    assert kls[np.argmin(np.abs(s[:-1] - 0.3))] == pytest.approx(1.2e-2, rel=0.05)
    assert kls[-1] == pytest.approx(1.5e-7, rel=0.05)
    assert np.all(np.diff(kls) < 0)


def test_s1_long_schedule_is_exact(gauss):
    """Check 10: S1 over T = 256 ends at KL < 1e-10."""
    prior, targets, pstar = gauss
    assert kl(AnnealedTilt().laws(prior, targets, edm_sigmas(256))[-1], pstar) < 1e-10


def test_s1_jacobi_and_lambda_options_converge(gauss):
    prior, targets, pstar = gauss
    for sur in (AnnealedTilt(order="jacobi"), AnnealedTilt(lam="edm"), AnnealedTilt(lam=0.5)):
        laws = sur.laws(prior, targets, edm_sigmas(64))
        assert kl(laws[-1], pstar) < kl(laws[len(laws) // 2], pstar) < kl(laws[0], pstar)


def test_s2_plateaus_with_coupled_slices_and_is_exact_without(gauss):
    prior, targets, pstar = gauss
    s2 = ProductTilt().laws(prior, targets, edm_sigmas(18))
    assert kl(s2[-1], pstar) == pytest.approx(0.26, abs=0.01)  # the spec's 2x2 N = 4 plateau
    p0, t0 = GaussianPrior.ar1(4, 2, 2, rho_z=0.0), targets
    ps0 = gaussian_ipf(p0, t0)
    k = [kl(p, ps0) for p in ProductTilt().laws(p0, t0, [0.02, 0.01])]
    assert k[0] / k[1] == pytest.approx(16, rel=0.15)  # ~ sigma^4


def test_s3_closed_form_and_raises_where_q_is_indefinite(gauss):
    """Check 11 (S3): Q = A_k + sigma^-2 I not PD raises; below it the closed form equals the smoothing."""
    prior, targets, pstar = gauss
    with pytest.raises(NotPositiveDefiniteError, match="Q"):
        SmoothedPotentials().tilt_at(pstar, 1.0)
    assert SmoothedPotentials(undefined="none").laws(prior, targets, [1.0, 0.5], pstar)[0] is None
    # A' = sigma^-2 I - sigma^-4 Q^-1, b' = sigma^-2 Q^-1 b (the spec's form) at a moderate sigma
    s = 0.4
    law = SmoothedPotentials().tilt_at(pstar, s)
    Q = pstar.A[1] + np.eye(4) / s**2
    assert np.allclose(law.A[1], np.eye(4) / s**2 - np.linalg.inv(Q) / s**4, atol=1e-8)
    assert np.allclose(law.b[1], np.linalg.solve(Q, pstar.b[1]) / s**2, atol=1e-10)
    k = [kl(SmoothedPotentials().tilt_at(pstar, x), pstar) for x in (0.1, 0.05)]
    assert k[0] / k[1] == pytest.approx(16, rel=0.15)  # smooth potentials: sigma^4


def test_s3_discrete_is_row_normalised_heat_smoothing():
    prior = ChainPrior.create(2, G=64, ell=0.5)
    pstar = chain_sinkhorn(prior, discrete_targets(prior, "kinked"))
    law = SmoothedPotentials().tilt_at(pstar, 0.3)
    z = prior.z
    W = np.exp(-((z[:, None] - z[None, :]) ** 2) / (2 * 0.09))
    W /= W.sum(axis=1, keepdims=True)
    assert np.allclose(np.exp(law.phi[0]), W @ np.exp(pstar.phi[0]), rtol=1e-12)


def test_s4_with_exact_score_recovers_pstar(gauss):
    """Check 13: exact-score Heun, T = 256: KL < 1e-3, and KL - start mismatch < 1e-5."""
    prior, targets, pstar = gauss
    law, info = EDMSampler(solver="heun", score="exact").sample_law(prior, targets, edm_sigmas(256), pstar)
    k = kl(law, pstar)
    assert k < 1e-3
    assert abs(k - info["start_mismatch"]) < 1e-5
    m, _ = pstar.dense()
    assert info["start_mismatch"] == pytest.approx(m @ m / (2 * 80**2), rel=0.01)
    euler, _ = EDMSampler(solver="euler", score="exact").sample_law(prior, targets, edm_sigmas(256), pstar)
    assert kl(euler, pstar) > k


def test_kl_closed_form_matches_monte_carlo_and_tv_below_pinsker(gauss):
    """Check 9: KL closed form within 3 s.e. of MC; KL(P||P) = 0; TV_MC <= sqrt(KL/2) + 3 s.e."""
    prior, targets, pstar = gauss
    R = TiltedGaussian.untilted(prior)
    s = edm_sigmas(18)
    i = int(np.argmin(np.abs(s[:-1] - 0.3)))
    s1 = AnnealedTilt().laws(prior, targets, s)[i]
    for p in (R, s1):
        exact = kl(p, pstar)
        est, se = kl_mc(p, pstar, 100_000, seed=0)
        assert abs(est - exact) < 3 * se
        tv, two_se = tv_mc(p, pstar, 100_000, seed=0)
        assert tv <= pinsker(exact) + 1.5 * two_se
    assert abs(kl(pstar, pstar)) < 1e-12


def test_tv_mc_matches_exact_enumeration_on_a_chain():
    prior = ChainPrior.create(2, G=32, ell=0.5)
    pstar = chain_sinkhorn(prior, discrete_targets(prior, "kinked"))
    R = ChainLaw.untilted(prior)
    exact = tv_exact(R, pstar)
    est, two_se = tv_mc(R, pstar, 100_000, seed=0)
    assert abs(est - exact) < 1.5 * two_se
    assert exact <= pinsker(kl(R, pstar))


def test_discrete_s1_and_s3_rates_on_kinked_target():
    """The O(N sigma^2) law on the kinked target: KL/(N sigma^2) of S3 stays bounded across N, slope ~ 2."""
    sig = np.geomspace(0.4, 0.1, 6)
    vals = {}
    for N in (2, 4):
        prior = ChainPrior.create(N, G=128, ell=0.5)
        pstar = chain_sinkhorn(prior, discrete_targets(prior, "kinked"))
        k = np.array([kl(SmoothedPotentials().tilt_at(pstar, s), pstar) for s in sig])
        vals[N] = k / (N * sig**2)
        assert 1.7 <= fit_slope(sig, k) <= 2.7
    assert vals[4].max() <= 2 * vals[2].max()


def test_alignment_ratio_exact_against_monte_carlo(gauss):
    prior, targets, pstar = gauss
    law = ProductTilt().tilt_at(prior, targets, 0.3)
    a = alignment_ratio(law, pstar, 0.3)
    x = pstar.sample(200_000, np.random.default_rng(0))
    d = -0.5 * np.einsum("nki,kij,nkj->n", x, law.A - pstar.A, x) + np.einsum("nki,ki->n", x, law.b - pstar.b)
    assert a == pytest.approx(d.std() / 0.3, rel=0.01)
    assert alignment_ratio(pstar, pstar, 0.3) == pytest.approx(0.0, abs=1e-7)


def test_bound_ingredients_are_finite_and_c_post_at_most_one(gauss):
    prior, targets, pstar = gauss
    law = AnnealedTilt().laws(prior, targets, edm_sigmas(18))[-3]
    b = bound_ingredients(law, pstar, 0.05, kl(law, pstar))
    assert 0 < b["c_post"] <= 1 and b["L_max"] > 0 and np.isfinite(b["C_hat"])
    assert posterior_concentration(pstar, 1e-3) == pytest.approx(1.0, abs=1e-4)


def test_fit_windows():
    s = edm_sigmas(64)[:-1]
    idx = grid_window(s, 6 / 127)
    assert len(idx) >= 4 and np.all(s[idx] <= 0.5) and np.all(s[idx] >= 4 * 6 / 127)
    kls = np.r_[np.ones(60), 1e-13, 1e-5, 1e-6, 1e-7]
    assert gaussian_window(s, kls).tolist() == [58, 59, 61, 62, 63]
    assert fit_slope([1.0, 0.5, 0.25], [1.0, 0.25, 0.0625]) == pytest.approx(2.0)


def test_surrogate_input_checks(gauss):
    prior, targets, pstar = gauss
    with pytest.raises(ValueError, match="order"):
        AnnealedTilt(order="random").laws(prior, targets, edm_sigmas(4))
    with pytest.raises(ValueError, match="lam"):
        AnnealedTilt(lam=1.5).laws(prior, targets, edm_sigmas(4))
    with pytest.raises(ValueError, match="strictly decreasing"):
        ProductTilt().laws(prior, targets, [0.1, 0.2])
    with pytest.raises(ValueError, match="pstar"):
        SmoothedPotentials().laws(prior, targets, edm_sigmas(4))
    with pytest.raises(ValueError, match="dimension"):
        AnnealedTilt().laws(prior, GaussianTargets.default(4, 1, 3), edm_sigmas(4))


def test_tv_mc_chunks_reduce_to_the_same_estimate_on_any_backend(gauss):
    """Chunks are seeded by spawned SeedSequences: the same estimate serially and across processes."""
    prior, targets, pstar = gauss
    law = ProductTilt().tilt_at(prior, targets, 0.3)
    serial = tv_mc(law, pstar, 4000, seed=1, chunk=1000)
    assert tv_mc(law, pstar, 4000, seed=1, chunk=1000, backend="process", workers=2) == pytest.approx(
        serial, rel=1e-12
    )
    one = tv_mc(law, pstar, 4000, seed=1, chunk=4000)
    assert abs(one[0] - serial[0]) < 2 * max(one[1], serial[1])  # other chunking: same law, other draws
