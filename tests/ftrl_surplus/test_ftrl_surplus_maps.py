"""Acceptance check 1: mirror maps in the simplex, KKT, shift invariance, grad Phi by finite differences,
entropic FTRL == multiplicative weights; H_inf against finite differences; cvxpy projections."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.ftrl_surplus import (DEFAULT_FIVE, FTRL, Euclidean, Tsallis, h_inf, multiplicative_weights,
                                    regularizer)

REGS = DEFAULT_FIVE + ("tsallis-0.25", "tsallis-2")


def thetas(seed=0, B=40, m=7, scale=5.0):
    rng = np.random.default_rng(seed)
    th = rng.normal(size=(B, m)) * scale
    th[0] = 0.0                              # all equal
    th[1] = [0, -1e3] + [-1e3] * (m - 2)     # one dominant coordinate
    th[2, :2] = 3.0                          # ties at the top
    return th


@pytest.mark.parametrize("name", REGS)
def test_map_in_simplex_kkt_and_shift_invariant(name):
    reg = regularizer(name)
    th = thetas()
    y = reg.mirror(th)
    assert np.all(y >= 0) and np.allclose(y.sum(axis=1), 1.0, atol=1e-12, rtol=0)
    # KKT: phi'(y_j) - theta_j is the same constant (-lambda) on the support ...
    on = y > 1e-300
    g = np.where(on, reg.dphi(np.where(on, y, 1.0)) - th, np.nan)
    spread = np.nanmax(g, axis=1) - np.nanmin(g, axis=1)
    assert np.all(spread <= 1e-9 * np.maximum(1.0, np.nanmax(np.abs(g), axis=1)))
    # ... and off the support (non-steep only) phi'(0) - theta_j >= -lambda
    if not reg.steep:
        lam = -np.nanmin(g, axis=1)
        off = ~on
        lhs = reg.dphi(np.zeros_like(y)) - th + lam[:, None]
        assert np.all(lhs[off] >= -1e-9)
    else:
        assert np.all(y[:, :] > 0) or name == "entropic"  # steep maps keep full support
    shifted = reg.mirror(th + np.random.default_rng(1).normal(size=(th.shape[0], 1)) * 100)
    np.testing.assert_allclose(shifted, y, atol=1e-11)
    # a single row is the same as the batch row
    np.testing.assert_allclose(reg.mirror(th[5]), y[5], atol=1e-15)


@pytest.mark.parametrize("name", REGS)
def test_map_is_gradient_of_potential(name):
    reg = regularizer(name)
    th = thetas(2, B=6, m=5, scale=1.5)
    y = reg.mirror(th)
    eps = 1e-5
    for b in range(th.shape[0]):
        for j in range(th.shape[1]):
            e = np.zeros(th.shape[1])
            e[j] = eps
            fd = (reg.potential(th[b] + e) - reg.potential(th[b] - e)) / (2 * eps)
            assert abs(fd - y[b, j]) <= 1e-6 * max(1.0, abs(y[b, j])) + 1e-9


@pytest.mark.parametrize("name", ["entropic", "euclidean", "tsallis-0.5", "tsallis-1.5", "log_barrier"])
def test_h_inf_matches_finite_differences_of_the_map(name):
    """H_inf = P_O / phi''(1/k): the Jacobian of grad Phi at a theta with argmax set O (y = u_O)."""
    reg = regularizer(name)
    m, opt = 6, np.array([True, True, True, False, False, False])
    th = np.where(opt, 0.0, -50.0 if not reg.steep else -1e7)
    if name == "log_barrier":
        th = np.where(opt, 0.0, -1e12)
    eps = 1e-7 if name != "log_barrier" else 1e-9
    J = np.zeros((m, m))
    for j in range(m):
        e = np.zeros(m)
        e[j] = eps
        J[:, j] = (reg.mirror(th + e) - reg.mirror(th - e)) / (2 * eps)
    np.testing.assert_allclose(J, h_inf(reg, opt), atol=2e-4 if reg.steep else 1e-7)


def test_entropic_ftrl_equals_multiplicative_weights():
    rng = np.random.default_rng(3)
    losses = rng.uniform(-1, 1, (200, 6))
    mw = multiplicative_weights(losses, 0.3)
    L = np.vstack([np.zeros(6), np.cumsum(losses, axis=0)[:-1]])
    ftrl = FTRL("entropic", 0.3).respond(L, None, np.full(200, 0.3))
    np.testing.assert_allclose(ftrl, mw, rtol=1e-12, atol=1e-15)


def test_euclidean_is_the_simplex_projection_and_tsallis2_is_twice_euclidean():
    rng = np.random.default_rng(4)
    th = rng.normal(size=(50, 5))
    y = Euclidean().mirror(th)
    # the projection: <theta - y, z - y> <= 0 for the vertices z (variational inequality)
    for z in np.eye(5):
        assert np.all(np.einsum("bm,bm->b", th - y, z - y) <= 1e-12)
    # Tsallis-2: phi = y^2 - y = 2 (y^2/2) - y: its map at theta is Euclidean's at theta/2
    np.testing.assert_allclose(Tsallis(2.0).mirror(th), Euclidean().mirror(th / 2), atol=1e-12)


def test_tsallis_tends_to_entropic():
    th = thetas(5, B=5, m=4, scale=1.0)
    np.testing.assert_allclose(Tsallis(1 - 1e-6).mirror(th), regularizer("entropic").mirror(th), atol=1e-5)


def test_log_barrier_newton_from_the_left_survives_the_pole_case():
    y = regularizer("log_barrier").mirror(np.array([0.0, -10.0, -10.0]))
    lam = 1 / y[0]
    np.testing.assert_allclose(y, 1 / (lam - np.array([0.0, -10.0, -10.0])), rtol=1e-12)
    assert abs(y.sum() - 1) < 1e-12 and np.all(y > 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-30, 30), min_size=2, max_size=9), st.sampled_from(REGS))
def test_map_properties_hypothesis(vals, name):
    reg = regularizer(name)
    th = np.array(vals)
    y = reg.mirror(th)
    assert np.all(y >= 0) and abs(y.sum() - 1) <= 1e-12
    # monotone: a larger theta_j never gets less mass
    order = np.argsort(th, kind="stable")
    assert np.all(np.diff(y[order]) >= -1e-12)


def test_maps_match_cvxpy_on_small_cases():
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(6)
    for _ in range(3):
        th = rng.normal(size=5) * 2
        y = cp.Variable(5)
        cp.Problem(cp.Minimize(cp.sum_squares(y - th)), [y >= 0, cp.sum(y) == 1]).solve()
        np.testing.assert_allclose(Euclidean().mirror(th), y.value, atol=1e-6)
        # exponential-cone solves are accurate to ~1e-5: ours must be at least as good an optimum
        for name, obj in (("entropic", lambda v: th @ v + cp.sum(cp.entr(v))),
                          ("log_barrier", lambda v: th @ v + cp.sum(cp.log(v)))):
            y = cp.Variable(5)
            prob = cp.Problem(cp.Maximize(obj(y)), [cp.sum(y) == 1])
            prob.solve()
            ours = regularizer(name).mirror(th)
            assert float(th @ ours - regularizer(name).h(ours)) >= prob.value - 1e-7
            np.testing.assert_allclose(ours, y.value, atol=1e-3)


@pytest.mark.parametrize("bad, err", [(("tsallis", 1.0), ValueError), (("tsallis", 0.0), ValueError),
                                      (("tsallis", 2.5), ValueError), (("nope", None), ValueError),
                                      (("tsallis-x", None), ValueError)])
def test_bad_regularizer(bad, err):
    with pytest.raises(err, match="q|regularizer"):
        regularizer(*bad)


def test_bad_theta():
    with pytest.raises(ValueError, match="theta"):
        regularizer("entropic").mirror([0.0, np.nan])
    with pytest.raises(ValueError, match="theta"):
        regularizer("euclidean").mirror(np.zeros((2, 2, 2)))
