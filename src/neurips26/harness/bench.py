"""The one timing helper and the bench row, so every ratio in the project means the same thing.

``compare`` times ours and the anchor in *interleaved* rounds (ours, anchor, anchor, ours, ... so a
drift in machine load falls on both alike), after warm-up calls that are not counted, and reports
the **median** of each (p90 and n in the row's note). On a shared, noisy machine compare the ratio,
not the absolute times::

    row = compare("fit 1-D", lambda: ours.fit(x), lambda: anchor.fit(x), anchor_name="sklearn KDE")
    row = compare("simulate", run_ours, run_anchor, anchor_name="libCacheSim", work=n_requests,
                  unit="req/s")                       # throughput: work / median seconds, higher is better
    row = compare("create", ours, None, anchor_name="docker", missing="docker.io not installed")
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from neurips26.harness.validation import check_scalar

_TIME_UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}


@dataclass(frozen=True)
class BenchRow:
    """One side-by-side comparison.

    ratio = how many times better ours is than the anchor: anchor/ours when lower is better
    (times, memory), ours/anchor when higher is better (throughput). None when the anchor did
    not run (``note`` says why).
    """

    name: str
    ours: float
    anchor: float | None
    anchor_name: str
    unit: str
    better: str = "lower"
    note: str = ""

    def __post_init__(self) -> None:
        if self.better not in ("lower", "higher"):
            raise ValueError(f"better must be 'lower' or 'higher', got {self.better!r}")

    @property
    def ratio(self) -> float | None:
        if self.anchor is None or not self.ours or not self.anchor:
            return None
        r = self.anchor / self.ours if self.better == "lower" else self.ours / self.anchor
        return r if math.isfinite(r) else None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["ratio"] = self.ratio
        return d


@dataclass(frozen=True)
class Timing:
    """Wall-clock samples of one callable, in seconds per call."""

    samples: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p90(self) -> float:
        return quantile(self.samples, 0.9)


def quantile(xs: "tuple[float, ...] | list[float]", q: float) -> float:
    """The ``q`` quantile of ``xs`` by linear interpolation (numpy's default rule)."""
    s = sorted(xs)
    if not s:
        raise ValueError("quantile of no samples")
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _once(fn: Callable[[], Any], number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def time_interleaved(*fns: Callable[[], Any] | None, rounds: int = 7, warmup: int = 1,
                     number: int = 1) -> list[Timing | None]:
    """Time each callable (None: skipped) in interleaved rounds; seconds per call.

    Each round runs every callable once (``number`` calls, averaged); the order alternates between
    rounds (forward, then reversed) so a slow drift in load is shared. ``warmup`` uncounted rounds
    come first (JIT compilation, caches, imports).
    """
    rounds = check_scalar(rounds, "rounds", int, min=1)
    warmup = check_scalar(warmup, "warmup", int, min=0)
    number = check_scalar(number, "number", int, min=1)
    live = [i for i, f in enumerate(fns) if f is not None]
    samples: dict[int, list[float]] = {i: [] for i in live}
    for r in range(warmup + rounds):
        order = live if r % 2 == 0 else live[::-1]
        for i in order:
            t = _once(fns[i], number)  # type: ignore[arg-type]
            if r >= warmup:
                samples[i].append(t)
    return [Timing(tuple(samples[i])) if i in samples else None for i in range(len(fns))]


def time_call(fn: Callable[[], Any], rounds: int = 7, warmup: int = 1, number: int = 1) -> Timing:
    """Time one callable (for rows whose anchor is measured elsewhere)."""
    return time_interleaved(fn, rounds=rounds, warmup=warmup, number=number)[0]  # type: ignore[return-value]


def stat_note(ours: Timing, anchor: Timing | None, unit: str = "ms") -> str:
    """The statistic and n of a row: ``median of 7 interleaved rounds; p90 ours 1.2 ms, anchor 3.4 ms``."""
    k = _TIME_UNITS.get(unit, 1e3)
    u = unit if unit in _TIME_UNITS else "ms"
    text = f"median of {ours.n} interleaved rounds; p90 ours {ours.p90 * k:.4g} {u}"
    if anchor is not None:
        text += f", anchor {anchor.p90 * k:.4g} {u}"
    return text


def compare(name: str, ours: Callable[[], Any], anchor: Callable[[], Any] | None, anchor_name: str,
            unit: str = "ms", work: float | None = None, rounds: int = 7, warmup: int = 1,
            number: int = 1, missing: str = "", note: str = "") -> BenchRow:
    """Time ``ours`` against ``anchor`` (interleaved; medians) and return the row.

    unit:    a time unit (``s``, ``ms``, ``us``, ``ns``; lower is better), or, with ``work``, the
             throughput unit (``work / median seconds``; higher is better), e.g. ``"req/s"``.
    anchor:  None when the anchor cannot run here; ``missing`` says why (e.g. which package).
    """
    if work is None and unit not in _TIME_UNITS:
        raise ValueError(f"unit must be one of {tuple(_TIME_UNITS)} for a timing, or give work= for a "
                         f"throughput in {unit!r}")
    if work is not None:
        work = check_scalar(work, "work", float, min=0, inclusive="neither")
    t_ours, t_anchor = time_interleaved(ours, anchor, rounds=rounds, warmup=warmup, number=number)
    assert t_ours is not None

    def value(t: Timing | None) -> float | None:
        if t is None:
            return None
        return work / t.median if work is not None else t.median * _TIME_UNITS[unit]

    text = stat_note(t_ours, t_anchor, unit if work is None else "ms")
    if anchor is None and missing:
        text = f"{anchor_name} not run: {missing}; {text}"
    if note:
        text = f"{note}; {text}"
    return BenchRow(name, value(t_ours), value(t_anchor), anchor_name, unit,
                    "higher" if work is not None else "lower", text)
