import numpy as np
import pytest

from neurips26.harness.paper import SeedMetrics


def _claims():
    from neurips26.harness import registry

    exp = registry.load("nextlat", "experiment")
    return exp, {c.id: c for c in exp.CLAIMS}


def _metrics(nl_rank, gpt_rank, nl_legal, gpt_legal):
    runs = []
    for a, b, c, d in zip(nl_rank, gpt_rank, nl_legal, gpt_legal):
        city = {
            "gpt": {"erank": b, "legal_rate": d, "detour": 0.5, "probe_node": 0.5},
            "nextlat_d1": {"erank": a, "legal_rate": c, "detour": 0.5, "probe_node": 0.5},
            "nextlat_d3": {"erank": a, "legal_rate": c, "detour": 0.5, "probe_node": 0.5},
        }
        runs.append({"city": city})
    return SeedMetrics(list(range(len(runs))), runs)


def test_compression_claim_counts_seeds():
    exp, c = _claims()
    assert (
        c["compression"].evaluate(_metrics([12, 12, 20], [21, 21, 21], [1] * 3, [1] * 3)).verdict == "holds"
    )
    assert (
        c["compression"].evaluate(_metrics([12, 20, 20], [21, 21, 21], [1] * 3, [1] * 3)).verdict == "fails"
    )
    one = {"city": _metrics([12], [21], [1], [1]).per_seed[0]["city"]}
    assert c["compression"].evaluate(one).verdict == "inconclusive"  # needs 3 seeds for "2 of 3"


def test_legal_claims():
    exp, c = _claims()
    m = _metrics([1] * 3, [1] * 3, [0.93, 0.94, 0.935], [0.98, 0.985, 0.99])
    assert c["legal_moves"].evaluate(m).verdict == "holds"
    assert c["legal_vs_gpt"].evaluate(m).verdict == "fails"  # consistently ~5 points lower
    low = _metrics([1] * 3, [1] * 3, [0.85, 0.95, 0.95], [0.98] * 3)
    assert c["legal_moves"].evaluate(low).verdict == "fails"
    assert c["lm_loss"].evaluate(m).verdict == "inconclusive"  # no LM measured


def test_spec_claim_requires_greedy_equality():
    exp, c = _claims()
    sp = {
        "tokens_per_forward_prompts": [1.4, 1.5, 1.45, 1.5],
        "accepted_beyond_first": 1.0,
        "equals_greedy": True,
    }
    m = {"lm": {"nextlat_d1": {"spec": {"gamma4": sp}}}}
    assert c["spec_decoding"].evaluate(m).verdict == "holds"
    sp["equals_greedy"] = False
    assert c["spec_decoding"].evaluate(m).verdict == "fails"


def test_lm_loss_claim_uses_window_noise_for_one_seed():
    exp, c = _claims()
    rng = np.random.default_rng(0)
    gpt = 2.0 + 0.1 * rng.normal(size=32)
    for shift, want in ((0.0, "holds"), (0.2, "fails")):  # +0 % vs +10 % worse, consistently per window
        nl = gpt + shift + 0.005 * rng.normal(size=32)
        lm = {"nextlat_d1": {"val_loss": nl.mean(), "val_loss_windows": list(nl)},
              "gpt": {"val_loss": gpt.mean(), "val_loss_windows": list(gpt)}}
        assert c["lm_loss"].evaluate({"lm": lm}).verdict == want
    sg = gpt * 1.01
    lm["nextlat_d1_sg"] = {"val_loss": sg.mean(), "val_loss_windows": list(sg)}
    r = c["lm_loss"].evaluate({"lm": lm})
    assert r.verdict == "fails" and "trunk gets the CE gradient only" in r.measured and "+1.00%" in r.measured


def test_model_names():
    exp, _ = _claims()
    assert exp._horizon("gpt") == (1, 0.0, True)
    assert exp._horizon("nextlat_d3") == (3, 1.0, True)
    assert exp._horizon("nextlat_d1_sg") == (1, 1.0, False)
    with pytest.raises(ValueError, match="unknown model"):
        exp._horizon("nextlat_dx")
    assert "nextlat_d1_sg" in exp.CONFIGS["full"].lm.models


