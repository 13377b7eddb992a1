"""The image side: FR encoder (check 8's TAR part, slow), checkpoint loader, GapGen pieces and metrics,
v-LFW protocols 1-3, the lfw_subset sanity set."""

import math

import numpy as np
import pytest
import torch

from neurips26.bip.encoder import (EncoderConfig, FREncoder, check_images, embed, identity_centers,
                                   load_checkpoint, train_encoder)
from neurips26.bip.gapgen import (GapGen, GapGenConfig, Generator, PatchCritic, frechet_distance, hinge_d,
                                  identity_consistency, image_collisions, nc_penalty, slerp)
from neurips26.bip.gallery import Subspace
from neurips26.bip.renderer import N_ID, render
from neurips26.bip.vlfw import (protocol1, protocol2, protocol3_detector, protocol3_registry, protocol4,
                                tar_at_far, verification_pairs)


def _data(n_id, n_img, seed, size=24):
    g = torch.Generator().manual_seed(seed)
    p = torch.randn(n_id, N_ID, generator=g)
    return render(p.repeat_interleave(n_img, 0), size, g), torch.arange(n_id).repeat_interleave(n_img)


@pytest.fixture
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_check_images_rejects_bad_input():
    with pytest.raises(ValueError, match="rank 4"):
        check_images(torch.rand(2, 24, 24))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        check_images(torch.rand(2, 1, 24, 24) * 2)
    with pytest.raises(TypeError, match="images"):
        check_images(np.zeros((2, 1, 8, 8)))
    with pytest.raises(ValueError, match="labels"):
        train_encoder(torch.rand(4, 1, 24, 24), torch.zeros(3, dtype=torch.long))


def test_encoder_shapes_unit_norm_and_centers(one_thread):
    enc = FREncoder(32).eval()
    x = torch.rand(5, 1, 24, 24)
    e = embed(enc, x, batch=2)
    assert e.shape == (5, 32) and torch.allclose(e.norm(dim=1), torch.ones(5), atol=1e-5)
    assert embed(enc, torch.rand(3, 1, 32, 32)).shape == (3, 32)       # size-agnostic
    assert torch.allclose(embed(enc, x, features=True) / embed(enc, x, features=True).norm(dim=1, keepdim=True), e,
                          atol=1e-5)
    c = identity_centers(e, torch.tensor([0, 0, 1, 1, 1]))
    ref = torch.nn.functional.normalize(e[2:].mean(0), dim=0)
    assert c.shape == (2, 32) and torch.allclose(c[1], ref, atol=1e-6)


def test_encoder_training_separates_identities_fast(one_thread):
    X, y = _data(20, 6, 0)
    enc, losses = train_encoder(X, y, EncoderConfig(epochs=8, batch=16), seed=0)
    assert losses[-1] < losses[0]
    e = embed(enc, X)
    s = e @ e.T
    same = y[:, None] == y[None]
    off = ~torch.eye(len(y), dtype=torch.bool)
    from sklearn.metrics import roc_auc_score
    i, j = torch.triu_indices(len(y), len(y), 1)
    auc = roc_auc_score(same[i, j].numpy(), s[i, j].numpy())
    e0 = embed(FREncoder(32), X)                          # untrained: much less separable
    auc0 = roc_auc_score(same[i, j].numpy(), (e0 @ e0.T)[i, j].numpy())
    assert auc > 0.85 and auc > auc0 + 0.1 and off.any(), (auc, auc0)


@pytest.mark.slow
def test_check8_encoder_tar_on_unseen_identities(one_thread):
    """Acceptance check 8 (prototype recipe: 400 ids x 10 images, 8 epochs): TAR >= 0.9 at FAR 1e-2."""
    X, y = _data(400, 10, 0)
    enc, _ = train_encoder(X, y, EncoderConfig(epochs=8), seed=0)
    Xt, yt = _data(100, 4, 1)
    e = embed(enc, Xt)
    i, j = np.triu_indices(len(yt), 1)
    s = (e @ e.T).numpy()[i, j]
    mated = (yt[i] == yt[j]).numpy()
    assert tar_at_far(s, mated, 1e-2) >= 0.9


