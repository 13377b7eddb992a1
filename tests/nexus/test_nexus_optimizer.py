"""Acceptance checks 1, 2 and 5 (reduction to accumulation, Fish, bookkeeping) and bad input."""

import math

import pytest
import torch

from neurips26.nexus import Fish, GradAccumulation, MicroBatch, Nexus, lm_loss, make_outer


def _loss(model):
    return lambda b: lm_loss(model, b)


def _clone(model):
    import copy

    return copy.deepcopy(model)


def _mean_grad(model, mbs):
    params = list(model.parameters())
    total = [torch.zeros_like(p) for p in params]
    for mb in mbs:
        for t, g in zip(total, torch.autograd.grad(lm_loss(model, mb.data), params)):
            t.add_(g / len(mbs))
    return total


def _gnorm(ts):
    return math.sqrt(sum(float((t * t).sum()) for t in ts))


def test_check1_delta_equals_mean_gradient_at_tiny_eta(tiny64):
    model, mbs = tiny64
    ref = _mean_grad(model, mbs)
    opt = Nexus(model.parameters(), outer=torch.optim.SGD(model.parameters(), lr=1e-3), inner_lr=1e-8,
                normalize=False, log_cos=False)
    delta = opt.pseudo_gradient(mbs, _loss(model))
    rel = _gnorm([d - r for d, r in zip(delta, ref)]) / _gnorm(ref)
    assert rel < 1e-6
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), _clone(model).parameters()))


def test_check1_nexus_adamw_matches_accumulation_for_5_steps(tiny64):
    model, mbs = tiny64
    other = _clone(model)
    lr = 1e-3
    nx = Nexus(model.parameters(), outer=torch.optim.AdamW(model.parameters(), lr=lr), inner_lr=1e-8,
               normalize=False)
    acc = GradAccumulation(other.parameters(), outer=torch.optim.AdamW(other.parameters(), lr=lr))
    for _ in range(5):
        nx.step(mbs, _loss(model))
        acc.step(mbs, _loss(other))
    diff = max(float((a - b).detach().abs().max()) for a, b in zip(model.parameters(), other.parameters()))
    assert diff <= 1e-2 * lr


def test_check1_nexus_sgd_matches_sgd_accumulation(tiny64):
    model, mbs = tiny64
    other = _clone(model)
    # lr 1e-2: the remaining gap is the genuine O(eta) term of M3 (eta H g / 2 ~ 1e-8) times lr, not roundoff
    nx = Nexus(model.parameters(), outer=torch.optim.SGD(model.parameters(), lr=1e-2), inner_lr=1e-8,
               normalize=False)
    acc = GradAccumulation(other.parameters(), outer=torch.optim.SGD(other.parameters(), lr=1e-2))
    for _ in range(5):
        nx.step(mbs, _loss(model))
        acc.step(mbs, _loss(other))
    diff = max(float((a - b).detach().abs().max()) for a, b in zip(model.parameters(), other.parameters()))
    assert diff <= 1e-9


def test_check2_fish_equivalence(tiny64):
    model, mbs = tiny64
    ref, manual = _clone(model), _clone(model)
    eta, eps, K = 0.05, 0.3, len(mbs)
    nx = Nexus(model.parameters(), outer=torch.optim.SGD(model.parameters(), lr=eps * K * eta), inner_lr=eta,
               normalize=False)
    fish = Fish(ref.parameters(), inner_lr=eta, eps=eps)
    nx.step(mbs, _loss(model))
    fish.step(mbs, _loss(ref))
    # by hand: phi_K by K raw SGD steps, theta + eps (phi - theta)
    theta = [p.detach().clone() for p in manual.parameters()]
    for mb in mbs:
        gs = torch.autograd.grad(lm_loss(manual, mb.data), list(manual.parameters()))
        with torch.no_grad():
            for p, g in zip(manual.parameters(), gs):
                p.sub_(eta * g)
    expect = [th + eps * (p.detach() - th) for p, th in zip(manual.parameters(), theta)]
    for a, b, c in zip(model.parameters(), ref.parameters(), expect):
        assert float((a - c).detach().abs().max()) < 1e-12
        assert float((b - c).detach().abs().max()) < 1e-12


