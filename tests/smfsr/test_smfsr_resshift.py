"""ResShift (residual-shifting chain) and SinSR (one-step distillation of its deterministic sampler)."""

import copy

import pytest
import torch

from neurips26.smfsr.base import upsample
from neurips26.smfsr.data import PairPool, PoolConfig
from neurips26.smfsr.models import build_backbone
from neurips26.smfsr.resshift import (ResShiftSchedule, q_sample, resshift_sample, sinsr_losses, sinsr_sample,
                                      start_state, teacher_map, train_resshift, train_sinsr)

S = ResShiftSchedule()


def test_eta_schedule_is_the_papers():
    e = S.etas()
    assert e.shape == (16,) and e[0] == 0
    assert abs(e[1].sqrt() - 0.04) < 1e-12 and abs(e[-1] - 0.999) < 1e-12
    assert torch.all(e[1:] > e[:-1])
    # sqrt(eta_t) = sqrt(eta_1) b0^beta_t with beta_t = ((t-1)/(T-1))^0.3 (T-1): beta_2 = 14 (1/14)^0.3
    b0 = (0.999 / 0.0016) ** (1 / 28)
    assert abs(e[2].sqrt() - 0.04 * b0 ** (14 * (1 / 14) ** 0.3)) < 1e-12
    with pytest.raises(ValueError, match="eta"):
        ResShiftSchedule(sqrt_eta_1=0.9999).etas()


class Oracle(torch.nn.Module):
    """f(x_t, y, t) = the true x_0 (broadcast over a batch of draws)."""
    channels = 1

    def __init__(self, x0):
        super().__init__()
        self.x0 = x0

    def forward(self, z, r, t, lr):
        return self.x0.expand_as(z)


def _x0_y(n=20000):
    g = torch.Generator().manual_seed(0)
    x0 = torch.rand(1, 1, 8, 8, generator=g, dtype=torch.float64)
    lr = torch.rand(1, 1, 2, 2, generator=g, dtype=torch.float64)
    return x0, lr, g


@pytest.mark.parametrize("t", [1, 7, 15])
def test_marginal_mean_and_variance(t):
    """q(x_t | x_0, y): mean x_0 + eta_t (y - x_0), variance kappa^2 eta_t (20K draws; 5 standard errors),
    and it equals t transitions x_s = x_{s-1} + alpha_s (y - x_0) + kappa sqrt(alpha_s) eps."""
    x0, lr, g = _x0_y()
    y = upsample(lr)
    n = 20000
    eta = float(S.etas()[t])
    xt = q_sample(x0.expand(n, -1, -1, -1), y.expand(n, -1, -1, -1), torch.full((n,), t), S,
                  torch.randn(n, 1, 8, 8, generator=g, dtype=torch.float64))
    mean, var = xt.mean(0), xt.var(0)
    sd = S.kappa * eta ** 0.5
    assert (mean - (x0 + eta * (y - x0))).abs().max() < 5 * sd / n ** 0.5 + 1e-12
    assert (var / (S.kappa ** 2 * eta) - 1).abs().max() < 5 * (2 / n) ** 0.5
    e = S.etas()
    x = x0.expand(n, -1, -1, -1).clone()
    for s in range(1, t + 1):
        a = float(e[s] - e[s - 1])
        x = x + a * (y - x0) + S.kappa * a ** 0.5 * torch.randn(x.shape, generator=g, dtype=x.dtype)
    assert (x.mean(0) - (x0 + eta * (y - x0))).abs().max() < 5 * sd / n ** 0.5 + 1e-12
    assert (x.var(0) / (S.kappa ** 2 * eta) - 1).abs().max() < 5 * (2 / n) ** 0.5