def test_checkpoint_loader_error_and_local_files(tmp_path, one_thread):
    with pytest.raises(ValueError, match="path"):
        load_checkpoint(tmp_path / "missing.pt")
    enc = FREncoder(8).eval()
    x = torch.rand(3, 1, 24, 24)
    # a state dict needs its architecture; loaded, it reproduces the module's embeddings
    torch.save(enc.state_dict(), tmp_path / "w.pt")
    with pytest.raises(ValueError, match="model"):
        load_checkpoint(tmp_path / "w.pt")
    ck = load_checkpoint(tmp_path / "w.pt", model=FREncoder(8), size=24)
    assert ck.kind == "state_dict"
    grey = lambda t: t[:, :1]                                                    # noqa: E731
    # the loader maps [0,1] grey to 3-channel [-1,1]; wrap the 1-channel toy to read channel 0 back
    ts = torch.jit.trace(_FirstChannel(enc), torch.rand(2, 3, 24, 24))
    ts.save(str(tmp_path / "m.ts"))
    ck2 = load_checkpoint(tmp_path / "m.ts", size=24)
    assert ck2.kind == "torchscript"
    assert torch.allclose(ck2(x), enc(x * 2 - 1), atol=1e-5)
    assert grey(torch.rand(1, 3, 2, 2)).shape[1] == 1
    with pytest.raises(ValueError, match="images"):
        ck2(torch.rand(2, 2, 24, 24))


class _FirstChannel(torch.nn.Module):
    def __init__(self, enc):
        super().__init__()
        self.enc = enc

    def forward(self, x):
        return self.enc(x[:, :1])


@pytest.mark.skipif("not __import__('os').environ.get('BIP_ARCFACE_CHECKPOINT')",
                    reason="no local ArcFace checkpoint (set BIP_ARCFACE_CHECKPOINT to a .onnx / TorchScript file)")
def test_local_arcface_checkpoint_embeds_faces():
    import os
    ck = load_checkpoint(os.environ["BIP_ARCFACE_CHECKPOINT"])
    e = ck(render(torch.randn(4, N_ID), 112))
    assert e.shape[0] == 4 and torch.allclose(e.norm(dim=1), torch.ones(4), atol=1e-4)


def test_slerp_endpoints_and_midpoint():
    g = torch.Generator().manual_seed(0)
    a = torch.nn.functional.normalize(torch.randn(5, 8, generator=g), dim=1)
    b = torch.nn.functional.normalize(torch.randn(5, 8, generator=g), dim=1)
    assert torch.allclose(slerp(a, b, 0.0), a, atol=1e-5) and torch.allclose(slerp(a, b, 1.0), b, atol=1e-5)
    mid = slerp(a, b, 0.5)
    assert torch.allclose((mid * a).sum(1), (mid * b).sum(1), atol=1e-5)      # equal angles to both ends
    w = torch.acos((a * b).sum(1))
    assert torch.allclose(torch.acos((mid * a).sum(1).clamp(-1, 1)), w / 2, atol=1e-3)


def test_hinge_losses_and_nc_penalty():
    assert float(hinge_d(torch.full((2, 1, 3, 3), 2.0), torch.full((2, 1, 3, 3), -2.0))) == 0.0
    assert math.isclose(float(hinge_d(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2))), 2.0)
    R = torch.eye(4)
    emb = torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 1.0]])
    idx = torch.tensor([[0, 1], [0, 1]])
    pen = nc_penalty(emb, R, idx, tau_m=0.5, T=0.02)
    # row 0: cos 1 to real 0 -> T softplus(25) ~ 0.5; cos 0 to real 1 -> T softplus(-25) ~ 0; row 1: ~0
    assert math.isclose(float(pen), 0.5 / 2, rel_tol=1e-3)


