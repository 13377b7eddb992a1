"""MDP tooling: planning, gaps, generators, connectivity (checks 1 and 12) and bad input."""

import numpy as np
import pytest

from neurips26.nas import (
    MDP,
    diameter,
    double_chain,
    eta,
    is_communicating,
    lazy_ring,
    path_length_m,
    policy_evaluation,
    policy_iteration,
    random_mdp,
    riverswim,
    solve_mdp,
    uniform_mixing_time,
    value_iteration,
)
from neurips26.nas.mdp import lazy_ring_rewards


@pytest.mark.parametrize("seed", range(8))
def test_pi_equals_vi_equals_linear_solve(seed):
    m = random_mdp(3 + seed % 3, 2 + seed % 2, gamma=0.9, seed=seed)
    V_pi, _, pi = policy_iteration(m.P, m.r, m.gamma)
    V_vi, _, pi_vi = value_iteration(m.P, m.r, m.gamma, tol=1e-13)
    V_lin = policy_evaluation(m.P, m.r, m.gamma, pi)
    np.testing.assert_allclose(V_pi, V_vi, atol=1e-9)
    np.testing.assert_allclose(V_pi, V_lin, atol=1e-9)
    np.testing.assert_array_equal(pi, pi_vi)
    # Bellman residual of the returned V*
    assert np.abs((m.r + m.gamma * m.P @ V_pi).max(axis=1) - V_pi).max() < 1e-10
    sol = solve_mdp(m.P, m.r, m.gamma)
    assert (sol.gaps >= 0).all()
    assert (sol.gaps[np.arange(m.S), sol.pi] == 0).all()
    sub = np.ones_like(sol.gaps, bool)
    sub[np.arange(m.S), sol.pi] = False
    assert (sol.gaps[sub] > 0).all() and sol.delta_min == sol.gaps[sub].min()


def test_random_mdp_rejection_rule_and_determinism():
    for seed in range(10):
        m = random_mdp(3, 2, seed=seed)
        sol = m.solve()
        assert sol.delta_min >= 0.05
        assert is_communicating(m.P)
        np.testing.assert_allclose(m.P.sum(axis=2), 1, atol=1e-12)
        assert 0 <= m.r.min() and m.r.max() <= 1
    a, b = random_mdp(3, 2, seed=7), random_mdp(3, 2, seed=7)
    np.testing.assert_array_equal(a.P, b.P)
    np.testing.assert_array_equal(a.r, b.r)
    sparse = random_mdp(4, 2, seed=184, support=2)
    assert ((sparse.P > 0).sum(axis=2) == 2).all() and path_length_m(sparse.P) == 2
    with pytest.raises(ValueError, match="support"):
        random_mdp(3, 2, support=5)
    # a rule that cannot be met is reported, not looped forever
    with pytest.raises(RuntimeError, match="rejection"):
        random_mdp(2, 2, seed=0, min_gap=5.0, max_tries=20)


def test_riverswim_dynamics_diameter_and_m():
    m = riverswim(3)
    assert m.P[0, 1, 0] == 0.7 and m.P[0, 1, 1] == 0.3
    assert (m.P[1, 1] == [0.1, 0.6, 0.3]).all()
    assert m.P[2, 1, 2] == 0.3 and m.P[2, 1, 1] == 0.7 and m.P[2, 0, 1] == 1
    assert m.r[0, 0] == 0.05 and m.r[2, 1] == 1 and m.r.sum() == 1.05
    # hand computation: hitting 2 from 1 by swimming right: h1 = 1 + .6 h1 + .1 h0, h0 = 1 + .7 h0 + .3 h1
    # -> h1 = 40/9, h0 = 70/9 (the worst pair), m = 2 (0 -> 1 -> 2)
    assert diameter(m.P) == pytest.approx(70 / 9, rel=1e-8)
    assert path_length_m(m.P) == 2


