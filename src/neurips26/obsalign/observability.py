"""Relation-level support signals and the observability score omega (spec section 4).

For each relation ``r = (m, m', c)``, ``m != m'`` (all arrays are (K, K, C), symmetric in m, m'):

    B(r) = g(n(m,m',c) + lambda_br max_b min(n(m,b,c), n(b,m',c)))          bridge evidence
    S(r) = sqrt(g(n(m,c)) g(n(m',c)))                                         side support
    K(r) = (n(m,m',c) K_pair + n_0 K_proto) / (n(m,m',c) + n_0)               cross-modal consistency
    U(r) = max(u(m,c), u(m',c)),  u = sqrt(v/n + b) / delta(m)                prototype uncertainty
    omega_raw = B^aB S^aS K^aK exp(-aU U);  omega = clip(omega_raw / Q_0.9(omega_raw > 0), 0, 1)

with ``g(n) = n / (n + n_0)``; then an EMA over rounds. **ASSUMPTION**: the multiplicative form, its
exponents, the calibration quantile and every constant (the abstract states none).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from neurips26.harness.validation import check_scalar
from neurips26.obsalign.sketch import Pooled, Sketch

SIGNALS = ("bridge", "side", "consistency", "uncertainty")


@dataclass(frozen=True)
class OmegaParams:
    n0: float = 5.0
    lambda_br: float = 0.5
    tau_K: float = 0.1
    exponents: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)   # a_B, a_S, a_K, a_U
    quantile: float = 0.9
    calibrate: bool = True
    drop: tuple[str, ...] = ()          # ablation: signals set to 1 (U to 0)

    def __post_init__(self) -> None:
        check_scalar(self.n0, "n0", float, min=0, inclusive="neither")
        check_scalar(self.lambda_br, "lambda_br", float, min=0)
        check_scalar(self.tau_K, "tau_K", float, min=0, inclusive="neither")
        check_scalar(self.quantile, "quantile", float, min=0, max=1, inclusive="right")
        if len(self.exponents) != 4:
            raise ValueError(f"exponents must be 4 numbers (a_B, a_S, a_K, a_U), got {self.exponents}")
        for name, a in zip(("a_B", "a_S", "a_K", "a_U"), self.exponents):
            check_scalar(a, name, float, min=0)
        for s in self.drop:
            if s not in SIGNALS:
                raise ValueError(f"drop must name signals among {SIGNALS}, got {s!r}")


def _unit(mu: np.ndarray) -> np.ndarray:
    return mu / np.maximum(np.linalg.norm(mu, axis=-1, keepdims=True), 1e-12)


def _proto_cos(p: Pooled) -> np.ndarray:
    """``cos[m, m', c, c'] = cos(mu(m, c), mu(m', c'))`` (K, K, C, C), all modality pairs in one product."""
    u = _unit(p.mu)
    return np.matmul(u[:, None], np.swapaxes(u, 1, 2)[None])


def _off_diag(a: np.ndarray) -> np.ndarray:
    """``a`` (K, K, C) with the m == m' entries set to 0."""
    return np.where(np.eye(a.shape[0], dtype=bool)[:, :, None], 0.0, a)


def kappa_neg(p: Pooled, cos: np.ndarray | None = None) -> np.ndarray:
    """Symmetrised wrong-class prototype agreement ``kappa_neg(m, m', c)`` (K, K, C), 0 for m == m':

    kappa_neg = 0.5 [mean_{c' != c, n(m', c') > 0} cos(mu(m, c), mu(m', c'))
                     + mean_{c' != c, n(m, c') > 0} cos(mu(m', c), mu(m, c'))]

    (``cos`` = ``_proto_cos(p)`` when the caller has it.)"""
    K, C, _ = p.mu.shape
    cos = _proto_cos(p) if cos is None else cos
    off = ~np.eye(C, dtype=bool)
    sel = off[None, None] & (p.n > 0)[None, :, None, :]             # [m, m', c, c']: c' != c observed in m'
    cnt = sel.sum(axis=-1)
    t1 = np.divide((cos * sel).sum(axis=-1), cnt, out=np.zeros((K, K, C)), where=cnt > 0)
    return _off_diag(0.5 * (t1 + np.swapaxes(t1, 0, 1)))           # the second mean is t1 at (m', m)


def signals(p: Pooled, prm: OmegaParams = OmegaParams()) -> dict[str, np.ndarray]:
    """The four support signals B, S, K, U as (K, K, C) arrays (zero on the diagonal m == m'), every
    modality pair at once (the formulas of the module docstring)."""
    K, C, _ = p.mu.shape
    g = lambda n: n / (n + prm.n0)  # noqa: E731
    npair = p.n_pair
    # bridge[m, m', c] = max_{b not in {m, m'}} min(n(m, b, c), n(b, m', c)) (0 without a pivot; counts >= 0)
    via = np.minimum(npair[:, :, None, :], npair[None, :, :, :])    # [m, b, m', c]
    eye = np.eye(K, dtype=bool)
    pivot = ~(eye[:, :, None] | eye.T[None, :, :])                  # [m, b, m']: b != m and b != m'
    bridge = np.where(pivot[..., None], via, 0.0).max(axis=1) if K > 2 else np.zeros((K, K, C))
    B = g(npair + prm.lambda_br * bridge)                           # B = g(n(m,m',c) + lambda_br bridge)
    gn = g(p.n)
    S = np.sqrt(gn[:, None] * gn[None, :])                          # S = sqrt(g(n(m,c)) g(n(m',c)))
    cos = _proto_cos(p)
    kneg = kappa_neg(p, cos)
    kpair = np.clip((p.kappa - kneg) / np.maximum(1 - kneg, 1e-6), 0, 1)
    # K_proto = 0.5 [softmax_{c'}(cos(mu(m,c), mu(m',c'))/tau_K)[c] + the same with m, m' swapped]
    sm = _softmax_diag(cos, (p.n > 0)[None, :, :], prm.tau_K)       # [m, m', c], over c' observed in m'
    kproto = 0.5 * (sm + np.swapaxes(sm, 0, 1))
    Kc = (npair * kpair + prm.n0 * kproto) / (npair + prm.n0)       # K = (n K_pair + n_0 K_proto) / (n + n_0)
    u = np.sqrt(np.divide(p.v, p.n, out=np.zeros_like(p.v), where=p.n > 0) + p.b) / p.delta[:, None]
    U = np.maximum(u[:, None], u[None, :])                          # U = max(u(m,c), u(m',c))
    return {"bridge": _off_diag(B), "side": _off_diag(S), "consistency": _off_diag(Kc),
            "uncertainty": _off_diag(U)}


