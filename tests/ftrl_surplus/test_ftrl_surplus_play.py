"""The simulator: fast path == reference loop, determinism (check 8), strategies, learners, bad input."""

import numpy as np
import pytest

from neurips26.ftrl_surplus import (FTRL, AADConstant, Alternating, Fixed, FixedMaxMin, MyopicBestResponse,
                                    OptimisticHedge, SweepThenAlternate, Uniform, aad_constant,
                                    continuous_payoff, core_appendix_game, naive_play, play, random_game,
                                    regularizer, search_delta, solve_game)
from neurips26.ftrl_surplus.strategies import aad_constant_batch
from neurips26.ftrl_surplus.uncertainty import bilateral_play, perturbed_model

A = random_game(4, 6, seed=11)


@pytest.mark.parametrize("reg", ["entropic", "euclidean", "tsallis-0.5", "tsallis-1.5", "log_barrier"])
@pytest.mark.parametrize("strategy", [FixedMaxMin(), SweepThenAlternate(), Uniform(), AADConstant("pga", 50)])
def test_open_loop_fast_path_equals_reference_loop(reg, strategy):
    lr = FTRL(reg, [0.05, 0.3])
    fast = play(A, lr, strategy, 400, engine="open_loop")
    ref = play(A, lr, strategy, 400, engine="loop")
    assert fast.engine == "open_loop" and ref.engine == "loop"
    np.testing.assert_allclose(fast.payoff, ref.payoff, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(fast.regret, ref.regret, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(fast.final_y, ref.final_y, atol=1e-10)


def test_optimistic_and_noisy_fast_path_equal_loop():
    # T = 4200 crosses the fast path's chunk (4096 rounds) and the loop's re-centring (every 1024)
    for lr, noise, T in ((OptimisticHedge([0.1, 0.5]), 0.0, 4200), (FTRL("euclidean", 0.1), 0.2, 1200)):
        a = play(A, lr, SweepThenAlternate(), T, engine="loop", loss_noise=noise, seed=3)
        b = play(A, lr, SweepThenAlternate(), T, engine="open_loop", loss_noise=noise, seed=3)
        np.testing.assert_allclose(a.payoff, b.payoff, rtol=1e-8, atol=1e-10)


def test_batch_is_the_same_as_separate_runs_and_the_naive_loop():
    games = np.stack([random_game(4, 6, seed=s) for s in range(3)])
    batch = play(games, FTRL("tsallis-0.5", 0.1), MyopicBestResponse(), 150)
    for b in range(3):
        one = play(games[b], FTRL("tsallis-0.5", 0.1), MyopicBestResponse(), 150)
        np.testing.assert_allclose(batch.payoff[b], one.payoff[0], rtol=1e-12)
        reg = regularizer("tsallis-0.5")

        def br(t, y, G=games[b]):
            x = np.zeros(4)
            x[np.argmax(G @ y)] = 1
            return x
        assert naive_play(games[b], reg, 0.1, br, 150) == pytest.approx(batch.payoff[b].sum(), rel=1e-12)


def test_determinism_same_seed_same_arrays():
    for kw in ({}, {"loss_noise": 0.1}):
        a = play(A, FTRL("entropic", [0.1, 0.2], feedback="bandit"), MyopicBestResponse(), 400, seed=5, **kw)
        b = play(A, FTRL("entropic", [0.1, 0.2], feedback="bandit"), MyopicBestResponse(), 400, seed=5, **kw)
        np.testing.assert_array_equal(a.surplus, b.surplus)
    c = play(A, FTRL("entropic", 0.1, feedback="bandit"), MyopicBestResponse(), 400, seed=6)
    assert not np.array_equal(c.surplus[0], a.surplus[0])


def test_bandit_learner_is_unbiased_on_average():
    """Importance weighting: the bandit learner's mean trajectory tracks the full-feedback one."""
    games = np.broadcast_to(A, (400,) + A.shape)
    full = play(A, FTRL("entropic", 0.05), Uniform(), 50)
    band = play(games, FTRL("entropic", 0.05, feedback="bandit"), Uniform(), 50, seed=1)
    assert band.engine == "loop"
    assert abs(band.payoff[:, -1].mean() - full.payoff[0, -1]) < 4 * band.payoff[:, -1].std() / 20 + 1e-3


def test_myopic_best_response_earns_at_least_the_value():
    r = play(A, FTRL("euclidean", 0.2), MyopicBestResponse(), 500)
    assert np.all(r.surplus >= -1e-12)  # max_i (A y)_i >= v for every y


def test_alternating_explicit_delta_and_validation():
    s = solve_game(A)
    d, _ = search_delta(A, s)
    a = play(A, FTRL("entropic", 0.1), Alternating(d), 800)
    b = play(A, FTRL("entropic", 0.1), SweepThenAlternate(), 800)
    np.testing.assert_allclose(a.payoff, b.payoff)
    with pytest.raises(ValueError, match="delta must sum to 0"):
        play(A, FTRL("entropic", 0.1), Alternating(d + 0.01), 10)
    with pytest.raises(ValueError, match="delta makes x"):
        play(A, FTRL("entropic", 0.1), Alternating(d * 10), 10)


def test_aad_constant_pga_equals_cvxpy_and_beats_x_star():
    pytest.importorskip("cvxpy")
    reg = regularizer("entropic")
    for eta in (0.05, 0.2):
        xc = aad_constant(A, reg, eta, 2000, "cvxpy")
        xp = aad_constant(A, reg, eta, 2000, "pga", 600)
        jc, jp, js = (continuous_payoff(A, reg, eta, 2000, x)[0] for x in (xc, xp, solve_game(A).x_star))
        assert jp == pytest.approx(jc, rel=1e-6) and jp >= js - 1e-9
    xs = aad_constant_batch(np.stack([A, A]), regularizer("euclidean"), [0.05, 0.2], 2000)
    assert xs.shape == (2, 4) and np.allclose(xs.sum(1), 1)


def test_bilateral_noise_variants():
    G = core_appendix_game(3, 4, seed=0, xi_scale=0.0)
    lr = FTRL("entropic", 0.05)
    clean = play(G, lr, SweepThenAlternate(), 500).total[0]
    assert bilateral_play(G, lr, SweepThenAlternate(), 500, 0.0, 0.0).total[0] == pytest.approx(clean)
    grid = bilateral_play(G, lr, MyopicBestResponse(), 300, np.array([0.0, 0.1]), 0.05, "B", seed=2).total
    assert grid.shape == (2,)
    # variant A with sigma_o = sigma_l = 0 is the exact best response too (its model is exact)
    a = bilateral_play(G, lr, MyopicBestResponse(), 300, 0.0, 0.0, "A").total[0]
    assert a == pytest.approx(play(G, lr, MyopicBestResponse(), 300).total[0])
    assert perturbed_model(G, [0.0, 0.3]).shape == (2,) + G.shape
    with pytest.raises(ValueError, match="sigma_o"):
        perturbed_model(G, -0.1)
    with pytest.raises(ValueError, match="sigma_l"):
        bilateral_play(G, lr, FixedMaxMin(), 10, 0.0, -1.0)
    with pytest.raises(ValueError, match="variant"):
        bilateral_play(G, lr, FixedMaxMin(), 10, variant="C")


@pytest.mark.parametrize("call, match", [
    (lambda: play(np.zeros(3), FTRL(), FixedMaxMin(), 10), "A must be"),
    (lambda: play(np.zeros((0, 3)), FTRL(), FixedMaxMin(), 10), "A must"),
    (lambda: play([[1.0, np.nan]], FTRL(), FixedMaxMin(), 10), "A must be finite"),
    (lambda: play(A, FTRL("entropic", 0.0), FixedMaxMin(), 10), "eta"),
    (lambda: play(A, FTRL("entropic", np.inf), FixedMaxMin(), 10), "eta"),
    (lambda: play(A, FTRL("entropic", -1.0), FixedMaxMin(), 10), "eta"),
    (lambda: play(A, FTRL(), FixedMaxMin(), 0), "T"),
    (lambda: play(A, FTRL(), FixedMaxMin(), 10, engine="fast"), "engine"),
    (lambda: play(A, FTRL(), MyopicBestResponse(), 10, engine="open_loop"), "open_loop"),
    (lambda: play(A, FTRL(), FixedMaxMin(), 10, loss_noise=-0.1), "loss_noise"),
    (lambda: FTRL("nope"), "regularizer"),
    (lambda: FTRL("tsallis", 0.1).__class__("tsallis-1", 0.1), "q"),
    (lambda: FTRL(feedback="partial"), "feedback"),
    (lambda: Fixed([0.5, 0.6]), "x must lie in the simplex"),
    (lambda: Fixed([1.2, -0.2]), "x must lie in the simplex"),
    (lambda: play(A, FTRL(), Fixed([0.5, 0.5]), 10), "x must have 4"),
    (lambda: play(A, FTRL(), FixedMaxMin(), 10, model=np.zeros((3, 3))), "model"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_type_errors():
    with pytest.raises(TypeError, match="learner"):
        play(A, "entropic", FixedMaxMin(), 10)
    with pytest.raises(TypeError, match="strategy"):
        play(A, FTRL(), "FixedMaxMin", 10)
    with pytest.raises(TypeError, match="T"):
        play(A, FTRL(), FixedMaxMin(), 10.5)


def test_log_barrier_limit_warns_not_raises():
    from neurips26.ftrl_surplus import sweeping_limit
    with pytest.warns(RuntimeWarning):
        assert sweeping_limit("log_barrier", 5, 2, 0.1) == float("inf")


def test_ftrl_equality_with_eta_grids():
    assert FTRL("entropic", [0.1, 0.2]) == FTRL("entropic", np.array([0.1, 0.2]))
    assert FTRL("entropic", [0.1, 0.2]) != FTRL("entropic", [0.1, 0.3])
    assert FTRL("tsallis-0.5", 0.1) != FTRL("tsallis-1.5", 0.1)
    assert OptimisticHedge(0.1).name == "optimistic-entropic"
