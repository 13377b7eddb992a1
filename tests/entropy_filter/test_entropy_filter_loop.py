"""The quick collapse loop (spec checks 11-12), the run/bench machinery end to end."""

import dataclasses
import json

import numpy as np
import pytest

from neurips26.entropy_filter.collapse import (LoopConfig, compare, generation_comparison, prompts,
                                               record_docs, run_lineage, spearman, trajectories)
from neurips26.entropy_filter.corpus import N_DOMAINS, pydoc_topics
from neurips26.entropy_filter.count_lm import TrigramLM, pretraining_docs

pytest.importorskip("nltk")

CONDS = ("unfiltered", "hl_filter", "hk_filter")


@pytest.fixture(scope="module")
def quick_loop():
    """The quick configuration (80 docs/generation, 6 generations, τ = 0.8, keep 50%), seed 0 (~20 s: the
    tests on it are ``slow``; the quick run judges the same checks on three seeds)."""
    topics = pydoc_topics()
    vocab, docs = pretraining_docs(topics, 120, N_DOMAINS, 1500)
    base = TrigramLM(vocab, N_DOMAINS).fit(docs)
    cfg = LoopConfig(conditions=CONDS, record_self=False)
    d, t = prompts(N_DOMAINS, cfg.topics_per_domain, cfg.n_per_topic, len(topics))
    ids0 = base.sample(d, t, cfg.doc_len, cfg.temperature, np.random.default_rng([0, 0]))
    gen0 = record_docs(base, base, ids0, d, t, "gen0", 0)
    recs = []
    for k, c in enumerate(CONDS):
        recs += run_lineage(base, c, cfg, gen0, ids0, d, t, np.random.default_rng([0, 1, k]))
    return cfg, recs


@pytest.mark.slow
def test_loop_records(quick_loop):
    cfg, recs = quick_loop
    assert len(recs) == len(CONDS) * (cfg.generations + 1) * 80
    r = recs[-1]
    for key in ("hk", "hk_fast", "hl", "surprisal", "distinct_3", "rep_4", "vocabulary", "ttr_500",
                "condition", "generation", "domain", "topic", "n_tokens"):
        assert key in r
    # every generation of every lineage has 20 documents per domain
    for c in CONDS:
        for g in range(cfg.generations + 1):
            doms = [x["domain"] for x in recs if x["condition"] == c and x["generation"] == g]
            assert sorted(np.bincount(doms)) == [20] * 4


@pytest.mark.slow
def test_hk_filter_beats_unfiltered_and_hl(quick_loop):
    """Spec check 11 (filter part): Distinct-3 at gen 6, Ĥ_K filter ≥ +20% vs unfiltered with Welch
    p < 1e-3, and above the H_L filter."""
    cfg, recs = quick_loop
    comp = generation_comparison(recs, CONDS, cfg.generations)
    d3 = comp["hk_filter"]["distinct_3"]
    assert d3["pct"] >= 20 and d3["p_welch"] < 1e-3
    assert comp["hk_filter"]["distinct_3"]["mean"] > comp["hl_filter"]["distinct_3"]["mean"]


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="does not reproduce at 80 docs/generation with 120-token docs: the "
                   "unfiltered lineage collapses into punctuation runs that the reported tokeniser drops, so "
                   "Ĥ_K falls only to ~0.7x of generation 0 (Distinct-3 falls 0.79 -> 0.15)")
def test_unfiltered_hk_collapses(quick_loop):
    """Spec check 11 (collapse part): unfiltered Ĥ_K(gen 6) < 0.6·Ĥ_K(gen 0)."""
    cfg, recs = quick_loop
    tr = trajectories(recs, ("unfiltered",), cfg.generations)["unfiltered"]["hk"]
    assert tr[-1] < 0.6 * tr[0]


@pytest.mark.slow
def test_unfiltered_collapse_on_the_generators_tokens(quick_loop):
    """issue 30: the reported-path mean drops documents under 10 words, and the collapsed lineage is
    exactly such documents (about half unscored at generation 6), so it cannot fall; on the generator's
    own tokens (the `collapse` claim's measure) Ĥ_K falls below 0.6x of generation 0."""
    cfg, recs = quick_loop
    tr = trajectories(recs, ("unfiltered",), cfg.generations)["unfiltered"]["hk_lm"]
    assert tr[-1] < 0.6 * tr[0]
    last = [r for r in recs if r["condition"] == "unfiltered" and r["generation"] == cfg.generations]
    assert np.mean([r["hk"] is None for r in last]) > 0.3


@pytest.mark.slow
def test_unfiltered_diversity_collapses(quick_loop):
    cfg, recs = quick_loop
    tr = trajectories(recs, ("unfiltered",), cfg.generations)["unfiltered"]
    assert tr["distinct_3"][-1] < 0.6 * tr["distinct_3"][0]
    assert tr["hk"][-1] < tr["hk"][0]


