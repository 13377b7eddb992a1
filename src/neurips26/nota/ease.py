"""EASE baseline (Zhou et al., CVPR 2024): one expandable adapter subspace per task, prototype classifier.

Per task t a new bottleneck adapter branch ``a_t`` is added in parallel to every block's MLP,
``x <- x + MLP(LN(x)) + s * up(relu(down(LN(x))))`` (``up`` zero-initialised, s = 0.1), and trained alone
(CE over the current task's logits through temporary rows); the earlier branches are frozen (bitwise).
The subspace feature ``phi_i(x)`` is the backbone run with branch i only, so inference costs one pass of
the blocks per branch (grows with T; the stem tokens are shared).

Classifier: prototypes ``P[c, i]`` = mean of ``phi_i`` over class c's training images, for the subspaces
that existed when c was trained (i <= task(c)). A class c of an older task j < i has no data in the new
subspace i; its prototype there is reconstructed from the new classes C_i by class similarity measured
in the old subspaces both share (1..j):

    sim[c, c'] = softmax_{c' in C_i}( tau * cos(P[c, 1..j], P[c', 1..j]) ),   P[c, i] = sum_c' sim[c, c'] P[c', i]

Prediction: argmax over seen classes of ``sum_i cos(phi_i(x), P[c, i])`` (cosine per subspace, summed,
i.e. the cosine of the per-subspace-normalised concatenation up to a constant).
"""
from __future__ import annotations

import copy
from typing import Sequence

import numpy as np
import torch
from torch import nn

from neurips26.harness.validation import check_scalar
from neurips26.nota.cil import FrozenBackboneCIL, TrainSettings, check_tasks, run_frozen_cil


class Bottleneck(nn.Module):
    """``s * up(relu(down(h)))`` with ``up = 0`` at init (the branch starts as the frozen backbone)."""

    def __init__(self, dim: int, width: int, scale: float, generator: torch.Generator | None = None):
        super().__init__()
        self.down = nn.Parameter(torch.randn(width, dim, generator=generator) / dim ** 0.5)
        self.up = nn.Parameter(torch.zeros(dim, width))
        self.scale = scale

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.scale * torch.relu(h @ self.down.T) @ self.up.T


class EASE(FrozenBackboneCIL):
    def __init__(self, backbone: nn.Module, width: int = 16, scale: float = 0.1, tau: float = 16.0):
        super().__init__(backbone)
        self.width = check_scalar(width, "width", int, min=1)
        self.scale = check_scalar(scale, "scale", float, min=0, inclusive="neither")
        self.tau = check_scalar(tau, "tau", float, min=0, inclusive="neither")
        self.branches = nn.ModuleList()          # branches[i]: one Bottleneck per block
        self.protos: list[torch.Tensor] = []      # protos[i]: (n_seen_at_i... grows, dim) in subspace i
        # self.rows: temporary per-task rows (training only; inference uses the prototypes)

    def new_task(self, classes: Sequence[int], generator: torch.Generator | None = None) -> None:
        for p in self.parameters():
            if p.requires_grad:
                p.requires_grad_(False)
        d = self.backbone.dim
        self.branches.append(nn.ModuleList([Bottleneck(d, self.width, self.scale, generator)
                                            for _ in self.backbone.blocks]))
        self.add_rows(classes, generator)

    def task_params(self) -> list[torch.Tensor]:
        return list(self.branches[-1].parameters())

    def task_loss(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """CE over the current task's logits through branch t alone and the temporary rows."""
        return nn.functional.cross_entropy(self.branch_features(tokens, len(self.branches) - 1) @ self.rows[-1].T,
                                           labels)

    def end_task(self, tokens: torch.Tensor, labels: np.ndarray) -> None:
        self.update_prototypes(tokens, labels)

    def all_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.logits(tokens)

    def branch_features(self, tokens: torch.Tensor, i: int) -> torch.Tensor:
        """``phi_i``: the blocks with branch i beside every MLP, mean pool, LayerNorm."""
        t = tokens
        for blk, ad in zip(self.backbone.blocks, self.branches[i]):
            t = t + blk.attn(blk.n1(t))
            h = blk.n2(t)
            t = t + blk.mlp(h) + ad(h)
        return self.backbone.norm(t.mean(1))

    @torch.no_grad()
    def subspace_features(self, tokens: torch.Tensor, batch: int = 512) -> list[torch.Tensor]:
        """[phi_i(x) for every branch i] — one pass of the blocks per branch."""
        return [torch.cat([self.branch_features(tokens[j:j + batch], i) for j in range(0, len(tokens), batch)])
                for i in range(len(self.branches))]

    @torch.no_grad()
    def update_prototypes(self, tokens: torch.Tensor, y: np.ndarray) -> None:
        """After task t: prototypes of C_t in subspaces 0..t, and of older classes in subspace t by
        similarity-weighted reconstruction (module docstring)."""
        t = len(self.branches) - 1
        cur = self.classes[-1]
        feats = self.subspace_features(tokens)
        new = [torch.stack([f[torch.from_numpy(y == c)].mean(0) for c in cur]) for f in feats]   # per subspace
        for i in range(t):
            self.protos[i] = torch.cat([self.protos[i], new[i]])
        n_old = sum(len(cs) for cs in self.classes[:-1])
        if n_old:
            recon = []
            for j, cs in enumerate(self.classes[:-1]):        # old task j: shared subspaces 0..j
                idx = slice(sum(len(c) for c in self.classes[:j]), sum(len(c) for c in self.classes[:j + 1]))
                old = torch.cat([nn.functional.normalize(self.protos[i][idx], dim=1) for i in range(j + 1)], 1)
                newp = torch.cat([nn.functional.normalize(new[i], dim=1) for i in range(j + 1)], 1)
                sim = torch.softmax(self.tau * (old @ newp.T) / (j + 1), dim=1)   # mean cosine over subspaces
                recon.append(sim @ new[t])
            self.protos.append(torch.cat(recon + [new[t]]))
        else:
            self.protos.append(new[t])

    @torch.no_grad()
    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """``sum_i cos(phi_i(x), P[:, i])`` over all seen classes (N, n_seen)."""
        feats = self.subspace_features(tokens)
        return sum(nn.functional.normalize(f, dim=1) @ nn.functional.normalize(p, dim=1).T
                   for f, p in zip(feats, self.protos))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The concatenated subspace features (N, T * dim)."""
        return torch.cat(self.subspace_features(self.backbone.embed(x)), 1)

    def trainable_params(self) -> int:
        return sum(p.numel() for p in self.branches[-1].parameters())

    def stored_params(self) -> int:
        return sum(p.numel() for p in self.branches.parameters()) + sum(p.numel() for p in self.protos)


def run_ease(backbone: nn.Module, tasks: Sequence[Sequence[int]], train: tuple, test: tuple,
             settings: TrainSettings | None = None, seed: int = 0, **kwargs) -> dict:
    """The whole EASE CIL sequence: train branch t (+ temporary rows), then extend the prototypes."""
    tasks = check_tasks(tasks)
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = EASE(copy.deepcopy(backbone), **kwargs)
    return run_frozen_cil(model, tasks, train, test, settings or TrainSettings(), g)