def test_posterior_step_keeps_the_marginals():
    """x_t from q(x_t | x_0, y), one stochastic posterior step with the true x_0 (oracle) -> the marginal at
    t - 1; the deterministic (SinSR) step maps the marginal's noise to the same noise at t - 1; both end at x_0."""
    x0, lr, g = _x0_y()
    y = upsample(lr)
    n = 20000
    e = S.etas()
    short = ResShiftSchedule(steps=2)  # one posterior step from t = 2 to 1, then x_0 = f
    e2 = short.etas()
    eps = torch.randn(n, 1, 8, 8, generator=g, dtype=torch.float64)
    x2 = q_sample(x0.expand(n, -1, -1, -1), y.expand(n, -1, -1, -1), torch.full((n,), 2), short, eps)
    a = float(e2[2] - e2[1])
    mean = (e2[1] / e2[2]) * x2 + (a / e2[2]) * x0
    x1 = mean + short.kappa * float(e2[1] / e2[2] * a) ** 0.5 * torch.randn(x2.shape, generator=g, dtype=x2.dtype)
    sd1 = short.kappa * float(e2[1]) ** 0.5
    assert (x1.mean(0) - (x0 + e2[1] * (y - x0))).abs().max() < 5 * sd1 / n ** 0.5
    assert (x1.var(0) / sd1 ** 2 - 1).abs().max() < 5 * (2 / n) ** 0.5
    oracle = Oracle(x0)
    lr_n = lr.expand(n, -1, -1, -1)
    xT = start_state(lr_n, S, eps)
    for det in (True, False):
        assert torch.allclose(teacher_map(oracle, lr_n, S, xT, g, deterministic=det), x0.expand(n, -1, -1, -1),
                              atol=1e-12)
    assert float(e[-1]) == pytest.approx(0.999)


def _pool(n=512):
    g = torch.Generator().manual_seed(0)
    lr = torch.rand(n, 1, 4, 4, generator=g)
    hr = (upsample(lr) + 0.1 * torch.randn(n, 1, 16, 16, generator=g)).clamp(0, 1)
    return PairPool(hr, lr, PoolConfig(n=n))


def test_resshift_trains_and_samples():
    pool = _pool()
    torch.manual_seed(0)
    m = build_backbone("mlp", 1, 16)
    log = train_resshift(m, pool, 150, batch=64, seed=0)
    assert log.steps == 150 and sum(log.losses[-20:]) < sum(log.losses[:20])
    lr = pool.lr[:8]
    a = resshift_sample(m, lr, noise=torch.randn(8, 1, 16, 16, generator=torch.Generator().manual_seed(1)))
    b = resshift_sample(m, lr, generator=torch.Generator().manual_seed(2))
    assert a.shape == (8, 1, 16, 16) and not torch.equal(a, b)  # noise-started: stochastic
    with pytest.raises(ValueError, match="noise"):
        resshift_sample(m, lr, noise=torch.randn(8, 1, 8, 8))


def test_sinsr_one_step_learns_the_teachers_deterministic_map():
    """Student initialised from the ResShift teacher: its one-step output approaches the teacher's T-step
    deterministic sample from the same x_T (error at least halved; T = 5 here for the test's time), and only
    the online predictions carry gradient (the inverted noise of the consistency term is detached)."""
    pool = _pool()
    torch.manual_seed(0)
    S = ResShiftSchedule(steps=5)
    teacher = build_backbone("mlp", 1, 16)
    train_resshift(teacher, pool, 150, batch=64, sched=S, seed=0)
    student = copy.deepcopy(teacher)
    lr = pool.lr[:256]
    noise = torch.randn(256, 1, 16, 16, generator=torch.Generator().manual_seed(5))

    def gap():
        ref = teacher_map(teacher, lr, S, start_state(lr, S, noise), deterministic=True)
        return float((sinsr_sample(student, lr, noise=noise, clamp=False) - ref).pow(2).mean())

    before = gap()
    log = train_sinsr(student, teacher, pool, 120, batch=64, sched=S, seed=1)
    after = gap()
    assert log.steps == 120 and after < 0.5 * before, (before, after)
    inverse = copy.deepcopy(student)
    for p in list(teacher.parameters()) + list(student.parameters()) + list(inverse.parameters()):
        p.grad = None
    parts = sinsr_losses(student, teacher, pool.hr[:16], pool.lr[:16], S, torch.Generator().manual_seed(0),
                         inverse=inverse)
    assert set(parts) == {"distill", "inverse", "gt", "total"}
    parts["gt"].backward()  # the consistency term: through the student only (teacher frozen, g detached)
    assert all(p.grad is None for p in teacher.parameters())
    assert all(p.grad is None for p in inverse.parameters())
    assert any(p.grad is not None and p.grad.abs().max() > 0 for p in student.parameters())
