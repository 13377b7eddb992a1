"""Discrete chain: forward-backward and Sinkhorn vs brute-force enumeration, POT at N = 2 (checks 3, 4, 5)."""

import numpy as np
import pytest

from neurips26.bridge import (
    ChainLaw,
    ChainPrior,
    ConvergenceError,
    InfeasibleError,
    brute_force_ipf,
    chain_kl,
    chain_sinkhorn,
    discrete_target,
    discrete_targets,
    tv_exact,
)
from neurips26.bridge.chain import all_states, delta_variance


def test_forward_backward_equals_enumeration():
    """Check 4: marginals and log Z equal enumeration (N = 4, G = 6) to 1e-12."""
    prior = ChainPrior.create(4, G=6, ell=0.7)
    rng = np.random.default_rng(0)
    law = ChainLaw(prior, rng.normal(size=(4, 6)))
    s = all_states(6, 4)
    logw = (
        prior.log_r[s[:, 0]]
        + sum(prior.log_K[s[:, k - 1], s[:, k]] for k in range(1, 4))
        + sum(law.phi[k, s[:, k]] for k in range(4))
    )
    logz = np.log(np.exp(logw).sum())
    assert abs(law.log_partition() - logz) < 1e-12
    p = np.exp(logw - logz)
    for k in range(4):
        brute = np.bincount(s[:, k], weights=p, minlength=6)
        assert np.max(np.abs(brute - law.marginals()[k])) < 1e-12
    assert np.allclose(np.exp(law.joint_log_probs()).ravel(), p, atol=1e-14)


def test_stationary_law_and_row_normalised_kernel():
    prior = ChainPrior.create(3, G=40, ell=0.4)
    K, r = np.exp(prior.log_K), np.exp(prior.log_r)
    assert np.allclose(K.sum(axis=1), 1, atol=1e-14)
    assert np.allclose(r @ K, r, atol=1e-14)
    assert np.allclose(ChainLaw.untilted(prior).marginals(), r, atol=1e-13)


def test_sinkhorn_equals_brute_force_ipf_and_pythagoras():
    """Check 3: N = 3, G = 5: marginals to 1e-12, joint = brute-force IPF to 1e-10, Pythagorean identity."""
    prior = ChainPrior.create(3, G=5, L=2.0, ell=0.6)
    mu = np.stack([discrete_target(prior.z, "kinked"), discrete_target(prior.z, "smooth"), np.full(5, 0.2)])
    pstar = chain_sinkhorn(prior, mu)
    assert np.max(np.abs(pstar.marginals() - mu)) < 1e-12
    joint = np.exp(pstar.joint_log_probs())
    assert np.max(np.abs(joint - brute_force_ipf(prior, mu))) < 1e-10
    # Pythagoras on the enumerated joint: any feasible Q, e.g. the product of the mu_k
    Q = mu[0][:, None, None] * mu[1][None, :, None] * mu[2][None, None, :]
    R = np.exp(ChainLaw.untilted(prior).joint_log_probs())

    def kl(a, b):
        return float(np.sum(a * (np.log(a) - np.log(b))))

    lhs, rhs = kl(Q, R), kl(Q, joint) + kl(joint, R)
    assert abs(lhs - rhs) < 1e-8 * lhs
    assert abs(chain_kl(pstar, ChainLaw.untilted(prior)) - kl(joint, R)) < 1e-12


@pytest.mark.parametrize("G", [32, 128])
def test_two_slices_equal_pot_sinkhorn(G):
    """Check 5: N = 2 P* equals POT's entropic OT plan with M = -log(r K), reg = 1 (to 1e-8)."""
    ot = pytest.importorskip("ot")
    prior = ChainPrior.create(2, G=G, ell=0.5)
    mu = discrete_target(prior.z, "kinked")
    pstar = chain_sinkhorn(prior, np.stack([mu, mu]))
    M = -(prior.log_r[:, None] + prior.log_K)
    plan = ot.sinkhorn(mu, mu, M, reg=1.0, stopThr=1e-14, numItermax=100_000)
    assert np.max(np.abs(np.exp(pstar.joint_log_probs()) - plan)) < 1e-8


