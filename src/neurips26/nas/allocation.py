"""The navigation-constrained optimal allocation  U_o(M) = min_{omega in Omega(M)} U(M, omega).

Convex program (max of c/omega terms) over the stationary state-action frequencies

    Omega(M) = {omega >= 0, sum omega = 1, sum_a omega_sa = sum_{s',a'} p(s|s',a') omega_s'a'  for all s}.

It is written once per (S, A) as a DPP-parametrised cvxpy problem -- Parameters P^T (S x SA), c, d
(non-negative, masked by pi*) -- so re-solving for a new empirical model M_t (even with a new pi*)
needs no recompilation. Solver Clarabel, fallback SCS (its own Problem object). After every solve:
clip omega >= 1e-12, map it onto Omega(M) exactly (stationary state-action law of the induced policy
pi(a|s) = omega_sa / sum_b omega_sb), re-evaluate U exactly and check
U_o^gen <= U_o <= U(M, omega_u) within 1e-6 relative; else SCS; else keep the last valid omega.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.nas.bound import BoundTerms, generative_optimum, terms_of
from neurips26.nas.connectivity import stationary_state_action

log = logging.getLogger(__name__)

SANITY_RTOL = 1e-6
CLIP = 1e-12


@dataclass(frozen=True)
class Allocation:
    """A solved allocation: omega in Omega(M) (S, A), its exact U, the generative optimum, U(omega_u),
    which solver produced it, and whether it passed the sanity check."""

    omega: np.ndarray
    value: float
    value_gen: float
    value_uniform: float
    solver: str
    sane: bool

    @property
    def policy(self) -> np.ndarray:
        """Oracle policy pi^o(a|s) = omega*_sa / sum_b omega*_sb (uniform on a row without mass)."""
        return induced_policy(self.omega)


def induced_policy(omega: np.ndarray) -> np.ndarray:
    """pi(a|s) = omega_sa / sum_b omega_sb; rows with (numerically) no mass get the uniform policy."""
    omega = np.asarray(omega, dtype=float)
    tot = omega.sum(axis=1, keepdims=True)
    A = omega.shape[1]
    safe = np.where(tot > 1e-300, tot, 1.0)
    return np.where(tot > 1e-300, omega / safe, 1.0 / A)


def project_to_omega(P: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """Clip omega >= 1e-12 and replace it by the stationary law of its induced policy (in Omega(M))."""
    w = np.maximum(np.asarray(omega, dtype=float), CLIP)
    return stationary_state_action(P, induced_policy(w))


def uniform_allocation(P: np.ndarray) -> np.ndarray:
    """omega_u: the stationary state-action law of the uniform policy."""
    S, A, _ = P.shape
    return stationary_state_action(P, np.full((S, A), 1.0 / A))


def _cvxpy():
    try:
        import cvxpy as cp
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("the navigation allocation needs cvxpy and clarabel: "
                          "pip install 'neurips26[nas]'") from e
    return cp


def _build(S: int, A: int, parametric: bool, P=None, c=None, d=None):
    """Build the problem; parametric=True gives the DPP form (Parameters), else constants."""
    cp = _cvxpy()
    n = S * A
    w = cp.Variable(n)
    E = np.kron(np.eye(S), np.ones((1, A)))                  # E[s, (s,a)] = 1: sum_a omega_sa
    if parametric:
        Pt = cp.Parameter((S, n), name="Pt")
        cc = cp.Parameter(n, nonneg=True, name="c")
        dd = cp.Parameter(n, nonneg=True, name="d")
    else:
        Pt, cc, dd = P.reshape(n, S).T, c.reshape(-1), d.reshape(-1)
    inv = cp.inv_pos(w)
    objective = cp.max(cp.multiply(cc, inv)) + cp.max(cp.multiply(dd, inv))
    # sum_a omega_sa = sum_{s',a'} p(s|s',a') omega_s'a' ; the S-th row is implied by sum omega = 1
    constraints = [cp.sum(w) == 1, (E - Pt)[: S - 1] @ w == 0, w >= 0]
    prob = cp.Problem(cp.Minimize(objective), constraints)
    return prob, w, (Pt, cc, dd)


class NavigationAllocator:
    """Solve U_o(M) = min_{Omega(M)} U(M, .) for MDPs of one size (S, A), compiled once.

    ``mode="parametric"`` (default): the DPP problem is compiled once by cvxpy; since DPP makes the
    conic data (q, A, b) affine in the Parameters, that affine map is read off once (probing the
    compiled problem with unit parameter values, then verified at a random point against cvxpy's own
    ``apply``) and each solve is three mat-vecs plus a direct Clarabel call -- no cvxpy Python on
    the hot path. ``mode="dpp"``: the same compiled Problem, re-solved through ``Problem.solve`` with
    new Parameter values. ``mode="rebuild"``: a fresh cvxpy Problem every call (what the public
    MR-NaS ``solve_bound`` does) -- kept for the benchmark. The SCS fallback always goes through
    ``Problem.solve``. ``scale=True`` divides c, d by
    max(T2, T4) before solving (better conditioned); U is always re-evaluated exactly afterwards.
    """

    def __init__(self, S: int, A: int, mode: str = "parametric", scale: bool = True,
                 solver: str = "CLARABEL", fallback: str | None = "SCS"):
        check_choice(mode, "mode", ("parametric", "dpp", "rebuild"))
        S, A = check_scalar(S, "S", int, min=2), check_scalar(A, "A", int, min=2)
        self.S, self.A, self.mode, self.scale = int(S), int(A), mode, scale
        self.solvers = [solver] + ([fallback] if fallback else [])
        self._problems: dict[str, tuple] = {}
        self._affine: _AffineClarabel | None | bool = None     # False: probing failed, use dpp
        self.n_solves = 0
        self.n_failures = 0         # solver raised or returned a non-finite / insane point
        self.n_insane = 0           # all solvers failed the sanity check (kept the last valid omega)
        self.last_valid: np.ndarray | None = None

    # -- problem objects -------------------------------------------------------------------------
    def _problem(self, solver: str):
        if solver not in self._problems:
            self._problems[solver] = _build(self.S, self.A, parametric=True)
        return self._problems[solver]

    def _discard(self, solver: str) -> None:
        """A failed solve can poison a Problem object ("Variable value must be real"): rebuild."""
        self._problems.pop(solver, None)

    def _raw_solve(self, solver: str, P: np.ndarray, c: np.ndarray, d: np.ndarray) -> np.ndarray | None:
        cp = _cvxpy()
        S, A = self.S, self.A
        if self.mode == "parametric" and solver == "CLARABEL":
            if self._affine is None:
                try:
                    self._affine = _AffineClarabel(*self._problem(solver))
                except Exception as e:  # pragma: no cover - cvxpy internals changed
                    log.info("affine fast path unavailable (%s); using Problem.solve", e)
                    self._affine = False
            if self._affine:
                x = self._affine.solve(P, c, d)
                return None if x is None else x.reshape(S, A)
        if self.mode in ("parametric", "dpp"):
            prob, w, (Pt, cc, dd) = self._problem(solver)
            Pt.value = P.reshape(S * A, S).T
            cc.value = c.reshape(-1)
            dd.value = d.reshape(-1)
        else:
            prob, w, _ = _build(S, A, parametric=False, P=P, c=c, d=d)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prob.solve(solver=getattr(cp, solver))
            x = w.value
        except Exception as e:  # solver errors are expected on badly scaled instances
            log.debug("allocation solve with %s raised %s", solver, e)
            x = None
        if x is None or not np.all(np.isfinite(x)):
            if self.mode in ("parametric", "dpp"):
                self._discard(solver)
            return None
        return np.asarray(x, dtype=float).reshape(S, A)

    # -- public ----------------------------------------------------------------------------------
    def solve(self, P: np.ndarray, terms: BoundTerms) -> Allocation:
        """omega* in Omega(M) for the model P with bound coefficients ``terms`` (same (S, A))."""
        if P.shape != (self.S, self.A, self.S):
            raise ValueError(f"P must have shape {(self.S, self.A, self.S)}, got {P.shape}")
        self.n_solves += 1
        _, u_gen = generative_optimum(terms)
        w_u = uniform_allocation(P)
        u_unif = terms.value(w_u)
        scale = max(float(terms.c.max()), float(terms.d.max())) if self.scale else 1.0
        scale = scale if scale > 0 and np.isfinite(scale) else 1.0
        lo, hi = u_gen * (1 - SANITY_RTOL), u_unif * (1 + SANITY_RTOL)
        candidates = []
        for solver in self.solvers:
            x = self._raw_solve(solver, P, terms.c / scale, terms.d / scale)
            if x is None:
                self.n_failures += 1
                continue
            omega = project_to_omega(P, x)                       # exact map onto Omega(M)
            value = terms.value(omega)                           # re-evaluate U exactly
            candidates.append((value, omega, solver))
            if lo <= value <= hi:
                self.last_valid = omega
                return Allocation(omega, value, u_gen, u_unif, solver, True)
            self.n_failures += 1
        # every solver failed the sanity check: keep the last valid omega (mapped onto this Omega(M))
        self.n_insane += 1
        if self.last_valid is not None:
            omega = project_to_omega(P, self.last_valid)
            candidates.append((terms.value(omega), omega, "last_valid"))
        candidates.append((u_unif, w_u, "uniform"))
        value, omega, source = min(candidates, key=lambda x: x[0])
        log.info("allocation failed the sanity check (U_gen=%.4g, U_unif=%.4g); using %s (U=%.4g)",
                 u_gen, u_unif, source, value)
        return Allocation(omega, float(value), u_gen, u_unif, source, False)


class _AffineClarabel:
    """The compiled DPP problem as an affine map theta -> (q, A, b) of Clarabel's conic form
    (min q'x s.t. A x + s = b, s in K), read off once by probing; solved by Clarabel directly."""

    def __init__(self, prob, w, params):
        import clarabel
        import cvxpy as cp
        import scipy.sparse as sp
        from cvxpy.reductions.solvers.conic_solvers.clarabel_conif import dims_to_solver_cones

        self._sp, self._clarabel = sp, clarabel
        data, chain, _ = prob.get_problem_data(cp.CLARABEL)
        red, pp = chain.reductions[-1], data["param_prob"]
        self.params = params
        self.sizes = [p.size for p in params]
        self.cones = dims_to_solver_cones(data["dims"])
        self.col = pp.var_id_to_col[w.id]
        self.n_w = w.size
        self.settings = clarabel.DefaultSettings()
        self.settings.verbose = False

        def at(theta):
            self._set(theta)
            dat, _ = red.apply(pp)
            A = dat["A"].toarray() if sp.issparse(dat["A"]) else np.asarray(dat["A"])
            return np.asarray(dat["c"], float), A, np.asarray(dat["b"], float)

        p = sum(self.sizes)
        q0, A0, b0 = at(np.zeros(p))
        self.m, self.n = A0.shape
        Q, Am, B = np.zeros((self.n, p)), np.zeros((self.m * self.n, p)), np.zeros((self.m, p))
        for k in range(p):
            e = np.zeros(p)
            e[k] = 1.0
            q, A, b = at(e)
            Q[:, k], Am[:, k], B[:, k] = q - q0, (A - A0).reshape(-1), b - b0
        self.q0, self.A0, self.b0, self.Q, self.Am, self.B = q0, A0.reshape(-1), b0, Q, sp.csr_matrix(Am), B
        # verify the affine reconstruction at a random point against cvxpy's own data
        theta = np.random.default_rng(0).uniform(0.1, 1.0, size=p)
        q, A, b = at(theta)
        q2, A2, b2 = self._data(theta)
        if not (np.allclose(q, q2) and np.allclose(A, A2) and np.allclose(b, b2)):
            raise RuntimeError("conic data is not affine in the parameters")

    def _set(self, theta):
        i = 0
        for p, k in zip(self.params, self.sizes):
            p.value = theta[i:i + k].reshape(p.shape, order="F")
            i += k

    def _data(self, theta):
        return (self.q0 + self.Q @ theta, (self.A0 + self.Am @ theta).reshape(self.m, self.n),
                self.b0 + self.B @ theta)

    def solve(self, P, c, d):
        S = P.shape[0]
        Pt = P.reshape(-1, S).T
        theta = np.concatenate([Pt.reshape(-1, order="F"), c.reshape(-1), d.reshape(-1)])
        q, A, b = self._data(theta)
        sp = self._sp
        try:
            sol = self._clarabel.DefaultSolver(sp.csc_matrix((self.n, self.n)), q, sp.csc_matrix(A), b,
                                               self.cones, self.settings).solve()
        except Exception as e:
            log.debug("clarabel raised %s", e)
            return None
        if "Solved" not in str(sol.status):
            return None
        return np.asarray(sol.x, float)[self.col:self.col + self.n_w]


def optimal_allocation(mdp, bound: str = "primary", solver: str = "CLARABEL") -> Allocation:
    """U_o(M) and omega*(M) for a user MDP (validated: pi* must be unique)."""
    terms = terms_of(mdp, bound)
    return NavigationAllocator(mdp.S, mdp.A, solver=solver).solve(mdp.P, terms)


def generative_allocation_cvxpy(terms: BoundTerms, solver: str = "CLARABEL") -> np.ndarray:
    """min over the simplex (no navigation constraints) by cvxpy -- the cross-check of the closed form."""
    cp = _cvxpy()
    S, A = terms.S, terms.A
    scale = max(float(terms.c.max()), float(terms.d.max()))
    w = cp.Variable(S * A)
    inv = cp.inv_pos(w)
    obj = cp.max(cp.multiply(terms.c.reshape(-1) / scale, inv)) + \
        cp.max(cp.multiply(terms.d.reshape(-1) / scale, inv))
    prob = cp.Problem(cp.Minimize(obj), [cp.sum(w) == 1, w >= 0])
    prob.solve(solver=getattr(cp, solver))
    x = np.maximum(np.asarray(w.value, dtype=float), CLIP).reshape(S, A)
    return x / x.sum()