@pytest.mark.slow
def test_detector_positive(quick_loop):
    """Spec check 12: Spearman ρ(Ĥ_K, H_L) > 0 on the pooled unfiltered lineage."""
    _, recs = quick_loop
    unf = [r for r in recs if r["condition"] == "unfiltered"]
    res = spearman([r["hk"] for r in unf], [r["hl"] for r in unf])
    assert res["rho"] > 0 and res["p"] < 1e-3


def test_compare_statistics():
    rng = np.random.default_rng(0)
    u = rng.normal(1.0, 0.1, 80)
    f = rng.normal(1.2, 0.1, 80)
    c = compare(f, u, "distinct_3")
    assert c["pct"] == pytest.approx((f.mean() - u.mean()) / u.mean() * 100)
    assert c["ci"][0] < c["pct"] < c["ci"][1]
    assert c["p_welch"] < 1e-6 and c["p_student"] < 1e-6
    assert compare(f, u, "rep_4")["pct"] == pytest.approx(-c["pct"])  # lower Rep-4 is better
    assert compare(f, u, "distinct_3") == c  # bootstrap seeded (42)


def test_run_end_to_end(tmp_path, monkeypatch):
    from neurips26.entropy_filter import experiment
    from neurips26.harness.run import CLAIM_KEYS, load_result, run_paper

    small = dataclasses.replace(experiment.CONFIGS["quick"], generations=1, n_per_topic=1,
                                proxy_n_per_topic=1, proxy_temperatures=(0.6, 1.0), record_self=False,
                                proxy_doc_len=150,
                                conditions=("unfiltered", "random", "hl_filter", "hk_filter", "zlib",
                                            "gopher_rep", "hl_surprisal"))
    monkeypatch.setitem(experiment.CONFIGS, "quick", small)
    res = run_paper("entropy_filter", "quick", 0, tmp_path, progress=False)
    data = load_result(tmp_path / "result.json")
    assert data["metrics"] == json.loads(json.dumps(res["metrics"]))
    ids = {c["id"] for c in data["claims"]}
    assert {"hk_distinct3", "hk_vocab", "hk_rep4", "hl_no_benefit", "proxy", "detector"} <= ids
    for c in data["claims"]:
        assert set(CLAIM_KEYS) <= set(c) and c["verdict"] in ("holds", "fails", "inconclusive")
    assert (tmp_path / "trajectories.png").is_file() and (tmp_path / "hk_vs_hl.png").is_file()
    assert res["metrics"]["n_docs_per_generation"] == 40


def test_same_seed_same_records():
    topics = pydoc_topics()
    vocab, docs = pretraining_docs(topics, 120, N_DOMAINS, 1500)
    cfg = LoopConfig(n_per_topic=1, generations=2, record_self=False)

    def once(seed):
        base = TrigramLM(vocab, N_DOMAINS).fit(docs)
        d, t = prompts(N_DOMAINS, cfg.topics_per_domain, cfg.n_per_topic, len(topics))
        ids0 = base.sample(d, t, cfg.doc_len, cfg.temperature, np.random.default_rng([seed, 0]))
        gen0 = record_docs(base, base, ids0, d, t, "gen0", 0)
        return run_lineage(base, "random", cfg, gen0, ids0, d, t, np.random.default_rng([seed, 1]))

    a, b, c = once(0), once(0), once(1)
    assert a == b
    assert [r["text"] for r in a] != [r["text"] for r in c]


@pytest.mark.slow
def test_neural_lm_loop_smoke():
    """The full-scale generator (PyTorch MLP LM) runs the loop interface: pretrain, sample, fine-tune."""
    pytest.importorskip("torch")
    from neurips26.entropy_filter.neural_lm import NeuralLM, NeuralLMConfig

    topics = pydoc_topics()
    vocab, docs = pretraining_docs(topics, 120, N_DOMAINS, 1500)
    lm = NeuralLM.pretrain(vocab, N_DOMAINS, len(topics), docs[:60], NeuralLMConfig(pretrain_epochs=1), seed=0)
    cfg = LoopConfig(n_per_topic=1, topics_per_domain=2, doc_len=40, generations=1, record_self=True)
    d, t = prompts(N_DOMAINS, cfg.topics_per_domain, cfg.n_per_topic, len(topics))
    ids0 = lm.sample(d, t, cfg.doc_len, cfg.temperature, np.random.default_rng(0))
    assert ids0.shape == (8, 40) and vocab.sampleable[ids0].all()
    gen0 = record_docs(lm, lm, ids0, d, t, "gen0", 0)
    recs = run_lineage(lm, "hk_filter", cfg, gen0, ids0, d, t, np.random.default_rng(1))
    assert len(recs) == 16 and all(r["hl"] > 0 for r in recs)
    again = lm.sample(d, t, cfg.doc_len, cfg.temperature, np.random.default_rng(0))
    np.testing.assert_array_equal(again, ids0)
