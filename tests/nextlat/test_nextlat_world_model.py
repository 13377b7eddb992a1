from collections import deque
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from neurips26.nextlat import data
from neurips26.nextlat.model import NextLatForCausalLM, tiny_llama
from neurips26.nextlat.training import row_sampler, train
from neurips26.nextlat.world_model import compression_rate, latents, rollouts


class Oracle(torch.nn.Module):
    """A stand-in LM whose greedy move is the first step of a shortest path to the goal (or a fixed token)."""

    def __init__(self, grid, fixed=None):
        super().__init__()
        self.grid, self.fixed = grid, fixed

    def _next(self, seq):
        g = self.grid
        u, goal = int(seq[0]), int(seq[1])
        for tok in seq[2:]:
            k = int(tok) - g.move_base
            if k not in g.edges[u]:       # a finished rollout keeps being fed; its later tokens do not matter
                return g.eos
            u = g.edges[u][k]
        if self.fixed is not None:
            return self.fixed
        if u == goal:
            return g.eos
        prev, dq = {u: None}, deque([u])
        while dq:
            x = dq.popleft()
            for k, v in g.edges[x].items():
                if v not in prev:
                    prev[v] = (x, k)
                    dq.append(v)
        v = goal
        while prev[v][0] != u:
            v = prev[v][0]
        return g.move_base + prev[v][1]

    def forward(self, input_ids):
        logits = torch.zeros(input_ids.shape[0], input_ids.shape[1], self.grid.vocab)
        for b, row in enumerate(input_ids):
            logits[b, -1, self._next(row)] = 1.0
        return SimpleNamespace(logits=logits)


def _stub(grid, fixed=None):
    o = Oracle(grid, fixed)
    return SimpleNamespace(model=o, eval=lambda: None, next_token_logits=lambda ids: o(ids).logits)


def test_rollout_metrics_on_oracles():
    grid = data.city_grid(5, seed=0)
    ids, _ = data.city_walks(grid, 30, 24, seed=1)
    good = rollouts(_stub(grid), grid, ids, 24)
    assert good == {"legal_rate": 1.0, "success": 1.0}
    detour = rollouts(_stub(grid), grid, ids, 24, q=0.5, seed=0)
    assert detour["legal_rate"] == 1.0 and 0.5 <= detour["success"] <= 1.0
    bad = rollouts(_stub(grid, fixed=0), grid, ids, 24)     # a node id is never a legal move
    assert bad == {"legal_rate": 0.0, "success": 0.0}


def test_training_learns_walks_and_latents_shape():
    grid = data.city_grid(3, seed=0)
    ids, states = data.city_walks(grid, 300, 12, seed=0)
    torch.manual_seed(0)
    m = NextLatForCausalLM(tiny_llama(grid.vocab, 64, 1, 2, ctx=12), eos_token_id=grid.eos,
                           pad_token_id=grid.pad)
    losses = train(m, row_sampler(ids, 32, 0), 60, 3e-3)
    assert np.mean(losses[-10:]) < np.mean(losses[:5]) - 0.3
    H, s = latents(m, ids[:20], states[:20], grid.pad, 100)
    assert H.shape == (100, 64) and (s >= 0).all()
    with pytest.raises(ValueError, match="q"):
        rollouts(m, grid, ids[:2], 12, q=1.5)


def _legal_set_model(grid, noise_by_position=False):
    """Next-token logits at every position from the true state: the legal moves (+ EOS at the goal) get
    mass; with ``noise_by_position`` one legal move is dropped at odd positions (history-dependent)."""

    def logits(ids):
        ids = ids.numpy()
        out = torch.full((*ids.shape, grid.vocab), -30.0)
        for b, row in enumerate(ids):
            u, goal = int(row[0]), int(row[1])
            for t in range(len(row)):
                if t >= 2:
                    k = int(row[t]) - grid.move_base
                    if not 0 <= k < 4:
                        break
                    u = grid.edges[u][k]
                moves = sorted(grid.edges[u])
                if noise_by_position and t % 2 and len(moves) > 1:
                    moves = moves[1:]
                for k in moves:
                    out[b, t, grid.move_base + k] = 0.0
                if u == goal:
                    out[b, t, grid.eos] = 0.0
        return out

    return SimpleNamespace(next_token_logits=logits)


def test_compression_rate_is_one_for_a_state_model_and_lower_for_history_dependence():
    grid = data.city_grid(4, seed=0)
    ids, states = data.city_walks(grid, 80, 16, seed=3)
    assert compression_rate(_legal_set_model(grid), grid, ids, states, pairs=400) == 1.0
    noisy = compression_rate(_legal_set_model(grid, True), grid, ids, states, pairs=400)
    assert 0.2 < noisy < 0.9
    with pytest.raises(ValueError, match="eps"):
        compression_rate(_legal_set_model(grid), grid, ids, states, eps=0.0)


def test_path_exact_match_on_oracles():
    from neurips26.nextlat.world_model import path_exact_match

    ps = data.path_star_tokens(2, 4, 20, 10)
    assert ps.ids.shape == (10, 2 * 2 * 3 + 4 + 4 + 1) and ps.ids[0, ps.context_length - 1] == ps.eq
    table = {tuple(r[: ps.context_length + j].tolist()): int(r[ps.context_length + j])
             for r in ps.ids for j in range(ps.path_len)}

    def oracle(wrong=False):
        def logits(seq):
            out = torch.zeros(*seq.shape, ps.vocab)
            for b, row in enumerate(seq):
                y = table.get(tuple(row.tolist()), 0)
                out[b, -1, (y + 1) % ps.M if wrong and seq.shape[1] == ps.context_length + 2 else y] = 1.0
            return out
        return SimpleNamespace(next_token_logits=logits)

    assert path_exact_match(oracle(), ps.ids, ps.context_length, ps.path_len) == 1.0
    assert path_exact_match(oracle(True), ps.ids, ps.context_length, ps.path_len) == 0.0
    for r in ps.ids:                                    # the path is a valid arm from the source to the goal
        path = r[ps.context_length : ps.context_length + ps.path_len]
        edges = set(zip(r[: 12 : 2].tolist(), r[1:12:2].tolist()))
        assert path[0] == r[13] and path[-1] == r[14]
        assert all((int(a), int(b)) in edges for a, b in zip(path[:-1], path[1:]))
