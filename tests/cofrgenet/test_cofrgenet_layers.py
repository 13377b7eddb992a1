"""Layers: parameter counts (check 7), CFExperts dispatch (check 9), dyadic schedule (check 10),
GatedCF properties and bad input."""

import math

import pytest
import torch

from neurips26.cofrgenet import CFExperts, Cffn, DyadicSchedule, GatedCF, GeluMLP, SwiGLU, count_params, \
    matched_width
from neurips26.cofrgenet.continued_fraction import cf_nested


# ---------------------------------------------------------------- check 7
def test_cffn_param_count_prior_formula():
    assert count_params(Cffn(768, ladders=3, depth=5)) == 1_193_472
    for p, L, d in [(96, 3, 5), (17, 2, 7), (64, 1, 1)]:
        assert count_params(Cffn(p, ladders=L, depth=d)) == 2 * p * p + L * p * (d + 1)


@pytest.mark.parametrize("p, L, d", [(96, 2, 4), (768, 3, 5), (33, 1, 9)])
def test_gatedcf_param_count(p, L, d):
    assert count_params(GatedCF(p, ladders=L, depth=d)) == 3 * p * p + L * p * (2 * d + 1)


def test_gatedcf_gated_input_form():
    """Ablation reading: y = W_o(x_hat * c(x_hat)), x_hat = sigmoid(Gx) * x; params 2p^2 + Lp(2d+1)."""
    p, L, d = 6, 2, 3
    g = GatedCF(p, ladders=L, depth=d, form="gated_input").double()
    assert count_params(g) == 2 * p * p + L * p * (2 * d + 1) and g.W_u is None
    with torch.no_grad():
        g.alpha.normal_(0, 0.5)
    x = torch.randn(5, p, dtype=torch.float64)
    xh = torch.sigmoid(x @ g.W_g.weight.t()) * x
    c = sum(g.gamma[j] * cf_nested(torch.stack([torch.nn.functional.softplus(g.alpha[j, k] * xh + g.beta[j, k])
                                                + g.delta for k in range(d)], -1)) for j in range(L))
    torch.testing.assert_close(g(x), (xh * c) @ g.W_o.weight.t())
    with pytest.raises(ValueError, match="form"):
        GatedCF(p, form="mlp")
    with pytest.raises(ValueError, match="m must equal p"):
        GatedCF(p, m=2 * p, form="gated_input")


def test_gatedcf_positive_map_exp():
    torch.manual_seed(0)
    p, L, d = 5, 2, 3
    g = GatedCF(p, ladders=L, depth=d, positive_map="exp").double()
    with torch.no_grad():
        g.alpha.normal_(0, 0.5)
    x = torch.randn(4, p, dtype=torch.float64)
    h = x @ g.W_g.weight.t()
    c = sum(g.gamma[j] * cf_nested(torch.stack([torch.exp(g.alpha[j, k] * h + g.beta[j, k]) for k in range(d)], -1))
            for j in range(L))
    torch.testing.assert_close(g(x), ((x @ g.W_u.weight.t()) * c) @ g.W_o.weight.t())
    with pytest.raises(ValueError, match="positive_map"):
        GatedCF(p, positive_map="relu")


def test_matched_width_llama_example():
    target = count_params(GatedCF(96, ladders=2, depth=4))
    assert target == 29_376
    m = matched_width(target, 96, "swiglu")
    assert m == 102 and count_params(SwiGLU(96, m)) == 29_376            # spec: exactly equal
    mg = matched_width(target, 96, "gelu")
    assert abs(count_params(GeluMLP(96, mg)) - target) <= 2 * 96 + 1


