"""The repulsion allocator and the baselines (acceptance checks 3, 4, 5, 10) and its bad input."""

import pytest
import torch

from neurips26.bip import (GapAllocator, Subspace, b1_uniform_sphere, b2_in_manifold, b3_rejection,
                           b4_hyperface, b5_orthogonal, enrollment_robustness, exact_energy, impostor_scores,
                           margin, maxcos, riemannian_step, synthetic_gallery, tau_far)


@pytest.fixture(scope="module")
def gallery():
    R, U = synthetic_gallery(2000, seed=0)
    tau = tau_far(impostor_scores(R), 1e-4)
    _, tau_m = margin(tau)
    return R, U, Subspace(R), tau, tau_m


def test_check3_step_keeps_unit_norm_and_zero_residual(gallery):
    R, _, sub, _, _ = gallery
    x = sub.sample(500, torch.Generator().manual_seed(0))
    g = torch.randn(500, 64, generator=torch.Generator().manual_seed(1))
    y = riemannian_step(x, g, sub.P, 0.5)
    assert float((y.norm(dim=1) - 1).abs().max()) < 1e-6
    assert float(sub.residual(y).max()) < 1e-10


def test_check4_exact_energy_monotone_on_toy():
    R, _ = synthetic_gallery(1000, seed=1)
    sub = Subspace(R)
    tau = tau_far(impostor_scores(R), 1e-3)
    _, tau_m = margin(tau)
    V = sub.sample(300, torch.Generator().manual_seed(2))
    es = []
    for _ in range(6):
        V = V.detach().requires_grad_(True)
        e = exact_energy(V, R, tau_m, sub=sub)
        es.append(float(e.detach()))
        (g,) = torch.autograd.grad(e, V)
        V = riemannian_step(V.detach(), g, sub.P, 0.05)
    assert es[0] > 0
    assert all(b <= a * (1 + 1e-6) for a, b in zip(es, es[1:])), es
    assert es[-1] < es[0]


def test_check5_zero_collisions_where_b2_collides(gallery):
    R, _, sub, tau, tau_m = gallery
    A = GapAllocator(R, tau, tau_m, sub, n_iter=10, batch=4000, seed=0)
    V = A.allocate(4000)
    a = A.audit()
    assert V.shape[0] == 4000 and a.real_collisions == 0 and a.virtual_collisions == 0
    assert a.subset_virtual_collisions == 0 and a.max_residual < 1e-6 and a.outside_containment == 0
    assert float(maxcos(V, R).max()) < tau
    b2 = b2_in_manifold(4000, sub, seed=0)
    assert float((maxcos(b2, R) >= tau).float().mean()) > 0.05
    # robustness: new reals from the same source hit virtuals less often per identity
    new, _ = synthetic_gallery(2000, seed=5, basis=gallery[1])
    rob = enrollment_robustness(new, R, V, tau)
    assert rob["ratio"] > 2.0


def test_check10_streaming_never_changes_accepted(gallery):
    R, _, sub, tau, tau_m = gallery
    A = GapAllocator(R, tau, tau_m, sub, n_iter=3, batch=300, seed=1)
    first = A.add_batch()
    snap = A.virtuals
    second = A.add_batch()
    assert torch.equal(A.virtuals[:snap.shape[0]], snap) and torch.equal(snap, first)
    assert len(A) == first.shape[0] + second.shape[0] == A.log[0].accepted + A.log[1].accepted
    A.virtuals[0].zero_()                               # a copy: the allocator's state is untouched
    assert torch.equal(A.virtuals[:snap.shape[0]], snap)


def test_faiss_search_path_gives_zero_collisions(gallery):
    pytest.importorskip("faiss")
    R, _, sub, tau, tau_m = gallery
    for search in ("flat", "ivf", "hnsw"):
        A = GapAllocator(R, tau, tau_m, sub, n_iter=4, batch=300, search=search, seed=2)
        A.allocate(600)
        a = A.audit()
        assert len(A) > 540 and a.real_collisions == 0 and a.virtual_collisions == 0, search


