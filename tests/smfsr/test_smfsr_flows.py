"""Acceptance checks 1, 2, 3, 5, 6 on the analytic Gaussian oracle, and the (t, r) samplers."""

import pytest
import torch

from neurips26.smfsr.flows import (BOUNDARY, ONE_STEP, SPLIT, adaptive_weight, check_times, cosine_grid,
                                   meanflow_target, sample_meanflow_intervals, sample_split_intervals,
                                   split_target, weighted_loss)
from neurips26.smfsr.oracle import GaussianOracle
from neurips26.smfsr.sampler import euler_sample

A, SIGMA, Y = (1.5, -1.0), 0.5, 0.5  # mu = a y = (0.75, -0.5)


@pytest.fixture
def setting():
    g = torch.Generator().manual_seed(0)
    o = GaussianOracle(A, SIGMA)
    n = 2000
    y = torch.full((n,), Y, dtype=torch.float64)
    t = torch.rand(n, generator=g, dtype=torch.float64)
    r = torch.rand(n, generator=g, dtype=torch.float64) * t
    lam = torch.rand(n, generator=g, dtype=torch.float64)
    z = o.sample_marginal(t, y, g)
    return o, y, t, r, lam, z


def test_oracle_mean_is_a_times_y():
    assert torch.allclose(GaussianOracle(A, SIGMA).mean(torch.tensor([Y])), torch.tensor([[0.75, -0.5]],
                                                                                         dtype=torch.float64))


def test_check1_splitting_identity_and_euler(setting):
    o, y, t, r, lam, z = setting
    far = (t - r) > 1e-3
    err = (split_target(o, z, r, t, lam, y) - o.u(z, r, t, y))[far].abs().max()
    assert err < 1e-10
    zz, K = z.clone(), 2000
    dt = (t - r) / K
    for k in range(K):
        zz = zz - dt[:, None] * o.v(zz, t - k * dt, y)
    u_euler = (z - zz) / (t - r)[:, None]
    assert (u_euler - o.u(z, r, t, y))[far].abs().max() < 5e-3


def test_check2_meanflow_identity_via_jvp(setting):
    o, y, t, r, lam, z = setting
    target = meanflow_target(o, z, r, t, o.v(z, t, y), y)
    far = (t - r) > 1e-3
    assert (target - o.u(z, r, t, y))[far].abs().max() < 1e-6


def test_check3_one_step_euler_is_conditional_mean_and_oracle_u_keeps_sigma():
    o = GaussianOracle(A, SIGMA)
    g = torch.Generator().manual_seed(1)
    n = 20000
    y = torch.full((n,), Y, dtype=torch.float64)
    eps = torch.randn(n, 2, generator=g, dtype=torch.float64)
    ones, zeros = torch.ones(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64)
    x_euler = eps - o.v(eps, ones, y)
    assert x_euler.std(0).max() < 1e-6
    assert torch.allclose(x_euler.mean(0), torch.tensor([0.75, -0.5], dtype=torch.float64))
    x_one = eps - o.u(eps, zeros, ones, y)
    assert torch.allclose(x_one.std(0), torch.full((2,), SIGMA, dtype=torch.float64), rtol=0.02)


def test_check5_split_target_carries_no_gradient():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.SiLU(), torch.nn.Linear(16, 2))

    def u_fn(z, r, t, y):
        return net(torch.cat([z, r[:, None], t[:, None]], 1))

    z = torch.randn(32, 2)
    t = torch.rand(32)
    r = t * torch.rand(32)
    lam = torch.rand(32)
    target = split_target(u_fn, z, r, t, lam)
    assert not target.requires_grad
    grads = []
    for tgt in (target, target.clone().detach()):
        net.zero_grad()
        weighted_loss(u_fn(z, r, t, None), tgt).backward()
        grads.append([p.grad.clone() for p in net.parameters()])
    for a, b in zip(*grads):
        assert torch.equal(a, b)
    # and the gradient is that of the online prediction alone: 2 (pred - target) / numel
    pred = u_fn(z, r, t, None)
    pred.retain_grad()
    weighted_loss(pred, target).backward()
    assert torch.allclose(pred.grad, 2 * (pred - target).detach() / pred.numel())


def test_check6_sampler_n_invariance_with_oracle():
    o = GaussianOracle(A, SIGMA)
    g = torch.Generator().manual_seed(2)
    eps = torch.randn(500, 2, generator=g, dtype=torch.float64)
    y = torch.full((500,), Y, dtype=torch.float64)
    ref = euler_sample(o, eps, y, 1)
    n = eps.shape[0]
    one = eps - o.u(eps, torch.zeros(n, dtype=torch.float64), torch.ones(n, dtype=torch.float64), y)
    assert torch.equal(ref, one)
    for N in (2, 4, 8):
        assert (euler_sample(o, eps, y, N) - ref).abs().max() < 1e-9


def test_cosine_grid_values():
    g = cosine_grid(4)
    assert g[0] == 0 and g[-1] == 1
    assert torch.allclose(g, 0.5 * (1 - torch.cos(torch.pi * torch.arange(5, dtype=torch.float64) / 4)))
    with pytest.raises(ValueError, match="num_steps"):
        cosine_grid(0)


def test_split_sampler_is_an_exclusive_categorical_draw():
    g = torch.Generator().manual_seed(0)
    r, t, kind = sample_split_intervals(20000, 0.5, 0.1, g)
    assert torch.all(r <= t) and torch.all((t >= 0) & (t <= 1))
    assert torch.all(r[kind == BOUNDARY] == t[kind == BOUNDARY])
    assert torch.all((r[kind == ONE_STEP] == 0) & (t[kind == ONE_STEP] == 1))
    frac = [(kind == k).double().mean().item() for k in (BOUNDARY, ONE_STEP, SPLIT)]
    assert abs(frac[0] - 0.5) < 0.02 and abs(frac[1] - 0.1) < 0.01 and abs(frac[2] - 0.4) < 0.02
    with pytest.raises(ValueError, match="p_bnd"):
        sample_split_intervals(10, 0.8, 0.3, g)
    with pytest.raises(ValueError, match="p_one"):
        sample_split_intervals(10, 0.5, -0.1, g)


def test_meanflow_sampler_ratio():
    r, t = sample_meanflow_intervals(20000, generator=torch.Generator().manual_seed(0))
    assert torch.all(r <= t)
    assert abs((r != t).double().mean().item() - 0.25) < 0.02


def test_adaptive_weight():
    sq = torch.tensor([0.0, 1.0, 3.0], requires_grad=True)
    w = adaptive_weight(sq)
    assert not w.requires_grad
    assert torch.allclose(w, 1 / (sq.detach() + 1e-3))


def test_bad_times_are_refused():
    with pytest.raises(ValueError, match="r must be <= t"):
        check_times(torch.tensor([0.5]), torch.tensor([0.2]))
    with pytest.raises(ValueError, match="t must lie in"):
        check_times(torch.tensor([0.0]), torch.tensor([1.5]))
    with pytest.raises(ValueError, match="finite"):
        check_times(torch.tensor([float("nan")]), torch.tensor([0.5]))
    with pytest.raises(TypeError, match="r must be a torch.Tensor"):
        check_times([0.1], torch.tensor([0.5]))