# ---------------------------------------------------------------- GatedCF / Cffn semantics
def test_gatedcf_matches_formula_by_hand():
    torch.manual_seed(0)
    p, m, L, d = 5, 7, 2, 3
    g = GatedCF(p, m, ladders=L, depth=d).double()
    with torch.no_grad():
        g.alpha.normal_(0, 0.5)
        g.beta.normal_(0, 1.0)
        g.gamma.normal_(1, 0.3)
    x = torch.randn(4, p, dtype=torch.float64)
    u, h = x @ g.W_u.weight.t(), x @ g.W_g.weight.t()
    c = torch.zeros_like(u)
    for j in range(L):
        a = torch.stack([torch.nn.functional.softplus(g.alpha[j, k] * h + g.beta[j, k]) + g.delta
                         for k in range(d)], -1)
        c = c + g.gamma[j] * cf_nested(a)
    ref = (u * c) @ g.W_o.weight.t()
    torch.testing.assert_close(g(x), ref, rtol=1e-10, atol=1e-12)


def test_gatedcf_positive_has_no_poles_and_bounded_gate():
    g = GatedCF(16, depth=6)
    with torch.no_grad():
        g.alpha.normal_(0, 10.0)                 # extreme pre-activations
    h = torch.randn(1000, 16) * 100
    c, hits = g.gate(h)
    assert hits == 0 and torch.isfinite(c).all()
    # 0 < f <= 1/a_1 < 1/delta per ladder -> 0 < c/gamma_sum < 1/delta
    assert (c > 0).all() and (c < g.ladders / g.delta).all()


def test_gatedcf_signed_matches_formula_and_counts_poles():
    torch.manual_seed(1)
    g = GatedCF(6, denominators="signed", division="logexp", depth=3).double()
    with torch.no_grad():
        g.alpha.normal_(0, 1.0)
        g.beta.normal_(0, 1.0)
    x = torch.randn(50, 6, dtype=torch.float64)
    y = g(x)
    assert torch.isfinite(y).all() and int(g.stats["pole_hits"]) >= 0
    h = x @ g.W_g.weight.t()
    pre = h[:, None, None, :] * g.alpha + g.beta
    ref_c = (g.gamma * torch.stack([cf_nested(pre[:, j].transpose(-1, -2)) for j in range(g.ladders)], 1)).sum(1)
    c, _ = g.gate(h)
    from neurips26.cofrgenet import continuants
    kd = torch.stack([continuants(pre[:, j].transpose(-1, -2))[..., -1] for j in range(g.ladders)], 1)
    safe = (kd.abs() >= 0.1).all(1)                                       # rows far from poles
    torch.testing.assert_close(c[safe], ref_c[safe], rtol=1e-6, atol=1e-9)


def test_cffn_matches_formula_by_hand():
    torch.manual_seed(0)
    p, L, d = 6, 2, 4
    f = Cffn(p, ladders=L, depth=d, division="logexp").double()
    with torch.no_grad():
        f.W.normal_(0, 1.0)
    x = torch.randn(8, p, dtype=torch.float64)
    xh = torch.sigmoid(x @ f.G.weight.t()) * x
    y = x @ f.U.weight.t()
    for j in range(L):
        a = torch.stack([f.W[j, :, k] * xh for k in range(d)], -1)
        y = y + f.V[:, j] * cf_nested(a)
    from neurips26.cofrgenet import continuants
    a_all = torch.stack([torch.stack([f.W[j, :, k] * xh for k in range(d)], -1) for j in range(L)], 0)
    far = (continuants(a_all)[..., -1].abs() > 0.1).all(0).all(-1)
    torch.testing.assert_close(f(x)[far], y[far], rtol=1e-6, atol=1e-9)


def test_cffn_prior_init_odd_depth_sits_at_cap():
    """Spec risk note: N(0, 0.02) init puts K_d near 0 for odd d (most elements in the dead zone)."""
    torch.manual_seed(0)
    x = torch.randn(64, 96)
    odd, even = Cffn(96, depth=5), Cffn(96, depth=4)
    odd(x), even(x)
    frac = lambda m: float(m.stats["pole_hits"]) / float(m.stats["n_elements"])  # noqa: E731
    assert frac(odd) > 0.4 and frac(even) == 0.0


