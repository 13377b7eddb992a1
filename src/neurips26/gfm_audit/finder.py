"""The disagreement finder, faithful to the authors' ``analysis_1_divergence``.

1. Keep rows with a numeric value and non-empty canonical model, benchmark and metric (a row's own
   ``model_name``/``benchmark_name`` is used as given; the alias table only fills empty ones);
   optional year cap on the reporting paper (default 2025, needs the papers table).
2. Keys: strict = (model, benchmark, metric, eval, regime); loose = (model, benchmark, metric).
   ``regime="full"`` keeps only full-label rows before grouping (the headline table).
3. Skip a group if: ``slug(model)`` is a generic baseline (``BASELINE_MODELS``); the benchmark is a
   detection set (``DETECTION_BENCHMARKS``) with a mAP metric; one paper reports >1 distinct value
   (rounded to 4 decimals); any row has a non-empty ``num_training_samples``; < 2 distinct papers.
4. ``spread = max - min`` in points; n, n_papers, min, max, population std, member rows.
5. ``count_at_least(groups, t)`` compares the raw float spread with ``>=``, no tolerance (so
   16.4 - 6.4 = 9.999999999999998 does not reach 10), as the authors do. Groups sorted by spread
   descending, ties in order of first appearance (the authors' stable sort over dict order).
6. NEW: the provenance of each group's extremes and the copy chains (A copied from B ...).

Two implementations of steps 2-4: ``method="reference"`` is the authors' dict-of-lists loop;
``method="fast"`` argsorts one int64 code of (group key, paper) once and reduces segments
(``np.minimum.reduceat`` ...; the intra-paper rule as min != max of the rounded values per pair).
They return the same groups (tested).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Sequence

import numpy as np

from neurips26.gfm_audit.canon import AliasTable, normalise_eval, slug
from neurips26.gfm_audit.schema import PaperRecord, ResultRecord
from neurips26.harness.validation import check_choice, check_scalar

BASELINE_MODELS = frozenset(
    {
        "random",
        "scratch",
        "fromscratch",
        "imagenet",
        "imagenetsupervised",
        "mlp",
        "linearprobe",
        "supervised",
        "lightgbm",
        "xgboost",
        "randomforest",
        "rf",
        "svm",
        "knn",
    }
)
DETECTION_BENCHMARKS = frozenset({"dota", "dior", "diorr", "dotav1", "dotav2"})
DETECTION_METRICS = frozenset({"map", "ap", "map50", "map75"})
THRESHOLDS = (5.0, 10.0, 20.0)
HEADLINE_THRESHOLD = 10.0
STRICT_COLS = ("model", "benchmark", "metric", "eval", "regime")
LOOSE_COLS = ("model", "benchmark", "metric")
_KEYS = {"strict": STRICT_COLS, "loose": LOOSE_COLS}
_STR_COLS = (
    "model",
    "benchmark",
    "metric",
    "eval",
    "regime",
    "paper",
    "provenance",
    "copied_from",
    "model_raw",
    "benchmark_raw",
)


def _factorise(vals: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(np.asarray(vals, dtype=str), return_inverse=True)`` by one dict pass (no string sort
    of all rows): codes (int64) into the sorted uniques (object array of str)."""
    index: dict[str, int] = {}
    put = index.setdefault
    k = np.fromiter(
        (put(v if type(v) is str else str(v), len(index)) for v in vals), dtype=np.int64, count=len(vals)
    )
    keys = list(index)
    order = sorted(range(len(keys)), key=keys.__getitem__)  # code-point order, as numpy's
    rank = np.empty(len(keys), dtype=np.int64)
    rank[order] = np.arange(len(keys))
    u = np.empty(len(keys), dtype=object)
    u[:] = [keys[o] for o in order]
    return rank[k] if len(k) else k, u


