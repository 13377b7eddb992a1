"""The vectorised sketch, kappa_neg and prototype-softmax equal the spec's loops written out plainly."""

import numpy as np

from neurips26.obsalign.observability import _softmax_diag, kappa_neg
from neurips26.obsalign.sketch import Pooled, build_sketch, pool

K, C, D = 3, 6, 5


def _loop_sketch(z, mask, cls, modalities):
    counts, proto, disp = np.zeros((K, C)), np.zeros((K, C, D)), np.zeros((K, C))
    pc, pk = np.zeros((K, K, C)), np.zeros((K, K, C))
    for m in modalities:
        for c in range(C):
            sel = mask[:, m] & (cls == c)
            if sel.any():
                counts[m, c] = sel.sum()
                proto[m, c] = z[m][sel].mean(axis=0)
                disp[m, c] = np.mean(np.sum((z[m][sel] - proto[m, c]) ** 2, axis=1))
    for i, m in enumerate(modalities):
        for m2 in modalities[i + 1:]:
            cos = np.sum(z[m] * z[m2], axis=1) / (np.linalg.norm(z[m], axis=1) * np.linalg.norm(z[m2], axis=1))
            for c in range(C):
                sel = mask[:, m] & mask[:, m2] & (cls == c)
                if sel.any():
                    pc[m, m2, c] = pc[m2, m, c] = sel.sum()
                    pk[m, m2, c] = pk[m2, m, c] = cos[sel].mean()
    return counts, proto, disp, pc, pk


def _loop_kneg(p):
    Kp = p.mu.shape[0]
    out = np.zeros((Kp, Kp, C))
    for m in range(Kp):
        for m2 in range(Kp):
            if m == m2:
                continue
            a = p.mu[m] / np.maximum(np.linalg.norm(p.mu[m], axis=1, keepdims=True), 1e-12)
            b = p.mu[m2] / np.maximum(np.linalg.norm(p.mu[m2], axis=1, keepdims=True), 1e-12)
            cos = a @ b.T
            for c in range(C):
                t1 = [cos[c, c2] for c2 in range(C) if c2 != c and p.n[m2, c2] > 0]
                t2 = [cos[c2, c] for c2 in range(C) if c2 != c and p.n[m, c2] > 0]
                out[m, m2, c] = 0.5 * ((np.mean(t1) if t1 else 0.0) + (np.mean(t2) if t2 else 0.0))
    return out


def _loop_signals(p, prm):
    """The previous ``signals``: one modality pair (m, m') at a time, the spec's formulas as written."""
    g = lambda n: n / (n + prm.n0)  # noqa: E731
    unit = lambda a: a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)  # noqa: E731
    Kp = p.mu.shape[0]
    B, S, Kc, U = (np.zeros((Kp, Kp, C)) for _ in range(4))
    kneg = _loop_kneg(p)
    u = np.sqrt(np.divide(p.v, p.n, out=np.zeros_like(p.v), where=p.n > 0) + p.b) / p.delta[:, None]
    for m in range(Kp):
        for m2 in range(Kp):
            if m == m2:
                continue
            bridge = np.zeros(C)
            for b in range(Kp):
                if b not in (m, m2):
                    bridge = np.maximum(bridge, np.minimum(p.n_pair[m, b], p.n_pair[b, m2]))
            B[m, m2] = g(p.n_pair[m, m2] + prm.lambda_br * bridge)
            S[m, m2] = np.sqrt(g(p.n[m]) * g(p.n[m2]))
            kpair = np.clip((p.kappa[m, m2] - kneg[m, m2]) / np.maximum(1 - kneg[m, m2], 1e-6), 0, 1)
            cos = unit(p.mu[m]) @ unit(p.mu[m2]).T
            kproto = np.zeros(C)
            for c in range(C):   # 0.5 [softmax over c' observed in m2 + the same with m, m2 swapped]
                for a, b, valid in ((cos[c], cos[c, c], p.n[m2] > 0), (cos[:, c], cos[c, c], p.n[m] > 0)):
                    if valid[c]:
                        kproto[c] += 0.5 * np.exp(b / prm.tau_K) / np.exp(a[valid] / prm.tau_K).sum()
            npair = p.n_pair[m, m2]
            Kc[m, m2] = (npair * kpair + prm.n0 * kproto) / (npair + prm.n0)
            U[m, m2] = np.maximum(u[m], u[m2])
    return {"bridge": B, "side": S, "consistency": Kc, "uncertainty": U}


