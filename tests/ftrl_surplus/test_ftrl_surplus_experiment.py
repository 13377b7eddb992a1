"""The README's code blocks run; the claim checks on synthetic metrics; the smoke run's structure."""

import re
from pathlib import Path

import pytest

from neurips26.ftrl_surplus import experiment as E
from neurips26.harness.paper import SeedMetrics

README = Path(E.__file__).with_name("README.md")


@pytest.mark.parametrize("i", range(len(re.findall(r"```python\n", README.read_text()))))
def test_readme_code_blocks_run(i):
    block = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[i]
    exec(compile(block, f"README block {i}", "exec"), {})


def _metrics(**over):
    m = {"e1": {"zero_max_per_round": 1e-17, "inside_fraction": 1.0, "grows_with_n_sub": True,
                "median_S_over_limit": {"entropic": 1.0}, "slope_min": 0.9, "slope_max": 1.0},
         "e2": {"dichotomy_holds": True, "reg": {"euclidean": [{"predicted": 13, "eliminated_at": 13}]}},
         "e3": {"fraction_min": 1.0, "min_ratio": 1.1, "pure_fraction": 0.0},
         "e4": {"slope": 0.5, "rows": [{"T": 10, "min_S": 1.0, "predicted": 1.0}]},
         "e5": {"ratio_small_noise": 0.95},
         "e6": {"rows": {"a": {"Sus": 3.0, "predicted": 3.0}, "b": {"Sus": 1.0, "predicted": 1.0}}}}
    for path, v in over.items():
        node = m
        *head, last = path.split(".")
        for p in head:
            node = node[p]
        node[last] = v
    return m


def _claim(cid):
    return next(c for c in E.CLAIMS if c.id == cid)


def test_claims_hold_on_good_metrics_over_seeds():
    seeds = SeedMetrics([0, 1, 2], [_metrics(**{"e3.fraction_min": f, "e5.ratio_small_noise": r})
                                    for f, r in ((1.0, 0.95), (0.95, 0.97), (1.0, 0.96))])
    for c in E.CLAIMS:
        assert c.evaluate(seeds).verdict == "holds", c.id


def test_claims_fail_or_are_inconclusive_on_bad_metrics():
    assert _claim("zero_surplus_N0").evaluate(_metrics(**{"e1.zero_max_per_round": 1e-3})).verdict == "fails"
    assert _claim("sweeping_law").evaluate(_metrics(**{"e1.inside_fraction": 0.9})).verdict == "fails"
    assert _claim("sweeping_law").evaluate(_metrics(**{"e1.grows_with_n_sub": False})).verdict == "fails"
    assert _claim("inverse_rate").evaluate(_metrics(**{"e1.slope_min": 0.6})).verdict == "fails"
    assert _claim("dichotomy").evaluate(_metrics(**{"e2.dichotomy_holds": False})).verdict == "fails"
    assert _claim("price_of_best_response").evaluate(_metrics(**{"e4.slope": 0.8})).verdict == "fails"
    # stochastic claims: one seed is inconclusive; a fraction far below the threshold fails
    assert _claim("alternation").evaluate(_metrics()).verdict == "inconclusive"
    low = SeedMetrics([0, 1, 2], [_metrics(**{"e3.fraction_min": f}) for f in (0.5, 0.55, 0.6)])
    assert _claim("alternation").evaluate(low).verdict == "fails"
    noisy = SeedMetrics([0, 1], [_metrics(**{"e5.ratio_small_noise": r}) for r in (0.1, 1.0)])
    assert _claim("bilateral_noise").evaluate(noisy).verdict == "inconclusive"


def test_ranking_swaps_inside_the_noise_are_inconclusive():
    rows = {"a": {"Sus": 1.0, "predicted": 1.02}, "b": {"Sus": 1.1, "predicted": 1.0},
            "c": {"Sus": 0.1, "predicted": 0.1}, "lb": {"Sus": 9.0, "predicted": float("inf")}}
    assert E.rank_agreement(rows)[0] == "inconclusive"
    rows["b"]["predicted"] = 0.5
    assert E.rank_agreement(rows)[0] == "fails"
    rows["b"]["Sus"] = 0.5
    assert E.rank_agreement(rows)[0] == "holds"


def test_thresholds_appear_in_the_statements():
    text = " ".join(c.statement for c in E.CLAIMS)
    for value in (str(E.SLOPE_BAND), str(E.SQRT_BAND), f"{E.ALT_FRACTION:.0%}", str(E.NOISE_KEEP)):
        assert value in text


def test_smoke_run_metrics(tmp_path):
    from neurips26.harness import RunContext

    m = E.run(E.CONFIGS["smoke"], RunContext(out_dir=tmp_path, seed=1, scale="smoke", progress=False))
    assert m["e1"]["inside_fraction"] == 1.0 and m["e1"]["zero_max_per_round"] <= E.ZERO_TOL
    assert m["e2"]["dichotomy_holds"]
    rows = m["e2"]["reg"]["euclidean"][0]
    assert rows["eliminated_at"] <= rows["predicted"]
    assert set(m["e6"]["rows"]) == {"entropic", "euclidean"}


@pytest.mark.slow
def test_quick_reproduction_claims_hold(tmp_path):
    """The quick scale (3 seeds, ~2 minutes here): every claim's verdict is computed and holds."""
    from neurips26.harness.run import run_paper

    res = run_paper("ftrl_surplus", "quick", out=tmp_path, progress=False)
    verdicts = {c["id"]: c["verdict"] for c in res["claims"]}
    assert verdicts == {c.id: "holds" for c in E.CLAIMS}, verdicts


@pytest.mark.slow
def test_process_pool_grid_gives_the_serial_metrics(tmp_path):
    """E1/E3 cells through map_tasks on a process pool (the full scale's backend) == serial."""
    import dataclasses

    from neurips26.harness.run import run_paper

    cfg = dataclasses.replace(E.CONFIGS["smoke"], backend="process")
    a = run_paper("ftrl_surplus", config=cfg, out=tmp_path / "p", progress=False)
    b = run_paper("ftrl_surplus", "smoke", out=tmp_path / "s", progress=False)
    assert a["metrics"] == b["metrics"]
