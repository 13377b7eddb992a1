"""Seeds as an axis: per-seed metrics, paired standard errors, noise-aware verdicts."""

import json
import math
import sys

import pytest

from neurips26.harness import paper
from neurips26.harness.paper import (Claim, SeedMetrics, judge, mean_se, paired, seed_values, seeded)
from neurips26.harness.run import RunSetupError, run_paper


def test_mean_se_known_values():
    mean, se, n = mean_se([1.0, 2.0, 3.0])
    assert (mean, n) == (2.0, 3) and se == pytest.approx(1 / math.sqrt(3))
    assert math.isnan(mean_se([4.0])[1])


def test_paired_and_seed_values_plain_and_seeded():
    plain = {"a": {"x": 3.0}, "b": {"x": 1.0}}
    assert seed_values(plain, "a.x") == [3.0]
    assert paired(plain, "a.x", "b.x")[0] == 2.0 and math.isnan(paired(plain, "a.x", "b.x")[1])
    runs = [{"a": 1.0, "b": 0.0}, {"a": 2.0, "b": 0.5}, {"a": 3.0, "b": 1.0}]
    m = SeedMetrics([0, 1, 2], runs)
    assert m["a"] == 1.0  # the first seed, as a plain dict
    mean, se, n = paired(m, "a", "b")
    assert (mean, n) == (1.5, 3) and se == pytest.approx(0.5 / math.sqrt(3))
    with pytest.raises(KeyError):
        seed_values(m, "a.nope")


@pytest.mark.parametrize("mean, se, n, better, want", [
    (1.0, 0.1, 3, "higher", "holds"), (-1.0, 0.1, 3, "higher", "fails"), (0.1, 0.1, 3, "higher", "inconclusive"),
    (-1.0, 0.1, 3, "lower", "holds"), (1.0, math.nan, 1, "higher", "inconclusive"),
    (1.0, 0.0, 1, "higher", "inconclusive")])
def test_judge(mean, se, n, better, want):
    assert judge(mean, se, n, better=better) == want


def test_seeded_check_factory():
    m = SeedMetrics([0, 1, 2], [{"r": 0.9}, {"r": 1.1}, {"r": 1.0}])
    v, text = seeded("r", 0.5)(m)
    assert v == "holds" and "n=3 seeds" in text
    assert seeded("r", 0.5)({"r": 1.0})[0] == "inconclusive"


def _paired_claim(m):
    mean, se, n = paper.paired(m, "mean", "zero")
    return paper.judge(mean, se, n, 0.0), paper.fmt_se(mean, se, n)


def test_run_paper_several_seeds(toy_paper, tmp_path, monkeypatch):
    exp = sys.modules["neurips26.toy_paper.experiment"]
    orig = exp.run
    monkeypatch.setattr(exp, "run", lambda cfg, ctx: orig(cfg, ctx) | {"zero": 0.0})
    monkeypatch.setattr(exp, "CLAIMS", exp.CLAIMS + [Claim("paired", "mean differs from 0", "-", _paired_claim)])
    res = run_paper("toy_paper", "quick", seeds=[0, 1, 2], out=tmp_path, progress=False)
    assert res["seeds"] == [0, 1, 2] and res["seed"] == 0
    assert [p["seed"] for p in res["per_seed"]] == [0, 1, 2]
    means = [p["metrics"]["mean"] for p in res["per_seed"]]
    assert len(set(means)) == 3 and res["metrics"]["mean"] == means[0]
    single = run_paper("toy_paper", "quick", seed=1, out=tmp_path / "one", progress=False)
    assert single["metrics"]["mean"] == means[1]  # seed 1 in a multi-seed run == seed 1 alone
    claim = {c["id"]: c for c in res["claims"]}["paired"]
    assert "n=3 seeds" in claim["measured"]
    assert (tmp_path / "seed-1" / "hist.png").is_file() and (tmp_path / "hist.png").is_file()
    assert "seed-2/hist.png" in res["provenance"]["plots"]
    assert json.loads((tmp_path / "result.json").read_text())["seeds"] == [0, 1, 2]


def test_config_default_seeds_and_user_config(toy_paper, tmp_path):
    from dataclasses import dataclass

    @dataclass
    class Cfg:
        n: int = 5
        seeds: tuple = (3, 4)

    res = run_paper("toy_paper", config=Cfg(), out=tmp_path, progress=False)
    assert res["scale"] == "custom" and res["seeds"] == [3, 4] and res["metrics"]["n"] == 5


@pytest.mark.parametrize("kw", [dict(seeds=[]), dict(seeds=[1, 1]), dict(seeds=[-1]), dict(seed=0, seeds=[1])])
def test_bad_seeds(toy_paper, tmp_path, kw):
    with pytest.raises(RunSetupError):
        run_paper("toy_paper", "smoke", out=tmp_path, progress=False, **kw)


def test_cli_seeds(toy_paper, tmp_path, capsys):
    from neurips26.cli import main

    assert main(["run", "toy_paper", "--scale", "smoke", "--seeds", "0-2", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "result.json").read_text())["seeds"] == [0, 1, 2]
    assert main(["run", "toy_paper", "--seeds", "2-1"]) == 2
    assert "range must go up" in capsys.readouterr().err


def test_a_papers_own_error_reaches_the_caller_as_itself(toy_paper, tmp_path, monkeypatch):
    exp = sys.modules["neurips26.toy_paper.experiment"]

    def bad(cfg, ctx):
        raise RunSetupError("corpus missing: run the fetch command")

    monkeypatch.setattr(exp, "run", bad)
    for seeds in ([0], [0, 1]):
        with pytest.raises(RunSetupError, match="corpus missing"):
            run_paper("toy_paper", "smoke", seeds=seeds, out=tmp_path, progress=False)


def test_a_config_may_run_its_seeds_side_by_side(toy_paper, tmp_path, monkeypatch):
    """``seed_backend`` on the config is the default of run_paper's backend; an explicit one wins."""
    import dataclasses

    from neurips26.harness import run as run_mod

    used, workers = [], []
    real = run_mod.map_tasks

    def spy(fn, tasks, backend, **kw):
        used.append(backend)
        workers.append(kw.get("workers"))
        return real(fn, tasks, backend="serial", **kw)

    monkeypatch.setattr(run_mod, "map_tasks", spy)
    exp = sys.modules["neurips26.toy_paper.experiment"]

    @dataclasses.dataclass
    class Cfg:
        n: int = 10
        seed_backend: str = "process"

    monkeypatch.setitem(exp.CONFIGS, "smoke", Cfg())
    a = run_paper("toy_paper", "smoke", seeds=(0, 1), out=tmp_path / "a", progress=False)
    assert used == ["process"]
    b = run_paper("toy_paper", "smoke", seeds=(0, 1), out=tmp_path / "b", progress=False, backend="serial")
    assert used == ["process"] and a["metrics"] == b["metrics"]          # serial ran in this process
    assert workers == [None]                                               # no seed_workers: the CPUs

    @dataclasses.dataclass
    class CfgW(Cfg):
        seed_workers: int = 3

    monkeypatch.setitem(exp.CONFIGS, "smoke", CfgW())
    run_paper("toy_paper", "smoke", seeds=(0, 1, 2), out=tmp_path / "c", progress=False)
    run_paper("toy_paper", "smoke", seeds=(0, 1, 2), out=tmp_path / "d", progress=False, workers=2)
    assert workers == [None, 3, 2]                                         # the config's, then the caller's
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="seed_workers"):
            run_paper("toy_paper", "smoke", seeds=(0, 1), out=tmp_path / "e", progress=False, workers=bad)
