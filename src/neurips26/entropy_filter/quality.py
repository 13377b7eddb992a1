"""Quality options on top of the per-domain Ĥ_K quantile, and the planted-spam corpus that measures them.

* ``LengthCalibration``: Ĥ_K at finite N is biased upward for short documents (fewer tokens, shorter
  matches). ``fit`` regresses Ĥ_K on log2(n_tokens) over the corpus's scored documents (OLS) and
  ``adjust`` removes the length trend: Ĥ_adj = Ĥ_K − β·(log2 n − mean log2 n). The slope, its R² and n
  are reported.
* an absolute floor (``floor``, bits/token) combined with the per-domain quantile: a document is kept
  only if it is in its domain's quota *and* scores at least the floor (the quantile alone keeps half
  of a domain that is all spam).
* an absolute ceiling (``ceiling``): Ĥ_K near log2 N means almost no token repeats (a list of distinct
  numbers or ids scores above all prose); optional.
* exact-duplicate awareness (``dedup``): the second and later copies of a text (NFKC, casefold,
  whitespace collapsed) are not scored — they count as unscored and never fill a quota.

``quality_selection`` applies any combination; ``spam_kept`` runs every setting on
``planted_spam_corpus`` (real documents from this Python installation — CPython's help topics, stdlib
docstrings, the CPython licence, installed packages' READMEs — plus planted spam of six kinds) and
counts what each keeps.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import math
import os
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from neurips26.entropy_filter.corpus import _FALLBACK_MODULES, pydoc_topics
from neurips26.entropy_filter.estimators import hk
from neurips26.entropy_filter.filters import Selection, selection
from neurips26.entropy_filter.tokenize import tokenize
from neurips26.harness.validation import check_scalar

SPAM_KINDS = ("repeated_phrase", "keyword_stuffing", "template", "numbers", "short_repeat", "duplicate")
DEFAULT_FLOOR = (
    3.0  # bits/token: below the prose range 3.5-4.6 that issue 30 measured on 2,084 real documents
)
DEFAULT_CEILING = 6.0  # bits/token: near log2 N, a text with (almost) no repeated token, e.g. a list of ids


@dataclass(frozen=True)
class LengthCalibration:
    """Ĥ_K ≈ alpha + beta·log2(n_tokens) over a corpus; ``adjust`` removes the length trend."""

    alpha: float
    beta: float
    mean_log_len: float
    r2: float
    n: int

    @classmethod
    def fit(cls, scores: Sequence[float | None], lengths: Sequence[int]) -> "LengthCalibration":
        pairs = [(s, n) for s, n in zip(scores, lengths) if s is not None and n >= 2]
        if len(pairs) < 3:
            raise ValueError(f"length calibration needs at least 3 scored documents, got {len(pairs)}")
        y = np.array([s for s, _ in pairs], float)
        x = np.log2(np.array([n for _, n in pairs], float))
        if np.ptp(x) == 0:
            return cls(float(y.mean()), 0.0, float(x.mean()), 0.0, len(pairs))
        beta, alpha = np.polyfit(x, y, 1)
        resid = y - (alpha + beta * x)
        r2 = 1.0 - float(resid @ resid) / float(((y - y.mean()) ** 2).sum()) if np.ptp(y) > 0 else 0.0
        return cls(float(alpha), float(beta), float(x.mean()), r2, len(pairs))

    def adjust(self, score: float | None, n_tokens: int) -> float | None:
        if score is None:
            return None
        return score - self.beta * (math.log2(max(n_tokens, 2)) - self.mean_log_len)


_WS = re.compile(r"\s+")


def text_key(text: str) -> str:
    """The identity of a text for exact-duplicate detection: NFKC, casefold, whitespace collapsed."""
    norm = _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
    return hashlib.blake2b(norm.encode("utf-8", errors="replace"), digest_size=16).hexdigest()


def duplicate_mask(texts: Sequence[str]) -> list[bool]:
    """True for every text that repeats an earlier one (``text_key``); the first copy is False."""
    seen: set[str] = set()
    out = []
    for t in texts:
        k = text_key(t)
        out.append(k in seen)
        seen.add(k)
    return out


@dataclass
class QualityReport:
    selection: Selection
    scores: list[float | None]
    calibration: LengthCalibration | None
    n_duplicates: int
    n_outside: int  # excluded by the floor or the ceiling


def quality_selection(
    texts: Sequence[str],
    domains: Sequence[Any] | None,
    keep_frac: float = 0.5,
    floor: float | None = None,
    length_correction: bool = False,
    dedup: bool = False,
    ceiling: float | None = None,
    scores: Sequence[float | None] | None = None,
    **hk_kwargs: Any,
) -> QualityReport:
    """Per-domain top-k by Ĥ_K with the quality options: ``floor`` (absolute, bits/token, on the raw
    score), ``length_correction`` (rank by the length-adjusted score, calibrated on these texts),
    ``dedup`` (later exact copies are unscored), ``ceiling`` (absolute, on the raw score). ``scores``:
    precomputed ``hk`` values (optional). Documents excluded by an option are unscored: never kept."""
    n = len(texts)
    if floor is not None:
        floor = check_scalar(floor, "floor", float)
    check_scalar(length_correction, "length_correction", bool)
    check_scalar(dedup, "dedup", bool)
    raw = list(scores) if scores is not None else [hk(t, **hk_kwargs) for t in texts]
    if len(raw) != n:
        raise ValueError(f"scores must have one entry per text: got {len(raw)} for {n}")
    dup = duplicate_mask(texts) if dedup else [False] * n
    eff: list[float | None] = [None if d else s for s, d in zip(raw, dup)]
    below = 0
    if ceiling is not None:
        ceiling = check_scalar(ceiling, "ceiling", float)
        below += sum(1 for s in eff if s is not None and s > ceiling)
        eff = [None if s is not None and s > ceiling else s for s in eff]
    if floor is not None:
        below += sum(1 for s in eff if s is not None and s < floor)
        eff = [None if s is not None and s < floor else s for s in eff]
    cal = None
    if length_correction:
        n_trunc = hk_kwargs.get("n_trunc", 1500)
        lengths = [len(tokenize(t, hk_kwargs.get("tokenizer", "unicode"), n_trunc)) for t in texts]
        cal = LengthCalibration.fit(eff, lengths)
        eff = [cal.adjust(s, m) for s, m in zip(eff, lengths)]
    sel = selection(list(texts), eff, domains, keep_frac)
    return QualityReport(sel, raw, cal, sum(dup), below)


# --------------------------------------------------------------------------------------------------
# the planted-spam corpus
# --------------------------------------------------------------------------------------------------


def _chunks(text: str, words: int) -> list[str]:
    out, cur, cnt = [], [], 0
    for para in re.split(r"\n\s*\n", text):
        w = len(para.split())
        if not w:
            continue
        cur.append(para)
        cnt += w
        if cnt >= words:
            out.append("\n\n".join(cur))
            cur, cnt = [], 0
    if cnt >= words // 4:
        out.append("\n\n".join(cur))
    return out


def real_documents(max_per_source: int = 150) -> list[tuple[str, str]]:
    """[(domain, text)] of real prose from this installation: ``reference`` (CPython help topics in
    ~300-word chunks), ``docstrings`` (stdlib module/class/function docstrings ≥ 40 words), ``legal``
    (CPython's LICENSE in sections), ``readme`` (installed distributions' long descriptions)."""
    out: list[tuple[str, str]] = []
    ref = [c for _, t in pydoc_topics() for c in _chunks(t, 300)]
    out += [("reference", t) for t in ref[:max_per_source]]
    docs: list[str] = []
    for name in _FALLBACK_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        for obj in [mod] + [
            o
            for _, o in inspect.getmembers(mod)
            if (inspect.isfunction(o) or inspect.isclass(o)) and getattr(o, "__module__", "") == name
        ]:
            d = inspect.getdoc(obj) or ""
            if len(d.split()) >= 40:
                docs.append(d)
    out += [("docstrings", t) for t in docs[:max_per_source]]
    lic_dir = os.path.dirname(os.__file__)
    for fname in ("LICENSE.txt", "LICENSE"):
        path = os.path.join(lic_dir, fname)
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as fh:
                out += [("legal", t) for t in _chunks(fh.read(), 250)[:max_per_source]]
            break
    try:
        from importlib.metadata import distributions

        metas = sorted(
            ((d.metadata.get("Name") or "", d.metadata.get_payload() or "") for d in distributions()),
            key=lambda x: x[0].lower(),
        )
    except Exception:  # pragma: no cover - broken metadata
        metas = []
    readmes = [" ".join(body.split()[:600]) for _, body in metas if len(body.split()) >= 80]
    out += [("readme", t) for t in readmes[:max_per_source]]
    return out


def planted_spam(
    n_per_kind: int, rng: np.random.Generator, real: Sequence[tuple[str, str]]
) -> list[tuple[str, str, str]]:
    """[(domain, text, kind)] spam: repeated phrases, keyword stuffing, templated boilerplate, lists of
    distinct numbers and short repeats go to the ``scraped`` domain; exact duplicates of real documents
    (case and whitespace changed) go to their originals' domains."""
    phrases = [
        "Buy cheap watches online today! ",
        "Click here to win a free prize now. ",
        "Best casino bonus, sign up and play. ",
        "Lose weight fast with this one trick. ",
    ]
    keywords = "cheap deal free bonus casino win prize offer discount sale".split()
    out = []
    for i in range(n_per_kind):
        out.append(("scraped", phrases[i % 4] * int(rng.integers(40, 120)), "repeated_phrase"))
        out.append(
            ("scraped", " ".join(rng.choice(keywords, int(rng.integers(300, 800)))), "keyword_stuffing")
        )
        out.append(
            (
                "scraped",
                " ".join(
                    f"Item {rng.integers(1000, 9999)} is in stock. Price ${rng.integers(5, 99)}. "
                    f"Ships in {rng.integers(1, 9)} days."
                    for _ in range(int(rng.integers(30, 80)))
                ),
                "template",
            )
        )
        out.append(
            (
                "scraped",
                " ".join(str(x) for x in rng.choice(100_000, int(rng.integers(60, 300)), replace=False)),
                "numbers",
            )
        )
        out.append(("scraped", phrases[(i + 1) % 4] * int(rng.integers(8, 14)), "short_repeat"))
        dom, text = real[int(rng.integers(0, len(real)))]
        out.append((dom, "  " + text.upper() + "\n", "duplicate"))
    return out


