"""The reproduction machinery end to end (small configs), the process pool, result.json schema."""

import json
from dataclasses import replace

import pytest

from neurips26.harness import RunContext, run_paper
from neurips26.harness.paper import VERDICTS, evaluate_all
from neurips26.harness.run import CLAIM_KEYS, RESULT_KEYS
from neurips26.nas import experiment
from neurips26.nas.parallel import map_tasks

TINY = replace(experiment.CONFIGS["quick"], deltas=(1e-1, 1e-4), n_seeds=3,
               e1_instances=(("random", 2, 2, 2), ("random", 2, 2, 16)))


def test_quick_config_matches_spec():
    q = experiment.CONFIGS["quick"]
    assert q.experiments == ("E1",) and q.deltas == (1e-1, 1e-3, 1e-6) and q.gamma == 0.5
    assert set(q.e1_algorithms) == {"nas", "uniform", "generative"} and q.K_s == 20
    from neurips26.nas import NavigationAllocator, bound_terms
    for spec in q.e1_instances:                       # frozen instances: U_o in [10, 100]
        m = experiment.build_instance(spec)
        a = NavigationAllocator(m.S, m.A).solve(m.P, bound_terms(m.P, m.r, m.gamma))
        assert 10 <= a.value <= 100 and m.S in (2, 3) and m.A == 2
    f = experiment.CONFIGS["full"]
    assert set(f.experiments) == {"E1", "E2", "E3", "E4"} and len(f.deltas) == 12
    specs = list(f.e1_instances) + list(f.e3_instances) + list(f.e4_instances) + \
        [("lazy_ring", f.ring_S, q) for q in f.ring_qs]
    for spec in specs:                                # every full-scale instance builds and is identifiable
        experiment.build_instance(spec, f.gamma, f.ring_qs).require_identifiable()


def test_run_paper_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setitem(experiment.CONFIGS, "quick", TINY)
    res = run_paper("nas", "quick", seed=3, out=tmp_path, progress=False)
    data = json.loads((tmp_path / "result.json").read_text())
    assert all(k in data for k in RESULT_KEYS)
    assert [c["id"] for c in data["claims"]] == [c.id for c in experiment.CLAIMS]
    for c in data["claims"]:
        assert all(k in c for k in CLAIM_KEYS) and c["verdict"] in VERDICTS
    v = {c["id"]: c["verdict"] for c in data["claims"]}
    assert v["correctness"] == "holds"
    assert v["E2-connectivity"] == "inconclusive" and "full config" in data["claims"][4]["measured"]
    assert (tmp_path / "e1_tau_vs_log_delta.png").is_file()
    m = res["metrics"]
    assert m["n_runs"] == 2 * 3 * 3 and m["censored_total"] == 0
    assert len(m["e1_nas_slope_over_Uo"]) == 2
    # determinism: same seed, same metrics
    res2 = run_paper("nas", "quick", seed=3, out=tmp_path / "again", progress=False)
    strip = lambda mm: json.dumps({k: v for k, v in mm.items()}, sort_keys=True, default=str)
    a = json.loads(strip(res["metrics"]))
    b = json.loads(strip(res2["metrics"]))
    for row_a, row_b in zip(a["E1"], b["E1"]):
        for alg in row_a["algorithms"]:
            pa = [p["tau_mean"] for p in row_a["algorithms"][alg]["per_delta"]]
            pb = [p["tau_mean"] for p in row_b["algorithms"][alg]["per_delta"]]
            assert pa == pb


def test_claims_on_synthetic_metrics():
    base = {"experiments_run": ["E1"], "deltas": [0.1], "n_runs": 10, "errors_total": 0,
            "censored_total": 0, "max_error_rate_over_delta": 0.0, "e1_nas_slope_over_Uo": [1.1, 1.2],
            "e1_uniform_over_nas_tau": [1.5], "e1_uniform_slope_over_Uunif": [1.1],
            "e1_Uunif_over_Uo": [1.5], "e1_overhead_ratio_1e-3": [3.0]}
    v = {c.id: c.verdict for c in evaluate_all(experiment.CLAIMS, base)}
    assert v["E1-slope"] == v["E1-uniform"] == v["E1-overhead"] == v["correctness"] == "holds"
    bad = base | {"e1_nas_slope_over_Uo": [5.0], "censored_total": 1, "e1_uniform_over_nas_tau": [0.9]}
    v = {c.id: c.verdict for c in evaluate_all(experiment.CLAIMS, bad)}
    assert v["E1-slope"] == v["correctness"] == v["E1-uniform"] == "fails"
    full = base | {"experiments_run": ["E1", "E2", "E3", "E4"], "e2_spearman_tmix_excess": 0.9,
                   "e2_spearman_inv_eta_excess": 0.9, "e2_excess_ratio": [1.1, 1.2],
                   "e2_spearman_tmix_overhead": 0.9, "e2_spearman_Uo_overhead": 1.0,
                   "e3_spearman_lip_omega_excess": -0.2, "e3_spearman_lip_omega_overhead": None,
                   "e3_lip_omega": [1, 2, 3], "e3_spearman_lip_U_overhead": 0.1, "e3_spearman_Uo_overhead": 0.5,
                   "e4_intercept_separation_z": [0.5]}
    v = {c.id: c.verdict for c in evaluate_all(experiment.CLAIMS, full)}
    assert v["E2-connectivity"] == "holds" and v["E3-curvature"] == "fails" and v["E4-schedules"] == "fails"


def _square(x):
    return x * x


def test_process_pool_matches_serial():
    assert map_tasks(_square, list(range(6)), workers=2, backend="process") == [x * x for x in range(6)]
    assert map_tasks(_square, [3], workers=1) == [9]
    with pytest.raises(ValueError, match="backend"):
        map_tasks(_square, [1], backend="nope")
    with pytest.raises(ValueError, match="workers"):
        map_tasks(_square, [1], workers=-1)


def test_e2_e3_e4_machinery(tmp_path):
    cfg = replace(experiment.CONFIGS["quick"], experiments=("E2", "E3", "E4"), deltas=(1e-1, 1e-3),
                  ring_S=3, ring_qs=(1.0, 0.2, 0.05), e2_seeds=1, e2_delta=1e-3,
                  e3_instances=(("random", 2, 2, 2), ("random", 2, 2, 16), ("random", 2, 2, 30)),
                  e3_seeds=1, e4_instances=(("random", 2, 2, 2),), e4_seeds=2)
    ctx = RunContext(out_dir=tmp_path, seed=0, progress=False)
    m = experiment.run(cfg, ctx)
    assert len(m["e2_t_mix"]) == 3 and len(m["e3_lip_omega"]) == 3 and len(m["e4_intercept_separation_z"]) == 1
    results = evaluate_all(experiment.CLAIMS, m)
    v = {c.id: c.verdict for c in results}
    for cid in ("E2-connectivity", "E3-curvature", "E4-schedules"):
        assert v[cid] in VERDICTS and "full config" not in [c for c in results if c.id == cid][0].measured
    json.dumps(m)   # JSON-serialisable, no inf/nan
    assert {"e2_overhead_vs_connectivity.png", "e3_overhead_vs_curvature.png", "e4_schedules.png"} <= \
        set(p.name for p in tmp_path.iterdir())
