"""Regularizers of FTRL on the simplex and their mirror maps -- the object of study.

A separable regularizer h(y) = sum_j phi(y_j) on Delta_m defines the FTRL learner

    y_t = argmin_{y in Delta_m} eta <L_{t-1}, y> + h(y) = grad Phi(-eta L_{t-1}),
    Phi(theta) = max_{y in Delta_m} <theta, y> - h(y)             (the convex conjugate on the simplex).

The mirror map y = grad Phi(theta) is one-dimensional root finding (KKT):

    y_j = (phi')^{-1}(theta_j - lambda)   (clipped at 0 for a non-steep phi),   sum_j y_j(lambda) = 1,

with sum_j y_j(lambda) decreasing (and convex) in lambda.

| name        | phi(y)              | phi'(y)                   | steep?            |
| entropic    | y ln y              | 1 + ln y                  | yes               |
| euclidean   | y^2 / 2             | y                         | no                |
| tsallis-q   | (y^q - y) / (q - 1) | (q y^{q-1} - 1) / (q - 1) | q < 1 yes, q > 1 no |
| log_barrier | -ln y               | -1 / y                    | yes               |

``mirror_torch`` is the same algorithm in torch (float64, any device: the GPU path); the
``sharded`` module splits a batch across ``torch.distributed`` ranks.

Every map is shift invariant (theta and theta + c 1 give the same y), so theta is shifted by its row
maximum before each map, and all work is float64. Maps are batched: ``mirror(theta)`` takes (m,) or
(B, m) and returns the same shape.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod

import numpy as np
from scipy.special import logsumexp, xlogy

from neurips26.harness.validation import check_array, check_choice, check_scalar

#: the names ``regularizer()`` accepts (tsallis takes ``q``; "tsallis-0.5" is also accepted)
NAMES = ("entropic", "euclidean", "tsallis", "log_barrier")
#: root-finding tolerance on |sum_j y_j - 1| and the step cap (spec §2)
ROOT_TOL = 1e-13
MAX_STEPS = 100


class Regularizer(ABC):
    """A separable regularizer h(y) = sum_j phi(y_j) on the simplex with its mirror map.

    Subclasses give phi, phi', phi'' and the batched map; everything else (h, Phi, the Hessian of Phi,
    the sweeping susceptibility, the elimination threshold, the FTRL regret constants) follows here.
    """

    name: str = ""
    steep: bool = True
    #: strong-convexity constant mu_h and the norm it is measured in (spec §5 fairness rule)
    mu: float = 1.0
    norm: str = "l2"

    # ---- the scalar function phi --------------------------------------------------------------
    @abstractmethod
    def phi(self, y: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def dphi(self, y: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def d2phi(self, y: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def map_unchecked(self, theta: np.ndarray) -> np.ndarray:
        """grad Phi(theta) for a float64 (B, m) array, no validation (the simulator's hot path)."""

    def map_torch(self, theta):
        """grad Phi(theta) for a float64 torch tensor (B, m), on its device (the GPU path)."""
        raise NotImplementedError(f"{self.name} has no torch path")  # pragma: no cover

    # ---- derived objects ------------------------------------------------------------------------
    def mirror_torch(self, theta):
        """The torch path of ``mirror``: a (B, m) or (m,) tensor (any device), computed in float64."""
        import torch

        if not isinstance(theta, torch.Tensor):
            raise TypeError(f"theta must be a torch.Tensor, got {type(theta).__name__}")
        if theta.ndim not in (1, 2) or theta.numel() == 0:
            raise ValueError(f"theta must be 1- or 2-dimensional and non-empty, "
                             f"got shape {tuple(theta.shape)}")
        th = theta.to(torch.float64)
        if not bool(torch.isfinite(th).all()):
            raise ValueError("theta must be finite")
        y = self.map_torch(th.reshape(-1, th.shape[-1]))
        return y.reshape(th.shape)

    def mirror(self, theta) -> np.ndarray:
        """y = grad Phi(theta), batched over rows: (m,) -> (m,), (B, m) -> (B, m)."""
        th = check_array(theta, "theta", ndim=(1, 2), dtype=float, min_size=1)
        y = self.map_unchecked(np.atleast_2d(th))
        return y[0] if th.ndim == 1 else y

    def log_mirror(self, theta) -> np.ndarray:
        """log grad Phi(theta) (-inf off the support), exact where y itself underflows (entropic)."""
        y = self.mirror(theta)
        with np.errstate(divide="ignore"):
            return np.log(y)

    def h(self, y) -> np.ndarray:
        """h(y) = sum_j phi(y_j) along the last axis (+inf on the boundary for log-barrier)."""
        return np.sum(self.phi(np.asarray(y, dtype=np.float64)), axis=-1)

    def potential(self, theta) -> np.ndarray:
        """Phi(theta) = <theta, y> - h(y) at y = grad Phi(theta)."""
        th = np.asarray(theta, dtype=np.float64)
        y = self.mirror(th)
        return np.sum(th * y, axis=-1) - self.h(y)

    def hessian(self, theta) -> np.ndarray:
        """Hessian of Phi at theta: D - D 1 1^T D / (1^T D 1), D = diag(1 / phi''(y_j)) on supp(y)."""
        y = self.mirror(np.asarray(theta, dtype=np.float64).reshape(-1))
        d = np.zeros_like(y)
        on = y > 0
        d[on] = 1.0 / self.d2phi(y[on])
        return np.diag(d) - np.outer(d, d) / d.sum()

    def hessian_scale(self, k: int) -> float:
        """1 / phi''(1/k): H_inf = P_O / phi''(1/k) at y = u_O (spec §3)."""
        k = check_scalar(k, "k", int, min=1)
        return float(1.0 / self.d2phi(np.array(1.0 / k)))

    def uniform_value(self, k: int) -> float:
        """h(u_k) for the uniform distribution on k coordinates (the others 0; phi(0) = 0 where finite)."""
        k = check_scalar(k, "k", int, min=1)
        return float(k * self.phi(np.array(1.0 / k)))

    def sweeping_susceptibility(self, m: int, k: int) -> float:
        """sigma_sweep(h; m, k) = h(u_O) - h(u_m): eta times the saturated sweeping surplus.

        +inf (with a warning) for a regularizer infinite on the boundary (log-barrier) when k < m.
        """
        m = check_scalar(m, "m", int, min=1)
        k = check_scalar(k, "k", int, min=1, max=m)
        if k == m:
            return 0.0
        if not self.finite_on_boundary:
            warnings.warn(f"{self.name}: h is infinite on the simplex boundary, so the sweeping surplus "
                          f"has no finite limit (grows like (1/eta) sum_j ln(eta T Delta_j)); returning inf",
                          RuntimeWarning, stacklevel=2)
            return math.inf
        return self.uniform_value(k) - self.uniform_value(m)

    finite_on_boundary: bool = True

    def elimination_threshold(self, k: int) -> float:
        """phi'(1/k) - phi'(0): a suboptimal action j is dropped once eta (t-1) Delta_j reaches it.

        +inf for a steep regularizer (phi'(0+) = -inf: never dropped).
        """
        k = check_scalar(k, "k", int, min=1)
        if self.steep:
            return math.inf
        return float(self.dphi(np.array(1.0 / k)) - self.dphi(np.array(0.0)))

    def range(self, m: int, T: int | None = None) -> float:
        """D_h = h(vertex) - h(u_m), the regret-bound range (log-barrier: m ln T, spec §5)."""
        m = check_scalar(m, "m", int, min=1)
        vertex = float(self.phi(np.array(1.0))) + (m - 1) * float(self.phi(np.array(0.0)))
        return vertex - self.uniform_value(m)

    def dual_bound(self, m: int) -> float:
        """G_h^2: the squared dual norm of a loss vector in [-1, 1]^m (1 for L1/Linf, m for L2)."""
        m = check_scalar(m, "m", int, min=1)
        return 1.0 if self.norm == "l1" else float(m)

    def dual_norm_sq(self, losses: np.ndarray) -> np.ndarray:
        """||l||_*^2 per row: ||l||_inf^2 for the L1-strongly-convex entropy, ||l||_2^2 otherwise."""
        loss = np.asarray(losses, dtype=np.float64)
        if self.norm == "l1":
            return np.max(np.abs(loss), axis=-1) ** 2
        return np.sum(loss * loss, axis=-1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))