def test_vectorised_signals_equal_the_per_pair_loops():
    """``signals`` (every modality pair at once) == the per-pair loops: pools with an unobserved modality-class,
    pairs never co-observed (bridge through a pivot only), a K = 2 pool (no pivot), non-default parameters."""
    from neurips26.obsalign.observability import OmegaParams, signals
    rng = np.random.default_rng(2)
    pools = [pool([build_sketch(*_data(rng, 80, mods), mods, C) for mods in layout])
             for layout in (((0, 1), (1, 2), (0, 2)), ((0, 1), (1, 2)), ((0, 1, 2), (2,), (0, 1)))]
    for p in pools:
        for prm in (OmegaParams(), OmegaParams(n0=2.0, lambda_br=0.9, tau_K=0.3)):
            got, want = signals(p, prm), _loop_signals(p, prm)
            for name in want:
                np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-12, err_msg=name)
    assert (pools[1].n_pair[0, 2] == 0).all() and (signals(pools[1])["bridge"][0, 2] > 0).any()   # via text
    assert (pools[0].n == 0).any()
    p = pools[2]                                # its first two modalities alone: K = 2, no pivot
    two = Pooled(p.n[:2], p.mu[:2], p.v[:2], p.b[:2], p.n_pair[:2, :2], p.kappa[:2, :2], p.delta[:2])
    got, want = signals(two), _loop_signals(two, OmegaParams())
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(got["bridge"][0, 1], two.n_pair[0, 1] / (two.n_pair[0, 1] + 5.0))


def _data(rng, n, mods):
    z = [rng.normal(size=(n, D)) for _ in range(K)]
    z = [x / np.linalg.norm(x, axis=1, keepdims=True) for x in z]
    mask = np.zeros((n, K), bool)
    mask[:, list(mods)] = rng.random((n, len(mods))) < 0.8
    mask[~mask.any(axis=1), mods[0]] = True
    cls = rng.integers(-1, C - 2, size=n)        # -1 (not counted) and two classes never seen
    return z, mask, cls


def test_vectorised_sketch_equals_loops():
    rng = np.random.default_rng(0)
    for mods in ((0, 1, 2), (0, 2), (1,)):
        z, mask, cls = _data(rng, 90, mods)
        sk = build_sketch(z, mask, cls, mods, C)
        ref = _loop_sketch(z, mask, cls, mods)
        for got, want in zip((sk.counts, sk.proto, sk.disp, sk.pair_counts, sk.pair_cons), ref):
            np.testing.assert_allclose(got, want, atol=1e-12)


def test_vectorised_kappa_neg_and_softmax_equal_loops():
    rng = np.random.default_rng(1)
    p = pool([build_sketch(*_data(rng, 80, mods), mods, C) for mods in ((0, 1), (1, 2), (0, 2))])
    assert (p.n == 0).any()                     # unobserved classes exercise the masks
    np.testing.assert_allclose(kappa_neg(p), _loop_kneg(p), atol=1e-12)
    cos = rng.uniform(-1, 1, size=(C, C))
    valid = np.array([True, False, True, True, False, True])
    got = _softmax_diag(cos, valid, 0.1)
    for c in range(C):
        if valid[c]:
            e = np.exp(cos[c, valid] / 0.1)
            assert np.isclose(got[c], np.exp(cos[c, c] / 0.1) / e.sum())
        else:
            assert got[c] == 0.0


# ---- the local loss: batched imputation and transfer == the per-pair loops of the spec ---------------

import pytest
import torch
import torch.nn.functional as F

from neurips26.obsalign.model import Guidance, ObsModel, local_loss


def _loop_imputed_h(model, z, mask, modalities, g, p):
    h = sum(mask[:, m:m + 1].float() * z[m] for m in modalities)
    for m2 in range(model.K):
        T = torch.stack([torch.where(mask[:, m:m + 1], g.transfer[m, m2][None, :], torch.zeros(()))
                         for m in modalities]).amax(dim=0)
        lam = (p * T).sum(dim=1) * (~mask[:, m2]).float()
        h = h + lam[:, None] * (p @ g.mu[m2])
    return h