def test_probe_claim_is_paired_over_seeds():
    exp, c = _claims()
    ks = list(range(1, 6))

    def run(gain):
        return {"city": {"gpt": {"probe_ks": ks, "token_probe": [0.5, 0.3, 0.2, 0.2, 0.2]},
                         "nextlat_d1": {"probe_ks": ks, "token_probe": [0.5] + [0.25 + gain] * 4}}}

    assert c["probes_city"].evaluate(SeedMetrics([0, 1, 2], [run(0.01), run(0.02), run(0.015)])).verdict == "holds"
    assert c["probes_city"].evaluate(SeedMetrics([0, 1, 2], [run(-0.2), run(-0.21), run(-0.19)])).verdict == "fails"
    assert c["probes_city"].evaluate(run(0.1)).verdict == "inconclusive"  # one seed
    assert c["probes_lm"].evaluate(run(0.1)).verdict == "inconclusive"  # no LM


def test_spec_grows_with_d_claim():
    exp, c = _claims()

    def spec(xs):
        return {"spec": {"gamma4": {"tokens_per_forward": float(np.mean(xs)), "tokens_per_forward_prompts": xs}}}

    lm = {"nextlat_d1": spec([1.5, 1.6, 1.4, 1.5]), "gpt": {}}
    assert c["spec_grows_with_d"].evaluate({"lm": lm}).verdict == "inconclusive"  # one d
    lm["nextlat_d4"] = spec([1.9, 2.1, 1.8, 2.0])
    assert c["spec_grows_with_d"].evaluate({"lm": lm}).verdict == "holds"
    lm["nextlat_d4"] = spec([1.2, 1.1, 1.2, 1.0])
    assert c["spec_grows_with_d"].evaluate({"lm": lm}).verdict == "fails"


@pytest.mark.slow
def test_quick_statistics_three_seeds(tmp_path):
    """Check 11: legal rate >= 0.9 (GPT, NextLat d=1), erank < 0.8 x GPT in >= 2 of 3 seeds, tok/fwd > 1."""
    from neurips26.harness.run import run_paper

    r = run_paper("nextlat", "quick", out=tmp_path, progress=False)
    v = {c["id"]: c["verdict"] for c in r["claims"]}
    assert v["legal_moves"] == "holds" and v["compression"] == "holds" and v["spec_decoding"] == "holds"


def test_full_config_is_wired():
    exp, _ = _claims()
    full = exp.CONFIGS["full"]
    assert [(g.k, g.l) for g in full.pathstar] == [(2, 5), (5, 5)]
    assert full.city.n == 10 and full.group.group == "A5" and full.group.length == 16
    assert full.lm.gammas == (2, 4, 8) and len(full.lm_seeds) == 3
    assert {"nextlat_d1", "nextlat_d4", "nextlat_d8", "gpt"} <= set(full.lm.models)
    assert {"mtp", "jtp"} <= set(full.city.models)
    assert full.countdown.pause == 8 and full.countdown.lambda_h == 2.0 and full.countdown.proj_factor == 0.5
    assert {"gpt", "nextlat_d1", "nextlat_d4", "nextlat_d8"} == set(full.countdown.models)
    assert full.data_parallel == "ddp" and full.precision == "bf16"
    assert exp.CONFIGS["quick"].precision == "fp32"


def test_run_validates_the_data_parallel_settings_before_training(tmp_path):
    import dataclasses

    from neurips26.harness.run import RunContext

    exp, _ = _claims()
    smoke = exp.CONFIGS["smoke"]
    for bad, match in (({"data_parallel": "zero3"}, "data_parallel"),
                       ({"data_parallel": "ddp", "precision": "fp16"}, "precision"), ({"precision": "fp16"}, "precision")):
        with pytest.raises(ValueError, match=match):
            exp.run(dataclasses.replace(smoke, **bad), RunContext(tmp_path, progress=False))
    assert not list(tmp_path.iterdir())                                 # nothing trained, nothing written


