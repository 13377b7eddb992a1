"""Gaussian laws on N slices: tilts of R in block-tridiagonal information form, and exact P* by IPF.

A tilt ``phi_k(y) = -1/2 y^T A_k y + b_k^T y`` of R gives the law with

    Lambda = Sigma_R^-1 + blockdiag(A_1..A_N)        (block-tridiagonal: R is AR(1) across slices)
    eta    = Sigma_R^-1 m_R + (b_1..b_N)

Slice marginals by Gaussian message passing on the chain (block Thomas / RTS recursion, O(N D^3)):

    forward   F_1 = B_1, F_k = B_k - O_{k-1}^T F_{k-1}^-1 O_{k-1},  f_k = eta_k - O_{k-1}^T F_{k-1}^-1 f_{k-1}
    backward  G_N = B_N,  G_k = B_k - O_k G_{k+1}^-1 O_k^T,           g_k = eta_k - O_k G_{k+1}^-1 g_{k+1}
    marginal  V_k^-1 = F_k + G_k - B_k,   u_k = V_k (f_k + g_k - eta_k)
    log det Lambda = sum_k log det F_k

(B_k = Lambda[k,k], O_k = Lambda[k,k+1].) The dense path (Cholesky of the ND x ND precision) is the
reference and the oracle of the tests; ``method="block"`` is the fast path and is tested equal to it.

IPF (Gauss-Seidel over k, on natural parameters)::

    A_k <- A_k + S_k^-1 - V_k^-1,    b_k <- b_k + S_k^-1 m_k - V_k^-1 u_k

with ``(u_k, V_k)`` the current slice-k marginal; stop when ``max_k max(|V_k - S_k|, |u_k - m_k|) < tol``.
The smoothed, tempered update of surrogate S1 is the same sweep with ``S_k + sigma^2 I``,
``V_k + sigma^2 I`` and a weight lambda (``tilt_sweep``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
from scipy import linalg

from neurips26.bridge import torch_backend
from neurips26.bridge.errors import ConvergenceError, NotPositiveDefiniteError
from neurips26.bridge.priors import GaussianPrior, GaussianTargets
from neurips26.harness.validation import check_choice, check_scalar

METHODS = ("block", "dense", "torch")  # marginals: fast path, oracle, batched torch
SWEEP_METHODS = ("block", "dense")
ORDERS = ("gauss-seidel", "jacobi")
DENSE_MAX = 256  # N*D up to which the dense oracle is used by default


def cholesky(M: np.ndarray, what: str) -> np.ndarray:
    """Lower Cholesky factor of ``M``; ``NotPositiveDefiniteError`` naming ``what`` instead of NaN."""
    try:
        L = np.linalg.cholesky(0.5 * (M + np.swapaxes(M, -1, -2)))
    except np.linalg.LinAlgError:
        raise NotPositiveDefiniteError(f"{what} is not positive definite") from None
    if not np.all(np.isfinite(L)):
        raise NotPositiveDefiniteError(f"{what} has non-finite entries")
    return L


def spd_inverse(M: np.ndarray, what: str) -> np.ndarray:
    """``M^-1`` for a symmetric positive-definite ``M`` (batched), via Cholesky."""
    L = cholesky(M, what)
    eye = np.broadcast_to(np.eye(M.shape[-1]), M.shape)
    Li = np.linalg.solve(L, eye)
    inv = np.swapaxes(Li, -1, -2) @ Li
    return 0.5 * (inv + np.swapaxes(inv, -1, -2))


def logdet_spd(M: np.ndarray, what: str) -> float:
    return float(2 * np.sum(np.log(np.diagonal(cholesky(M, what), axis1=-2, axis2=-1))))


# ============================================================================ the law
@dataclass(frozen=True)
class TiltedGaussian:
    """``R * exp(sum_k phi_k(x_k)) / Z`` with quadratic tilts ``(A_k, b_k)``: a Gaussian on N x D."""

    prior: GaussianPrior
    A: np.ndarray  # (N, D, D)
    b: np.ndarray  # (N, D)
    info: dict = field(default_factory=dict, compare=False)

    @classmethod
    def untilted(cls, prior: GaussianPrior) -> "TiltedGaussian":
        return cls(prior, np.zeros((prior.N, prior.D, prior.D)), np.zeros((prior.N, prior.D)))

    @property
    def N(self) -> int:
        return self.prior.N

    @property
    def D(self) -> int:
        return self.prior.D

    def blocks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(diag, off, eta)`` of this law's precision ``Lambda`` and potential ``eta``."""
        return self._blocks

    @cached_property
    def _blocks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        diag, off, eta = self.prior.precision_blocks()
        return diag + self.A, off, eta + self.b

    @cached_property
    def _block_marginals(self) -> tuple[np.ndarray, np.ndarray]:
        diag, off, eta = self.blocks()
        F, f = _forward(diag, off, eta, "law")
        G, g = _backward(diag, off, eta, "law")
        V = spd_inverse(F + G - diag, "slice marginal precision")
        return np.einsum("kij,kj->ki", V, f + g - eta), V

    @cached_property
    def _logdet(self) -> float:
        F, _ = self.forward()
        return logdet_spd(F, "forward Schur complement")

    # ------------------------------------------------------------------ messages (the fast path)
    def forward(self, what: str = "law") -> tuple[np.ndarray, np.ndarray]:
        diag, off, eta = self.blocks()
        return _forward(diag, off, eta, what)

    def marginals(self, method: str = "block") -> tuple[np.ndarray, np.ndarray]:
        """Slice means ``u (N, D)`` and covariances ``V (N, D, D)``; block (fast) or dense (reference)."""
        check_choice(method, "method", METHODS)
        if method == "torch":
            u, V, _ = torch_backend.batched_marginals(*(a[None] for a in self.blocks()))
            return u[0], V[0]
        if method == "dense":
            m, S = self.dense()
            idx = np.arange(self.N)
            Vs = S.reshape(self.N, self.D, self.N, self.D)[idx, :, idx, :]
            return m.reshape(self.N, self.D), Vs
        return self._block_marginals

    def logdet_precision(self) -> float:
        return self._logdet

    def mean(self) -> np.ndarray:
        return self.marginals()[0]

    def quad(self, x: np.ndarray) -> np.ndarray:
        """``x^T Lambda x`` for samples ``x (n, N, D)`` (batched matmuls, slice-major)."""
        diag, off, _ = self.blocks()
        xt = np.ascontiguousarray(np.swapaxes(x, 0, 1))  # (N, n, D)
        q = np.sum((xt @ diag) * xt, axis=(0, 2))
        if self.N > 1:
            q += 2 * np.sum((xt[:-1] @ off) * xt[1:], axis=(0, 2))
        return q

    def log_density(self, x: np.ndarray) -> np.ndarray:
        """``log p(x)`` for samples ``x (n, N, D)`` (exact: information form, log det by blocks)."""
        _, _, eta = self.blocks()
        m = self.mean()
        log_norm = (
            0.5 * float(np.sum(eta * m))
            - 0.5 * self.logdet_precision()
            + 0.5 * self.N * self.D * np.log(2 * np.pi)
        )
        return -0.5 * self.quad(x) + x.reshape(x.shape[0], -1) @ eta.reshape(-1) - log_norm

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` exact samples ``(n, N, D)``: forward filtering, backward sampling (no dense matrix)."""
        n = check_scalar(n, "n", int, min=1)
        diag, off, eta = self.blocks()
        F, f = _forward(diag, off, eta, "law")
        xt = np.empty((self.N, n, self.D))
        for k in range(self.N - 1, -1, -1):
            h = f[k][None, :] - (xt[k + 1] @ off[k].T if k < self.N - 1 else 0.0)
            L = cholesky(F[k], "forward Schur complement")
            mean = linalg.cho_solve((L, True), h.T).T
            xt[k] = mean + linalg.solve_triangular(L.T, rng.standard_normal((self.D, n)), lower=False).T
        return np.swapaxes(xt, 0, 1)

    # ------------------------------------------------------------------ the dense reference
    def dense_precision(self) -> tuple[np.ndarray, np.ndarray]:
        diag, off, eta = self.blocks()
        N, D = self.N, self.D
        Lam = np.zeros((N * D, N * D))
        for k in range(N):
            Lam[k * D : (k + 1) * D, k * D : (k + 1) * D] = diag[k]
            if k < N - 1:
                Lam[k * D : (k + 1) * D, (k + 1) * D : (k + 2) * D] = off[k]
                Lam[(k + 1) * D : (k + 2) * D, k * D : (k + 1) * D] = off[k].T
        return Lam, eta.reshape(-1)

    def dense(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean ``(ND,)`` and covariance ``(ND, ND)`` by dense Cholesky of ``Lambda`` (the oracle)."""
        Lam, eta = self.dense_precision()
        S = spd_inverse(Lam, "precision Lambda")
        return S @ eta, S

    def reversed(self) -> "TiltedGaussian":
        return TiltedGaussian(
            self.prior.reversed(), self.A[::-1].copy(), self.b[::-1].copy(), dict(self.info)
        )

    def with_tilt(self, A: np.ndarray, b: np.ndarray, **info) -> "TiltedGaussian":
        return replace(self, A=A, b=b, info=dict(info))


def _forward(diag, off, eta, what):
    N = diag.shape[0]
    F, f = np.empty_like(diag), np.empty_like(eta)
    F[0], f[0] = diag[0], eta[0]
    for k in range(1, N):
        W = linalg.cho_solve((cholesky(F[k - 1], f"{what}: forward block {k - 1}"), True), off[k - 1])
        F[k] = diag[k] - off[k - 1].T @ W
        f[k] = eta[k] - W.T @ f[k - 1]
    cholesky(F[N - 1], f"{what}: forward block {N - 1}")
    return F, f


def _backward(diag, off, eta, what):
    N = diag.shape[0]
    G, g = np.empty_like(diag), np.empty_like(eta)
    G[-1], g[-1] = diag[-1], eta[-1]
    for k in range(N - 2, -1, -1):
        W = linalg.cho_solve((cholesky(G[k + 1], f"{what}: backward block {k + 1}"), True), off[k].T)
        G[k] = diag[k] - off[k] @ W
        g[k] = eta[k] - W.T @ g[k + 1]
    return G, g


# ============================================================================ sweeps and IPF
def _update(A_k, b_k, u, V, m, S, sigma, lam, k):
    """One smoothed, tempered natural-parameter update of slice k (IPF when sigma = 0, lam = 1)."""
    eye = np.eye(S.shape[0]) * sigma**2
    Si = spd_inverse(S + eye, f"target covariance of slice {k} (+ sigma^2 I)")
    Vi = spd_inverse(V + eye, f"slice {k} marginal covariance (+ sigma^2 I)")
    return A_k + lam * (Si - Vi), b_k + lam * (Si @ m - Vi @ u)


def tilt_sweep(
    law: TiltedGaussian,
    targets: GaussianTargets,
    sigma: float = 0.0,
    lam: float = 1.0,
    order: str = "gauss-seidel",
    method: str = "block",
) -> tuple[TiltedGaussian, float]:
    """One sweep of slice updates; returns the new law and the max marginal residual seen before updating.

    Gauss-Seidel (slices in order, each seeing the updates of the ones before) or Jacobi (all slices
    from the same marginals). ``method="block"`` refreshes the messages incrementally (O(N D^3) per
    sweep); ``"dense"`` refactors the ND x ND precision for each slice (the reference, O(N (ND)^3)).
    Every update checks that the new precision is positive definite (``NotPositiveDefiniteError``).
    """
    check_choice(order, "order", ORDERS)
    check_choice(method, "method", SWEEP_METHODS)
    A, b = law.A.copy(), law.b.copy()
    N = law.N
    res = 0.0
    what = f"tilt update (sigma = {sigma:.4g})"

    def resid(u, V, k):
        return max(float(np.max(np.abs(V - targets.covs[k]))), float(np.max(np.abs(u - targets.means[k]))))

    if order == "jacobi" or method == "dense":
        if order == "jacobi":
            u, V = law.marginals(method)
            for k in range(N):
                res = max(res, resid(u[k], V[k], k))
                A[k], b[k] = _update(A[k], b[k], u[k], V[k], targets.means[k], targets.covs[k], sigma, lam, k)
            new = law.with_tilt(A, b)
            new.forward(what)  # PD check of the updated precision
            return new, res
        for k in range(N):  # dense Gauss-Seidel: one factorisation per slice
            cur = law.with_tilt(A, b)
            Lam, eta = cur.dense_precision()
            D = law.D
            Lc = cholesky(Lam, what)
            E = np.zeros((N * D, D))
            E[k * D : (k + 1) * D] = np.eye(D)
            cols = linalg.cho_solve((Lc, True), np.column_stack([E, eta]))
            V, u = cols[k * D : (k + 1) * D, :D], cols[k * D : (k + 1) * D, D]
            V = 0.5 * (V + V.T)
            res = max(res, resid(u, V, k))
            A[k], b[k] = _update(A[k], b[k], u, V, targets.means[k], targets.covs[k], sigma, lam, k)
        new = law.with_tilt(A, b)
        cholesky(new.dense_precision()[0], what)
        return new, res
    # block Gauss-Seidel with incremental messages: backward messages of the old law (slices > k are
    # not yet updated when slice k is), forward messages refreshed as each slice is updated
    diag0, off, eta0 = law.prior.precision_blocks()
    G, g = _backward(diag0 + A, off, eta0 + b, what)
    Fprev = fprev = None
    for k in range(N):
        Bk, ek = diag0[k] + A[k], eta0[k] + b[k]
        if k == 0:
            Lk, lk = 0.0, 0.0
        else:
            W = linalg.cho_solve((cholesky(Fprev, f"{what}: forward block {k - 1}"), True), off[k - 1])
            Lk, lk = off[k - 1].T @ W, W.T @ fprev
        P = Bk - Lk + (G[k] - Bk)  # F_k + G_k - B_k
        V = spd_inverse(P, f"{what}: slice {k} marginal precision")
        u = V @ (ek - lk + (g[k] - ek))
        res = max(res, resid(u, V, k))
        A[k], b[k] = _update(A[k], b[k], u, V, targets.means[k], targets.covs[k], sigma, lam, k)
        Fprev, fprev = diag0[k] + A[k] - Lk, eta0[k] + b[k] - lk
    cholesky(Fprev, f"{what}: forward block {N - 1}")
    return law.with_tilt(A, b), res


def gaussian_ipf(
    prior: GaussianPrior,
    targets: GaussianTargets,
    tol: float = 1e-10,
    max_iter: int = 1000,
    method: str | None = None,
) -> TiltedGaussian:
    """The Schroedinger-bridge lift ``P* = argmin_{P in C} KL(P || R)`` of Gaussian slice targets, by IPF.

    method: ``"block"`` (O(N D^3) per sweep) or ``"dense"`` (the Cholesky oracle); default dense for
            ``N * D <= 256``, block otherwise. ``info`` of the result holds ``sweeps`` and ``residual``.
    Raises ``ConvergenceError`` (with the residual) after ``max_iter`` sweeps.
    """
    targets.check_against(prior)
    tol = check_scalar(tol, "tol", float, min=0, inclusive="neither")
    max_iter = check_scalar(max_iter, "max_iter", int, min=1)
    if method is None:
        method = "dense" if prior.N * prior.D <= DENSE_MAX else "block"
    check_choice(method, "method", SWEEP_METHODS)
    law = TiltedGaussian.untilted(prior)
    for it in range(1, max_iter + 1):
        law, res = tilt_sweep(law, targets, 0.0, 1.0, "gauss-seidel", method)
        if res < tol:
            u, V = law.marginals(method)
            final = max(float(np.max(np.abs(V - targets.covs))), float(np.max(np.abs(u - targets.means))))
            return law.with_tilt(law.A, law.b, sweeps=it, residual=final)
    raise ConvergenceError(
        f"Gaussian IPF did not reach tol = {tol:g} in {max_iter} sweeps "
        f"(marginal residual {res:.3g}; infeasible targets?)",
        res,
        max_iter,
    )


# ============================================================================ dense laws and KL
@dataclass(frozen=True)
class DenseGaussian:
    """A Gaussian given by mean ``(n,)`` and covariance ``(n, n)`` (S4's output law, stacks = 2 volumes)."""

    mean: np.ndarray
    cov: np.ndarray

    @classmethod
    def of(cls, law: "TiltedGaussian | DenseGaussian") -> "DenseGaussian":
        if isinstance(law, DenseGaussian):
            return law
        m, S = law.dense()
        return cls(m, S)


def gaussian_kl_dense(m0, S0, m1, S1) -> float:
    """``KL(N(m0, S0) || N(m1, S1))`` in closed form, log-dets by Cholesky."""
    L1 = cholesky(S1, "second covariance")
    n = m0.size
    Linv_S0 = linalg.solve_triangular(L1, S0, lower=True)
    tr = float(np.trace(linalg.solve_triangular(L1, Linv_S0.T, lower=True)))
    d = linalg.solve_triangular(L1, m1 - m0, lower=True)
    return 0.5 * (
        tr + float(d @ d) - n + logdet_spd(S1, "second covariance") - logdet_spd(S0, "first covariance")
    )


def gaussian_kl(p: "TiltedGaussian | DenseGaussian", q: "TiltedGaussian | DenseGaussian") -> float:
    """``KL(p || q)``. Two tilts of the same prior use the block formula (no ND x ND matrix)::

        KL = 1/2 [ sum_k tr((A^q_k - A^p_k) V^p_k) + d^T Lambda_q d - log det Lambda_q + log det Lambda_p ]

    with ``d = m_q - m_p``; otherwise the dense closed form.
    """
    if isinstance(p, TiltedGaussian) and isinstance(q, TiltedGaussian) and p.prior is q.prior:
        u, V = p.marginals()
        dA = q.A - p.A
        d = (q.mean() - u)[None]
        val = 0.5 * (
            float(np.einsum("kij,kji->", dA, V))
            + float(q.quad(d)[0])
            - q.logdet_precision()
            + p.logdet_precision()
        )
        return val
    a, c = DenseGaussian.of(p), DenseGaussian.of(q)
    return gaussian_kl_dense(a.mean, a.cov, c.mean, c.cov)
