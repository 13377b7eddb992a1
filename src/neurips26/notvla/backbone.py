"""The tiny vision-language backbone: conv visual tokens + a prefix-LM decoder over a closed word vocabulary.

Vision: a stride-4 conv and two stride-2 convs (64 x 64 -> 4 x 4 = 16 visual tokens), projected to width d.
LM: pre-norm transformer blocks; the prefix-LM mask is bidirectional over [image tokens; prompt] and causal
over the answer. Greedy decoding uses a KV cache and an optional per-step mask (the plan grammar).
The vocabulary is closed and word level: colours and shapes with their synonyms, the plan grammar's words,
relations, integers 0-100, punctuation and special tokens; ``add_tokens`` appends rows (Dense-bin's 256
action tokens: new input embeddings and output rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from neurips26.harness.validation import check_scalar
from neurips26.notvla.language import COLOUR_SYNONYMS, SHAPE_SYNONYMS
from neurips26.notvla.plan import COLOUR_WORDS, SHAPE_WORDS, VERBS

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
_WORDS = (
    "the a and is are there what colour how many far point to left right of closest camera describe "
    "scene yes no pick up put in on stack gripper open closed close approach grasp lift move place "
    "release retreat at depth height dx dy dz grip x y z cm which object"
).split()


def build_vocab() -> list[str]:
    words = list(SPECIALS)
    pool = (
        list(COLOUR_WORDS)
        + list(COLOUR_SYNONYMS)
        + list(SHAPE_WORDS)
        + [s + "s" for s in SHAPE_WORDS]
        + list(SHAPE_SYNONYMS)
        + _WORDS
        + [w for v in VERBS for w in v.split()]
        + ["(", ")", ",", ";", ".", "-", "?"]
        + [str(i) for i in range(101)]
    )
    for w in pool:
        if w not in words:
            words.append(w)
    return words


class Vocab:
    def __init__(self, words: list[str] | None = None):
        self.words = list(words or build_vocab())
        self.index = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def add(self, words: list[str]) -> list[int]:
        ids = []
        for w in words:
            if w not in self.index:
                self.index[w] = len(self.words)
                self.words.append(w)
            ids.append(self.index[w])
        return ids

    def encode(self, tokens: list[str]) -> list[int]:
        unk = self.index["<unk>"]
        return [self.index.get(t, unk) for t in tokens]

    def decode(self, ids) -> list[str]:
        return [self.words[int(i)] for i in ids]


@dataclass(frozen=True)
class BackboneConfig:
    d_model: int = 128
    layers: int = 2
    heads: int = 4
    image_size: int = 64
    max_len: int = 192

    def __post_init__(self) -> None:
        check_scalar(self.d_model, "d_model", int, min=8)
        check_scalar(self.layers, "layers", int, min=1)
        check_scalar(self.heads, "heads", int, min=1)
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")


class LoRALinear(nn.Module):
    """``W x + (alpha / r) B A x`` with the base frozen; B starts at zero (LoRA)."""

    def __init__(self, base: nn.Linear, r: int = 8, alpha: float = 16.0):
        super().__init__()
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.A = nn.Parameter(torch.randn(r, base.in_features) / math.sqrt(base.in_features))
        self.B = nn.Parameter(torch.zeros(base.out_features, r))
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + (x @ self.A.T @ self.B.T) * self.scale


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x, mask, cache=None):
        B, T, D = x.shape
        h = self.ln1(x)
        def split(t):
            return t.view(B, -1, self.heads, D // self.heads).transpose(1, 2)

        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        if cache is not None:
            if "k" in cache:
                k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
            cache["k"], cache["v"] = k, v
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, D))
        return x + self.ff(self.ln2(x))


class TinyVLM(nn.Module):
    """``forward(images, tokens, prefix_len)`` -> logits over the vocabulary for every position."""

    def __init__(self, cfg: BackboneConfig, vocab_size: int):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.vision = nn.Sequential(
            nn.Conv2d(3, 32, 4, 4),
            nn.GELU(),
            nn.Conv2d(32, 64, 3, 2, 1),
            nn.GELU(),
            nn.Conv2d(64, d, 3, 2, 1),
            nn.GELU(),
        )
        side = cfg.image_size // 16
        self.n_visual = 16
        self.pool = nn.AdaptiveAvgPool2d(4) if side != 4 else nn.Identity()
        self.embed = nn.Embedding(vocab_size, d)
        self.pos = nn.Parameter(torch.zeros(cfg.max_len, d))
        nn.init.normal_(self.pos, std=0.02)
        self.blocks = nn.ModuleList(Block(d, cfg.heads) for _ in range(cfg.layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_size, bias=False)

    @property
    def vocab_size(self) -> int:
        return self.embed.num_embeddings

    def add_tokens(self, n: int) -> None:
        """Append ``n`` rows to the input embedding and the output layer (new action tokens)."""
        old_e, old_h = self.embed, self.head
        self.embed = nn.Embedding(old_e.num_embeddings + n, old_e.embedding_dim)
        self.head = nn.Linear(old_h.in_features, old_h.out_features + n, bias=False)
        with torch.no_grad():
            self.embed.weight[: old_e.num_embeddings] = old_e.weight
            self.head.weight[: old_h.out_features] = old_h.weight
            self.head.weight[old_h.out_features :].normal_(0, 0.02)

    def apply_lora(self, r: int = 8) -> None:
        """Freeze everything, then add rank-r adapters to the attention projections (LoRA-r8)."""
        for p in self.parameters():
            p.requires_grad_(False)
        for b in self.blocks:
            for name in ("q", "k", "v", "o"):
                setattr(b, name, LoRALinear(getattr(b, name), r))
        self.head.weight.requires_grad_(True)  # new rows must be learnable (Dense-bin); the head is tiny
        self.embed.weight.requires_grad_(True)

    def visual_tokens(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 (B, H, W, 3) or float (B, 3, H, W) -> (B, 16, d)."""
        if images.dtype == torch.uint8:
            images = images.permute(0, 3, 1, 2).float() / 255.0
        f = self.pool(self.vision(images - 0.5))
        return f.flatten(2).transpose(1, 2)

    @staticmethod
    def prefix_mask(T: int, prefix: torch.Tensor, device=None) -> torch.Tensor:
        """(B, 1, T, T) boolean: j visible to i when j <= i or j is in the prefix (prefix per row)."""
        i = torch.arange(T, device=device)
        causal = i[None, :] <= i[:, None]
        pre = i[None, None, :] < prefix[:, None, None]
        return (causal[None] | pre)[:, None]

    def hidden(self, images, tokens, prefix_len) -> torch.Tensor:
        """The final hidden states (B, 16 + L, d) before the output norm and head."""
        x = torch.cat([self.visual_tokens(images), self.embed(tokens)], 1)
        T = x.shape[1]
        x = x + self.pos[:T]
        mask = self.prefix_mask(T, prefix_len, x.device)
        for b in self.blocks:
            x = b(x, mask)
        return x

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return self.head(self.ln(h))

    def forward(self, images, tokens, prefix_len) -> torch.Tensor:
        """images (B, ...), tokens (B, L) (prompt then answer), prefix_len (B,) = visual + prompt tokens."""
        return self.logits(self.hidden(images, tokens, prefix_len))

    @torch.no_grad()
    def generate(
        self, images, prompts: list[list[int]], max_new: int, eos: int, allowed=None
    ) -> list[list[int]]:
        """Greedy decoding with a KV cache, batched over prompts of equal length.

        ``allowed(row, generated_ids) -> bool mask over the vocabulary`` (or None to stop that row), or
        one bool mask (a tensor) for every row and step.
        """
        out: list[list[int]] = [[] for _ in prompts]
        groups: dict[int, list[int]] = {}
        for i, p in enumerate(prompts):
            groups.setdefault(len(p), []).append(i)
        for L, rows in groups.items():
            img = images[rows]
            x = torch.cat([self.visual_tokens(img), self.embed(torch.tensor([prompts[r] for r in rows]))], 1)
            T = x.shape[1]
            x = x + self.pos[:T]
            caches = [{} for _ in self.blocks]
            for blk, c in zip(self.blocks, caches):
                x = blk(x, None, c)
            logits = self.head(self.ln(x[:, -1]))
            live = [True] * len(rows)
            for t in range(min(max_new, self.cfg.max_len - T)):
                if isinstance(allowed, torch.Tensor):
                    logits = logits.masked_fill(~allowed, -math.inf)
                elif allowed is not None:
                    for j, r in enumerate(rows):
                        if live[j]:
                            m = allowed(r, out[r])
                            if m is None:
                                live[j] = False
                            else:
                                logits[j] = logits[j].masked_fill(~m, -math.inf)
                nxt = torch.argmax(logits, -1)
                for j, r in enumerate(rows):
                    if live[j]:
                        out[r].append(int(nxt[j]))
                        live[j] = int(nxt[j]) != eos
                if not any(live):
                    break
                h = self.embed(nxt[:, None]) + self.pos[T + t]
                for blk, c in zip(self.blocks, caches):
                    h = blk(h, None, c)
                logits = self.head(self.ln(h[:, -1]))
        return out