@pytest.mark.parametrize("mod", [Cffn(8), GatedCF(8), GatedCF(8, denominators="signed"), SwiGLU(8), GeluMLP(8)])
def test_layers_shapes_and_grads(mod):
    x = torch.randn(2, 3, 8, requires_grad=True)
    y = mod(x)
    assert y.shape == x.shape
    y.square().sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(t.grad).all() for t in mod.parameters())


def test_gatedcf_under_bf16_autocast_keeps_fp32_ladder():
    g = GatedCF(16)
    x = torch.randn(4, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = g(x)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y.float(), g(x), rtol=3e-2, atol=3e-3)


# ---------------------------------------------------------------- check 9: CFExperts
def _experts(E=4, p=8, seed=0):
    torch.manual_seed(seed)
    return CFExperts(E, p, lambda q: GatedCF(q, depth=3)).double()


def test_cfexperts_all_weight_on_one_expert_equals_expert():
    ex = _experts()
    h = torch.randn(10, 8, dtype=torch.float64)
    idx = torch.tensor([[2, 0]] * 10)
    w = torch.tensor([[1.0, 0.0]] * 10, dtype=torch.float64)
    torch.testing.assert_close(ex(h, idx, w), ex.experts[2](h), rtol=1e-6, atol=1e-6)


def test_cfexperts_padding_sentinel_skipped_and_weights_combine():
    ex = _experts()
    h = torch.randn(5, 8, dtype=torch.float64)
    idx = torch.tensor([[1, 4]] * 5)                         # 4 == E: padding sentinel
    w = torch.tensor([[0.3, 0.7]] * 5, dtype=torch.float64)
    torch.testing.assert_close(ex(h, idx, w), 0.3 * ex.experts[1](h))
    idx = torch.tensor([[1, 3]] * 5)
    torch.testing.assert_close(ex(h, idx, w), 0.3 * ex.experts[1](h) + 0.7 * ex.experts[3](h))


def test_cfexperts_permutation_invariance_with_router():
    """Permuting experts together with the router's rows leaves the MoE output unchanged."""
    torch.manual_seed(0)
    E, p, k = 4, 8, 2
    ex = _experts(E, p)
    router = torch.randn(E, p, dtype=torch.float64)
    h = torch.randn(12, p, dtype=torch.float64)

    def moe(experts, r):
        probs = torch.softmax(h @ r.t(), -1)
        w, idx = probs.topk(k, -1)
        return experts(h, idx, w / w.sum(-1, keepdim=True))

    perm = torch.tensor([2, 0, 3, 1])
    ex2 = CFExperts(E, p, lambda q: GatedCF(q, depth=3)).double()
    for new, old in enumerate(perm.tolist()):
        ex2.experts[new].load_state_dict(ex.experts[old].state_dict())
    torch.testing.assert_close(moe(ex2, router[perm]), moe(ex, router))


