"""Claims and their verdicts.

A ``Claim`` is one headline statement of a paper with the paper's figure and a *check*: a function
of the measured metrics that returns the verdict and the measured figure. Verdicts are computed from
measurements, never written in; a claim that cannot be tested at this scale returns
``inconclusive`` with the reason as its measured text.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

HOLDS = "holds"
FAILS = "fails"
INCONCLUSIVE = "inconclusive"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE)

Check = Callable[[Mapping[str, Any]], "tuple[str, str]"]


@dataclass(frozen=True)
class ClaimResult:
    id: str
    statement: str
    paper_figure: str
    measured: str
    verdict: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Claim:
    """One claim of a paper.

    check(metrics) -> (verdict, measured): verdict one of ``holds``/``fails``/``inconclusive``,
    measured a short text with our figure. A check that raises ``KeyError`` (a metric the run did
    not produce, e.g. a full-scale-only experiment) gives ``inconclusive`` naming the metric.
    """

    id: str
    statement: str
    paper_figure: str
    check: Check

    def evaluate(self, metrics: Mapping[str, Any]) -> ClaimResult:
        try:
            verdict, measured = self.check(metrics)
        except KeyError as e:
            verdict, measured = INCONCLUSIVE, f"not measured in this run (metric {e.args[0]!r} missing)"
        if verdict not in VERDICTS:
            raise ValueError(f"claim {self.id!r}: check returned verdict {verdict!r}, "
                             f"expected one of {VERDICTS}")
        return ClaimResult(self.id, self.statement, self.paper_figure, str(measured), verdict)


def verdict(condition: bool | None) -> str:
    """``holds`` if True, ``fails`` if False, ``inconclusive`` if None (or a NaN comparison)."""
    if condition is None:
        return INCONCLUSIVE
    return HOLDS if bool(condition) else FAILS


def at_least(metric: str, threshold: float, fmt: str = "{:.3g}") -> Check:
    """Check factory: holds when ``metrics[metric] >= threshold``; NaN is inconclusive."""

    def check(m: Mapping[str, Any]) -> tuple[str, str]:
        x = float(m[metric])
        if math.isnan(x):
            return INCONCLUSIVE, f"{metric} is NaN"
        return verdict(x >= threshold), f"{metric} = {fmt.format(x)} (needs >= {fmt.format(threshold)})"

    return check


def at_most(metric: str, threshold: float, fmt: str = "{:.3g}") -> Check:
    """Check factory: holds when ``metrics[metric] <= threshold``; NaN is inconclusive."""

    def check(m: Mapping[str, Any]) -> tuple[str, str]:
        x = float(m[metric])
        if math.isnan(x):
            return INCONCLUSIVE, f"{metric} is NaN"
        return verdict(x <= threshold), f"{metric} = {fmt.format(x)} (needs <= {fmt.format(threshold)})"

    return check


class SeedMetrics(dict):
    """The metrics a check sees when a run has several seeds.

    As a dict it is the first seed's metrics (so a check written for one seed still works);
    ``per_seed`` holds every seed's metrics in the order of ``seeds``. The helpers below
    (``seed_values``, ``paired``) read across seeds and fall back to the one run for a plain dict.
    """

    def __init__(self, seeds: Sequence[int], per_seed: Sequence[Mapping[str, Any]]):
        if len(seeds) != len(per_seed) or not seeds:
            raise ValueError("seeds and per_seed must be non-empty and of equal length")
        super().__init__(per_seed[0])
        self.seeds = list(seeds)
        self.per_seed = [dict(m) for m in per_seed]


def get_path(metrics: Mapping[str, Any], path: str) -> Any:
    """``metrics["a"]["b"]`` for ``path="a.b"``; a missing key raises ``KeyError(path)``."""
    node: Any = metrics
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(path)
        node = node[part]
    return node


def seed_values(metrics: Mapping[str, Any], path: str) -> list[float]:
    """The value at ``path`` in every seed's metrics (one value for a single-seed run)."""
    runs = getattr(metrics, "per_seed", None) or [metrics]
    return [float(get_path(m, path)) for m in runs]


def mean_se(xs: Sequence[float]) -> tuple[float, float, int]:
    """Mean, standard error of the mean (NaN for n < 2) and n of ``xs``."""
    n = len(xs)
    if n == 0:
        return math.nan, math.nan, 0
    mean = sum(xs) / n
    if n < 2:
        return mean, math.nan, n
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    return mean, math.sqrt(var / n), n


def paired(metrics: Mapping[str, Any], a: str, b: str) -> tuple[float, float, int]:
    """Paired difference ``a - b`` over seeds: (mean, standard error, n); se is NaN for one seed."""
    xa, xb = seed_values(metrics, a), seed_values(metrics, b)
    return mean_se([x - y for x, y in zip(xa, xb)])


def judge(mean: float, se: float, n: int, threshold: float = 0.0, k: float = 2.0,
          better: str = "higher", min_seeds: int = 2) -> str:
    """Verdict on ``mean`` against ``threshold`` that respects the noise.

    ``holds`` when the mean is beyond the threshold on the ``better`` side by more than ``k``
    standard errors, ``fails`` when it is beyond it on the other side by more than ``k`` s.e.,
    otherwise ``inconclusive`` — also with fewer than ``min_seeds`` seeds (no standard error).
    """
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', got {better!r}")
    if n < min_seeds or not math.isfinite(mean) or not math.isfinite(se):
        return INCONCLUSIVE
    d = (mean - threshold) if better == "higher" else (threshold - mean)
    if d > k * se:
        return HOLDS
    if d < -k * se:
        return FAILS
    return INCONCLUSIVE


def fmt_se(mean: float, se: float, n: int, fmt: str = "{:.3g}") -> str:
    """``0.12 ± 0.03 (n=3 seeds)``; ``0.12 (1 seed)`` without a standard error."""
    if n < 2 or not math.isfinite(se):
        return f"{fmt.format(mean)} (1 seed)"
    return f"{fmt.format(mean)} ± {fmt.format(se)} (n={n} seeds)"


def seeded(path: str, threshold: float, better: str = "higher", k: float = 2.0,
           fmt: str = "{:.3g}") -> Check:
    """Check factory: the per-seed values at ``path`` beat ``threshold`` by more than k s.e."""

    def check(m: Mapping[str, Any]) -> tuple[str, str]:
        mean, se, n = mean_se(seed_values(m, path))
        side = ">" if better == "higher" else "<"
        return (judge(mean, se, n, threshold, k, better),
                f"{path} = {fmt_se(mean, se, n, fmt)} (needs {side} {fmt.format(threshold)} by {k:g} s.e.)")

    return check


def evaluate_all(claims: "list[Claim] | tuple[Claim, ...]", metrics: Mapping[str, Any]) -> list[ClaimResult]:
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise ValueError(f"claim ids must be unique, got {ids}")
    return [c.evaluate(metrics) for c in claims]
