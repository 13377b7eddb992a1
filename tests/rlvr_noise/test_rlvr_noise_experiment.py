"""Claim logic on synthetic metrics (verdicts computed from measurements; noise -> inconclusive)."""

import copy

import pytest

from neurips26.harness.paper import SeedMetrics

exp = pytest.importorskip("neurips26.rlvr_noise.experiment")


def _seed(clean=0.95, truly=0.05, fmt=0.27, cont=0.08, base=0.18, sweep=(0.95, 0.9, 0.7, 0.2, 0.05),
          rq2=None, sql=(0.7, 0.95), jitter=0.0):
    keys = ("p0", "p25", "p50", "p75", "p100")
    rq2 = rq2 or {"dr_grpo": 0.6, "dapo": 0.72, "sapo": 0.7}
    return {
        "construction": {"excluded_fraction": 0.16 + jitter, "reason_shares": {"multi_answer": 0.09},
                         "precision": 1.0, "recall": 1.0, "audit_upper95": 0.0295},
        "rq1": {n: {"acc": v + jitter} for n, v in (("clean", clean), ("truly_noisy", truly), ("format", fmt),
                                                     ("contaminated", cont), ("base", base))},
        "sweep": {k: {"acc": v + jitter} for k, v in zip(keys, sweep)},
        "sweep_spearman": -1.0,
        "rq2": {"grpo": {"acc": sweep[2] + jitter}, **{k: {"acc": v + jitter} for k, v in rq2.items()},
                "clean": {"acc": clean + jitter}},
        "rq3": {"base": {"ex": 0.5}, "injected_share": 0.62, "benign_share_of_injected": 0.2,
                **{f"{v}_{arm}": {"ex": x + jitter * (arm == "original")} for v in ("grpo", "pgfc")
                   for arm, x in zip(("original", "corrected"), sql)}},
    }


def _metrics(**kw):
    runs = [_seed(jitter=j, **kw) for j in (0.0, 0.01, -0.01)]
    return SeedMetrics([0, 1, 2], runs)


def _verdicts(m):
    return {c.id: c.evaluate(m).verdict for c in exp.CLAIMS}


def test_paper_like_metrics_hold():
    v = _verdicts(_metrics())
    for cid in ("reverify_contamination", "truly_vs_clean", "truly_not_above_format",
                "contaminated_geq_truly", "monotone_in_noise", "rq2_no_variant_closes_gap"):
        assert v[cid] == "holds", cid
    assert v["noisy_above_base"] == "fails" and v["sql_corrected_beats_original"] == "holds"
    assert _verdicts(_metrics(sql=(0.9, 0.9)))["sql_corrected_beats_original"] == "fails"
    # a gain inside 2 s.e. of the threshold is inconclusive
    runs = [_seed(sql=(0.7, 0.7 + g)) for g in (0.0, 0.06, 0.09)]
    assert _verdicts(SeedMetrics([0, 1, 2], runs))["sql_corrected_beats_original"] == "inconclusive"


def test_refuting_metrics_fail():
    v = _verdicts(_metrics(truly=0.93, fmt=0.3, rq2={"dapo": 0.95}))
    assert v["truly_vs_clean"] == "fails" and v["truly_not_above_format"] == "fails"
    assert v["rq2_no_variant_closes_gap"] == "fails"


def test_one_seed_is_inconclusive_and_missing_metric_too():
    m = _seed()
    assert _verdicts(m)["truly_vs_clean"] == "inconclusive"
    broken = copy.deepcopy(m)
    del broken["sweep"]
    assert _verdicts(broken)["monotone_in_noise"] == "inconclusive"


def test_configs():
    assert set(exp.CONFIGS) >= {"smoke", "quick", "full"}
    assert len(exp.CONFIGS["quick"].seeds) == 3
    q = exp.CONFIGS["quick"].train
    assert (q.steps, q.batch, q.group) == (60, 32, 8)
    full = exp.CONFIGS["full"]
    assert full.policy == "tinylm" and (full.lm.steps, full.lm.batch, full.lm.group) == (300, 64, 16)
    assert len(full.seeds) == 5 and (full.sql.policy, full.sql.turns) == ("mlp", 2)
    assert full.lm.data_parallel       # under torchrun the ranks share the tinylm steps
    assert exp.CONFIGS["quick"].sql.k_instances == 5 and full.sql.k_instances == 5   # benign test on K = 5
    with pytest.raises(ValueError, match="policy"):
        exp.Config(policy="gpt5")
    with pytest.raises(ValueError, match="noise share"):
        exp.Config(shares=(0.0, 0.5, 1.5))
    with pytest.raises(ValueError, match="0.5"):
        exp.Config(shares=(0.0, 0.25, 1.0))
    with pytest.raises(ValueError, match="empty"):
        exp.Config(shares=())
    with pytest.raises(ValueError, match="variant"):
        exp.Config(rq2=("grpo", "ppo2"))
    with pytest.raises(ValueError, match="sql variant"):
        exp.Config(sql_variants=("dapo",))


@pytest.mark.slow
def test_tinylm_pipeline_runs_every_condition(tmp_path):
    """The full-scale wiring (tinylm policy, MLP 2-turn SQL) at a seconds-long size: every RQ1 / sweep / RQ2
    condition is trained and evaluated, and the claims evaluate (verdicts at this size mean nothing)."""
    from neurips26.harness.run import run_paper
    from neurips26.rlvr_noise.sqlrl import SQLConfig
    from neurips26.rlvr_noise.tinylm import TinyLMConfig

    cfg = exp.Config(n_train=60, n_test=20, policy="tinylm", plots=False,
                     lm=TinyLMConfig(steps=2, batch=4, group=4, sft_epochs=1, n_eval=4, max_eval=8, device="cpu"),
                     sql=SQLConfig(n_train=60, n_test=30, n_sft=20, k_instances=1, steps=2, batch=4, group=4,
                                   policy="mlp", turns=2))
    res = run_paper("rlvr_noise", config=cfg, out=tmp_path / "t", seeds=[0], progress=False)
    m = res["metrics"]
    assert set(m["rq1"]) == {"base", "clean", "truly_noisy", "random", "format", "contaminated"}
    assert set(m["rq2"]) == {"grpo", "dr_grpo", "dapo", "sapo", "tis", "pgfc", "pgbc", "clean"}
    assert all(len(m["rq1"][c]["curves"]["reward"]) == 2 for c in ("clean", "format"))
    assert {c["id"] for c in res["claims"]} == {c.id for c in exp.CLAIMS}


@pytest.mark.slow
def test_check12_quick_outcomes(tmp_path):
    from neurips26.harness.run import run_paper

    res = run_paper("rlvr_noise", "quick", out=tmp_path / "q", progress=False)
    v = {c["id"]: c["verdict"] for c in res["claims"]}
    for cid in ("truly_vs_clean", "truly_not_above_format", "contaminated_geq_truly", "monotone_in_noise"):
        assert v[cid] == "holds", (cid, res["claims"])
    assert v["rq2_no_variant_closes_gap"] != "fails"
    assert v["sql_corrected_beats_original"] == "holds", res["claims"]
