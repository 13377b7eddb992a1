"""World-model metrics on the city grid (Vafa et al. 2024 style, spec M7): legal-move rate, detour
robustness, and the latents used for effective rank and current-node probes."""

from __future__ import annotations

import numpy as np
import torch

from neurips26.harness.validation import check_scalar
from neurips26.nextlat.data import CityGrid
from neurips26.nextlat.model import NextLatForCausalLM


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
        y = model.model(input_ids=seq).logits[:, -1].argmax(-1).numpy()
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