def test_nc_neighbour_rules():
    R = torch.eye(6)
    enc = FREncoder(6)
    g = torch.nn.functional.normalize(torch.tensor([[1.0, 0.5, 0, 0, 0, 0]]), dim=1)       # near reals 0, 1
    emb = torch.nn.functional.normalize(torch.tensor([[0, 0, 0, 0, 1.0, 0.4]]), dim=1)     # near reals 4, 5
    P = torch.eye(6)[:, :3]
    rule = {r: GapGen(enc, R, 0.5, P, GapGenConfig(k_real=2, nc_neighbours=r)) for r in ("target", "generated", "both")}
    assert rule["target"]._nc_index(g, emb)[0].tolist() == [[0, 1]]
    assert rule["generated"]._nc_index(g, emb)[0].tolist() == [[4, 5]]
    idx, w = rule["both"]._nc_index(g, emb)
    assert idx.tolist() == [[0, 1, 4, 5]] and w.tolist() == [[1, 1, 1, 1]]
    idx, w = rule["both"]._nc_index(g, g)                       # the same reals twice count once
    assert w.tolist() == [[1, 1, 0, 0]]
    assert math.isclose(float(nc_penalty(g, R, idx, 0.5, 0.02, w)),
                        float(nc_penalty(g, R, rule["target"]._nc_index(g, g)[0], 0.5, 0.02)), rel_tol=1e-6)
    with pytest.raises(ValueError, match="nc_neighbours"):
        GapGen(enc, R, 0.5, P, GapGenConfig(nc_neighbours="all"))
    with pytest.raises(ValueError, match="nc_margin"):
        GapGen(enc, R, 0.5, P, GapGenConfig(nc_margin=-0.1))


def test_nc_margin_moves_the_hinge_below_tau_m():
    """nc_margin = 0.3 with tau_m = 0.1 puts the hinge at -0.2 (the spec's is at tau_m): the gap loss's non-collision part equals
    nc_penalty at tau_m - nc_margin (and is larger than at tau_m)."""
    torch.manual_seed(0)
    R = torch.nn.functional.normalize(torch.randn(6, 8), dim=1)
    enc, P = FREncoder(8).eval(), torch.eye(8)[:, :4]
    fake = torch.rand(3, 1, 24, 24)
    g = torch.nn.functional.normalize(torch.randn(3, 8), dim=1)
    gg = {m: GapGen(enc, R, 0.1, P, GapGenConfig(k_real=3, nc_margin=m, lambda_adv=0.0)) for m in (0.0, 0.3)}
    nc = {m: float(gg[m]._gap_loss(fake, g, 1.0) - gg[m]._gap_loss(fake, g, 0.0)) for m in gg}
    emb, idx = enc(fake), gg[0.0]._nc_index(g, enc(fake))[0]
    assert math.isclose(nc[0.3], float(nc_penalty(emb, R, idx, -0.2)), rel_tol=1e-4)
    assert math.isclose(nc[0.0], float(nc_penalty(emb, R, idx, 0.1)), rel_tol=1e-4) and nc[0.3] > nc[0.0] + 0.01


def test_verified_provisioning_never_returns_a_colliding_image(one_thread):
    from neurips26.bip.gallery import maxcos

    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    enc = FREncoder(32).eval()
    R = torch.nn.functional.normalize(torch.randn(30, 32, generator=g), dim=1)
    P = torch.linalg.qr(torch.randn(32, 8, generator=g))[0]
    V = torch.nn.functional.normalize(torch.randn(10, 32, generator=g), dim=1)
    gg = GapGen(enc, R, 0.5, P, GapGenConfig(), seed=1)
    every = gg.provision(V, 3, tau_c=2.0)                     # nothing can collide
    assert every["kept"].all() and every["draws"] == 30 and every["rejected"] == 0
    assert every["images"].shape == (30, 1, 24, 24)
    none = gg.provision(V, 3, tau_c=-1.0, max_redraws=2)      # everything collides: all retired
    assert not none["kept"].any() and none["draws"] == 90 and none["images"].shape[0] == 0
    mc = maxcos(embed(enc, gg.sample(V, 3)), R)
    tau = float(mc.median())                                  # about half the draws collide
    out = gg.provision(V, 3, tau_c=tau, max_redraws=3)
    assert 0 < out["rejected"] < out["draws"]
    assert out["images"].shape[0] == 3 * int(out["kept"].sum())
    if out["images"].shape[0]:
        assert float(maxcos(embed(enc, out["images"]), R).max()) < tau
        assert torch.allclose(out["embeddings"], embed(enc, out["images"]), atol=1e-6)   # returned = recomputed


