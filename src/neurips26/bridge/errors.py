"""Errors of the bridge testbed (a leaf module: every other module may raise these)."""

from __future__ import annotations


class NotPositiveDefiniteError(ValueError):
    """A precision or covariance that must be positive definite is not (Cholesky failed).

    Raised by every tilt update instead of letting a NaN through (acceptance check 11), and by S3
    when ``Q = A_k + sigma^-2 I`` is not positive definite (sigma above ``1/sqrt(-lambda_min(A_k))``).
    """


class ConvergenceError(RuntimeError):
    """IPF / Sinkhorn reached ``max_iter`` without the marginal residual falling below ``tol``.

    ``residual`` is the last max-marginal residual, ``iterations`` the sweeps done. A residual that
    stalls far above ``tol`` usually means the marginal constraints are infeasible for the prior.
    """

    def __init__(self, message: str, residual: float, iterations: int):
        super().__init__(message)
        self.residual = residual
        self.iterations = iterations


class InfeasibleError(ValueError):
    """The marginal constraints cannot be met under the prior (e.g. target mass where the law has none)."""
