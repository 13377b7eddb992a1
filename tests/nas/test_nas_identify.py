"""The stopping rule, NaS and the baselines (checks 6-11), the env interface, bad input."""

import math

import numpy as np
import pytest

from neurips26.nas import (
    NaSConfig,
    NavigationAllocator,
    TabularEnv,
    bound_terms,
    identify,
    random_mdp,
    stopping_statistic,
    threshold,
    uniform_allocation,
)
from neurips26.nas.agents import OracleSchedule
from neurips26.nas.stopping import EmpiricalModel


def test_threshold_values_and_monotonicity():
    S, A = 3, 2
    for d in (0.1, 1e-3, 1e-9):
        assert threshold(np.zeros((S, A)), d) == pytest.approx(math.log(1 / d) + (S - 1) * S * A)
    N = np.array([[3, 5], [0, 7], [2, 2]])
    base = threshold(N, 0.01)
    assert base == pytest.approx(math.log(100) + 2 * np.sum(np.log(np.e * (1 + N / 2))))
    for s in range(S):
        for a in range(A):
            M = N.copy()
            M[s, a] += 1
            assert threshold(M, 0.01) > base
    assert threshold(N, 0.001) > base
    with pytest.raises(ValueError, match="delta"):
        threshold(N, 1.0)
    with pytest.raises(ValueError, match="delta"):
        threshold(N, 0.0)
    with pytest.raises(ValueError, match="N"):
        threshold(np.zeros(3), 0.1)


def test_stopping_statistic_is_zero_on_ties():
    P = np.full((2, 2, 2), 0.5)
    t = bound_terms(P, np.array([[0.5, 0.5], [0.1, 0.2]]), 0.5)
    assert stopping_statistic(t, np.ones((2, 2)), 4) == (0.0, float("inf"))


def test_counts_bookkeeping_and_determinism(quick_instances):
    m = quick_instances[1]
    a = identify(m, "nas", (0.1, 1e-3), seed=5, K_s=20)
    b = identify(m, "nas", (0.1, 1e-3), seed=5, K_s=20)
    assert [o.tau for o in a.outcomes] == [o.tau for o in b.outcomes]
    assert [o.pi_hat for o in a.outcomes] == [o.pi_hat for o in b.outcomes]
    np.testing.assert_array_equal(a.N_sas, b.N_sas)
    np.testing.assert_array_equal(a.N_sas.sum(axis=2), a.counts)      # sum_s' N_sas' = N_sa
    assert a.counts.sum() == a.steps                                   # sum N_sa = t
    np.testing.assert_array_equal(a.counts.sum(axis=1), a.n_states_visits)
    c = identify(m, "nas", (0.1, 1e-3), seed=6, K_s=20)
    assert c.outcomes[-1].tau != a.outcomes[-1].tau or not np.array_equal(c.N_sas, a.N_sas)
    assert all(o.tau % 20 == 0 for o in a.outcomes)                     # checked every K_s steps


def test_delta_correctness_quick(quick_instances):
    """Check 8 at test scale: 15 runs per instance at delta = 0.1 (the 200-run version is slow)."""
    for m in quick_instances:
        pi_star = m.solve().pi.tolist()
        for seed in range(15):
            o = identify(m, "uniform", 0.1, seed=seed, K_s=20).outcomes[0]
            assert o.stopped and o.pi_hat == pi_star


@pytest.mark.slow
def test_delta_correctness_200_runs(quick_instances):
    for m in quick_instances:
        errors = censored = 0
        for seed in range(200):
            o = identify(m, "nas", 0.1, seed=seed, K_s=20).outcomes[0]
            censored += not o.stopped
            errors += o.stopped and not o.correct
        assert censored == 0 and errors / 200 <= 0.1


def test_tracking_and_slope(quick_instances):
    """Checks 10 and 11 on the S = 2 quick instance, 20 seeds (one trajectory serves both deltas)."""
    m = quick_instances[0]
    t = bound_terms(m.P, m.r, m.gamma)
    alloc = NavigationAllocator(2, 2).solve(m.P, t)
    w_u = uniform_allocation(m.P)
    tol = min(0.25, 0.5 * np.abs(w_u - alloc.omega).sum())
    d_nas, d_unif, taus = [], [], []
    for seed in range(20):
        r = identify(m, "nas", (1e-3, 1e-6, 1e-9), seed=seed, K_s=20)
        o = r.outcome(1e-6)
        d_nas.append(np.abs(np.asarray(o.freq) - alloc.omega).sum())
        taus.append([r.outcome(1e-3).tau, r.outcome(1e-9).tau])
        u = identify(m, "uniform", 1e-6, seed=seed, K_s=20).outcomes[0]
        d_unif.append(np.abs(np.asarray(u.freq) - w_u).sum())
    assert np.mean(d_nas) <= tol
    assert np.mean(d_unif) < 0.05          # uniform's frequencies converge to omega_u
    taus = np.mean(taus, axis=0)
    slope = (taus[1] - taus[0]) / (math.log(1e9) - math.log(1e3))
    assert 0.8 * alloc.value <= slope <= 3 * alloc.value


