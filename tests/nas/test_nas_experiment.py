"""The reproduction machinery end to end (small configs), the process pool, result.json schema."""

import json
from dataclasses import replace

import numpy as np
import pytest

from neurips26.harness import RunContext, run_paper
from neurips26.harness.paper import VERDICTS, evaluate_all
from neurips26.harness.run import CLAIM_KEYS, RESULT_KEYS
from neurips26.harness.parallel import map_tasks
from neurips26.nas import experiment
from neurips26.nas.instances import build_instance, run_task

TINY = replace(experiment.CONFIGS["quick"], deltas=(1e-1, 1e-4), n_seeds=3,
               e1_instances=(("random", 2, 2, 2), ("random", 2, 2, 16)), workers=1, backend="serial",
               t_estimate_exps=())


def test_quick_config_matches_spec():
    q = experiment.CONFIGS["quick"]
    assert q.experiments == ("E1",) and q.deltas == (1e-1, 1e-3, 1e-6) and q.gamma == 0.5
    assert set(q.e1_algorithms) == {"nas", "uniform", "generative"} and q.K_s == 20
    from neurips26.nas import NavigationAllocator, bound_terms
    from neurips26.nas.instances import HARD_INSTANCES, QUICK_INSTANCES

    assert q.e1_instances == QUICK_INSTANCES + HARD_INSTANCES
    for spec in QUICK_INSTANCES:                      # frozen instances: U_o in [10, 100]
        m = build_instance(spec)
        a = NavigationAllocator(m.S, m.A).solve(m.P, bound_terms(m.P, m.r, m.gamma))
        assert 10 <= a.value <= 100 and m.S in (2, 3) and m.A == 2
    f = experiment.CONFIGS["full"]
    assert set(f.experiments) == {"E1", "E2", "E3", "E4"} and len(f.deltas) == 12
    specs = list(f.e1_instances) + list(f.e3_instances) + list(f.e4_instances) + \
        [("lazy_ring", f.ring_S, q) for q in f.ring_qs]
    for spec in specs:                                # every full-scale instance builds and is identifiable
        build_instance(spec, f.gamma, f.ring_qs).require_identifiable()
    # the harness scale 'mid' (neurips26 run nas --scale mid): the spec's 6-state ring with the
    # navigation-free reference, the hard family in E3/E4
    from neurips26.harness.run import check_scale

    mid = experiment.CONFIGS["mid"]
    assert check_scale("mid", experiment.CONFIGS, "nas") == "mid"
    assert mid.ring_S == 6 and set(mid.e2_algorithms) == {"nas", "generative"} and mid.e2_seeds >= 2
    assert all(spec[0] == "near_tie" for spec in mid.e3_instances)
    for spec in list(mid.e3_instances) + list(mid.e4_instances) + [("lazy_ring", 6, q) for q in mid.ring_qs]:
        build_instance(spec, mid.gamma, mid.ring_qs).require_identifiable()


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
    e2 = [c for c in data["claims"] if c["id"] == "E2-connectivity"][0]
    assert e2["verdict"] == "inconclusive" and "full config" in e2["measured"]
    assert (tmp_path / "e1_tau_vs_log_delta.png").is_file()
    m = res["metrics"]
    assert m["n_runs"] == 2 * 3 * 3 and m["censored_total"] == 0
    assert len(m["e1_nas_slope_over_Uo"]) == 2
    # determinism: same seed, same metrics
    res2 = run_paper("nas", "quick", seed=3, out=tmp_path / "again", progress=False)
    def strip(mm):
        return json.dumps({k: v for k, v in mm.items()}, sort_keys=True, default=str)
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
    full = base | {"experiments_run": ["E1", "E2", "E3", "E4"], "e2_excess_ratio": [1.1, 1.2],
                   "e2_penalty": [1.0, 1.05, 1.1], "e2_penalty_se": [0.01, 0.01, 0.01],
                   "e2_t_mix": [1, 4, 14],
                   "e2_penalty_runs": 10, "e2_penalty_slope_log_tmix": 0.04,
                   "e2_penalty_slope_log_tmix_se": 0.01, "e2_penalty_slope_log_inv_eta": 0.01,
                   "e2_penalty_slope_log_inv_eta_se": 0.004,
                   "e3_spearman_lip_omega_excess_se": 0.05, "e3_runs_per_point": 10,
                   "e3_spearman_lip_omega_excess": -0.2, "e3_spearman_lip_omega_overhead": None,
                   "e3_lip_omega": [1, 2, 3], "e3_spearman_lip_U_overhead": 0.1,
                   "e3_spearman_Uo_overhead": 0.5,
                   "e4_intercept_separation_z": [0.5]}
    v = {c.id: c.verdict for c in evaluate_all(experiment.CLAIMS, full)}
    assert v["E2-connectivity"] == "holds" and v["E3-curvature"] == "fails" and v["E4-schedules"] == "fails"
    # inside the noise (E2: 0.01 < 2 x 0.006; E3: |-0.2| < 2 s.e.) the verdicts are inconclusive
    noisy = full | {"e2_penalty_slope_log_inv_eta_se": 0.006, "e3_spearman_lip_omega_excess_se": 0.2}
    v = {c.id: c.verdict for c in evaluate_all(experiment.CLAIMS, noisy)}
    assert v["E2-connectivity"] == v["E3-curvature"] == "inconclusive"
    # clearly falling on one axis: fails; with one run per ring there is no interval: inconclusive
    low = full | {"e2_penalty_slope_log_tmix": -0.05}
    assert {c.id: c.verdict for c in evaluate_all(experiment.CLAIMS, low)}["E2-connectivity"] == "fails"
    one = full | {"e2_penalty_runs": 1}
    v = {c.id: c.verdict for c in evaluate_all(experiment.CLAIMS, one)}
    assert v["E2-connectivity"] == "inconclusive"


