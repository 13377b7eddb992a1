"""Acceptance checks 2-7: LP vs nashpy, zero surplus at N_sub = 0, the sandwich with the spec's reference
values, Euclidean elimination, the alternation identity, the FTRL regret bounds; closed-form limits."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.ftrl_surplus import (DEFAULT_FIVE, FTRL, FixedMaxMin, MyopicBestResponse, SweepThenAlternate,
                                    Uniform, alternation_rate, continuous_surplus, core_appendix_game,
                                    elimination_round, euclidean_elimination_bound, fixed_surplus_curve,
                                    fixed_trajectory, ftrl_regret_bound, matched_eta, matching_pennies,
                                    per_round_surplus, play, predicted_susceptibility, price_of_best_response,
                                    pure_equilibrium_game, random_game, regularizer, rock_paper_scissors,
                                    sandwich, search_delta, solve_game, sweeping_limit)

CHECK4_GAPS = np.r_[np.zeros(3), np.random.default_rng(1).uniform(0.1, 0.5, 5)]
CHECK4_REF = {0.05: {"entropic": 19.72, "euclidean": 2.187, "tsallis-0.5": 43.60, "tsallis-1.5": 9.055,
                     "log_barrier": 405.2},
              0.2: {"entropic": 5.008, "euclidean": 0.6298, "tsallis-0.5": 11.04, "tsallis-1.5": 2.342,
                    "log_barrier": 135.8}}
CHECK5_GAME = np.random.default_rng(0).uniform(-1, 1, (4, 8))


def test_lp_value_equals_nashpy():
    nash = pytest.importorskip("nashpy")
    rng = np.random.default_rng(0)
    for _ in range(20):
        A = rng.uniform(-1, 1, (10, 10))
        row, _ = nash.Game(A).linear_program()
        assert abs(solve_game(A).value - float(np.min(np.asarray(row) @ A))) <= 1e-7


def test_lp_known_games():
    s = solve_game(matching_pennies())
    assert abs(s.value) < 1e-12 and np.allclose(s.x_star, 0.5) and s.n_sub == 0
    s = solve_game(rock_paper_scissors())
    assert abs(s.value) < 1e-12 and np.allclose(s.x_star, 1 / 3) and s.n_sub == 0
    s = solve_game(pure_equilibrium_game())
    assert s.pure and abs(s.value - 0.2) < 1e-12 and s.k == 1
    d, score = search_delta(pure_equilibrium_game())
    assert score == 0 and np.all(d == 0)  # alternation impossible
    G1 = core_appendix_game(3, 4, seed=2)
    s = solve_game(G1)
    assert abs(s.value) < 1e-12 and np.allclose(s.x_star, 1 / 3, atol=1e-12)
    assert s.optimal.tolist() == [True] * 3 + [False] * 4
    np.testing.assert_allclose(s.gaps[3:], np.random.default_rng(2).uniform(0.1, 0.5, 4), atol=1e-12)
    assert np.all(np.abs(G1) <= 1)


@pytest.mark.parametrize("game", [core_appendix_game(3, 0), core_appendix_game(5, 0), matching_pennies()])
@pytest.mark.parametrize("reg", DEFAULT_FIVE)
def test_zero_surplus_without_suboptimal_actions(game, reg):
    T = 2000
    r = play(game, FTRL(reg, [0.05, 0.5]), FixedMaxMin(), T)
    assert np.all(np.abs(r.total) <= 1e-9 * T)
    assert np.max(np.abs(r.surplus)) <= 1e-12


@pytest.mark.parametrize("eta", [0.05, 0.2])
@pytest.mark.parametrize("reg", DEFAULT_FIVE)
def test_sandwich_and_reference_values(reg, eta):
    T = 20_000
    S = fixed_surplus_curve(reg, CHECK4_GAPS, eta, T)[-1]
    lo, hi = sandwich(reg, CHECK4_GAPS, eta, T)
    assert lo <= S <= hi
    assert 0.100 <= S - lo <= 0.1095  # spec: differences 0.100-0.109
    assert S == pytest.approx(CHECK4_REF[eta][reg], rel=1e-3)


def test_sandwich_holds_along_the_curve_and_simulator_agrees():
    gaps = CHECK4_GAPS
    for reg in ("entropic", "tsallis-1.5"):
        curve = fixed_surplus_curve(reg, gaps, 0.1, 3000)
        Ts = np.arange(1, 3001)
        lo = continuous_surplus(reg, gaps, 0.1, Ts)
        assert np.all(curve - lo >= -1e-10) and np.all(curve - lo <= gaps.mean() + 1e-10)
        f = per_round_surplus(reg, gaps, 0.1, np.arange(3000))
        assert np.all(np.diff(f) <= 1e-15)  # f non-increasing
    A = core_appendix_game(3, 5, gaps=gaps[3:], seed=0)
    r = play(A, FTRL("tsallis-0.5", 0.05), FixedMaxMin(), 1500, engine="loop")
    np.testing.assert_allclose(r.cumulative[0], fixed_surplus_curve("tsallis-0.5", gaps, 0.05, 1500),
                               rtol=1e-9, atol=1e-9)


def test_sweeping_limits_closed_forms():
    m, k, eta = 8, 3, 0.05
    assert sweeping_limit("entropic", m, k, eta) == pytest.approx(math.log(m / k) / eta)
    assert sweeping_limit("euclidean", m, k, eta) == pytest.approx((1 / k - 1 / m) / (2 * eta))
    assert sweeping_limit("tsallis-0.5", m, k, eta) == pytest.approx(2 * (math.sqrt(m) - math.sqrt(k)) / eta)
    assert sweeping_limit("tsallis-1.5", m, k, eta) == pytest.approx(2 * (k ** -0.5 - m ** -0.5) / eta)
    assert sweeping_limit("tsallis-0.5", m, k, eta) == pytest.approx(43.86, abs=0.01)
    with pytest.warns(RuntimeWarning, match="infinite"):
        assert sweeping_limit("log_barrier", m, k, eta) == math.inf
    # S_cont approaches the limit; entropic >= (N/m)/eta
    assert continuous_surplus("entropic", CHECK4_GAPS, eta, 1e7) == pytest.approx(
        sweeping_limit("entropic", m, k, eta), rel=1e-9)
    assert sweeping_limit("entropic", m, k, eta) >= (m - k) / m / eta


def test_euclidean_elimination_round_check5():
    s = solve_game(CHECK5_GAME)
    assert s.k == 4 and s.value == pytest.approx(-0.02847, abs=1e-5)
    assert s.delta_min == pytest.approx(0.2122, abs=1e-4)
    bound = euclidean_elimination_bound(0.1, s.k, s.delta_min)
    assert bound == 13 and elimination_round("euclidean", s.k, s.delta_min, 0.1) == 13
    sub = ~s.optimal
    y = fixed_trajectory("euclidean", s.gaps, 0.1, 200)
    first = int(np.flatnonzero(np.all(y[:, sub] == 0, axis=1))[0]) + 1
    assert first == 13 <= bound
    assert np.all(y[first - 1:, sub] == 0)  # afterwards eliminated for good: s_t = 0
    # Tsallis-1.5 eliminates too, at the round its threshold 3/sqrt(k) predicts; steep maps never do
    t15 = elimination_round("tsallis-1.5", s.k, s.delta_min, 0.1)
    y15 = fixed_trajectory("tsallis-1.5", s.gaps, 0.1, 400)
    assert int(np.flatnonzero(np.all(y15[:, sub] == 0, axis=1))[0]) + 1 <= t15
    for reg in ("entropic", "tsallis-0.5", "log_barrier"):
        assert elimination_round(reg, s.k, s.delta_min, 0.1) == math.inf
        # (float64 holds exp(-eta t Delta) > 0 while eta t Delta < ~700: T = 2000 here)
        assert np.all(fixed_trajectory(reg, s.gaps, 0.1, 2000)[:, sub] > 0)


@pytest.mark.parametrize("reg, eta, measured, rho", [("entropic", 0.1, 0.005274, 0.005212),
                                                     ("euclidean", 0.1, 0.020852, 0.020847),
                                                     ("entropic", 0.02, None, None)])
def test_alternation_identity_check6(reg, eta, measured, rho):
    T = 20_000
    s = solve_game(CHECK5_GAME)
    delta, _ = search_delta(CHECK5_GAME, s)
    lr = FTRL(reg, eta)
    gain = (play(CHECK5_GAME, lr, SweepThenAlternate(), T).total[0]
            - play(CHECK5_GAME, lr, FixedMaxMin(), T).total[0]) / T
    pred = alternation_rate(reg, CHECK5_GAME, delta, s.optimal, eta)
    assert gain == pytest.approx(pred, rel=0.02)
    if measured is not None:
        assert gain == pytest.approx(measured, rel=2e-4) and pred == pytest.approx(rho, rel=2e-4)


def test_alternation_even_with_no_suboptimal_actions():
    lr = FTRL("entropic", 0.1)
    r = play(matching_pennies(), lr, SweepThenAlternate(), 4000)
    s = solve_game(matching_pennies())
    d, _ = search_delta(matching_pennies(), s)
    assert r.total[0] >= 0.9 * alternation_rate("entropic", matching_pennies(), d, s.optimal, 0.1) * 4000 > 0


@pytest.mark.parametrize("reg", ["entropic", "euclidean", "tsallis-0.5", "tsallis-1.5", "log_barrier"])
@pytest.mark.parametrize("strategy", [FixedMaxMin(), SweepThenAlternate(), MyopicBestResponse(), Uniform()])
def test_learner_regret_below_ftrl_bound(reg, strategy):
    T, etas = 1000, np.array([0.03, 0.3])
    A = random_game(5, seed=3)
    r = play(A, FTRL(reg, etas), strategy, T)
    h = regularizer(reg)
    bound = h.range(5, T) / etas + etas * r.dual_sq / (2 * h.mu)
    if reg == "log_barrier":  # smoothed comparator: + (2/T) sum_t ||l_t||_inf <= 2 max |A|
        bound += 2.0 * np.abs(A).max()
    assert np.all(r.regret <= bound)
    assert np.all(r.regret >= -1e-9) or strategy.name == "Uniform"  # exploited learners have regret >= 0


def test_ftrl_regret_bound_formula():
    loss = np.random.default_rng(0).uniform(-1, 1, (100, 4))
    eta = 0.1
    assert ftrl_regret_bound("entropic", loss, eta) == pytest.approx(
        math.log(4) / eta + eta * np.sum(np.max(np.abs(loss), 1) ** 2) / 2)
    assert ftrl_regret_bound("euclidean", loss, eta) == pytest.approx(
        (0.5 - 1 / 8) / eta + eta * np.sum(loss ** 2) / 2)


def test_susceptibility_predictions_match_spec():
    """Spec review: on the E4 game at T = 1e4, Sus = 2.73 / 0.615 / 0.590 / 0.358 (tsallis-0.5, tsallis-1.5,
    entropic, euclidean) with sigma_alt(entropic) = 0.0816."""
    A = core_appendix_game(3, 4, seed=0, xi_scale=0.0)
    s = solve_game(A)
    d, score = search_delta(A, s)
    sig_ent = 0.5 * score * regularizer("entropic").hessian_scale(s.k)
    assert sig_ent == pytest.approx(0.0816, abs=1e-4)
    want = {"tsallis-0.5": 2.73, "tsallis-1.5": 0.615, "entropic": 0.590, "euclidean": 0.358}
    for reg, sus in want.items():
        sig = 0.5 * score * regularizer(reg).hessian_scale(s.k)
        assert predicted_susceptibility(reg, s.m, s.k, sig, 10_000) == pytest.approx(sus, abs=2e-3)
    assert matched_eta("entropic", 7, 10_000) == pytest.approx(math.sqrt(2 * math.log(7) / 1e4))
    val, eta = price_of_best_response(math.log(7 / 3), 0.0816, 1000)
    assert val == pytest.approx(16.63, abs=0.01)


def test_price_of_best_response_e4_values():
    """Spec E4: min_eta S_T = 16.34 / 52.32 at T = 1e3 / 1e4 on the eta grid logspace(-3, 0, 25)."""
    A = core_appendix_game(3, 4, seed=0, xi_scale=0.0)
    etas = np.logspace(-3, 0, 25)
    for T, want, at in ((1000, 16.34, 0.1), (10_000, 52.32, 0.0316)):
        S = play(A, FTRL("entropic", etas), SweepThenAlternate(), T).total
        assert S.min() == pytest.approx(want, abs=0.01)
        assert etas[np.argmin(S)] == pytest.approx(at, rel=0.01)


@pytest.mark.parametrize("call, match", [
    (lambda: solve_game(np.zeros(3)), "A must be 2-dimensional"),
    (lambda: solve_game(np.zeros((2, 0))), "A must"),
    (lambda: solve_game([[0.0, np.inf]]), "A must be finite"),
    (lambda: core_appendix_game(1, 2), "k must be"),
    (lambda: core_appendix_game(3, -1), "n_sub"),
    (lambda: core_appendix_game(3, 2, gaps=[0.1]), "gaps"),
    (lambda: core_appendix_game(3, 1, gaps=[-0.1]), "gaps"),
    (lambda: core_appendix_game(3, 0, f=[1.0, 0.0, 0.0]), "f must sum to 0"),
    (lambda: continuous_surplus("entropic", CHECK4_GAPS, -0.1, 10), "eta"),
    (lambda: continuous_surplus("entropic", CHECK4_GAPS, float("nan"), 10), "eta"),
    (lambda: fixed_surplus_curve("entropic", CHECK4_GAPS, 0.1, 0), "T"),
    (lambda: sandwich("entropic", [-0.5, 0.0], 0.1, 10), "gaps"),
    (lambda: sweeping_limit("entropic", 3, 4, 0.1), "k"),
    (lambda: search_delta(CHECK5_GAME, n_directions=0), "n_directions"),
    (lambda: price_of_best_response(-1.0, 0.1, 10), "sigma_sweep"),
])
def test_bad_input_of_games_and_predictions(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.01, 1.0), min_size=1, max_size=6), st.integers(1, 4),
       st.floats(0.005, 1.0), st.integers(1, 3000), st.sampled_from(DEFAULT_FIVE))
def test_sandwich_property(sub_gaps, k, eta, T, reg):
    """0 <= S_T - S_cont(T) <= f(0) = mean(Delta) for any gaps, eta, T and regularizer."""
    gaps = np.r_[np.zeros(k), sub_gaps]
    S = fixed_surplus_curve(reg, gaps, eta, T)[-1]
    lo, hi = sandwich(reg, gaps, eta, T)
    tol = 1e-9 * max(1.0, abs(S))
    assert lo - tol <= S <= hi + tol