def test_generator_and_critic_shapes():
    G, D = Generator(32, 8, 24), PatchCritic()
    x = G(torch.randn(3, 32), torch.randn(3, 8))
    assert x.shape == (3, 1, 24, 24) and float(x.min()) >= 0 and float(x.max()) <= 1
    assert D(x).shape == (3, 1, 6, 6)
    with pytest.raises(ValueError, match="size"):
        Generator(32, 8, 22)


def test_metrics_collisions_and_frechet():
    R = torch.eye(3)
    emb = torch.nn.functional.normalize(torch.tensor([[1.0, 0.01, 0], [1, 1, 1.0]]), dim=1)
    c = image_collisions(emb, R, 0.9)
    assert c["count"] == 1 and c["n"] == 2 and c["rate"] == 0.5
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4000, 3))
    assert frechet_distance(a, rng.normal(size=(4000, 3))) < 0.02
    # Gaussians N(0, I) vs N(m, I): d = ||m||^2
    assert math.isclose(frechet_distance(a, rng.normal(size=(4000, 3)) + [2, 0, 0]), 4.0, rel_tol=0.05)
    with pytest.raises(ValueError, match="feature"):
        frechet_distance(a, a[:, :2])


def test_gapgen_curriculum_raises_consistency_fast(one_thread):
    """The fast version of the property below: one curriculum epoch per stage after 2 stage-0 epochs
    already lifts identity consistency at the virtual targets well above stage 0's."""
    X, y = _data(30, 6, 0)
    enc, _ = train_encoder(X, y, EncoderConfig(epochs=8, batch=16), seed=0)
    R = identity_centers(embed(enc, X), y)
    sub = Subspace(R)
    V = sub.sample(30, torch.Generator().manual_seed(3))
    cfg = GapGenConfig(stage0_epochs=2, stage_epochs=1, advance=1.0, batch=16)
    g0 = GapGen(enc, R, 0.5, sub.P, cfg, seed=0).train_stage0(X)
    before = float(identity_consistency(g0, V, 2).mean())
    gc = g0.copy().train_curriculum(V, real_level=1.0)
    assert float(identity_consistency(gc, V, 2).mean()) > before + 0.1
    assert [h["alpha"] for h in gc.history if h["stage"] > 0] == [0.5, 1.0]


@pytest.mark.slow
def test_gapgen_curriculum_moves_consistency_towards_virtual_targets(one_thread):
    """Stage 0 on reals, then the curriculum: identity consistency at the virtual targets rises
    and the non-collision term keeps generated embeddings further from the reals than without it."""
    X, y = _data(30, 6, 0)
    enc, _ = train_encoder(X, y, EncoderConfig(epochs=8, batch=16), seed=0)
    e = embed(enc, X)
    R = identity_centers(e, y)
    sub = Subspace(R)
    V = sub.sample(30, torch.Generator().manual_seed(3))
    cfg = GapGenConfig(stage0_epochs=2, stage_epochs=3, advance=1.0, batch=16)
    g0 = GapGen(enc, R, 0.5, sub.P, cfg, seed=0).train_stage0(X)
    before = float(identity_consistency(g0, V, 2).mean())
    gc = g0.copy().train_curriculum(V, real_level=1.0)
    assert float(identity_consistency(gc, V, 2).mean()) > before
    assert [h["alpha"] for h in gc.history if h["stage"] > 0] == [0.5] * 3 + [1.0] * 3
    assert float(identity_consistency(g0, V, 2).mean()) == pytest.approx(before, abs=0.05)  # copy is independent
    with pytest.raises(RuntimeError, match="train_stage0"):
        GapGen(enc, R, 0.5, sub.P, cfg).train_curriculum(V, 1.0)


