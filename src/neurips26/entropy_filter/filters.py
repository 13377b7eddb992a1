"""Selection for the next generation: per-domain top-k by a score, and the baselines' scores.

``select(docs, scores, domains, keep_frac)``: within each domain d (n_d documents) keep the
k_d = quota(keep_frac, n_d) documents with the highest score (stable tie-break by index). The quota
rounds half up and never drops a non-empty domain to zero (``min_keep=1``; ``min_keep=0`` allows it):
quota = min(n_d, max(min_keep, ⌊keep_frac · n_d + 1/2⌋)).

One null policy everywhere (``select``, ``domain_thresholds``, the sketches, ``HKDocumentFilter``, the
CLI): a document without a score (too short to score) is never used to fill a quota; a domain with
fewer scored documents than its quota keeps only those, and ``selection`` reports the unscored count
and the shortfall per domain. With ``scores=None`` the k_d documents are a uniform random subset drawn
with ``rng`` (the size-matched ``random`` condition).

Scores of the conditions (higher is kept unless said otherwise):
* ``hk_filter``  Ĥ_K of the fast path (``estimators.hk``);
* ``hl_filter``  H_L = mean next-token entropy of a scorer model (computed by the language model);
* ``zlib``       compressed bytes / raw bytes;
* ``gopher_rep`` Gopher repetition rules (Rae et al. 2021, as in datatrove's GopherRepetitionFilter):
  pass/fail as a pipeline filter; inside the loop passing documents rank first, then by fewest and
  smallest threshold violations, so the selection stays size-matched.
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from neurips26.harness.validation import check_scalar

CONDITIONS = ("unfiltered", "random", "hl_filter", "hl_surprisal", "hk_filter", "zlib", "gopher_rep")


def _check_keep_frac(keep_frac: object) -> float:
    return check_scalar(keep_frac, "keep_frac", float, min=0, max=1, inclusive="right")


def _check_scores(scores: Sequence[Any], n: int) -> list[float | None]:
    if len(scores) != n:
        raise ValueError(f"scores must have one entry per document: got {len(scores)} scores for {n} docs")
    out: list[float | None] = []
    for i, s in enumerate(scores):
        if s is None:
            out.append(None)
            continue
        s = check_scalar(s, f"scores[{i}]", float, finite=False)
        if math.isnan(s):
            raise ValueError(f"scores[{i}] is NaN; use None for a document without a score")
        out.append(s)
    return out


def quota(keep_frac: float, n: int, min_keep: int = 1) -> int:
    """Documents kept of a domain with ``n`` documents: min(n, max(min_keep, ⌊keep_frac·n + 1/2⌋))
    (round half up; a non-empty domain keeps at least ``min_keep``, 1 by default)."""
    if n <= 0:
        return 0
    return min(n, max(min_keep, math.floor(keep_frac * n + 0.5)))


def _check_min_keep(min_keep: object) -> int:
    return check_scalar(min_keep, "min_keep", int, min=0)


def per_domain_k(domains: Sequence[Any], keep_frac: float, min_keep: int = 1) -> dict[Any, int]:
    """k_d = quota(keep_frac, n_d, min_keep) per domain (round half up, at least ``min_keep``)."""
    keep_frac = _check_keep_frac(keep_frac)
    min_keep = _check_min_keep(min_keep)
    counts = Counter(domains)
    return {d: quota(keep_frac, n, min_keep) for d, n in counts.items()}


@dataclass
class Selection:
    """What ``selection`` kept: indices (ascending) and, per domain, the quota, the number of
    documents, of unscored documents and the shortfall (quota not filled for lack of scored documents)."""

    kept: list[int]
    quota: dict[Any, int]
    n_docs: dict[Any, int]
    unscored: dict[Any, int]
    shortfall: dict[Any, int]

    @property
    def n_unscored(self) -> int:
        return sum(self.unscored.values())

    def summary(self) -> str:
        return (f"kept {len(self.kept)}/{sum(self.n_docs.values())} documents; {self.n_unscored} unscored "
                f"(never kept); quota short by {sum(self.shortfall.values())}")


def select(docs: Sequence[Any], scores: Sequence[Any] | None, domains: Sequence[Any] | None = None,
           keep_frac: float = 0.5, rng: np.random.Generator | None = None, min_keep: int = 1) -> list[int]:
    """Indices (ascending) of the documents kept: per-domain top-k by score (or random when scores=None).

    docs:      the documents (only their number is used; any sequence).
    scores:    one number (or None) per document, higher kept; None is never kept; NaN is an error.
    domains:   one hashable label per document (None: one domain for all).
    keep_frac: fraction kept per domain, in (0, 1]; k_d = quota(keep_frac, n_d, min_keep).
    rng:       numpy Generator, required when scores is None (uniform random size-matched subset).
    min_keep:  the least a non-empty domain keeps (1; 0 lets rounding drop a tiny domain).
    """
    return selection(docs, scores, domains, keep_frac, rng, min_keep).kept


def selection(docs: Sequence[Any], scores: Sequence[Any] | None, domains: Sequence[Any] | None = None,
              keep_frac: float = 0.5, rng: np.random.Generator | None = None, min_keep: int = 1) -> Selection:
    """``select`` with its report (per-domain quota, unscored documents, shortfall)."""
    n = len(docs)
    keep_frac = _check_keep_frac(keep_frac)
    min_keep = _check_min_keep(min_keep)
    if domains is None:
        domains = [0] * n
    if len(domains) != n:
        raise ValueError(f"domains must have one entry per document: got {len(domains)} for {n} docs")
    if scores is not None:
        sc = _check_scores(scores, n)
    elif rng is None or not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator when scores is None (random selection)")
    by_domain: dict[Any, list[int]] = {}
    for i, d in enumerate(domains):
        by_domain.setdefault(d, []).append(i)
    kept: list[int] = []
    rep = Selection([], {}, {}, {}, {})
    for d, idx in by_domain.items():
        k = quota(keep_frac, len(idx), min_keep)
        rep.quota[d], rep.n_docs[d] = k, len(idx)
        if scores is None:
            kept.extend(int(i) for i in rng.choice(np.asarray(idx), size=k, replace=False))
            rep.unscored[d], rep.shortfall[d] = 0, 0
        else:
            scored = [i for i in idx if sc[i] is not None]
            # highest score first, ties by index (sort is stable); unscored documents never fill the quota
            order = sorted(scored, key=lambda i: (-sc[i], i))  # type: ignore[operator]
            kept.extend(order[:k])
            rep.unscored[d] = len(idx) - len(scored)
            rep.shortfall[d] = max(0, k - len(scored))
    rep.kept = sorted(kept)
    return rep


def zlib_ratio(text: str, level: int = 9) -> float | None:
    """Compressed bytes / raw bytes (higher = less redundant); None for empty text."""
    check_scalar(text, "text", str)
    raw = text.encode("utf-8")
    if not raw:
        return None
    return len(zlib.compress(raw, level)) / len(raw)


# --------------------------------------------------------------------------------------------------
# Gopher repetition rules
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GopherRules:
    """Thresholds of the Gopher repetition filter (Rae et al. 2021, Table A1; datatrove defaults)."""

    dup_line_frac: float = 0.30
    dup_para_frac: float = 0.30
    dup_line_char_frac: float = 0.20
    dup_para_char_frac: float = 0.20
    top_n_grams: tuple[tuple[int, float], ...] = ((2, 0.20), (3, 0.18), (4, 0.16))
    dup_n_grams: tuple[tuple[int, float], ...] = field(
        default=((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)))


_PARA = re.compile(r"\n{2,}")
_LINE = re.compile(r"\n+")


def _find_duplicates(items: list[str]) -> tuple[int, int]:
    seen: set[str] = set()
    dup_el = dup_chars = 0
    for x in items:
        if x in seen:
            dup_el += 1
            dup_chars += len(x)
        else:
            seen.add(x)
    return dup_el, dup_chars


def _top_duplicate_chars(grams: list[str]) -> int:
    gram, count = Counter(grams).most_common(1)[0]
    return len(gram) * count if count > 1 else 0


def _all_duplicate_chars(ws: list[str], n: int) -> int:
    seen: set[str] = set()
    repeated, idx = 0, 0
    while idx < len(ws) - n + 1:
        gram = "".join(ws[idx:idx + n])
        if gram in seen:
            repeated += len(gram)
            idx += n
        else:
            seen.add(gram)
            idx += 1
    return repeated


def gopher_violations(text: str, rules: GopherRules = GopherRules()) -> list[tuple[str, float, float]]:
    """The Gopher repetition rules a document breaks: [(rule, measured fraction, threshold), ...].

    Line/paragraph duplicate fractions, the character fraction of the most frequent 2/3/4-gram and
    the character fraction covered by duplicated 5..10-grams (words = whitespace split).
    """
    check_scalar(text, "text", str)
    out: list[tuple[str, float, float]] = []
    n_chars = max(len(text), 1)
    paras = _PARA.split(text.strip())
    d_el, d_ch = _find_duplicates(paras)
    if paras and d_el / len(paras) > rules.dup_para_frac:
        out.append(("dup_para_frac", d_el / len(paras), rules.dup_para_frac))
    if d_ch / n_chars > rules.dup_para_char_frac:
        out.append(("dup_para_char_frac", d_ch / n_chars, rules.dup_para_char_frac))
    lines = _LINE.split(text)
    d_el, d_ch = _find_duplicates(lines)
    if lines and d_el / len(lines) > rules.dup_line_frac:
        out.append(("dup_line_frac", d_el / len(lines), rules.dup_line_frac))
    if d_ch / n_chars > rules.dup_line_char_frac:
        out.append(("dup_line_char_frac", d_ch / n_chars, rules.dup_line_char_frac))
    ws = text.split()
    for n, thr in rules.top_n_grams:
        grams = [" ".join(ws[i:i + n]) for i in range(len(ws) - n + 1)]
        if grams:
            frac = _top_duplicate_chars(grams) / n_chars
            if frac > thr:
                out.append((f"top_{n}_gram", frac, thr))
    for n, thr in rules.dup_n_grams:
        frac = _all_duplicate_chars(ws, n) / n_chars
        if frac > thr:
            out.append((f"duplicated_{n}_n_grams", frac, thr))
    return out


def gopher_pass(text: str, rules: GopherRules = GopherRules()) -> bool:
    """True when the document passes every Gopher repetition rule (the pipeline filter)."""
    return not gopher_violations(text, rules)


def gopher_score(text: str, rules: GopherRules = GopherRules()) -> float:
    """A rank score for size-matched selection: 0 for a passing document, else −(violations +
    e/(1+e)) with e the total relative excess over the thresholds, so passing
    documents rank first, then the fewest violations, then the smallest excess."""
    v = gopher_violations(text, rules)
    if not v:
        return 0.0
    excess = sum((m - t) / t for _, m, t in v)
    return -(len(v) + excess / (1.0 + excess))  # the count dominates, the excess breaks ties
