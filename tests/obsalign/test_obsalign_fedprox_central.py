"""FedProx (mu = 0 is FedAvg-NoAlign bitwise; the proximal gradient is mu (w - w_global)) and the
centralised pooled-data reference."""

import copy

import numpy as np
import pytest
import torch

from neurips26.obsalign.federation import (FEDPROX_MU, METHODS, FedConfig, Method, proximal_term,
                                           pooled_split, run_centralised, run_federation, source_accuracy)
from neurips26.obsalign.model import ObsModel
from neurips26.obsalign.obsbench import SourceSpec, make_obsbench

CFG = FedConfig(rounds=2, epochs=1, warmup=1)


@pytest.fixture(scope="module")
def small():
    specs = [SourceSpec((0, 1), None, 80), SourceSpec((0, 2), None, 80, label_fraction=0.3),
             SourceSpec((1, 2), tuple(range(3, 12)), 60)]
    return make_obsbench(0, specs, unimodal_per_class=4)


def _params(res):
    return [[p.detach().clone() for p in m.parameters()] for m in res.models]


def test_fedprox_is_the_registered_baseline():
    m = METHODS["fedprox"]
    assert m.prox_mu == FEDPROX_MU == 0.01
    assert (m.align, m.transfer, m.consolidation) == ("none", "none", "fedavg")


def test_mu_zero_is_noalign_bitwise_and_mu_positive_differs(small):
    a = run_federation(small, "noalign", CFG, seed=1)
    b = run_federation(small, Method("fedprox0", prox_mu=0.0), CFG, seed=1)
    for pa, pb in zip(_params(a), _params(b)):
        assert all(torch.equal(x, y) for x, y in zip(pa, pb))
    assert a.round_acc == b.round_acc
    c = run_federation(small, Method("fedprox_big", prox_mu=10.0), CFG, seed=1)
    assert not all(torch.equal(x, y) for x, y in zip(_params(a)[0], _params(c)[0]))


def test_proximal_gradient_is_mu_times_displacement():
    torch.manual_seed(0)
    model = ObsModel((5, 4, 3), 6, 8)
    anchor = {k: p.detach().clone() for k, p in model.named_parameters()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    mu = 0.37
    term = proximal_term(model, anchor, mu)
    term.backward()
    sq = sum(float(((p.detach() - anchor[k]) ** 2).sum()) for k, p in model.named_parameters())
    assert float(term.detach()) == pytest.approx(0.5 * mu * sq, rel=1e-5)
    for k, p in model.named_parameters():
        torch.testing.assert_close(p.grad, mu * (p.detach() - anchor[k]))
    at_anchor = {k: p.detach() for k, p in model.named_parameters()}
    assert float(proximal_term(copy.deepcopy(model), at_anchor, mu).detach()) == 0.0
    with pytest.raises(ValueError, match="mu"):
        proximal_term(model, anchor, -1.0)
    with pytest.raises(ValueError, match="prox_mu"):
        Method("bad", prox_mu=-0.1)


def test_fedprox_pulls_local_models_toward_the_round_start(small):
    """A large mu keeps each source's first-round local model nearer the broadcast initialisation."""
    cfg = FedConfig(rounds=1, epochs=1, warmup=1)
    dist = {}
    for mu in (0.0, 50.0):
        res = run_federation(small, Method(f"p{mu}", prox_mu=mu, consolidation="none"), cfg, seed=2)
        torch.manual_seed(2)
        init = ObsModel(small.dims, 12, cfg.d)
        dist[mu] = sum(float(((p - q) ** 2).sum()) for m in res.models
                       for p, q in zip(m.parameters(), init.parameters()))
    assert dist[50.0] < dist[0.0]


def test_pooled_split_concatenates_every_source(small):
    sp = pooled_split([s.train for s in small.sources])
    assert len(sp) == sum(len(s.train) for s in small.sources)
    np.testing.assert_array_equal(sp.y_obs, np.concatenate([s.train.y_obs for s in small.sources]))
    np.testing.assert_array_equal(sp.x[2], np.concatenate([s.train.x[2] for s in small.sources]))
    with pytest.raises(ValueError, match="splits"):
        pooled_split([])


def test_centralised_reference_one_model_learns(small):
    cfg = FedConfig(rounds=4, epochs=1)
    res = run_centralised(small, cfg, seed=0)
    assert all(m is res.global_model for m in res.models) and len(res.round_acc) == 4
    assert res.omega is None and res.guidance == [None] * len(small.sources)
    acc = source_accuracy(small, res.models, res.guidance)
    assert np.mean(acc) > 2.0 / 12           # well above chance on 12 classes
    again = run_centralised(small, cfg, seed=0)
    assert again.round_acc == res.round_acc