def test_verification_pairs_layout():
    y = np.repeat(np.arange(50), 4)
    i, j, mated = verification_pairs(y, folds=10, per_fold=30, seed=0)
    assert i.size == 600 and mated.reshape(10, 60)[:, :30].all() and not mated.reshape(10, 60)[:, 30:].any()
    assert len(set(zip(i, j))) == 600 and (y[i] == y[j]).tolist() == mated.tolist()
    with pytest.raises(ValueError, match="mated"):
        verification_pairs(np.arange(20), per_fold=30)


def test_protocols_on_separable_and_overlapping_embeddings():
    rng = np.random.default_rng(0)
    centers = np.linalg.qr(rng.normal(size=(64, 50)))[0].T              # 50 orthonormal identities
    y = np.repeat(np.arange(50), 4)
    emb = centers[y] + 0.05 * rng.normal(size=(200, 64))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    p1 = protocol1(emb, y, seed=0)
    assert p1["accuracy"] == 1.0 and p1["tar"]["0.001"] == 1.0 and p1["auc"] == 1.0
    noisy = rng.normal(size=(200, 64))
    noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
    assert abs(protocol1(noisy, y, seed=0)["accuracy"] - 0.5) < 0.08
    # P2: virtuals orthogonal to the reals never match at tau 0.5
    real = np.eye(64)[:10]
    virt = np.eye(64)[10:20]
    p2 = protocol2(real, virt, 0.5, 1e-3)
    assert p2["fmr_cross"] == 0.0 and p2["n_pairs"] == 100
    p3 = protocol3_registry(real, virt, virt, 0.9)
    assert p3["auc"] == 1.0 and p3["flag_virtual"] == 1.0 and p3["flag_real"] == 0.0


def test_protocol3_detector_tells_a_visible_difference(one_thread):
    X, _ = _data(40, 4, 0)
    dark = (X * 0.3).clamp(0, 1)
    m, s, pos = protocol3_detector(X, dark, epochs=3, seed=0, also={"same": X[:10]})
    assert m["auc"] > 0.9 and s.shape == pos.shape and m["also"]["same"] < 0.5
    m2, _, _ = protocol3_detector(X[:80], X[80:], epochs=2, seed=0)        # same distribution: chance
    assert m2["auc"] < 0.8


def test_lfw_subset_ships_offline_as_sanity_set():
    data = pytest.importorskip("skimage.data")
    try:
        x = data.lfw_subset()
    except Exception as err:  # noqa: BLE001
        pytest.skip(f"lfw_subset not shipped with this scikit-image: {err}")
    assert x.shape == (200, 25, 25)


