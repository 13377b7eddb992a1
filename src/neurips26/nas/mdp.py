"""Tabular MDPs: the validated container, planning (value / policy iteration), gaps, generators.

A finite discounted MDP M = (S, A, p, r, gamma) with deterministic rewards r(s, a) in [0, 1],
transition kernel p(. | s, a) in the simplex, discount gamma in (0, 1) and a start state s1.
Arrays: ``P`` has shape (S, A, S) with ``P[s, a, s'] = p(s' | s, a)``, ``r`` has shape (S, A).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from neurips26.harness.validation import check_scalar
from neurips26.nas.connectivity import is_communicating

STOCH_TOL = 1e-9          # rows of P must sum to 1 within this
TIE_TOL = 1e-10           # Delta_min below this: optimal policy not unique ("BPI is ill-posed")
BELLMAN_TOL = 1e-10       # policy iteration: Bellman residual of the returned V*


def _check_prob(x: float, name: str) -> float:
    return check_scalar(x, name, float, min=0.0, max=1.0, inclusive="neither")


def validate_transitions(P: np.ndarray, name: str = "P") -> np.ndarray:
    """P of shape (S, A, S), non-negative, rows summing to 1 (1e-9); S >= 2, A >= 2."""
    P = np.asarray(P, dtype=float)
    if P.ndim != 3 or P.shape[0] != P.shape[2]:
        raise ValueError(f"{name} must have shape (S, A, S), got {P.shape}")
    S, A, _ = P.shape
    if S < 2 or A < 2:
        raise ValueError(f"{name} needs S >= 2 states and A >= 2 actions, got S={S}, A={A}")
    if not np.all(np.isfinite(P)):
        raise ValueError(f"{name} has non-finite entries")
    if np.any(P < 0):
        raise ValueError(f"{name} has negative entries (min {P.min():.3g}); it must be a transition kernel")
    dev = np.abs(P.sum(axis=2) - 1.0).max()
    if dev > STOCH_TOL:
        raise ValueError(f"{name} rows must sum to 1 (within {STOCH_TOL}); max deviation {dev:.3g}")
    return P


@dataclass(frozen=True)
class MDP:
    """A validated tabular MDP with deterministic rewards.

    P: (S, A, S) transition kernel; r: (S, A) rewards in [0, 1]; gamma in (0, 1); s0 start state.
    Validation happens here, at construction: bad shapes, non-stochastic rows, rewards outside
    [0, 1], gamma outside (0, 1) or an out-of-range start state raise ValueError naming the argument.
    Uniqueness of pi* and communication are checked by ``require_identifiable`` (only where BPI needs
    them).
    """

    P: np.ndarray
    r: np.ndarray
    gamma: float
    s0: int = 0
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        P = validate_transitions(self.P, "P")
        r = np.asarray(self.r, dtype=float)
        if r.shape != P.shape[:2]:
            raise ValueError(f"r must have shape (S, A) = {P.shape[:2]} to match P, got {r.shape}")
        if not np.all(np.isfinite(r)) or r.min() < 0 or r.max() > 1:
            raise ValueError(f"r (rewards) must lie in [0, 1], got range [{r.min():.3g}, {r.max():.3g}]")
        gamma = _check_prob(self.gamma, "gamma")
        if isinstance(self.s0, bool) or not isinstance(self.s0, (int, np.integer)):
            raise TypeError(f"s0 must be an int state index, got {type(self.s0).__name__}")
        if not 0 <= int(self.s0) < P.shape[0]:
            raise ValueError(f"s0 (start state) must be in [0, {P.shape[0] - 1}], got {self.s0}")
        P.setflags(write=False)
        r.setflags(write=False)
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "r", r)
        object.__setattr__(self, "gamma", gamma)
        object.__setattr__(self, "s0", int(self.s0))

    @property
    def S(self) -> int:
        return self.P.shape[0]

    @property
    def A(self) -> int:
        return self.P.shape[1]

    def solve(self) -> Solution:
        return solve_mdp(self.P, self.r, self.gamma)

    def require_identifiable(self) -> Solution:
        """Raise ValueError if pi* is not unique or M is not communicating; returns the solution."""
        sol = self.solve()
        if sol.delta_min < TIE_TOL:
            raise ValueError(f"mdp: optimal policy is not unique (Delta_min = {sol.delta_min:.3g} < "
                             f"{TIE_TOL}); BPI is ill-posed")
        if not is_communicating(self.P):
            raise ValueError("mdp: MDP is not communicating (some state cannot reach another under any "
                             "policy); online BPI needs a communicating MDP")
        return sol


@dataclass(frozen=True)
class Solution:
    """V*, Q*, pi* and the gaps Delta_sa = V*(s) - Q*(s, a) (exactly 0 on pi*)."""

    V: np.ndarray
    Q: np.ndarray
    pi: np.ndarray
    gaps: np.ndarray
    delta_min: float


def policy_evaluation(P: np.ndarray, r: np.ndarray, gamma: float, pi: np.ndarray) -> np.ndarray:
    """V^pi = (I - gamma P_pi)^{-1} r_pi for a deterministic policy pi (S,) of action indices."""
    S = P.shape[0]
    idx = np.arange(S)
    P_pi = P[idx, pi]
    r_pi = r[idx, pi]
    return np.linalg.solve(np.eye(S) - gamma * P_pi, r_pi)


def policy_iteration(P: np.ndarray, r: np.ndarray, gamma: float, pi0: np.ndarray | None = None,
                     max_iter: int = 1000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Howard's policy iteration: evaluate exactly, improve greedily (ties keep the current action).

    Returns (V*, Q*, pi*). Terminates in finitely many steps; then the Bellman residual
    ||max_a Q(., a) - V||_inf is at machine precision (< 1e-10 checked by the caller's tests).
    """
    S = P.shape[0]
    pi = np.zeros(S, dtype=np.int64) if pi0 is None else np.asarray(pi0, dtype=np.int64).copy()
    idx = np.arange(S)
    for _ in range(max_iter):
        V = policy_evaluation(P, r, gamma, pi)
        Q = r + gamma * (P @ V)                      # Q(s,a) = r(s,a) + gamma sum_s' p(s'|s,a) V(s')
        best = Q.argmax(axis=1)
        # keep the current action unless another is better by more than round-off
        improve = Q[idx, best] > Q[idx, pi] + 1e-12 * max(1.0, np.abs(Q).max())
        if not improve.any():
            return V, Q, pi
        pi = np.where(improve, best, pi)
    raise RuntimeError("policy iteration did not converge")  # pragma: no cover


