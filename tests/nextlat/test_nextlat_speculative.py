import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from neurips26.nextlat.model import NextLatForCausalLM, tiny_llama
from neurips26.nextlat.speculative import (greedy_generate, normalize, self_speculative_generate,
                                           speculative_accept)

V = 11


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    rand = NextLatForCausalLM(tiny_llama(V, 32, 1, 2, ctx=64, dtype=torch.float64), proj_factor=2.0)
    torch.manual_seed(1)
    trained = NextLatForCausalLM(tiny_llama(V, 32, 1, 2, ctx=64, dtype=torch.float64), proj_factor=2.0)
    # a short training run on a periodic sequence: psi learns the dynamics, drafts get accepted
    opt = torch.optim.AdamW(trained.parameters(), lr=1e-2)
    seq = torch.tensor([[i % 5 for i in range(s, s + 24)] for s in range(5)])
    for _ in range(60):
        opt.zero_grad()
        trained(seq).loss.backward()
        opt.step()
    return {"random": rand, "trained": trained}


@pytest.mark.parametrize("which", ["random", "trained"])
@pytest.mark.parametrize("use_cache", [False, True])
def test_greedy_speculative_equals_greedy(models, which, use_cache):
    m = models[which]
    prompt = torch.tensor([[1, 2, 3, 4, 0, 1], [3, 3, 7, 1, 0, 9]])
    ref = greedy_generate(m, prompt, 20, use_cache=False)
    assert all(torch.equal(a, b) for a, b in zip(ref, greedy_generate(m, prompt, 20, use_cache=True)))
    for gamma in range(1, 9):
        out, st = self_speculative_generate(m, prompt, 20, gamma=gamma, top_k=1, use_cache=use_cache)
        for a, b in zip(out, ref):
            assert torch.equal(a, b), (which, gamma, use_cache)
        assert st.trunk_forwards == 2 * st.rounds and st.emitted == 40


def test_trained_psi_gets_drafts_accepted(models):
    prompt = torch.tensor([0, 1, 2, 3, 4, 0])
    out, st = self_speculative_generate(models["trained"], prompt, 30, gamma=4, top_k=1)
    assert st.tokens_per_forward > 1.0 and st.mean_accepted_beyond_first > 0


def _toy():
    rng = np.random.default_rng(3)
    def dist(k):
        w = rng.random(5) + 0.6
        return torch.tensor(w / w.sum(), dtype=torch.float64)
    p1 = dist(0)
    p2 = torch.stack([dist(i) for i in range(5)])    # p(x2 | x1)
    q1 = dist(0)
    q2 = torch.stack([dist(i) for i in range(5)])
    return p1, p2, q1, q2


def _simulate(residual, runs=20000):
    p1, p2, q1, q2 = _toy()
    g = torch.Generator().manual_seed(0)
    counts = np.zeros((5, 5))
    third = torch.full((5,), 0.2, dtype=torch.float64)
    for _ in range(runs):
        y1 = int(torch.multinomial(q1, 1, generator=g))
        y2 = int(torch.multinomial(q2[y1], 1, generator=g))
        p = torch.stack([p1, p2[y1], third])
        out, _ = speculative_accept(p, torch.stack([q1, q2[y1]]), [y1, y2], g, residual=residual)
        if len(out) < 2:   # rejected at position 1: the second token comes from the target given out[0]
            out.append(int(torch.multinomial(p2[out[0]], 1, generator=g)))
        counts[out[0], out[1]] += 1
    joint = (p1[:, None] * p2).numpy()
    assert joint.min() * runs >= 5
    return chisquare(counts.ravel(), joint.ravel() * runs).pvalue


def test_speculative_sampling_matches_target():
    assert _simulate(True) > 1e-3


def test_negative_control_without_residual():
    assert _simulate(False) < 1e-3


def test_normalize_top_k_top_p():
    z = torch.tensor([3.0, 2.0, 1.0, 0.0])
    assert torch.equal(normalize(z, top_k=1), torch.tensor([1.0, 0, 0, 0]))
    p = normalize(z, top_p=0.8)
    assert float(p[-1]) == 0.0 and abs(float(p.sum()) - 1) < 1e-6


def test_bad_input(models):
    m = models["random"]
    pr = torch.tensor([1, 2])
    for kw, name in (({"gamma": 0}, "gamma"), ({"temperature": 0.0}, "temperature"),
                     ({"top_p": 0.0}, "top_p"), ({"top_p": 1.5}, "top_p")):
        with pytest.raises(ValueError, match=name):
            self_speculative_generate(m, pr, 4, **kw)
    with pytest.raises(ValueError, match="non-empty"):
        self_speculative_generate(m, torch.tensor([], dtype=torch.long), 4)
    with pytest.raises(ValueError, match="block size"):
        self_speculative_generate(m, pr, 100)
    with pytest.raises(ValueError, match="outside"):
        self_speculative_generate(m, torch.tensor([V]), 4)
