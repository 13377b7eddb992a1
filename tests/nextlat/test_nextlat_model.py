import copy

import pytest
import torch

from neurips26.nextlat.latent_dynamics import LatentDynamics, latent_width
from neurips26.nextlat.model import (NextLatForCausalLM, gpt_loss, kl_forward, nextlat_loss_reference,
                                     tiny_llama)

V = 13


def _model(d=1, lam=1.0, dtype=torch.float64, eos=None, pad=None, seed=0):
    torch.manual_seed(seed)
    base = tiny_llama(V, hidden=32, layers=1, heads=2, ctx=32, dtype=dtype)
    return NextLatForCausalLM(base, d=d, lambda_h=lam, lambda_kl=lam, proj_factor=2.0,
                              eos_token_id=eos, pad_token_id=pad)


def test_width_rule():
    assert latent_width(384, 0.5) == 384
    assert latent_width(64, 1.0) == 128
    assert latent_width(768, 1.3) == 2048
    with pytest.raises(ValueError, match="proj_factor"):
        latent_width(64, 0.5)
    with pytest.raises(ValueError, match="proj_factor"):
        LatentDynamics(64, 0.0)


def test_residual_identity_and_init():
    torch.manual_seed(0)
    psi = LatentDynamics(64)
    w = psi.mlp[0].weight
    assert abs(float(w.detach().std()) - 0.02) < 0.003 and all(lin.bias is None for lin in psi.mlp[::2])
    torch.nn.init.zeros_(psi.mlp[4].weight)
    h, e = torch.randn(3, 5, 64), torch.randn(3, 5, 64)
    assert torch.equal(psi(h, e), h)
    psi2 = LatentDynamics(64, norm="rms")
    assert isinstance(psi2.norm, torch.nn.RMSNorm)


def test_lambda_zero_equals_gpt():
    m = _model(lam=0.0)
    ref = copy.deepcopy(m.model)
    x = torch.randint(0, V, (3, 16))
    out = m(x)
    out.loss.backward()
    loss_ref = gpt_loss(ref, x)
    loss_ref.backward()
    assert abs(float(out.loss) - float(loss_ref)) < 1e-7
    for (n, p), (_, q) in zip(m.model.named_parameters(), ref.named_parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-7, rtol=0), n
    assert all(p.grad is None or float(p.grad.abs().max()) == 0 for p in m.psi.parameters())


def test_aux_grad_ablation_gives_the_trunk_the_ce_gradient_only():
    """aux_grad_to_trunk=False (ablation): trunk/head gradients equal GPT's, psi still learns; True differs."""
    x = torch.randint(0, V, (3, 16))
    for aux in (False, True):
        torch.manual_seed(0)
        base = tiny_llama(V, hidden=32, layers=1, heads=2, ctx=32, dtype=torch.float64)
        m = NextLatForCausalLM(base, d=2, proj_factor=2.0, aux_grad_to_trunk=aux)
        ref = copy.deepcopy(m.model)
        m(x).loss.backward()
        gpt_loss(ref, x).backward()
        diff = max(float((p.grad - q.grad).abs().max()) for p, q in zip(m.model.parameters(), ref.parameters()))
        assert (diff < 1e-12) == (not aux), (aux, diff)
        assert float(m.psi.mlp[4].weight.grad.abs().max()) > 0
    with pytest.raises(TypeError, match="aux_grad_to_trunk"):
        NextLatForCausalLM(tiny_llama(V, hidden=32, layers=1, heads=2, ctx=32), aux_grad_to_trunk=1)


def test_stop_gradient_placement():
    m = _model(d=1)
    x = torch.randint(0, V, (2, 10))
    h = m.hidden(x).detach().requires_grad_(True)
    steps = m.rollout(h, x)
    import torch.nn.functional as F
    lat = F.smooth_l1_loss(steps[0], h[:, 1:].detach())
    (g,) = torch.autograd.grad(lat, h)
    assert float(g[:, -1].abs().max()) == 0.0          # last position is only ever a target
    assert float(g[:, :-1].abs().sum(-1).min()) > 0     # every earlier (unmasked) input latent gets gradient


def test_kl_never_reaches_lm_head():
    m = _model(d=2)
    m.lambda_h = 0.0
    x = torch.randint(0, V, (2, 12))
    out = m(x)
    (m.lambda_kl * out.kl).backward()
    assert m.head.weight.grad is None or float(m.head.weight.grad.abs().max()) == 0.0
    assert float(m.psi.mlp[4].weight.grad.abs().max()) > 0


