"""World-model metrics on the city grid (Vafa et al. 2024 style, spec M7): legal-move rate, detour
robustness, sequence compression, and the latents used for effective rank and probes."""

from __future__ import annotations

import numpy as np
import torch

from neurips26.harness.validation import check_scalar
from neurips26.nextlat.data import CityGrid
from neurips26.nextlat.model import NextLatForCausalLM
from neurips26.nextlat.speculative import greedy_rows


@torch.no_grad()
def rollouts(model: NextLatForCausalLM, grid: CityGrid, prompts: np.ndarray, T: int, q: float = 0.0,
             seed: int = 0) -> dict[str, float]:
    """Greedy rollouts from [start, goal] prompts until EOS or T tokens (batched, full forwards).

    With probability ``q`` each model move is replaced by a uniformly random legal move (detour).
    Returns the legal-move rate (fraction of generated move tokens that follow a directed edge from the
    true current node; a rollout stops at its first illegal token) and the success rate (the goal is
    reached with legal moves only within T-3 moves, or EOS is emitted at the goal).
    """
    q = check_scalar(q, "q", float, min=0, max=1)
    rng = np.random.default_rng(seed)
    n = len(prompts)
    seq = torch.from_numpy(np.ascontiguousarray(prompts[:, :2]))
    cur = prompts[:, 0].astype(int).copy()
    goal = prompts[:, 1].astype(int)
    alive = np.ones(n, bool)
    success = np.zeros(n, bool)
    legal = illegal = 0
    model.eval()
    for step in range(T - 2):
        y = model.next_token_logits(seq)[:, -1].argmax(-1).numpy()
        for b in range(n):
            if not alive[b]:
                continue
            tok = int(y[b])
            if tok == grid.eos:
                success[b] = cur[b] == goal[b]   # a walk may end where it started
                alive[b] = False
                continue
            k = tok - grid.move_base
            if not 0 <= k < 4 or k not in grid.edges[cur[b]]:
                illegal += 1
                alive[b] = False
                continue
            legal += 1
            if q > 0 and rng.random() < q:
                k = int(rng.choice(sorted(grid.edges[cur[b]])))
                y[b] = grid.move_base + k
            cur[b] = grid.edges[cur[b]][k]
            if cur[b] == goal[b] and step < T - 3:
                success[b] = True
                alive[b] = False
        if not alive.any():
            break
        seq = torch.cat([seq, torch.from_numpy(y.astype(np.int64))[:, None]], dim=1)
    total = legal + illegal
    return {"legal_rate": legal / total if total else float("nan"), "success": float(success.mean())}


@torch.no_grad()
def latents(model: NextLatForCausalLM, ids: np.ndarray, states: np.ndarray, pad: int, limit: int):
    """(H [n, p], current node [n]) of the first ``limit`` non-PAD positions of ``ids``."""
    h = model.hidden(torch.from_numpy(np.ascontiguousarray(ids))).double().numpy()
    keep = ids != pad
    return h[keep][:limit], states[keep][:limit]


@torch.no_grad()
def compression_rate(model: NextLatForCausalLM, grid: CityGrid, ids: np.ndarray, states: np.ndarray,
                     eps: float = 0.01, pairs: int = 2000, seed: int = 0) -> float:
    """Sequence compression (Vafa et al. 2024, one-token suffixes): two prefixes that reach the same
    true state must get the same set of accepted continuations.

    The true state of a prefix ending at position t (t >= 1, token not EOS/PAD) is (current node,
    current node == goal): it fixes the legal continuations (the node's out-moves, plus EOS at the
    goal). The model accepts the next tokens with probability > ``eps`` (ASSUMPTION: the threshold).
    ``pairs`` random pairs of prefixes from different sequences with equal true state are drawn; the
    score is the fraction whose accepted sets are identical (1 = the model compresses the histories).
    """
    eps = check_scalar(eps, "eps", float, min=0, max=1, inclusive="neither")
    pairs = check_scalar(pairs, "pairs", int, min=1)
    probs = torch.softmax(model.next_token_logits(torch.from_numpy(np.ascontiguousarray(ids))).double(), -1)
    acc = (probs > eps).numpy()                                  # [N, T, V] accepted next tokens
    N, T = ids.shape
    t_idx = np.arange(T)[None, :]
    ok = (t_idx >= 1) & (ids != grid.eos) & (ids != grid.pad)
    key = states * 2 + (states == ids[:, 1:2])                   # (node, at goal) as one integer
    rows, cols = np.nonzero(ok)
    keys = key[rows, cols]
    rng = np.random.default_rng(seed)
    same = total = 0
    by_key: dict[int, np.ndarray] = {}
    for kv in np.unique(keys):
        by_key[int(kv)] = np.nonzero(keys == kv)[0]
    pool = [v for v in by_key.values() if len(np.unique(rows[v])) > 1]
    if not pool:
        return float("nan")
    weights = np.array([len(v) for v in pool], float)
    for _ in range(pairs):
        v = pool[rng.choice(len(pool), p=weights / weights.sum())]
        a, b = rng.choice(v, 2, replace=False)
        if rows[a] == rows[b]:
            continue
        total += 1
        same += bool(np.array_equal(acc[rows[a], cols[a]], acc[rows[b], cols[b]]))
    return same / total if total else float("nan")


@torch.no_grad()
def path_exact_match(model, ids: np.ndarray, context_length: int, path_len: int) -> float:
    """Path-star planning accuracy: greedy decoding from the prompt ids[:, :context_length] (batched
    full forwards through ``model.next_token_logits``); a row counts when all ``path_len`` generated
    tokens equal the true path."""
    context_length = check_scalar(context_length, "context_length", int, min=1)
    path_len = check_scalar(path_len, "path_len", int, min=1)
    if ids.shape[1] < context_length + path_len:
        raise ValueError(f"ids has {ids.shape[1]} columns < context_length + path_len = {context_length + path_len}")
    gen = greedy_rows(model, torch.from_numpy(np.ascontiguousarray(ids[:, :context_length])), path_len).numpy()
    return float((gen == ids[:, context_length : context_length + path_len]).all(1).mean())
