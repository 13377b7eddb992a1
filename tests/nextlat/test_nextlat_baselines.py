import pytest
import torch
import torch.nn.functional as F

from neurips26.nextlat.baselines import MTPForCausalLM, mtp_speculative_generate
from neurips26.nextlat.model import tiny_llama
from neurips26.nextlat.speculative import greedy_generate

V = 11


def _mtp(n=3, dtype=torch.float64):
    torch.manual_seed(0)
    return MTPForCausalLM(tiny_llama(V, 32, 1, 2, ctx=48, dtype=dtype), n_future=n)


def test_head_one_is_plain_ntp_and_loss_is_sum():
    m = _mtp(3)
    x = torch.randint(0, V, (2, 12))
    out = m(x)
    logits = m.model(input_ids=x).logits
    ce1 = F.cross_entropy(logits[:, :-1].reshape(-1, V), x[:, 1:].reshape(-1))
    assert torch.allclose(out.ntp, ce1, atol=1e-10)
    assert torch.allclose(out.loss, sum(out.head_losses)) and len(out.head_losses) == 3
    assert torch.allclose(MTPForCausalLM(m.model, n_future=1)(x).loss, ce1, atol=1e-10)


def test_extra_heads_are_causal():
    m = _mtp(3)
    x = torch.randint(0, V, (1, 12))
    y = x.clone()
    y[0, 8:] = (y[0, 8:] + 1) % V
    a, b = m.head_logits(m.hidden(x)), m.head_logits(m.hidden(y))
    for za, zb in zip(a, b):
        assert torch.allclose(za[:, :8], zb[:, :8], atol=1e-10)
        assert not torch.allclose(za[:, 8:], zb[:, 8:])


def test_mtp_greedy_speculative_equals_greedy():
    m = _mtp(3)
    prompt = torch.tensor([[1, 2, 3, 4], [5, 5, 0, 1]])
    out, st = mtp_speculative_generate(m, prompt, 15, top_k=1)
    ref = greedy_generate(m, prompt, 15, use_cache=False)
    assert all(torch.equal(a, b) for a, b in zip(out, ref)) and st.emitted == 30


def test_mtp_bad_input():
    with pytest.raises(ValueError, match="n_future"):
        MTPForCausalLM(tiny_llama(V, 32, 1, 2, ctx=16), n_future=0)


# ----------------------------------------------------------------------------- JTP
from neurips26.nextlat.baselines import JTPForCausalLM, jtp_loss_reference  # noqa: E402


def _jtp(D=3, eos=None, pad=None, lam=1.0):
    torch.manual_seed(0)
    return JTPForCausalLM(tiny_llama(V, 32, 1, 2, ctx=48, dtype=torch.float64), horizon=D, lambda_jtp=lam,
                          eos_token_id=eos, pad_token_id=pad).double()


@pytest.mark.parametrize("D", [1, 3])
def test_jtp_loss_equals_per_position_loop_with_eos_and_pad(D):
    m = _jtp(D, eos=9, pad=10)
    with torch.no_grad():  # non-trivial relative bias and gamma, so slots interact
        m.attn.rel_pos_bias.normal_(0, 0.5)
        m.gamma.fill_(0.7)
    x = torch.tensor([[1, 2, 9, 3, 4, 5, 9, 6, 7, 1, 10, 10], [3, 3, 4, 9, 9, 1, 2, 5, 6, 7, 8, 2]])
    assert torch.allclose(m(x).loss, jtp_loss_reference(m, x), atol=1e-10)


def test_jtp_eos_masks_later_slots_only():
    m = _jtp(3, eos=9)
    x = torch.tensor([[1, 2, 9, 3, 4, 5, 6, 7]])
    _, tgt = m.targets(x)
    # origin t=0: fed x1=2, x2=9(EOS), x3=3 -> slot 1 (target x2) kept, slots 2, 3 dropped
    assert tgt[0, 0].tolist() == [2, 9, -100, -100]
    assert tgt[0, 5].tolist() == [6, 7, -100, -100]  # window end