def test_cfexperts_matches_hf_mixtral_experts_with_swiglu():
    """Same dispatch as HF MixtralExperts: copy its fused weights into SwiGLU experts."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.mixtral.modeling_mixtral import MixtralExperts

    cfg = transformers.MixtralConfig(hidden_size=8, intermediate_size=12, num_local_experts=3)
    torch.manual_seed(0)
    hf = MixtralExperts(cfg)
    torch.nn.init.normal_(hf.gate_up_proj, 0, 0.3)
    torch.nn.init.normal_(hf.down_proj, 0, 0.3)
    ours = CFExperts(3, 8, lambda q: SwiGLU(q, 12))
    with torch.no_grad():
        for e, sw in enumerate(ours.experts):
            gate, up = hf.gate_up_proj[e].chunk(2, 0)
            sw.gate_proj.weight.copy_(gate)
            sw.up_proj.weight.copy_(up)
            sw.down_proj.weight.copy_(hf.down_proj[e])
    h = torch.randn(9, 8)
    idx = torch.randint(0, 3, (9, 2))
    w = torch.rand(9, 2)
    torch.testing.assert_close(ours(h, idx, w), hf(h, idx, w), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- check 10: dyadic schedule
def test_dyadic_active_depth_table():
    s = DyadicSchedule(1000, 5)
    steps = [0, 499, 500, 750, 875, 937, 938, 968, 969, 1000]
    assert [s.active_depth(t) for t in steps] == [0, 0, 1, 2, 3, 3, 4, 4, 5, 5]
    assert s.active_depth(10**6) == 5


def test_dyadic_masks_exactly_zero_grad():
    torch.manual_seed(0)
    model = torch.nn.Sequential(Cffn(8, ladders=2, depth=5, division="logexp"))
    with torch.no_grad():
        model[0].W.normal_(0, 1.0)
    s = DyadicSchedule(1000, 5)
    for step, active in [(0, 0), (760, 2), (969, 5)]:
        model.zero_grad()
        model(torch.randn(16, 8)).square().sum().backward()
        assert s.apply(model, step) == active
        g = model[0].W.grad
        assert (g[:, :, active:] == 0).all()
        if active:
            assert (g[:, :, :active].abs().sum(dim=(0, 1)) > 0).all()
        # levels "0" (U, G, V) always train
        assert model[0].U.weight.grad.abs().sum() > 0 and model[0].V.grad.abs().sum() > 0


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("ctor, kwargs, exc, word", [
    (Cffn, dict(p=0), ValueError, "p"), (Cffn, dict(p=8, depth=0), ValueError, "depth"),
    (Cffn, dict(p=8, ladders=-1), ValueError, "ladders"), (Cffn, dict(p=8.0), TypeError, "p"),
    (Cffn, dict(p=8, eps=0.0), ValueError, "eps"), (Cffn, dict(p=8, eps=float("nan")), ValueError, "eps"),
    (Cffn, dict(p=8, division="exact"), ValueError, "division"),
    (GatedCF, dict(p=8, m=0), ValueError, "m"), (GatedCF, dict(p=8, depth=-2), ValueError, "depth"),
    (GatedCF, dict(p=8, denominators="complex"), ValueError, "denominators"),
    (GatedCF, dict(p=8, denominators="signed", division="nope"), ValueError, "division"),
    (GatedCF, dict(p=8, delta=0.0), ValueError, "delta"), (GatedCF, dict(p=True), TypeError, "p"),
    (SwiGLU, dict(p=-3), ValueError, "p"), (CFExperts, dict(num_experts=0, p=4, factory=SwiGLU), ValueError,
                                             "num_experts"),
])
def test_constructor_bad_input(ctor, kwargs, exc, word):
    with pytest.raises(exc, match=rf"\b{word}\b"):
        ctor(**kwargs)


@pytest.mark.parametrize("mod", [Cffn(8), GatedCF(8), SwiGLU(8), GeluMLP(8)])
def test_forward_bad_input(mod):
    with pytest.raises(ValueError, match="last dimension p=8"):
        mod(torch.randn(3, 7))
    with pytest.raises(TypeError, match="floating dtype"):
        mod(torch.ones(3, 8, dtype=torch.int64))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        mod([[1.0] * 8])


def test_dyadic_bad_input():
    with pytest.raises(ValueError, match="total_steps"):
        DyadicSchedule(0, 5)
    with pytest.raises(ValueError, match="depth"):
        DyadicSchedule(10, -1)
    with pytest.raises(ValueError, match="step"):
        DyadicSchedule(10, 5).active_depth(-1)
    with pytest.raises(TypeError, match="step"):
        DyadicSchedule(10, 5).active_depth(1.5)
    assert math.isclose(DyadicSchedule(1000, 5).unfreeze_step(4), 937.5)
