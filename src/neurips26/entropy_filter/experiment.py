"""Reproduction: the six-generation collapse loop on CPython's pydoc_data prose, the proxy regression
and the collapse detector (``neurips26 run entropy_filter [--scale smoke|quick|full] [--seeds 0,1,2]``).

smoke: the trigram count LM, 16 docs/generation, 2 generations, 1 seed (seconds; every claim's code path).
quick: the interpolated trigram count LM (fine-tune = re-estimate counts), 80 docs/generation, seeds 0-2.
full:  a small neural LM (PyTorch fixed-window MLP LM, fine-tuned from the previous weights each
       generation), 160 docs/generation, seeds 0-2.

One run of ``run`` is one seed (the harness runs the config's ``seeds``); every claim is judged on every
seed and holds or fails only when all seeds agree (otherwise ``inconclusive``); the generation-6 Ĥ_K
ordering is judged on the paired differences between conditions over seeds (``harness.paper.paired``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neurips26.harness import FAILS, HOLDS, INCONCLUSIVE, Claim, RunContext, verdict
from neurips26.harness.paper import judge, paired
from neurips26.entropy_filter.collapse import (LoopConfig, generation_comparison, prompts, proxy_regression,
                                               record_docs, run_lineage, run_rephrase_lineage, spearman,
                                               trajectories)
from neurips26.entropy_filter.corpus import N_DOMAINS, pydoc_topics
from neurips26.entropy_filter.count_lm import CountLMConfig, TrigramLM, pretraining_docs
from neurips26.entropy_filter.quality import planted_spam_corpus, spam_kept, spam_table
from neurips26.entropy_filter.tokenize import reported_tokenize

ALL_CONDITIONS = ("unfiltered", "random", "hl_filter", "hl_surprisal", "hk_filter", "zlib", "gopher_rep")
PLOT_METRICS = ("hk", "hk_lm", "distinct_3", "rep_4", "vocabulary")


@dataclass(frozen=True)
class Config:
    generator: str = "count"                 # "count" (trigram LM) or "neural" (PyTorch MLP LM)
    n_per_topic: int = 2                     # 4 domains × 10 topics × n_per_topic docs per generation
    topics_per_domain: int = 10
    doc_len: int = 120
    temperature: float = 0.8
    generations: int = 6
    keep_frac: float = 0.5                   # ASSUMPTION (paper's k not recovered)
    hl_scorer: str = "base"                  # ASSUMPTION: frozen generation-0 scorer; "current" = generator
    conditions: tuple[str, ...] = ALL_CONDITIONS
    eta: float = 1.0                         # count LM: counts ← (1 − η)·old + η·new
    vocab_size: int = 1500
    proxy_temperatures: tuple[float, ...] = (0.6, 0.8, 1.0)   # ASSUMPTION (paper's not recovered)
    proxy_n_per_topic: int = 2
    proxy_doc_len: int = 600                 # proxy documents (the paper scores up to 1,500 tokens)
    rephrase: bool = True
    rephrase_kind: str = "bag"               # "bag": bag-of-words rephraser (cannot copy a phrase); "trigram"
    record_self: bool = True                 # also record each generator's own H_L (detector_self)
    rephrase_lam: float = 0.5
    seeds: tuple[int, ...] = (0, 1, 2)       # the run's default seeds (the harness runs each)
    spam_n_per_kind: int = 10                # planted-spam corpus: spam documents per kind (0: skip)
    spam_max_per_source: int = 150           # real documents per source (help topics, docstrings, ...)
    neural: dict[str, Any] = field(default_factory=dict)   # NeuralLMConfig overrides (full)


CONFIGS = {
    "smoke": Config(n_per_topic=1, topics_per_domain=4, doc_len=80, generations=2, vocab_size=400,
                    proxy_temperatures=(0.6, 1.0), proxy_n_per_topic=1, proxy_doc_len=150, seeds=(0,),
                    spam_n_per_kind=2, spam_max_per_source=20),
    "quick": Config(),
    "full": Config(generator="neural", n_per_topic=4, proxy_n_per_topic=2, neural={"epochs_per_generation": 3}),
}

ORDER_K = 2.0   # the Ĥ_K ordering claim holds/fails only beyond this many standard errors over seeds
COLLAPSE_FRAC = 0.6   # collapse: generation-G Ĥ_K below this fraction of generation 0 (spec check 11)
PROXY_R2 = 0.5        # proxy: our bar on R² (the paper reports 0.746 and states no bar)
PROXY_P = 1e-3
REPHRASE_P = 0.05     # rephrase_negative: the sign of ρ is judged only at p below this


def _build_base(cfg: Config, seed: int, ctx: RunContext) -> Any:
    topics = pydoc_topics()
    vocab, docs = pretraining_docs(topics, cfg.doc_len, N_DOMAINS, cfg.vocab_size)
    if cfg.generator == "count":
        return TrigramLM(vocab, N_DOMAINS, CountLMConfig(vocab_size=cfg.vocab_size, eta=cfg.eta)).fit(docs), topics
    if cfg.generator == "neural":
        from neurips26.entropy_filter.neural_lm import NeuralLM, NeuralLMConfig  # needs torch (optional)

        ncfg = NeuralLMConfig(**cfg.neural)
        ctx.log(f"entropy_filter: pre-training the neural LM ({ncfg.pretrain_epochs} epochs)")
        return NeuralLM.pretrain(vocab, N_DOMAINS, len(topics), docs, ncfg, seed=seed,
                                 track=lambda it, **kw: ctx.track(it, **kw)), topics
    raise ValueError(f"generator must be 'count' or 'neural', got {cfg.generator!r}")


def _one_seed(cfg: Config, ctx: RunContext, seed: int) -> dict[str, Any]:
    base, topics = _build_base(cfg, seed, ctx)
    loop = LoopConfig(cfg.n_per_topic, cfg.topics_per_domain, cfg.doc_len, cfg.temperature,
                      cfg.generations, cfg.keep_frac, cfg.hl_scorer, tuple(cfg.conditions),
                      cfg.record_self)
    domains, tops = prompts(N_DOMAINS, cfg.topics_per_domain, cfg.n_per_topic, len(topics))
    rng0 = np.random.default_rng([seed, 0])
    gen0_ids = base.sample(domains, tops, cfg.doc_len, cfg.temperature, rng0)
    gen0 = record_docs(base, base, gen0_ids, domains, tops, "gen0", 0)
    records: list[dict[str, Any]] = []
    for k, cond in enumerate(ctx.track(cfg.conditions, desc="conditions", total=len(cfg.conditions))):
        rng = np.random.default_rng([seed, 1, k])
        records += run_lineage(base, cond, loop, gen0, gen0_ids, domains, tops, rng)
        ctx.log(f"entropy_filter: seed {seed} condition {cond} done")
    G = cfg.generations
    # share of each condition's generation-G documents the reported path cannot score (< 10 words)
    unscored = {c: float(np.mean([r["hk"] is None for r in records
                                  if r["condition"] == c and r["generation"] == G])) for c in cfg.conditions}
    out: dict[str, Any] = {
        "unscored_frac": unscored,
        "trajectories": trajectories(records, cfg.conditions, G),
        "final": generation_comparison(records, cfg.conditions, G),
        "n_docs_per_generation": int(domains.size),
    }
    # collapse detector: Spearman ρ(Ĥ_K, H_L) pooled over the unfiltered lineage (all generations)
    unf = [r for r in records if r["condition"] == "unfiltered"]
    out["detector"] = spearman([r["hk"] for r in unf], [r["hl"] for r in unf])
    if cfg.record_self:
        out["detector_self"] = spearman([r["hk"] for r in unf], [r["hl_self"] for r in unf])
    if cfg.rephrase and hasattr(base, "rephraser"):
        reph = run_rephrase_lineage(base, loop, gen0_ids, domains, tops, np.random.default_rng([seed, 2]),
                                    cfg.rephrase_lam, cfg.rephrase_kind)
        out["detector_rephrase"] = spearman([r["hk"] for r in reph], [r["hl"] for r in reph])
        out["rephrase_hk"] = [float(np.mean([r["hk"] for r in reph if r["generation"] == g and r["hk"]]))
                              for g in range(G + 1)]
    # proxy: documents across domains × temperatures from M_0, scored by M_0
    pdom, ptop = prompts(N_DOMAINS, cfg.topics_per_domain, cfg.proxy_n_per_topic, len(topics))
    proxy_rows = []
    for j, tau in enumerate(cfg.proxy_temperatures):
        ids = base.sample(pdom, ptop, cfg.proxy_doc_len, tau, np.random.default_rng([seed, 3, j]))
        for r in record_docs(base, base, ids, pdom, ptop, f"proxy_tau{tau}", 0):
            if r["hk"] is None:
                continue
            n_words = len(reported_tokenize(r["text"])[:1500])
            r["words_per_token"] = n_words / r["n_tokens"]
            r["hk_bits_per_token"] = r["hk"] * r["words_per_token"]   # bits/word × words/token
            r["tau"] = tau
            proxy_rows.append(r)
    out["proxy"] = proxy_regression(np.array([r["hk_bits_per_token"] for r in proxy_rows]),
                                    np.array([r["hl"] for r in proxy_rows]))
    out["proxy_points"] = [[r["hl"], r["hk_bits_per_token"], r["tau"], r["domain"]] for r in proxy_rows]
    # fast vs reported tokenisation: Spearman over the generated documents (generation 0 + proxy)
    both = [(r["hk_fast"], r["hk"]) for r in gen0 + proxy_rows]
    out["fast_vs_reported"] = spearman([a for a, _ in both], [b for _, b in both])
    return out


def run(cfg: Config, ctx: RunContext) -> dict[str, Any]:
    import matplotlib

    matplotlib.use("Agg")
    main = _one_seed(cfg, ctx, ctx.seed)
    m: dict[str, Any] = {"seed": ctx.seed, "generator": cfg.generator}
    m.update({k: v for k, v in main.items() if k != "proxy_points"})
    traj = main["trajectories"]
    m["unfiltered_hk_gen0"] = traj["unfiltered"]["hk"][0]
    m["unfiltered_hk_final"] = traj["unfiltered"]["hk"][-1]
    m["unfiltered_hk_lm_gen0"] = traj["unfiltered"]["hk_lm"][0]
    m["unfiltered_hk_lm_final"] = traj["unfiltered"]["hk_lm"][-1]
    m["final_hk"] = {cond: traj[cond]["hk"][-1] for cond in cfg.conditions}   # generation-G Ĥ_K
    m["final_hk_lm"] = {cond: traj[cond]["hk_lm"][-1] for cond in cfg.conditions}   # on the LM's tokens
    m["unscored_frac"] = main["unscored_frac"]
    if cfg.spam_n_per_kind > 0:  # the quality options on real documents with planted spam
        texts, domains, kinds = planted_spam_corpus(ctx.seed, cfg.spam_n_per_kind,
                                                    max_per_source=cfg.spam_max_per_source)
        m["spam"] = spam_kept(texts, domains, kinds, cfg.keep_frac)
        ctx.log("entropy_filter: spam kept per setting\n" + spam_table(m["spam"]))
    _plots(cfg, ctx, main, cfg.generations)
    return m


def _plots(cfg: Config, ctx: RunContext, main: dict[str, Any], G: int) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(PLOT_METRICS), figsize=(3.6 * len(PLOT_METRICS), 3.4))
    gens = list(range(G + 1))
    for ax, met in zip(axes, PLOT_METRICS):
        for cond in cfg.conditions:
            ys = main["trajectories"][cond][met]
            ax.plot(gens, [np.nan if y is None else y for y in ys], marker="o", ms=3, label=cond)
        ax.set_title({"hk": "Ĥ_K (bits/word, reported)", "hk_lm": "Ĥ_K on the LM's tokens",
                      "distinct_3": "Distinct-3", "rep_4": "Rep-4",
                      "vocabulary": "vocabulary"}[met])
        ax.set_xlabel("generation")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"collapse loop ({cfg.generator} LM, {main['n_docs_per_generation']} docs/generation)",
                 y=1.04)
    ctx.save_plot(fig, "trajectories.png")

    pts = np.array(main["proxy_points"], dtype=float)
    fig, ax = plt.subplots(figsize=(5, 4))
    for tau in cfg.proxy_temperatures:
        sel = pts[:, 2] == tau
        ax.scatter(pts[sel, 0], pts[sel, 1], s=8, label=f"τ = {tau}")
    p = main["proxy"]
    xs = np.linspace(pts[:, 0].min(), pts[:, 0].max(), 10)
    ax.plot(xs, p["alpha"] + p["beta"] * xs, "k--", label=f"β = {p['beta']:.3f}, R² = {p['r2']:.3f}")
    ax.set_xlabel("H_L (bits/token, scorer)")
    ax.set_ylabel("Ĥ_K (bits/token)")
    ax.legend(fontsize=7)
    ctx.save_plot(fig, "hk_vs_hl.png")


# --------------------------------------------------------------------------------------------------
# claims (verdicts computed from the metrics)
# --------------------------------------------------------------------------------------------------

def _final(m: dict[str, Any], cond: str, metric: str) -> dict[str, Any]:
    return m["final"][cond][metric]


def _improves(metric: str, paper: str) -> Any:
    def check(m: dict[str, Any]) -> tuple[str, str]:
        c = _final(m, "hk_filter", metric)
        pct, p = c["pct"], c["p_welch"]
        if pct is None or p is None:
            return INCONCLUSIVE, f"{metric}: not enough documents"
        raw = -pct if metric == "rep_4" else pct  # the metric's own change (Rep-4: lower is better)
        return verdict(pct > 0 and p < 1e-3), (f"{raw:+.1f}% vs unfiltered, Welch p = {p:.2g}, "
                                               f"Student p = {c['p_student']:.2g}")
    return check


def _hl_no_benefit(m: dict[str, Any]) -> tuple[str, str]:
    """Judged only with a neural generator (``full``): the count LM's H_L sees the last two tokens and
    its collapse is two-token loops, so H_L is a diversity signal by construction there (issue 30)."""
    parts, any_sig = [], False
    for met in ("distinct_3", "vocabulary", "rep_4"):
        c = _final(m, "hl_filter", met)
        pct, p = c["pct"], c["p_welch"]
        if pct is None or p is None:
            return INCONCLUSIVE, f"{met}: not enough documents"
        any_sig |= pct > 0 and p < 0.05
        raw = -pct if met == "rep_4" else pct
        parts.append(f"{met} {raw:+.1f}% (p = {p:.2g})")
    if m.get("generator", "count") == "count":
        return INCONCLUSIVE, ("not testable with the trigram toy (its H_L sees only the last two tokens and "
                              "it collapses into two-token loops, so H_L detects them by construction); "
                              "judged with the neural LM (full): " + "; ".join(parts))
    return verdict(not any_sig), "; ".join(parts)


def _hk_beats_hl(m: dict[str, Any]) -> tuple[str, str]:
    parts, ok = [], True
    for met in ("distinct_3", "vocabulary", "rep_4"):
        a, b = _final(m, "hk_filter", met)["pct"], _final(m, "hl_filter", met)["pct"]
        if a is None or b is None:
            return INCONCLUSIVE, f"{met}: not enough documents"
        ok &= a > b
        sgn = -1 if met == "rep_4" else 1
        parts.append(f"{met}: Ĥ_K {sgn * a:+.1f}% vs H_L {sgn * b:+.1f}%")
    return verdict(ok), "; ".join(parts)


def _collapse(m: dict[str, Any]) -> tuple[str, str]:
    """Judged on Ĥ_K of the generator's own tokens (punctuation included): the reported path drops
    documents under 10 words, and the collapsed lineage is exactly such documents, so its mean over the
    documents it can score cannot fall (issue 30)."""
    g0, g6 = m["unfiltered_hk_gen0"], m["unfiltered_hk_final"]
    l0, l6 = m["unfiltered_hk_lm_gen0"], m["unfiltered_hk_lm_final"]
    if l0 is None or l6 is None:
        return INCONCLUSIVE, "no Ĥ_K on the LM's tokens"
    un = (m.get("unscored_frac") or {}).get("unfiltered")
    un_txt = f", {100 * un:.0f}% of them unscorable (< 10 words)" if un is not None else ""
    g6_txt = "n/a" if g6 is None else f"{g6:.2f}"
    return verdict(l6 < COLLAPSE_FRAC * l0), (
        f"on the LM's own tokens {l0:.2f} → {l6:.2f} bits/token (needs < {COLLAPSE_FRAC:g}×); reported path "
        f"(scored documents only{un_txt}) {g0:.2f} → {g6_txt} bits/word")


def _proxy(m: dict[str, Any]) -> tuple[str, str]:
    p = m["proxy"]
    return (verdict(p["beta"] > 0 and p["p"] < PROXY_P and p["r2"] >= PROXY_R2),
            f"β = {p['beta']:.3f}, R² = {p['r2']:.3f}, p = {p['p']:.2g}, n = {p['n']} "
            f"(holds if β > 0, p < {PROXY_P:g}, R² ≥ {PROXY_R2:g}: our bar)")


def _detector(m: dict[str, Any]) -> tuple[str, str]:
    d = m["detector"]
    txt = f"ρ = {d['rho']:+.3f}, p = {d['p']:.2g}, n = {d['n']}"
    if "detector_rephrase" in m:
        txt += f"; rephrasing lineage ρ = {m['detector_rephrase']['rho']:+.3f}"
    return verdict(d["rho"] > 0 and d["p"] < 1e-4), txt


def _rephrase(m: dict[str, Any]) -> tuple[str, str]:
    if "detector_rephrase" not in m:
        return INCONCLUSIVE, "no rephrasing lineage for this generator"
    r, f = m["detector_rephrase"]["rho"], m["detector"]["rho"]
    p = m["detector_rephrase"]["p"]
    v = INCONCLUSIVE if p >= REPHRASE_P else verdict(r < 0)   # the sign only counts when significant
    return v, (f"bag-of-words rephraser: ρ = {r:+.3f}, p = {p:.2g} (fine-tuning ρ = {f:+.3f}); paper: "
               f"negative (a sign counts at p < {REPHRASE_P:g})")


def _every_seed(check: Any) -> Any:
    """A single-seed check judged on every seed of the run: its verdict when all seeds agree, else
    ``inconclusive``; the measured text is the first seed's, with the count of seeds that hold."""
    def combined(m: dict[str, Any]) -> tuple[str, str]:
        runs = getattr(m, "per_seed", None) or [m]
        results = [check(r) for r in runs]
        verdicts = [v for v, _ in results]
        if len(runs) == 1:
            return verdicts[0], f"{results[0][1]} (1 seed)"
        v = verdicts[0] if all(x == verdicts[0] for x in verdicts) else INCONCLUSIVE
        held = sum(x == HOLDS for x in verdicts)
        return v, f"seed {m.seeds[0]}: {results[0][1]}; holds in {held}/{len(runs)} seeds"  # type: ignore[attr-defined]
    return combined


