"""Sampling rules: MDP-NaS (with ablations) and the baselines. All share the stopping rule in
``stopping.py``, so only the sampling differs.

An online sampler has ``act(s, t) -> a`` (t = 1, 2, ... the index of the step being taken) and reads
the shared ``EmpiricalModel``. The generative KLB-TS baseline instead picks the pair (s, a) itself.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.nas.allocation import NavigationAllocator
from neurips26.nas.bound import generative_optimum
from neurips26.nas.connectivity import is_communicating
from neurips26.nas.mdp import TIE_TOL, solve_mdp
from neurips26.nas.stopping import EmpiricalModel

EXPLORATION = ("theory", "ergodic", "practical", "fixed")
SCHEDULES = ("geometric", "fixed")


@dataclass
class NaSConfig:
    """MDP-NaS parameters.

    exploration: 'theory' eps_t = t^{-1/(m+1)} (ASSUMPTION for the communicating-MDP rate), 'ergodic'
      eps_t = t^{-1/2} (ASSUMPTION), 'practical' (MR-NaS code: eps(s) = max(1e-3, max(1, N_s)^-0.99),
      exp-weights exploration), 'fixed' eps_t = ``epsilon``.
    averaging: C-tracking analogue pi_bar_t = pi_bar_{t-1} + (pi^o_t - pi_bar_{t-1}) / t (on), or plug-in.
    schedule: 'geometric' oracle recomputation at t in {ceil(ratio^j)} plus every K_omega steps for
      t <= geometric_dense_until; 'fixed' every K_omega steps.
    """

    exploration: str = "theory"
    epsilon: float = 0.1
    averaging: bool = True
    schedule: str = "geometric"
    K_omega: int = 100
    ratio: float = 1.05
    geometric_dense_until: int = 10_000
    m: int | None = None                # path length for 'theory'; None: from the MDP's support graph

    def __post_init__(self) -> None:
        check_choice(self.exploration, "exploration", EXPLORATION)
        check_scalar(self.epsilon, "epsilon", float, min=0.0, max=1.0)   # an exploration probability
        check_choice(self.schedule, "schedule", SCHEDULES)
        check_scalar(self.K_omega, "K_omega", int, min=1)
        check_scalar(self.ratio, "ratio", float, min=1.0, inclusive="neither")
        check_scalar(self.geometric_dense_until, "geometric_dense_until", int, min=0)
        if self.m is not None:
            check_scalar(self.m, "m", int, min=1)


class OracleSchedule:
    """t in {ceil(ratio^j)} U {k K_omega : k K_omega <= dense_until} (geometric), or k K_omega (fixed)."""

    def __init__(self, cfg: NaSConfig):
        self.cfg = cfg
        self._j = 0
        self._next_geo = 1

    def due(self, t: int) -> bool:
        cfg = self.cfg
        if cfg.schedule == "fixed":
            return t % cfg.K_omega == 0
        hit = False
        while self._next_geo <= t:
            if self._next_geo == t:
                hit = True
            self._j += 1
            self._next_geo = math.ceil(cfg.ratio ** self._j)
        return hit or (t <= cfg.geometric_dense_until and t % cfg.K_omega == 0)


class NextDue:
    """The first t' > t at which ``OracleSchedule.due`` can be true (queries with non-decreasing t):
    the next geometric point ceil(ratio^j) or multiple of K_omega (up to geometric_dense_until), the
    same float sequence as ``OracleSchedule``. Lets the compiled loop run the steps in between."""

    def __init__(self, cfg: NaSConfig):
        self.cfg = cfg
        self._j = 0
        self._geo = 1

    def after(self, t: int) -> int:
        cfg = self.cfg
        k = (t // cfg.K_omega + 1) * cfg.K_omega         # next multiple of K_omega
        if cfg.schedule == "fixed":
            return k
        while self._geo <= t:
            self._j += 1
            self._geo = math.ceil(cfg.ratio ** self._j)
        return min(self._geo, k) if k <= cfg.geometric_dense_until else self._geo


class NaSSampler:
    """MDP-NaS: track the averaged oracle policy of omega*(M_t) with forced exploration."""

    name = "nas"

    def __init__(self, model: EmpiricalModel, rng: np.random.Generator, cfg: NaSConfig, m: int):
        S, A = model.S, model.A
        self.model, self.rng, self.cfg = model, rng, cfg
        self.m = cfg.m if cfg.m is not None else m
        self.allocator = NavigationAllocator(S, A)
        self.schedule = OracleSchedule(cfg)
        self.pi_o = np.full((S, A), 1.0 / A)          # pi^o_t (uniform at start)
        self.W = np.zeros((S, A))                      # sum_{k < t_last} pi^o_k
        self.t_last = 1
        self.omega: np.ndarray | None = None
        self.n_oracle = 0
        self.oracle_seconds = 0.0
        self._exp_theory = 1.0 / (self.m + 1)
        self.A = A

    def _oracle_update(self, t: int) -> None:
        t0 = time.perf_counter()
        try:
            self._oracle_update_inner(t)
        finally:
            self.oracle_seconds += time.perf_counter() - t0

    def _oracle_update_inner(self, t: int) -> None:
        terms = self.model.terms()
        if terms.sol.delta_min < TIE_TOL:             # tie in M_t: keep the previous pi^o
            return
        P = self.model.p_hat()
        if not is_communicating(P):                   # U_o(M_t) = inf: keep the previous pi^o
            return
        alloc = self.allocator.solve(P, terms)
        self.n_oracle += 1
        self.omega = alloc.omega
        self.W += (t - self.t_last) * self.pi_o        # pi^o_k for k in [t_last, t)
        self.t_last = t
        self.pi_o = alloc.policy

    def epsilon(self, s: int, t: int) -> float:
        e = self.cfg.exploration
        if e == "theory":
            return t ** (-self._exp_theory)            # eps_t = t^{-1/(m+1)}
        if e == "ergodic":
            return t ** -0.5                           # eps_t = t^{-1/2}
        if e == "fixed":
            return self.cfg.epsilon
        return max(1e-3, max(1, int(self.model.N_s[s])) ** -0.99)   # practical (MR-NaS)

    def _explore_dist(self, s: int) -> np.ndarray:
        if self.cfg.exploration != "practical":
            return np.full(self.A, 1.0 / self.A)
        n_s = max(1, int(self.model.N_s[s]))
        n_sa = self.model.N_sa[s]
        beta = 0.01 * n_s * math.log(n_s) / max(1, int(n_sa.max() - n_sa.min()))
        z = -beta * n_sa / n_s
        z = np.exp(z - z.max())                        # log-sum-exp stabilised exp-weights
        return z / z.sum()

    def act(self, s: int, t: int) -> int:
        if self.model.all_visited and self.schedule.due(t):
            self._oracle_update(t)
        if self.cfg.averaging:                         # pi_bar_t = (1/t) sum_{k<=t} pi^o_k
            pbar = (self.W[s] + (t - self.t_last + 1) * self.pi_o[s]) / t
        else:
            pbar = self.pi_o[s]
        eps = self.epsilon(s, t)
        if not 0.0 <= eps <= 1.0:
            raise ValueError(f"exploration schedule produced epsilon = {eps} outside [0, 1]")
        p = eps * self._explore_dist(s) + (1 - eps) * pbar     # pi_t(.|s_t)
        cdf = np.cumsum(p)
        return min(int(np.searchsorted(cdf, self.rng.random() * cdf[-1], side="right")), self.A - 1)


class UniformSampler:
    """a_t ~ Unif(A)."""

    name = "uniform"

    def __init__(self, model: EmpiricalModel, rng: np.random.Generator):
        self.rng, self.A = rng, model.A

    def act(self, s: int, t: int) -> int:
        return int(self.rng.random() * self.A)


class BPIUCRLSampler:
    """Optimistic exploration, BPI-UCRL / RF-UCRL discounted adaptation (as in the MR-BPI code).

    H = ceil(1/(1-gamma)), sigma_h = sum_{j<h} gamma^j, E_H = 0 and for h = H-1, ..., 0
      E_h(s,a) = min(gamma sigma_{H-h}, gamma sigma_{H-h} sqrt(2 beta(n)/n)
                     + gamma sum_s' p_hat(s'|s,a) max_b E_{h+1}(s',b)),   n = N_sa + 1,
      beta(n) = log(2SA/delta) + (S-1) log(e(1 + n/(S-1))), p_hat with a 0.5 pseudo-count per s'.
    Follow argmax_a E_h(s_h, a) for H steps, then recompute.
    """

    name = "bpi_ucrl"

    def __init__(self, model: EmpiricalModel, rng: np.random.Generator, delta: float):
        self.model, self.rng, self.delta = model, rng, delta
        g = model.gamma
        self.H = max(1, math.ceil(1 / (1 - g)))
        self.sigma = np.array([sum(g ** j for j in range(h)) for h in range(self.H + 1)])
        self.h = 0
        self.E = None

    def _plan(self) -> None:
        m = self.model
        S, A, g = m.S, m.A, m.gamma
        n = m.N_sa + 1.0
        beta = np.log(2 * S * A / self.delta) + (S - 1) * (1 + np.log1p(n / (S - 1)))
        p = (m.N_sas + 0.5) / (m.N_sa[:, :, None] + 0.5 * S)
        E = np.zeros((self.H + 1, S, A))
        for h in range(self.H - 1, -1, -1):
            cap = g * self.sigma[self.H - h]
            E[h] = np.minimum(cap, cap * np.sqrt(2 * beta / n) + g * p @ E[h + 1].max(axis=1))
        self.E = E

    def act(self, s: int, t: int) -> int:
        if self.h == 0:
            self._plan()
        row = self.E[self.h, s]
        self.h = (self.h + 1) % self.H
        best = np.flatnonzero(row >= row.max() - 1e-15)
        return int(best[0] if len(best) == 1 else best[int(self.rng.random() * len(best))])


class PSRLSampler:
    """Posterior sampling: p ~ Dirichlet(1 + N_sa.) per pair; unvisited pairs get r ~ U[0,1] at each
    resample (a fixed 0 could leave them unvisited forever); follow pi*(sample) for H steps."""

    name = "psrl"

    def __init__(self, model: EmpiricalModel, rng: np.random.Generator):
        self.model, self.rng = model, rng
        self.H = max(1, math.ceil(1 / (1 - model.gamma)))
        self.h = 0
        self.pi = None

    def act(self, s: int, t: int) -> int:
        m = self.model
        if self.h == 0:
            g = self.rng.gamma(1.0 + m.N_sas)
            P = g / g.sum(axis=2, keepdims=True)
            r = np.where(m.r_seen, m.r_hat, self.rng.uniform(0, 1, size=m.r_hat.shape))
            self.pi = solve_mdp(P, r, m.gamma).pi
        self.h = (self.h + 1) % self.H
        return int(self.pi[s])


class GenerativeTracker:
    """Generative KLB-TS (navigation-free reference): pick the pair (s, a) itself by C-tracking of the
    closed-form generative optimum of M_t: argmax_sa sum_{k<=t} omega^eps_k - N_sa(t), with
    omega^eps = (1 - SA eps_t) omega + eps_t, eps_t = 1/(2 sqrt(S^2 A^2 + t)). omega is refreshed
    whenever the stopping check recomputes M_t (uniform until every pair is visited)."""

    name = "generative"

    def __init__(self, model: EmpiricalModel, rng: np.random.Generator):
        self.model, self.rng = model, rng
        self.K = model.S * model.A
        self.omega = np.full(self.K, 1.0 / self.K)
        self.cum = np.zeros(self.K)

    def refresh(self) -> None:
        terms = self.model.terms()
        if terms.sol.delta_min >= TIE_TOL:
            w, u = generative_optimum(terms)
            if np.isfinite(u):
                self.omega = w.reshape(-1) / w.sum()

    def pair(self, t: int) -> tuple[int, int]:
        eps = 0.5 / math.sqrt(self.K ** 2 + t)
        self.cum += (1 - self.K * eps) * self.omega + eps
        k = int(np.argmax(self.cum - self.model.N_sa.reshape(-1)))
        return divmod(k, self.model.A)
