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

import json
import math
from collections import Counter
from typing import Any, Mapping, Sequence

from neurips26.entropy_filter.estimators import hk
from neurips26.entropy_filter.filters import _check_scores, per_domain_k
from neurips26.harness.validation import check_choice, check_scalar


def domain_thresholds(scores: Sequence[float | None], domains: Sequence[Any] | None,
                      keep_frac: float, min_keep: int = 1) -> dict[Any, float]:
    """Per domain, the score of the k_d-th best scored document (k_d = ``quota(keep_frac, n_d,
    min_keep)``, n_d counting every document; unscored documents never fill it — the null policy of
    ``filters``); documents with a score ≥ their domain's threshold are kept. A domain with no scored
    document gets +inf (keeps nothing)."""
    sc = _check_scores(scores, len(scores))
    if domains is None:
        domains = [None] * len(sc)
    if len(domains) != len(sc):
        raise ValueError(f"domains must have one entry per score: got {len(domains)} for {len(sc)} scores")
    k = per_domain_k(domains, keep_frac, min_keep)
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


FALLBACKS = ("drop", "keep", "error")


def _get(doc: Any, path: str) -> Any:
    """``doc[a][b]`` for ``path="a.b"`` (dicts), or the attribute / metadata entry of a datatrove
    ``Document``; KeyError when missing."""
    if not isinstance(doc, Mapping):
        if path == "text":
            return doc.text
        meta = getattr(doc, "metadata", None) or {}
        if path in meta:
            return meta[path]
        if hasattr(doc, path):
            return getattr(doc, path)
        raise KeyError(path)
    node: Any = doc
    if path in node:
        return node[path]
    for part in path.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            meta = doc.get("metadata") if isinstance(doc, Mapping) else None
            if isinstance(meta, Mapping) and path in meta:
                return meta[path]
            raise KeyError(path)
    return node


class HKDocumentFilter:
    """Keep a document when its Ĥ_K reaches the threshold of its domain (and an absolute floor).

    thresholds: one float for all documents, or {domain: threshold} (from ``domain_thresholds`` or
                ``DomainSketches.thresholds``);
    domain_key: field holding the domain (required with a dict of thresholds; dotted paths and
                datatrove ``metadata`` keys work);
    text_key:   field holding the text (``text``; dotted paths for dicts);
    fallback:   a domain missing from ``thresholds``: ``"drop"`` (default), ``"keep"``, ``"error"``
                (ValueError naming the domain) or a number (the threshold to use);
    floor:      absolute floor: a score below it is dropped whatever its domain's threshold (None: off);
    keep_unscored: keep documents too short to score (default False: the null policy drops them).
    hk_kwargs:  options of ``hk`` (tokenizer, n_trunc, min_tokens, estimator, overlap).

    ``filter(doc)`` accepts a datatrove ``Document`` (``.text``, ``.metadata``) or a dict; it returns
    ``True`` or ``(False, reason)`` as datatrove's ``BaseFilter.filter`` does, and never raises on a bad
    record (non-string text, missing text: ``(False, "hk_bad_record")``). ``counts`` tallies the outcomes.
    """

    name = "Ĥ_K entropy-rate filter"

    def __init__(self, thresholds: float | Mapping[Any, float], domain_key: str | None = None,
                 keep_unscored: bool = False, text_key: str = "text", fallback: Any = "drop",
                 floor: float | None = None, **hk_kwargs: Any):
        if isinstance(thresholds, Mapping):
            if domain_key is None:
                raise ValueError("domain_key is required when thresholds is a per-domain mapping")
            for d, t in thresholds.items():
                check_scalar(t, f"thresholds[{d!r}]", float, finite=False)     # inf: keep nothing
                if math.isnan(t):
                    raise ValueError(f"thresholds[{d!r}] must be a number, got NaN")
        else:
            check_scalar(thresholds, "thresholds (a number or a mapping domain -> number)", float,
                         finite=False)
            if math.isnan(thresholds):
                raise ValueError("thresholds must be a number, got NaN")
        if isinstance(fallback, str):
            check_choice(fallback, "fallback", FALLBACKS)
        else:
            check_scalar(fallback, "fallback (drop, keep, error or a threshold)", float)
        if floor is not None:
            check_scalar(floor, "floor", float)
        check_scalar(text_key, "text_key", str)
        check_scalar(keep_unscored, "keep_unscored", bool)
        hk("", **hk_kwargs)  # validate the options now, not on the first document
        self.thresholds, self.domain_key, self.text_key = thresholds, domain_key, text_key
        self.keep_unscored, self.fallback, self.floor = keep_unscored, fallback, floor
        self.hk_kwargs = hk_kwargs
        self.counts: Counter[str] = Counter()

    def score(self, text: str) -> float | None:
        return hk(text, **self.hk_kwargs)

    def threshold_for(self, domain: Any) -> float | None:
        """The domain's threshold; None for a domain missing under ``fallback="drop"``, -inf under "keep"."""
        if isinstance(self.thresholds, Mapping):
            if domain in self.thresholds:
                return float(self.thresholds[domain])
            self.counts["unknown_domain"] += 1
            if self.fallback == "error":
                raise ValueError(f"no threshold for domain {domain!r} (declare fallback='drop', 'keep' or a "
                                 f"number to handle unseen domains)")
            if self.fallback == "drop":
                return None
            if self.fallback == "keep":
                return -math.inf
            return float(self.fallback)
        return float(self.thresholds)

    def __call__(self, text: str, domain: Any = None) -> bool:
        return self._decide(self.score(text), domain)[0]

    def _decide(self, s: float | None, domain: Any) -> tuple[bool, str]:
        if s is None:
            self.counts["unscored"] += 1
            return self.keep_unscored, "hk_too_short"
        if self.floor is not None and s < self.floor:
            self.counts["below_floor"] += 1
            return False, "hk_below_floor"
        t = self.threshold_for(domain)
        if t is None:
            return False, "hk_unknown_domain"
        if s >= t:
            self.counts["kept"] += 1
            return True, ""
        self.counts["below_threshold"] += 1
        return False, "hk_below_threshold"

    def filter(self, doc: Any) -> bool | tuple[bool, str]:
        try:
            text = _get(doc, self.text_key)
            domain = _get(doc, self.domain_key) if self.domain_key else None
        except KeyError as e:
            if self.domain_key and e.args and e.args[0] == self.domain_key:
                domain = None
            else:
                self.counts["bad_record"] += 1
                return False, "hk_bad_record"
        if isinstance(domain, (dict, list)):
            domain = json.dumps(domain, sort_keys=True)
        if not isinstance(text, str):
            self.counts["bad_record"] += 1
            return False, "hk_bad_record"
        s = self.score(text)
        if s is not None and not isinstance(doc, Mapping) and isinstance(getattr(doc, "metadata", None),
                                                                         dict):
            doc.metadata["hk"] = s  # datatrove keeps metadata with the document
        keep, reason = self._decide(s, domain)
        return True if keep else (False, reason)


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
    # a bad record (None, a number) scores None: it never sinks the batch
    scores = [hk(t, **hk_kwargs) if isinstance(t, str) else None for t in batch[text_column]]
    if hasattr(out, "assign"):  # pandas
        return out.assign(**{score_column: scores})
    out[score_column] = scores
    return out
