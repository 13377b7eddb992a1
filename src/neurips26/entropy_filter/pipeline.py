"""Pipeline integration: per-domain thresholds across shards, a document filter usable as a datatrove
``PipelineStep`` (when datatrove is installed) or as a plain predicate, and a batch scorer for
Ray Data ``map_batches`` / Spark ``mapInPandas``.

Per-domain top-k across shards takes two passes: (1) score every document (``score_corpus`` or the
CLI's ``score``) and compute each domain's threshold with ``domain_thresholds`` (exact sort per
domain); (2) run ``HKDocumentFilter(thresholds)`` over the shards, keeping documents whose score
reaches their domain's threshold. Ties at the threshold may keep a few more than k_d documents;
use the CLI's ``filter --keep-frac`` for exact counts on one machine.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from neurips26.entropy_filter.estimators import hk
from neurips26.entropy_filter.filters import _check_scores, per_domain_k
from neurips26.harness.validation import check_scalar


def domain_thresholds(scores: Sequence[float | None], domains: Sequence[Any] | None,
                      keep_frac: float) -> dict[Any, float]:
    """Per domain, the score of the k_d-th best document (k_d = round(keep_frac · n_d)); documents with
    a score ≥ their domain's threshold are kept. A domain with k_d = 0 (or no scored document) gets +inf."""
    sc = _check_scores(scores, len(scores))
    if domains is None:
        domains = [None] * len(sc)
    if len(domains) != len(sc):
        raise ValueError(f"domains must have one entry per score: got {len(domains)} for {len(sc)} scores")
    k = per_domain_k(domains, keep_frac)
    by_dom: dict[Any, list[float]] = {}
    for s, d in zip(sc, domains):
        by_dom.setdefault(d, [])
        if s is not None:
            by_dom[d].append(s)
    out = {}
    for d, vals in by_dom.items():
        vals.sort(reverse=True)
        kd = min(k[d], len(vals))
        out[d] = vals[kd - 1] if kd > 0 else math.inf
    return out


class HKDocumentFilter:
    """Keep a document when its Ĥ_K reaches the threshold of its domain.

    thresholds: one float for all documents, or {domain: threshold} (from ``domain_thresholds``);
    domain_key: metadata key holding the domain (required with a dict of thresholds);
    hk_kwargs:  options of ``hk`` (tokenizer, n_trunc, min_tokens, estimator, overlap).
    Documents too short to score are dropped (``keep_unscored=False``) or kept.

    ``filter(doc)`` accepts a datatrove ``Document`` (``.text``, ``.metadata``) or a dict with a
    ``text`` key (and the domain key at top level or under ``metadata``); it returns
    ``True`` or ``(False, reason)`` as datatrove's ``BaseFilter.filter`` does.
    """

    name = "Ĥ_K entropy-rate filter"

    def __init__(self, thresholds: float | Mapping[Any, float], domain_key: str | None = None,
                 keep_unscored: bool = False, **hk_kwargs: Any):
        if isinstance(thresholds, Mapping):
            if domain_key is None:
                raise ValueError("domain_key is required when thresholds is a per-domain mapping")
            for d, t in thresholds.items():
                check_scalar(t, f"thresholds[{d!r}]", float, finite=False)     # inf: keep nothing
                if math.isnan(t):
                    raise ValueError(f"thresholds[{d!r}] must be a number, got NaN")
        else:
            check_scalar(thresholds, "thresholds (a number or a mapping domain -> number)", float, finite=False)
            if math.isnan(thresholds):
                raise ValueError("thresholds must be a number, got NaN")
        hk("", **hk_kwargs)  # validate the options now, not on the first document
        self.thresholds, self.domain_key = thresholds, domain_key
        self.keep_unscored, self.hk_kwargs = keep_unscored, hk_kwargs

    def score(self, text: str) -> float | None:
        return hk(text, **self.hk_kwargs)

    def threshold_for(self, domain: Any) -> float:
        if isinstance(self.thresholds, Mapping):
            if domain not in self.thresholds:
                raise KeyError(f"no threshold for domain {domain!r}")
            return float(self.thresholds[domain])
        return float(self.thresholds)

    def __call__(self, text: str, domain: Any = None) -> bool:
        s = self.score(text)
        if s is None:
            return self.keep_unscored
        return s >= self.threshold_for(domain)

    def filter(self, doc: Any) -> bool | tuple[bool, str]:
        if isinstance(doc, Mapping):
            text = doc["text"]
            meta = doc.get("metadata", {}) or {}
            domain = doc.get(self.domain_key, meta.get(self.domain_key)) if self.domain_key else None
        else:
            text = doc.text
            domain = (getattr(doc, "metadata", {}) or {}).get(self.domain_key) if self.domain_key else None
        s = self.score(text)
        if s is None:
            return True if self.keep_unscored else (False, "hk_too_short")
        if not isinstance(doc, Mapping) and isinstance(getattr(doc, "metadata", None), dict):
            doc.metadata["hk"] = s  # datatrove keeps metadata with the document
        return True if s >= self.threshold_for(domain) else (False, "hk_below_threshold")


def datatrove_filter(thresholds: float | Mapping[Any, float], domain_key: str | None = None,
                     exclusion_writer: Any = None, **kwargs: Any) -> Any:
    """An ``HKDocumentFilter`` as a datatrove ``BaseFilter`` step (for ``LocalPipelineExecutor`` /
    ``SlurmPipelineExecutor``). Needs ``pip install datatrove``."""
    try:
        from datatrove.pipeline.filters.base_filter import BaseFilter
    except ImportError as e:
        raise ImportError("datatrove_filter needs datatrove: pip install datatrove") from e

    inner = HKDocumentFilter(thresholds, domain_key, **kwargs)

    class HKFilter(BaseFilter):  # type: ignore[misc, valid-type]
        name = HKDocumentFilter.name

        def filter(self, doc: Any) -> bool | tuple[bool, str]:
            return inner.filter(doc)

    return HKFilter(exclusion_writer=exclusion_writer)


def hk_batch(batch: Mapping[str, Sequence[Any]], text_column: str = "text", score_column: str = "hk",
             **hk_kwargs: Any) -> dict[str, Any]:
    """Add an Ĥ_K column to a column batch (dict of sequences, or a pandas DataFrame):
    ``ds.map_batches(hk_batch)`` in Ray Data, ``mapInPandas`` in Spark (one call per partition)."""
    out = dict(batch) if not hasattr(batch, "assign") else batch
    scores = [hk(t, **hk_kwargs) for t in batch[text_column]]
    if hasattr(out, "assign"):  # pandas
        return out.assign(**{score_column: scores})
    out[score_column] = scores
    return out