def test_navigation_penalty_and_weighted_slope_known_values():
    nas = [{"tau": [t]} for t in (100.0, 120.0)]          # mean 110, s.e. 10
    gen = [{"tau": [t]} for t in (45.0, 55.0, None)]      # mean 50, s.e. 5 (a censored run left out)
    R, se, n = experiment.navigation_penalty(nas, gen, U_o=10.0, U_gen=5.0, j=0)
    assert R == pytest.approx((110 / 10) / (50 / 5)) and n == 2
    assert se == pytest.approx(R * np.hypot(10 / 110, 5 / 50))
    assert experiment.navigation_penalty(nas[:1], gen, 10.0, 5.0, 0) == (None, None, 1)
    # an exact line: the slope, and the s.e. 1/sqrt(sum w (x - xbar_w)^2)
    x, y, e = [0.0, 1.0, 2.0], [1.0, 1.5, 2.0], [0.1, 0.1, 0.1]
    b, se = experiment.weighted_slope(x, y, e)
    assert b == pytest.approx(0.5) and se == pytest.approx(1 / np.sqrt(100 * 2.0))
    assert experiment.weighted_slope([0.0, 1.0, None], y, e) == (None, None)


def test_theorem_terms_decompose_tau():
    row = {"name": "x", "U_o": 10.0, "U_gen": 8.0, "gamma": 0.5, "S": 2, "A": 2, "delta_min": 0.1,
           "eta": 0.01, "t_mix": 3.0, "kappa": 2.0, "diameter": 2.5, "m": 1,
           "algorithms": {"nas": {"per_delta": [{"delta": 1e-3, "tau_mean": 500.0, "beta_mean": 40.0}]}}}
    t = experiment.theorem_terms(row, "nas", 0)
    assert t["asymptotic"] == pytest.approx(10 * np.log(1e3))
    assert t["threshold_model_size"] == pytest.approx(10 * (40 - np.log(1e3)))
    assert t["tracking_residual"] == pytest.approx(100.0)
    assert t["asymptotic"] + t["threshold_model_size"] + t["tracking_residual"] == pytest.approx(500)
    assert t["dominant"] == "threshold_model_size" and t["inv_eta"] == pytest.approx(100)
    assert t["horizon"] == 2 and t["Uo_over_Ugen"] == pytest.approx(1.25) and t["Uo_over_T"] is None