def _loop_loss(model, x, mask, y, modalities, g, tau=0.1):
    z = model.embed(x, modalities)
    h0 = sum(mask[:, m:m + 1].float() * z[m] for m in modalities)
    with torch.no_grad():
        p0 = torch.softmax(model.logits(h0), dim=1)
        lab = y >= 0
        chat = torch.where(lab, y, p0.argmax(dim=1))
        p = torch.where(lab[:, None], F.one_hot(y.clamp(min=0), model.C).float(), p0)
    logits = model.logits(_loop_imputed_h(model, z, mask, modalities, g, p))
    n = len(y)
    loss = F.cross_entropy(logits[lab], y[lab], reduction="sum") / n
    for m in modalities:
        sel = lab & mask[:, m]
        loss = loss + F.cross_entropy(model.logits(z[m][sel]), y[sel], reduction="sum") / n
    for i, m in enumerate(modalities):
        for m2 in modalities[i + 1:]:
            idx = torch.nonzero(mask[:, m] & mask[:, m2]).squeeze(1)
            sim = z[m][idx] @ z[m2][idx].T / tau
            tgt = torch.arange(len(idx))
            nce = 0.5 * (F.cross_entropy(sim, tgt, reduction="none") + F.cross_entropy(sim.T, tgt, reduction="none"))
            loss = loss + (g.align[m, m2, chat[idx]] * nce).sum() / n
    for m2 in range(model.K):
        target = F.normalize(g.mu[m2][chat], dim=1)
        for m in modalities:
            if m != m2:
                w = g.transfer[m, m2, chat] * (mask[:, m] & ~mask[:, m2]).float()
                loss = loss + (w * (1 - (z[m] * target).sum(dim=1))).sum() / n
    return loss


def test_batched_loss_equals_per_pair_loops_in_value_and_gradient():
    torch.manual_seed(0)
    dims, Cm, n = (7, 5, 4), 4, 30
    model = ObsModel(dims, Cm, d=6)
    mods = (0, 2)
    x = [torch.randn(n, dm) for dm in dims]
    mask = torch.zeros(n, 3, dtype=torch.bool)
    mask[:, 0] = torch.rand(n) < 0.7
    mask[:, 2] = ~mask[:, 0] | (torch.rand(n) < 0.6)
    y = torch.randint(-1, Cm, (n,))
    y[:3] = torch.tensor([0, 1, 2])
    w = torch.rand(3, 3, Cm) * (1 - torch.eye(3))[:, :, None]
    g = Guidance(torch.randn(3, Cm, 6), align=torch.rand(3, 3, Cm), transfer=w)
    fast = local_loss(model, x, mask, y, mods, g)
    gf = torch.autograd.grad(fast, list(model.parameters()), allow_unused=True)
    ref = _loop_loss(model, x, mask, y, mods, g)
    gr = torch.autograd.grad(ref, list(model.parameters()), allow_unused=True)
    assert torch.allclose(fast, ref, atol=1e-6)
    for a, b in zip(gf, gr):
        assert (a is None) == (b is None) or torch.allclose(a if a is not None else torch.zeros_like(b),
                                                            b if b is not None else torch.zeros_like(a))
        if a is not None and b is not None:
            assert torch.allclose(a, b, atol=1e-6)


