"""Acceptance checks 5-7: the global norm invariant, drift over 20 random adapters, the Lipschitz bound."""
import math

import numpy as np
import pytest
import torch

from neurips26.nota.accumulation import (accumulate, bound_global, bound_plain, bound_taskwise, drifts,
                                         global_drift_exact, global_normalize)
from neurips26.nota.adapters import AdaptedLinear


def unit_adapters(n, seed, d=64):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        a = torch.randn(d, d, generator=g, dtype=torch.float64)
        out.append(a / a.norm())
    return out


def totals(deltas, rule, **kw):
    return [accumulate(deltas[:t], rule, **kw) for t in range(1, len(deltas) + 1)]


def test_global_drift_over_20_adapters_matches_closed_form():
    deltas = unit_adapters(20, 0)
    tot = totals(deltas, "global", gamma=1.0, eps=1e-12)
    d = drifts(tot)
    assert max(d) <= 2.0
    s = [sum(deltas[:t]) for t in range(1, 21)]
    for k in range(20):
        cos = float((s[-1] * s[k]).sum() / (s[-1].norm() * s[k].norm()))
        assert abs(d[k] - math.sqrt(max(2 - 2 * cos, 0.0))) < 1e-9
        assert abs(d[k] - global_drift_exact(s[-1], s[k], 1.0, 1e-12)) < 1e-9


def test_taskwise_drift_grows_like_sqrt_t():
    at8 = []
    for draw in range(10):
        deltas = unit_adapters(20, 100 + draw)
        d1 = [drifts(totals(deltas[:t], "taskwise"))[0] for t in range(2, 21)]
        assert all(b > a for a, b in zip(d1, d1[1:])), f"draw {draw}: not increasing"
        assert all(x > 2 for x in d1[6:]), "T >= 8 must exceed 2 = the global bound"
        at8.append(d1[6])
    assert abs(np.mean(at8) / math.sqrt(7) - 1) < 0.05
    # the plain rule's bound sum_{i>k} ||dW_i|| = T - k grows in T, and bounds the drift
    deltas = unit_adapters(8, 7)
    tot = totals(deltas, "plain")
    assert all(drifts(tot)[k] <= bound_plain(deltas, k + 1) + 1e-12 for k in range(8))
    assert bound_plain(deltas, 1) == pytest.approx(7.0)
    ones = [1.0] * 8
    assert drifts(totals(deltas, "taskwise"))[0] <= bound_taskwise(ones, ones, deltas[0], 1) + 1e-12


