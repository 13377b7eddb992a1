"""Claim logic on synthetic metrics: thresholds, gating on the phenomenon, inconclusive inside the noise."""

import numpy as np
import pytest

from neurips26.harness.paper import SeedMetrics
from neurips26.obsalign import experiment as ex

C = 12


def _seed(aa_audio, na_audio, cell, obs_nt, aa_nt, obs_gain, aa_gain, obs_acc, best_acc, auroc):
    nt = np.zeros((3, C))
    nt[2, 2] = cell
    meth = lambda acc, audio, ntv, gain: {"mean_acc": acc, "unimodal": {"audio": audio},  # noqa: E731
                                          "nt_nonalign": ntv, "gain_align": gain, "nt_cells": nt.tolist(),
                                          "unimodal_mean": acc}
    cell_na = np.zeros((3, C), int)
    cell_na[2, 2] = 1
    return {"methods": {"alwaysalign": meth(best_acc - 0.01, aa_audio, aa_nt, aa_gain),
                        "noalign": meth(best_acc, na_audio, 0.0, 0.0),
                        "local": meth(best_acc - 0.1, na_audio, 0.0, 0.0),
                        "obsalign": meth(obs_acc, na_audio, obs_nt, obs_gain)},
            "cell_nonalign": cell_na.tolist(), "omega_auroc": auroc,
            "alignable": [[1, 0, 1, 0]] * 3, "omega": [[0.9, 0.1, 0.8, 0.2]] * 3}


def _metrics(**kw):
    seeds = [0, 1, 2]
    runs = [_seed(**{k: (v + 0.001 * i if isinstance(v, float) else v) for k, v in kw.items()})
            for i in seeds]
    return SeedMetrics(seeds, runs)


GOOD = dict(aa_audio=0.80, na_audio=0.70, cell=0.3, obs_nt=0.01, aa_nt=0.2, obs_gain=0.09, aa_gain=0.1,
            obs_acc=0.9, best_acc=0.85, auroc=0.9)


def _verdicts(m):
    return {c.id: c.evaluate(m).verdict for c in ex.CLAIMS}


def test_all_hold_when_measurements_support_them():
    v = _verdicts(_metrics(**GOOD))
    assert v["phenomenon"] == v["negative_transfer"] == v["best_overall"] == "holds"
    assert v["omega_auroc"] == "holds"


def test_phenomenon_fails_and_gates_the_rest():
    v = _verdicts(_metrics(**{**GOOD, "cell": 0.05}))
    assert v["phenomenon"] == "fails"
    assert v["negative_transfer"] == v["best_overall"] == v["omega_auroc"] == "inconclusive"


def test_negative_transfer_fails_when_nt_too_large_or_gain_lost():
    assert _verdicts(_metrics(**{**GOOD, "obs_nt": 0.15}))["negative_transfer"] == "fails"
    assert _verdicts(_metrics(**{**GOOD, "obs_gain": 0.02}))["negative_transfer"] == "fails"
    assert _verdicts(_metrics(**{**GOOD, "obs_acc": 0.7}))["best_overall"] == "fails"


def test_negative_transfer_ratio_undefined_when_alwaysalign_has_no_mean_nt():
    m = _metrics(**{**GOOD, "aa_nt": -0.01, "obs_nt": -0.1})     # ObsAlign "below a third" of nothing
    c = next(c for c in ex.CLAIMS if c.id == "negative_transfer").evaluate(m)
    assert c.verdict == "inconclusive" and "it is" in c.measured


def test_one_seed_is_inconclusive():
    m = SeedMetrics([0], [_seed(**GOOD)])
    assert set(_verdicts(m).values()) == {"inconclusive"}


def test_thresholds_are_in_the_statements():
    text = {c.id: c.statement for c in ex.CLAIMS}
    assert "0.75" in text["omega_auroc"] and "70%" in text["negative_transfer"]
    assert set(ex.CONFIGS) >= {"smoke", "quick", "full"}
    q = ex.CONFIGS["quick"]
    got = (q.fed.d, q.fed.rounds, q.fed.epochs, q.fed.lr, q.fed.batch, len(q.seeds))
    assert got == (32, 12, 2, 3e-3, 64, 5)
    assert q.data.label_fraction == ex.QUICK_LABEL_FRACTION == 0.02   # the swept setting (spec: 0.1)
    mid = ex.CONFIGS["mid"]                     # quick but for s2/s3's label fraction
    assert mid.data.label_fraction == ex.MID_LABEL_FRACTION == 0.05 and mid.data.layout == "quick"
    assert (mid.fed, mid.methods, mid.seeds, mid.sweep) == (q.fed, q.methods, q.seeds, q.sweep)
    assert ex._sources(mid.data, 0)[2].label_fraction == 0.05 and ex._sources(q.data, 0)[2].label_fraction == 0.02


