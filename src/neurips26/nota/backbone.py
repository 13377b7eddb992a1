"""The frozen backbone: a conv-stem hybrid ViT with separate q/k/v ``nn.Linear``, pre-trained from scratch.

Stem: ``n_stem`` stride-2 3x3 convs with BatchNorm + GELU (32x32 -> 4x4 = 16 tokens for 3 convs, 8x8 for
2), learned positional embedding, ``depth`` pre-norm transformer blocks, mean-pooled tokens -> LayerNorm
(``features``) -> linear head (pre-training only). The pre-trained checkpoint is cached by config hash.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from neurips26.nota.data import cache_dir, synth_glyphs


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} must be divisible by heads {heads}")
        self.heads = heads
        self.q, self.k, self.v, self.proj = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, x: torch.Tensor, prefix: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Self-attention; ``prefix=(pk, pv)`` ((N, P, d) each) is prepended to the projected keys and values
        (prefix-tuning, CODA-Prompt): ``softmax(q [pk; k]^T / sqrt(d_h)) [pv; v]``."""
        b, n, d = x.shape
        h = self.heads
        q, k, v = (f(x) for f in (self.q, self.k, self.v))
        if prefix is not None:
            k, v = torch.cat([prefix[0], k], 1), torch.cat([prefix[1], v], 1)
        q, k, v = (z.reshape(b, z.shape[1], h, d // h).transpose(1, 2) for z in (q, k, v))
        o = nn.functional.scaled_dot_product_attention(q, k, v)
        return self.proj(o.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: int = 2):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x: torch.Tensor, prefix: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        x = x + self.attn(self.n1(x), prefix)
        return x + self.mlp(self.n2(x))


class HybridViT(nn.Module):
    def __init__(self, dim: int = 64, depth: int = 3, heads: int = 4, n_stem: int = 3, n_classes: int = 24):
        super().__init__()
        chans = [1] + [dim // 2 ** (n_stem - 1 - i) for i in range(n_stem)]
        layers: list[nn.Module] = []
        for a, b in zip(chans[:-1], chans[1:]):
            layers += [nn.Conv2d(a, b, 3, stride=2, padding=1), nn.BatchNorm2d(b), nn.GELU()]
        self.stem = nn.Sequential(*layers)
        side = 32 // 2 ** n_stem
        self.pos = nn.Parameter(torch.randn(1, side * side, dim) * 0.02)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, n_classes)
        self.dim = dim

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """(N, 32, 32) or (N, 1, 32, 32) images -> (N, tokens, dim): the frozen conv stem + positions.

        Nothing here is ever adapted (adapters sit on q/v inside the blocks), so the CIL loop embeds a
        task's images once and trains every epoch from these tokens (``encode``).
        """
        if x.ndim == 3:
            x = x[:, None]
        return self.stem(x).flatten(2).transpose(1, 2) + self.pos

    def encode(self, t: torch.Tensor, prompts: torch.Tensor | None = None,
               prefixes: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = None) -> torch.Tensor:
        """Tokens from ``embed`` -> (N, dim) LayerNorm-ed pooled features (blocks, mean pool, norm).

        prompts: optional (N, P, dim) tokens prepended before the blocks (L2P); the features are
        then the mean of the prompt tokens' outputs. prefixes: {block index: (pk, pv)} prefix keys and
        values for those blocks' attention (CODA-Prompt).
        """
        if prompts is not None:
            t = torch.cat([prompts, t], 1)
        prefixes = prefixes or {}
        for b, blk in enumerate(self.blocks):
            t = blk(t, prefixes.get(b))
        pooled = t[:, :prompts.shape[1]].mean(1) if prompts is not None else t.mean(1)
        return self.norm(pooled)

    def features(self, x: torch.Tensor, prompts: torch.Tensor | None = None) -> torch.Tensor:
        """(N, 32, 32) or (N, 1, 32, 32) images -> (N, dim) features: ``encode(embed(x), prompts)``."""
        return self.encode(self.embed(x), prompts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


@dataclass
class PretrainConfig:
    dim: int = 64
    depth: int = 3
    heads: int = 4
    n_stem: int = 3
    classes: tuple[int, ...] = tuple(range(24))
    per_class: int = 200
    epochs: int = 3
    lr: float = 2e-3
    batch: int = 64
    seed: int = 0


def pretrain(cfg: PretrainConfig, cache: bool = True) -> tuple[HybridViT, dict]:
    """The backbone pre-trained on glyph ``cfg.classes`` (AdamW), cached by config hash; (model, info)."""
    key = hashlib.sha256(json.dumps(asdict(cfg), sort_keys=True).encode()).hexdigest()[:16]
    path = cache_dir() / f"backbone-{key}.pt"
    model = HybridViT(cfg.dim, cfg.depth, cfg.heads, cfg.n_stem, len(cfg.classes))
    if cache and path.exists():
        blob = torch.load(path, weights_only=False)
        model.load_state_dict(blob["state"])
        return model.eval(), {**blob["info"], "cached": True}
    torch.manual_seed(cfg.seed)
    model = HybridViT(cfg.dim, cfg.depth, cfg.heads, cfg.n_stem, len(cfg.classes))
    x, y = synth_glyphs(cfg.classes, cfg.per_class, seed=1000 + cfg.seed)
    xt, yt = synth_glyphs(cfg.classes, max(cfg.per_class // 4, 10), seed=2000 + cfg.seed)
    remap = {c: i for i, c in enumerate(cfg.classes)}
    y = np.vectorize(remap.get)(y)
    yt = np.vectorize(remap.get)(yt)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    g = torch.Generator().manual_seed(cfg.seed)
    model.train()
    for _ in range(cfg.epochs):
        perm = torch.randperm(len(xs), generator=g)
        for i in range(0, len(xs), cfg.batch):
            idx = perm[i:i + cfg.batch]
            loss = nn.functional.cross_entropy(model(xs[idx]), ys[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        acc = float((model(torch.from_numpy(xt)).argmax(1) == torch.from_numpy(yt)).float().mean())
    info = {"pretrain_test_acc": acc, "cached": False}
    if cache:
        tmp = path.with_suffix(".tmp")
        torch.save({"state": model.state_dict(), "info": info}, tmp)
        tmp.replace(path)
    return model, info
