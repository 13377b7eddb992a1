"""The spec's "Bad input" list, item by item: each raises at the API boundary with an error naming the
argument (the match patterns below include the argument's name)."""

import math

import numpy as np
import pytest
import torch

from neurips26.bip import (
    FREncoder,
    GapAllocator,
    GapGen,
    GapGenConfig,
    Subspace,
    audit,
    b2_in_manifold,
    check_images,
    collisions,
    embed,
    enrollment_robustness,
    identity_centers,
    impostor_scores,
    knn,
    load_checkpoint,
    maxcos,
    maxcos_faiss,
    pca_report,
    synthetic_gallery,
    tau_far,
    train_encoder,
    within_spread,
)
from neurips26.bip.sharded import ShardedAllocator


@pytest.fixture(scope="module")
def gal():
    R, _ = synthetic_gallery(300, D=16, k=8, seed=0)
    return R, Subspace(R)


def _with(R, row, value):
    X = R.clone()
    X[row] = value
    return X


def test_non_finite_and_zero_norm_embeddings_name_the_argument(gal):
    R, sub = gal
    nan, zero = _with(R, 3, math.nan), _with(R, 3, 0.0)
    for bad, what in ((nan, "finite|NaN"), (zero, "zero-norm")):
        with pytest.raises(ValueError, match=rf"reals.*({what})"):
            GapAllocator(bad, 0.7, 0.6, sub)
        with pytest.raises(ValueError, match=rf"centers.*({what})"):
            impostor_scores(bad)
        with pytest.raises(ValueError, match=rf"centers.*({what})"):
            Subspace(bad)
        with pytest.raises(ValueError, match=rf"centers.*({what})"):
            pca_report(bad)
        with pytest.raises(ValueError, match=rf"^V .*({what})"):
            audit(bad, R, 0.7)
        with pytest.raises(ValueError, match=rf"virtuals.*({what})"):
            enrollment_robustness(R, R, bad, 0.7)
        with pytest.raises(ValueError, match=rf"images.*({what})"):
            within_spread(bad, torch.arange(R.shape[0]) % 10)
        with pytest.raises(ValueError, match=rf"emb.*({what})"):
            identity_centers(bad, torch.arange(R.shape[0]) % 10)
        with pytest.raises(ValueError, match=rf"^v .*({what})"):
            collisions(bad, R, 0.7)
    # the search routines: a NaN query would score NaN, which no ">= tau_c" test counts as a collision
    for fn in (maxcos, maxcos_faiss, lambda q, r: knn(q, r, 3)):
        with pytest.raises(ValueError, match="q must be finite"):
            fn(nan, R)
        with pytest.raises(ValueError, match="ref must be finite"):
            fn(R, nan)


def test_dimension_mismatch_between_gallery_and_virtuals(gal):
    R, sub = gal
    V = b2_in_manifold(50, sub, 1)
    W, _ = synthetic_gallery(50, D=12, k=6, seed=1)
    with pytest.raises(ValueError, match="q has dimension 12, ref has 16"):
        maxcos(W, R)
    with pytest.raises(ValueError, match="dimension mismatch"):
        knn(W, R, 2)
    with pytest.raises(ValueError, match=r"^V must be a \(n, 16\).*dimension mismatch"):
        audit(W, R, 0.7)
    with pytest.raises(ValueError, match="virtuals has dimension 12, expected 16"):
        enrollment_robustness(V, R, W, 0.7)
    with pytest.raises(ValueError, match="new_reals has dimension 12"):
        enrollment_robustness(W, R, V, 0.7)
    with pytest.raises(ValueError, match="centers has dimension 16, expected 12"):
        collisions(W, R, 0.7)
    with pytest.raises(ValueError, match="subspace dimension 16 != reals dimension 12"):
        GapAllocator(W, 0.7, 0.6, sub)
    enc = FREncoder(8).eval()
    with pytest.raises(ValueError, match=r"basis must be \(D=16"):
        GapGen(enc, R, 0.6, torch.eye(8)[:, :4])
    X = torch.rand(16, 1, 24, 24)
    R8 = identity_centers(embed(enc, X), torch.arange(16) % 4)
    gg = GapGen(enc, R8, 0.6, Subspace(R8).P, GapGenConfig(stage0_epochs=0)).train_stage0(X)
    with pytest.raises(ValueError, match="virtuals has dimension 16, expected 8"):
        gg.train_curriculum(R[:10], 0.9)
    with pytest.raises(ValueError, match="^v has dimension 16, expected 8"):
        gg.provision(R[:10], 2, 0.9)


