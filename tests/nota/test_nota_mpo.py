"""Acceptance checks 1-3 (contract, apply, TT-SVD) and the MPO bad inputs."""
import itertools
import math

import numpy as np
import pytest
import torch

from neurips26.nota import mpo
from neurips26.nota.adapters import MPOAdapter


def random_cores(jf, if_, bond, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    d = mpo.bond_dims(jf, if_, bond)
    return [torch.randn(d[k], j, i, d[k + 1], generator=g, dtype=dtype)
            for k, (j, i) in enumerate(zip(jf, if_))]


def brute_force(cores):
    jf = [c.shape[1] for c in cores]
    if_ = [c.shape[2] for c in cores]
    w = np.zeros((math.prod(jf), math.prod(if_)))
    for js in itertools.product(*[range(j) for j in jf]):
        for is_ in itertools.product(*[range(i) for i in if_]):
            m = np.ones((1, 1))
            for c, j, i in zip(cores, js, is_):
                m = m @ c[:, j, i, :].numpy()
            w[np.ravel_multi_index(js, jf), np.ravel_multi_index(is_, if_)] = m[0, 0]
    return w


@pytest.mark.parametrize("jf,if_", [((3, 4), (2, 5)), ((2, 3, 2), (3, 2, 2))])
def test_contract_equals_brute_force(jf, if_):
    cores = random_cores(jf, if_, 3)
    assert np.allclose(mpo.contract(cores).numpy(), brute_force(cores), atol=1e-6)


def test_contract_with_mods_equals_cores_absorbing_them():
    cores = random_cores((4, 4, 4), (4, 4, 4), 4)
    g = torch.Generator().manual_seed(1)
    mods = [torch.randn(4, 4, generator=g, dtype=torch.float64) for _ in range(2)]
    absorbed = [torch.einsum("ajic,cd->ajid", cores[0], mods[0]),
                torch.einsum("ajic,cd->ajid", cores[1], mods[1]), cores[2]]
    assert torch.allclose(mpo.contract(cores, mods), mpo.contract(absorbed), atol=1e-10)


@pytest.mark.parametrize("jf,if_", [((4, 4, 4), (4, 4, 4)), ((8, 2), (3, 5)), ((2, 3, 2, 2), (2, 2, 2, 3))])
def test_apply_equals_materialised_product(jf, if_):
    cores = random_cores(jf, if_, 5, seed=3)
    x = torch.randn(7, 2, math.prod(if_), dtype=torch.float64)
    assert torch.allclose(mpo.apply(cores, x), x @ mpo.contract(cores).T, atol=1e-10)
    mods = [torch.randn(c.shape[3], c.shape[3], dtype=torch.float64) for c in cores[:-1]]
    assert torch.allclose(mpo.apply(cores, x, mods), x @ mpo.contract(cores, mods).T, atol=1e-10)


def test_adapter_forward_paths_agree():
    ad = MPOAdapter(64, 64, (4, 4, 4), (4, 4, 4), bond=4).double()
    for c in ad.cores:
        torch.nn.init.normal_(c)
    for b in (1, 4096):          # small batch: apply; large batch: one materialisation (FLOP rule)
        x = torch.randn(b, 64, dtype=torch.float64)
        assert torch.allclose(ad(x), x @ ad.delta().T, atol=1e-9)
    cores = list(ad.cores)
    assert mpo.flops_apply(cores, 1) < mpo.flops_contract(cores) + 64 * 64
    assert mpo.flops_apply(cores, 4096) > mpo.flops_contract(cores) + 4096 * 64 * 64


def test_tt_svd_exact_monotone_and_param_count():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(64, 64, generator=g, dtype=torch.float64)
    f = (4, 4, 4)
    assert mpo.bond_dims(f, f, 100) == [1, 16, 16, 1]
    cores = mpo.tt_svd(w, f, f, 16)
    assert (mpo.contract(cores) - w).abs().max() < 1e-10
    errs = [float((mpo.contract(mpo.tt_svd(w, f, f, d)) - w).norm()) for d in range(1, 17)]
    assert all(b <= a + 1e-12 for a, b in zip(errs, errs[1:]))
    for d in (1, 4, 16):
        c = mpo.tt_svd(w, f, f, d)
        assert sum(x.numel() for x in c) == mpo.n_params(f, f, d)
    assert mpo.n_params(f, f, 4) == 384 == 3 * (64 + 64)


def test_tt_svd_matches_tensorly():
    tl = pytest.importorskip("tensorly")
    from tensorly.decomposition import tensor_train_matrix
    tl.set_backend("numpy")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 64))
    f = (4, 4, 4)
    for d in (2, 4, 16):
        ours = mpo.tt_svd(torch.from_numpy(w), f, f, d)
        ttm = tensor_train_matrix(w.reshape(*f, *f), rank=[1, d, d, 1])
        theirs = [torch.from_numpy(np.asarray(c)) for c in ttm.factors]
        assert [tuple(c.shape) for c in theirs] == [tuple(c.shape) for c in ours]   # (r, j, i, r') layout
        rec = mpo.contract(theirs)
        assert torch.allclose(rec, mpo.contract(ours), atol=1e-8)


def test_mpo_bad_inputs():
    with pytest.raises(ValueError, match="out_factors"):
        MPOAdapter(64, 64, (4, 4, 3), (4, 4, 4))
    with pytest.raises(ValueError, match="same number n"):
        MPOAdapter(64, 64, (8, 8), (4, 4, 4))
    with pytest.raises(ValueError, match="bond"):
        MPOAdapter(64, 64, (4, 4, 4), (4, 4, 4), bond=0)
    with pytest.raises(ValueError, match="init"):
        MPOAdapter(64, 64, (4, 4, 4), (4, 4, 4), init="xavier")
    with pytest.raises(ValueError, match="d_in"):
        mpo.apply(random_cores((4, 4), (4, 4), 2), torch.randn(3, 15, dtype=torch.float64))
    with pytest.raises(ValueError, match="mods"):
        mpo.contract(random_cores((4, 4), (4, 4), 2), mods=[])


def test_balanced_factors_for_the_n_sweep():
    import math
    from neurips26.nota.mpo import balanced_factors
    assert balanced_factors(64, 3) == (4, 4, 4) and balanced_factors(64, 2) == (8, 8)
    assert balanced_factors(192, 3) == (8, 6, 4) and balanced_factors(192, 2) == (16, 12)
    for d in (16, 64, 96, 192):
        for n in (1, 2, 3, 4):
            f = balanced_factors(d, n)
            assert len(f) == n and math.prod(f) == d and list(f) == sorted(f, reverse=True)
    with pytest.raises(ValueError, match="n"):
        balanced_factors(64, 0)