def _open_set(noise, seed=0):
    """8 real + 6 virtual gallery entries in D = 16 (orthogonal), 3 mated probes each (noise around
    the entry) and 20 non-mated probes (orthogonal to every entry when noise is small)."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(34, 34)))
    G = Q[:14]
    ids = np.r_[np.repeat(np.arange(14), 3), -np.ones(20, int)]
    base = np.concatenate([G[np.repeat(np.arange(14), 3)], Q[14:34]])
    p = base + noise * rng.normal(size=base.shape)
    p /= np.linalg.norm(p, axis=1, keepdims=True)
    isv = np.r_[np.repeat(np.arange(14) >= 8, 3), rng.random(20) < 0.5]
    return G[:8], G[8:], p, ids, isv


def test_protocol4_open_set_on_separable_and_random_embeddings():
    R, V, p, ids, isv = _open_set(0.05)
    m = protocol4(R, V, p, ids, isv, fpir=(1e-2, 0.1))
    assert m["rank1"] == 1.0 and m["dir"]["0.01"] == 1.0 and m["n_mated"] == 42 and m["n_nonmated"] == 20
    # non-mated probes are rejected; their is_virtual output (the top-1 entry's kind) is right only by chance
    nm_right = np.mean([(1 if (np.concatenate([R, V]) @ q).argmax() >= 8 else 0) == v
                        for q, v in zip(p[42:], isv[42:])])
    assert m["joint_accuracy"]["0.01"] == pytest.approx((42 + 20 * nm_right) / 62)
    # with the non-mated probes' kind matching the nearest entry's, everything is right
    R, V, p, ids, isv = _open_set(0.05)
    isv[42:] = (np.concatenate([R, V]) @ p[42:].T).argmax(0) >= 8
    assert protocol4(R, V, p, ids, isv)["joint_accuracy"]["0.01"] == 1.0
    # random probes: rank-1 near 1/14, DIR at FPIR 1e-2 lower still
    rng = np.random.default_rng(1)
    R, V = rng.normal(size=(8, 16)), rng.normal(size=(6, 16))
    R, V = R / np.linalg.norm(R, axis=1)[:, None], V / np.linalg.norm(V, axis=1)[:, None]
    p = rng.normal(size=(2000, 16))
    p /= np.linalg.norm(p, axis=1)[:, None]
    ids = np.r_[rng.integers(0, 14, 1000), -np.ones(1000, int)]
    isv = np.r_[ids[:1000] >= 8, np.zeros(1000, bool)]
    m = protocol4(R, V, p, ids, isv)
    assert abs(m["rank1"] - 1 / 14) < 0.03 and m["dir"]["0.01"] < 0.03
    with pytest.raises(ValueError, match="non-mated"):
        protocol4(R, V, p[:5], ids[:5], isv[:5])
    with pytest.raises(ValueError, match="probe_virtual"):
        protocol4(R, V, p, ids, ~isv)
    with pytest.raises(ValueError, match="probe_ids"):
        protocol4(R, V, p, np.r_[ids[:-1], 99], isv)


def test_final_stage_extra_epochs_and_cosine_lr_decay():
    """final_extra_epochs lengthens only the last stage; final_lr_decay sets both learning rates to
    lr 0.5 (1 + cos(pi t / T)) over the final stage's T steps (constant before) and restores lr at the end."""
    X, y = _data(6, 2, 0)
    enc = FREncoder(8).eval()
    R = identity_centers(embed(enc, X), y)
    sub = Subspace(R)
    V = sub.sample(20, torch.Generator().manual_seed(1))
    cfg = GapGenConfig(stages=2, stage_epochs=2, final_extra_epochs=3, final_lr_decay=True, batch=8, lr=1e-3)
    gg = GapGen(enc, R, 0.5, sub.P, cfg, seed=0).train_stage0(X, epochs=0)
    lrs, ends = [], []
    steps = gg.curriculum_batches(V)
    out = next(steps)
    while True:
        s, ep, *_, target = out
        if target is not None:
            ends.append(s)
            try:
                out = steps.send(False)
            except StopIteration:
                break
            continue
        lrs.append((s, gg.opt_g.param_groups[0]["lr"], gg.opt_d.param_groups[0]["lr"]))
        out = next(steps)
    assert ends == [1] * 2 + [2] * 5                                  # 2 epochs, then 2 + 3
    per_epoch = 3                                                     # ceil(20 / 8)
    first = [lr for s, lr, _ in lrs if s == 1]
    last = [(lg, ld) for s, lg, ld in lrs if s == 2]
    assert first == [1e-3] * 2 * per_epoch and len(last) == 5 * per_epoch
    T = len(last)
    want = [1e-3 * 0.5 * (1 + math.cos(math.pi * t / T)) for t in range(T)]
    assert [lg for lg, _ in last] == pytest.approx(want) and [ld for _, ld in last] == pytest.approx(want)
    assert gg.opt_g.param_groups[0]["lr"] == gg.opt_d.param_groups[0]["lr"] == 1e-3   # restored
    with pytest.raises(ValueError, match="final_extra_epochs"):
        GapGen(enc, R, 0.5, sub.P, GapGenConfig(final_extra_epochs=-1))


def _epoch_ends(steps, answer):
    """Drive ``curriculum_batches``: the stage of every epoch end, ``answer(stage)`` sent back."""
    ends, out = [], next(steps)
    while True:
        s, ep, *_, target = out
        if target is None:
            out = next(steps)
            continue
        ends.append(s)
        try:
            out = steps.send(answer(s))
        except StopIteration:
            return ends