@dataclass
class ResultTable:
    """Canonicalised result rows as columns: strings as (codes, uniques), values in points.

    Building it (canonicalising and factorising strings) is *loading*; the finder works on codes.
    """

    codes: dict[str, np.ndarray]  # column -> int64 codes
    uniques: dict[str, np.ndarray]  # column -> object array of the strings
    value: np.ndarray  # float64 points
    nts: np.ndarray  # bool: num_training_samples given
    row: np.ndarray  # int64 index of the source record

    def __len__(self) -> int:
        return len(self.value)

    def col(self, name: str) -> np.ndarray:
        return self.uniques[name][self.codes[name]]

    @classmethod
    def from_columns(
        cls,
        columns: dict[str, Sequence[Any]],
        value: Sequence[float],
        nts: Sequence[bool],
        row: Sequence[int] | None = None,
    ) -> "ResultTable":
        codes, uniques = {}, {}
        for c in _STR_COLS:
            vals = columns.get(c)
            if vals is None:
                vals = [""] * len(value)
            codes[c], uniques[c] = _factorise(vals)
        v = np.asarray(value, dtype=np.float64)
        r = np.arange(len(v), dtype=np.int64) if row is None else np.asarray(row, dtype=np.int64)
        return cls(codes, uniques, v, np.asarray(nts, dtype=bool), r)

    @classmethod
    def from_records(
        cls,
        results: Iterable[ResultRecord],
        aliases: AliasTable | None = None,
        papers: Iterable[PaperRecord] | None = None,
        year_cap: int | None = 2025,
        paper_mode: bool = True,
    ) -> "ResultTable":
        """Step 1: canonical names (as given, else from ``aliases``), eval category, year cap."""
        years = {p.paper_id: p.year for p in papers} if papers is not None else None
        if year_cap is not None:
            year_cap = check_scalar(year_cap, "year_cap", int, min=1990, max=2100)
        cols: dict[str, list] = {c: [] for c in _STR_COLS}
        c_model, c_bench, c_metric, c_eval, c_regime, c_paper, c_prov, c_copied, c_mraw, c_braw = (
            cols[c] for c in _STR_COLS
        )
        eval_cache: dict[str, str] = {}
        value, nts, rows = [], [], []
        for i, r in enumerate(results):
            if years is not None and year_cap is not None and years.get(r.paper_id, 0) > year_cap:
                continue
            model = r.model_name or (aliases.canonical(r.model_name_raw, "model") if aliases else None)
            bench = r.benchmark_name or (
                aliases.canonical(r.benchmark_name_raw, "downstream") if aliases else None
            )
            if not (model and bench and r.metric_name):
                continue
            ev = r.evaluation_strategy
            if ev not in eval_cache:
                eval_cache[ev] = normalise_eval(ev, paper_mode)
            c_model.append(model)
            c_bench.append(bench)
            c_metric.append(r.metric_name)
            c_eval.append(eval_cache[ev])
            c_regime.append(r.train_regime or "full")
            c_paper.append(r.paper_id)
            c_prov.append(r.provenance)
            c_copied.append(r.copied_from or "")
            c_mraw.append(r.model_name_raw)
            c_braw.append(r.benchmark_name_raw)
            value.append(r.points)
            nts.append(bool(str(r.num_training_samples or "").strip()))
            rows.append(i)
        return cls.from_columns(cols, value, nts, rows)

    def subset(self, mask: np.ndarray) -> "ResultTable":
        return ResultTable(
            {c: k[mask] for c, k in self.codes.items()},
            self.uniques,
            self.value[mask],
            self.nts[mask],
            self.row[mask],
        )


@dataclass
class Group:
    """One multi-paper group that survived the skip rules."""

    key: dict[str, str]
    n: int
    n_papers: int
    min: float
    max: float
    spread: float
    std: float
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    table: "ResultTable | None" = field(default=None, repr=False, compare=False)

    @property
    def members(self) -> list[dict]:
        """The rows as dicts (value, paper, provenance, copied_from, raw names, source row), on demand."""
        if self.table is None:
            return []
        return [_member(self.table, int(i)) for i in self.rows]

    def _col(self, name: str) -> np.ndarray:
        if self.table is None:
            return np.zeros(0, dtype=object)
        return self.table.uniques[name][self.table.codes[name][self.rows]]

    @cached_property
    def extremes_provenance(self) -> dict[str, list[str]]:
        """NEW: provenance of the rows at the min and at the max."""
        if self.table is None:
            return {"min": [], "max": []}
        v, prov = self.table.value[self.rows], self._col("provenance")
        return {
            "min": sorted(set(prov[v == self.min].tolist())),
            "max": sorted(set(prov[v == self.max].tolist())),
        }

    def provenances(self) -> list[str]:
        return self._col("provenance").tolist()

    def to_dict(self) -> dict:
        d = dict(self.key)
        d.update(
            n=self.n,
            n_papers=self.n_papers,
            min=self.min,
            max=self.max,
            spread=self.spread,
            std=self.std,
            extremes_provenance=self.extremes_provenance,
            papers=sorted(set(self._col("paper").tolist())),
        )
        return d


