"""Instance-dependent quantities that enter the finite-delta analysis: U_o, U_o^gen, U(omega_u),
connectivity (D, m, eta, t_mix, kappa_M) and curvature proxies of M -> U_o(M), omega*(M).

Curvature (ASSUMPTION on what the paper's "curvature of the optimal characteristic time" means):
  Lip_U     = max over 20 seeded support-preserving perturbations p~ (||p~ - p||_inf = xi) of
              |U_o(M~) - U_o(M)| / xi,
  Lip_omega = max ||omega*(M~) - omega*(M)||_1 / xi,
  quadratic growth = min over the segment omega_lambda = omega* + lambda (omega_u - omega*) of
              (U(M, omega_lambda) - U_o) / ||omega_lambda - omega*||^2.
"""

from __future__ import annotations

import numpy as np

from neurips26.nas.allocation import NavigationAllocator, uniform_allocation
from neurips26.nas.bound import bound_terms
from neurips26.nas.connectivity import diameter, eta, kappa, path_length_m, uniform_mixing_time
from neurips26.nas.mdp import MDP


def perturb(P: np.ndarray, xi: float, rng: np.random.Generator) -> np.ndarray:
    """A support-preserving perturbation with ||P~ - P||_inf = xi (rows stay in the simplex)."""
    Pt = P.copy()
    S, A, _ = P.shape
    for s in range(S):
        for a in range(A):
            supp = np.flatnonzero(P[s, a] > 0)
            if len(supp) < 2:
                continue
            z = rng.normal(size=len(supp))
            z -= z.mean()                                   # zero sum: stays a distribution
            z *= xi / np.abs(z).max()
            # keep entries positive (support preserved)
            room = np.where(z < 0, P[s, a, supp] / np.maximum(-z, 1e-300), np.inf).min()
            if room < 1:
                z *= 0.5 * room
            Pt[s, a, supp] += z
    return Pt


def curvature(mdp: MDP, bound: str = "primary", n_perturb: int = 20, xi: float = 1e-3,
              seed: int = 0) -> dict:
    """Lip_U, Lip_omega and the quadratic-growth ratio (see module docstring)."""
    alloc = NavigationAllocator(mdp.S, mdp.A)
    terms = bound_terms(mdp.P, mdp.r, mdp.gamma, bound)
    base = alloc.solve(mdp.P, terms)
    rng = np.random.default_rng(seed)
    lip_u, lip_w = 0.0, 0.0
    for _ in range(n_perturb):
        Pt = perturb(mdp.P, xi, rng)
        step = float(np.abs(Pt - mdp.P).max())
        if step == 0:
            continue
        tt = bound_terms(Pt, mdp.r, mdp.gamma, bound)
        if not np.array_equal(tt.pi, terms.pi):
            continue
        a = alloc.solve(Pt, tt)
        lip_u = max(lip_u, abs(a.value - base.value) / step)
        lip_w = max(lip_w, float(np.abs(a.omega - base.omega).sum()) / step)
    w_u = uniform_allocation(mdp.P)
    growth = np.inf
    for lam in np.linspace(0.05, 1.0, 20):
        w = base.omega + lam * (w_u - base.omega)
        dist2 = float(((w - base.omega) ** 2).sum())
        if dist2 > 0:
            growth = min(growth, (terms.value(w) - base.value) / dist2)
    return {"lip_U": lip_u, "lip_omega": lip_w, "quad_growth": float(growth),
            "lip_U_rel": lip_u / base.value}


#: the T(M, omega) estimate enumerates vertex kernels: only on instances this small
T_ESTIMATE_MAX_S = 3


def instance_summary(mdp: MDP, bound: str = "primary", with_curvature: bool = False,
                     with_T: bool | None = None) -> dict:
    """U_o, U_o^gen, U(omega_u), Delta_min and the connectivity constants of an MDP; with ``with_T``
    (default: S <= 3) also the information-limit estimate T(M, omega*_U) (>= T*(M); 0 when Alt(M) is
    empty) and U_o / T."""
    sol = mdp.require_identifiable()
    terms = bound_terms(mdp.P, mdp.r, mdp.gamma, bound, sol)
    alloc = NavigationAllocator(mdp.S, mdp.A).solve(mdp.P, terms)
    w_u = uniform_allocation(mdp.P)
    e = eta(mdp.P)
    out = {
        "name": mdp.name, "S": mdp.S, "A": mdp.A, "gamma": mdp.gamma,
        "U_o": alloc.value, "U_gen": alloc.value_gen, "U_uniform": alloc.value_uniform,
        "allocation_sane": alloc.sane, "delta_min": sol.delta_min,
        "omega_star": alloc.omega.tolist(), "omega_u": w_u.tolist(),
        "l1_omega_u_star": float(np.abs(w_u - alloc.omega).sum()),
        "pi_star": sol.pi.tolist(),
        "diameter": diameter(mdp.P), "m": path_length_m(mdp.P), "eta": e["eta"],
        "t_mix": uniform_mixing_time(mdp.P), "kappa": kappa(mdp.P, alloc.omega),
    }
    if with_curvature:
        out.update(curvature(mdp, bound))
    if with_T is None:
        with_T = mdp.S <= T_ESTIMATE_MAX_S
    if with_T:
        est = characteristic_time_estimate(mdp, alloc.omega)
        T = 0.0 if est["alt_empty"] else est["T"]
        out.update({"T_est": T, "alt_empty": est["alt_empty"],
                    "Uo_over_T": alloc.value / T if T > 0 else None})
    return out