def test_check5_bookkeeping(tiny64):
    model, mbs = tiny64
    K = len(mbs)
    outer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    nx = Nexus(model.parameters(), outer=outer, inner_lr_ratio=0.1, log_cos=False)
    counts = {"fwd": 0, "bwd": 0, "outer": 0}
    model.register_forward_hook(lambda *a: counts.__setitem__("fwd", counts["fwd"] + 1))
    model.lm_head.register_full_backward_hook(lambda *a: counts.__setitem__("bwd", counts["bwd"] + 1))
    outer.register_step_post_hook(lambda *a: counts.__setitem__("outer", counts["outer"] + 1))
    seen = []

    def loss_fn(b):
        if not seen or seen[-1] is None:
            seen.append([p.detach().clone() for p in model.parameters()])
        return lm_loss(model, b)

    for step in range(3):
        theta = [p.detach().clone() for p in model.parameters()]
        before = dict(counts)
        seen.append(None)
        nx.step(mbs, loss_fn)
        assert all(torch.equal(a, b) for a, b in zip(seen[-1], theta))  # phi re-synced bitwise
        assert counts["fwd"] - before["fwd"] == K
        assert counts["bwd"] - before["bwd"] == K
        assert counts["outer"] - before["outer"] == 1
    n_params = sum(p.numel() for p in model.parameters())
    assert sum(t.numel() for t in nx._theta) == n_params  # the one extra copy
    assert nx._prev is None
    assert set(outer.state[next(iter(model.parameters()))]) == {"step", "exp_avg", "exp_avg_sq"}
    assert len(nx.state) == 0  # Nexus itself keeps no optimizer state
    on = Nexus(model.parameters(), outer=torch.optim.AdamW(model.parameters(), lr=1e-3), log_cos=True)
    on.step(mbs, _loss(model))
    assert sum(t.numel() for t in on._prev) == n_params and math.isfinite(on.last_stats["cos"])


def test_inner_lr_defaults(tiny64):
    model, _ = tiny64
    default = Nexus(model.parameters(), outer=torch.optim.SGD(model.parameters(), lr=0.1))
    assert default.defaults["inner_lr_ratio"] == 0.1
    fixed = Nexus(model.parameters(), outer=torch.optim.SGD(model.parameters(), lr=0.1), inner_lr=0.3)
    assert fixed.defaults["inner_lr_ratio"] is None and fixed.inner_lr() == 0.3


def test_inner_lr_follows_outer_scheduler(tiny64):
    model, mbs = tiny64
    outer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(outer, step_size=1, gamma=0.5)
    nx = Nexus(model.parameters(), outer=outer, inner_lr_ratio=0.2)
    n = sum(p.numel() for p in model.parameters())
    nx.step(mbs, _loss(model))
    assert nx.last_stats["inner_lr"] == pytest.approx(0.2 * 1e-3 * math.sqrt(n))
    sched.step()
    nx.step(mbs, _loss(model))
    assert nx.last_stats["inner_lr"] == pytest.approx(0.2 * 0.5e-3 * math.sqrt(n))


def test_muon_composite_and_state_dict_roundtrip(tiny64):
    model, mbs = tiny64
    model = model.float()
    mbs32 = mbs
    outers = make_outer("muon", model.named_parameters(), lr=1e-3)
    assert [type(o).__name__ for o in outers] == ["AdamW", "Muon"]
    nx = Nexus(model.parameters(), outer=outers, inner_lr_ratio=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    nx.step(mbs32, _loss(model))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    sd = nx.state_dict()
    fresh = Nexus(model.parameters(), outer=make_outer("muon", model.named_parameters(), lr=1e-3))
    fresh.load_state_dict(sd)
    assert fresh.outer_steps == 1
    assert len(fresh.outers[0].state) == len(outers[0].state)


@pytest.mark.parametrize("kw, exc, word", [
    (dict(inner_lr=0.0), ValueError, "inner_lr"),
    (dict(inner_lr=float("nan")), ValueError, "inner_lr"),
    (dict(inner_lr_ratio=-1.0), ValueError, "inner_lr_ratio"),
    (dict(inner_lr_ratio=0.1, inner_lr=0.1), ValueError, "not both"),
    (dict(inner_lr_ratio=None), ValueError, "got neither"),
    (dict(outer="adamax"), ValueError, "outer"),
    (dict(outer=object()), TypeError, "outer"),
])
def test_bad_constructor_arguments(tiny64, kw, exc, word):
    model, _ = tiny64
    kw.setdefault("outer", torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(exc, match=word):
        Nexus(model.parameters(), **kw)


def test_bad_step_inputs(tiny64):
    model, mbs = tiny64
    nx = Nexus(model.parameters(), outer=torch.optim.SGD(model.parameters(), lr=0.1), sources=("a", "b", "c"))
    with pytest.raises(TypeError, match="loss_fn"):
        nx.step(mbs)
    with pytest.raises(ValueError, match="K >= 1"):
        nx.step([], _loss(model))
    with pytest.raises(ValueError, match="unknown source 'zz'"):
        nx.step([MicroBatch("zz", mbs[0].data)], _loss(model))
    strict = Nexus(model.parameters(), outer=torch.optim.SGD(model.parameters(), lr=0.1),
                   sources=("a", "b", "c"), require_all_sources=True)
    with pytest.raises(ValueError, match="require_all_sources"):
        strict.step(mbs[:2], _loss(model))
    theta = [p.detach().clone() for p in model.parameters()]
    calls = []

    def bad(b):
        calls.append(1)
        loss = lm_loss(model, b)
        return loss * float("inf") if len(calls) == 2 else loss

    with pytest.raises(FloatingPointError, match=r"outer step 0, micro-batch 1 \(source 'b'\)"):
        nx.step(mbs, bad)
    assert all(torch.equal(a, b) for a, b in zip(theta, model.parameters()))  # theta restored
    with pytest.raises(ValueError, match="own exactly"):
        Nexus(list(model.parameters())[:1], outer=torch.optim.SGD(model.parameters(), lr=0.1))
