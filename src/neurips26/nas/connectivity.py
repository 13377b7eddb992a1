"""Connectivity diagnostics: support graph, m (BFS), communication, diameter, eta, mixing time,
stationary laws and the oracle-chain condition number kappa_M."""

from __future__ import annotations

from collections import deque

import numpy as np


def support_graph(P: np.ndarray) -> np.ndarray:
    """Adjacency G[s, s'] = True iff some action moves s -> s' with positive probability."""
    return (np.asarray(P) > 0).any(axis=1)


def shortest_paths(P: np.ndarray) -> np.ndarray:
    """BFS distance matrix on the support graph (inf where unreachable; 0 on the diagonal)."""
    G = support_graph(P)
    S = G.shape[0]
    dist = np.full((S, S), np.inf)
    for s in range(S):
        dist[s, s] = 0
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for v in np.flatnonzero(G[u]):
                if dist[s, v] == np.inf:
                    dist[s, v] = dist[s, u] + 1
                    queue.append(v)
    return dist


def is_communicating(P: np.ndarray) -> bool:
    """Every state reaches every other under some policy (support graph strongly connected)."""
    return bool(np.isfinite(shortest_paths(P)).all())


def path_length_m(P: np.ndarray) -> int:
    """m = max_{s, s'} shortest-path length in the support graph (the exploration exponent's m)."""
    d = shortest_paths(P)
    if not np.isfinite(d).all():
        raise ValueError("P: MDP is not communicating; m is undefined")
    return int(d.max())


def diameter(P: np.ndarray, tol: float = 1e-10, max_iter: int = 1_000_000) -> float:
    """D(M) = max_{s != s'} min_pi E[hitting time of s' from s] (SSP value iteration per target)."""
    S = P.shape[0]
    if not is_communicating(P):
        return float("inf")
    D = 0.0
    for target in range(S):
        h = np.zeros(S)
        for _ in range(max_iter):
            # h(s) = 1 + min_a sum_s' p(s'|s,a) h(s'), h(target) = 0
            new = 1.0 + (P @ h).min(axis=1)
            new[target] = 0.0
            if np.abs(new - h).max() < tol * max(1.0, new.max()):
                h = new
                break
            h = new
        D = max(D, float(h.max()))
    return D


def policy_state_kernel(P: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """P_pi(s, s') = sum_a pi(a|s) p(s'|s,a) for a stochastic policy pi (S, A)."""
    return np.einsum("sa,sat->st", pi, P)


def stationary_distribution(K: np.ndarray) -> np.ndarray:
    """The stationary law mu = mu K of an irreducible stochastic matrix K (linear solve)."""
    S = K.shape[0]
    M = np.eye(S) - K.T
    M[-1, :] = 1.0
    b = np.zeros(S)
    b[-1] = 1.0
    try:
        mu = np.linalg.solve(M, b)
    except np.linalg.LinAlgError:
        mu = np.linalg.lstsq(M, b, rcond=None)[0]
    mu = np.maximum(mu, 0.0)
    return mu / mu.sum()


def stationary_state_action(P: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """omega_sa = mu(s) pi(a|s), mu stationary for P_pi: a point of Omega(M) (navigation constraints
    sum_a omega_sa = sum_{s',a'} p(s|s',a') omega_s'a')."""
    pi = np.asarray(pi, dtype=float)
    pi = pi / pi.sum(axis=1, keepdims=True)
    mu = stationary_distribution(policy_state_kernel(P, pi))
    return mu[:, None] * pi


def navigation_residual(P: np.ndarray, omega: np.ndarray) -> float:
    """max_s |sum_a omega_sa - sum_{s',a'} p(s|s',a') omega_s'a'| (0 on Omega(M))."""
    inflow = np.einsum("sa,sat->t", omega, P)
    return float(np.abs(omega.sum(axis=1) - inflow).max())


def uniform_state_action_kernel(P: np.ndarray) -> np.ndarray:
    """P_u((s,a), (s',a')) = p(s'|s,a) / A: the state-action chain under the uniform policy."""
    S, A, _ = P.shape
    return np.repeat(P.reshape(S * A, S), A, axis=1) / A


def eta(P: np.ndarray) -> dict:
    """Communication parameter eta = eta1 * eta2: eta1 = min positive entry of P_u, eta2 = min over
    n <= m+1 of the min positive entry of P_u^n (uniform-policy state-action kernel)."""
    m = path_length_m(P)
    Pu = uniform_state_action_kernel(P)
    eta1 = float(Pu[Pu > 0].min())
    eta2 = 1.0
    Pn = np.eye(Pu.shape[0])
    for _ in range(m + 1):
        Pn = Pn @ Pu
        pos = Pn[Pn > 1e-300]
        eta2 = min(eta2, float(pos.min()))
    return {"eta1": eta1, "eta2": eta2, "eta": eta1 * eta2, "m": m}


def mixing_time(K: np.ndarray, eps: float = 0.25, t_max: int = 100_000) -> float:
    """t_mix(eps) = min{t : max_s TV(K^t(s, .), mu) <= eps}; inf if not reached by t_max."""
    mu = stationary_distribution(K)
    Kt = np.eye(K.shape[0])
    for t in range(1, t_max + 1):
        Kt = Kt @ K
        if 0.5 * np.abs(Kt - mu).sum(axis=1).max() <= eps:
            return float(t)
    return float("inf")


def uniform_mixing_time(P: np.ndarray, eps: float = 0.25) -> float:
    S, A, _ = P.shape
    return mixing_time(policy_state_kernel(P, np.full((S, A), 1.0 / A)), eps)


def kappa(P: np.ndarray, omega: np.ndarray) -> float:
    """kappa_M = ||(I - P_pio + 1 omega^T)^{-1}||_inf, P_pio the state-action kernel of the oracle
    policy pi^o(a|s) = omega_sa / sum_b omega_sb (fundamental-matrix condition number)."""
    S, A, _ = P.shape
    pi = omega / omega.sum(axis=1, keepdims=True)
    K = np.einsum("sat,tb->satb", P, pi).reshape(S * A, S * A)
    w = omega.reshape(-1)
    Z = np.linalg.inv(np.eye(S * A) - K + np.outer(np.ones(S * A), w))
    return float(np.abs(Z).sum(axis=1).max())
