"""The bound U(M, omega), the generative closed form, the navigation allocation (checks 2-5, 13)."""

import numpy as np
import pytest

from neurips26.nas import (
    NavigationAllocator,
    U,
    bound_terms,
    generative_optimum,
    random_mdp,
    riverswim,
    stationary_state_action,
    uniform_allocation,
)
from neurips26.nas.allocation import generative_allocation_cvxpy
from neurips26.nas.bound import T4_MD_EXPONENT
from neurips26.nas.connectivity import navigation_residual


def _terms(m, bound="primary"):
    return bound_terms(m.P, m.r, m.gamma, bound)


def test_bound_terms_match_hand_formulas():
    m = random_mdp(3, 2, seed=5)
    V, Q, pi = m.solve().V, m.solve().Q, m.solve().pi
    t = _terms(m)
    g = m.gamma
    dm = min(V[s] - Q[s, a] for s in range(3) for a in range(2) if a != pi[s])
    EV = np.einsum("sat,t->sa", m.P, V)
    for s in range(3):
        for a in range(2):
            if a == pi[s]:
                assert t.c[s, a] == 0
                continue
            gap = V[s] - Q[s, a]
            var = sum(m.P[s, a, x] * (V[x] - EV[s, a]) ** 2 for x in range(3))
            md = max(abs(V[x] - EV[s, a]) for x in range(3))
            t2 = max(16 * var / gap ** 2, 6 * md ** (4 / 3) / gap ** (4 / 3))
            assert t.c[s, a] == pytest.approx(t2, rel=1e-9)
            assert t.d[s, a] == 0
    opt = [(s, pi[s]) for s in range(3)]
    var_max = max(sum(m.P[s, a, x] * (V[x] - EV[s, a]) ** 2 for x in range(3)) for s, a in opt)
    md_max = max(max(abs(V[x] - EV[s, a]) for x in range(3)) for s, a in opt)
    t4 = min(max(27 / (dm ** 2 * (1 - g) ** 3), 8 / (dm ** 2 * (1 - g) ** 2.5),
                 14 * md_max ** T4_MD_EXPONENT / (dm ** (4 / 3) * (1 - g) ** (4 / 3))),
             max(16 * var_max / (dm ** 2 * (1 - g) ** 2), 6 * md_max / (dm ** (4 / 3) * (1 - g) ** (4 / 3))))
    assert t.d[0, pi[0]] == pytest.approx(t4, rel=1e-9)


def test_generative_closed_form_matches_cvxpy_on_20_instances():
    for seed in range(20):
        m = random_mdp(2 + seed % 3, 2 + seed % 2, seed=100 + seed)
        t = _terms(m)
        w, u_gen = generative_optimum(t)
        assert w.sum() == pytest.approx(1, abs=1e-12)
        assert t.value(w) == pytest.approx(u_gen, rel=1e-12)
        w_cvx = generative_allocation_cvxpy(t)
        assert t.value(w_cvx) == pytest.approx(u_gen, rel=1e-4)
        # it is the minimum over the simplex: random allocations never beat it
        rng = np.random.default_rng(seed)
        for _ in range(20):
            x = rng.dirichlet(np.ones(t.c.size)).reshape(t.c.shape)
            assert t.value(x) >= u_gen * (1 - 1e-12)


@pytest.mark.parametrize("mode", ["parametric", "dpp", "rebuild"])
def test_navigation_solution_feasible_and_ordered(mode):
    for seed in range(6):
        m = random_mdp(3, 2 + seed % 2, seed=200 + seed)
        t = _terms(m)
        a = NavigationAllocator(m.S, m.A, mode=mode).solve(m.P, t)
        assert a.sane
        assert navigation_residual(m.P, a.omega) <= 1e-7
        assert a.omega.min() >= 0 and a.omega.sum() == pytest.approx(1, abs=1e-12)
        assert a.value_gen * (1 - 1e-6) <= a.value <= a.value_uniform * (1 + 1e-6)
        assert a.value == pytest.approx(t.value(a.omega), rel=1e-12)


def test_parametric_problem_compiled_once_and_reused_across_pi_star_changes():
    alloc = NavigationAllocator(3, 2)
    seen = set()
    values = []
    for seed in range(5):
        m = random_mdp(3, 2, seed=300 + seed)
        t = _terms(m)
        seen.add(tuple(t.pi))
        a = alloc.solve(m.P, t)
        values.append((a.value, NavigationAllocator(3, 2, mode="rebuild").solve(m.P, t).value,
                       NavigationAllocator(3, 2, mode="dpp").solve(m.P, t).value))
        if seed == 0:
            prob, fast = alloc._problems["CLARABEL"][0], alloc._affine
    assert prob.is_dpp() and fast
    assert len(seen) > 1                                # pi* changed between solves
    assert alloc._problems["CLARABEL"][0] is prob       # same compiled object, no recompilation
    assert alloc._affine is fast
    for par, reb, dpp in values:
        assert par == pytest.approx(reb, rel=1e-5) and dpp == pytest.approx(reb, rel=1e-5)


