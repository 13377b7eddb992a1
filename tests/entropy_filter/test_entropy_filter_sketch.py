"""Issue 30, item 4: mergeable per-domain KLL sketches; the multi-worker threshold pass against the
exact single-process thresholds (rank error reported); a datatrove pipeline running both passes."""

import json

import numpy as np
import pytest

from neurips26.entropy_filter import HKDocumentFilter, domain_thresholds, hk, select

pytest.importorskip("datasketches", reason="datasketches not installed (pip install datasketches)")

from neurips26.entropy_filter.sketch import (
    DomainSketches,
    hk_sketch_step,
    merge_sketch_folder,  # noqa: E402
    threshold_pass,
)

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho".split()


def _doc(i, n=120):
    rng = np.random.default_rng(i)
    return " ".join(WORDS[k] + str(rng.integers(0, 2 + i % 9)) for k in rng.integers(0, len(WORDS), n))


def _corpus(n=48):
    rows = [{"id": i, "text": _doc(i), "lang": ["en", "de", "fr"][i % 3]} for i in range(n)]
    rows += [{"id": 100 + i, "text": "short", "lang": "en"} for i in range(5)]  # unscored
    rows.append({"id": 200, "text": _doc(200), "lang": "solo"})  # a 1-document domain
    return rows


def test_exact_mode_equals_domain_thresholds_and_merge_is_order_free():
    rows = _corpus()
    scores = [hk(r["text"]) for r in rows]
    doms = [r["lang"] for r in rows]
    whole = DomainSketches().update_many(scores, doms)
    parts = [DomainSketches().update_many(scores[i::4], doms[i::4]) for i in range(4)]
    merged = DomainSketches()
    for p in parts[::-1]:
        merged.merge(DomainSketches.from_bytes(p.to_bytes()))  # serialised across workers
    for frac in (0.1, 0.5, 0.9, 1.0):
        exact = domain_thresholds(scores, doms, frac)
        assert whole.thresholds(frac) == exact == merged.thresholds(frac)
    assert merged.n_unscored == {'"en"': 5} and merged.summary()["documents"] == len(rows)


def test_rank_error_of_the_estimation_mode_within_the_bound():
    rng = np.random.default_rng(0)
    n, shards = 60_000, 8
    scores = rng.gamma(4.0, 1.0, n)
    sk = DomainSketches(k=200)
    for part in np.array_split(scores, shards):
        sk.merge(DomainSketches(k=200).update_many(part.tolist()))
    assert sk.summary()["estimation_mode"]
    srt = np.sort(scores)
    for frac in (0.05, 0.25, 0.5, 0.75):
        thr = sk.thresholds(frac)[None]
        kept = int((scores >= thr).sum())
        rank_err = abs(kept - round(frac * n)) / n  # the filter pass keeps this many
        assert rank_err <= sk.rank_error(), (frac, rank_err)
        assert srt[0] <= thr <= srt[-1]


def test_multi_worker_threshold_pass_matches_single_process(tmp_path):
    """Pass 1 as 3 tasks on 2 local worker processes (map_tasks) over gzip/plain shards, then pass 2."""
    import gzip

    rows = _corpus()
    paths = []
    for i in range(3):
        chunk = rows[i::3]
        p = tmp_path / (f"shard{i}.jsonl.gz" if i == 0 else f"shard{i}.jsonl")
        data = "".join(json.dumps(r) + "\n" for r in chunk).encode()
        p.write_bytes(gzip.compress(data) if i == 0 else data)
        paths.append(p)
    (tmp_path / "shard2.jsonl").open("a").write("{broken\n")  # a bad record never sinks the pass
    thr, sk = threshold_pass(paths, 0.5, domain_key="lang", backend="process", workers=2)
    scores = [hk(r["text"]) for r in rows]
    doms = [r["lang"] for r in rows]
    assert thr == domain_thresholds(scores, doms, 0.5)  # exact at this size: rank error 0
    f = HKDocumentFilter(thr, domain_key="lang")
    kept = sorted(r["id"] for r in rows if f.filter(r) is True)
    assert kept == sorted(rows[i]["id"] for i in select(rows, scores, doms, 0.5))
    assert 200 in kept  # the 1-document domain keeps it


def test_datatrove_pipeline_two_passes(tmp_path):
    pytest.importorskip("datatrove", reason="datatrove not installed (pip install datatrove)")
    pytest.importorskip("orjson", reason="datatrove's JsonlReader needs orjson (pip install orjson)")
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    from neurips26.entropy_filter import datatrove_filter

    rows = _corpus(30)
    src = tmp_path / "in"
    src.mkdir()
    for i in range(2):
        (src / f"part{i}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[i::2]))
    sketches = tmp_path / "sketches"
    LocalPipelineExecutor(
        pipeline=[JsonlReader(str(src), id_key="id"), hk_sketch_step(sketches, "lang")],
        tasks=2,
        workers=1,
        logging_dir=str(tmp_path / "log1"),
    ).run()
    thr = merge_sketch_folder(sketches).thresholds(0.5)
    scores = [hk(r["text"]) for r in rows]
    assert thr == domain_thresholds(scores, [r["lang"] for r in rows], 0.5)
    out = tmp_path / "out"
    LocalPipelineExecutor(
        pipeline=[
            JsonlReader(str(src), id_key="id"),
            datatrove_filter(thr, domain_key="lang"),
            JsonlWriter(str(out), compression=None),
        ],
        tasks=2,
        workers=1,
        logging_dir=str(tmp_path / "log2"),
    ).run()
    # datatrove writes no "id" for the falsy id 0: match the kept documents by their text
    kept_text = {json.loads(x)["text"] for f in out.glob("*.jsonl") for x in f.read_text().splitlines()}
    kept = sorted(r["id"] for r in rows if r["text"] in kept_text)
    doms = [r["lang"] for r in rows]
    want = select(rows, scores, doms, 0.5)
    assert len({rows[i]["text"] for i in want}) == len(want)
    assert kept == sorted(rows[i]["id"] for i in want)


def test_bad_input():
    with pytest.raises(ValueError, match="k"):
        DomainSketches(k=2)
    with pytest.raises(ValueError, match="NaN"):
        DomainSketches().update("a", float("nan"))
    with pytest.raises(ValueError, match="k = 200"):
        DomainSketches(k=800).merge(DomainSketches(k=200))
    with pytest.raises(ValueError, match="DomainSketches"):
        DomainSketches.from_bytes(b"{}")
    with pytest.raises(ValueError, match="paths"):
        threshold_pass([], 0.5)