def test_chain_reversal_invariance():
    """Check 12 on the chain: reversing the slices permutes P* and keeps KL(P* || R)."""
    prior = ChainPrior.create(4, G=30, ell=0.5)
    mu = discrete_targets(prior, "kinked", slice_varying=True)
    a = chain_sinkhorn(prior, mu)
    b = chain_sinkhorn(prior, mu[::-1].copy())
    assert np.allclose(a.marginals()[::-1], b.marginals(), atol=1e-12)
    R = ChainLaw.untilted(prior)
    assert abs(chain_kl(a, R) - chain_kl(b, R)) < 1e-10


def test_delta_variance_equals_enumeration():
    prior = ChainPrior.create(3, G=7, ell=0.5)
    rng = np.random.default_rng(3)
    law = ChainLaw(prior, rng.normal(size=(3, 7)))
    d = rng.normal(size=(3, 7))
    s = all_states(7, 3)
    S = sum(d[k][s[:, k]] for k in range(3))
    w = np.exp(law.log_prob(s))
    assert abs(delta_variance(law, d) - (w @ S**2 - (w @ S) ** 2)) < 1e-12


def test_sampler_matches_marginals():
    prior = ChainPrior.create(3, G=20, ell=0.5)
    law = ChainLaw(prior, np.random.default_rng(0).normal(size=(3, 20)))
    x = law.sample(200_000, np.random.default_rng(1))
    emp = np.stack([np.bincount(x[:, k], minlength=20) / 200_000 for k in range(3)])
    assert np.max(np.abs(emp - law.marginals())) < 0.01


def test_zeros_in_targets_are_kept_and_infeasible_ones_reported():
    prior = ChainPrior.create(3, G=10, ell=0.5)
    mu = discrete_target(prior.z, "kinked")
    mu[:3] = 0
    mu /= mu.sum()
    pstar = chain_sinkhorn(prior, discrete_targets(prior, mu))
    assert np.all(pstar.marginals()[:, :3] == 0)
    tight = ChainPrior.create(2, G=10, L=3.0, ell=0.05)  # K underflows: far states unreachable
    a, b = np.zeros(10), np.zeros(10)
    a[0], b[-1] = 1.0, 1.0
    with pytest.raises(InfeasibleError):
        discrete_targets(tight, np.stack([a, b]))


def test_bad_probability_vectors():
    prior = ChainPrior.create(2, G=5)
    with pytest.raises(ValueError, match="non-negative"):
        discrete_targets(prior, np.array([0.5, 0.6, -0.1, 0.0, 0.0]))
    with pytest.raises(ValueError, match="sum to 1"):
        discrete_targets(prior, np.full(5, 0.3))
    with pytest.raises(ValueError, match="5 entries"):
        discrete_targets(prior, np.full(4, 0.25))
    with pytest.raises(ValueError, match="shape"):
        chain_sinkhorn(prior, np.full((3, 5), 0.2))
    with pytest.raises(ValueError, match="ell"):
        ChainPrior.create(2, ell=0.0)
    with pytest.raises(ValueError, match="shape"):
        discrete_target(prior.z, "wavy")


def test_sinkhorn_reports_residual_at_max_iter():
    prior = ChainPrior.create(4, G=64, ell=0.3)
    with pytest.raises(ConvergenceError) as e:
        chain_sinkhorn(prior, discrete_targets(prior, "kinked"), max_iter=2)
    assert e.value.residual > 1e-12 and "residual" in str(e.value)


def test_exact_tv_refuses_large_state_spaces():
    prior = ChainPrior.create(3, G=128)
    law = ChainLaw.untilted(prior)
    with pytest.raises(ValueError, match="2\\^20"):
        tv_exact(law, law)