def test_global_invariant_in_trained_layer():
    torch.manual_seed(0)
    layer = AdaptedLinear(torch.nn.Linear(64, 64), kind="mpo", rule="global", rho=0.05)
    x = torch.randn(32, 64)
    for t in range(3):
        layer.new_task()
        opt = torch.optim.Adam([p for p in layer.parameters() if p.requires_grad], lr=1e-2)
        for _ in range(5):
            loss = (layer(x) - x.flip(1)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            s, dw = layer.raw_sum(), layer.delta()
            g, e = layer.gamma0, layer.eps
            assert float(dw.norm()) <= g * (1 + 1e-6)
            ns = float(s.norm())
            assert abs(float(dw.norm()) - g * ns / math.sqrt(ns ** 2 + e ** 2)) < 1e-6
            assert float(dw.norm()) > 0.9 * g     # after training ||S|| >> eps: the budget is used


def test_lipschitz_bound_on_linear_softmax():
    """Check 7: 10 tasks of a linear softmax model under the global rule; forgetting <= 2 L gamma."""
    rng = np.random.default_rng(0)
    d, c, n, t_n, gamma, eps = 8, 5, 40, 10, 0.5, 1e-6
    w0 = torch.from_numpy(rng.standard_normal((c, d)) * 0.1)
    data = [(torch.from_numpy(rng.standard_normal((n, d))), torch.from_numpy(rng.integers(0, c, n)))
            for _ in range(t_n)]
    lip = math.sqrt(2) * max(float(x.norm(dim=1).max()) for x, _ in data)

    def loss(w, k):
        x, y = data[k]
        return float(torch.nn.functional.cross_entropy(x @ w.T, y))

    deltas, tot = [], []
    for t in range(t_n):
        cur = torch.zeros(c, d, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.Adam([cur], lr=0.05)
        for _ in range(30):
            w = w0 + accumulate([*deltas, cur], "global", gamma=gamma, eps=eps)
            lo = torch.nn.functional.cross_entropy(data[t][0] @ w.T, data[t][1])
            opt.zero_grad()
            lo.backward()
            opt.step()
        deltas.append(cur.detach())
        tot.append(accumulate(deltas, "global", gamma=gamma, eps=eps))
    dr = drifts(tot)
    for k in range(t_n):
        forget = loss(w0 + tot[-1], k) - loss(w0 + tot[k], k)
        assert forget <= lip * dr[k] + 1e-9
        assert forget <= bound_global(lip, gamma) + 1e-9
    assert max(float(w.norm()) for w in tot) <= gamma


def test_accumulate_rules_and_bad_inputs():
    a, b = unit_adapters(2, 3)
    assert torch.allclose(accumulate([a, 2 * b], "plain"), a + 2 * b)
    assert torch.allclose(accumulate([3 * a, b], "taskwise", alphas=[0.5, 2.0]), 0.5 * a + 2 * b)
    s = a + b
    assert torch.allclose(accumulate([a, b], "global", gamma=2.0, eps=1e-3), global_normalize(s, 2.0, 1e-3))
    with pytest.raises(ValueError, match="rule"):
        accumulate([a], "sum")
    with pytest.raises(ValueError, match="gamma"):
        accumulate([a], "global", gamma=0.0, eps=1e-3)
    with pytest.raises(ValueError, match="eps"):
        accumulate([a], "global", gamma=1.0, eps=0.0)
    with pytest.raises(ValueError, match="rho"):
        AdaptedLinear(torch.nn.Linear(64, 64), rho=-1.0)
    with pytest.raises(ValueError, match="eps_rel"):
        AdaptedLinear(torch.nn.Linear(64, 64), eps_rel=0.0)
    with pytest.raises(ValueError, match="rule"):
        AdaptedLinear(torch.nn.Linear(64, 64), rule="normalized")


def test_model_scope_normalizes_the_concatenation():
    from neurips26.nota.adapters import ModelScope
    torch.manual_seed(2)
    layers = [AdaptedLinear(torch.nn.Linear(64, 64), rule=r) for r in ("global", "hier")]
    scope = ModelScope(layers, rho=0.05, eps_rel=1e-3)
    for lay in layers:
        lay.new_task()
        with torch.no_grad():
            for c in lay.adapters[-1].cores:
                c.normal_()
    s = [lay.raw_sum() for lay in layers]
    denom = math.sqrt(sum(float(x.pow(2).sum()) for x in s) + scope.eps ** 2)
    with scope:
        d = [lay.delta() for lay in layers]
    total = math.sqrt(sum(float(x.pow(2).sum()) for x in d))
    assert total <= scope.gamma * (1 + 1e-6)
    assert abs(total - scope.gamma * math.sqrt(denom ** 2 - scope.eps ** 2) / denom) < 1e-6
    assert torch.allclose(layers[0].delta(), d[0])      # cached and fresh denominators agree
    single = AdaptedLinear(torch.nn.Linear(64, 64), rule="global")
    ModelScope([single])
    single.new_task()
    with torch.no_grad():
        for c in single.adapters[-1].cores:
            c.normal_()
    ref = global_normalize(single.raw_sum(), single.gamma0, single.eps)
    assert torch.allclose(single.delta(), ref, atol=1e-7)   # one layer: model scope == layer scope
    with pytest.raises(ValueError, match="scope='model'"):
        ModelScope([AdaptedLinear(torch.nn.Linear(64, 64), rule="plain")])