def test_final_stage_schedule_runs_to_its_end_unless_the_deadline_stops_it():
    """Advancing (True) ends a stage after its first epoch, except a final stage with its own schedule
    (decay / extra epochs): that one runs all its epochs (the quick run's advance rule had cut the decay at
    5-6 of 12 epochs); DEADLINE ends any stage after its epoch; closing the schedule part-way restores the learning rate."""
    from neurips26.bip.gapgen import DEADLINE
    X, y = _data(6, 2, 0)
    enc = FREncoder(8).eval()
    R = identity_centers(embed(enc, X), y)
    sub = Subspace(R)
    V = sub.sample(20, torch.Generator().manual_seed(1))
    for kw, final_epochs in ((dict(), 1), (dict(final_lr_decay=True), 3), (dict(final_extra_epochs=2), 5)):
        cfg = GapGenConfig(stages=2, stage_epochs=3, batch=8, lr=1e-3, **kw)
        gg = GapGen(enc, R, 0.5, sub.P, cfg, seed=0).train_stage0(X, epochs=0)
        assert _epoch_ends(gg.curriculum_batches(V), lambda s: True) == [1] + [2] * final_epochs, kw
        assert _epoch_ends(gg.curriculum_batches(V), lambda s: DEADLINE) == [1, 2]   # one epoch per stage
        assert _epoch_ends(gg.curriculum_batches(V), lambda s: DEADLINE if s == 2 else False) == [1] * 3 + [2]
    cfg_decay = GapGenConfig(stages=2, stage_epochs=3, batch=8, lr=1e-3, final_lr_decay=True)
    gg = GapGen(enc, R, 0.5, sub.P, cfg_decay, seed=0).train_stage0(X, epochs=0)
    steps = gg.curriculum_batches(V)
    out = next(steps)
    while out[0] == 1 or gg.opt_g.param_groups[0]["lr"] == 1e-3:     # into the final stage's decay
        out = steps.send(True) if out[-1] is not None else next(steps)
    assert gg.opt_g.param_groups[0]["lr"] < 1e-3
    steps.close()
    assert gg.opt_g.param_groups[0]["lr"] == gg.opt_d.param_groups[0]["lr"] == 1e-3


def test_training_loops_stop_at_the_deadline_of_the_clock_they_are_given(one_thread):
    """``deadline`` is a value of ``clock`` (the run passes CPU seconds, ``time.process_time``): past it every
    loop stops after its current epoch (one epoch per curriculum stage), before it all epochs run; the wall
    clock is not consulted when another clock is given."""
    import time

    from neurips26.bip.experiment import ImageConfig, _image_side

    X, y = _data(6, 2, 0)
    past, never = (lambda: 1.0), (lambda: -2e9)         # deadline 0.0: passed / deadline -1e9: never passed
    for clock, deadline, n_ep in ((past, 0.0, 1), (never, -1e9, 3)):
        assert len(train_encoder(X, y, EncoderConfig(epochs=3, dim=8), deadline=deadline, clock=clock)[1]) == n_ep
    enc = FREncoder(8).eval()
    R = identity_centers(embed(enc, X), y)
    sub = Subspace(R)
    V = sub.sample(16, torch.Generator().manual_seed(1))
    cfg = GapGenConfig(stage0_epochs=3, stages=2, stage_epochs=3, batch=8, advance=2.0)   # advance never met
    for clock, deadline, n_ep in ((past, 0.0, 1), (never, -1e9, 3)):
        gg = GapGen(enc, R, 0.5, sub.P, cfg, seed=0).train_stage0(X, deadline=deadline, clock=clock)
        assert sum(h["stage"] == 0 for h in gg.history) == n_ep
        gg.train_curriculum(V, 0.9, deadline=deadline, clock=clock)
        assert [h["stage"] for h in gg.history if h["stage"] > 0] == [1] * n_ep + [2] * n_ep
    assert time.perf_counter() > -1e9                     # the wall clock was past the "never" deadline
    with pytest.raises(ValueError, match="budget_clock"):
        _image_side(ImageConfig(budget_clock="gpu"), None, False)
