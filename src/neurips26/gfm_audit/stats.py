"""Corpus statistics (the authors' ``critique_analyses``) and compliance with the six expectations.

- Gini of positive counts ``a`` sorted ascending, i from 1:  ``G = 2 sum_i i a_i / (n sum a) - (n+1)/n``
  (zeros dropped); HHI ``sum_i s_i^2`` with shares ``s_i = c_i / sum c``; top-k share.
- Bootstrap CI: resample the values with ``numpy.random.default_rng(seed).choice`` (1000 draws,
  2.5 / 97.5 % quantiles, seed 0), as the authors.
- Cherry-picking: per paper ``|D_p & top10| / |D_p|`` over canonical downstream sets.
- Pretraining uniqueness: per paper the ordered, de-duplicated tuple of canonical pretraining sets
  (``dict.fromkeys``; sensor-only entries and downstream-only benchmarks dropped); a non-empty tuple
  seen once is ``unique``, else ``shared``. ``ordered=False`` compares sets instead (NEW).
- Release shares: ``#true / #papers``; null counts as not released (reported separately).
- Compliance E1-E6: our operationalisation (ASSUMPTION, the paper names the expectations only).

Citation-only records are excluded; every statistic reports its denominator.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from neurips26.gfm_audit.canon import AliasTable
from neurips26.gfm_audit.schema import PaperRecord, ResultRecord
from neurips26.harness.validation import check_scalar

METHOD_BUCKETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("MAE / MIM", (r"\bmae\b", r"mask(ed)?\s*(image|autoencod|patch|pretrain)", r"\bmim\b")),
    ("Contrastive", (r"contrastiv", r"simclr", r"\bmoco\b", r"\bbyol\b", r"\bdino\b")),
    ("Vision-Language", (r"clip", r"vision-language", r"text-image", r"image-text", r"captioning")),
    ("Generative / Diffusion", (r"diffusion", r"generative\s+pretrain", r"\bgan\b")),
    ("Distillation / Teacher-Student", (r"distill", r"teacher-?student")),
    ("Supervised pretrain", (r"supervised\s+pretrain", r"label-?supervised")),
)
OTHER_METHOD = "Other / Hybrid"
MIN_SEEDS_E4 = 3
NON_LICENSES = ("none", "unspecified")


def gini(values: Iterable[float]) -> float:
    """Gini coefficient of the positive values (0 for none)."""
    a = np.sort(np.array([float(v) for v in values if v > 0], dtype=float))
    if a.size == 0:
        return 0.0
    n = a.size
    i = np.arange(1, n + 1)
    return float(2.0 * np.sum(i * a) / (n * a.sum()) - (n + 1) / n)


def hhi(counts: Iterable[float]) -> float:
    """Herfindahl-Hirschman index of the shares (0 for an empty or all-zero list)."""
    c = np.asarray(list(counts), dtype=float)
    total = c.sum()
    return 0.0 if total == 0 else float(np.sum((c / total) ** 2))


def top_k_share(counts: Iterable[float], k: int = 3) -> float:
    k = check_scalar(k, "k", int, min=1)
    c = np.sort(np.asarray(list(counts), dtype=float))[::-1]
    return 0.0 if c.sum() == 0 else float(c[:k].sum() / c.sum())


def bootstrap_ci(
    values: Sequence[float],
    fn: Callable[[list], float],
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float | None, float | None]:
    """Percentile bootstrap CI of ``fn(values)`` (the authors' resampling and quantiles)."""
    n_boot = check_scalar(n_boot, "n_boot", int, min=1)
    alpha = check_scalar(alpha, "alpha", float, min=0, max=1, inclusive="neither")
    if len(values) == 0:
        return None, None
    rng = np.random.default_rng(seed)
    arr = np.asarray(values, dtype=float)
    boots = [fn(rng.choice(arr, size=len(arr), replace=True).tolist()) for _ in range(n_boot)]
    return float(np.quantile(boots, alpha / 2)), float(np.quantile(boots, 1 - alpha / 2))


def _corpus(papers: Sequence[PaperRecord]) -> list[PaperRecord]:
    full = [p for p in papers if not p.citation_only]
    if not full:
        raise ValueError(
            "papers: empty corpus (no record with model or dataset fields; "
            "citation-only records are excluded from corpus statistics)"
        )
    return full


def _downstream(p: PaperRecord, aliases: AliasTable) -> list[str]:
    return [c for d in (p.downstream_datasets or []) if (c := aliases.canonical(d, "downstream"))]


def benchmark_concentration(
    papers: Sequence[PaperRecord], aliases: AliasTable, k: int = 3, n_boot: int = 1000
) -> dict[str, Any]:
    corpus = _corpus(papers)
    overall: Counter = Counter()
    by_year: dict[int, Counter] = defaultdict(Counter)
    for p in corpus:
        for c in _downstream(p, aliases):
            overall[c] += 1
            by_year[p.year][c] += 1
    counts = list(overall.values())
    lo, hi = bootstrap_ci(counts, gini, n_boot=n_boot)
    return {
        "n_papers": len(corpus),
        "n_unique_benchmarks": len(overall),
        "n_total_uses": sum(counts),
        "gini": gini(counts),
        "gini_ci_95": [lo, hi],
        "hhi": hhi(counts),
        f"top_{k}_share": top_k_share(counts, k) if counts else 0.0,
        "top_20": overall.most_common(20),
        "by_year": {
            str(y): {
                "gini": gini(c.values()),
                "hhi": hhi(c.values()),
                "n_papers": sum(1 for p in corpus if p.year == y),
            }
            for y, c in sorted(by_year.items())
        },
    }


def top10(papers: Sequence[PaperRecord], aliases: AliasTable) -> list[str]:
    overall: Counter = Counter(c for p in _corpus(papers) for c in _downstream(p, aliases))
    return [d for d, _ in overall.most_common(10)]


def cherry_picking(papers: Sequence[PaperRecord], aliases: AliasTable, n_boot: int = 1000) -> dict[str, Any]:
    core = set(top10(papers, aliases))
    scores = []
    for p in _corpus(papers):
        ds = set(_downstream(p, aliases))
        if ds:
            scores.append(len(ds & core) / len(ds))
    lo, hi = bootstrap_ci(scores, lambda v: float(np.mean(v)), n_boot=n_boot)
    return {
        "top_10": sorted(core),
        "n_total": len(scores),
        "mean_overlap": float(np.mean(scores)) if scores else 0.0,
        "median_overlap": float(np.median(scores)) if scores else 0.0,
        "mean_ci_95": [lo, hi],
        "n_zero_overlap": sum(1 for s in scores if s == 0),
        "histogram": np.histogram(scores, bins=10, range=(0, 1))[0].tolist(),
    }


def pretrain_tuple(p: PaperRecord, aliases: AliasTable, downstream_only: set[str] | None = None) -> tuple:
    """The ordered, de-duplicated canonical pretraining sets of a paper.

    ``downstream_only``: canonical names of benchmarks that are never pretraining data (default: the
    alias table's ``downstream_only`` rows, canonicalised); such entries are mis-extractions, dropped.
    """
    if p.pretraining_data is None:
        return ()
    if downstream_only is None:
        downstream_only = aliases.downstream_only_canonical()
    canon = []
    for d in p.pretraining_data.datasets:
        if not d or aliases.is_sensor_only(d):
            continue
        c = aliases.canonical(d, "pretrain")
        if not c or c in downstream_only:
            continue
        canon.append(c)
    return tuple(dict.fromkeys(canon))


def pretraining_uniqueness(
    papers: Sequence[PaperRecord],
    aliases: AliasTable,
    ordered: bool = True,
    downstream_only: set[str] | None = None,
) -> dict[str, Any]:
    """Papers whose non-empty pretraining configuration no other paper uses (``unique``) vs ``shared``."""
    keys = []
    if downstream_only is None:
        downstream_only = aliases.downstream_only_canonical()
    for p in _corpus(papers):
        t = pretrain_tuple(p, aliases, downstream_only)
        if t:
            keys.append(t if ordered else tuple(sorted(set(t))))
    n = Counter(keys)
    unique = sum(1 for k in keys if n[k] == 1)
    return {
        "ordered": ordered,
        "n_extractable": len(keys),
        "n_distinct_sets": len(n),
        "unique": unique,
        "shared": len(keys) - unique,
    }


def release_shares(papers: Sequence[PaperRecord]) -> dict[str, Any]:
    corpus = _corpus(papers)
    n = len(corpus)
    out: dict[str, Any] = {"n_papers": n}
    for f in ("weights_available", "code_available"):
        vals = [getattr(p, f) for p in corpus]
        out[f] = {
            "share": sum(v is True for v in vals) / n,
            "true": sum(v is True for v in vals),
            "false": sum(v is False for v in vals),
            "null": sum(v is None for v in vals),
        }
    out["weights_none_share"] = 1.0 - out["weights_available"]["share"]
    out["licenses"] = dict(Counter(p.weights_license or "null" for p in corpus).most_common())
    return out


def classify_method(p: PaperRecord) -> list[str]:
    pt = p.pretraining
    text = (
        " ".join([str(pt.method or ""), str(pt.objective or ""), str(pt.method_details or "")]).lower()
        if pt
        else ""
    )
    hits = [name for name, pats in METHOD_BUCKETS if any(re.search(x, text) for x in pats)]
    return hits or [OTHER_METHOD]


def method_families(papers: Sequence[PaperRecord]) -> dict[str, Any]:
    corpus = _corpus(papers)
    labels = Counter(lab for p in corpus for lab in classify_method(p))
    total = sum(labels.values())
    by_year: dict[str, Counter] = defaultdict(Counter)
    for p in corpus:
        by_year[str(p.year)].update(classify_method(p))
    return {
        "n_labels": total,
        "counts": dict(labels.most_common()),
        "shares": {k: v / total for k, v in labels.most_common()},
        "by_year": {y: {k: v / sum(c.values()) for k, v in c.items()} for y, c in sorted(by_year.items())},
    }


def compliance(
    papers: Sequence[PaperRecord],
    results: Sequence[ResultRecord],
    aliases: AliasTable,
    core: Sequence[str] | None = None,
) -> dict[str, Any]:
    """E1-E6 per paper and corpus shares (ASSUMPTION: our operationalisation of the expectation names).

    E1 weights released with an SPDX licence; E2 >= 1 result on the core benchmark set (default: the
    corpus top-10); E3 every non-own row has provenance != unknown; E4 every own row has n_seeds >= 3
    and std or a CI; E5 every own row has a ``harness`` id; E6 a ``controls`` entry varying one factor.
    E3-E5 are None (not applicable) for a paper without the relevant rows.
    """
    core_set = set(core) if core is not None else set(top10(papers, aliases))
    by_paper: dict[str, list[ResultRecord]] = defaultdict(list)
    for r in results:
        by_paper[r.paper_id].append(r)
    rows = []
    for p in papers:
        rs = by_paper.get(p.paper_id, [])
        own = [r for r in rs if r.provenance == "own"]
        other = [r for r in rs if r.provenance != "own"]
        benches = {r.benchmark_name or aliases.canonical(r.benchmark_name_raw, "downstream") for r in rs}
        benches |= set(_downstream(p, aliases))
        rows.append(
            {
                "paper_id": p.paper_id,
                "E1": bool(p.weights_available) and p.weights_license not in (None, *NON_LICENSES),
                "E2": bool(benches & core_set),
                "E3": all(r.provenance != "unknown" for r in other) if other else None,
                "E4": all(
                    (r.n_seeds or 0) >= MIN_SEEDS_E4 and (r.std is not None or r.ci_low is not None)
                    for r in own
                )
                if own
                else None,
                "E5": all(bool(r.harness) for r in own) if own else None,
                "E6": bool(p.controls and any(len(c.rows) >= 2 for c in p.controls)),
            }
        )
    corpus = {}
    for e in ("E1", "E2", "E3", "E4", "E5", "E6"):
        vals = [r[e] for r in rows if r[e] is not None]
        corpus[e] = {"share": (sum(vals) / len(vals)) if vals else None, "n": len(vals)}
    return {"per_paper": rows, "corpus": corpus, "core_benchmarks": sorted(core_set)}
