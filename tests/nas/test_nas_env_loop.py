"""TabularEnv as a gymnasium.Env (check_env), and the compiled sampling loop equal to the Python loop
bit for bit (taus, answers, counts, number of oracle solves)."""

import warnings

import numpy as np
import pytest

from neurips26.nas import TabularEnv, identify, random_mdp
from neurips26.nas.agents import NaSConfig, NextDue, OracleSchedule

gymnasium = pytest.importorskip("gymnasium", reason="gymnasium (nas extra) not installed")


@pytest.mark.parametrize("render_mode", [None, "ansi"])
def test_tabular_env_passes_gymnasium_check_env(render_mode):
    from gymnasium.utils.env_checker import check_env

    env = TabularEnv(random_mdp(3, 2, seed=1), render_mode=render_mode)
    assert isinstance(env, gymnasium.Env)
    assert isinstance(env.observation_space, gymnasium.spaces.Discrete) and env.observation_space.n == 3
    assert isinstance(env.action_space, gymnasium.spaces.Discrete) and env.action_space.n == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    # the only warning allowed: alternative render modes need a registered spec (gymnasium.make)
    assert all("spec" in str(w.message) for w in caught), [str(w.message) for w in caught]
    if render_mode == "ansi":
        assert env.render().startswith("state ")
    else:
        assert env.render() is None


def test_tabular_env_seeding_matches_numpy_default_rng_and_transitions():
    m = random_mdp(3, 2, seed=4)
    env = TabularEnv(m)
    s, info = env.reset(seed=7)
    assert s == m.s0 and info == {}
    rng = np.random.default_rng(7)
    for a in (0, 1, 1, 0, 1):
        s2, r, term, trunc, _ = env.step(a)
        u = rng.random()
        assert s2 == int(np.searchsorted(np.cumsum(m.P[s, a]), u, side="right"))
        assert r == m.r[s, a] and term is False and trunc is False
        s = s2
    # empirical transition law of one pair matches P
    env.reset(seed=0)
    counts = np.zeros(3)
    for _ in range(4000):
        env.state = 1
        counts[env.step(0)[0]] += 1
    np.testing.assert_allclose(counts / 4000, m.P[1, 0], atol=0.03)
    with pytest.raises(ValueError, match="action"):
        env.step(2)
    with pytest.raises(ValueError, match="render_mode"):
        TabularEnv(m, render_mode="human")


def test_next_due_is_the_next_time_the_schedule_fires():
    for cfg in (NaSConfig(), NaSConfig(schedule="fixed", K_omega=37), NaSConfig(ratio=1.3, K_omega=7,
                                                                              geometric_dense_until=50)):
        sched, nxt = OracleSchedule(cfg), NextDue(cfg)
        fires = [t for t in range(1, 20_000) if sched.due(t)]
        t, got = 0, []
        while True:
            t = nxt.after(t)
            if t >= 20_000:
                break
            got.append(t)
        assert got == fires


@pytest.mark.parametrize("alg", ["nas", "nas_no_avg", "nas_fixed_eps", "nas_practical", "nas_ergodic",
                                 "uniform"])
def test_compiled_loop_equals_python_loop_bit_for_bit(quick_instances, alg):
    m = quick_instances[0]
    a = identify(m, alg, 0.1, seed=3, K_s=20, loop="python")
    b = identify(m, alg, 0.1, seed=3, K_s=20, loop="compiled")
    assert [o.tau for o in a.outcomes] == [o.tau for o in b.outcomes]
    assert [o.pi_hat for o in a.outcomes] == [o.pi_hat for o in b.outcomes]
    assert [o.U_hat for o in a.outcomes] == [o.U_hat for o in b.outcomes]      # floats, exactly
    assert a.steps == b.steps and a.n_oracle_solves == b.n_oracle_solves
    np.testing.assert_array_equal(a.N_sas, b.N_sas)
    np.testing.assert_array_equal(a.n_states_visits, b.n_states_visits)


def test_compiled_loop_on_three_states_and_censoring(quick_instances):
    m = quick_instances[1]
    a = identify(m, "nas", 0.1, seed=1, K_s=7, loop="python")
    b = identify(m, "nas", 0.1, seed=1, K_s=7)                 # auto -> compiled on a TabularEnv
    assert a.outcomes[0].tau == b.outcomes[0].tau and np.array_equal(a.N_sas, b.N_sas)
    # a t_max that is not a multiple of K_s: both censor at the same t with the same counts
    a = identify(m, "nas", 1e-3, seed=2, K_s=20, t_max=1234, loop="python")
    b = identify(m, "nas", 1e-3, seed=2, K_s=20, t_max=1234, loop="compiled")
    assert a.steps == b.steps == 1234 and not b.outcomes[0].stopped
    np.testing.assert_array_equal(a.N_sas, b.N_sas)


def test_compiled_loop_refuses_what_it_cannot_run(quick_instances):
    m = quick_instances[0]
    with pytest.raises(ValueError, match="loop"):
        identify(m, "psrl", 0.1, loop="compiled")
    with pytest.raises(ValueError, match="loop"):
        identify(m, "nas", 0.1, loop="numba")
    # auto falls back to the Python loop for the other baselines
    assert identify(m, "generative", 0.1, seed=0, K_s=20, loop="auto").outcomes[0].stopped