def test_sharded_virtual_index_equals_one_flat_index():
    """faiss IndexShards over the virtuals (streamed adds, global ids): kNN and the merged cross-shard
    range search give what one IndexFlatIP gives."""
    pytest.importorskip("faiss")
    from neurips26.bip.gallery import VirtualIndex

    g = torch.Generator().manual_seed(0)
    V = torch.nn.functional.normalize(torch.randn(900, 16, generator=g), dim=1).numpy()
    one, three = VirtualIndex(16), VirtualIndex(16, shards=3)
    for a, b in ((0, 400), (400, 401), (401, 900)):           # streamed batches, one of a single row
        one.add(V[a:b])
        three.add(V[a:b])
    assert one.ntotal == three.ntotal == 900 and all(p.ntotal > 0 for p in three.parts)
    (d1, i1), (d3, i3) = one.search(V[:50], 5), three.search(V[:50], 5)
    assert (i1[:, 0] == range(50)).all() and (i3[:, 0] == range(50)).all()
    assert abs(d1 - d3).max() < 1e-6
    l1, s1, n1 = one.range_search(V, 0.6)
    l3, s3, n3 = three.range_search(V, 0.6)
    assert (l1 == l3).all() and l1[-1] > 900                  # more than the self matches
    for q in range(0, 900, 7):
        assert sorted(n1[l1[q]:l1[q + 1]]) == list(n3[l3[q]:l3[q + 1]])
    with pytest.raises(ValueError, match="shards"):
        VirtualIndex(16, shards=0)
    with pytest.raises(ValueError, match="shape"):
        three.add(V[:3, :8])


def test_allocator_with_sharded_virtual_index_is_the_same_allocation(gallery):
    pytest.importorskip("faiss")
    R, _, sub, tau, tau_m = gallery
    runs = []
    for shards in (1, 3):
        A = GapAllocator(R, tau, tau_m, sub, n_iter=3, batch=200, search="flat", seed=4, virtual_shards=shards)
        A.allocate(400)
        runs.append((A.virtuals, A.audit()))
    (v1, a1), (v3, a3) = runs
    assert torch.equal(v1, v3) and len(v1) > 360
    assert (a1.real_collisions, a1.virtual_collisions) == (a3.real_collisions, a3.virtual_collisions) == (0, 0)
    close = torch.cat([v1[:5], v1[:5] + 1e-3 * torch.randn(5, v1.shape[1])])   # 5 planted near-duplicates
    from neurips26.bip.allocator import audit
    assert audit(torch.nn.functional.normalize(close, dim=1), R, tau, shards=2).virtual_collisions == 5


def test_kernels_and_floor(gallery):
    R, _, sub, tau, tau_m = gallery
    for k in ("riesz", "vmf"):
        A = GapAllocator(R, tau, tau_m, sub, n_iter=2, batch=200, kernel=k)
        A.allocate(200)
        assert A.audit().real_collisions == 0
    A = GapAllocator(R, tau, tau_m, sub, n_iter=0, batch=500, floor=0.99, max_retries=0)
    A.allocate(5000)
    assert len(A.log) == 1 and A.log[0].acceptance < 0.99       # unrepelled seeds: stop at the floor


def test_bad_input(gallery):
    R, _, sub, tau, tau_m = gallery
    with pytest.raises(ValueError, match="M"):
        GapAllocator(R, tau, tau_m, sub).allocate(0)
    with pytest.raises(ValueError, match="tau_m"):
        GapAllocator(R, tau, tau + 0.1, sub)
    with pytest.raises(ValueError, match="kernel"):
        GapAllocator(R, tau, tau_m, sub, kernel="gauss")
    with pytest.raises(ValueError, match="dimension"):
        GapAllocator(R[:, :32] / R[:, :32].norm(dim=1, keepdim=True), tau, tau_m, sub)
    with pytest.raises(ValueError, match="zero-norm"):
        GapAllocator(torch.zeros(3, 64), tau, tau_m, sub)
    with pytest.raises(ValueError, match="virtual_shards"):
        GapAllocator(R, tau, tau_m, sub, virtual_shards=0)


