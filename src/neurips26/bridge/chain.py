"""Discrete chain laws: unary tilts of the stationary Markov prior, exact P* by multi-marginal Sinkhorn.

A law is ``Pi(x) = R(x) exp(sum_k phi_k(x_k)) / Z`` with potentials ``phi (N, G)`` (``-inf`` allowed:
zero mass). Marginals and log Z by forward-backward in the log semiring::

    alpha_1 = log r + phi_1,      alpha_{k+1} = logsumexp_g(alpha_k(g) + log K[g, .]) + phi_{k+1}
    beta_N = 0,                   beta_k = logsumexp_g'(log K[., g'] + phi_{k+1}(g') + beta_{k+1}(g'))
    log Z = logsumexp(alpha_N),   log p_k = alpha_k + beta_k - log Z

Multi-marginal Sinkhorn (iterative Bregman projections, Benamou et al. 2015): sweep k = 1..N,
``phi_k <- phi_k + log mu_k - log p_k``, refreshing the forward message after each update (O(N G^2) per
sweep); stop when ``max_k ||p_k - mu_k||_1 < tol``. N = 2 is ordinary entropic OT with Gibbs kernel
``r(g) K(g, g')``. The brute-force joint tensor (``joint_log_probs``) is the reference for small G^N.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from neurips26.bridge.errors import ConvergenceError, InfeasibleError
from neurips26.bridge.priors import ChainPrior, check_probability
from neurips26.bridge.schedule import log_smoothing_matrix, logsumexp
from neurips26.harness.validation import check_choice, check_scalar

ENUM_MAX = 2**20  # G^N up to which exact enumeration is allowed
ORDERS = ("gauss-seidel", "jacobi")


def _msg_fwd(alpha_k: np.ndarray, log_K: np.ndarray) -> np.ndarray:
    """``logsumexp_g(alpha_k(g) + log K[g, .])``."""
    return logsumexp(alpha_k[:, None] + log_K, axis=0)


def _msg_bwd(x: np.ndarray, log_K: np.ndarray) -> np.ndarray:
    """``logsumexp_g'(log K[., g'] + x(g'))``."""
    return logsumexp(log_K + x[None, :], axis=1)


@dataclass(frozen=True)
class ChainLaw:
    """``R exp(sum_k phi_k(x_k)) / Z`` on N slices of a G-state grid."""

    prior: ChainPrior
    phi: np.ndarray  # (N, G)
    info: dict = field(default_factory=dict, compare=False)

    @classmethod
    def untilted(cls, prior: ChainPrior) -> "ChainLaw":
        return cls(prior, np.zeros((prior.N, prior.G)))

    @property
    def N(self) -> int:
        return self.prior.N

    @property
    def G(self) -> int:
        return self.prior.G

    def with_phi(self, phi: np.ndarray, **info) -> "ChainLaw":
        return replace(self, phi=phi, info=dict(info))

    def messages(self) -> tuple[np.ndarray, np.ndarray, float]:
        """``alpha (N, G)``, ``beta (N, G)`` and ``log Z`` (computed once per law: laws are immutable)."""
        return self._messages

    @cached_property
    def _messages(self) -> tuple[np.ndarray, np.ndarray, float]:
        N, lk = self.N, self.prior.log_K
        alpha = np.empty((N, self.G))
        alpha[0] = self.prior.log_r + self.phi[0]
        for k in range(1, N):
            alpha[k] = _msg_fwd(alpha[k - 1], lk) + self.phi[k]
        return alpha, _betas(self.phi, lk), float(logsumexp(alpha[-1]))

    def log_marginals(self) -> np.ndarray:
        alpha, beta, logz = self.messages()
        return alpha + beta - logz

    def marginals(self) -> np.ndarray:
        return np.exp(self.log_marginals())

    def log_partition(self) -> float:
        return self.messages()[2]

    def log_prob(self, x: np.ndarray) -> np.ndarray:
        """``log Pi(x)`` for states ``x (n, N)`` (integers in 0..G-1)."""
        x = np.asarray(x)
        lp = self.prior.log_r[x[:, 0]] + self.phi[0, x[:, 0]]
        for k in range(1, self.N):
            lp = lp + self.prior.log_K[x[:, k - 1], x[:, k]] + self.phi[k, x[:, k]]
        return lp - self.log_partition()

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` exact samples ``(n, N)``: x_1 from p_1, then the posterior chain's transitions."""
        n = check_scalar(n, "n", int, min=1)
        alpha, beta, logz = self.messages()
        x = np.empty((self.N, n), dtype=np.int64)
        x[0] = _inverse_cdf(np.exp(alpha[0] + beta[0] - logz), rng.random(n))
        for k in range(1, self.N):
            logt = self.prior.log_K + (self.phi[k] + beta[k])[None, :]
            T = np.exp(logt - logsumexp(logt, axis=1, keepdims=True))
            u = rng.random(n)
            prev = x[k - 1]
            out = np.empty(n, dtype=np.int64)
            for g in np.unique(prev):
                sel = prev == g
                out[sel] = _inverse_cdf(T[g], u[sel])
            x[k] = out
        return x.T.copy()

    def joint_log_probs(self) -> np.ndarray:
        """The whole joint ``log Pi`` as a ``G^N`` tensor (brute force; ``G^N <= 2^20``)."""
        if self.G**self.N > ENUM_MAX:
            raise ValueError(f"exact enumeration needs G^N <= 2^20, got G = {self.G}, N = {self.N}")
        lp = self.prior.log_r + self.phi[0]
        for k in range(1, self.N):
            lp = (
                lp[..., None]
                + self.prior.log_K.reshape((1,) * (k - 1) + self.prior.log_K.shape)
                + self.phi[k]
            )
        return lp - logsumexp(lp)

    def reversed(self) -> "ChainLaw":
        return ChainLaw(self.prior, self.phi[::-1].copy(), dict(self.info))


def _betas(phi: np.ndarray, log_K: np.ndarray) -> np.ndarray:
    """Backward messages ``beta (N, G)`` of the potentials ``phi``."""
    beta = np.zeros(phi.shape)
    for k in range(phi.shape[0] - 2, -1, -1):
        beta[k] = _msg_bwd(phi[k + 1] + beta[k + 1], log_K)
    return beta


def _inverse_cdf(p: np.ndarray, u: np.ndarray) -> np.ndarray:
    c = np.cumsum(p)
    return np.minimum(np.searchsorted(c, u * c[-1], side="right"), p.size - 1)


# ============================================================================ Sinkhorn
def _safe_log(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(p)


def chain_sweep(
    law: ChainLaw, log_mu: np.ndarray, lam: float = 1.0, order: str = "gauss-seidel", sigma: float = 0.0
) -> tuple[ChainLaw, float]:
    """One sweep of slice updates; returns the new law and the max L1 residual ``||p_k - mu_k||_1`` seen.

    sigma = 0 (Sinkhorn):  ``phi_k += lam (log mu_k - log p_k)`` (``phi = -inf`` where ``mu_k = 0``);
    sigma > 0 (S1):        ``phi_k += lam (log M_sigma mu_k - log M_sigma p_k)``.
    Gauss-Seidel refreshes the forward message after each slice (O(N G^2) per sweep); Jacobi updates
    every slice from the same marginals.
    """
    check_choice(order, "order", ORDERS)
    N, lk = law.N, law.prior.log_K
    logM = log_smoothing_matrix(law.prior.z, sigma) if sigma > 0 else None
    phi = law.phi.copy()
    res = 0.0

    def update(k, logp):
        if logM is not None:
            d = logsumexp(logM + log_mu[k][None, :], axis=1) - logsumexp(logM + logp[None, :], axis=1)
            return phi[k] + lam * d
        if np.any(np.isneginf(logp) & np.isfinite(log_mu[k])):
            raise InfeasibleError(
                f"slice {k}: the target puts mass on states the constrained law cannot reach"
            )
        step = log_mu[k] - np.where(np.isneginf(logp), 0.0, logp)
        return np.where(np.isneginf(log_mu[k]), -np.inf, phi[k] + lam * step)

    if order == "jacobi":
        logp = law.log_marginals()
        for k in range(N):
            res = max(res, _l1(logp[k], log_mu[k]))
            phi[k] = update(k, logp[k])
        return law.with_phi(phi), res
    beta = _betas(phi, lk)  # slices > k are not yet updated when slice k is
    alpha_k = None
    for k in range(N):
        base = law.prior.log_r if k == 0 else _msg_fwd(alpha_k, lk)
        a = base + phi[k]
        logp = a + beta[k] - logsumexp(a + beta[k])
        res = max(res, _l1(logp, log_mu[k]))
        phi[k] = update(k, logp)
        alpha_k = base + phi[k]
    return law.with_phi(phi), res


def _l1(logp, logt) -> float:
    return float(np.sum(np.abs(np.exp(logp) - np.exp(logt))))


def chain_sinkhorn(prior: ChainPrior, mu: np.ndarray, tol: float = 1e-12, max_iter: int = 10_000) -> ChainLaw:
    """Exact P* on the chain by multi-marginal Sinkhorn in log space.

    mu: (N, G) slice targets (``priors.discrete_targets``). ``info`` holds ``sweeps`` and ``residual``
    (max L1 marginal error). ``ConvergenceError`` with the residual after ``max_iter`` sweeps.
    """
    mu = np.asarray(mu, dtype=float)
    if mu.shape != (prior.N, prior.G):
        raise ValueError(f"mu must have shape ({prior.N}, {prior.G}), got {mu.shape}")
    for k in range(prior.N):
        check_probability(mu[k], f"mu[{k}]", prior.G)
    tol = check_scalar(tol, "tol", float, min=0, inclusive="neither")
    max_iter = check_scalar(max_iter, "max_iter", int, min=1)
    logmu = _safe_log(mu)
    law = ChainLaw.untilted(prior)
    res = np.inf
    for it in range(1, max_iter + 1):
        law, res = chain_sweep(law, logmu, 1.0)
        if res < tol:
            final = float(np.max(np.sum(np.abs(law.marginals() - mu), axis=1)))
            return law.with_phi(law.phi, sweeps=it, residual=final)
    raise ConvergenceError(
        f"chain Sinkhorn did not reach tol = {tol:g} in {max_iter} sweeps "
        f"(marginal L1 residual {res:.3g}; infeasible targets?)",
        res,
        max_iter,
    )


# ============================================================================ metrics on chains
def chain_kl(p: ChainLaw, q: ChainLaw) -> float:
    """``KL(p || q) = sum_k E_{p_k}[phi^p_k - phi^q_k] - log Z_p + log Z_q`` (same prior), exact."""
    logm = p.log_marginals()
    m = np.exp(logm)
    with np.errstate(invalid="ignore"):
        diff = np.where(m > 0, p.phi - q.phi, 0.0)
    if np.any(np.isinf(diff)):
        return float("inf")
    return float(np.sum(m * diff)) - p.log_partition() + q.log_partition()


def delta_variance(law: ChainLaw, delta: np.ndarray) -> float:
    """``Var_law(sum_k delta_k(x_k))``, exact by a backward recursion of conditional expectations.

    ``h_k(x) = E[sum_{l > k} delta_l(x_l) | x_k = x]`` with the law's (Markov) transitions; then
    ``E[S^2] = sum_k E[delta_k^2] + 2 sum_k E[delta_k h_k]``.
    """
    alpha, beta, logz = law.messages()
    p = np.exp(alpha + beta - logz)
    d = np.where(p > 0, delta, 0.0)
    N = law.N
    h = np.zeros((N, law.G))
    for k in range(N - 2, -1, -1):
        logt = law.prior.log_K + (law.phi[k + 1] + beta[k + 1])[None, :] - beta[k][:, None]
        T = np.where(np.isfinite(logt), np.exp(logt), 0.0)
        h[k] = T @ (d[k + 1] + h[k + 1])
    mean = float(np.sum(p * d))
    second = float(np.sum(p * d * d) + 2 * np.sum(p * d * h))
    return max(second - mean * mean, 0.0)


def brute_force_ipf(
    prior: ChainPrior, mu: np.ndarray, tol: float = 1e-13, max_iter: int = 100_000
) -> np.ndarray:
    """Reference P*: IPF on the full joint tensor (tiny G^N only), returns the joint probabilities."""
    P = np.exp(ChainLaw.untilted(prior).joint_log_probs())
    N = prior.N
    for _ in range(max_iter):
        worst = 0.0
        for k in range(N):
            axes = tuple(a for a in range(N) if a != k)
            pk = P.sum(axis=axes)
            worst = max(worst, float(np.abs(pk - mu[k]).sum()))
            shape = [1] * N
            shape[k] = prior.G
            P = P * (mu[k] / np.where(pk > 0, pk, 1.0)).reshape(shape)
        if worst < tol:
            return P
    raise ConvergenceError("brute-force IPF did not converge", worst, max_iter)


def all_states(G: int, N: int) -> np.ndarray:
    """Every state of the chain, ``(G^N, N)`` (row-major order, matching ``joint_log_probs().ravel()``)."""
    return np.array(list(itertools.product(range(G), repeat=N)))