def test_kl_nonnegative_and_zero_at_equality():
    z = torch.randn(50, V, dtype=torch.float64)
    assert float(kl_forward(z, z).abs().max()) < 1e-12
    assert float(kl_forward(z, torch.randn(50, V, dtype=torch.float64)).min()) >= 0


def test_tied_head_raises():
    from transformers import GPT2Config, GPT2LMHeadModel
    base = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_embd=32, n_layer=1, n_head=2, n_positions=16))
    with pytest.raises(ValueError, match="tied"):
        NextLatForCausalLM(base)
    untied = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_embd=32, n_layer=1, n_head=2, n_positions=16,
                                        tie_word_embeddings=False))
    m = NextLatForCausalLM(untied, proj_factor=2.0)
    out = m(torch.randint(0, V, (2, 8)))
    assert torch.isfinite(out.loss) and float(out.latent) > 0


@pytest.mark.parametrize("d", [1, 2, 3])
def test_vectorised_rollout_equals_loop(d):
    eos, pad = V - 2, V - 1
    m = _model(d=d, eos=eos, pad=pad)
    x = torch.randint(0, V - 2, (2, 11))
    x[0, 4] = eos
    x[1, 3] = eos
    x[1, 8:] = pad
    for ctx in (0, 3):
        out = m(x, context_length=ctx)
        lat, kl = nextlat_loss_reference(m, x, context_length=ctx)
        assert torch.allclose(out.latent, lat, atol=1e-6) and torch.allclose(out.kl, kl, atol=1e-6)


def test_mask_rule_per_step():
    eos, pad = V - 2, V - 1
    m = _model(d=3, eos=eos, pad=pad)
    x = torch.tensor([[1, 2, eos, 3, 4, pad, pad]])
    for i in (1, 2, 3):
        mh, mk = m.step_masks(x, i, context_length=2)
        for t in range(7 - i):
            fed, org = int(x[0, t + i]), int(x[0, t])
            want = fed not in (eos, pad) and org != pad and t + i >= 2
            assert bool(mh[0, t]) == want
            assert bool(mk[0, t]) == (want and t + i < 6)
    # step 3 from t=0 passes the EOS at position 2 but its own fed token x_3 is not EOS: kept (official rule)
    mh3, _ = m.step_masks(x, 3, 0)
    assert bool(mh3[0, 0])


def test_bad_input():
    m = _model()
    with pytest.raises(ValueError, match="d"):
        NextLatForCausalLM(m.model, d=0)
    with pytest.raises(ValueError, match="lambda_h"):
        NextLatForCausalLM(m.model, lambda_h=-1.0)
    with pytest.raises(ValueError, match="block size"):
        m(torch.randint(0, V, (1, 40)))
    with pytest.raises(ValueError, match="outside"):
        m(torch.full((1, 5), V))


def test_save_pretrained_round_trip(tmp_path):
    m = _model(d=2, eos=0, pad=1)
    with torch.no_grad():  # psi away from its init, so a missing load would show
        for p in m.psi.parameters():
            p.add_(0.01 * torch.randn_like(p))
    ids = torch.randint(2, V, (3, 12))
    before = m(ids)
    back = NextLatForCausalLM.from_pretrained(m.save_pretrained(tmp_path / "ckpt"))
    after = back(ids)
    assert back.nextlat_config == m.nextlat_config
    for a, b in zip(m.state_dict().values(), back.state_dict().values()):
        assert torch.equal(a, b)
    assert torch.equal(before.loss, after.loss) and torch.equal(before.logits, after.logits)
    with pytest.raises(FileNotFoundError, match="path"):
        NextLatForCausalLM.from_pretrained(tmp_path / "nothing")


def test_labels_mode_is_unshifted_ce_and_keeps_the_last_kl_teacher():
    """Sequence labelling (group word problem): z_t predicts labels_t; psi is still fed x_{t+1}."""
    import torch.nn.functional as F

    from neurips26.nextlat.model import NextLatForCausalLM, tiny_llama

    torch.manual_seed(0)
    m = NextLatForCausalLM(tiny_llama(7, 64, 1, 2, ctx=16, dtype=torch.float64), d=1)
    x, y = torch.randint(0, 7, (3, 9)), torch.randint(0, 7, (3, 9))
    out, plain = m(x, labels=y), m(x)
    assert torch.allclose(out.ntp, F.cross_entropy(out.logits.reshape(-1, 7), y.reshape(-1)), atol=1e-12)
    assert torch.allclose(out.latent, plain.latent, atol=1e-12)     # same fed tokens, same targets
    ok, kl = m.step_masks(x, 1, teacher_at_end=True)
    assert kl.all() and not m.step_masks(x, 1)[1][:, -1].any()
    with pytest.raises(ValueError, match="labels"):
        m(x, labels=y[:, :4])
