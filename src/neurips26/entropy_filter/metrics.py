"""Diversity and repetition metrics, exactly as the author's ``compute_summary.py`` computes them.

words = text.lower().split(); a document with fewer than 10 words is skipped (None).

* Distinct-n (n = 2, 3) = |unique n-grams| / |n-grams|   ("unique trigrams" in the abstract = Distinct-3)
* Rep-4                 = 1 − |unique 4-grams| / |4-grams|
* Vocabulary            = |unique words|
* TTR@500               = |unique words among the first 500| / 500, None below 500 words
"""

from __future__ import annotations

from typing import Any

from neurips26.entropy_filter.tokenize import words as _words
from neurips26.harness.validation import check_scalar

MIN_WORDS = 10
METRICS = ("distinct_2", "distinct_3", "rep_4", "vocabulary", "ttr_500")


def _ngrams(ws: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(ws[i:i + n]) for i in range(len(ws) - n + 1)]


def distinct_n(text: str, n: int) -> float | None:
    """|unique n-grams| / |n-grams| of the lowercased whitespace words; None below 10 words."""
    check_scalar(n, "n", int, min=1)
    ws = _words(text)
    if len(ws) < MIN_WORDS:
        return None
    grams = _ngrams(ws, n)
    return len(set(grams)) / len(grams) if grams else 0.0


def rep_n(text: str, n: int = 4) -> float | None:
    """Rep-n = 1 − Distinct-n (Rep-4 by default); None below 10 words."""
    d = distinct_n(text, n)
    return None if d is None else 1.0 - d


def vocabulary(text: str) -> int | None:
    """Number of unique lowercased whitespace words; None below 10 words."""
    ws = _words(text)
    return None if len(ws) < MIN_WORDS else len(set(ws))


def ttr_at(text: str, k: int = 500) -> float | None:
    """Type-token ratio of the first ``k`` words; None when the document has fewer than ``k`` words."""
    ws = _words(text)
    if len(ws) < max(k, MIN_WORDS):
        return None
    return len(set(ws[:k])) / k


def diversity_metrics(text: str) -> dict[str, Any] | None:
    """All metrics of one document as a dict (None when the document has fewer than 10 words)."""
    ws = _words(text)
    if len(ws) < MIN_WORDS:
        return None
    out: dict[str, Any] = {}
    for n in (2, 3):
        grams = _ngrams(ws, n)
        out[f"distinct_{n}"] = len(set(grams)) / len(grams) if grams else 0.0
    g4 = _ngrams(ws, 4)
    out["rep_4"] = 1.0 - len(set(g4)) / len(g4) if g4 else 0.0
    out["vocabulary"] = len(set(ws))
    out["ttr_500"] = len(set(ws[:500])) / 500 if len(ws) >= 500 else None
    return out