def test_far_outside_open_interval_and_too_few_pairs_above_the_threshold():
    s = torch.randn(100_000)
    for bad in (0.0, 0.5, -1e-3, 0.7, math.nan):
        with pytest.raises(ValueError, match="far"):
            tau_far(s, bad)
    with pytest.raises(ValueError, match=r"far=0\.0001 with 5000 impostor pairs leaves 0 .*refusing to extrapolate"):
        tau_far(s[:5000], 1e-4)
    with pytest.raises(ValueError, match="scores must be finite"):
        tau_far(_with(s, 0, math.inf), 1e-2)
    assert tau_far(s, 1e-2) == pytest.approx(float(torch.quantile(s.double(), 0.99)), abs=0.02)


def test_empty_gallery(gal):
    R, sub = gal
    empty = torch.zeros(0, 16)
    for call, name in ((lambda: GapAllocator(empty, 0.7, 0.6, sub), "reals"),
                       (lambda: impostor_scores(empty), "centers"), (lambda: Subspace(empty), "centers"),
                       (lambda: pca_report(empty), "centers"), (lambda: audit(R, empty, 0.7), "R"),
                       (lambda: enrollment_robustness(R, empty, R, 0.7), "reals")):
        with pytest.raises(ValueError, match=rf"^{name} .*(empty|at least)"):
            call()
    with pytest.raises(ValueError, match="centers needs at least 2 rows"):
        impostor_scores(R[:1])
    a = audit(torch.zeros(0, 16), R, 0.7, sub)             # an empty allocation is not an error: zeros
    assert (a.n_virtual, a.real_collisions, a.virtual_collisions) == (0, 0, 0)


def test_subspace_k_larger_than_D_and_M_not_positive(gal):
    R, sub = gal
    with pytest.raises(ValueError, match="k=17 exceeds the embedding dimension D=16"):
        Subspace(R, k=17)
    with pytest.raises(ValueError, match="^k "):
        Subspace(R, k=0)
    for M in (0, -5):
        with pytest.raises(ValueError, match="^M "):
            GapAllocator(R, 0.7, 0.6, sub).allocate(M)
        with pytest.raises(ValueError, match="^M "):
            b2_in_manifold(M, sub, 0)
        with pytest.raises(ValueError, match="^M "):
            ShardedAllocator(R, 0.7, 0.6, sub, n_workers=2, n_cells=4).allocate(M)


def test_strict_mode_without_image_embeddings(gal):
    R, _ = gal
    with pytest.raises(ValueError, match=r"mode='strict' needs the real image embeddings \(images=\.\.\.\)"):
        collisions(R[:5], R, 0.9, mode="strict")
    with pytest.raises(ValueError, match="mode must be one of"):
        collisions(R[:5], R, 0.9, mode="loose")


def test_images_outside_unit_interval_or_of_the_wrong_rank():
    enc = FREncoder(8).eval()
    y = torch.arange(8) % 2
    for bad, what in ((torch.rand(8, 24, 24), "rank 4"), (torch.rand(8, 3, 24, 24), "rank 4"),
                      (torch.rand(8, 1, 24, 24) * 1.5, r"\[0, 1\]"), (torch.rand(8, 1, 24, 24) - 0.5, r"\[0, 1\]"),
                      (_with(torch.rand(8, 1, 24, 24), 0, math.nan), "finite")):
        for call in (check_images, lambda x: embed(enc, x), lambda x: train_encoder(x, y),
                     lambda x: GapGen(enc, torch.eye(8), 0.5, torch.eye(8)[:, :4]).train_stage0(x)):
            with pytest.raises(ValueError, match=rf"^images .*{what}"):
                call(bad)
    with pytest.raises(TypeError, match="^images must be a torch.Tensor"):
        check_images(np.zeros((2, 1, 8, 8)))


def test_checkpoint_path_that_does_not_exist(tmp_path):
    with pytest.raises(ValueError, match=r"^path: checkpoint .*missing\.onnx.* does not exist"):
        load_checkpoint(tmp_path / "missing.onnx")
    with pytest.raises(TypeError, match="^path must be a str"):
        load_checkpoint(3)
