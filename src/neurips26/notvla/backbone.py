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
    max_len: int = 192  # positions for 16 visual tokens + text (more visual tokens get more positions)
    coords: bool = True  # CoordConv: two pixel-coordinate input channels (x, y in [-1, 1]) for pointing
    numeric_init: bool = True  # integer tokens 0-100: embeddings / output rows start as Fourier features
    grid: int = 4  # visual tokens = grid x grid cells (4: 16 tokens; 8: 64)
    keypoints: int = 0  # spatial soft-argmax keypoints per cell (0 = off): sub-cell positions in the tokens

    def __post_init__(self) -> None:
        check_scalar(self.d_model, "d_model", int, min=8)
        check_scalar(self.layers, "layers", int, min=1)
        check_scalar(self.heads, "heads", int, min=1)
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        check_scalar(self.grid, "grid", int, min=1)
        check_scalar(self.keypoints, "keypoints", int, min=0)
        if self.image_size // 8 < self.grid:
            raise ValueError(f"grid ({self.grid}) must be at most image_size / 8 ({self.image_size // 8})")
        if self.keypoints and (self.image_size // 2) % self.grid:
            raise ValueError(f"keypoints need image_size / 2 ({self.image_size // 2}) divisible by grid "
                             f"({self.grid})")


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


def _sincos_2d(side: int, d: int) -> torch.Tensor:
    """(side * side, d) fixed code of each cell (row-major): sin/cos of x in the first half, of y in
    the second, at d/4 frequencies; unit variance per dimension."""
    q = d // 4
    freq = 1.0 / (10.0 ** (torch.arange(q, dtype=torch.float32) / max(q, 1)))
    ys, xs = torch.meshgrid(torch.arange(side, dtype=torch.float32), torch.arange(side, dtype=torch.float32),
                            indexing="ij")
    x, y = xs.reshape(-1, 1) * freq, ys.reshape(-1, 1) * freq
    out = torch.cat([x.sin(), x.cos(), y.sin(), y.cos()], 1)
    out = torch.cat([out, torch.zeros(side * side, d - out.shape[1])], 1)
    return out * math.sqrt(2.0)


class TinyVLM(nn.Module):
    """``forward(images, tokens, prefix_len)`` -> logits over the vocabulary for every position."""

    def __init__(self, cfg: BackboneConfig, vocab_size: int):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.vision = nn.Sequential(
            nn.Conv2d(5 if cfg.coords else 3, 32, 4, 4),
            nn.GroupNorm(32, 32),
            nn.GELU(),
            nn.Conv2d(32, 64, 3, 2, 1),
            nn.GroupNorm(64, 64),
            nn.GELU(),
            # stride 2 while the stride-16 map still has ``grid`` cells a side (64 px, grid 4); else 1, so
            # that the pooling below only ever shrinks (64 px with grid 5-8; 32 px with grid 4)
            nn.Conv2d(64, d, 3, 2 if cfg.image_size // 16 >= cfg.grid else 1, 1),
            nn.GroupNorm(d, d),  # per-image, per-channel normalisation: the table background cancels out
            nn.GELU(),
        )
        for c in self.vision:
            if isinstance(c, nn.Conv2d):  # variance-preserving (He) init: the default shrinks 3x per layer
                nn.init.kaiming_normal_(c.weight, nonlinearity="relu")
                nn.init.zeros_(c.bias)
        # projection to the LM width, normalised so that visual tokens carry the scale of word embeddings
        self.proj = nn.Sequential(nn.Linear(d, d), nn.LayerNorm(d))
        g = cfg.grid
        side = cfg.image_size // 16 if cfg.image_size // 16 >= g else cfg.image_size // 8
        self.n_visual = g * g
        self.pool = nn.AdaptiveAvgPool2d(g) if side != g else nn.Identity()
        self.embed = nn.Embedding(vocab_size, d)
        # learned positions at the scale of the (unit-variance) word and visual tokens; the grid x grid
        # visual tokens also get a fixed 2-D sine-cosine code of their cell, so that pointing can read where a
        # token lies from the start (a 0.02-scale embedding is invisible next to unit-scale content)
        self.pos = nn.Parameter(torch.zeros(cfg.max_len + self.n_visual - 16, d))  # max_len counts 16 visual
        nn.init.normal_(self.pos, std=0.5)
        self.register_buffer("pos2d", _sincos_2d(g, d), persistent=False)
        if cfg.keypoints:
            self._init_keypoints(cfg)
        self.blocks = nn.ModuleList(Block(d, cfg.heads) for _ in range(cfg.layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_size, bias=False)
        if cfg.coords:
            r = torch.linspace(-1, 1, cfg.image_size)
            yy, xx = torch.meshgrid(r, r, indexing="ij")
            self.register_buffer("coord_grid", torch.stack([xx, yy])[None], persistent=False)

    def _init_keypoints(self, cfg: BackboneConfig) -> None:
        """Spatial soft-argmax (Levine et al. 2016) per cell: ``K = cfg.keypoints`` saliency maps at half the
        image resolution, a softmax over each cell's positions, the expected position in grid units."""
        K, g = cfg.keypoints, cfg.grid
        self.kp_conv = nn.Sequential(
            nn.Conv2d(5 if cfg.coords else 3, 16, 3, 2, 1), nn.GroupNorm(4, 16), nn.GELU(),
            nn.Conv2d(16, K, 3, 1, 1),
        )
        h = cfg.image_size // 2
        c = h // g
        centre = (torch.arange(h, dtype=torch.float32) + 0.5) * 100.0 / h  # map position -> grid units
        rows = centre.view(g, c)  # (cell, sub-position)
        # (g*g cells, c*c positions, 2 = (U, V)) row-major cells, as the visual tokens
        U = rows[None, :, None, :].expand(g, g, c, c)  # column coordinate: cell j, sub b
        V = rows[:, None, :, None].expand(g, g, c, c)
        self.register_buffer("kp_grid", torch.stack([U, V], -1).reshape(g * g, c * c, 2), persistent=False)
        self.register_buffer("kp_period", 4.0 * 100.0 ** (torch.arange(8, dtype=torch.float32) / 7),
                             persistent=False)  # 4 ... 400 grid units, as the integer rows' Fourier init
        self.kp_proj = nn.Linear(K * (4 * 8 + 1), cfg.d_model)

    def keypoint_features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) network input -> (B, cells, K * 33): per keypoint ``s = sigmoid(max_cell m)``,
        ``E = sum_p softmax_cell(m)_p * pos_p`` (grid units) and ``s * [sin, cos](2 pi E / P)``."""
        m = self.kp_conv(x)
        B, K, h, _ = m.shape
        g = self.cfg.grid
        c = h // g
        m = m.view(B, K, g, c, g, c).permute(0, 2, 4, 1, 3, 5).reshape(B, g * g, K, c * c)
        E = torch.einsum("bnkp,npd->bnkd", m.softmax(-1), self.kp_grid)  # (B, cells, K, 2)
        s = torch.sigmoid(m.amax(-1))  # (B, cells, K)
        ang = 2 * math.pi * E[..., None] / self.kp_period  # (B, cells, K, 2, 8)
        four = torch.cat([ang.sin(), ang.cos()], -1).flatten(3) * s[..., None]
        return torch.cat([four, s[..., None]], -1).flatten(2)

    def init_numbers(self, ids: list[int]) -> None:
        """Start the rows of the integer tokens ``ids[n] = "n"`` as Fourier features of ``n`` (input
        embedding and output row alike), so that neighbouring values begin close: the answer of a
        pointing / depth question is then learned as one smooth direction rather than 100 unrelated
        classes. An initialisation only (every row stays trainable; the loss is the plain cross-entropy).
        """
        d = self.cfg.d_model
        n = torch.arange(len(ids), dtype=torch.float32)[:, None]
        k = torch.arange(d // 2, dtype=torch.float32)[None]
        period = 4.0 * (400.0 / 4.0) ** (k / max(d // 2 - 1, 1))  # 4 ... 400 value units
        phi = torch.cat([torch.sin(2 * math.pi * n / period), torch.cos(2 * math.pi * n / period)], 1)
        phi = phi / phi.norm(dim=1, keepdim=True)
        with torch.no_grad():
            self.embed.weight[ids] = phi * self.embed.weight.std() * math.sqrt(d)
            self.head.weight[ids] = phi * self.head.weight.norm(dim=1).mean()

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
        """uint8 (B, H, W, 3) or float (B, 3, H, W) -> (B, grid * grid, d)."""
        if images.dtype == torch.uint8:
            images = images.permute(0, 3, 1, 2).float() / 255.0
        images = images - 0.5
        if self.cfg.coords:
            images = torch.cat([images, self.coord_grid.expand(len(images), -1, -1, -1)], 1)
        f = self.pool(self.vision(images))
        tok = self.proj(f.flatten(2).transpose(1, 2)) + self.pos2d
        if self.cfg.keypoints:
            tok = tok + self.kp_proj(self.keypoint_features(images))
        return tok

    @staticmethod
    def prefix_mask(T: int, prefix: torch.Tensor, device=None) -> torch.Tensor:
        """(B, 1, T, T) boolean: j visible to i when j <= i or j is in the prefix (prefix per row)."""
        i = torch.arange(T, device=device)
        causal = i[None, :] <= i[:, None]
        pre = i[None, None, :] < prefix[:, None, None]
        return (causal[None] | pre)[:, None]

    def hidden(self, images, tokens, prefix_len) -> torch.Tensor:
        """The final hidden states (B, n_visual + L, d) before the output norm and head."""
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
            for t in range(min(max_new, self.pos.shape[0] - T)):
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