def test_baselines_behave_as_the_spec_says(gallery):
    R, _, sub, tau, _ = gallery
    assert float(sub.residual(b1_uniform_sphere(2000, 64)).mean()) > 0.3
    b5 = b5_orthogonal(2000, sub)
    assert float(sub.residual(b5).mean()) > 0.99 and float(maxcos(b5, R).max()) < 0.3
    kept, curve = b3_rejection(1500, R, sub, tau, batch=800)
    assert kept.shape[0] == 1500 and float(maxcos(kept, R).max()) < tau
    assert float(maxcos(kept, kept, exclude_self=True).max()) < tau and curve[0] >= curve[-1]
    x0 = b2_in_manifold(300, sub, seed=3)
    b4 = b4_hyperface(300, R, sub, steps=30, seed=3)
    s0 = maxcos(x0, x0, exclude_self=True).mean()
    assert float(maxcos(b4, b4, exclude_self=True).mean()) < float(s0)     # packs among themselves
    assert torch.allclose(b4.norm(dim=1), torch.ones(300), atol=1e-5)


def _b4_autograd(M, reals, sub, steps, lr=1e-2, alpha=1.0, seed=0):
    """The B4 reference: the loss back-propagated through the M x M score matrix (the old path)."""
    x = sub.sample(M, torch.Generator().manual_seed(seed)).clone().requires_grad_(True)
    opt = torch.optim.Adam([x], lr=lr)
    eye = torch.eye(M, dtype=torch.bool)
    for _ in range(steps):
        opt.zero_grad()
        s = (x @ x.T).masked_fill(eye, -2.0)
        reg = torch.cdist(x, reals).min(dim=1).values.mean()
        (s.max(dim=1).values.mean() + alpha * reg).backward()
        opt.step()
        with torch.no_grad():
            x /= x.norm(dim=1, keepdim=True)
    return x.detach()


@pytest.mark.parametrize("alpha", [1.0, 0.0, 3.0])
def test_b4_closed_form_gradient_equals_autograd_path(gallery, alpha):
    R, _, sub, _, _ = gallery
    R64, sub64 = R[:400], Subspace(R[:400])
    ref = _b4_autograd(100, R64, sub64, steps=15, alpha=alpha, seed=5)
    fast = b4_hyperface(100, R64, sub64, steps=15, alpha=alpha, seed=5)
    assert fast.dtype == ref.dtype and torch.allclose(fast, ref, atol=1e-5)
    with pytest.raises(ValueError, match="alpha"):
        b4_hyperface(10, R64, sub64, alpha=-1.0)


def test_run_sharded_check_matches_one_shard_and_flags_a_disagreeing_audit(gallery):
    """The run's scale-out check (experiment._sharded_check): a 2-shard allocation in 3 batches is the
    1-shard one, and the main virtuals' cross-shard audit is compared with the 1-shard audit given."""
    pytest.importorskip("faiss")
    from dataclasses import replace

    from neurips26.bip import experiment as E
    R, _, sub, tau, tau_m = gallery
    cfg = replace(E.CONFIGS["smoke"], n_iter=3, sharded_M=300, sharded_batch=100)
    A = GapAllocator(R, tau, tau_m, sub, n_iter=3, batch=200, seed=1)
    V = A.allocate(200)
    a = A.audit()
    out = E._sharded_check(cfg, R, tau, tau_m, sub, V, a, seed=1)
    assert out["equal_to_one_shard"] and out["main_audit_equal"] and out["batches"] == 3 and out["n"] > 250
    assert out["audit"] == out["audit_one_shard"] == {"real_collisions": 0, "virtual_collisions": 0}
    wrong = replace(a, virtual_collisions=a.virtual_collisions + 1)   # an audit the shards do not reproduce
    assert not E._sharded_check(cfg, R, tau, tau_m, sub, V, wrong, seed=1)["main_audit_equal"]
