"""The six-generation single-lineage collapse loop, the generation-6 comparison, the proxy regression
and the collapse detector.

Loop (per condition, fully synthetic, no real data re-injected):
  1. generation 0: the base model M_0 samples D_0 (domains × topics × n_per_topic documents at τ);
  2. for g = 1..G: S_{g-1} = select(D_{g-1}) under the condition; M_g = finetune(M_{g-1}, S_{g-1});
     D_g = sample(M_g);
  3. every document is recorded with Ĥ_K (reported path), H_L (scorer), Distinct-2/3, Rep-4,
     vocabulary, TTR@500, condition, generation, domain, topic.

Generation-6 comparison of a filter f to ``unfiltered`` (as the author's figure script):
  percent change = s·(mean_f − mean_u)/mean_u·100 (s = −1 for Rep-4, so positive = better);
  p from Welch's t-test and from Student's (``ttest_ind`` default, what the script calls);
  95% bootstrap CI: 2,000 resamples, a fresh ``default_rng(42)`` per metric, groups resampled
  independently, divided by the original unfiltered mean, percentile interval.

The model is any object with ``vocab`` (``decode``), ``sample(domains, topics, length, τ, rng)``,
``finetune(docs)`` (returns the next generation's model) and ``token_stats(docs)`` (per-document mean
next-token entropy and surprisal, bits): the count LM (quick) and the neural LM (full) both are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from scipy import stats

from neurips26.entropy_filter.count_lm import Doc
from neurips26.entropy_filter.estimators import entropy_rate, hk
from neurips26.entropy_filter.filters import CONDITIONS, gopher_score, select, zlib_ratio
from neurips26.entropy_filter.metrics import METRICS, diversity_metrics
from neurips26.harness.validation import check_choice

COMPARED = ("hk", "distinct_2", "distinct_3", "rep_4", "vocabulary", "ttr_500")
LOWER_IS_BETTER = {"rep_4"}


@dataclass(frozen=True)
class LoopConfig:
    n_per_topic: int = 2
    topics_per_domain: int = 10
    doc_len: int = 120
    temperature: float = 0.8
    generations: int = 6
    keep_frac: float = 0.5
    hl_scorer: str = "base"          # "base": frozen generation-0 model; "current": the generator M_g
    conditions: tuple[str, ...] = ("unfiltered", "random", "hl_filter", "hk_filter")
    record_self: bool = True         # also record the generator's own H_L (needed when hl_scorer="current")


def prompts(n_domains: int, topics_per_domain: int, n_per_topic: int,
            n_topics: int) -> tuple[np.ndarray, np.ndarray]:
    """(domain, topic) per document: the first ``topics_per_domain`` topics (by name) of each domain."""
    doms, tops = [], []
    for d in range(n_domains):
        mine = [i for i in range(n_topics) if i % n_domains == d][:topics_per_domain]
        for t in mine:
            doms += [d] * n_per_topic
            tops += [t] * n_per_topic
    return np.array(doms, dtype=np.int64), np.array(tops, dtype=np.int64)


def record_docs(model: Any, scorer: Any, ids: np.ndarray, domains: np.ndarray, topics: np.ndarray,
                condition: str, generation: int, record_self: bool = True) -> list[dict[str, Any]]:
    """Per-document record of a generation (texts, Ĥ_K both paths, H_L, surprisal, metrics).

    hl / surprisal come from ``scorer``; hl_self from the generating ``model`` (None unless
    ``record_self``)."""
    docs = [Doc(int(d), int(t), x) for d, t, x in zip(domains, topics, ids)]
    hl_sc, sur_sc = scorer.token_stats(docs)
    if model is scorer:
        hl_self = hl_sc
    elif record_self:
        hl_self, _ = model.token_stats(docs)
    else:
        hl_self = [None] * len(docs)
    out = []
    for k, doc in enumerate(docs):
        text = model.vocab.decode(doc.ids)
        rec: dict[str, Any] = {
            "condition": condition, "generation": generation, "domain": doc.domain, "topic": doc.topic,
            "text": text, "n_tokens": int(doc.ids.size),
            "hk": hk(text, tokenizer="reported", min_tokens=10),       # reported path (tables)
            "hk_fast": hk(text, tokenizer="fast", min_tokens=50),      # fast path (filter decisions)
            "hk_lm": entropy_rate(doc.ids) if doc.ids.size >= 2 else None,  # on the LM's own tokens
            "hl": float(hl_sc[k]), "surprisal": float(sur_sc[k]), "hl_self": None if hl_self[k] is None else float(hl_self[k]),
        }
        rec.update(diversity_metrics(text) or {m: None for m in METRICS})
        out.append(rec)
    return out


def condition_scores(condition: str, recs: list[dict[str, Any]]) -> list[float | None] | None:
    """Selection score of every document for ``condition`` (None: no score; random selection)."""
    if condition == "hk_filter":
        return [r["hk_fast"] for r in recs]
    if condition == "hl_filter":
        return [r["hl_sel"] for r in recs]
    if condition == "hl_surprisal":
        return [r["sur_sel"] for r in recs]
    if condition == "zlib":
        return [zlib_ratio(r["text"]) for r in recs]
    if condition == "gopher_rep":
        return [gopher_score(r["text"]) for r in recs]
    if condition == "random":
        return None
    check_choice(condition, "condition", CONDITIONS)
    raise AssertionError(f"condition {condition!r} has no scores")  # pragma: no cover - CONDITIONS covered


def run_lineage(base: Any, condition: str, cfg: LoopConfig, gen0: list[dict[str, Any]],
                gen0_ids: np.ndarray, domains: np.ndarray, topics: np.ndarray, rng: np.random.Generator,
                progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """One single-lineage run of ``cfg.generations`` generations under ``condition``; all records."""
    check_choice(condition, "condition", CONDITIONS)
    check_choice(cfg.hl_scorer, "hl_scorer", ("base", "current"))
    record_self = cfg.record_self or cfg.hl_scorer == "current"
    records = [dict(r, condition=condition) for r in gen0]
    prev = [dict(r) for r in records]
    prev_ids = gen0_ids
    model = base
    for g in range(1, cfg.generations + 1):
        for r in prev:  # the H_L filters' scorer: frozen base model (default) or the current generator
            r["hl_sel"] = r["hl"] if cfg.hl_scorer == "base" else r["hl_self"]
            r["sur_sel"] = r["surprisal"]
        if condition == "unfiltered":
            keep = list(range(len(prev)))
        else:
            keep = select(prev, condition_scores(condition, prev), [r["domain"] for r in prev],
                          cfg.keep_frac, rng=rng)
        chosen = [Doc(int(domains[i]), int(topics[i]), prev_ids[i]) for i in keep]
        model = model.finetune(chosen)
        ids = model.sample(domains, topics, cfg.doc_len, cfg.temperature, rng)
        prev = record_docs(model, base, ids, domains, topics, condition, g, record_self)
        prev_ids = ids
        records += prev
        if progress:
            progress(f"{condition}: generation {g}")
    return records


def run_rephrase_lineage(base: Any, cfg: LoopConfig, gen0_ids: np.ndarray, domains: np.ndarray,
                         topics: np.ndarray, rng: np.random.Generator, lam: float = 0.5,
                         kind: str = "bag") -> list[dict]:
    """Rephrasing lineage: each generation re-generates every document from its previous version with
    the frozen base model (no weight update), via ``base.rephraser(previous_docs, lam, kind)``."""
    records = record_docs(base, base, gen0_ids, domains, topics, "rephrase", 0)
    ids = gen0_ids
    for g in range(1, cfg.generations + 1):
        prev = [Doc(int(d), int(t), x) for d, t, x in zip(domains, topics, ids)]
        ids = base.rephraser(prev, lam, kind).rephrase(cfg.doc_len, cfg.temperature, rng)
        records += record_docs(base, base, ids, domains, topics, "rephrase", g)
    return records


# --------------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------------

def _values(records: Sequence[dict[str, Any]], condition: str, generation: int, metric: str) -> np.ndarray:
    return np.array([r[metric] for r in records
                     if r["condition"] == condition and r["generation"] == generation and r[metric] is not None],
                    dtype=np.float64)


def compare(filtered: np.ndarray, unfiltered: np.ndarray, metric: str, n_boot: int = 2000,
            seed: int = 42) -> dict[str, Any]:
    """Percent change of ``filtered`` vs ``unfiltered`` (sign-flipped for Rep-4), Welch and Student
    p-values and the bootstrap 95% CI (the author's figure script)."""
    f, u = np.asarray(filtered, float), np.asarray(unfiltered, float)
    if f.size < 2 or u.size < 2:
        return {"pct": None, "p_welch": None, "p_student": None, "ci": [None, None],
                "mean": float(f.mean()) if f.size else None, "mean_unfiltered": float(u.mean()) if u.size else None,
                "n": int(f.size), "n_unfiltered": int(u.size)}
    s = -1.0 if metric in LOWER_IS_BETTER else 1.0
    mu = u.mean()
    pct = s * (f.mean() - mu) / mu * 100 if mu != 0 else float("nan")
    p_welch = stats.ttest_ind(f, u, equal_var=False).pvalue
    p_student = stats.ttest_ind(f, u).pvalue
    rng = np.random.default_rng(seed)  # a fresh generator per metric, as the figure script
    fb = f[rng.integers(0, f.size, (n_boot, f.size))].mean(axis=1)
    ub = u[rng.integers(0, u.size, (n_boot, u.size))].mean(axis=1)
    boots = s * (fb - ub) / mu * 100 if mu != 0 else np.full(n_boot, np.nan)
    lo, hi = np.percentile(boots, [2.5, 97.5])

    def fin(x: float) -> float | None:
        return float(x) if np.isfinite(x) else None

    return {"pct": fin(pct), "p_welch": fin(p_welch), "p_student": fin(p_student), "ci": [fin(lo), fin(hi)],
            "mean": float(f.mean()), "mean_unfiltered": float(mu), "n": int(f.size), "n_unfiltered": int(u.size)}


def generation_comparison(records: Sequence[dict[str, Any]], conditions: Sequence[str],
                          generation: int) -> dict[str, dict[str, Any]]:
    """{condition: {metric: compare(...)}} at ``generation`` for every filter vs ``unfiltered``."""
    out: dict[str, dict[str, Any]] = {}
    for c in conditions:
        if c == "unfiltered":
            continue
        out[c] = {m: compare(_values(records, c, generation, m), _values(records, "unfiltered", generation, m), m)
                  for m in COMPARED}
    return out


def trajectories(records: Sequence[dict[str, Any]], conditions: Sequence[str], generations: int,
                 metrics: Sequence[str] = COMPARED + ("hl", "hk_lm")) -> dict[str, dict[str, list[float | None]]]:
    """Mean of each metric per condition and generation."""
    out: dict[str, dict[str, list[float | None]]] = {}
    for c in conditions:
        out[c] = {}
        for m in metrics:
            row = []
            for g in range(generations + 1):
                v = _values(records, c, g, m)
                row.append(float(v.mean()) if v.size else None)
            out[c][m] = row
    return out


def proxy_regression(hk_bits_per_token: np.ndarray, hl: np.ndarray) -> dict[str, float]:
    """OLS Ĥ_K[bits/token] = α + β·H_L over documents: β, α, R², p of β, n."""
    x, y = np.asarray(hl, float), np.asarray(hk_bits_per_token, float)
    ok = np.isfinite(x) & np.isfinite(y)
    res = stats.linregress(x[ok], y[ok])
    return {"beta": float(res.slope), "alpha": float(res.intercept), "r2": float(res.rvalue ** 2),
            "p": float(res.pvalue), "n": int(ok.sum())}


def spearman(a: Sequence[float | None], b: Sequence[float | None]) -> dict[str, float]:
    """Spearman ρ and p over the pairs where both values exist."""
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    x, y = (np.array(v, float) for v in zip(*pairs))
    res = stats.spearmanr(x, y)
    return {"rho": float(res.statistic), "p": float(res.pvalue), "n": len(pairs)}