def test_communicating_check_rejects_absorbing_state():
    P = np.zeros((3, 2, 3))
    P[0, :, 1] = 1
    P[1, :, 2] = 1
    P[2, :, 2] = 1                       # absorbing
    assert not is_communicating(P)
    m = MDP(P, np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.9]]), 0.5)
    with pytest.raises(ValueError, match="not communicating"):
        m.require_identifiable()
    from neurips26.nas import identify
    with pytest.raises(ValueError, match="not communicating"):
        identify(m, "nas", 0.1)


def test_connectivity_constants_on_lazy_ring():
    qs = (1.0, 0.2, 0.05)
    r = lazy_ring_rewards(4, qs)
    rings = [lazy_ring(4, q, r) for q in qs]
    for ring in rings:
        assert ring.solve().delta_min >= 0.05
    tmix = [uniform_mixing_time(x.P) for x in rings]
    etas = [eta(x.P)["eta"] for x in rings]
    assert tmix == sorted(tmix) and tmix[-1] > tmix[0]      # q down: slower mixing
    assert etas == sorted(etas, reverse=True)                # q down: smaller eta
    assert diameter(rings[0].P) == pytest.approx(4.0)        # pure teleport: geometric(1/4) hitting
    assert double_chain(2).S == 5 and is_communicating(double_chain(2).P)


def _good():
    P = np.full((2, 2, 2), 0.5)
    r = np.array([[0.1, 0.9], [0.2, 0.3]])
    return P, r


@pytest.mark.parametrize("mutate, match", [
    (lambda P, r: (P * -1, r), "negative"),
    (lambda P, r: (P * 0.9, r), "sum to 1"),
    (lambda P, r: (P[:, :, :1], r), "shape"),
    (lambda P, r: (P, r[:, :1]), "r must have shape"),
    (lambda P, r: (P, r + 1), r"r \(rewards\)"),
    (lambda P, r: (np.full((1, 2, 1), 1.0), r[:1]), "S >= 2"),
    (lambda P, r: (np.full((2, 1, 2), 0.5), r[:, :1]), "A >= 2"),
])
def test_bad_mdp_input(mutate, match):
    P, r = mutate(*_good())
    with pytest.raises(ValueError, match=match):
        MDP(P, r, 0.5)


@pytest.mark.parametrize("gamma", [0.0, 1.0, -0.1, 1.5])
def test_bad_gamma(gamma):
    P, r = _good()
    with pytest.raises(ValueError, match="gamma"):
        MDP(P, r, gamma)


def test_bad_start_state_and_ties():
    P, r = _good()
    with pytest.raises(ValueError, match="s0"):
        MDP(P, r, 0.5, s0=2)
    tied = MDP(P, np.array([[0.5, 0.5], [0.2, 0.3]]), 0.5)
    with pytest.raises(ValueError, match="ill-posed"):
        tied.require_identifiable()
    from neurips26.nas import U, identify
    with pytest.raises(ValueError, match="ill-posed"):
        identify(tied, "nas", 0.1)
    with pytest.raises(ValueError, match="ill-posed"):
        U(tied, np.full((2, 2), 0.25))


def test_near_tie_family_gaps_come_from_transitions_and_T_positive():
    """state_rewards: Delta_sa = gamma (p_{s pi*(s)} - p_sa) . V*, and Alt(M) is not empty (T > 0),
    unlike the gamma = 0.5 random quick instance whose reward gaps fix pi* (T = 0)."""
    from neurips26.nas.diagnostics import instance_summary
    from neurips26.nas.instances import HARD_INSTANCES, build_instance

    m = build_instance(HARD_INSTANCES[0])
    sol = m.solve()
    S = m.S
    for s in range(S):
        for a in range(m.A):
            d = m.gamma * (m.P[s, sol.pi[s]] - m.P[s, a]) @ sol.V
            assert sol.gaps[s, a] == pytest.approx(d, abs=1e-12)
    info = instance_summary(m)
    assert not info["alt_empty"] and info["T_est"] > 0
    assert 10 < info["Uo_over_T"] < 100            # U_o within two orders of the information limit
    easy = instance_summary(build_instance(("random", 3, 2, 13)))
    assert easy["alt_empty"] and easy["T_est"] == 0 and easy["Uo_over_T"] is None