def test_full_benchmarks_run_at_toy_size():
    """The full config's path-star, A5 (S3 here), JTP/MTP-on-city and d-sweep paths, shrunk to seconds."""
    import dataclasses

    exp, c = _claims()
    ps = exp.PathStarConfig(k=2, l=3, M=12, train=64, test=16, hidden=64, layers=1, heads=2, steps=3, batch=8,
                            proj_factor=1.0)
    runs = {"pathstar": {"G2_3": {n: exp.run_task(("pathstar", ps, 0, n, 1)) for n in ("gpt", "nextlat_d3")}}}
    g = exp.GroupConfig(group="S3", length=6, train=64, test=16, hidden=64, layers=1, heads=2, steps=3, batch=8)
    runs["group"] = {n: exp.run_task(("group", g, 0, n, 1)) for n in ("gpt", "nextlat_d1")}
    city = dataclasses.replace(exp.CONFIGS["smoke"].city, steps=2, prompts=4, latents=64, compression_pairs=20)
    jtp = exp.run_task(("city", city, 0, "jtp", 1))
    assert 0 <= runs["pathstar"]["G2_3"]["nextlat_d3"]["exact_match"] <= 1
    assert 0 <= runs["group"]["nextlat_d1"]["accuracy"] <= 1 and runs["group"]["gpt"]["cpu_seconds"] > 0
    assert 0 <= jtp["legal_rate"] <= 1 and len(jtp["token_probe"]) == len(city.probe_ks)
    assert c["planning_pathstar"].evaluate(runs).verdict == "inconclusive"  # one seed: no s.e.
    assert "G2_3" in c["planning_pathstar"].evaluate(runs).measured
    assert c["group_word"].evaluate({}).verdict == "inconclusive"
    cd = exp.CountdownConfig(max_target=30, max_intermediate=1000, pause=2, train=32, test=8, hidden=64, layers=1,
                             heads=2, steps=2, batch=8, proj_factor=1.0, models=("gpt", "nextlat_d1"))
    runs = {"countdown": {n: exp.run_task(("countdown", cd, 0, n, 1)) for n in cd.models}}
    assert 0 <= runs["countdown"]["nextlat_d1"]["accuracy"] <= 1 and 0 <= runs["countdown"]["gpt"]["generalization"] <= 1
    assert c["countdown"].evaluate(runs).verdict == "inconclusive"  # one seed: no s.e.
    assert c["countdown"].evaluate({}).verdict == "inconclusive"


def test_lm_task_with_bpe_at_toy_size():
    import dataclasses

    exp, _ = _claims()
    lm = dataclasses.replace(exp.CONFIGS["smoke"].lm, tokenizer="bpe", bpe_vocab=400, steps=2, probe_ks=(1, 2))
    r = exp.run_task(("lm", lm, 0, "nextlat_d1", 1))
    assert r["vocab"] == 400 and np.isfinite(r["val_loss"]) and r["val_loss"] < 1.5 * np.log(400)
    assert r["spec"]["gamma4"]["equals_greedy"]
    with pytest.raises(ValueError, match="tokenizer"):
        exp.run_task(("lm", dataclasses.replace(lm, tokenizer="word"), 0, "gpt", 1))


def test_countdown_claim_is_paired_over_seeds():
    _, c = _claims()

    def run(g, n):
        return {"countdown": {"gpt": {"accuracy": g}, "nextlat_d1": {"accuracy": n}}}

    r = c["countdown"].evaluate(SeedMetrics([0, 1, 2], [run(0.5, 0.6), run(0.4, 0.52), run(0.45, 0.56)]))
    assert r.verdict == "holds" and "+0.11" in r.measured, r.measured
    assert c["countdown"].evaluate(SeedMetrics([0, 1, 2], [run(0.6, 0.5), run(0.52, 0.4), run(0.56, 0.45)])).verdict == "fails"