def planted_spam_corpus(
    seed: int = 0, n_per_kind: int = 10, n_scraped_real: int = 5, max_per_source: int = 150
) -> tuple[list[str], list[str], list[str]]:
    """(texts, domains, kinds) — kind ``real`` or a ``SPAM_KINDS`` entry. The ``scraped`` domain holds
    the non-duplicate spam and ``n_scraped_real`` real documents (from the other domains, moved)."""
    rng = np.random.default_rng(seed)
    real = real_documents(max_per_source)
    idx = rng.permutation(len(real))
    moved = set(int(i) for i in idx[:n_scraped_real])
    rows = [("scraped" if i in moved else d, t, "real") for i, (d, t) in enumerate(real)]
    rows += planted_spam(n_per_kind, rng, [real[i] for i in range(len(real)) if i not in moved])
    order = rng.permutation(len(rows))
    rows = [rows[i] for i in order]
    return [t for _, t, _ in rows], [d for d, _, _ in rows], [k for _, _, k in rows]


SETTINGS: dict[str, dict[str, Any]] = {
    "quantile": {},
    "quantile + floor": {"floor": DEFAULT_FLOOR},
    "quantile + floor + ceiling": {"floor": DEFAULT_FLOOR, "ceiling": DEFAULT_CEILING},
    "quantile + length correction": {"length_correction": True},
    "quantile + dedup": {"dedup": True},
    "all": {"floor": DEFAULT_FLOOR, "ceiling": DEFAULT_CEILING, "length_correction": True, "dedup": True},
}