def _skip_key(key: dict[str, str]) -> bool:
    if slug(key["model"]) in BASELINE_MODELS:
        return True
    return slug(key["benchmark"]) in DETECTION_BENCHMARKS and key["metric"] in DETECTION_METRICS


def _member(t: ResultTable, i: int) -> dict:
    return {
        "value": float(t.value[i]),
        "paper": t.uniques["paper"][t.codes["paper"][i]],
        "provenance": t.uniques["provenance"][t.codes["provenance"][i]],
        "copied_from": t.uniques["copied_from"][t.codes["copied_from"][i]] or None,
        "model_raw": t.uniques["model_raw"][t.codes["model_raw"][i]],
        "benchmark_raw": t.uniques["benchmark_raw"][t.codes["benchmark_raw"][i]],
        "row": int(t.row[i]),
    }


def _reference(t: ResultTable, cols: tuple[str, ...]) -> list[Group]:
    """The authors' loop: dict of lists keyed by the tuple, one Python summary per group."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    colvals = {c: t.col(c) for c in cols + ("paper",)}
    for i in range(len(t)):
        groups[tuple(colvals[c][i] for c in cols)].append(i)
    out = []
    for key, idx in groups.items():
        kd = dict(zip(cols, key))
        if _skip_key(kd):
            continue
        by_paper: dict[str, set] = defaultdict(set)
        for i in idx:
            by_paper[colvals["paper"][i]].add(round(float(t.value[i]), 4))
        if any(len(s) > 1 for s in by_paper.values()):
            continue
        if any(t.nts[i] for i in idx):
            continue
        if len(by_paper) < 2:
            continue
        xs = [float(t.value[i]) for i in idx]
        out.append(
            Group(
                kd,
                len(xs),
                len(by_paper),
                min(xs),
                max(xs),
                max(xs) - min(xs),
                float(np.std(xs)),
                np.asarray(idx, dtype=np.int64),
                t,
            )
        )
    out.sort(key=lambda g: g.spread, reverse=True)
    return out


def _composite(parts: Sequence[tuple[np.ndarray, int]]) -> np.ndarray:
    """One int64 code per row for a tuple of code columns (``(codes, radix)`` pairs), mixed-radix.

    When the next radix would overflow int64 the running code is densified (``np.unique``) first, so any
    number of columns fits; equal tuples get equal codes, and the code order is the tuple order.
    """
    key = np.zeros(len(parts[0][0]), dtype=np.int64)
    span = 1
    for codes, radix in parts:
        radix = max(int(radix), 1)
        if span * radix >= 2**62:
            uniq, key = np.unique(key, return_inverse=True)
            key = key.astype(np.int64, copy=False)
            span = len(uniq)
        key = key * radix + codes
        span *= radix
    return key


def _fast(t: ResultTable, cols: tuple[str, ...], sel: np.ndarray | None = None) -> list[Group]:
    """Vectorised: one argsort of a single int64 (group, paper) code, segment reductions.

    ``sel``: the rows of ``t`` to use (increasing indices; None = all). A (group, paper) pair has more
    than one distinct value (rounded to 4 decimals) iff its min and max rounded values differ, so the
    value need not be part of the sort.
    """
    take = (lambda a: a) if sel is None else (lambda a: a[sel])
    value = take(t.value)
    n = len(value)
    if n == 0:
        return []
    paper = take(t.codes["paper"])
    key = _composite([(take(t.codes[c]), len(t.uniques[c])) for c in cols] + [(paper, len(t.uniques["paper"]))])
    order = np.argsort(key)
    ks = key[order]
    P = max(len(t.uniques["paper"]), 1)
    gk = ks // P  # the group part of the code (the paper code is the last digit)
    pair_start = np.empty(n, dtype=bool)
    pair_start[0] = True
    np.not_equal(ks[1:], ks[:-1], out=pair_start[1:])
    group_start = np.empty(n, dtype=bool)
    group_start[0] = True
    np.not_equal(gk[1:], gk[:-1], out=group_start[1:])
    p_starts = np.flatnonzero(pair_start)
    g_starts = np.flatnonzero(group_start)
    n_g = len(g_starts)
    count = np.diff(np.append(g_starts, n))
    vs = value[order]
    rv = np.round(vs, 4)
    # pairs: distinct rounded values > 1  <=>  min != max
    amb_pair = np.minimum.reduceat(rv, p_starts) != np.maximum.reduceat(rv, p_starts)
    pair_group = np.cumsum(group_start[p_starts]) - 1  # group index of each pair
    n_papers = np.bincount(pair_group, minlength=n_g)
    ambiguous = np.bincount(pair_group, weights=amb_pair, minlength=n_g) > 0
    vmin = np.minimum.reduceat(vs, g_starts)
    vmax = np.maximum.reduceat(vs, g_starts)
    any_nts = np.logical_or.reduceat(take(t.nts)[order], g_starts)
    orig = order if sel is None else sel[order]  # rows of t, in sorted order
    first = orig[g_starts]  # a row of each group, for its key
    skip_key = np.zeros(n_g, dtype=bool)
    if "model" in cols:
        base = np.array([slug(m) in BASELINE_MODELS for m in t.uniques["model"]], dtype=bool)
        skip_key |= base[t.codes["model"][first]]
    if "benchmark" in cols and "metric" in cols:
        det = np.array([slug(b) in DETECTION_BENCHMARKS for b in t.uniques["benchmark"]], dtype=bool)
        dmet = np.array([m in DETECTION_METRICS for m in t.uniques["metric"]], dtype=bool)
        skip_key |= det[t.codes["benchmark"][first]] & dmet[t.codes["metric"][first]]
    keep = ~(skip_key | ambiguous | any_nts | (n_papers < 2))
    kept = np.flatnonzero(keep)
    spread = vmax - vmin
    # the authors' order: first appearance, then a stable sort by spread descending
    first_row = np.minimum.reduceat(orig, g_starts)
    kept = kept[np.argsort(first_row[kept], kind="stable")]
    kept = kept[np.argsort(-spread[kept], kind="stable")]
    # population std, two-pass
    mean = np.add.reduceat(vs, g_starts) / count
    std = np.sqrt(np.add.reduceat((vs - np.repeat(mean, count)) ** 2, g_starts) / count)
    # per-group scalars gathered once (Python lists), not indexed per group
    keys = {c: t.uniques[c][t.codes[c][first[kept]]].tolist() for c in cols}
    cols_ = list(cols)
    stats_ = zip(
        count[kept].tolist(),
        n_papers[kept].tolist(),
        vmin[kept].tolist(),
        vmax[kept].tolist(),
        spread[kept].tolist(),
        std[kept].tolist(),
    )
    out = []
    starts = g_starts[kept].tolist()
    for j, (s0, st) in enumerate(zip(starts, stats_)):
        idx = orig[s0 : s0 + st[0]].copy()
        idx.sort()
        out.append(Group(dict(zip(cols_, [keys[c][j] for c in cols_])), *st, idx, t))
    return out


def find_disagreements(
    table: ResultTable,
    key: str = "strict",
    regime: str | None = "full",
    method: str = "fast",
) -> list[Group]:
    """Multi-paper groups of ``table`` by the ``strict`` or ``loose`` key, sorted by spread descending.

    regime:  ``"full"`` keeps full-label rows only (the authors' headline); None keeps every regime.
    method:  ``"fast"`` (vectorised) or ``"reference"`` (the authors' loop); same result.
    """
    check_choice(key, "key", tuple(_KEYS))
    check_choice(method, "method", ("fast", "reference"))
    if not isinstance(table, ResultTable):
        raise TypeError(f"table must be a ResultTable, got {type(table).__name__}")
    cols = _KEYS[key]
    sel = None
    if regime is not None:
        code = np.flatnonzero(table.uniques["regime"] == regime)
        sel = np.flatnonzero(np.isin(table.codes["regime"], code))
    if method == "fast":
        return _fast(table, cols, sel)
    return _reference(table if sel is None else table.subset(sel), cols)


def count_at_least(groups: Sequence[Group], threshold: float) -> int:
    """Groups whose raw float spread is ``>= threshold`` (no tolerance, as the authors)."""
    return sum(1 for g in groups if g.spread >= threshold)


def spread_summary(groups: Sequence[Group]) -> dict[str, Any]:
    """n, counts at 5/10/20, mean/median/p75/p90/max of the spreads."""
    s = np.array([g.spread for g in groups], dtype=float)
    out: dict[str, Any] = {"n_groups": len(s)}
    out.update({f"n_ge_{t:g}": count_at_least(groups, t) for t in THRESHOLDS})
    if len(s):
        out.update(
            mean=float(s.mean()),
            median=float(np.median(s)),
            p75=float(np.quantile(s, 0.75)),
            p90=float(np.quantile(s, 0.9)),
            max=float(s.max()),
        )
    return out


def protocol_mismatches(
    table: ResultTable, threshold: float = HEADLINE_THRESHOLD, loose: Sequence[Group] | None = None
) -> dict[str, int]:
    """Baseline (ii): loose groups >= threshold vs those still >= threshold under the strict key.

    A loose group whose strict sub-groups all stay below the threshold (or vanish) is a protocol
    mismatch, not a disagreement. ``loose``: the loose groups (all regimes) when already computed.
    """
    if loose is None:
        loose = find_disagreements(table, "loose", None)
    loose = [g for g in loose if g.spread >= threshold]
    strict = find_disagreements(table, "strict", None)
    hot = {(g.key["model"], g.key["benchmark"], g.key["metric"]) for g in strict if g.spread >= threshold}
    mism = [g for g in loose if (g.key["model"], g.key["benchmark"], g.key["metric"]) not in hot]
    return {"loose_ge": len(loose), "strict_ge": len(hot), "protocol_mismatch": len(mism)}


def naive_leaderboard(table: ResultTable) -> list[dict]:
    """Baseline (i): the best reported value per (model, benchmark, metric), protocol ignored.

    Ties go to the first row reporting the best value.
    """
    n = len(table)
    if n == 0:
        return []
    mc, bc, tc = (table.codes[c] for c in ("model", "benchmark", "metric"))
    order = np.lexsort((np.arange(n), -table.value, tc, bc, mc))
    key = np.stack([mc, bc, tc], axis=1)[order]
    first = np.ones(n, dtype=bool)
    first[1:] = np.any(key[1:] != key[:-1], axis=1)
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, n))
    out = []
    for s_, c_ in zip(starts, counts):
        i = order[s_]
        out.append(
            {
                "model": table.uniques["model"][mc[i]],
                "benchmark": table.uniques["benchmark"][bc[i]],
                "metric": table.uniques["metric"][tc[i]],
                "value": float(table.value[i]),
                "paper": table.uniques["paper"][table.codes["paper"][i]],
                "n_reports": int(c_),
            }
        )
    return sorted(out, key=lambda d: (d["benchmark"], d["metric"], -d["value"]))


def copy_chains(results: Sequence[ResultRecord]) -> list[list[str]]:
    """NEW: chains of papers linked by ``copied_from`` (``[A, B, C]``: A copied from B, B from C).

    Each maximal chain once, starting at a paper nobody copies from; cycles are cut where they repeat.
    """
    src: dict[str, set[str]] = defaultdict(set)
    for r in results:
        if r.provenance == "copied" and r.copied_from:
            src[r.paper_id].add(r.copied_from)
    copied_by = {b for bs in src.values() for b in bs}
    chains: list[list[str]] = []

    def walk(path: list[str]) -> None:
        nxt = sorted(src.get(path[-1], ()))
        nxt = [b for b in nxt if b not in path]
        if not nxt:
            chains.append(path)
            return
        for b in nxt:
            walk(path + [b])

    for a in sorted(src):
        if a not in copied_by:
            walk([a])
    if not chains and src:  # pure cycles
        walk([sorted(src)[0]])
    return chains


def provenance_split(groups: Sequence[Group]) -> dict[str, Any]:
    """NEW: how many groups have a copied or unknown value at an extreme; within-provenance spreads."""
    out = {"n_groups": len(groups), "extreme_copied": 0, "extreme_unknown": 0, "all_rerun_or_own": 0}
    for g in groups:
        ext = set(g.extremes_provenance["min"]) | set(g.extremes_provenance["max"])
        out["extreme_copied"] += "copied" in ext
        out["extreme_unknown"] += "unknown" in ext
        out["all_rerun_or_own"] += all(p in ("own", "rerun") for p in g.provenances())
    return out
