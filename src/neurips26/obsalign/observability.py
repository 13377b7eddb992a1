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


def _cos_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    na = np.linalg.norm(a, axis=-1, keepdims=True)
    nb = np.linalg.norm(b, axis=-1, keepdims=True)
    return (a / np.maximum(na, 1e-12)) @ (b / np.maximum(nb, 1e-12)).T


def kappa_neg(p: Pooled) -> np.ndarray:
    """Symmetrised wrong-class prototype agreement ``kappa_neg(m, m', c)`` (K, K, C)."""
    K, C, _ = p.mu.shape
    out = np.zeros((K, K, C))
    off = ~np.eye(C, dtype=bool)
    for m in range(K):
        for m2 in range(K):
            if m == m2:
                continue
            cos = _cos_matrix(p.mu[m], p.mu[m2])          # [c, c'] = cos(mu(m,c), mu(m2,c'))
            m1 = off & (p.n[m2] > 0)[None, :]              # [c, c']: c' != c observed in m2
            m2_ = off & (p.n[m] > 0)[:, None]              # [c', c]: c' != c observed in m
            t1 = np.divide((cos * m1).sum(axis=1), m1.sum(axis=1), out=np.zeros(C), where=m1.any(axis=1))
            t2 = np.divide((cos * m2_).sum(axis=0), m2_.sum(axis=0), out=np.zeros(C), where=m2_.any(axis=0))
            out[m, m2] = 0.5 * (t1 + t2)
    return out


def signals(p: Pooled, prm: OmegaParams = OmegaParams()) -> dict[str, np.ndarray]:
    """The four support signals B, S, K, U as (K, K, C) arrays (zero on the diagonal m == m')."""
    K, C, _ = p.mu.shape
    g = lambda n: n / (n + prm.n0)  # noqa: E731
    B = np.zeros((K, K, C))
    S = np.zeros((K, K, C))
    Kc = np.zeros((K, K, C))
    U = np.zeros((K, K, C))
    kneg = kappa_neg(p)
    u = np.sqrt(np.divide(p.v, p.n, out=np.zeros_like(p.v), where=p.n > 0) + p.b) / p.delta[:, None]
    for m in range(K):
        for m2 in range(K):
            if m == m2:
                continue
            bridge = np.zeros(C)
            for b in range(K):
                if b not in (m, m2):
                    bridge = np.maximum(bridge, np.minimum(p.n_pair[m, b], p.n_pair[b, m2]))
            B[m, m2] = g(p.n_pair[m, m2] + prm.lambda_br * bridge)
            S[m, m2] = np.sqrt(g(p.n[m]) * g(p.n[m2]))
            kpair = np.clip((p.kappa[m, m2] - kneg[m, m2]) / np.maximum(1 - kneg[m, m2], 1e-6), 0, 1)
            cos = _cos_matrix(p.mu[m], p.mu[m2])
            kproto = 0.5 * (_softmax_diag(cos, p.n[m2] > 0, prm.tau_K)
                            + _softmax_diag(cos.T, p.n[m] > 0, prm.tau_K))
            npair = p.n_pair[m, m2]
            Kc[m, m2] = (npair * kpair + prm.n0 * kproto) / (npair + prm.n0)
            U[m, m2] = np.maximum(u[m], u[m2])
    return {"bridge": B, "side": S, "consistency": Kc, "uncertainty": U}


def _softmax_diag(cos: np.ndarray, valid: np.ndarray, tau: float) -> np.ndarray:
    """``softmax_{c'}(cos[c, c'] / tau)[c]`` over the valid (observed) c'; 0 where c itself is not valid."""
    logits = np.where(valid[None, :], cos / tau, -np.inf)
    logits = np.where(valid[:, None], logits, 0.0)                 # rows of invalid c: unused, kept finite
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return np.where(valid, np.diag(e) / e.sum(axis=1), 0.0)


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
