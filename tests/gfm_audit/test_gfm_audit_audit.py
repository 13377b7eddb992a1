"""Acceptance checks 1-7 of the spec: schema, normalisation, finder fixtures, published spreads, stats."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from neurips26.gfm_audit import (
    PUBLISHED_SPREADS,
    AliasTable,
    PaperRecord,
    RecordValidationError,
    ResultRecord,
    ResultTable,
    copy_chains,
    count_at_least,
    default_aliases,
    find_disagreements,
    gini,
    hhi,
    json_schema,
    load_papers,
    load_results,
    normalise_eval,
    pretraining_uniqueness,
    published_papers,
    published_results,
    slug,
    synthetic_demo,
    write_records,
)
from neurips26.gfm_audit.examples import EXAMPLES_DIR, PUBLISHED_NOTE, PUBLISHED_ROWS
from neurips26.gfm_audit.finder import naive_leaderboard, protocol_mismatches
from neurips26.gfm_audit.schema import validate_papers, validate_results
from neurips26.gfm_audit.stats import bootstrap_ci, compliance, release_shares, top_k_share

ROW = dict(
    paper_id="p1",
    model_name_raw="M",
    benchmark_name_raw="B",
    metric_name="accuracy",
    metric_value=80.0,
    evaluation_strategy="linear probe",
)


def _r(**kw):
    return {**ROW, **kw}


# ---------------------------------------------------------------------------------------- check 1


def test_schema_every_violation_named_by_row_and_field():
    rows = [
        _r(),
        _r(metric_value=130.0, table_ref="a"),
        _r(ci_low=90.0, table_ref="b"),
        _r(provenance="copied", table_ref="c"),
        _r(metric_name="bleu", table_ref="d"),
        _r(metric_value=float("nan"), table_ref="e"),
        _r(metric_value=1.5, metric_scale="fraction", table_ref="f"),
    ]
    with pytest.raises(RecordValidationError) as e:
        validate_results(rows)
    got = {(v.row, v.field) for v in e.value.violations}
    assert got == {
        (2, "metric_value"),
        (3, "ci_low"),
        (4, "copied_from"),
        (5, "metric_name"),
        (6, "metric_value"),
        (7, "metric_value"),
    }
    assert "row 2, field 'metric_value'" in str(e.value)


def test_schema_cross_row_rules():
    papers = validate_papers([dict(paper_id="p1", title="T", year=2024, citation="c")])
    with pytest.raises(RecordValidationError) as e:
        validate_results([_r(), _r(), _r(paper_id="zz", table_ref="x")], papers)
    got = {(v.row, v.field) for v in e.value.violations}
    assert got == {(2, "<key>"), (3, "paper_id")}
    with pytest.raises(RecordValidationError, match="duplicate paper_id"):
        validate_papers([dict(paper_id="a", title="T", year=2024, citation="c")] * 2)
    with pytest.raises(RecordValidationError, match="year"):
        validate_papers([dict(paper_id="a", title="T", year=1800, citation="c")])


def test_valid_demo_passes_and_io_round_trips(tmp_path):
    demo = synthetic_demo(0)
    for suffix in ("jsonl", "csv", "parquet"):
        pytest.importorskip("pyarrow") if suffix == "parquet" else None
        write_records(demo.results, tmp_path / f"r.{suffix}")
        write_records(demo.papers, tmp_path / f"p.{suffix}")
        papers = load_papers(tmp_path / f"p.{suffix}")
        back = load_results(tmp_path / f"r.{suffix}", papers)
        assert [r.model_dump() for r in back] == [r.model_dump() for r in demo.results], suffix
        assert [p.model_dump() for p in papers] == [p.model_dump() for p in demo.papers], suffix
    mixed = [
        ResultRecord(**_r(num_training_samples=100, table_ref="a")),
        ResultRecord(**_r(num_training_samples="1k", metric_value=0.1 + 0.2, table_ref="b")),
    ]
    for suffix in ("csv", "parquet"):
        write_records(mixed, tmp_path / f"m.{suffix}")
        back = load_results(tmp_path / f"m.{suffix}")
        assert [r.metric_value for r in back] == [80.0, 0.1 + 0.2], suffix  # floats exact
        assert [str(r.num_training_samples) for r in back] == ["100", "1k"], suffix
    assert "metric_name" in json_schema("result")["properties"]
    assert "weights_license" in json_schema("paper")["properties"]


def test_unreadable_jsonl_lines_are_numbered(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(ROW) + "\n{not json\n[1, 2]\n")
    with pytest.raises(RecordValidationError) as e:
        load_results(p)
    assert [(v.row, v.field) for v in e.value.violations] == [(2, "<json>"), (3, "<json>")]
    with pytest.raises(ValueError, match="must end in"):
        load_results(tmp_path / "r.txt")


def test_fraction_equals_percent_after_normalisation():
    a = ResultRecord(**_r(metric_value=0.896, metric_scale="fraction"))
    b = ResultRecord(**_r(metric_value=89.6))
    assert abs(a.points - b.points) < 1e-9


# ---------------------------------------------------------------------------------------- check 2


@pytest.mark.parametrize(
    "raw, paper, ext",
    [
        ("Linear Probing", "linear", "linear"),
        ("frozen backbone", "linear", "linear"),
        ("Full fine-tuning", "finetune", "finetune"),
        ("k-NN (k=20)", "knn", "knn"),
        ("Zero-shot", "zeroshot", "zeroshot"),
        ("few-shot", "fewshot", "fewshot"),
        ("5-shot", "other", "fewshot"),
        ("Linear", "other", "linear"),
        ("", "unknown", "unknown"),
        ("logistic regression", "other", "linear"),
    ],
)
def test_eval_normalisation_table(raw, paper, ext):
    assert normalise_eval(raw) == paper
    assert normalise_eval(raw, paper_mode=False) == ext


def test_slug_and_aliases(tmp_path):
    assert slug("Scale-MAE (ViT-L)") == "scalemae" and slug("ResNet+ (x)") == "resnet+"
    al = default_aliases()
    for _, mraw, m, braw, b, *_ in PUBLISHED_ROWS:
        assert al.canonical(mraw, "model") == m and al.canonical(braw, "downstream") == b
    assert al.canonical("custom Sentinel-2 dataset") is None
    assert (
        al.canonical("ImageNet-1K", "downstream") is None
        and al.canonical("ImageNet-1K", "pretrain") == "ImageNet-1K"
    )
    assert al.canonical("RESISC-45 (scene)") == "nwpuresisc45"
    assert al.canonical("fMoW-RGB") != al.canonical("fMoW-Sentinel") != al.canonical("fMoW")  # siblings kept
    assert al.canonical("Unknown Set (v2)") == "Unknown Set"
    assert al.is_sensor_only("Sentinel-2 (L2A)") and not al.is_sensor_only("BigEarthNet")
    bad = tmp_path / "a.csv"
    bad.write_text("raw,canonical,context\nX,x,weird\n")
    with pytest.raises(ValueError, match="line 2: context"):
        AliasTable.from_csv(bad)


# ---------------------------------------------------------------------------------------- check 3


def _table(rows):
    return ResultTable.from_records([ResultRecord(**r) for r in rows], default_aliases())


def _groups(rows, **kw):
    t = _table(rows)
    fast = find_disagreements(t, **kw)
    ref = find_disagreements(t, method="reference", **kw)
    assert [(g.key, g.n, g.n_papers, g.min, g.max, g.spread) for g in fast] == [
        (g.key, g.n, g.n_papers, g.min, g.max, g.spread) for g in ref
    ]
    assert all(math.isclose(a.std, b.std, abs_tol=1e-9) for a, b in zip(fast, ref))
    return fast


def test_finder_skip_rules_and_threshold():
    pair = [_r(paper_id="a", metric_value=80.0), _r(paper_id="b", metric_value=90.0)]
    g = _groups(pair)
    assert len(g) == 1 and g[0].spread == 10.0 and count_at_least(g, 10) == 1
    assert _groups(pair + [_r(paper_id="a", metric_value=85.0, table_ref="T2")]) == []  # intra-paper
    assert len(_groups(pair + [_r(paper_id="a", metric_value=80.00001, table_ref="T2")])) == 1  # same at 4 dp
    assert _groups([{**r, "model_name_raw": "ImageNet"} for r in pair]) == []  # baseline
    assert _groups([pair[0], {**pair[1], "num_training_samples": "100"}]) == []  # label-limited
    assert _groups([pair[0]]) == []  # one paper
    assert _groups([{**r, "benchmark_name_raw": "DOTA", "metric_name": "map"} for r in pair]) == []
    assert len(_groups([{**r, "benchmark_name_raw": "DOTA", "metric_name": "micro_map"} for r in pair])) == 1
    near = [_r(paper_id="a", metric_value=6.4), _r(paper_id="b", metric_value=16.4)]
    assert count_at_least(_groups(near), 10) == 0  # 9.999999999999998


def test_finder_strict_vs_loose_and_regime():
    rows = [
        _r(paper_id="a", metric_value=50.0),
        _r(paper_id="b", metric_value=80.0, evaluation_strategy="fine-tune"),
        _r(paper_id="c", metric_value=52.0, train_regime="10%"),
    ]
    assert _groups(rows) == []
    assert len(_groups(rows, key="loose", regime=None)) == 1
    assert len(_groups(rows, key="strict", regime=None)) == 0


def test_synthetic_demo_recovered_exactly():
    demo = synthetic_demo(3)
    assert all(r.synthetic for r in demo.results) and all(p.synthetic for p in demo.papers)
    t = ResultTable.from_records(demo.results, default_aliases(), demo.papers)
    got = {tuple(g.key.values()): g.spread for g in find_disagreements(t) if g.spread >= 10}
    assert set(got) == set(demo.planted)
    assert all(abs(got[k] - demo.planted[k]) < 1e-9 for k in got)
    decoy_keys = {tuple(g.key.values()) for g in find_disagreements(t)}
    assert not decoy_keys & set(demo.decoys.values())
    assert protocol_mismatches(t)["protocol_mismatch"] == 1


# ---------------------------------------------------------------------------------------- check 4


def test_published_example_seven_strict_groups():
    t = ResultTable.from_records(published_results(), default_aliases(), published_papers())
    g = find_disagreements(t)
    assert len(g) == 7 and all(x.spread >= 10 for x in g)
    assert all(abs(a.spread - b) < 1e-9 for a, b in zip(g, PUBLISHED_SPREADS))
    # re-canonicalising from the raw strings gives the same groups
    raw = [r.model_copy(update={"model_name": None, "benchmark_name": None}) for r in published_results()]
    g2 = find_disagreements(ResultTable.from_records(raw, default_aliases()))
    assert [x.spread for x in g2] == [x.spread for x in g]
    best = {(d["model"], d["benchmark"]): d["value"] for d in naive_leaderboard(t)}
    assert best[("scalemae", "nwpuresisc45")] == 89.6


def test_shipped_examples_match_the_spec_list():
    lines = (EXAMPLES_DIR / "published_disagreements.jsonl").read_text().splitlines()
    assert len(lines) == 21
    shipped = [json.loads(x) for x in lines]
    want = [r.model_dump(mode="json", exclude_none=True) for r in published_results()]
    assert shipped == want
    spec = {(p, m, b, v) for p, _, m, _, b, _, _, v in PUBLISHED_ROWS}
    assert {(r["paper_id"], r["model_name"], r["benchmark_name"], r["metric_value"]) for r in shipped} == spec
    assert all(r["provenance"] == "unknown" and r["note"] == PUBLISHED_NOTE for r in shipped)
    papers = load_papers(EXAMPLES_DIR / "published_papers.jsonl")
    assert all(p.citation_only for p in papers)
    load_results(EXAMPLES_DIR / "published_disagreements.jsonl", papers)
    demo = synthetic_demo(0)
    sp = [json.loads(x) for x in (EXAMPLES_DIR / "synthetic_demo" / "results.jsonl").read_text().splitlines()]
    assert sp == [r.model_dump(mode="json", exclude_none=True) for r in demo.results]
    assert all(r["synthetic"] for r in sp)


# ---------------------------------------------------------------------------------------- checks 5, 6


def test_gini_hhi_bootstrap():
    assert gini([1, 2, 3, 4]) == pytest.approx(0.25) and gini([5, 5, 5]) == pytest.approx(0.0)
    assert gini([0, 0]) == 0.0 and hhi([1, 1, 1, 1]) == pytest.approx(0.25)
    assert top_k_share([5, 3, 1, 1], 1) == 0.5
    a = bootstrap_ci([1, 2, 3, 4], gini)
    assert a == bootstrap_ci([1, 2, 3, 4], gini) and a[0] <= 0.25 <= a[1]
    assert a == pytest.approx((0.05, 0.3125), abs=0.03)


def _paper(pid, pre=None, down=None, **kw):
    return PaperRecord(
        paper_id=pid,
        title=pid,
        year=2024,
        citation=pid,
        model_name=pid,
        pretraining_data={"datasets": pre or []},
        downstream_datasets=down,
        **kw,
    )


def test_pretraining_uniqueness_fixture():
    ps = [
        _paper("1", ["A"]),
        _paper("2", ["A"]),
        _paper("3", ["A", "B"]),
        _paper("4", ["B", "A"]),
        _paper("5", ["C"]),
        _paper("6", []),
    ]
    al = AliasTable()
    o = pretraining_uniqueness(ps, al)
    assert (o["n_extractable"], o["unique"], o["shared"]) == (5, 3, 2)
    u = pretraining_uniqueness(ps, al, ordered=False)
    assert (u["n_extractable"], u["unique"]) == (5, 1)
    al.add("Sentinel-2", "", "sensor")
    assert (
        pretraining_uniqueness(ps + [_paper("7", ["Sentinel-2", "C"])], al)["unique"] == 2
    )  # (C) now shared


def test_release_shares_count_null_as_not_released():
    ps = [_paper(str(i), weights_available=v) for i, v in enumerate([True, True, False, None])]
    r = release_shares(ps)
    assert r["weights_available"] == {"share": 0.5, "true": 2, "false": 1, "null": 1}
    assert r["weights_none_share"] == 0.5
    with pytest.raises(ValueError, match="empty corpus"):
        release_shares(published_papers())


def test_compliance_rules():
    ps = [
        _paper(
            "a",
            down=["EuroSAT"],
            weights_available=True,
            weights_license="MIT",
            controls=[{"varied": "data", "rows": ["r1", "r2"]}],
        ),
        _paper("b", down=["X"], weights_available=True, weights_license="none"),
    ]
    rs = [
        ResultRecord(**_r(paper_id="a", provenance="own", n_seeds=3, std=0.5, harness="h@1")),
        ResultRecord(**_r(paper_id="a", provenance="copied", copied_from="b", table_ref="2")),
        ResultRecord(**_r(paper_id="b", provenance="own", n_seeds=1)),
    ]
    c = compliance(ps, rs, default_aliases(), core=["eurosat"])
    a, b = c["per_paper"]
    assert a == {"paper_id": "a", "E1": True, "E2": True, "E3": True, "E4": True, "E5": True, "E6": True}
    assert (b["E1"], b["E2"], b["E3"], b["E4"], b["E5"], b["E6"]) == (False, False, None, False, False, False)
    assert copy_chains(rs) == [["a", "b"]]


# ---------------------------------------------------------------------------------------- check 7

DATA = os.environ.get("GFM_AUDIT_DATA")
HAS_PAPERS = bool(DATA) and (Path(DATA or ".") / "papers.jsonl").is_file()
HAS_RESULTS = HAS_PAPERS and (Path(DATA or ".") / "results.jsonl").is_file()


@pytest.mark.skipif(not HAS_PAPERS, reason="needs the authors' extracted_info converted into $GFM_AUDIT_DATA")
def test_authors_corpus_counts():
    root = Path(DATA)
    papers = load_papers(root / "papers.jsonl")
    al = AliasTable.from_csv(root / "aliases.csv")
    u = pretraining_uniqueness(papers, al)
    assert (u["unique"], u["n_extractable"], u["n_distinct_sets"]) == (94, 126, 104)
    assert release_shares(papers)["weights_available"]["share"] == pytest.approx(0.612, abs=1e-3)


@pytest.mark.skipif(
    not HAS_RESULTS, reason="needs the authors' reported_numbers converted into $GFM_AUDIT_DATA"
)
def test_authors_disagreement_counts():
    root = Path(DATA)
    papers = load_papers(root / "papers.jsonl")
    results = load_results(root / "results.jsonl", papers)
    al = AliasTable.from_csv(root / "aliases.csv")
    g = find_disagreements(ResultTable.from_records(results, al, papers))
    assert len(g) == 301 and count_at_least(g, 10) == 46


def test_fast_equals_reference_on_random_tables():
    rng = np.random.default_rng(1)
    n = 3000
    cols = {
        "model": rng.choice(["m1", "m2", "imagenet", "m3"], n),
        "benchmark": rng.choice(["b1", "dota", "b2"], n),
        "metric": rng.choice(["accuracy", "map"], n),
        "eval": rng.choice(["linear", "knn"], n),
        "regime": np.array(["full"] * n),
        "paper": rng.choice([f"p{i}" for i in range(40)], n),
    }
    t = ResultTable.from_columns(cols, np.round(rng.uniform(0, 100, n), 1), rng.random(n) < 0.001)
    for key in ("strict", "loose"):
        f, r = find_disagreements(t, key), find_disagreements(t, key, method="reference")
        assert [(g.key, g.n, g.spread, [m["row"] for m in g.members]) for g in f] == [
            (g.key, g.n, g.spread, [m["row"] for m in g.members]) for g in r
        ]


def test_factorise_equals_numpy_unique():
    from neurips26.gfm_audit.finder import _factorise

    rng = np.random.default_rng(0)
    cases = (["b", "a", "é", "A", "b", ""], [str(x) for x in rng.integers(0, 50, 1000)], [], ["x", None, 3])
    for vals in cases:
        k, u = _factorise(vals)
        u0, k0 = np.unique(np.asarray(vals, dtype=str), return_inverse=True)
        assert list(u) == list(u0) and np.array_equal(k, k0.ravel()) and k.dtype == np.int64


@pytest.mark.parametrize("seed", range(4))
def test_fast_equals_reference_with_regimes_near_duplicates_and_nts(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    cols = {
        "model": rng.choice(["m1", "m2", "scratch", "m3", "m4"], n),
        "benchmark": rng.choice(["b1", "dior", "b2"], n),
        "metric": rng.choice(["accuracy", "ap"], n),
        "eval": rng.choice(["linear", "knn", "finetune"], n),
        "regime": rng.choice(["full", "full", "10%"], n),
        "paper": rng.choice([f"p{i}" for i in range(25)], n),
    }
    # values on a 1e-5 grid: some intra-paper pairs differ only below the 4-decimal rounding
    v = np.round(rng.choice(rng.uniform(0, 100, 60), n) + rng.integers(0, 3, n) * 1e-5, 5)
    t = ResultTable.from_columns(cols, v, rng.random(n) < 0.002)
    for key, regime in (("strict", "full"), ("loose", None), ("strict", None), ("loose", "10%")):
        f = find_disagreements(t, key, regime)
        r = find_disagreements(t, key, regime, method="reference")
        assert [(g.key, g.n, g.n_papers, g.min, g.max, g.spread, g.members) for g in f] == [
            (g.key, g.n, g.n_papers, g.min, g.max, g.spread, g.members) for g in r
        ]
        assert all(math.isclose(a.std, b.std, abs_tol=1e-9) for a, b in zip(f, r))


def test_composite_code_densifies_instead_of_overflowing():
    from neurips26.gfm_audit.finder import _composite

    rng = np.random.default_rng(0)
    big = 2**40
    parts = [(rng.integers(0, 3, 500) * (big // 3), big) for _ in range(3)]
    key = _composite(parts)
    tuples = list(zip(*(p[0].tolist() for p in parts)))
    # equal tuples <=> equal codes, and the code order is the tuple order
    assert len(set(key.tolist())) == len(set(tuples))
    order = np.argsort(key, kind="stable")
    assert [tuples[i] for i in order] == sorted(tuples)