def test_sanity_check_falls_back_when_solver_returns_garbage(monkeypatch):
    m = random_mdp(3, 2, seed=1)
    t = _terms(m)
    alloc = NavigationAllocator(3, 2)
    good = alloc.solve(m.P, t)
    calls = []

    def bad(solver, P, c, d):
        calls.append(solver)
        x = np.full((3, 2), 1e-9)
        x[0, 0] = 1.0                                   # far from optimal: fails U <= U(omega_u)
        return x

    monkeypatch.setattr(alloc, "_raw_solve", bad)
    a = alloc.solve(m.P, t)
    assert calls == ["CLARABEL", "SCS"]                 # SCS fallback tried
    assert not a.sane and a.solver in ("last_valid", "uniform")
    assert a.value <= a.value_uniform * (1 + 1e-9)
    assert a.value == pytest.approx(good.value, rel=1e-6)   # kept the last valid omega
    assert navigation_residual(m.P, a.omega) <= 1e-7
    monkeypatch.setattr(alloc, "_raw_solve", lambda *a: None)   # raised / non-finite
    assert alloc.solve(m.P, t).solver in ("last_valid", "uniform")


def test_u_convex_and_homogeneous():
    m = random_mdp(3, 2, seed=3)
    t = _terms(m)
    rng = np.random.default_rng(0)
    for _ in range(200):
        x, y = (rng.dirichlet(np.ones(6)).reshape(3, 2) + 1e-3 for _ in range(2))
        lam = rng.uniform()
        assert t.value(lam * x + (1 - lam) * y) <= lam * t.value(x) + (1 - lam) * t.value(y) + 1e-9
        c = rng.uniform(0.1, 10)
        assert t.value(c * x) == pytest.approx(t.value(x) / c, rel=1e-12)


def test_stationary_laws_lie_in_omega_and_oracle_chain_returns_omega_star():
    m = random_mdp(4, 3, seed=4)
    rng = np.random.default_rng(1)
    for _ in range(10):
        pi = rng.dirichlet(np.ones(3), size=4)
        w = stationary_state_action(m.P, pi)
        assert navigation_residual(m.P, w) <= 1e-12 and w.min() > 0
        np.testing.assert_allclose(w / w.sum(axis=1, keepdims=True), pi, atol=1e-12)
    a = NavigationAllocator(4, 3).solve(m.P, _terms(m))
    np.testing.assert_allclose(stationary_state_action(m.P, a.policy), a.omega, atol=1e-6)


def test_klbts_random_bound_dominates_primary():
    rng = np.random.default_rng(2)
    for seed in range(10):
        m = random_mdp(3, 2, seed=seed)
        p, k = _terms(m), _terms(m, "klbts_random")
        for _ in range(20):
            w = rng.dirichlet(np.ones(6)).reshape(3, 2)
            assert k.value(w) >= p.value(w)
        assert (k.c >= p.c).all() and (k.d >= p.d).all()
        mr = _terms(m, "mrnas")
        assert np.isfinite(mr.value(w)) and mr.value(w) > 0


def test_riverswim_bound_is_large():
    m = riverswim(3)
    a = NavigationAllocator(3, 2).solve(m.P, _terms(m))
    assert a.sane and a.value > 1e5          # calibration: U_o ~ 1.6e5 at gamma = 0.5


def test_U_validates_allocation():
    m = random_mdp(2, 2, seed=0)
    ok = np.full((2, 2), 0.25)
    assert U(m, ok) > 0
    with pytest.raises(ValueError, match="omega"):
        U(m, np.array([[0.5, 0.5], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="omega"):
        U(m, ok * 2)
    with pytest.raises(ValueError, match="omega"):
        U(m, np.full((3, 2), 1 / 6))
    with pytest.raises(ValueError, match="bound"):
        U(m, ok, bound="nope")
    with pytest.raises(TypeError, match="mdp"):
        U("not an mdp", ok)
    assert uniform_allocation(m.P).sum() == pytest.approx(1)


def test_characteristic_time_estimate_below_U():
    from neurips26.nas.diagnostics import characteristic_time_estimate

    m = random_mdp(2, 2, seed=14)
    t = _terms(m)
    a = NavigationAllocator(2, 2).solve(m.P, t)
    est = characteristic_time_estimate(m, a.omega)
    assert not est["alt_empty"] and 0 < est["T"] <= a.value        # T(M, omega) <= U(M, omega)
    # the confusing model found really is in Alt(M) and costs what it says: a KL > 0
    assert est["inf_kl"] > 0
    # deterministic rewards with large reward gaps: no transition model flips pi* -> Alt(M) empty, T = 0
    m2 = random_mdp(2, 2, seed=2)
    est2 = characteristic_time_estimate(m2, NavigationAllocator(2, 2).solve(m2.P, _terms(m2)).omega)
    assert est2["alt_empty"] and est2["T"] == 0
