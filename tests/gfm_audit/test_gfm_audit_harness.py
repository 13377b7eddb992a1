"""Acceptance check 8 (probe, kNN, k-shot, splits, bit-identical rows) and the harness's bad inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from neurips26.gfm_audit.harness import (
    C_GRID,
    C_SUBGRID,
    RCF,
    LogisticProbe,
    ModelEntry,
    Protocol,
    RawPCA,
    ResNet18,
    Runner,
    SplitHashError,
    Task,
    ViTTiny,
    digits_task,
    iqm,
    iqm_ci,
    k_shot,
    knn_neighbors,
    knn_predict,
    label_fraction,
    load_split,
    multispectral_task,
    pretrained_encoder,
    random_split,
    row_without_volatile,
    save_split,
    spatial_split,
    split_hash,
    sweep,
)
from neurips26.gfm_audit.harness.probes import standardise


@pytest.fixture(autouse=True)
def _threads(monkeypatch, tmp_path):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path / "cache"))
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def digits():
    return digits_task()


def test_linear_probe_separable_reaches_100():
    rng = np.random.default_rng(0)
    means = np.eye(4, 8) * 12.0  # class means >= 10 sigma apart
    y = rng.integers(0, 4, 400)
    x = means[y] + rng.standard_normal((400, 8))
    probe, info = sweep(x[:200], y[:200], x[200:300], y[200:300], C_SUBGRID)
    assert probe.score(x[300:], y[300:]) == 1.0 and info["c_grid"] == sorted(C_SUBGRID)
    assert len(C_GRID) == 40 and C_GRID[0] == pytest.approx(1e-6) and C_GRID[-1] == pytest.approx(1e4)


def test_knn_k1_train_equals_test_and_matches_sklearn(digits):
    from sklearn.neighbors import KNeighborsClassifier

    x = digits.x.reshape(len(digits.x), -1).astype(float)
    assert np.all(knn_predict(x, digits.y, x, k=1) == digits.y)
    tr, te = digits.splits["train"], digits.splits["test"]
    ours = knn_predict(x[tr], digits.y[tr], x[te], k=5)
    ref = KNeighborsClassifier(5, algorithm="brute").fit(x[tr], digits.y[tr]).predict(x[te])
    assert np.mean(ours == ref) > 0.99  # differences only on exact vote ties


@pytest.mark.parametrize("metric", ["l2", "cosine"])
@pytest.mark.parametrize("m,k", [(1000, 5), (333, 20), (7, 7), (130, 1)])
def test_knn_neighbours_equal_sklearn_brute(metric, m, k):
    from sklearn.neighbors import NearestNeighbors

    rng = np.random.default_rng(m + k)
    xtr, xq = rng.standard_normal((m, 24)), rng.standard_normal((77, 24))
    dist, idx = knn_neighbors(xtr, xq, k, metric, batch=16)  # several chunks, partial last block
    ref_d, ref_i = NearestNeighbors(n_neighbors=k, algorithm="brute", metric=metric).fit(xtr).kneighbors(xq)
    assert np.array_equal(idx, ref_i)
    np.testing.assert_allclose(dist, ref_d, rtol=1e-9, atol=1e-12)


def test_knn_neighbours_exact_where_float32_cannot_tell():
    # train rows 1e4 from the origin, 1e-5 apart: float32 distances tie, the float64 order is exact
    rng = np.random.default_rng(0)
    base = rng.standard_normal(16) * 2500.0
    xtr = base + rng.permutation(300)[:, None] * 1e-5 * np.eye(16)[0]
    q = (base - 1.0 * np.eye(16)[0])[None]
    exact = np.argsort(np.linalg.norm(xtr - q, axis=1), kind="stable")[:10]
    assert np.array_equal(knn_neighbors(xtr, q, 10)[1][0], exact)
    assert np.array_equal(knn_neighbors(xtr, xtr[:3], 1)[1][:, 0], [0, 1, 2])
    with pytest.raises(ValueError, match="x_test"):
        knn_neighbors(xtr, np.zeros((2, 3)), 1)
    with pytest.raises(ValueError, match="k"):
        knn_neighbors(xtr, q, 301)


def test_knn_tie_goes_to_smaller_distance_sum():
    xtr = np.array([[0.0], [3.0], [-1.5], [10.0]])
    ytr = np.array([1, 1, 0, 0])  # k=2 from 0.1: {0 (d .1) -> class 1, -1.5 (d 1.6) -> class 0}
    assert knn_predict(xtr, ytr, np.array([[0.1]]), k=2)[0] == 1
    assert knn_predict(xtr, ytr, np.array([[-1.4]]), k=2)[0] == 0


def test_torch_probe_matches_sklearn(digits):
    from sklearn.linear_model import LogisticRegression

    x = digits.x.reshape(len(digits.x), -1).astype(float)
    tr, te = digits.splits["train"], digits.splits["test"]
    xtr, xte = standardise(x[tr], x[te])
    ours = LogisticProbe(1.0, max_iter=2000, tol=1e-10, dtype=torch.float64).fit(xtr, digits.y[tr])
    ref = LogisticRegression(C=1.0, tol=1e-10, max_iter=10000).fit(xtr, digits.y[tr])
    assert np.max(np.abs(ours.coef_ - ref.coef_)) < 1e-3
    bi, br = ours.intercept_ - ours.intercept_.mean(), ref.intercept_ - ref.intercept_.mean()
    assert np.max(np.abs(bi - br)) < 1e-3
    assert ours.score(xte, digits.y[te]) == ref.score(xte, digits.y[te])


def test_k_shot_and_label_fraction(digits):
    tr, te = digits.splits["train"], digits.splits["test"]
    a = k_shot(digits.y, tr, 5, seed=3)
    assert np.all(np.bincount(digits.y[a]) == 5) and not set(a) & set(te) and set(a) <= set(tr)
    assert np.array_equal(a, k_shot(digits.y, tr, 5, seed=3)) and not np.array_equal(
        a, k_shot(digits.y, tr, 5, 4)
    )
    smallest = np.bincount(digits.y[tr]).min()
    with pytest.raises(ValueError, match="smallest class count"):
        k_shot(digits.y, tr, int(smallest) + 1, 0)
    f = label_fraction(digits.y, tr, 0.1, 0)
    assert abs(len(f) - 0.1 * len(tr)) <= 10 and set(f) <= set(tr)


def test_splits_stable_hashed_and_checked(tmp_path):
    a, b = random_split(500), random_split(500)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert sorted(np.concatenate(list(a.values())).tolist()) == list(range(500))
    assert split_hash(a["test"]) == split_hash(b["test"][::-1])
    # pinned: SHA-256 bucketing depends on nothing but the sample ids and the salt (no RNG, no platform)
    assert random_split(100)["test"][:8].tolist() == [1, 6, 8, 17, 26, 27, 28, 33]
    pinned = "2596d72004c3fb3af147fce9eb0d74ffdc54b516eb2f8adc5b3816b1db9ca130"
    assert split_hash(random_split(100)["test"]) == pinned
    p = save_split(a, tmp_path / "s.json")
    assert all(np.array_equal(load_split(p)[k], a[k]) for k in a)
    obj = json.loads(p.read_text())
    obj["test"]["indices"] = obj["test"]["indices"][:-1]
    p.write_text(json.dumps(obj))
    with pytest.raises(SplitHashError, match="test"):
        load_split(p)
    lon = np.random.default_rng(0).uniform(-10, 30, 400)
    sp = spatial_split(lon)
    block = np.searchsorted(np.linspace(lon.min(), lon.max(), 11)[1:-1], lon, side="right")
    blocks = [set(block[v].tolist()) for v in sp.values()]
    assert not blocks[0] & blocks[1] and not blocks[0] & blocks[2] and not blocks[1] & blocks[2]
    assert sum(len(v) for v in sp.values()) == 400 and all(len(v) for v in sp.values())


def _entry():
    return ModelEntry("rcf", lambda t, s: RCF(t.bands, features=16, seed=s), True, (("features", 16),))


def test_identical_config_and_seed_bit_identical_rows(tmp_path):
    task = multispectral_task(200, size=8)
    p = Protocol("linear", c_grid=(1e-2, 1.0), max_iter=20)
    r1 = Runner(tmp_path / "a.jsonl").run(task, _entry(), p, 1)
    r2 = Runner(tmp_path / "b.jsonl").run(task, _entry(), p, 1)
    assert row_without_volatile(r1) == row_without_volatile(r2)
    assert (
        r1["provenance"] == "rerun"
        and r1["knobs"]["normalisation"] == "zscore"
        and r1["seed_touched"] == ["model_init"]
    )
    assert r1["split_hashes"]["test"] == split_hash(task.splits["test"]) and r1["weights_sha256"]
    r3 = Runner().run(task, _entry(), p, 2)
    assert r3["weights_sha256"] != r1["weights_sha256"]


def test_resume_skips_done_rows_and_reuses_seedless_cells(tmp_path):
    task = multispectral_task(200, size=8)
    pca = ModelEntry("raw_pca", lambda t, s: RawPCA(16), False)
    cells = [(task, e, Protocol("knn"), s) for e in (_entry(), pca) for s in (0, 1, 2)]
    path = tmp_path / "rows.jsonl"
    r = Runner(path)
    rows = r.run_grid(cells)
    assert r.stats["reused"] == 2 and [x["reused_from_seed"] for x in rows[3:]] == [None, 0, 0]
    assert len(path.read_text().splitlines()) == 6
    r2 = Runner(path)
    assert r2.run_grid(cells) == rows and r2.stats["skipped"] == 6
    assert len(path.read_text().splitlines()) == 6


def test_models_shapes_and_hashes():
    x = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)
    assert RCF(3, features=8).forward_features(x).shape == (4, 8)
    assert ResNet18(3, width=4).forward_features(x, "max").shape == (4, 32)
    assert ViTTiny(3, 8, patch=4, dim=24, depth=2, heads=2).forward_features(x).shape == (4, 24)
    assert (
        RCF(3, seed=0).weights_sha256() == RCF(3, seed=0).weights_sha256() != RCF(3, seed=1).weights_sha256()
    )
    pool = np.random.default_rng(1).standard_normal((64, 3, 8, 8)).astype(np.float32)
    for alg in ("simclr", "mae"):
        a = pretrained_encoder(pool, alg, steps=3, batch=16)
        b = pretrained_encoder(pool, alg, steps=3, batch=16)  # from the cache
        assert a.weights_sha256() == b.weights_sha256() and a.forward_features(x).shape == (4, 128)
    with pytest.raises(RuntimeError, match="fit"):
        RawPCA(4).forward_features(x)


class _Bad(RCF):
    def forward(self, x, pooling="mean"):
        return self.feature_map(x)  # forgets pooling: 4-D output


def test_bad_inputs():
    task = multispectral_task(120, size=8)
    with pytest.raises(ValueError, match="protocol must be one of"):
        Protocol("zero-shot")
    with pytest.raises(ValueError, match="2-D"):
        Runner().run(task, ModelEntry("bad", lambda t, s: _Bad(t.bands, features=8)), Protocol("knn"), 0)
    with pytest.raises(ValueError, match="smallest class count"):
        Runner().run(task, _entry(), Protocol("fewshot", shots=500), 0)
    y = task.y.copy()
    y[task.splits["test"][0]] = -1
    with pytest.raises(ValueError, match="labels missing"):
        Task("t", task.x, y, dict(task.splits), task.pool, 6, "x")
    with pytest.raises(ValueError, match="seed"):
        Runner().run(task, _entry(), Protocol("knn"), -1)
    with pytest.raises(ValueError, match="x_train must be 2-dimensional"):
        knn_predict(np.zeros((3, 2, 2)), np.zeros(3, int), np.zeros((1, 4)))
    with pytest.raises(ValueError, match="c_grid"):
        Protocol(c_grid=())


def test_iqm():
    assert iqm([1, 2, 3, 4, 100, 5, 6, 7]) == pytest.approx(4.5)
    s = np.random.default_rng(0).uniform(size=(10, 3))
    p, lo, hi = iqm_ci(s)
    assert lo <= p <= hi and (p, lo, hi) == iqm_ci(s)


def test_finetune_protocol_records_its_budget():
    task = multispectral_task(150, size=8)
    p = Protocol("finetune", ft_lrs=(1e-3,), ft_epochs=2, ft_patience=1, ft_batch=32)
    e = ModelEntry("resnet18", lambda t, s: ResNet18(t.bands, width=4, seed=s), True, (("width", 4),))
    row = Runner().run(task, e, p, 0)
    assert row["ft_lr"] == 1e-3 and 0 <= row["value"] <= 100 and "finetune_order" in row["seed_touched"]
    with pytest.raises(ValueError, match="no trainable parameters"):
        Runner().run(task, ModelEntry("raw_pca", lambda t, s: RawPCA(8), False), p, 0)


def test_other_offline_tasks_and_eo_adapters(tmp_path):
    from neurips26.gfm_audit.harness.data import lfw_task, texture_task
    from neurips26.gfm_audit.harness.eo import npz_task, torchgeo_task

    tex = texture_task(patch=16, per_class=20)
    assert tex.x.shape == (60, 1, 16, 16) and tex.n_classes == 3 and "non-EO" in tex.domain
    lfw = lfw_task()
    assert lfw.x.shape == (200, 1, 25, 25) and set(lfw.y) == {0, 1}
    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "eo.npz",
        x=rng.random((50, 4, 8, 8)).astype(np.float32),
        y=np.arange(50) % 5,
        lon=rng.uniform(0, 10, 50),
    )
    t = npz_task(tmp_path / "eo.npz", split="spatial")
    assert t.n_classes == 5 and sum(len(v) for v in t.splits.values()) == 50
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        npz_task(tmp_path / "missing.npz")
    try:
        import torchgeo  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="optional"):
            torchgeo_task("EuroSAT", tmp_path)
    from neurips26.gfm_audit.harness.eo import geobench_task

    try:
        import geobench  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="optional"):
            geobench_task(tmp_path)


def test_geobench_adapter_on_a_fake_geobench(tmp_path, monkeypatch):
    """The glue to geobench's documented API (GeobenchDataset(dir, split, partition_name), Sample.pack_to_3d,
    Sample.label): a stand-in module, since no GEO-Bench data is here."""
    import sys
    import types

    from neurips26.gfm_audit.harness.eo import geobench_task

    sizes = {"train": 6, "valid": 3, "test": 4}
    calls = []

    class Sample:
        band_names = ("B02", "B03", "B04")

        def __init__(self, split, i):
            self.split, self.i, self.label = split, i, i % 3

        def pack_to_3d(self, band_names):
            px = np.zeros((5, 5, len(band_names)), np.float32)
            px[..., 0] = self.i + 100 * list(sizes).index(self.split)  # (H, W, C), band 0 carries the id
            return px, list(band_names)

    class GeobenchDataset:
        def __init__(self, dataset_dir, split, partition_name):
            calls.append((dataset_dir, split, partition_name))
            self.split = split

        def __len__(self):
            return sizes[self.split]

        def __getitem__(self, i):
            return Sample(self.split, i)

    mod = types.ModuleType("geobench.dataset")
    mod.GeobenchDataset = GeobenchDataset
    monkeypatch.setitem(sys.modules, "geobench", types.ModuleType("geobench"))
    monkeypatch.setitem(sys.modules, "geobench.dataset", mod)
    d = tmp_path / "m-eurosat"
    d.mkdir()
    t = geobench_task(d, partition="0.10x_train", band_names=("B02", "B04"))
    assert [c[1:] for c in calls] == [("train", "0.10x_train"), ("valid", "0.10x_train"), ("test", "0.10x_train")]
    assert t.name == "m-eurosat" and t.x.shape == (13, 2, 5, 5) and t.units == "dn" and t.n_classes == 3
    assert [len(t.splits[s]) for s in ("train", "val", "test")] == [6, 3, 4]
    assert t.x[t.splits["test"], 0, 0, 0].tolist() == [200.0, 201.0, 202.0, 203.0]  # their test split kept
    assert t.y[t.splits["val"]].tolist() == [0, 1, 2]
    assert geobench_task(d, limit=2).x.shape == (6, 3, 5, 5)  # all bands by default
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        geobench_task(tmp_path / "missing")


def test_run_seeds_summary_and_empty_seeds():
    task = multispectral_task(150, size=8)
    res = Runner().run_seeds(task, _entry(), Protocol("knn"), [0, 1, 2])
    assert res["n_seeds"] == 3 and res["mean"] == pytest.approx(np.mean(res["values"]))
    assert res["std"] == pytest.approx(np.std(res["values"], ddof=1))
    with pytest.raises(ValueError, match="seeds must name at least one seed"):
        Runner().run_seeds(task, _entry(), Protocol("knn"), [])