def _old_local_loss(model, x, mask, y_obs, modalities, g, tau=0.1, lam_al=1.0, lam_tr=1.0):
    """The previous formula, verbatim (per-pair InfoNCE on the co-observed rows, masks built per step)."""
    z = model.embed(x, modalities)
    h0 = sum(mask[:, m:m + 1].float() * z[m] for m in modalities)
    with torch.no_grad():
        p0 = torch.softmax(model.logits(h0), dim=1)
        lab = y_obs >= 0
        chat = torch.where(lab, y_obs, p0.argmax(dim=1))
        p = torch.where(lab[:, None], F.one_hot(y_obs.clamp(min=0), model.C).float(), p0)
    h = h0
    mods = list(modalities)
    if g.transfer is not None:
        with torch.no_grad():
            obs = mask[:, mods]
            T = torch.where(obs[:, :, None, None], g.transfer[mods][None], 0.0).amax(dim=1)
            lam = (p[:, None, :] * T).sum(dim=-1) * (~mask).float()
            n, K, C = T.shape
            imp = (lam[:, :, None] * p[:, None, :]).reshape(n, K * C) @ g.mu.reshape(K * C, -1)
        h = h0 + imp
    logits = model.logits(h)
    n = len(y_obs)
    loss = F.cross_entropy(logits[lab], y_obs[lab], reduction="sum") / n
    for m in modalities:
        sel = lab & mask[:, m]
        if sel.any():
            loss = loss + F.cross_entropy(model.logits(z[m][sel]), y_obs[sel], reduction="sum") / n
    if g.align is not None:
        for i, m in enumerate(modalities):
            for m2 in modalities[i + 1:]:
                idx = torch.nonzero(mask[:, m] & mask[:, m2]).squeeze(1)
                if len(idx) < 2:
                    continue
                sim = z[m][idx] @ z[m2][idx].T / tau
                tgt = torch.arange(len(idx))
                nce = 0.5 * (F.cross_entropy(sim, tgt, reduction="none")
                             + F.cross_entropy(sim.T, tgt, reduction="none"))
                loss = loss + lam_al * (g.align[m, m2, chat[idx]] * nce).sum() / n
    if g.transfer is not None:
        with torch.no_grad():
            sel = mask[:, mods].T[:, None, :] & ~mask.T[None, :, :]
            w = g.transfer[mods][:, :, chat] * sel.float()
            t = (w[..., None] * g.mu_unit[:, chat][None]).sum(dim=1)
        dots = sum((z[m] * t[j]).sum() for j, m in enumerate(mods))
        loss = loss + lam_tr * (w.sum() - dots) / n
    return loss


def _guided_batch(seed, n, p_obs=0.7, fill=0):
    """A guided-loss test case (dims (7, 5, 4), C = 5, d = 6): the model, inputs ``x``, the observed mask
    (each sample observes ``p_obs`` of the modalities, ``fill`` where it would observe none), labels ``y``
    (-1 unlabelled), prototypes ``mu`` (3, C, d) and the align / transfer weights (transfer 0 for m == m')."""
    torch.manual_seed(seed)
    dims, Cm, d = (7, 5, 4), 5, 6
    model = ObsModel(dims, Cm, d=d)
    x = [torch.randn(n, dm) for dm in dims]
    mask = torch.rand(n, 3) < p_obs
    mask[~mask.any(dim=1), fill] = True
    y = torch.randint(-1, Cm, (n,))
    mu = torch.randn(3, Cm, d)
    off = (1 - torch.eye(3))[:, :, None]
    return model, x, mask, y, mu, dict(align=torch.rand(3, 3, Cm), transfer=torch.rand(3, 3, Cm) * off)


def _grads(loss, model):
    return [torch.zeros_like(q) if gq is None else gq
            for q, gq in zip(model.parameters(), torch.autograd.grad(loss, list(model.parameters()),
                                                                    allow_unused=True))]