def test_process_pool_matches_serial():
    """The runs through the harness task map: a process pool gives the same taus as a serial loop."""
    base = dict(spec=("random", 2, 2, 14), gamma=0.5, ring_qs=(1.0,), alg="nas", deltas=(1e-1,), K_s=20,
                t_max=100_000)
    tasks = [base | dict(seed=s) for s in range(3)]
    serial = map_tasks(run_task, tasks, backend="serial", progress=False)
    pooled = map_tasks(run_task, tasks, backend="process", workers=2, progress=False)
    assert [r["tau"] for r in serial] == [r["tau"] for r in pooled]
    assert all(r["tau"][0] is not None and r["correct"][0] for r in serial)


def test_bootstrap_spearman_is_noise_aware():
    """A clear monotone trend has a small s.e.; points inside each other's noise have a large one."""
    rng = np.random.default_rng(0)
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    clear = [list(10 * k + rng.normal(0, 0.1, 20)) for k in range(5)]
    rho, se, n = experiment.bootstrap_spearman(x, clear, seed=1)
    assert rho == pytest.approx(1.0) and se < 0.05 and n == 20
    noisy = [list(1 + 0.01 * k + rng.normal(0, 1.0, 10)) for k in range(5)]
    rho, se, n = experiment.bootstrap_spearman(x, noisy, seed=1)
    assert se > 0.2 and n == 10
    assert experiment.bootstrap_spearman(x[:2], clear[:2], seed=1) == (None, None, 0)


def test_e2_e3_e4_machinery(tmp_path):
    cfg = replace(experiment.CONFIGS["quick"], experiments=("E2", "E3", "E4"), deltas=(1e-1, 1e-3),
                  ring_S=2, ring_qs=(1.0, 0.2, 0.05), e2_seeds=2, e2_delta=1e-3, e2_K_s=50,
                  e3_instances=(("random", 2, 2, 2), ("random", 2, 2, 16), ("random", 2, 2, 30)),
                  e3_seeds=1, e4_instances=(("random", 2, 2, 2),), e4_seeds=2, workers=1, backend="serial")
    ctx = RunContext(out_dir=tmp_path, seed=0, progress=False)
    m = experiment.run(cfg, ctx)
    assert len(m["e2_t_mix"]) == 3 and len(m["e3_lip_omega"]) == 3
    assert len(m["e2_penalty"]) == 3 and all(0.5 < r < 2 for r in m["e2_penalty"])
    assert m["e2_penalty_slope_log_tmix_se"] > 0
    assert {r["exp"] for r in m["terms"]} == {"E2"} and len(m["terms"]) == 3
    assert len(m["e4_intercept_separation_z"]) == 1
    results = evaluate_all(experiment.CLAIMS, m)
    v = {c.id: c.verdict for c in results}
    for cid in ("E2-connectivity", "E3-curvature", "E4-schedules"):
        assert v[cid] in VERDICTS and "full config" not in [c for c in results if c.id == cid][0].measured
    json.dumps(m)   # JSON-serialisable, no inf/nan
    assert {"e2_overhead_vs_connectivity.png", "e3_overhead_vs_curvature.png", "e4_schedules.png"} <= \
        set(p.name for p in tmp_path.iterdir())


def test_build_instance_specs():
    from neurips26.nas.instances import QUICK_INSTANCES, task_seed

    assert build_instance(QUICK_INSTANCES[0]).S == 2 and build_instance(("riverswim", 3)).S == 3
    assert build_instance(("double_chain", 1)).S == 3
    hard = build_instance(("near_tie", 2, 2, 4, 0.7))
    assert hard.gamma == 0.7 and np.all(hard.r == hard.r[:, :1])      # state-only rewards, own gamma
    ring = build_instance(("lazy_ring", 4, 0.2), ring_qs=(1.0, 0.2))
    assert ring.S == 4 and np.allclose(ring.P.sum(axis=2), 1)
    with pytest.raises(ValueError, match="instance kind"):
        build_instance(("nope", 2))
    with pytest.raises(TypeError, match="spec"):
        build_instance("random")
    assert task_seed(0, 1, 2) == task_seed(0, 1, 2) != task_seed(0, 1, 3)