def characteristic_time_estimate(mdp: MDP, omega: np.ndarray, n_starts: int = 3) -> dict:
    """Estimate T(M, omega) = 1 / inf_{M' in Alt(M)} sum_sa omega_sa KL(p_sa || p'_sa) (deterministic
    rewards, so only transitions move). Alt(M) is the union over sub-optimal (s, a) of
    {p' : Q'^{pi*}(s, a) >= V'^{pi*}(s)} (pi* stops being optimal in M' iff some one-step deviation
    improves on it). Each piece is minimised by SLSQP over p' on supp(p) (simplex equality
    constraints) from ``n_starts`` starts on the segment from p towards the vertex kernel with the
    largest margin (the first feasible point, then further along). A local optimiser can only
    over-estimate the inf, so this under-estimates T(M, omega): report it as an estimate. Evaluated
    at omega*_U it is the information-limit reference T(M, omega*_U) kl(delta, 1 - delta) >= T*(M)
    kl(delta, 1 - delta). For tiny MDPs (S <= 3).
    """
    from scipy.optimize import minimize

    sol = mdp.require_identifiable()
    S, A = mdp.S, mdp.A
    omega = np.asarray(omega, float)
    P, r, g, pi = mdp.P, mdp.r, mdp.gamma, sol.pi
    idx = np.nonzero(P > 0)
    p0 = P[idx]
    w = omega[idx[0], idx[1]]
    ar = np.arange(S)

    def full(x):
        Q = np.zeros(P.shape)
        Q[idx] = x
        tot = Q.sum(axis=2, keepdims=True)
        return Q / np.where(tot > 0, tot, 1.0)            # safe normalisation inside the optimiser

    def cost(x):
        xn = full(x)[idx]
        return float(np.sum(w * p0 * (np.log(p0) - np.log(np.maximum(xn, 1e-300)))))

    def margin(x, s, a):
        Q = full(x)
        V = np.linalg.solve(np.eye(S) - g * Q[ar, pi], r[ar, pi])
        return float(r[s, a] + g * Q[s, a] @ V - V[s])          # >= 0: (s, a) beats pi* in M'

    import itertools

    pairs = [(u, b) for u in range(S) for b in range(A)]
    supports = [np.flatnonzero(P[u, b] > 0) for u, b in pairs]
    n_vert = int(np.prod([len(x) for x in supports], dtype=float))
    if n_vert > 20_000:
        raise ValueError(f"mdp: too many vertex kernels ({n_vert}) for the T estimate; use S <= 3")
    vertices = list(itertools.product(*supports))
    best = np.inf
    for s in range(S):
        for a in range(A):
            if a == pi[s]:
                continue
            # a feasible direction: the vertex kernel (deterministic transitions on supp(p)) with the
            # largest margin; none with margin >= 0 means this piece of Alt(M) looks empty
            ext, best_m = None, -np.inf
            for choice in vertices:
                Qv = np.zeros(P.shape)
                for (u, b), c in zip(pairs, choice):
                    Qv[u, b, c] = 1.0
                mv = margin(Qv[idx], s, a)
                if mv > best_m:
                    best_m, ext = mv, Qv
            if ext is None or best_m < 0:
                continue
            ext = 0.999 * ext + 0.001 * P                  # keep supp(p') = supp(p)
            lams = [lam for lam in np.linspace(0.0, 1.0, 101)
                    if margin(((1 - lam) * P + lam * ext)[idx], s, a) >= 0]
            if not lams:
                continue                                 # this piece of Alt(M) is empty on supp(p)
            for k in range(n_starts):
                lam = min(1.0, lams[0] * (1 + 0.5 * k))
                x0 = ((1 - lam) * P + lam * ext)[idx]
                res = minimize(cost, x0, method="SLSQP", bounds=[(1e-9, 1.0)] * len(p0),
                               constraints=[{"type": "ineq", "fun": margin, "args": (s, a)}],
                               options={"maxiter": 300, "ftol": 1e-12})
                x = full(np.clip(res.x, 1e-9, 1.0))[idx]
                for cand in (x, x0):
                    if margin(cand, s, a) >= -1e-9:
                        best = min(best, cost(cand))
    return {"inf_kl": float(best), "T": float(1 / best) if best > 0 else float("nan"),
            "alt_empty": bool(best == np.inf)}