@pytest.mark.parametrize("use_kernel", [False, True])
def test_fused_guided_loss_with_round_tables_equals_previous_formula(monkeypatch, use_kernel):
    """Both paths (the torch node and, where numba is installed, the compiled kernel): the fused node (one bmm over the source's modality pairs, n x n, masked rows/columns), round tables
    indexed per batch == the per-pair formula: three own modalities in a non-sorted order, asymmetric weights, a pair with
    one and a pair with no co-observed sample in a batch, a labelled-only and an align-/transfer-only
    guidance; value and every gradient."""
    from neurips26.obsalign import model as mod
    from neurips26.obsalign.model import guided_tables
    if use_kernel and not mod.HAVE_NUMBA:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(mod, "USE_KERNEL", use_kernel)
    n = 48
    model, x, mask, y, mu, full = _guided_batch(3, n, p_obs=0.6, fill=1)
    mods = (2, 0, 1)
    mask[:16] = torch.tensor([True, False, True])            # batch 0: (0, 1) never, (1, 2) never co-observed
    mask[3] = torch.tensor([True, True, False])               # ... except (0, 1) once
    mu[1, 2] = 0.0                                            # an unobserved prototype
    for kw in (full, dict(align=full["align"]), dict(transfer=full["transfer"])):
        g = Guidance(mu, **kw)
        tables = guided_tables(g, mask, mods)
        for b in (torch.arange(16), torch.arange(16, n), torch.randperm(n)[:20]):
            args = ([xm[b] for xm in x], mask[b], y[b], mods, g)
            ref = _old_local_loss(model, *args)
            ref_grads = _grads(ref, model)
            for got in (local_loss(model, *args), local_loss(model, *args, tables=tables, key=tables.key[b])):
                assert torch.allclose(got, ref, atol=1e-5, rtol=1e-5), (kw.keys(), got, ref)
                for a, r in zip(_grads(got, model), ref_grads):
                    assert torch.allclose(a, r, atol=1e-5, rtol=1e-4)
    y_lab = y.clamp(min=0)                                    # every sample labelled
    g = Guidance(mu, **full)
    assert torch.allclose(local_loss(model, x, mask, y_lab, mods, g),
                          _old_local_loss(model, x, mask, y_lab, mods, g), atol=1e-5)
    got = local_loss(model, x, mask, y, mods, g, lam_al=0.7, lam_tr=1.3)     # the weights scale each term
    ref = _old_local_loss(model, x, mask, y, mods, g, lam_al=0.7, lam_tr=1.3)
    assert torch.allclose(got, ref, atol=1e-5, rtol=1e-5)
    assert all(torch.allclose(a, r, atol=1e-5, rtol=1e-4) for a, r in zip(_grads(got, model), _grads(ref, model)))
    g64 = Guidance(mu.double(), align=full["align"].double(), transfer=full["transfer"].double())
    loss64 = local_loss(model, x, mask, y, mods, g64)         # a float64 guidance, float32 model
    assert loss64.dtype == torch.float32 and torch.allclose(loss64, local_loss(model, x, mask, y, mods, g), atol=1e-5)
    assert all(q.dtype == torch.float32 for q in _grads(loss64, model))
    with pytest.raises(ValueError, match="key"):
        local_loss(model, x, mask, y, mods, g, tables=guided_tables(g, mask, mods))


def test_guided_terms_analytic_gradient_passes_gradcheck():
    """The fused alignment + transfer node's hand-written backward == finite differences (float64), for two
    and three own modalities, with masked columns and zero-weight rows."""
    from neurips26.obsalign.model import _GuidedTerms
    torch.manual_seed(5)
    n, d = 7, 4
    for k in (2, 3):
        zs = [F.normalize(torch.randn(n, d, dtype=torch.float64), dim=1).requires_grad_() for _ in range(k)]
        pa, pb = (x.tolist() for x in torch.triu_indices(k, k, offset=1))
        co = (torch.rand(len(pa), n) < 0.7).double()
        W = torch.rand(len(pa), n, dtype=torch.float64) * co
        bias = torch.where(co > 0, 0.0, -1e30).double()[:, None]
        t = torch.randn(k, n, d, dtype=torch.float64)
        fn = lambda *z: _GuidedTerms.apply(t, torch.tensor(0.3, dtype=torch.float64), W, bias,  # noqa: E731
                                           (pa, pb), 10.0, 0.7, 1.3, 1.0 / n, *z)
        assert torch.autograd.gradcheck(fn, zs, eps=1e-6, atol=1e-6)


def test_torch_path_and_compiled_kernel_both_equal_the_previous_formula(monkeypatch):
    """``local_loss`` with guidance runs the compiled kernel where numba is installed (``USE_KERNEL``) and
    the torch path otherwise: both == the previous formula (value and every gradient), including a
    temperature so small that |S| / tau needs the kernel's per-row/column shifts (one shift would underflow)."""
    import neurips26.obsalign.model as mod
    from neurips26.obsalign.kernels import HAVE_NUMBA
    model, x, mask, y, mu, w = _guided_batch(4, 40, p_obs=0.7, fill=0)
    mods = (1, 0, 2)
    g = Guidance(mu, **w)
    for use in ((False, True) if HAVE_NUMBA else (False,)):
        monkeypatch.setattr(mod, "USE_KERNEL", use)
        for tau in (0.1, 1e-3):
            got = local_loss(model, x, mask, y, mods, g, tau)
            ref = _old_local_loss(model, x, mask, y, mods, g, tau)
            assert torch.allclose(got, ref, atol=1e-5, rtol=1e-5), (use, tau, got, ref)
            assert all(torch.allclose(a, r, atol=1e-4, rtol=1e-4) for a, r in zip(_grads(got, model), _grads(ref, model)))


