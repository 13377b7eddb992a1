"""Acceptance check 9 and the claim logic: verdicts follow from the logged numbers."""

from __future__ import annotations

import copy

import pytest

from neurips26.harness import FAILS, HOLDS, INCONCLUSIVE, RunContext
from neurips26.harness.paper import judge, mean_se
from neurips26.gfm_audit import experiment as E


def _mech(effects: dict, stds: dict, seeded: dict | None = None) -> dict:
    models = {}
    for name, eff in effects.items():
        models[name] = {
            "pinned_std": stds[name],
            "pinned_seed_dependent": (seeded or {}).get(name, True),
            "effects": {
                k: {"mean": v[0], "se": v[1], "n": 3, "seed_mean": 50 + v[0]} for k, v in eff.items()
            },
        }
    reps = [
        {"seed": 0, "seed_tau": 1.0, "mean_knob_tau": 0.5},
        {"seed": 1, "seed_tau": 0.9, "mean_knob_tau": 0.75},
        {"seed": 2, "seed_tau": 0.9, "mean_knob_tau": 0.5},
    ]
    return {
        "mechanism": {
            "models": models,
            "knob_tau": {"a": 1.0, "b": 0.5},
            "seed_pair_tau": [1.0, 1.0, 0.8],
            "per_replicate": reps,
        }
    }


def test_hidden_knob_claim_logic():
    m = _mech(
        {"rcf": {"max_pool": (-20.0, 1.0)}, "pca": {"frac": (-40.0, 1.0)}},
        {"rcf": 0.5, "pca": 0.0},
        {"rcf": True, "pca": False},
    )
    v, txt = E._check_hidden_knob(m)
    assert v == HOLDS and "rcf" in txt  # seed-dependent model preferred over pca
    m = _mech({"rcf": {"max_pool": (-20.0, 1.0)}}, {"rcf": 3.0})
    assert E._check_hidden_knob(m)[0] == FAILS  # pinned std too large
    m = _mech({"rcf": {"max_pool": (-11.0, 2.0)}}, {"rcf": 1.0})
    assert E._check_hidden_knob(m)[0] == INCONCLUSIVE  # inside 2 s.e. of the threshold
    m = _mech({"rcf": {"max_pool": (-2.0, 0.1)}}, {"rcf": 1.0})
    assert E._check_hidden_knob(m)[0] == FAILS


def test_ranking_claim_logic():
    m = _mech({"rcf": {"a": (0, 1)}}, {"rcf": 1.0})
    mean, se, n = mean_se([0.5, 0.15, 0.4])  # per replicate: seed tau - mean knob tau
    assert n == 3 and se > 0 and E._check_ranking(m)[0] == judge(mean, se, n, 0.0, E.K_SE) == HOLDS
    assert "1/2 knobs reorder" in E._check_ranking(m)[1]
    m2 = copy.deepcopy(m)
    m2["mechanism"]["knob_tau"] = {"a": 1.0}
    assert E._check_ranking(m2)[0] == FAILS  # no knob changes the seed-mean ranking
    m3 = copy.deepcopy(m)
    for r, d in zip(m3["mechanism"]["per_replicate"], (0.3, -0.4, 0.1)):
        r["mean_knob_tau"] = r["seed_tau"] - d
    assert E._check_ranking(m3)[0] == INCONCLUSIVE  # the contrast inside the noise
    m4 = copy.deepcopy(m)
    m4["mechanism"]["per_replicate"] = m4["mechanism"]["per_replicate"][:1]
    assert E._check_ranking(m4)[0] == INCONCLUSIVE  # one replicate: no standard error