def spam_kept(
    texts: Sequence[str],
    domains: Sequence[str],
    kinds: Sequence[str],
    keep_frac: float = 0.5,
    **hk_kwargs: Any,
) -> dict[str, Any]:
    """For every ``SETTINGS`` entry: kept documents per kind (and totals), plus the length calibration
    and the score-vs-length bias it corrects."""
    scores = [hk(t, **hk_kwargs) for t in texts]
    totals = {k: sum(1 for x in kinds if x == k) for k in ("real",) + SPAM_KINDS}
    keys = [text_key(t) for t in texts]
    twin = {keys[i] for i, k in enumerate(kinds) if k == "duplicate"}
    out: dict[str, Any] = {"totals": totals, "n_unscored": sum(s is None for s in scores), "settings": {}}
    for name, opts in SETTINGS.items():
        rep = quality_selection(texts, domains, keep_frac, scores=scores, **opts, **hk_kwargs)
        kept = set(rep.selection.kept)
        row = {k: sum(1 for i in kept if kinds[i] == k) for k in totals}
        # a planted duplicate counts as kept spam when both copies are kept (either may come first)
        per_key: dict[str, int] = {}
        for i in kept:
            if keys[i] in twin:
                per_key[keys[i]] = per_key.get(keys[i], 0) + 1
        row["real"] -= sum(1 for i in kept if kinds[i] == "real" and keys[i] in twin)
        row["duplicate"] = sum(c - 1 for c in per_key.values())
        row["real"] += sum(1 for c in per_key.values() if c >= 1)
        row["spam"] = sum(row[k] for k in SPAM_KINDS)
        if rep.calibration is not None:
            out["calibration"] = {
                "beta": rep.calibration.beta,
                "r2": rep.calibration.r2,
                "n": rep.calibration.n,
            }
        out["settings"][name] = row
    out["spam_total"] = sum(totals[k] for k in SPAM_KINDS)
    # the length bias on real documents: median Ĥ_K of short (< 100 tokens) vs long (>= 300) ones
    lens = [len(tokenize(t, hk_kwargs.get("tokenizer", "unicode"), 1500)) for t in texts]
    short = [s for s, n, k in zip(scores, lens, kinds) if k == "real" and s is not None and n < 100]
    long_ = [s for s, n, k in zip(scores, lens, kinds) if k == "real" and s is not None and n >= 300]
    out["median_short"] = float(np.median(short)) if short else None
    out["median_long"] = float(np.median(long_)) if long_ else None
    return out


def spam_table(result: dict[str, Any]) -> str:
    """The spam-kept table (markdown) from a ``spam_kept`` dict (``duplicate``: extra copies kept)."""
    tot = result["totals"]
    head = "| setting | real kept | spam kept | " + " | ".join(SPAM_KINDS) + " |"
    lines = [head, "|" + "---|" * (3 + len(SPAM_KINDS))]
    for name, row in result["settings"].items():
        cells = [f"{row[k]}/{tot[k]}" for k in SPAM_KINDS]
        lines.append(
            f"| {name} | {row['real']}/{tot['real']} | {row['spam']}/{result['spam_total']} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - `python -m neurips26.entropy_filter.quality result.json`
    import json
    import sys

    data = json.load(open(sys.argv[1]))
    print(spam_table(data["metrics"]["spam"]))