def _ordering(m: dict[str, Any]) -> tuple[str, str]:
    """Generation-6 Ĥ_K on the LM's own tokens (as ``collapse``: the reported path's mean skips the
    collapsed, unscorable documents): Ĥ_K filter > H_L filter > unfiltered, each step a paired difference
    over seeds beyond ORDER_K standard errors (inconclusive inside the noise or with one seed)."""
    try:
        steps = [paired(m, "final_hk_lm.hk_filter", "final_hk_lm.hl_filter"),
                 paired(m, "final_hk_lm.hl_filter", "final_hk_lm.unfiltered")]
    except (TypeError, KeyError):  # a condition without any document at generation 6
        return INCONCLUSIVE, "a condition has no document at the last generation"
    verdicts = [judge(mean, se, n, 0.0, ORDER_K, "higher") for mean, se, n in steps]
    v = FAILS if FAILS in verdicts else HOLDS if all(x == HOLDS for x in verdicts) else INCONCLUSIVE
    f = m["final_hk_lm"]
    (d1, s1, n), (d2, s2, _) = steps

    def se(s: float) -> str:
        return f" ± {s:.2f}" if n > 1 else ""

    return v, (f"on the LM's tokens, seed {getattr(m, 'seeds', [m.get('seed', 0)])[0]}: unfiltered "
               f"{f['unfiltered']:.2f}, H_L filter {f['hl_filter']:.2f}, Ĥ_K filter {f['hk_filter']:.2f}; "
               f"over {n} seed(s): Ĥ_K − H_L filter {d1:+.2f}{se(s1)}, H_L filter − unfiltered "
               f"{d2:+.2f}{se(s2)} bits/token (each needs > 0 by {ORDER_K:g} s.e.)")


