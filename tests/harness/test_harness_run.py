import json
import os

import pytest

from neurips26.harness.report import collect, write_report
from neurips26.harness.run import (BenchRow, RunSetupError, bench_paper, load_result, prepare_out_dir,
                                   run_paper)


def test_result_json_schema_and_computed_verdicts(toy_paper, tmp_path):
    res = run_paper("toy_paper", "quick", 3, tmp_path / "r", progress=False)
    on_disk = load_result(tmp_path / "r" / "result.json")
    assert on_disk == json.loads(json.dumps(res))
    assert set(on_disk) >= {"paper", "scale", "seed", "seconds", "provenance", "metrics", "claims"}
    assert on_disk["paper"] == "toy_paper" and on_disk["scale"] == "quick" and on_disk["seed"] == 3
    verdicts = {c["id"]: c["verdict"] for c in on_disk["claims"]}
    assert verdicts == {"mean_small": "holds", "n_large": "fails", "missing": "inconclusive"}
    assert on_disk["metrics"]["arr"] == [0, 1, 2]  # numpy made JSON-serialisable
    prov = on_disk["provenance"]
    assert {"git_sha", "python", "versions", "config", "plots"} <= set(prov)
    assert prov["config"] == {"n": 100}
    assert (tmp_path / "r" / "hist.png").stat().st_size > 1000
    assert not [p for p in (tmp_path / "r").iterdir() if p.name.startswith(".")]


def test_same_seed_same_metrics(toy_paper, tmp_path):
    a = run_paper("toy_paper", "quick", 7, tmp_path / "a", progress=False)["metrics"]
    b = run_paper("toy_paper", "quick", 7, tmp_path / "b", progress=False)["metrics"]
    c = run_paper("toy_paper", "quick", 8, tmp_path / "c", progress=False)["metrics"]
    assert a == b != c


def test_full_scale_uses_full_config(toy_paper, tmp_path):
    res = run_paper("toy_paper", "full", 0, tmp_path, progress=False)
    assert res["metrics"]["n"] == 10_000
    assert {c["id"]: c["verdict"] for c in res["claims"]}["n_large"] == "holds"


@pytest.mark.parametrize("kw, match", [({"scale": "big"}, "scale"), ({"seed": -1}, "seed"),
                                       ({"seed": 1.5}, "seed"), ({"seed": True}, "seed")])
def test_bad_run_arguments(toy_paper, tmp_path, kw, match):
    args = {"slug": "toy_paper", "scale": "quick", "seed": 0, "out": tmp_path} | kw
    with pytest.raises(RunSetupError, match=match):
        run_paper(**args, progress=False)
    assert not (tmp_path / "result.json").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_out_dir_nonroot(tmp_path):
    tmp_path.chmod(0o500)
    with pytest.raises(RunSetupError, match="not writable"):
        prepare_out_dir(tmp_path / "x")


def test_out_dir_under_a_file_is_rejected(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(RunSetupError, match="not writable"):
        prepare_out_dir(tmp_path / "f" / "sub")


def test_bench_ratio_direction():
    assert BenchRow("t", ours=2.0, anchor=6.0, anchor_name="a", unit="s").ratio == 3.0
    assert BenchRow("r", ours=6.0, anchor=2.0, anchor_name="a", unit="1/s", better="higher").ratio == 3.0
    assert BenchRow("n", ours=1.0, anchor=None, anchor_name="a", unit="s").ratio is None
    with pytest.raises(ValueError, match="better"):
        BenchRow("x", 1.0, 1.0, "a", "s", better="faster")


def test_bench_json(toy_paper, tmp_path):
    res = bench_paper("toy_paper", tmp_path, progress=False)
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data == json.loads(json.dumps(res))
    assert [r["ratio"] for r in data["rows"]] == [2.0, None]
    assert set(data["rows"][0]) >= {"name", "ours", "anchor", "anchor_name", "unit", "ratio", "better"}


def test_report_from_fixture_results(toy_paper, tmp_path):
    run_paper("toy_paper", "quick", 0, tmp_path / "toy_paper" / "run-20260101T000000000000Z", progress=False)
    newest = run_paper("toy_paper", "full", 0, tmp_path / "toy_paper" / "run-20260102T000000000000Z",
                       progress=False)
    run_paper("toy_paper", "quick", 0, tmp_path / "toy_paper" / "zz-user-named", progress=False)
    os.utime(tmp_path / "toy_paper" / "zz-user-named" / "result.json", (1, 1))  # written long ago
    bench_paper("toy_paper", tmp_path / "toy_paper" / "bench-20260101T000000000000Z", progress=False)
    rows = {r["paper"].slug: r for r in collect(tmp_path)}
    assert rows["toy_paper"]["result"]["scale"] == "full" == newest["scale"]  # newest run wins
    md, page = write_report(tmp_path, tmp_path / "out")
    text, html = md.read_text(), page.read_text()
    assert "| mean_small |" in text and "**holds**" in text and "**inconclusive**" in text
    assert html.count("data:image/png;base64,") == 1  # plot embedded, report self-contained
    assert "anchor" in html and "2" in html
    assert "cofrgenet" in text  # every registered paper has a row
    assert "](../toy_paper/run-20260102T000000000000Z/hist.png)" in text  # relative to the report


def test_only_rank_zero_writes_under_torchrun(toy_paper, tmp_path, monkeypatch):
    """Under torchrun every rank runs the experiment; rank 0 alone writes the run folder."""
    import tempfile

    private = tmp_path / "private"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    res = run_paper("toy_paper", "smoke", seeds=(0, 1), out=tmp_path / "run")
    bench = bench_paper("toy_paper", out=tmp_path / "bench")
    assert res["metrics"]["n"] == 10 and len(res["per_seed"]) == 2 and bench["rows"]
    assert not (tmp_path / "run").exists() and not (tmp_path / "bench").exists()
    assert list(private.iterdir()) == []  # the rank's own folder (plots of both seeds) is removed
    monkeypatch.setenv("RANK", "0")
    res0 = run_paper("toy_paper", "smoke", seeds=(0, 1), out=tmp_path / "run")
    assert load_result(tmp_path / "run" / "result.json")["metrics"] == res0["metrics"] == res["metrics"]
    assert (tmp_path / "run" / "hist.png").exists() and (tmp_path / "run" / "seed-1" / "hist.png").exists()


@pytest.mark.parametrize("env, match", [({"WORLD_SIZE": "2", "RANK": "x"}, "integers"),
                                        ({"WORLD_SIZE": "2", "RANK": "2"}, "outside")])
def test_launcher_rank_rejects_a_bad_environment(monkeypatch, env, match):
    from neurips26.harness.distributed import launcher_rank

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValueError, match=match):
        launcher_rank()
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert launcher_rank() == 0
