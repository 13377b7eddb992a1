"""CODA-Prompt baseline (Smith et al., CVPR 2023): attention-weighted prompt components, prefix-tuning.

Per task t, ``components`` new prompt components ``P_m`` ((L, dim) per prompted block), keys ``K_m`` and
attention vectors ``A_m`` (dim) are added; the older ones are frozen (bitwise). New components are
initialised orthonormal to all earlier ones (Gram-Schmidt on the flattened vectors) and an optional
regulariser ``ortho * sum ||X X^T - I||_F^2`` (X = the rows of P, K, A) keeps them so.

Two passes per image (the cost compared in the bench):
1. query ``q(x)`` = the frozen backbone's pooled feature (no prompts, no gradient);
2. weights ``alpha_m = cos(q * A_m, K_m)`` (``*`` elementwise), prompt ``p = sum_m alpha_m P_m``, split in
   half into prefix keys/values ``(p_k, p_v)`` prepended in the attention of the first ``layers`` blocks.
Loss: CE over the current task's logits + the orthogonality regulariser. Classifier rows as in ``cil.py``.
"""
from __future__ import annotations

import copy
import math
from typing import Sequence

import torch
from torch import nn

from neurips26.harness.validation import check_scalar
from neurips26.nota.cil import TrainSettings, check_tasks, run_frozen_cil
from neurips26.nota.prompt_pool import PromptPool


def gram_schmidt_rows(new: torch.Tensor, old: torch.Tensor | None = None) -> torch.Tensor:
    """The rows of ``new`` (k, d) made orthonormal to each other and to the rows of ``old`` (m, d).

    Classical Gram-Schmidt, twice (re-orthogonalisation) for float32 stability; needs ``m + k <= d``.
    """
    k, d = new.shape
    m = 0 if old is None else old.shape[0]
    if m + k > d:
        raise ValueError(f"components: {m} old + {k} new vectors cannot be orthogonal in dimension {d}; "
                         f"lower components (per task) or raise the dimension")
    basis = [] if old is None else list(nn.functional.normalize(old, dim=1))
    out = []
    for v in new:
        for _ in range(2):
            for b in basis:
                v = v - (v @ b) * b
        v = v / v.norm().clamp_min(1e-12)
        basis.append(v)
        out.append(v)
    return torch.stack(out)


class CODAPrompt(PromptPool):
    def __init__(self, backbone: nn.Module, components: int = 4, length: int = 8,
                 layers: Sequence[int] | None = None, ortho: float = 0.0):
        super().__init__(backbone)
        self.components = check_scalar(components, "components", int, min=1)
        self.length = check_scalar(length, "length", int, min=2)
        if self.length % 2:
            raise ValueError(f"length={length} must be even (half prefix keys, half prefix values)")
        self.ortho = check_scalar(ortho, "ortho", float, min=0)
        depth = len(backbone.blocks)
        # ASSUMPTION: the first ~5/12 of the blocks (CODA-Prompt prompts blocks 0-4 of ViT-B's 12)
        layers = tuple(range(max(1, math.ceil(5 * depth / 12)))) if layers is None else tuple(layers)
        if not layers or any(not 0 <= b < depth for b in layers) or len(set(layers)) != len(layers):
            raise ValueError(f"layers={layers} must be distinct block indices in [0, {depth})")
        self.layers = layers
        self.prompts = nn.ParameterList()    # per task: (components, len(layers), length, dim)
        self.keys = nn.ParameterList()       # per task: (components, dim)
        self.attn = nn.ParameterList()       # per task: (components, dim)

    def new_task(self, classes: Sequence[int], generator: torch.Generator | None = None) -> None:
        """Freeze all earlier components and rows; add this task's components (orthonormal init) and rows."""
        for p in self.parameters():
            if p.requires_grad:
                p.requires_grad_(False)
        d, k = self.backbone.dim, self.components
        shape = (k, len(self.layers), self.length, d)

        def init(plist: nn.ParameterList, flat: int) -> torch.Tensor:
            old = torch.cat([p.detach().reshape(p.shape[0], -1) for p in plist]) if len(plist) else None
            return gram_schmidt_rows(torch.rand(k, flat, generator=generator) * 2 - 1, old)
        self.prompts.append(nn.Parameter(init(self.prompts, math.prod(shape[1:])).reshape(shape)))
        self.keys.append(nn.Parameter(init(self.keys, d)))
        self.attn.append(nn.Parameter(init(self.attn, d)))
        self.add_rows(classes, generator)

    def task_params(self) -> list[torch.Tensor]:
        return [self.prompts[-1], self.keys[-1], self.attn[-1]]

    def weights(self, q: torch.Tensor) -> torch.Tensor:
        """``alpha[n, m] = cos(q_n * A_m, K_m)`` over all components so far (N, M)."""
        return self.key_cosine(q, torch.cat(list(self.keys)), torch.cat(list(self.attn)))

    def encode(self, tokens: torch.Tensor) -> torch.Tensor:
        """Pass 2: features with the prefix ``p = sum_m alpha_m P_m`` in ``self.layers``."""
        alpha = self.weights(self.query(tokens))
        p = torch.einsum("nm,mbld->nbld", alpha, torch.cat(list(self.prompts)))
        h = self.length // 2
        prefixes = {blk: (p[:, i, :h], p[:, i, h:]) for i, blk in enumerate(self.layers)}
        return self.backbone.encode(tokens, prefixes=prefixes)

    def prompted(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(pass-2 features, the regulariser ``ortho * ortho_penalty()``; None when ``ortho = 0``)."""
        return self.encode(tokens), (self.ortho * self.ortho_penalty() if self.ortho else None)

    def ortho_penalty(self) -> torch.Tensor:
        """``sum_X ||X X^T - I||_F^2`` over the flattened rows of all prompts, keys and attention vectors."""
        out = torch.zeros(())
        for plist in (self.prompts, self.keys, self.attn):
            x = torch.cat([p.reshape(p.shape[0], -1) for p in plist])
            out = out + (x @ x.T - torch.eye(len(x))).pow(2).sum()
        return out

    def trainable_params(self) -> int:
        return sum(p.numel() for p in (self.prompts[-1], self.keys[-1], self.attn[-1]))

    def stored_params(self) -> int:
        return sum(p.numel() for plist in (self.prompts, self.keys, self.attn) for p in plist)


def run_coda(backbone: nn.Module, tasks: Sequence[Sequence[int]], train: tuple, test: tuple,
             settings: TrainSettings | None = None, seed: int = 0, **kwargs) -> dict:
    """The whole CODA-Prompt CIL sequence (this task's components and rows trained, the rest frozen)."""
    tasks = check_tasks(tasks)
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = CODAPrompt(copy.deepcopy(backbone), **kwargs)
    return run_frozen_cil(model, tasks, train, test, settings or TrainSettings(), g)
