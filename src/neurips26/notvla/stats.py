"""Wilson score intervals for success rates and the Newcombe interval of a difference of two rates."""

from __future__ import annotations

import math

from neurips26.harness.validation import check_scalar

Z95 = 1.959963984540054


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval of k successes in n trials."""
    n = check_scalar(n, "n", int, min=1)
    k = check_scalar(k, "k", int, min=0, max=n)
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """95% interval of p1 - p2 by Newcombe's hybrid Wilson-score method (his method 10)."""
    l1, u1 = wilson(k1, n1)
    l2, u2 = wilson(k2, n2)
    p1, p2 = k1 / n1, k2 / n2
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def compare_rates(k1: int, n1: int, k2: int, n2: int) -> str:
    """'higher' (intervals apart, 1 above), 'lower' (apart the other way) or 'overlap'."""
    l1, u1 = wilson(k1, n1)
    l2, u2 = wilson(k2, n2)
    if l1 > u2:
        return "higher"
    if u1 < l2:
        return "lower"
    return "overlap"