def test_jtp_slot0_is_the_inference_path_and_causal():
    m = _jtp(2)
    x = torch.randint(0, V, (2, 10))
    out = m(x)
    assert torch.allclose(out.logits, m.next_token_logits(x), atol=1e-10)
    y = x.clone()
    y[:, 6:] = (y[:, 6:] + 1) % V
    assert torch.allclose(m.next_token_logits(x)[:, :6], m.next_token_logits(y)[:, :6], atol=1e-10)
    m0 = JTPForCausalLM(m.model, horizon=2, lambda_jtp=0.0)
    m0.load_state_dict(m.state_dict())
    assert torch.allclose(m0(x).loss, out.ntp, atol=1e-12)


def test_jtp_init_and_bad_input():
    m = _jtp(2)
    assert float(m.gamma.detach()) == pytest.approx(0.1) and float(m.attn.rel_pos_bias.abs().max()) == 0.0
    assert m.attn.rel_pos_bias.shape == (2, 3, 3)  # min(4, heads) heads, D + 1 slots
    x = torch.randint(0, V, (2, 10))
    m(x).loss.backward()
    assert m.gamma.grad is not None and m.attn.rel_pos_bias.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="horizon"):
        JTPForCausalLM(tiny_llama(V, 32, 1, 2, ctx=16), horizon=0)
    with pytest.raises(ValueError, match="lambda_jtp"):
        JTPForCausalLM(tiny_llama(V, 32, 1, 2, ctx=16), lambda_jtp=-1.0)


def test_jtp_plan_matches_hand_written_attention():
    m = _jtp(2)
    with torch.no_grad():
        m.attn.rel_pos_bias.normal_(0, 1.0)
    h, fed = torch.randn(1, 32, dtype=torch.float64), torch.tensor([[1, 4, 7]])
    e = m.model.get_input_embeddings()(fed)[0]
    P = torch.nn.functional.layer_norm(e + m.gamma * h, (32,), m.combine_ln.weight, m.combine_ln.bias)
    q, k, v = (P @ W.T for W in m.attn.c_attn.weight.split(32, 0))
    outs = []
    for hd in range(2):
        sl = slice(16 * hd, 16 * hd + 16)
        a = q[:, sl] @ k[:, sl].T / 4.0 + m.attn.rel_pos_bias[hd]
        a = a.masked_fill(torch.ones(3, 3).triu(1).bool(), float("-inf")).softmax(-1)
        outs.append(a @ v[:, sl])
    O = torch.cat(outs, 1) @ m.attn.c_proj.weight.T
    O[1:] = O[1:] + h
    z = torch.nn.functional.layer_norm(O, (32,), m.norm.weight) @ m.model.lm_head.weight.T
    assert torch.allclose(m.plan(h, fed)[0], z, atol=1e-10)


# ----------------------------------------------------------------------------- BST
from neurips26.nextlat.baselines import BSTForCausalLM, bst_loss_reference  # noqa: E402


def _bst(sub=1.0, gen=None):
    torch.manual_seed(0)
    f = tiny_llama(V, 32, 1, 2, ctx=16, dtype=torch.float64)
    b = tiny_llama(V, 32, 1, 2, ctx=16, dtype=torch.float64)
    return BSTForCausalLM(f, b, eos_token_id=9, pad_token_id=10, subsample=sub, generator=gen)


def test_bst_loss_equals_pair_loop_with_documents_and_pad():
    """All pairs: the vectorised loss equals a loop that encodes every suffix separately (the backward
    trunk is anti-causal: B_j sees x_j.. only), with EOS-separated documents and PAD."""
    m = _bst()
    x = torch.tensor([[1, 2, 3, 9, 4, 5, 6, 10], [2, 2, 4, 5, 9, 7, 1, 3]])
    assert torch.allclose(m(x).loss, bst_loss_reference(m, x), atol=1e-10)


def test_bst_pairs_subsampling_keeps_eos_pairs():
    m = _bst(0.3, torch.Generator().manual_seed(0))
    seq = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4])
    full = _bst(1.0).pairs(seq)
    sub = m.pairs(seq)
    # EOS (index 8) closes document 1 for suffixes and opens document 2 for prefixes: C(9,2) + C(5,2)
    assert len(full) == 9 * 8 // 2 + 5 * 4 // 2
    touch = (seq[full[:, 0]] == 9) | (seq[full[:, 1]] == 9)
    kept = {tuple(p) for p in sub.tolist()}
    assert all(tuple(p) in kept for p in full[touch].tolist())
    assert 0.15 * len(full) < len(sub) < 0.5 * len(full)
    with pytest.raises(ValueError, match="subsample"):
        _bst(0.0)
