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
