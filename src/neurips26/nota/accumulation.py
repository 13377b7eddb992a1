"""Accumulating per-task updates, and the forgetting-bound tools.

Per adapted matrix, with task updates ``dW_1..dW_t`` (old ones frozen):

- ``plain``    (InfLoRA-style):  ``dW^(t) = sum_{i<=t} alpha_i dW_i``  (alpha = 1)
- ``taskwise`` (SD-LoRA):        ``dW^(t) = sum_{i<t} alpha_i dW_i / n_i + alpha_t dW_t``, where ``n_i`` is
  ``||dW_i||_F`` (``norm="exact"``, clamped at 1e-12) or an upper bound such as ``||B_i|| ||A_i||``
  (``norm="product"``); the current term is unnormalized (it is 0 at the task start).
- ``global``   (NoTA):
  ``S_t = sum_{i<=t} alpha_i dW_i``,  ``dW^(t) = gamma S_t / sqrt(||S_t||^2 + eps^2)``

Forgetting bound. Let ``l_k`` be task k's loss, L-Lipschitz in the adapted weight (Frobenius). Then
``F_k = l_k(W^(T)) - l_k(W^(k)) <= L ||dW^(T) - dW^(k)||_F`` (the drift). Under ``global``,
``||dW^(t)||_F = gamma ||S_t|| / sqrt(||S_t||^2 + eps^2) <= gamma`` for every t, so the drift is at most
``2 gamma`` and ``F_k <= 2 L gamma`` for every k and every sequence length T. As eps -> 0 the drift is
exactly ``gamma sqrt(2 - 2 cos(S_T, S_k))``. Under ``taskwise`` the drift is bounded only by
``sum_{i>k} |alpha_i^(T)| + sum_{i<k} |alpha_i^(T) - alpha_i^(k)|
+ ||alpha_k^(T) dW_k/||dW_k|| - alpha_k^(k) dW_k||``,
which grows linearly in ``T - k`` when the alphas stay away from 0; under ``plain`` by
``sum_{i>k} ||dW_i||_F``, also growing in T. For a whole network sum over the adapted layers.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch

from neurips26.harness.validation import check_choice, check_scalar

RULES = ("plain", "taskwise", "global")
NORM_FLOOR = 1e-12


def global_normalize(s: torch.Tensor, gamma: float | torch.Tensor, eps: float) -> torch.Tensor:
    """``gamma * s / sqrt(||s||_F^2 + eps^2)``; its norm is below ``gamma`` for every ``s``."""
    return gamma * s / torch.sqrt(s.pow(2).sum() + eps ** 2)


def accumulate(deltas: Sequence[torch.Tensor], rule: str,
               alphas: Sequence[torch.Tensor | float] | None = None,
               gamma: float | torch.Tensor | None = None, eps: float | None = None,
               divisors: Sequence[torch.Tensor | float] | None = None) -> torch.Tensor:
    """The accumulated update ``dW^(t)`` of ``deltas = [dW_1..dW_t]`` under ``rule``.

    alphas:   task coefficients (default 1 each); divisors: taskwise divisors of the old terms
              (default ``||dW_i||_F`` clamped at 1e-12); gamma, eps: the global budget and smoothing.
    """
    rule = check_choice(rule, "rule", RULES)
    if not deltas:
        raise ValueError("deltas must hold at least one task update")
    t = len(deltas)
    alphas = [1.0] * t if alphas is None else list(alphas)
    if len(alphas) != t:
        raise ValueError(f"alphas has {len(alphas)} entries for {t} task updates")
    if rule == "taskwise":
        if divisors is None:
            divisors = [d.norm().clamp_min(NORM_FLOOR) for d in deltas[:-1]]
        out = alphas[-1] * deltas[-1]
        for a, d, n in zip(alphas[:-1], deltas[:-1], divisors):
            out = out + a * d / n
        return out
    s = sum(a * d for a, d in zip(alphas, deltas))
    if rule == "plain":
        return s
    if gamma is None or eps is None:
        raise ValueError("rule 'global' needs gamma and eps")
    if not torch.is_tensor(gamma):
        check_scalar(gamma, "gamma", float, min=0, inclusive="neither")
    check_scalar(eps, "eps", float, min=0, inclusive="neither")
    return global_normalize(s, gamma, eps)


def drifts(totals: Sequence[torch.Tensor]) -> list[float]:
    """``||dW^(T) - dW^(k)||_F`` for k = 1..T (``totals[k-1] = dW^(k)``)."""
    last = totals[-1]
    return [float((last - w).norm()) for w in totals]


def global_drift_exact(s_t: torch.Tensor, s_k: torch.Tensor, gamma: float, eps: float) -> float:
    """The drift of the global rule from the two sums (closed form of ``||N(S_T) - N(S_k)||``)."""
    a = gamma / math.sqrt(float(s_t.pow(2).sum()) + eps ** 2)
    b = gamma / math.sqrt(float(s_k.pow(2).sum()) + eps ** 2)
    nt2, nk2, dot = float(s_t.pow(2).sum()), float(s_k.pow(2).sum()), float((s_t * s_k).sum())
    return math.sqrt(max(a * a * nt2 + b * b * nk2 - 2 * a * b * dot, 0.0))


def bound_global(lipschitz: float, gamma: float) -> float:
    """``2 L gamma``: the T-independent forgetting bound of the global rule."""
    return 2.0 * lipschitz * gamma


def bound_plain(deltas: Sequence[torch.Tensor], k: int, lipschitz: float = 1.0) -> float:
    """``L sum_{i>k} ||dW_i||_F`` (k is 1-based): the plain rule's bound, growing in T."""
    return lipschitz * sum(float(d.norm()) for d in deltas[k:])


def bound_taskwise(alphas_t: Sequence[float], alphas_k: Sequence[float], delta_k: torch.Tensor, k: int,
                   lipschitz: float = 1.0) -> float:
    """The task-wise drift bound of the module docstring (k 1-based; alphas at times T and k)."""
    later = sum(abs(a) for a in alphas_t[k:])
    earlier = sum(abs(a - b) for a, b in zip(alphas_t[:k - 1], alphas_k[:k - 1]))
    nk = float(delta_k.norm())
    jump = float((alphas_t[k - 1] * delta_k / max(nk, NORM_FLOOR) - alphas_k[k - 1] * delta_k).norm())
    return lipschitz * (later + earlier + jump)
