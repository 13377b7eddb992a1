"""Acceptance checks 5-6: omega = 1 is AlwaysAlign and omega = 0 is NoAlign (bitwise, one step);
consolidation weights and row freezing; the round loop; bad input."""

import copy

import numpy as np
import pytest
import torch

from neurips26.obsalign.consolidation import consolidate, evidence_weights, fedavg_weights
from neurips26.obsalign.federation import (METHODS, FedConfig, guidance_for, run_federation, source_sketch,
                                           tensors)
from neurips26.obsalign.model import ObsModel, local_loss
from neurips26.obsalign.obsbench import SourceSpec, make_obsbench
from neurips26.obsalign.sketch import build_sketch, pool

CFG = FedConfig(rounds=2, epochs=1, warmup=1)


@pytest.fixture(scope="module")
def small():
    specs = [SourceSpec((0, 1), None, 80), SourceSpec((0, 2), None, 80, label_fraction=0.3),
             SourceSpec((1, 2), tuple(range(3, 12)), 60)]
    return make_obsbench(0, specs, unimodal_per_class=4)


def _step(bench, guidance_fn):
    torch.manual_seed(0)
    base = ObsModel(bench.dims, 12, 32)
    src = bench.sources[1]
    sk = source_sketch(base, src.train, src.spec.modalities, None, CFG)
    p = pool([sk, source_sketch(base, bench.sources[0].train, (0, 1), None, CFG)])
    model = copy.deepcopy(base)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x, mask, y = tensors(src.train)
    b = torch.arange(64)
    loss = local_loss(model, [xm[b] for xm in x], mask[b], y[b], src.spec.modalities, guidance_fn(p), CFG.tau)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach(), [q.detach().clone() for q in model.parameters()]


def _same(a, b):
    assert torch.equal(a[0], b[0])
    assert all(torch.equal(x, y) for x, y in zip(a[1], b[1]))


def test_omega_one_is_alwaysalign_and_zero_is_noalign(small):
    K, C = 3, 12
    one, zero = np.ones((K, K, C)), np.zeros((K, K, C))
    obs, always, noalign = METHODS["obsalign_fedavg"], METHODS["alwaysalign"], METHODS["noalign"]
    a = _step(small, lambda p: guidance_for(obs, p, one, one, CFG))
    b = _step(small, lambda p: guidance_for(always, p, None, None, CFG))
    _same(a, b)
    c = _step(small, lambda p: guidance_for(obs, p, zero, one, CFG))
    d = _step(small, lambda p: None)
    _same(c, d)
    assert not torch.equal(a[0], d[0])       # alignment/transfer really changes the loss
    assert noalign.align == "none" and noalign.transfer == "none"


def _states(n=3, d=4, C=5):
    torch.manual_seed(1)
    return [{"enc.0.w": torch.randn(d), "enc.1.w": torch.randn(d), "cls": torch.randn(C, d)}
            for _ in range(n)]


def test_fedavg_weights_sum_to_one_and_average():
    counts = np.array([[10, 0], [30, 5], [0, 5]], float)
    w = fedavg_weights(counts, np.array([10, 30, 5.0]), 5)
    assert np.allclose(w.enc.sum(axis=0), 1) and np.allclose(w.rows.sum(axis=0), 1)
    st = _states()
    new, glob = consolidate(st, w)
    assert torch.allclose(glob["enc.0.w"], 0.25 * st[0]["enc.0.w"] + 0.75 * st[1]["enc.0.w"])
    assert torch.allclose(new[2]["enc.1.w"], 0.5 * st[1]["enc.1.w"] + 0.5 * st[2]["enc.1.w"])
    with pytest.raises(ValueError, match="at least one source"):
        consolidate([], w)


def test_evidence_weights_penalise_corrupted_prototypes_and_freeze_rows():
    rng = np.random.default_rng(0)
    C, d = 4, 6
    centres = rng.normal(size=(C, d)) * 3
    sks = []
    for s in range(3):
        cls = rng.integers(C, size=200)
        z = [centres[cls] + rng.normal(size=(200, d)) * 0.3 for _ in range(2)]
        if s == 2:
            z[0] = z[0] + rng.normal(size=(200, d)) * 0 + 4.0     # corrupted prototypes on modality 0
        sks.append(build_sketch(z, np.ones((200, 2), bool), cls, (0, 1), C))
    p = pool(sks)
    omega = np.zeros((2, 2, C))
    omega[0, 1, :2] = omega[1, 0, :2] = 0.8                     # classes 2, 3 unobservable
    counts = np.full((3, 2), 200.0)
    w = evidence_weights(sks, p, omega, counts, tau_lo=0.1)
    assert np.allclose(w.enc.sum(axis=0), 1)
    assert np.allclose(w.rows[:, w.shared].sum(axis=0), 1)
    assert w.enc[2, 0] < min(w.enc[0, 0], w.enc[1, 0])
    assert list(w.shared) == [True, True, False, False]
    st = [{"enc.0.w": torch.randn(3), "enc.1.w": torch.randn(3), "cls": torch.randn(C, 3)} for _ in range(3)]
    new, _ = consolidate(st, w)
    for i in range(3):
        assert torch.equal(new[i]["cls"][2:], st[i]["cls"][2:])   # unshared rows left unchanged
        assert torch.equal(new[i]["cls"][:2], new[0]["cls"][:2])
    with pytest.raises(ValueError, match="at least one source"):
        evidence_weights([], p, omega, counts)


def test_round_loop_runs_and_is_deterministic(small):
    a = run_federation(small, "obsalign", CFG, seed=3)
    b = run_federation(small, "obsalign", CFG, seed=3)
    assert a.round_acc == b.round_acc and np.array_equal(a.omega, b.omega)
    assert a.omega.shape == (3, 3, 12) and np.all((a.omega >= 0) & (a.omega <= 1))
    assert len(a.omega_history) == 2 and 0 <= a.round_acc[-1] <= 1
    loc = run_federation(small, "local", CFG, seed=3)
    assert not torch.equal(loc.models[0].enc[0][0].weight, loc.models[1].enc[0][0].weight)


def test_vlm_regime_adapters_start_at_identity():
    b = make_obsbench(0, [SourceSpec((0, 1), None, 40)], regime="vlm", d_vlm=8, unimodal_per_class=2)
    assert b.dims == (8, 8, 8)
    assert np.allclose(np.linalg.norm(b.sources[0].train.x[0][b.sources[0].train.mask[:, 0]], axis=1), 1)
    m = ObsModel(b.dims, 12, 8, regime="vlm")
    assert torch.equal(m.enc[0].weight, torch.eye(8))
    run_federation(b, "obsalign", FedConfig(d=8, regime="vlm", rounds=1, epochs=1, warmup=0))


@pytest.mark.parametrize("kw, msg", [(dict(rounds=0), "rounds"), (dict(epochs=0), "epochs"),
                                     (dict(tau=0.0), "tau"), (dict(tau_lo=0.6, tau_hi=0.5), "tau_lo"),
                                     (dict(regime="big"), "regime")])
def test_bad_fed_config(kw, msg):
    with pytest.raises(ValueError, match=msg):
        FedConfig(**kw)


def test_unknown_method(small):
    with pytest.raises(ValueError, match="method"):
        run_federation(small, "magic", CFG)
