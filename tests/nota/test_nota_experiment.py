"""Claim logic on synthetic metrics, the task split, and (slow) the 3-seed quick run (check 11)."""
import pytest

from neurips26.harness.paper import FAILS, HOLDS, INCONCLUSIVE, SeedMetrics
from neurips26.nota import experiment as ex


def fake(a_last: dict, drift_final=1.0, growth=1.0, t="6"):
    res = {}
    for m, v in a_last.items():
        res[m] = {"A_last": v, "drift": {"max_final": drift_final, "from_first": [0.0, 1.0, 1.0 + growth]}}
    return {"T_main": t, "by_T": {t: res}}


BASE = {"lora_plain": 0.4, "sd_lora": 0.4, "lora_gn": 0.4, "mpo_plain": 0.4, "mpo_tw": 0.4, "nota": 0.4,
        "hnota": 0.4, "seq_lora": 0.1, "ncm": 0.5}


def seeds(deltas, **kw):
    runs = [fake({**BASE, "nota": 0.4 + d}, **kw) for d in deltas]
    return SeedMetrics(list(range(len(runs))), runs)


def test_ordering_verdicts_follow_the_paired_noise():
    check = ex.ordering("nota", "mpo_plain")
    assert check(seeds([0.05, 0.06, 0.04]))[0] == HOLDS
    assert check(seeds([-0.05, -0.06, -0.04]))[0] == FAILS
    assert check(seeds([0.05, -0.06, 0.02]))[0] == INCONCLUSIVE
    assert check(seeds([0.05]))[0] == INCONCLUSIVE          # one seed: no standard error
    assert "3/3 seeds" in check(seeds([0.05, 0.06, 0.04]))[1]


def test_drift_and_floor_checks():
    assert ex.check_drift_bound(seeds([0.0, 0.0], drift_final=1.9))[0] == HOLDS
    assert ex.check_drift_bound(seeds([0.0, 0.0], drift_final=2.1))[0] == FAILS
    grow = SeedMetrics([0, 1], [fake(BASE, growth=1.0), fake(BASE, growth=1.2)])
    assert ex.check_drift_grows(grow)[0] == HOLDS
    shrink = SeedMetrics([0, 1], [fake(BASE, growth=-1.0), fake(BASE, growth=-1.2)])
    assert ex.check_drift_grows(shrink)[0] == FAILS
    assert ex.check_floors(fake(BASE))[0] == HOLDS
    assert ex.check_floors(fake({**BASE, "ncm": 0.3}))[0] == FAILS
    assert ex.check_gap_grows(fake(BASE))[0] == INCONCLUSIVE


def test_task_split():
    assert ex.task_split(range(24, 48), 6, 0)[0] == [24, 25, 26, 27]
    s = ex.task_split(range(24, 48), 6, 3)
    assert sorted(c for t in s for c in t) == list(range(24, 48)) and s[0] != [24, 25, 26, 27]
    with pytest.raises(ValueError, match="equal tasks"):
        ex.task_split(range(10), 3, 0)


@pytest.mark.slow
def test_quick_three_seeds_produces_verdicts(tmp_path):
    from neurips26.harness.run import run_paper
    r = run_paper("nota", "quick", seeds=(0, 1, 2), out=tmp_path, progress=False)
    ids = {c["id"]: c["verdict"] for c in r["claims"]}
    for cid in ("global_vs_plain_lora", "global_vs_plain_mpo", "global_vs_taskwise_lora",
                "global_vs_taskwise_mpo", "hnota_vs_nota"):
        assert ids[cid] in (HOLDS, FAILS, INCONCLUSIVE)
    assert ids["pipeline_floors"] == HOLDS
    seq = r["metrics"]["by_T"]["6"]["seq_lora"]["A_last"] if "metrics" in r else None
    assert seq is None or seq > 1 / 24


@pytest.mark.slow
def test_tiny_full_shaped_run_has_every_experiment(tmp_path, monkeypatch):
    """Two sequence lengths (the T sweep), the digits cross-domain run and the joint bound, at toy size."""
    import dataclasses
    from neurips26.harness.run import run_paper
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path / "cache"))
    s = ex.CONFIGS["smoke"]
    cfg = dataclasses.replace(
        s, pretrain=dataclasses.replace(s.pretrain, per_class=2),
        data=dataclasses.replace(s.data, n_tasks=(1, 2), cross_domain=True),
        cil=dataclasses.replace(s.cil, methods=("nota", "mpo_tw", "lora_gn", "sd_lora", "ncm", "joint",
                                                "inflora", "l2p", "coda", "ease"), sweep_rho=(0.1,),
                                sweep_bond=(1,), sweep_n=(1, 2), select_rho=(0.05, 0.2)),
        seeds=(0, 1))
    r = run_paper("nota", config=cfg, out=tmp_path / "run", progress=False)
    ids = {c["id"]: c for c in r["claims"]}
    assert "T=2" in ids["gap_grows_with_T"]["measured"]        # computed, not "one sequence length"
    m = r["metrics"]
    assert set(m["digits"]) == {"nota", "mpo_tw", "lora_gn", "sd_lora", "ncm", "joint", "inflora", "l2p",
                                "coda", "ease"}
    assert set(m["sweep"]) == {"rho", "bond", "n", "params"} and "0.1" in m["sweep"]["rho"]
    assert m["sweep"]["params"]["n"] == {"1": 2 * 16 * 16, "2": 2 * (4 * 4 * 2 + 2 * 4 * 4)}   # q, v; bond 2
    assert set(m["rho_selection"]) == {"nota", "lora_gn"}               # one selection per global method
    assert all(v["rho"] in (0.05, 0.2) for v in m["rho_selection"].values())
    assert len(m["by_T"]["2"]["ease"]["A_t"]) == 2 and "losses" not in m["by_T"]["2"]["coda"]
    assert len(m["digits"]["nota"]["A_t"]) == 5 and len(m["by_T"]["2"]["joint"]["A_t"]) == 1
