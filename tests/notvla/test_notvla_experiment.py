"""Acceptance check 8 (slow: 3 seeds of the quick scale, means over seeds), and the smoke metrics' shape."""

import dataclasses
import json

import numpy as np
import pytest

from neurips26.harness.run import run_paper


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="ID success (needs >= 0.4) measured 0/30 on each of seeds 0-2 at 508d962 "
                   "(retention 0.32 vs 0.19 and calls 17.3x held); at 248633f (400 demos, 600 steps, proprio, "
                   "anchor tokens x5) quick seed 0 ID 0/10, the first anchor pixel a median 18 grid units off "
                   "(a grasp needs ~2): the quick backbone cannot point precisely; at 127777f (the issue's 40 demos "
                   "/ 150 steps with those levers) quick seed 0 ID 0/10; at 62a0d38 the same, and the quick backbone's "
                   "robot-camera pointer binds the wrong object (75% of answers nearer another object). Remove the "
                   "mark when it passes.")
def test_quick_three_seeds(tmp_path):
    from neurips26.notvla import experiment as E

    q = E.CONFIGS["quick"]
    cfg = dataclasses.replace(q, eval=dataclasses.replace(q.eval, episodes=30))
    res = run_paper("notvla", config=cfg, seeds=(0, 1, 2), out=tmp_path, progress=False)
    per = [r["metrics"] for r in res["per_seed"]]
    ret = [m["learned"]["retention"] for m in per]
    assert np.nanmean([r["notvla"] for r in ret]) > np.nanmean([r["dense_chunk"] for r in ret])
    succ = [m["learned"]["success"]["notvla"]["id"] for m in per]
    assert np.mean([s["k"] / s["n"] for s in succ]) >= 0.4
    calls = [m["efficiency"]["calls_ratio"] for m in per]
    assert np.mean(calls) >= 10


@pytest.mark.slow
def test_smoke_metrics_have_every_condition(tmp_path):
    res = run_paper("notvla", "smoke", seed=0, out=tmp_path, progress=False)
    m = res["metrics"]
    assert m["interface"]["id"]["n"] > 0 and m["efficiency"]["calls_ratio"] > 1
    for method, conds in m["learned"]["success"].items():
        assert set(conds) == {"id", "ood", "camera_shift"}, method
    assert m["learned"]["steps_used"]["finetune"] == 4


@pytest.mark.slow  # ~50 s on the loaded 2-core box (three learned runs, a process pool)
def test_methods_side_by_side_equal_serial(tmp_path, monkeypatch):
    """Each method is one self-contained task (reseeded, its own synonym generator): run in 2 processes, or
    in another order, every method's rollouts and retention are those of the serial run."""
    from neurips26.notvla import experiment as E
    from neurips26.notvla.backbone import BackboneConfig
    from neurips26.notvla.evaluation import learned_policies

    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    s = E.CONFIGS["smoke"]
    pre = dataclasses.replace(s.pretrain, steps=4, scenes=16)
    ft = dataclasses.replace(s.finetune, steps=2, demos=2, methods=("notvla", "dense_bin"))
    ev = dataclasses.replace(s.eval, episodes=2, retention_questions=8, max_steps=12, max_calls=2)
    b = BackboneConfig(pre.d_model, pre.layers, 4, 64)
    serial = learned_policies(b, pre, ft, ev)
    swapped = learned_policies(b, pre, dataclasses.replace(ft, methods=("dense_bin", "notvla")), ev)
    pooled = learned_policies(b, pre, ft, dataclasses.replace(ev, workers=2), backend="process")
    def same(a, b):  # json: NaN (a probe or a median with no data) compares equal to NaN
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)

    for other in (swapped, pooled):
        assert other["rollouts"] == serial["rollouts"]
        assert same(other["retention_detail"], serial["retention_detail"])
        assert same(other["grounding"], serial["grounding"])
    assert set(pooled["seconds"]) >= {"finetune_notvla", "rollout_dense_bin"}