class Entropic(Regularizer):
    """h(y) = sum y ln y (Hedge / multiplicative weights): y = softmax(theta) in closed form."""

    name = "entropic"
    steep = True
    mu = 1.0
    norm = "l1"

    def phi(self, y):
        return xlogy(y, y)

    def dphi(self, y):
        return 1.0 + np.log(y)

    def d2phi(self, y):
        return 1.0 / y

    def map_unchecked(self, theta):
        e = np.exp(theta - theta.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def map_torch(self, theta):
        return theta.softmax(dim=-1)

    def potential(self, theta):
        return logsumexp(np.asarray(theta, dtype=np.float64), axis=-1)

    def log_mirror(self, theta):
        th = check_array(theta, "theta", ndim=(1, 2), dtype=float, min_size=1)
        return th - logsumexp(th, axis=-1, keepdims=True)


class Euclidean(Regularizer):
    """h(y) = sum y^2 / 2 (lazy projected gradient): y = Euclidean projection of theta onto the simplex.

    Sort-based (Duchi et al. 2008): u = sort(theta) descending, rho = last index with
    u_rho > (cumsum(u)_rho - 1) / rho, tau = (cumsum(u)_rho - 1) / rho, y = max(theta - tau, 0).
    """

    name = "euclidean"
    steep = False
    mu = 1.0
    norm = "l2"

    def phi(self, y):
        return 0.5 * y * y

    def dphi(self, y):
        return np.asarray(y, dtype=np.float64) * 1.0

    def d2phi(self, y):
        return np.ones_like(np.asarray(y, dtype=np.float64))

    def map_unchecked(self, theta):
        th = theta - theta.max(axis=-1, keepdims=True)
        u = -np.sort(-th, axis=-1)
        css = np.cumsum(u, axis=-1) - 1.0
        idx = np.arange(1, th.shape[-1] + 1, dtype=np.float64)
        rho = np.sum(u > css / idx, axis=-1)  # the condition holds exactly on a prefix
        tau = np.take_along_axis(css, (rho - 1)[:, None], axis=-1) / rho[:, None]
        return np.maximum(th - tau, 0.0)

    def map_torch(self, theta):
        import torch

        th = theta - theta.max(dim=-1, keepdim=True).values
        u = torch.sort(th, dim=-1, descending=True).values
        css = torch.cumsum(u, dim=-1) - 1.0
        idx = torch.arange(1, th.shape[-1] + 1, dtype=th.dtype, device=th.device)
        rho = (u > css / idx).sum(dim=-1, keepdim=True)
        tau = torch.gather(css, -1, rho - 1) / rho
        return torch.clamp(th - tau, min=0.0)


class Tsallis(Regularizer):
    """h(y) = sum (y^q - y) / (q - 1), q in (0, 2], q != 1: steep for q < 1, non-steep for q > 1.

    (phi')^{-1}(s) = ((1 + (q-1) s) / q)^{1/(q-1)} (0 where 1 + (q-1) s <= 0 when q > 1). After the
    shift max theta = 0, lambda lies in [-phi'(1), -phi'(1/m)] = [-1, -phi'(1/m)]; F(lambda) =
    sum_j y_j - 1 is convex and decreasing (y_j = max(base, 0)^{1/(q-1)} with base affine in lambda),
    so Newton from the left end climbs monotonically to the root (F' = -sum_{y_j > 0} y_j^{2-q} / q)
    and never leaves the bracket (safeguarded Newton: clamped at the left end against round-off).
    Stops at |F| <= 1e-13 (<= 100 steps); y is renormalised by its sum.
    """

    steep = True
    norm = "l2"

    def __init__(self, q: float = 0.5):
        q = check_scalar(q, "q", float, min=0.0, max=2.0, inclusive="right")
        if q == 1.0:
            raise ValueError("q must not be 1 for Tsallis (q -> 1 is the entropic regularizer)")
        self.q = q
        self.steep = q < 1.0
        self.mu = q  # phi'' = q y^{q-2} >= q on (0, 1] for q <= 2
        self.name = f"tsallis-{q:g}"

    def phi(self, y):
        y = np.asarray(y, dtype=np.float64)
        return (np.power(y, self.q) - y) / (self.q - 1.0)

    def dphi(self, y):
        y = np.asarray(y, dtype=np.float64)
        with np.errstate(divide="ignore"):
            return (self.q * np.power(y, self.q - 1.0) - 1.0) / (self.q - 1.0)

    def d2phi(self, y):
        return self.q * np.power(np.asarray(y, dtype=np.float64), self.q - 2.0)

    def inverse_dphi(self, s: np.ndarray) -> np.ndarray:
        base = (1.0 + (self.q - 1.0) * s) / self.q
        return _pow(np.maximum(base, 0.0), 1.0 / (self.q - 1.0))

    def map_unchecked(self, theta):
        q = self.q
        th = theta - theta.max(axis=-1, keepdims=True)
        # base_j(lambda) = (1 + (q-1)(theta_j - lambda)) / q = a_j + b lambda
        a = (1.0 + (q - 1.0) * th) / q
        b = (1.0 - q) / q
        p, p2 = 1.0 / (q - 1.0), 2.0 - q
        lam = np.full((th.shape[0], 1), -1.0)  # the left end of the bracket: F(lam) >= 0
        for _ in range(MAX_STEPS):
            y = _pow(np.maximum(a + b * lam, 0.0), p)
            F = y.sum(axis=-1, keepdims=True) - 1.0
            if np.abs(F).max() <= ROOT_TOL:
                break
            # F is convex and decreasing: the Newton step from the left never passes the root
            lam = np.maximum(lam + F * q / _pow(y, p2).sum(axis=-1, keepdims=True), -1.0)
        return y / y.sum(axis=-1, keepdims=True)

    def map_torch(self, theta):
        q = self.q
        th = theta - theta.max(dim=-1, keepdim=True).values
        a = (1.0 + (q - 1.0) * th) / q
        b = (1.0 - q) / q
        lam = th.new_full((th.shape[0], 1), -1.0)
        for _ in range(MAX_STEPS):
            y = (a + b * lam).clamp(min=0.0).pow(1.0 / (q - 1.0))
            F = y.sum(dim=-1, keepdim=True) - 1.0
            if float(F.abs().max()) <= ROOT_TOL:
                break
            lam = (lam + F * q / y.pow(2.0 - q).sum(dim=-1, keepdim=True)).clamp(min=-1.0)
        return y / y.sum(dim=-1, keepdim=True)

    def __repr__(self) -> str:
        return f"Tsallis(q={self.q:g})"


def _pow(x: np.ndarray, p: float) -> np.ndarray:
    """x ** p with the exponents of the default Tsallis maps (q = 0.5, 1.5) done without pow()."""
    if p == 2.0:
        return x * x
    if p == -2.0:
        with np.errstate(divide="ignore"):
            return 1.0 / (x * x)
    if p == 1.5:
        return x * np.sqrt(x)
    if p == 0.5:
        return np.sqrt(x)
    with np.errstate(divide="ignore"):
        return np.power(x, p)


class LogBarrier(Regularizer):
    """h(y) = -sum ln y: y_j = 1 / (lambda - theta_j), lambda in [max theta + 1, max theta + m].

    F(lambda) = sum_j 1/(lambda - theta_j) - 1 is convex and decreasing on (max theta, inf), so Newton
    from the LEFT end lambda = max theta + 1 (F >= 0) increases monotonically to the root and never
    crosses the pole (from the right end it can jump past it: theta = (0, -10, -10), lambda0 = 3).
    """

    name = "log_barrier"
    steep = True
    mu = 1.0
    norm = "l2"
    finite_on_boundary = False

    def phi(self, y):
        y = np.asarray(y, dtype=np.float64)
        with np.errstate(divide="ignore"):
            return -np.log(y)

    def dphi(self, y):
        with np.errstate(divide="ignore"):
            return -1.0 / np.asarray(y, dtype=np.float64)

    def d2phi(self, y):
        return 1.0 / np.asarray(y, dtype=np.float64) ** 2

    def map_unchecked(self, theta):
        th = theta - theta.max(axis=-1, keepdims=True)
        lam = np.ones((th.shape[0], 1))
        for _ in range(MAX_STEPS):
            y = 1.0 / (lam - th)
            F = y.sum(axis=-1, keepdims=True) - 1.0
            if np.abs(F).max() <= ROOT_TOL:
                break
            lam = lam + F / (y * y).sum(axis=-1, keepdims=True)
        return y / y.sum(axis=-1, keepdims=True)

    def map_torch(self, theta):
        th = theta - theta.max(dim=-1, keepdim=True).values
        lam = th.new_ones((th.shape[0], 1))
        for _ in range(MAX_STEPS):
            y = 1.0 / (lam - th)
            F = y.sum(dim=-1, keepdim=True) - 1.0
            if float(F.abs().max()) <= ROOT_TOL:
                break
            lam = lam + F / (y * y).sum(dim=-1, keepdim=True)
        return y / y.sum(dim=-1, keepdim=True)

    def range(self, m: int, T: int | None = None) -> float:
        """m ln T: the range of the smoothed comparator (1 - 1/T) e_j + u_m / T (spec §5)."""
        m = check_scalar(m, "m", int, min=1)
        if T is None:
            return math.inf
        T = check_scalar(T, "T", int, min=2)
        return m * math.log(T)


def regularizer(name: "str | Regularizer", q: float | None = None) -> Regularizer:
    """A regularizer by name: ``entropic``, ``euclidean``, ``tsallis`` (with ``q``), ``log_barrier``.

    ``"tsallis-0.5"`` is the same as ``regularizer("tsallis", q=0.5)``; a Regularizer is returned as is.
    """
    if isinstance(name, Regularizer):
        return name
    if not isinstance(name, str):
        raise TypeError(f"regularizer must be a name or a Regularizer, got {type(name).__name__}")
    base = name
    if name.startswith("tsallis-"):
        base, text = "tsallis", name.split("-", 1)[1]
        try:
            q = float(text)
        except ValueError:
            raise ValueError(f"regularizer: cannot read q from {name!r}") from None
    check_choice(base, "regularizer", NAMES)
    if base == "entropic":
        return Entropic()
    if base == "euclidean":
        return Euclidean()
    if base == "log_barrier":
        return LogBarrier()
    return Tsallis(0.5 if q is None else q)


#: the regularizers of the experiments (spec: the "4 regularizers" of quick + log-barrier)
DEFAULT_FIVE = ("entropic", "euclidean", "tsallis-0.5", "tsallis-1.5", "log_barrier")
