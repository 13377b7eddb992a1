"""The harness grid as map_tasks tasks: picklable specs, shards merged by row key, resume, backends equal."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch

from neurips26.gfm_audit.harness import Protocol, Runner
from neurips26.gfm_audit.harness.grid import Cell, TaskSpec, rows_equal, run_cell, run_cells, shard_dir_for, task_spec
from neurips26.gfm_audit.harness.models import RCF
from neurips26.gfm_audit.harness.runner import ModelEntry
from neurips26.gfm_audit.harness.zoo import ModelSpec, harness_models, model_entry, register_model


@pytest.fixture(autouse=True)
def _threads(monkeypatch, tmp_path):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path / "cache"))
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


TS = task_spec("multispectral", n=120, size=8)
PROTOS = (
    Protocol("knn"),
    Protocol("linear", c_grid=(1e-2, 1.0), max_iter=15),
    Protocol("fewshot", shots=3, c_grid=(1.0,), max_iter=10),
)


def _cells(seeds=(0, 1, 2)):
    models = (model_entry("rcf", features=8), model_entry("raw_pca", n_components=8))
    return [Cell(TS, m, p, s) for m in models for p in PROTOS for s in seeds]


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_specs_pickle_and_build_the_same_models():
    cells = _cells()
    back = pickle.loads(pickle.dumps(cells))
    assert back == cells  # frozen dataclasses of names, kwargs, knobs
    t = TS.build()
    a, b = cells[0].model.build(t, 3), back[0].model.build(t, 3)
    assert torch.equal(a.weight, b.weight) and a.weight.shape == (4, 12, 3, 3)
    # the spec's kwargs are the row's model config, as before the specs
    e = harness_models(None, ("rcf", "simclr"), rcf_features=16, simclr_steps=7)
    assert e["rcf"].config == (("features", 16),) and e["simclr"].config == (("steps", 7),)
    assert not e["simclr"].seed_dependent and e["rcf"].seed_dependent
    with pytest.raises(ValueError, match="model"):
        ModelSpec("no_such_model")
    with pytest.raises(TypeError, match="ModelSpec"):
        Cell(TS, ModelEntry("rcf", lambda t, s: RCF(t.bands, 8, seed=s)), PROTOS[0], 0)  # a closure
    with pytest.raises(ValueError, match="split"):
        TaskSpec("multispectral", split="blocks")
    with pytest.raises(ValueError, match="cells"):
        run_cells([])


def test_grid_equals_runner_loop_and_resumes_from_shards(tmp_path):
    cells = _cells()
    ref = Runner(tmp_path / "ref.jsonl").run_grid([(TS.build(), c.model, c.protocol, c.seed) for c in cells])
    path = tmp_path / "rows.jsonl"
    res = run_cells(cells, path)
    assert rows_equal(res.rows, ref)  # the same rows as Runner.run, in cell order
    assert rows_equal(_lines(path), ref)  # merged file: cell order, one row per key
    # seed-independent cells (raw_pca on knn / linear) computed once, reused for seeds 1, 2
    assert res.stats["reused"] == 4 and res.stats["computed"] == len(cells) - 4
    assert [r["reused_from_seed"] for r in res.rows[9:12]] == [None, 0, 0]
    assert not shard_dir_for(path).exists()  # merged shards (and their empty folder) removed
    # a crash after some tasks wrote shards but before the merge: the shards are picked up
    path2 = tmp_path / "crash.jsonl"
    for c in cells[:4]:
        run_cell(_job(c, shard_dir_for(path2)))
    res2 = run_cells(cells, path2)
    assert res2.stats["skipped"] == 4 and rows_equal(res2.rows, ref)
    # resume: nothing recomputed, the file unchanged
    before = path.read_text()
    res3 = run_cells(cells, path)
    assert res3.stats["skipped"] == len(cells) and res3.stats["computed"] == 0
    assert res3.rows == res.rows and path.read_text() == before
    # a grown grid appends only the new cells, after the old rows
    more = _cells(seeds=(0, 1, 2, 3))
    res4 = run_cells(more, path)
    # seed 3: rcf x 3 protocols and raw_pca few-shot computed; raw_pca knn / linear reuse the done seed-0 rows
    assert res4.stats["skipped"] == len(cells) and res4.stats["computed"] == 4 and res4.stats["reused"] == 2
    by = {(r["model"], r["protocol"], r["seed"]): r for r in res4.rows}
    assert by[("raw_pca", "kNN", 3)]["reused_from_seed"] == 0
    assert by[("raw_pca", "kNN", 3)]["value"] == by[("raw_pca", "kNN", 0)]["value"]
    assert _lines(path)[: len(cells)] == _lines(tmp_path / "rows.jsonl")[: len(cells)]
    assert len(_lines(path)) == len(more)
    # repeated keys in one call are computed once
    res5 = run_cells(cells[:2] + cells[:2], None)
    assert res5.stats["duplicates"] == 2 and res5.rows[:2] == res5.rows[2:]


def _job(cell, sdir):
    from neurips26.gfm_audit.harness.grid import _Job

    return _Job(cell, cell.key(), str(sdir), 1)


def test_replicate_split_is_a_fresh_hashed_split():
    a = task_spec("multispectral", split="random:multispectral/1", n=120, size=8).build()
    b = TS.build()
    assert a.split_hashes() != b.split_hashes() and (a.x is b.x)  # same patches, other split
    assert np.array_equal(a.pool, b.pool)  # the unlabeled pool (statistics, pretraining) is the dataset's
    s = task_spec("multispectral", split="spatial", n=120, size=8).build()
    assert s.name == "multispectral/spatial"


def test_register_model_spec(tmp_path):
    register_model("rcf_wide", lambda t, s, features=4: RCF(t.bands, features=features, seed=s))
    e = model_entry("rcf_wide", features=6)
    row = run_cells([Cell(TS, e, PROTOS[0], 0)], None).rows[0]
    assert row["model"] == "rcf_wide" and row["model_config"] == [["features", 6]] and row["feature_dim"] == 6


@pytest.mark.timeout(300)
def test_process_backend_two_workers_equals_serial(tmp_path):
    cells = [c for c in _cells(seeds=(0, 1)) if c.protocol.kind != "fewshot"]
    serial = run_cells(cells, tmp_path / "serial.jsonl")
    par = run_cells(cells, tmp_path / "proc.jsonl", backend="process", workers=2)
    assert rows_equal(par.rows, serial.rows)
    assert rows_equal(_lines(tmp_path / "proc.jsonl"), _lines(tmp_path / "serial.jsonl"))
    assert par.stats["computed"] == serial.stats["computed"] == len(cells) - 2
    assert {r["versions"]["torch"] for r in par.rows} == {torch.__version__}


@pytest.mark.slow
def test_ray_backend_equals_serial(tmp_path):
    ray = pytest.importorskip("ray")
    cells = [c for c in _cells(seeds=(0, 1)) if c.protocol.kind == "knn"]
    serial = run_cells(cells, tmp_path / "serial.jsonl")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        par = run_cells(cells, tmp_path / "ray.jsonl", backend="ray", workers=2)
    finally:
        ray.shutdown()
    assert rows_equal(par.rows, serial.rows)
    assert rows_equal(_lines(tmp_path / "ray.jsonl"), _lines(tmp_path / "serial.jsonl"))


def test_thread_limit_covers_torch_blas_and_openmp():
    from threadpoolctl import threadpool_info

    from neurips26.gfm_audit.harness.grid import thread_limit

    before = torch.get_num_threads()
    with thread_limit(1):
        import sklearn.neighbors  # noqa: F401  (imported inside: its libraries must be limited too)

        assert torch.get_num_threads() == 1
        assert {i["num_threads"] for i in threadpool_info()} == {1}
    assert torch.get_num_threads() == before