def _softmax_diag(cos: np.ndarray, valid: np.ndarray, tau: float) -> np.ndarray:
    """``softmax_{c'}(cos[..., c, c'] / tau)[c]`` over the valid (observed) c'; 0 where c itself is not valid.
    ``cos`` (..., C, C), ``valid`` (..., C) (broadcast)."""
    logits = np.where(valid[..., None, :], cos / tau, -np.inf)
    logits = np.where(valid[..., :, None], logits, 0.0)            # rows of invalid c: unused, kept finite
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return np.where(valid, np.diagonal(e, axis1=-2, axis2=-1) / e.sum(axis=-1), 0.0)


def omega_raw(sig: dict[str, np.ndarray], prm: OmegaParams = OmegaParams()) -> np.ndarray:
    """``B^aB S^aS K^aK exp(-aU U)``; zero where a side is unobserved (S = 0) and on the diagonal."""
    aB, aS, aK, aU = prm.exponents
    B = np.ones_like(sig["bridge"]) if "bridge" in prm.drop else sig["bridge"]
    K_ = np.ones_like(sig["consistency"]) if "consistency" in prm.drop else sig["consistency"]
    U = np.zeros_like(sig["uncertainty"]) if "uncertainty" in prm.drop else sig["uncertainty"]
    S = sig["side"]
    observed = S > 0
    S_ = np.ones_like(S) if "side" in prm.drop else S
    w = (B ** aB) * (S_ ** aS) * (K_ ** aK) * np.exp(-aU * U)
    return np.where(observed, w, 0.0)


def calibrate(w_raw: np.ndarray, q: float = 0.9) -> np.ndarray:
    """Divide by the global ``q`` quantile of the positive unordered-relation scores, clip to [0, 1]."""
    K = w_raw.shape[0]
    iu = np.triu_indices(K, 1)
    vals = w_raw[iu[0], iu[1]].ravel()
    vals = vals[vals > 0]
    if not len(vals):
        return np.zeros_like(w_raw)
    return np.clip(w_raw / float(np.quantile(vals, q)), 0.0, 1.0)


def reliability(sk: Sketch, p: Pooled, kneg: np.ndarray, min_pairs: int = 5) -> np.ndarray:
    """Per-source reliability ``c_s(r) = clip((kappa_s - kappa_neg)/(kappa - kappa_neg), 0, 1)``, else 1."""
    den = p.kappa - kneg
    ok = (sk.pair_counts >= min_pairs) & (den > 1e-6)
    c = np.clip((sk.pair_cons - kneg) / np.where(ok, den, 1.0), 0.0, 1.0)
    return np.where(ok, c, 1.0)


def transfer_weight(omega: np.ndarray, tau_lo: float = 0.1, tau_hi: float = 0.5,
                    kappa: float = 1.0) -> np.ndarray:
    """``w_tr``: omega if strong, ``omega (omega/tau_hi)^kappa`` if weak, 0 if unobservable."""
    check_thresholds(tau_lo, tau_hi)
    weak = omega * (omega / tau_hi) ** kappa
    return np.where(omega >= tau_hi, omega, np.where(omega >= tau_lo, weak, 0.0))


def check_thresholds(tau_lo: float, tau_hi: float) -> None:
    check_scalar(tau_lo, "tau_lo", float, min=0, max=1)
    check_scalar(tau_hi, "tau_hi", float, min=0, max=1, inclusive="right")
    if tau_lo > tau_hi:
        raise ValueError(f"tau_lo must be <= tau_hi, got tau_lo={tau_lo}, tau_hi={tau_hi}")


@dataclass
class ObservabilityTracker:
    """omega over rounds: signals -> raw -> (calibrated) -> EMA (starts from the first computed omega)."""

    params: OmegaParams = field(default_factory=OmegaParams)
    beta: float = 0.5
    omega: np.ndarray | None = None

    def __post_init__(self) -> None:
        check_scalar(self.beta, "beta", float, min=0, max=1, inclusive="right")

    def update(self, p: Pooled) -> np.ndarray:
        raw = omega_raw(signals(p, self.params), self.params)
        w = calibrate(raw, self.params.quantile) if self.params.calibrate else np.clip(raw, 0, 1)
        self.omega = w if self.omega is None else (1 - self.beta) * self.omega + self.beta * w
        return self.omega