CLAIMS = [
    Claim("collapse", "Unfiltered fine-tuning on own samples collapses diversity (Ĥ_K of the generator's "
          "own tokens falls)",
          "Table 1: unfiltered Ĥ_K 0.79 bits/word at gen 6", _every_seed(_collapse)),
    Claim("hk_distinct3", "Ĥ_K filtering raises Distinct-3 vs unfiltered at gen 6 (p < 0.001)",
          "+42% (***)", _every_seed(_improves("distinct_3", "+42%"))),
    Claim("hk_vocab", "Ĥ_K filtering raises vocabulary vs unfiltered at gen 6 (p < 0.001)",
          "+30% (***)", _every_seed(_improves("vocabulary", "+30%"))),
    Claim("hk_rep4", "Ĥ_K filtering lowers Rep-4 vs unfiltered at gen 6 (p < 0.001)",
          "−19% (***)", _every_seed(_improves("rep_4", "-19%"))),
    Claim("hl_no_benefit", "Log-prob (H_L) filtering gives no significant diversity benefit",
          "+7% / +4% / −3%, all p > 0.23", _every_seed(_hl_no_benefit)),
    Claim("hk_beats_hl", "Ĥ_K filter beats the H_L filter on Distinct-3, vocabulary and Rep-4",
          "+42/+30/−19% vs +7/+4/−3%", _every_seed(_hk_beats_hl)),
    Claim("hk_ordering", "Generation-6 Ĥ_K ordering (on the LM's tokens): Ĥ_K filter > H_L filter > unfiltered",
          "1.43 > 1.16 > 0.79 bits/word", _ordering),
    Claim("proxy", "Ĥ_K tracks H_L across domains and temperatures (OLS of Ĥ_K bits/token on H_L)",
          "β = 0.924, R² = 0.746", _every_seed(_proxy)),
    Claim("detector", "Ĥ_K detects collapse: Spearman ρ(Ĥ_K, H_L) > 0 over the fine-tuning lineage",
          "ρ = +0.454, p < 0.0001", _every_seed(_detector)),
    Claim("rephrase_negative", "In a rephrasing lineage (no weight update) ρ(Ĥ_K, H_L) is negative",
          "ρ = −0.175", _every_seed(_rephrase)),
]