def test_baselines_identify_correctly(quick_instances):
    m = quick_instances[0]
    pi_star = m.solve().pi.tolist()
    for alg in ("nas_no_avg", "nas_fixed_eps", "nas_practical", "nas_ergodic", "generative", "bpi_ucrl"):
        o = identify(m, alg, 0.01, seed=1, K_s=20).outcomes[0]
        assert o.stopped and o.pi_hat == pi_star, alg
    # PSRL concentrates on pi* and starves sub-optimal pairs: censored, never a silent answer
    r = identify(m, "psrl", 0.01, seed=1, K_s=20, t_max=3000)
    assert r.steps == 3000 and (r.outcomes[0].stopped is False or r.outcomes[0].correct)


def test_generative_beats_uniform_on_average(quick_instances):
    m = quick_instances[1]
    g = np.mean([identify(m, "generative", 1e-3, seed=s, K_s=20).outcomes[0].tau for s in range(4)])
    u = np.mean([identify(m, "uniform", 1e-3, seed=s, K_s=20).outcomes[0].tau for s in range(4)])
    assert g < u


def test_oracle_schedule():
    sch = OracleSchedule(NaSConfig())
    due = [t for t in range(1, 20001) if sch.due(t)]
    assert 1 in due and 100 in due and 10_000 in due and 10_100 not in due
    assert math.ceil(1.05 ** 150) in due
    assert len(due) < 100 + 210
    fixed = OracleSchedule(NaSConfig(schedule="fixed", K_omega=50))
    assert [t for t in range(1, 201) if fixed.due(t)] == [50, 100, 150, 200]


class _UserEnv:
    """A user's own env: gymnasium-style, no .mdp attribute."""

    def __init__(self, mdp):
        self._inner = TabularEnv(mdp)

        class _Sp:
            def __init__(self, n):
                self.n = n
        self.observation_space, self.action_space = _Sp(mdp.S), _Sp(mdp.A)

    def reset(self, seed=None):
        return self._inner.reset(seed=seed)

    def step(self, a):
        return self._inner.step(a)


def test_user_environment(quick_instances):
    m = quick_instances[0]
    r = identify(_UserEnv(m), "nas", 0.1, gamma=m.gamma, seed=0, K_s=20)
    o = r.outcomes[0]
    assert o.stopped and o.correct is None and o.pi_hat == m.solve().pi.tolist()
    with pytest.raises(ValueError, match="gamma"):
        identify(_UserEnv(m), "nas", 0.1)
    with pytest.raises(TypeError, match="generative"):
        identify(_UserEnv(m), "generative", 0.1, gamma=0.5)
    with pytest.raises(TypeError, match="observation_space"):
        identify(object(), "nas", 0.1, gamma=0.5)
    env = TabularEnv(m, seed=0)
    s, info = env.reset()
    s2, rew, term, trunc, _ = env.step(1)
    assert 0 <= s2 < 2 and rew == m.r[s, 1] and not term and not trunc
    with pytest.raises(ValueError, match="action"):
        env.step(5)


def test_rewards_known_flag(quick_instances):
    m = quick_instances[0]
    model = EmpiricalModel(2, 2, 0.5, rewards=m.r)
    assert model.r_seen.all()
    o = identify(m, "nas", 0.1, seed=0, K_s=20, rewards_known=True).outcomes[0]
    assert o.correct


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(deltas=1.0), ValueError, "delta"),
    (dict(deltas=0.0), ValueError, "delta"),
    (dict(deltas="x"), TypeError, "delta"),
    (dict(K_s=0), ValueError, "K_s"),
    (dict(t_max=0), ValueError, "t_max"),
    (dict(algorithm="nope"), ValueError, "algorithm"),
    (dict(bound="nope"), ValueError, "bound"),
    (dict(nas="x"), TypeError, "nas"),
])
def test_bad_identify_input(quick_instances, kwargs, exc, match):
    args = dict(algorithm="nas", deltas=0.1) | kwargs
    with pytest.raises(exc, match=match):
        identify(quick_instances[0], args.pop("algorithm"), args.pop("deltas"), **args)


@pytest.mark.parametrize("kwargs, match", [
    (dict(epsilon=1.5), "epsilon"), (dict(epsilon=-0.1), "epsilon"), (dict(K_omega=0), "K_omega"),
    (dict(exploration="x"), "exploration"), (dict(schedule="x"), "schedule"), (dict(ratio=1.0), "ratio"),
])
def test_bad_nas_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NaSConfig(**kwargs)


def test_random_mdp_bad_args():
    with pytest.raises(ValueError, match="S"):
        random_mdp(1, 2)
    with pytest.raises(ValueError, match="gamma"):
        random_mdp(2, 2, gamma=1.0)
