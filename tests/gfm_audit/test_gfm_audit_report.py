"""The report command: files written, numbers equal the library's, synthetic reports watermarked."""

from __future__ import annotations

import json

import pytest

from neurips26.gfm_audit import SYNTHETIC_WATERMARK, synthetic_demo, write_records
from neurips26.gfm_audit.cli import main
from neurips26.gfm_audit.examples import EXAMPLES_DIR, PUBLISHED_SPREADS
from neurips26.gfm_audit.report import PLOTS


def test_report_on_published_example(tmp_path, capsys):
    rc = main(
        [
            "report",
            "--papers",
            str(EXAMPLES_DIR / "published_papers.jsonl"),
            "--results",
            str(EXAMPLES_DIR / "published_disagreements.jsonl"),
            "--out",
            str(tmp_path),
            "--no-plots",
        ]
    )
    assert rc == 0
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["watermark"] is None
    assert [round(g["spread"], 6) for g in s["groups"]] == list(PUBLISHED_SPREADS)
    assert s["disagreements"]["strict_full"]["n_ge_10"] == 7
    assert "SYNTHETIC" not in (tmp_path / "report.md").read_text()
    assert "7 strict groups" in capsys.readouterr().out


def test_report_on_synthetic_demo_is_watermarked(tmp_path):
    demo = synthetic_demo(0)
    write_records(demo.papers, tmp_path / "p.jsonl")
    write_records(demo.results, tmp_path / "r.csv")
    out = tmp_path / "out"
    assert (
        main(
            [
                "report",
                "--papers",
                str(tmp_path / "p.jsonl"),
                "--results",
                str(tmp_path / "r.csv"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    s = json.loads((out / "summary.json").read_text())
    assert s["watermark"] == SYNTHETIC_WATERMARK
    assert s["disagreements"]["strict_full"]["n_ge_10"] == len(demo.planted)
    for name in ("report.md", "disagreements.csv", "compliance.csv"):
        assert SYNTHETIC_WATERMARK in (out / name).read_text(), name
    assert all((out / p).is_file() for p in PLOTS)
    assert s["pretraining"]["ordered"]["n_extractable"] == 40


def test_report_invalid_input_exit_2(tmp_path, capsys):
    (tmp_path / "p.jsonl").write_text(
        json.dumps({"paper_id": "a", "title": "t", "year": 2024, "citation": "c"}) + "\n"
    )
    (tmp_path / "r.jsonl").write_text(
        json.dumps(
            {
                "paper_id": "b",
                "model_name_raw": "m",
                "benchmark_name_raw": "x",
                "metric_name": "accuracy",
                "metric_value": 101,
            }
        )
        + "\n"
    )
    assert (
        main(
            [
                "report",
                "--papers",
                str(tmp_path / "p.jsonl"),
                "--results",
                str(tmp_path / "r.jsonl"),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "row 1, field 'metric_value'" in err and "row 1, field 'paper_id'" in err
    with pytest.raises(SystemExit):
        main(["report", "--papers", "x"])


def test_schema_and_examples_commands(tmp_path, capsys):
    assert main(["schema", "result"]) == 0
    assert "provenance" in json.loads(capsys.readouterr().out)["properties"]
    assert main(["examples", str(tmp_path)]) == 0
    assert (tmp_path / "published_disagreements.jsonl").read_text() == (
        EXAMPLES_DIR / "published_disagreements.jsonl"
    ).read_text()


def test_copied_vs_rerun_measure_on_a_user_table():
    from neurips26.gfm_audit import ResultRecord
    from neurips26.gfm_audit.experiment import _copied_vs_rerun

    base = dict(
        model_name_raw="M", benchmark_name_raw="B", metric_name="accuracy", evaluation_strategy="linear"
    )
    rows = [
        ResultRecord(paper_id="a", metric_value=70.0, provenance="copied", copied_from="x", **base),
        ResultRecord(paper_id="b", metric_value=80.0, provenance="rerun", **base),
        ResultRecord(paper_id="c", metric_value=81.0, provenance="rerun", **base),
    ]
    c = _copied_vs_rerun(rows)
    assert c == {
        "n_copied_rerun_pairs": 2,
        "n_rerun_pairs": 1,
        "copied_rerun_gap": 10.5,
        "rerun_rerun_gap": 1.0,
    }


def test_convert_authors_files(tmp_path, capsys):
    """The converters on files in the authors' layout (a hand-written two-paper fixture, no real data)."""
    ex = [
        {
            "title": "P one",
            "year": 2024,
            "model_name": "A",
            "architecture": {"backbone": "ViT", "notes": "x"},
            "pretraining": {"method": "MAE", "method_details": "masked"},
            "_source_pdf": "one.pdf",
            "pretraining_data": {"datasets": ["SSL4EO", "EuroSAT"], "sensors": None},
            "downstream_datasets": ["EuroSAT"],
            "weights_available": None,
            "key_contribution": "k",
        },
        {
            "title": "P two",
            "year": 2025,
            "_source_pdf": "two.pdf",
            "pretraining_data": {"datasets": ["SSL4EO"]},
            "downstream_datasets": ["RESISC-45"],
            "weights_available": True,
        },
    ]
    (tmp_path / "ei.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ex))
    rn = [
        {
            "paper_id": "one.pdf",
            "model_name": "a",
            "model_name_raw": "A",
            "benchmark_name": "eurosat",
            "benchmark_name_raw": "EuroSAT",
            "metric_name": "accuracy",
            "metric_value": 90.0,
            "evaluation_strategy": "linear probe",
            "title": "P one",
        },
        {
            "paper_id": "two.pdf",
            "model_name": "a",
            "benchmark_name": "eurosat",
            "metric_name": "oa",
            "metric_value": 80.0,
            "evaluation_strategy": "Linear probing",
        },
    ]
    (tmp_path / "rn.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rn))
    (tmp_path / "aliases.py").write_text(
        "DATASET_ALIASES = {'eurosat': 'EuroSAT', 'ssl4eo': 'SSL4EO'}\nSENSOR_CANONICAL = {'Sentinel-2'}\n"
        "ALWAYS_EXCLUDE_DATASETS = set()\nDOWNSTREAM_EXCLUDE_DATASETS = set()\n"
        "PRETRAIN_EXCLUDE_DATASETS = set()\n"
    )
    (tmp_path / "ca.py").write_text("import os\nDOWNSTREAM_ONLY_BENCHMARKS = {'EuroSAT'}\n")
    out = tmp_path / "data"
    assert (
        main(
            [
                "convert-authors",
                "--extracted-info",
                str(tmp_path / "ei.jsonl"),
                "--reported-numbers",
                str(tmp_path / "rn.jsonl"),
                "--aliases-py",
                str(tmp_path / "aliases.py"),
                "--analyses-py",
                str(tmp_path / "ca.py"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    from neurips26.gfm_audit import AliasTable, load_papers, load_results, pretraining_uniqueness

    papers = load_papers(out / "papers.jsonl")
    results = load_results(out / "results.jsonl", papers)
    assert [r.metric_name for r in results] == ["accuracy", "other"]
    al = AliasTable.from_csv(out / "aliases.csv")
    u = pretraining_uniqueness(papers, al)  # EuroSAT is downstream-only: both papers pretrain on (SSL4EO,)
    assert (u["n_extractable"], u["unique"], u["shared"]) == (2, 0, 2)
