"""Sweeps as independent trials: a trial == the in-process CIL run; Ray Tune trials == the task map."""
import dataclasses

import pytest

from neurips26.nota import sweep
from neurips26.nota.backbone import pretrain
from neurips26.nota.cil import TrainSettings, run_cil, task_split
from neurips26.nota.data import synth_glyphs
from neurips26.nota.experiment import CONFIGS


def _trials(space):
    s = CONFIGS["smoke"]
    pre = dataclasses.replace(s.pretrain, per_class=4)
    st = TrainSettings(epochs=1, batch=16)
    return pre, st, sweep.make_trials(space, pre, st, s.data.cil_classes, 6, 4, rank=1)


def test_trial_equals_the_in_process_run_and_grid_order(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    space = sweep.SweepSpace(methods=("nota", "ncm"), seeds=(0, 1), rhos=(0.1,), bonds=(2,), n_tasks=(2,))
    pre, st, trials = _trials(space)
    assert [(t["method"], t["seed"]) for t in trials] == [("nota", 0), ("nota", 1), ("ncm", 0), ("ncm", 1)]
    got = sweep.run_sweep(trials, backend="map", workers=1)
    assert [g["index"] for g in got] == [0, 1, 2, 3]
    bb, _ = pretrain(pre)
    s = CONFIGS["smoke"].data
    train, test = synth_glyphs(s.cil_classes, 6, seed=10), synth_glyphs(s.cil_classes, 4, seed=20)
    want = run_cil(bb, "nota", task_split(s.cil_classes, 2, 1), train, test, st, seed=1, rho=0.1, bond=2,
                   rank=1, eps_rel=1e-3)
    assert got[1]["A_last"] == want["A_last"] and got[1]["trainable_per_task"] == want["trainable_per_task"]
    with pytest.raises(ValueError, match="method"):
        sweep.make_trials(sweep.SweepSpace(methods=("nope",)), pre, st, s.cil_classes, 6, 4)
    with pytest.raises(ValueError, match="backend"):
        sweep.run_sweep(trials, backend="slurm")


@pytest.mark.slow
@pytest.mark.skipif(not sweep.tune_available(), reason="ray[tune] not installed")
def test_ray_tune_trials_equal_the_task_map(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    space = sweep.SweepSpace(methods=("nota", "lora_gn"), seeds=(0,), rhos=(0.1, 0.2), bonds=(2,), n_tasks=(2,))
    _, _, trials = _trials(space)
    mapped = sweep.run_sweep(trials, backend="map", workers=1)
    tuned = sweep.run_sweep(trials, backend="tune", cpus=1, storage=str(tmp_path / "tune"))
    import ray
    ray.shutdown()
    assert tuned == mapped and len(tuned) == 4
