"""Claim logic on synthetic metrics, the smoke run, the README's code blocks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from neurips26.gnn_margin import experiment as E
from neurips26.harness.paper import FAILS, HOLDS, INCONCLUSIVE, SeedMetrics
from neurips26.harness.run import run_paper

README = Path(E.__file__).with_name("README.md")


def _seeds(values_by_seed):
    return SeedMetrics(list(range(len(values_by_seed))), values_by_seed)


def _m(
    rho=0.5,
    p=0.01,
    d_remp=0.2,
    d_alpha=0.1,
    d_clean=0.0,
    d_node=0.1,
    d_acc=0.0,
    x5=0.5,
    viol=0,
    const_gamma=0.0,
):
    return {
        "x1": {"const_max_gamma": const_gamma, "rwse_min_gamma_csl": 1e-3},
        "x2": {
            "codebooks": {
                "4": {
                    "models": {"wl/untrained": {"gamma": [0.0, 1.0]}, "gin/untrained": {"gamma": [0.0, 2.0]}}
                }
            },
            "summary": {
                "violations": viol,
                "binomial_bound_violations": 0,
                "r_star_fraction_positive": 0.0,
                "spearman": {"rho": rho, "p": p, "rho_positive_margin": rho, "rho_alpha": rho},
            },
        },
        "x3": {"objectives": {"ce": {"violations": 0}}},
        "x4": {
            "graph": {"mean_r_emp": d_remp, "alpha": d_alpha, "clean_identification": d_clean},
            "node": {"mean_r_emp": d_node, "clean_accuracy": d_acc},
            "graph_vs_untrained_r_star_positive": 0.0,
        },
        "x5": {"rho": x5},
    }


def _verdict(cid, metrics):
    claim = next(c for c in E.CLAIMS if c.id == cid)
    return claim.evaluate(metrics).verdict


def test_spearman_claim_needs_seeds_threshold_and_p():
    assert _verdict("margin_predicts", _m()) == INCONCLUSIVE  # one seed: no standard error
    assert _verdict("margin_predicts", _seeds([_m(rho=r) for r in (0.6, 0.62, 0.58)])) == HOLDS
    assert _verdict("margin_predicts", _seeds([_m(rho=r) for r in (0.1, 0.12, 0.08)])) == FAILS
    assert _verdict("margin_predicts", _seeds([_m(rho=r) for r in (0.2, 0.5, 0.8)])) == INCONCLUSIVE
    assert _verdict("margin_predicts", _seeds([_m(rho=0.6, p=0.2) for _ in range(3)])) == INCONCLUSIVE


def test_training_claims_paired_over_seeds():
    good = _seeds([_m(d_remp=x, d_alpha=x) for x in (0.2, 0.25, 0.22)])
    assert _verdict("training_improves_graph", good) == HOLDS
    worse_acc = _seeds([_m(d_clean=-0.2 + e) for e in (0.0, 0.01, -0.01)])
    assert _verdict("training_improves_graph", worse_acc) == FAILS
    noisy = _seeds([_m(d_remp=x) for x in (-0.3, 0.4, 0.1)])
    assert _verdict("training_improves_graph", noisy) == INCONCLUSIVE
    assert _verdict("training_improves_node", _seeds([_m(d_node=-x) for x in (0.2, 0.3, 0.25)])) == FAILS


def test_deterministic_claims():
    assert _verdict("isomorphism_limit", _m()) == HOLDS
    assert _verdict("isomorphism_limit", _m(const_gamma=1e-3)) == FAILS
    assert _verdict("certificates_sound", _m()) == HOLDS
    assert _verdict("certificates_sound", _m(viol=1)) == FAILS
    assert _verdict("architecture_ranking", _seeds([_m(x5=x) for x in (0.5, 0.6, 0.55)])) == HOLDS
    m = _m()
    del m["x5"]
    assert _verdict("architecture_ranking", m) == INCONCLUSIVE  # a missing metric


def test_smoke_run_metrics(tmp_path):
    res = run_paper("gnn_margin", "smoke", seed=0, out=tmp_path, progress=False)
    m = res["metrics"]
    assert m["x1"]["const_max_gamma"] <= E.ZERO_TOL
    book = m["x2"]["codebooks"]["5"]
    assert book["size"] == 5 and book["r_comb"] == 2
    row = book["models"]["gin/untrained"]
    assert len(row["gamma"]) == 5 and row["violations"] == 0
    assert (tmp_path / "x2_margin_vs_radius.png").exists() and (
        tmp_path / "x3_certified_accuracy.png"
    ).exists()


def _blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


@pytest.mark.parametrize("k", range(2))
def test_readme_code_blocks_run(k):
    blocks = _blocks()
    assert len(blocks) == 2
    exec(compile(blocks[k], f"README block {k}", "exec"), {})


@pytest.mark.slow
def test_x3_extra_sbm_graph_is_sound(tmp_path):
    from neurips26.harness.run import RunContext

    cfg = E.X3Config(
        objectives=("ce",),
        epochs=2,
        width=8,
        cert_r_max=1,
        greedy_budget=1,
        n0=5,
        n=10,
        extra_graphs=("sbm",),
    )
    out = E.run_x3(cfg, 0, RunContext(out_dir=tmp_path, progress=False))
    sbm = out["extra"]["sbm"]["objectives"]["ce"]
    assert out["extra"]["sbm"]["n_test"] == 120 - 3 * 4 and sbm["violations"] == 0
    assert len(sbm["empirical_radius"]) == 108