def test_compiled_kernel_gradient_passes_gradcheck():
    """The kernel's returned gradient in every z^m == finite differences of its returned value (float64),
    two and three own modalities, labelled and unlabelled rows, missing modalities."""
    from neurips26.obsalign.kernels import HAVE_NUMBA, guided_kernel
    from neurips26.obsalign.model import _Injected, _kernel_arrays
    if not HAVE_NUMBA:
        pytest.skip("numba not installed (the torch path is checked above)")
    torch.manual_seed(6)
    n, d, Cm = 9, 4, 3
    off = (1 - torch.eye(3, dtype=torch.float64))[:, :, None]
    g = Guidance(torch.randn(3, Cm, d, dtype=torch.float64), align=torch.rand(3, 3, Cm, dtype=torch.float64),
                 transfer=torch.rand(3, 3, Cm, dtype=torch.float64) * off)
    cls = torch.randn(Cm, d, dtype=torch.float64)
    y = torch.randint(-1, Cm, (n,))
    for mods in ((0, 2), (2, 0, 1)):
        mask = torch.zeros(n, 3, dtype=torch.bool)
        mask[:, list(mods)] = torch.rand(n, len(mods)) < 0.75
        mask[~mask.any(dim=1), mods[0]] = True
        arrs = _kernel_arrays(g, torch.float64, mods)

        def fn(*zs):
            Z = torch.stack([z.detach() for z in zs]).numpy()
            _, val, dZ = guided_kernel(Z, mask.numpy(), arrs[0], y.numpy(), cls.numpy(), *arrs[1:], 10.0, 10.0,
                                       0.7, 1.3, 1.0 / n)
            return _Injected.apply(val, torch.from_numpy(dZ), *zs)

        zs = [F.normalize(torch.randn(n, d, dtype=torch.float64), dim=1).requires_grad_() for _ in mods]
        assert torch.autograd.gradcheck(fn, zs, eps=1e-6, atol=1e-6)


def test_compiled_path_refuses_what_it_cannot_bounds_check_and_falls_back_when_it_cannot_compile(monkeypatch):
    """numba does not check bounds: a class id >= C, a mask of the wrong width, a modality id >= K or a
    guidance of another shape raise ValueError naming the argument (the torch path raises too) instead of
    reading past an array; a kernel that fails to compile warns once and the torch path gives the answer."""
    from neurips26.obsalign import model as mod
    if not mod.HAVE_NUMBA:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(mod, "USE_KERNEL", True)
    torch.manual_seed(0)
    dims, Cm, n, d = (5, 4), 3, 12, 4
    model = ObsModel(dims, Cm, d=d)
    x = [torch.randn(n, dm) for dm in dims]
    mask = torch.ones(n, 2, dtype=torch.bool)
    y = torch.randint(-1, Cm, (n,))
    g = Guidance(torch.randn(2, Cm, d), align=torch.rand(2, 2, Cm), transfer=torch.rand(2, 2, Cm))
    with pytest.raises(ValueError, match="y_obs"):
        local_loss(model, x, mask, torch.full((n,), Cm), (0, 1), g)
    with pytest.raises(ValueError, match="mask"):
        local_loss(model, x, torch.ones(n, 3, dtype=torch.bool), y, (0, 1), g)
    with pytest.raises(ValueError, match="modalities"):
        local_loss(model, x, mask, y, (0, 2), g)
    with pytest.raises(ValueError, match="mu"):
        local_loss(model, x, mask, y, (0, 1), Guidance(torch.randn(2, Cm + 1, d)))
    want = local_loss(model, x, mask, y, (0, 1), g)
    from numba.core.errors import TypingError

    def broken(*a, **k):
        raise TypingError("cannot type this")

    monkeypatch.setattr(mod, "guided_kernel", broken)
    with pytest.warns(RuntimeWarning, match="compiled guided kernel failed"):
        got = local_loss(model, x, mask, y, (0, 1), g)
    assert mod.USE_KERNEL is False
    assert torch.allclose(got, want, atol=1e-5)