def test_mechanism_tau_bookkeeping():
    """_mechanism: paired per-replicate effects and taus from the rows, in the cells' order."""
    cfg = E.CONFIGS["smoke"]
    cells = E._mechanism_cells(cfg)
    models, knobs, seeds = cfg.mechanism.models, cfg.mechanism.knobs, cfg.mechanism.seeds
    assert len(cells) == len(models) * len(seeds) * (2 + len(knobs))
    # replicate 0 is the shipped split, replicate 1 a resampled one; pinned_fixed_split always shipped
    spec = {(mn, k, s): c.task for mn, k, s, c in cells}
    assert spec[("rcf", "pinned", 0)] == spec[("rcf", "pinned_fixed_split", 1)]
    assert spec[("rcf", "pinned", 1)].split == "random:multispectral/1"
    # fake values: model a beats b on pinned everywhere; knob 1 swaps them on replicate 1 only
    val = {"rcf": 80.0, "raw_pca": 60.0}

    def v(mn, k, s):
        if k == knobs[1] and s == 1:
            return 100.0 - val[mn]
        return val[mn] + (5.0 if k == knobs[0] else 0.0) + s

    rows = [{"value": v(mn, k, s), "seed_touched": ["model_init"] if mn == "rcf" else []} for mn, k, s, _ in cells]
    mech = E._mechanism(cfg, cells, rows)
    assert mech["models"]["rcf"]["effects"][knobs[0]]["mean"] == pytest.approx(5.0)
    assert mech["models"]["rcf"]["pinned_std"] == pytest.approx(0.7071067811865476)
    rep = {r["seed"]: r for r in mech["per_replicate"]}
    assert rep[0]["n_knobs_reordering"] == 0 and rep[1]["n_knobs_reordering"] == 1
    assert rep[1]["knob_tau"][knobs[1]] == pytest.approx(-1.0) and rep[1]["seed_tau"] == pytest.approx(1.0)
    assert mech["seed_pair_tau"] == [pytest.approx(1.0)]


def test_smoke_run_mechanism_and_audit(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GFM_AUDIT_DATA", raising=False)
    m = E.run(E.CONFIGS["smoke"], RunContext(out_dir=tmp_path, progress=False, scale="smoke"))
    assert m["audit"]["published"]["n_groups"] == 7 and m["audit"]["synthetic"]["all_exact"]
    mech = m["mechanism"]
    assert set(mech["models"]) == {"rcf", "raw_pca"} and mech["n_seeds"] == 2
    # the verdict follows from the logged numbers
    verdicts = {c.id: c.evaluate(m) for c in E.CLAIMS}
    assert (
        verdicts["paper_counts"].verdict == INCONCLUSIVE
        and "GFM_AUDIT_DATA" in verdicts["paper_counts"].measured
    )
    assert verdicts["copied_vs_rerun"].verdict == INCONCLUSIVE
    assert verdicts["published_spreads"].verdict == HOLDS
    rcf = mech["models"]["rcf"]
    assert rcf["pinned_seed_dependent"] and not mech["models"]["raw_pca"]["pinned_seed_dependent"]
    e = rcf["effects"]["max_pool"]
    assert e["mean"] == pytest.approx(sum(rcf["knob_values"]["max_pool"]) / 2 - sum(rcf["pinned_values"]) / 2)
    rows = (tmp_path / "harness_rows.jsonl").read_text().splitlines()
    st = m["runner"]
    assert len(rows) == st["cells"] - st["skipped"] - st["duplicates"] == st["computed"] + st["reused"]
    # a second run over the same folder resumes: every cell skipped, the same numbers
    m2 = E.run(E.CONFIGS["smoke"], RunContext(out_dir=tmp_path, progress=False, scale="smoke"))
    assert m2["runner"]["computed"] == 0 and m2["mechanism"]["models"] == mech["models"]


def test_aggregate_iqm_of_normalised_scores():
    grid = {
        "d1": {"a": {"linear": {"values": [10.0, 20.0]}}, "b": {"linear": {"values": [30.0, 30.0]}}},
        "d2": {"a": {"linear": {"values": [50.0, 50.0]}}, "b": {"linear": {"values": [60.0, 70.0]}}},
        "seconds": 1.0,
    }
    agg = E._aggregate(grid)
    # d1 normalised: a -> 0, 0.5; b -> 1, 1.  d2: a -> 0, 0; b -> 0.5, 1
    assert agg["a"]["linear"]["iqm"] == pytest.approx(0.0) and agg["b"]["linear"]["iqm"] == pytest.approx(1.0)
