"""Claim logic on synthetic metrics, determinism (check 8) and the 3-seed statistical check 9 (slow)."""

import math

import numpy as np
import pytest
import torch

from neurips26.harness.paper import SeedMetrics
from neurips26.nexus import SourceSampler, lm_loss, tiny_llama
from neurips26.nexus.data import Source
from neurips26.nexus.methods import METHODS, build


def _metrics(d_mix=0.0, d_gs=0.05, d_pair=-0.1, d_dl=-0.02, d_ood=-0.02, d_arith=0.05, se=0.005, n=8):
    unit = lambda m: {"mean": m, "se": se, "n": n}  # noqa: E731
    base = {"mix_val_loss": 2.0, "gs": 0.1, "c_pair": 1.0, "dl": 0.1, "ood_loss": 3.0, "ood_arith": 0.1}
    nexus = {"mix_val_loss": 2.0 + d_mix, "gs": 0.1 + d_gs, "c_pair": 1.0 + d_pair, "dl": 0.1 + d_dl,
             "ood_loss": 3.0 + d_ood, "ood_arith": 0.1 + d_arith}
    return {"methods": {"adamw": base, "nexus": nexus},
            "compare": {"nexus": {"mix": unit(d_mix), "gs": unit(d_gs), "c_pair": unit(d_pair),
                                  "dl": unit(d_dl), "ood": unit(d_ood), "arith": unit(d_arith),
                                  "ood_matched": dict(unit(d_ood), step=100.0)}}}


def _verdicts(m):
    from neurips26.nexus.experiment import CLAIMS

    return {c.id: c.evaluate(m).verdict for c in CLAIMS}


def test_single_seed_verdicts_follow_the_units():
    assert set(_verdicts(_metrics()).values()) == {"holds"}
    bad = _verdicts(_metrics(d_mix=0.1, d_gs=-0.05, d_pair=0.1, d_ood=0.05, d_arith=-0.05))
    assert set(bad.values()) == {"fails"}
    noisy = _verdicts(_metrics(d_mix=0.025, d_gs=0.005, d_pair=-0.005, d_dl=-0.001, d_ood=-0.001,
                               d_arith=0.001))
    assert set(noisy.values()) == {"inconclusive"}  # inside 2 s.e. (or inside the loss band + noise)


def test_multi_seed_verdicts_use_one_seed_std():
    from neurips26.nexus.experiment import difference

    seeds = [_metrics(d_gs=g) for g in (0.05, 0.06, 0.04)]
    sm = SeedMetrics([0, 1, 2], seeds)
    mean, se, n, k, over = difference(sm, "gs")
    assert over == "seeds" and n == 3 and mean == pytest.approx(0.05) and k == pytest.approx(math.sqrt(3))
    assert _verdicts(sm)["higher_gs"] == "holds"
    flip = SeedMetrics([0, 1, 2], [_metrics(d_gs=g) for g in (0.05, -0.04, 0.01)])
    assert _verdicts(flip)["higher_gs"] == "inconclusive"


def _toy_sources():
    rng = np.random.default_rng(0)
    return [Source(n, rng.integers(0, 20, 2000), rng.integers(0, 20, 200)) for n in ("a", "b", "c")]


def _train(method, seed, steps=2):
    torch.manual_seed(seed)
    model = tiny_llama(20, hidden=16, layers=1, heads=2, mlp=32, ctx=8)
    opt = build(method, model, 3e-3, seed=seed)
    smp = SourceSampler(_toy_sources(), k=3, micro_batch=2, ctx=8, seed=seed, mixed=method == "nexus_mixed")
    return [opt.step(smp.next_step(), lambda b: lm_loss(model, b)) for _ in range(steps)]


@pytest.mark.parametrize("method", METHODS)
def test_check8_every_method_is_deterministic_and_trains(method):
    a, b = _train(method, 0), _train(method, 0)
    assert a == b
    assert all(math.isfinite(x) for x in a)
    assert _train(method, 1) != a


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="spec check 9's loss criterion (|mixture val loss gap| < 0.05) fails at "
                   "quick scale: Nexus ends 0.090 / 0.088 lower than AdamW on seeds 0 / 1 (measured 2026-12-01, "
                   "git 9ac21b0); its GS criterion holds on 3 of 3 seeds. A finding, not a bug: see README")
def test_check9_three_seeds_at_quick():
    from neurips26.harness.run import run_paper

    res = run_paper("nexus", "quick", seeds=(0, 1, 2), out="/tmp/nexus-check9", progress=False)
    runs = [r["metrics"]["methods"] for r in res["per_seed"]]
    assert all(abs(m["nexus"]["mix_val_loss"] - m["adamw"]["mix_val_loss"]) < 0.05 for m in runs)
    assert sum(m["nexus"]["gs"] > m["adamw"]["gs"] for m in runs) >= 2


def test_smoke_run_with_sweep_and_raw_variant(tmp_path):
    import dataclasses

    from neurips26.harness.run import run_paper
    from neurips26.nexus.experiment import CONFIGS

    smoke = CONFIGS["smoke"]
    cfg = dataclasses.replace(smoke, train=dataclasses.replace(smoke.train, steps=3,
                                                               methods=("adamw", "nexus", "nexus_raw")),
                              eval=dataclasses.replace(smoke.eval, sweep=(0.02, 0.5)))
    res = run_paper("nexus", config=cfg, seed=0, out=tmp_path, progress=False)
    m = res["metrics"]
    assert set(m["methods"]) == {"adamw", "nexus", "nexus_raw"}
    assert set(m["compare"]) == {"nexus", "nexus_raw"}
    assert set(m["sweep"]) == {"r=0.02", "r=0.5"}
    assert m["data"]["ood_text"] in ("fortunes", "folio")
    assert {"loss_and_gs.png", "closeness.png", "r_sweep.png"} <= {p for p in res["provenance"]["plots"]}
    for name in m["methods"]:
        assert math.isfinite(m["methods"][name]["mix_val_loss"]) and -1 <= m["methods"][name]["gs"] <= 1


def test_matched_ood_reads_the_crossing():
    from neurips26.nexus.experiment import matched_ood

    base = {"mix_val_loss": 2.0, "ood_loss": 3.0}
    other = {"trajectory": {"step": [50, 100, 150], "mix": [2.4, 2.1, 1.9], "ood": [3.5, 3.2, 3.0]}}
    m = matched_ood(base, other, 0.01, 8)
    assert m["step"] == pytest.approx(125) and m["mean"] == pytest.approx(0.1)
    never = matched_ood(base, {"trajectory": {"step": [50], "mix": [2.5], "ood": [3.1]}}, 0.01, 8)
    assert math.isnan(never["mean"])
    # unmatched final losses: the ood claim judges the matched-loss figure
    from neurips26.nexus.experiment import check_ood_loss

    metrics = _metrics(d_mix=-0.1, d_ood=-0.05)
    metrics["compare"]["nexus"]["ood_matched"] = {"mean": 0.1, "se": 0.01, "n": 8, "step": 125.0}
    v, text = check_ood_loss(metrics)
    assert v == "fails" and "matched" in text