def _traced_lines(fn, call):
    """The line numbers of ``fn``'s own frame that ran during ``call()`` (sys.settrace, restored after)."""
    import sys
    hit, code, old = set(), fn.__code__, sys.gettrace()

    def tracer(frame, event, arg):
        if frame.f_code is not code:
            return None
        if event == "line":
            hit.add(frame.f_lineno)
        return tracer

    sys.settrace(tracer)
    try:
        out = call()
    finally:
        sys.settrace(old)
    return hit, out


def test_kernel_wide_logit_branch_is_reached_where_one_shift_underflows_and_equals_torch(monkeypatch):
    """A batch built so that at tau = 1e-3 one InfoNCE row lies ~1900 below the matrix's max: with one shift
    exp(X - max X) of that whole row is 0 in float64 (log -> -inf), so the kernel must take its per-row/column
    branch. The kernel's Python source, traced line by line, runs that branch there (and the one-shift branch,
    not it, at tau = 0.1); the compiled kernel, its Python source, the torch path and the previous formula
    agree there in value and every gradient, and the value is finite."""
    import inspect

    from neurips26.obsalign import model as mod
    from neurips26.obsalign.kernels import guided_kernel
    py = getattr(guided_kernel, "py_func", guided_kernel)      # numba's dispatcher keeps the Python source
    src, first = inspect.getsourcelines(py)

    def line_of(marker):
        at = [i for i, line in enumerate(src) if marker in line]
        assert len(at) == 1, marker
        return first + at[0]

    wide = line_of("too wide for one shift") + 1               # the first statement of the per-row/column branch
    one = line_of("E = np.exp(X - hi)")                        # the one-shift branch
    torch.manual_seed(7)
    n, d, Cm = 8, 4, 3
    model = ObsModel((d, d, d), Cm, d=d, regime="vlm").double()  # identity adapters: z^m = x^m / ||x^m||
    e1 = torch.zeros(d, dtype=torch.float64)
    e1[0] = 1.0
    x1 = e1 + 0.3 * torch.randn(n, d, dtype=torch.float64)      # modality 1: every row near e1
    x0 = torch.randn(n, d, dtype=torch.float64)
    x0[0] = x1[0]                                               # cos 1: max X = 1 / tau
    x0[1] = -e1 + 0.1 * torch.randn(d, dtype=torch.float64)      # cos ~ -0.9 with every row of modality 1
    x = [x0, x1, torch.zeros(n, d, dtype=torch.float64)]
    mask = torch.tensor([[True, True, False]] * n)              # (0, 1) co-observed everywhere, 2 missing
    y = torch.tensor([0, 1, 2, -1, -1, 0, 1, -1])
    off = (1 - torch.eye(3, dtype=torch.float64))[:, :, None]
    g = Guidance(torch.randn(3, Cm, d, dtype=torch.float64), align=torch.rand(3, 3, Cm, dtype=torch.float64),
                 transfer=torch.rand(3, 3, Cm, dtype=torch.float64) * off)
    tau = 1e-3
    X = (F.normalize(x0, dim=1) @ F.normalize(x1, dim=1).T / tau).numpy()
    assert (np.exp(X - X.max()).sum(axis=1) == 0.0).any()       # one shift: a whole row underflows (log -> -inf)

    def run(kernel, use, t):
        monkeypatch.setattr(mod, "USE_KERNEL", use)
        monkeypatch.setattr(mod, "guided_kernel", kernel)
        loss = local_loss(model, x, mask, y, (0, 1), g, t)
        return loss, _grads(loss, model)

    for t, taken, not_taken in ((tau, wide, one), (0.1, one, wide)):
        hit, (val_py, grads_py) = _traced_lines(py, lambda: run(py, True, t))
        assert taken in hit and not_taken not in hit, (t, taken in hit, not_taken in hit)
        ref = _old_local_loss(model, x, mask, y, (0, 1), g, t)
        ref_grads = _grads(ref, model)
        assert torch.isfinite(ref) and abs(float(ref.detach())) > 1.0
        runs = [(val_py, grads_py), run(py, False, t)]          # the kernel's source, the torch path
        if mod.HAVE_NUMBA:
            runs.append(run(guided_kernel, True, t))            # the compiled kernel
        for val, grads in runs:
            assert torch.isfinite(val) and torch.allclose(val, ref, rtol=1e-9, atol=1e-9), (t, val, ref)
            for a, r in zip(grads, ref_grads):
                assert torch.allclose(a, r, rtol=1e-7, atol=1e-7)
