"""Claims and their verdicts.

A ``Claim`` is one headline statement of a paper with the paper's figure and a *check*: a function
of the measured metrics that returns the verdict and the measured figure. Verdicts are computed from
measurements, never written in; a claim that cannot be tested at this scale returns
``inconclusive`` with the reason as its measured text.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping

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


def evaluate_all(claims: "list[Claim] | tuple[Claim, ...]", metrics: Mapping[str, Any]) -> list[ClaimResult]:
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise ValueError(f"claim ids must be unique, got {ids}")
    return [c.evaluate(metrics) for c in claims]