def test_sweep_chooses_on_validation_only():
    from neurips26.obsalign.federation import source_accuracy
    from neurips26.obsalign.obsbench import SourceSpec, make_obsbench

    specs = [SourceSpec((0, 1), None, 40), SourceSpec((0, 2), None, 40)]
    bench = make_obsbench(0, specs, unimodal_per_class=2)
    cfg = ex.ExperimentConfig(fed=ex.FedConfig(rounds=2, epochs=1, warmup=1), sweep=((0.1, 5.0), (0.3, 1.0)))
    res, rows = ex._tuned_obsalign(bench, cfg, 0)
    vals = [r["val_mean_acc"] for r in rows]
    assert sum(r["chosen"] for r in rows) == 1
    assert rows[int(np.argmax(vals))]["chosen"] == 1
    assert np.isclose(np.mean(source_accuracy(bench, res.models, res.guidance, split="val")), max(vals))



def test_full_config_wires_the_full_layout_fedprox_and_centralised():
    full = ex.CONFIGS["full"]
    assert full.data.layout == "full" and full.data.n_classes == 24 and full.fed.rounds == 50
    assert {"fedprox", "centralised", "protoimpute", "obsalign"} <= set(full.methods)
    assert set(ex.METHODS) <= set(full.methods)                 # every baseline and ablation
    specs = ex._sources(full.data, 0)
    assert len(specs) == 12 and all(s.class_weights is not None for s in specs)
    assert "fedprox" in ex.BASELINES and ex.CENTRALISED not in ex.BASELINES
    # the whole eta x label-fraction grid (primary point + 8 more), the VLM regime, both semi-real sets
    pts = {(full.data.eta, full.data.label_fraction), *full.grid}
    assert pts == {(e, lf) for e in ex.FULL_ETAS for lf in ex.FULL_LABEL_FRACTIONS}
    assert full.regimes == ("vlm",) and set(full.semireal) == set(ex.SEMIREAL)
    assert len(full.sweep) > len(ex.CONFIGS["quick"].sweep) and full.sweep[0] == ex.ThresholdPoint()
    with pytest.raises(ValueError, match="layout"):
        ex.DataConfig(layout="nope")
    with pytest.raises(ValueError, match="semireal"):
        ex.ExperimentConfig(semireal=("mnist",))
    with pytest.raises(TypeError, match="sweep"):
        ex.ExperimentConfig(sweep=((0.1, 5.0, 3.0),))


def test_threshold_point_sets_the_thresholds_it_names():
    pt = ex.ThresholdPoint(tau_lo=0.2, n0=3.0, tau_hi=0.6, kappa=2.0, exponents=(1.0, 0.5, 2.0, 1.0))
    fed, method = pt.apply(ex.FedConfig(), ex.METHODS["obsalign"])
    assert (fed.tau_lo, fed.tau_hi, fed.kappa) == (0.2, 0.6, 2.0)
    assert method.omega.n0 == 3.0 and method.omega.exponents == (1.0, 0.5, 2.0, 1.0)
    assert method.align == "omega" and ex.METHODS["obsalign"].omega.n0 == 5.0    # original untouched
    assert ex.ExperimentConfig(sweep=((0.2, 3.0),)).sweep == (ex.ThresholdPoint(0.2, 3.0),)


@pytest.mark.slow
def test_full_run_end_to_end_at_toy_size(tmp_path):
    from dataclasses import replace

    from neurips26.harness.run import run_paper
    from neurips26.obsalign.federation import FedConfig

    full = ex.CONFIGS["full"]
    tiny = replace(full, data=replace(full.data, size_scale=0.1, unimodal_per_class=2),
                   fed=FedConfig(rounds=2, epochs=1, warmup=1), seeds=(0,),
                   sweep=(ex.ThresholdPoint(), ex.ThresholdPoint(tau_hi=0.3, exponents=(1.0, 1.0, 2.0, 1.0))),
                   methods=("noalign", "fedprox", "alwaysalign", "obsalign", "centralised"),
                   grid=((0.0, 0.05),), regimes=("vlm",), semireal=("wine",))
    res = run_paper("obsalign", config=tiny, seed=0, out=tmp_path, progress=False)
    m = res["metrics"]
    assert set(m["methods"]) == set(tiny.methods)
    assert np.array(m["omega"]).shape == (3, 24)
    assert [len(r) for r in (m["sweep"],)] == [2] and sum(r["chosen"] for r in m["sweep"]) == 1
    got = [(e["bench"], e["regime"], e.get("eta"), e.get("label_fraction")) for e in m["extra"]]
    assert got == [("obsbench", "encoder", 0.0, 0.05), ("obsbench", "vlm", 0.3, 0.1), ("wine", "encoder", None, None)]
    for e in m["extra"]:
        assert set(e["methods"]) == set(tiny.methods)
    assert m["extra"][2]["omega_auroc"] is None                   # no blindness ground truth on wine
    assert set(m["extra"][2]["methods"]["noalign"]["unimodal"]) == {"m0", "m1"}
