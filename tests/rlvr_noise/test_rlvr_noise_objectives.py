"""Acceptance checks 1-8 on the GRPO-family objectives (hand-computed values, autograd, closed forms)."""

import math
from itertools import combinations

import numpy as np
import pytest
import torch

from neurips26.rlvr_noise.objectives import (VARIANTS, Variant, get_variant, group_advantages,
                                             informative_groups, kl_grad_coef, overlong_shaping, pass_at_k,
                                             pgbc_advantages, pgfc_advantages, policy_loss, sapo_gate,
                                             token_grad_coef)



@pytest.fixture(autouse=True)
def _float64():
    """These checks compare against hand values in double precision; the default is restored after each test
    (a module-level set_default_dtype leaked float64 into every other paper's tests at collection)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def test_check1_advantages():
    r = np.array([[1, 0, 0, 1, 1, 0, 0, 0], [1] * 8, [0.3, 0.9, 0.1, 0.5, 0.5, 0.2, 0.8, 0.0]], float)
    a = group_advantages(r)
    np.testing.assert_allclose(a[[0, 2]].mean(1), 0, atol=1e-12)
    np.testing.assert_allclose(a[[0, 2]].std(1), 1, atol=1e-5)
    assert np.all(a[1] == 0)
    np.testing.assert_allclose(group_advantages(r, "none"), r - r.mean(1, keepdims=True))
    assert informative_groups(r).tolist() == [True, False, True]
    # hand value: rewards (1, 0): mean 0.5, population std 0.5 -> +-1/(0.5+1e-6)*0.5
    np.testing.assert_allclose(group_advantages([[1.0, 0.0]]), [[0.5 / (0.5 + 1e-6), -0.5 / (0.5 + 1e-6)]])


def test_bad_input():
    with pytest.raises(ValueError, match="G"):
        group_advantages([[1.0]])
    with pytest.raises(ValueError, match="rewards"):
        group_advantages(np.zeros((0, 4)))
    with pytest.raises(ValueError, match="eps_low"):
        Variant("x", eps_low=0.0)
    with pytest.raises(ValueError, match="eps_high"):
        Variant("x", eps_low=0.2, eps_high=0.1)
    with pytest.raises(ValueError, match="tau_pos"):
        Variant("x", gate="sapo", tau_pos=0.0)
    with pytest.raises(ValueError, match="tau_neg"):
        Variant("x", gate="sapo", tau_neg=-1.0)
    with pytest.raises(ValueError, match="tis_cap"):
        Variant("x", tis_cap=0.5)
    with pytest.raises(TypeError, match="bf16_sampler"):
        Variant("x", bf16_sampler="yes")
    with pytest.raises(ValueError, match="beta"):
        kl_grad_coef(np.zeros(2), np.zeros(2), -0.1)
    with pytest.raises(ValueError, match="rho0"):
        pgbc_advantages([[1.0, 0.0]], rho0=1.0, rho1=0.0)
    with pytest.raises(ValueError, match="< 1"):
        pgbc_advantages([[1.0, 0.0]], rho0=0.6, rho1=0.4)
    with pytest.raises(ValueError, match="variant"):
        get_variant("ppo2")
    with pytest.raises(ValueError, match="adv"):
        policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3))


def test_check2_grpo_gradient_is_reinforce():
    rng = np.random.default_rng(0)
    z = torch.tensor(rng.normal(size=6), requires_grad=True)
    G = 8
    ks = torch.tensor(rng.integers(0, 6, size=G))
    R = rng.integers(0, 2, size=(1, G)).astype(float)
    R[0, 0], R[0, 1] = 1, 0
    A = group_advantages(R)[0]
    logp_k = torch.log_softmax(z, 0)[ks]
    # 2-token responses: token 0 = skill (depends on z), token 1 = format (held fixed)
    logp = torch.stack([logp_k, torch.full((G,), -1.0)], 1)
    loss = policy_loss(logp, logp.detach(), torch.tensor(A), torch.ones(G, 2), "grpo")
    (-loss).backward()
    pi = torch.softmax(z, 0).detach().numpy()
    ref = sum(A[i] * (np.eye(6)[ks[i]] - pi) for i in range(G)) / (G * 2)
    np.testing.assert_allclose(z.grad.numpy(), ref, rtol=1e-8, atol=1e-14)


def _grad_of_term(variant, ratio, adv):
    lp = torch.tensor([[math.log(ratio)]], requires_grad=True)
    loss = policy_loss(lp, torch.zeros(1, 1), torch.tensor([adv]), torch.ones(1, 1), variant)
    (-loss).backward()
    return float(lp.grad)


def test_check3_clipping():
    g, d = VARIANTS["grpo"], VARIANTS["dapo"]
    assert _grad_of_term(g, 1.25, 1.0) == 0.0 and _grad_of_term(g, 0.75, -1.0) == 0.0
    assert _grad_of_term(g, 1.25, -1.0) != 0.0 and _grad_of_term(g, 0.75, 1.0) != 0.0
    assert _grad_of_term(d, 1.25, 1.0) != 0.0 and _grad_of_term(d, 1.3, 1.0) == 0.0
    for v in ("grpo", "dapo", "sapo"):
        for r in (0.5, 0.79, 1.0, 1.1, 1.21, 1.27, 1.5):
            for a in (-1.3, 0.7):
                assert _grad_of_term(VARIANTS[v], r, a) == pytest.approx(
                    float(token_grad_coef(r, a, VARIANTS[v])), abs=1e-12)


def test_check4_sapo():
    for tau in (1.0, 1.05):
        r = torch.tensor(1.0, requires_grad=True)
        sapo_gate(r, tau).backward()
        assert float(r.grad) == pytest.approx(1.0, abs=1e-12)
        d = [4 * s * (1 - s) for s in (1 / (1 + np.exp(-tau * (x - 1))) for x in (1.0, 1.2, 1.5, 2.0))]
        assert all(a > b for a, b in zip(d, d[1:]))
    rng = np.random.default_rng(1)
    grads = {}
    for v in ("grpo", "sapo"):
        z = torch.tensor(rng.normal(size=(4, 3)) if v == "grpo" else grads["z0"], requires_grad=True)
        grads.setdefault("z0", z.detach().numpy().copy())
        logp = torch.log_softmax(z, 1)
        policy_loss(logp, logp.detach(), torch.tensor([1.0, -0.5, 0.2, -0.7]), torch.ones(4, 3), v).backward()
        grads[v] = z.grad.numpy()
    np.testing.assert_allclose(grads["sapo"], grads["grpo"], rtol=1e-8)


def test_check5_aggregation():
    mask = torch.tensor([[1.0] + [0.0] * 8, [1.0] * 9])
    lp = torch.zeros(2, 9, requires_grad=True)
    adv = torch.tensor([1.0, 1.0])
    w = {}
    for v in ("grpo", "dapo", "dr_grpo"):
        lp.grad = None
        policy_loss(lp, lp.detach(), adv, mask, v, l_max=12).backward()
        g = -lp.grad
        w[v] = (g[0].sum().item(), g[1].sum().item())
    assert w["grpo"][0] == pytest.approx(w["grpo"][1])                     # per-sequence mean: equal
    assert w["dapo"][1] / w["dapo"][0] == pytest.approx(9.0)               # token mean: 1:9
    assert w["dr_grpo"] == pytest.approx((1 / 24, 9 / 24))                 # sum / (G L_max)


def test_check6_tis():
    rng = np.random.default_rng(2)
    lp = torch.tensor(rng.normal(size=(3, 4)) - 2)
    old = lp + 0.1 * torch.tensor(rng.normal(size=(3, 4)))
    adv, mask = torch.tensor([1.0, -1.0, 0.5]), torch.ones(3, 4)
    assert policy_loss(lp, old, adv, mask, "tis").item() == policy_loss(lp, old, adv, mask, "grpo").item()
    mu = old - 3.0                                          # sampler far below: weights capped at C = 2
    l_tis = policy_loss(lp, old, adv, mask, "tis", sampler_logp=mu)
    assert l_tis.item() == pytest.approx(2.0 * policy_loss(lp, old, adv, mask, "grpo").item())
    w = token_grad_coef(np.ones(4), 1.0, VARIANTS["tis"], tis_w=np.array([0.5, 1.5, 3.0, 100.0]))
    assert w.max() <= 2.0 and w.tolist() == [0.5, 1.5, 2.0, 2.0]


def test_check7_pgfc_pgbc_on_flipped_bandit():
    logits = np.array([0.5, 0, -0.5, 0.2, -0.2])
    pi = np.exp(logits) / np.exp(logits).sum()
    R = np.array([1, 0, 0, 1, 0.0])
    rho0, rho1 = 0.1, 0.3
    clean = sum(pi[k] * R[k] * (np.eye(5)[k] - pi) for k in range(5))
    rng = np.random.default_rng(0)
    k = rng.choice(5, size=100_000, p=pi)
    u = rng.random(k.size)
    noisy = np.where(R[k] == 1, u >= rho1, u < rho0).astype(float)
    w = pgfc_advantages(noisy[None, :], rho1=rho1, rho0=rho0)[0]
    g = (w[:, None] * (np.eye(5)[k] - pi)).mean(0)
    cos = g @ clean / np.linalg.norm(g) / np.linalg.norm(clean)
    assert cos >= 0.99
    assert np.linalg.norm(g) / np.linalg.norm(clean) == pytest.approx(1 - rho0 - rho1, rel=0.10)
    # PGBC unbiased: E[R^ | R=1] = 1, E[R^ | R=0] = 0
    for r, p1 in ((1, 1 - rho1), (0, rho0)):
        e = p1 * pgbc_advantages([[1.0, 1.0]], rho0, rho1)[0, 0] + (1 - p1) * pgbc_advantages([[0.0, 0.0]],
                                                                                             rho0, rho1)[0, 0]
        assert e == pytest.approx(r)
    # PGBC then GRPO standardisation == GRPO (affine invariance)
    rt = rng.integers(0, 2, size=(20, 8)).astype(float)
    np.testing.assert_allclose(group_advantages(pgbc_advantages(rt, rho0, rho1)), group_advantages(rt),
                               atol=1e-5)
    # ... and so is PGFC then standardisation: the only distinct placement is the one used (no group norm)
    np.testing.assert_allclose(group_advantages(pgfc_advantages(rt, rho1)), group_advantages(rt), atol=1e-5)
    with pytest.raises(ValueError, match="rho1"):
        pgfc_advantages(rt, rho1=1.0)


def test_check8_pass_at_k_vs_enumeration():
    for n in range(1, 7):
        for c in range(n + 1):
            for k in range(1, n + 1):
                hits = [any(i < c for i in s) for s in combinations(range(n), k)]
                assert pass_at_k(n, c, k) == pytest.approx(sum(hits) / len(hits))
    with pytest.raises(ValueError, match="k"):
        pass_at_k(4, 1, 5)


def test_overlong_shaping():
    np.testing.assert_allclose(overlong_shaping([10, 16, 20, 24, 30], 24, 8), [0, 0, -0.5, -1, -1])


def test_kl_penalty_k3():
    import torch

    g = torch.Generator().manual_seed(0)
    logp = torch.randn(4, 5, generator=g, dtype=torch.float64, requires_grad=True)
    old = logp.detach() + 0.1 * torch.randn(4, 5, generator=g, dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5], dtype=torch.float64)
    mask = torch.ones(4, 5, dtype=torch.float64)
    plain = policy_loss(logp, old, adv, mask, "grpo")
    # pi_ref == pi_theta: k3 = 0 and its gradient is 0
    same = policy_loss(logp, old, adv, mask, "grpo", ref_logp=logp.detach(), beta=0.1)
    assert float(abs(same - plain)) < 1e-12
    ref = logp.detach() + 0.3
    k3 = (torch.exp(ref - logp) - (ref - logp) - 1).detach()
    with_kl = policy_loss(logp, old, adv, mask, "grpo", ref_logp=ref, beta=0.1)
    assert float(abs(with_kl - plain - 0.1 * (k3.sum(1) / 5).mean())) < 1e-12
    with pytest.raises(ValueError, match="ref_logp"):
        policy_loss(logp, old, adv, mask, "grpo", beta=0.1)
    with pytest.raises(ValueError, match="beta"):
        policy_loss(logp, old, adv, mask, "grpo", ref_logp=ref, beta=-1.0)


def test_kl_grad_coef_is_autograd_of_the_k3_term_and_bf16_sampler_option():
    logp = torch.tensor([[-1.2, -0.3, -2.0]], requires_grad=True)
    ref = torch.tensor([[-0.9, -0.5, -2.4]])
    zero = torch.zeros(1)                       # A = 0: only the KL term acts
    (-policy_loss(logp, logp.detach(), zero, torch.ones(1, 3), "grpo", ref_logp=ref, beta=0.3)).backward()
    np.testing.assert_allclose(logp.grad.numpy(), kl_grad_coef(logp.detach().numpy(), ref.numpy(), 0.3) / 3,
                               rtol=1e-12)
    assert VARIANTS["tis"].samples_bf16 and not VARIANTS["grpo"].samples_bf16
    assert not Variant("tis_fp32", tis_cap=2.0, bf16_sampler=False).samples_bf16
    assert Variant("grpo_bf16", bf16_sampler=True).samples_bf16