def value_iteration(P: np.ndarray, r: np.ndarray, gamma: float, tol: float = 1e-12,
                    max_iter: int = 1_000_000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """V_{k+1} = max_a [r + gamma P V_k] until ||V_{k+1} - V_k|| (1 - gamma)/gamma... < tol."""
    V = np.zeros(P.shape[0])
    for _ in range(max_iter):
        Q = r + gamma * (P @ V)
        V_new = Q.max(axis=1)
        if np.abs(V_new - V).max() < tol * (1 - gamma):
            V = V_new
            break
        V = V_new
    Q = r + gamma * (P @ V)
    return V, Q, Q.argmax(axis=1)


def solve_mdp(P: np.ndarray, r: np.ndarray, gamma: float, pi0: np.ndarray | None = None) -> Solution:
    """Optimal V*, Q*, pi* (policy iteration) with gaps; Delta = V*(s) - Q*(s,a), 0 on pi*."""
    V, Q, pi = policy_iteration(P, r, gamma, pi0)
    gaps = V[:, None] - Q
    S = P.shape[0]
    gaps[np.arange(S), pi] = 0.0
    gaps = np.maximum(gaps, 0.0)
    sub = np.ones_like(gaps, dtype=bool)
    sub[np.arange(S), pi] = False
    delta_min = float(gaps[sub].min())
    return Solution(V=V, Q=Q, pi=pi, gaps=gaps, delta_min=delta_min)


# --------------------------------------------------------------------------- generators

def random_mdp(S: int, A: int, alpha: float = 1.0, gamma: float = 0.5, seed: int = 0,
               min_gap: float = 0.05, max_tries: int = 10_000, support: int | None = None,
               state_rewards: bool = False) -> MDP:
    """p_sa ~ Dirichlet(alpha 1_S), r ~ U[0, 1]; reject unless pi* unique, Delta_min >= min_gap and M
    communicating. Deterministic in ``seed`` (numpy Generator). ``support=k`` draws each p_sa on k
    random next states only (sparse support graph, so m can exceed 1).

    ``state_rewards=True`` is the hard family ("stochastic near-ties"): r(s, a) = r(s) for every a,
    so every gap Delta_sa = gamma (p_{s pi*(s)} - p_sa) V* comes from the transitions alone; a small
    change of p can then reorder the actions, so Alt(M) is not empty and T*(M) > 0 (with rewards
    that differ per action, a gamma = 0.5 instance often has Alt(M) empty: T* = 0)."""
    S = check_scalar(S, "S", int, min=2)
    A = check_scalar(A, "A", int, min=2)
    check_scalar(alpha, "alpha", float, min=0, inclusive="neither")
    _check_prob(gamma, "gamma")
    if support is not None:
        support = check_scalar(support, "support", int, min=1, max=S)
    rng = np.random.default_rng(seed)
    for _ in range(max_tries):
        if support is None or support == S:
            P = rng.dirichlet(alpha * np.ones(S), size=(S, A))
        else:
            P = np.zeros((S, A, S))
            for s in range(S):
                for a in range(A):
                    P[s, a, rng.choice(S, support, replace=False)] = rng.dirichlet(alpha * np.ones(support))
        r = rng.uniform(0.0, 1.0, size=(S, A))
        if state_rewards:
            r = np.repeat(r[:, :1], A, axis=1)
        P = P / P.sum(axis=2, keepdims=True)
        sol = solve_mdp(P, r, gamma)
        if sol.delta_min < max(min_gap, TIE_TOL) or not is_communicating(P):
            continue
        tag = "" if support is None or support == S else f",support={support}"
        tag += ",state_rewards" if state_rewards else ""
        tag += f",gamma={gamma:g}" if gamma != 0.5 else ""
        return MDP(P, r, gamma, 0, name=f"random(S={S},A={A},seed={seed}{tag})")
    raise RuntimeError(f"random_mdp: no instance passed the rejection rule in {max_tries} draws")


def riverswim(n: int, gamma: float = 0.5) -> MDP:
    """RiverSwim with n states: action 0 = left, 1 = right (MR-BPI code's dynamics); start at 0."""
    n = check_scalar(n, "n", int, min=3)
    P = np.zeros((n, 2, n))
    r = np.zeros((n, 2))
    for s in range(n):
        P[s, 0, max(s - 1, 0)] = 1.0                    # left: deterministic step back
    P[0, 1, 0], P[0, 1, 1] = 0.7, 0.3
    for s in range(1, n - 1):
        P[s, 1, s], P[s, 1, s + 1], P[s, 1, s - 1] = 0.6, 0.3, 0.1
    P[n - 1, 1, n - 1], P[n - 1, 1, n - 2] = 0.3, 0.7
    P[n - 1, 0, :] = 0.0
    P[n - 1, 0, n - 2] = 1.0
    r[0, 0] = 0.05
    r[n - 1, 1] = 1.0
    return MDP(P, r, gamma, 0, name=f"riverswim({n})")


def double_chain(L: int, p: float = 0.7, gamma: float = 0.5) -> MDP:
    """DoubleChain with 2L+1 states: a centre state 0 and two chains of length L (left 1..L, right
    L+1..2L). Action 0 moves towards the left end, action 1 towards the right end; a move succeeds
    w.p. p, else the agent stays. The left end pays 0.1 (small, close), the right end pays 1 (far).
    """
    L = check_scalar(L, "L", int, min=1)
    p = check_scalar(p, "p", float, min=0, max=1, inclusive="right")
    S = 2 * L + 1
    # position on a line: left end -L ... centre 0 ... right end +L
    pos_to_state = {0: 0}
    for k in range(1, L + 1):
        pos_to_state[-k] = k
        pos_to_state[k] = L + k
    state_to_pos = {v: k for k, v in pos_to_state.items()}
    P = np.zeros((S, 2, S))
    r = np.zeros((S, 2))
    for s in range(S):
        x = state_to_pos[s]
        for a, step in ((0, -1), (1, +1)):
            y = min(max(x + step, -L), L)
            P[s, a, pos_to_state[y]] += p
            P[s, a, s] += 1 - p
    r[pos_to_state[-L], 0] = 0.1
    r[pos_to_state[L], 1] = 1.0
    return MDP(P, r, gamma, 0, name=f"double_chain(L={L},p={p})")


def lazy_ring(S: int, q: float, rewards: np.ndarray | None = None, gamma: float = 0.5,
              reward_seed: int = 0) -> MDP:
    """Connectivity family: a=0 steps back, a=1 steps forward around a ring w.p. 1-q, teleports
    uniformly w.p. q. Rewards are one seeded U[0,1] draw per pair (``reward_seed``) unless given, so
    the same rewards are shared across q; q -> 0 lengthens diameter and mixing time."""
    S = check_scalar(S, "S", int, min=2)
    q = check_scalar(q, "q", float, min=0, max=1, inclusive="right")
    if rewards is None:
        rewards = np.random.default_rng(reward_seed).uniform(0, 1, size=(S, 2))
    P = np.full((S, 2, S), q / S)
    for s in range(S):
        P[s, 0, (s - 1) % S] += 1 - q
        P[s, 1, (s + 1) % S] += 1 - q
    return MDP(P, rewards, gamma, 0, name=f"lazy_ring(S={S},q={q})")


def lazy_ring_rewards(S: int, qs, gamma: float = 0.5, min_gap: float = 0.05, seed: int = 0,
                      max_tries: int = 10_000) -> np.ndarray:
    """Reward table for ``lazy_ring`` with Delta_min >= min_gap at every q in ``qs`` (seeded search)."""
    rng = np.random.default_rng(seed)
    for _ in range(max_tries):
        r = rng.uniform(0, 1, size=(S, 2))
        if all(lazy_ring(S, q, r, gamma).solve().delta_min >= min_gap for q in qs):
            return r
    raise RuntimeError("lazy_ring_rewards: no reward table met the gap requirement")
