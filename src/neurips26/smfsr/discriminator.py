"""The DINO-style projected discriminator (StyleGAN-T / ADD design), a PatchGAN ablation, DiffAugment, hinge.

``DinoProjectedDiscriminator(backbone, taps)``: a frozen ViT exposing
``forward_intermediates(x, indices=taps, intermediates_only=True) -> [(B, D, h, w), ...]`` (timm's API;
``TinyViT`` and ``HFBackbone`` provide the same). Per tap a trainable head::

    SNConv1d(k=1) -> BatchNormLocal -> LeakyReLU(0.2) -> residual[SNConv1d(k=9) -> BN -> LReLU] / sqrt 2
    -> SNConv1d(k=1) -> one logit per token

D(x) = sum over heads of the token-mean logits. Inputs: images in [0, 1] (grey replicated to 3 channels),
ImageNet mean/std, resized to ``resolution`` (a multiple of 16; None = as given, the ``tiny`` stand-in).
Hinge: L_D = E relu(1 - D(x)) + E relu(1 + D(x_hat)),  L_G = -E D(x_hat). Only heads train.

Factories, all local-files-only (``HF_HUB_OFFLINE=1`` is set inside the loaders, never at import):
``from_timm(name, checkpoint=PATH)``, ``from_hf(local_dir)``, ``tiny(...)``; a missing path raises
``FileNotFoundError`` naming it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import spectral_norm

from neurips26.harness.validation import check_choice, check_scalar

DISCRIMINATORS = ("dino", "patchgan")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def default_taps(depth: int) -> list[int]:
    """4 evenly spaced blocks ending at the last: ViT-S/16 (12 blocks) -> [2, 5, 8, 11]."""
    n = min(4, depth)
    return [(k + 1) * depth // n - 1 for k in range(n)]


# ---------------------------------------------------------------------------- backbones
class TinyViT(nn.Module):
    """A small ViT (patch embed, pre-norm attention blocks) with timm's ``forward_intermediates``."""

    def __init__(self, img: int = 16, patch: int = 4, dim: int = 64, depth: int = 4, heads: int = 4):
        super().__init__()
        self.img, self.patch, self.dim, self.depth = img, patch, dim, depth
        self.grid = img // patch
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.pos = nn.Parameter(torch.randn(1, self.grid ** 2, dim) * 0.02)
        self.blocks = nn.ModuleList([nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0,
                                                                activation="gelu", batch_first=True,
                                                                norm_first=True) for _ in range(depth)])

    def embed_patches(self, x: torch.Tensor) -> torch.Tensor:
        """``patch_embed`` (a stride-``patch`` Conv2d) as one matmul over flattened patches:
        ((B, N, D), gh, gw), the same values as the convolution."""
        B, C, H, W = x.shape
        p = self.patch
        gh, gw = H // p, W // p
        x = x[..., : gh * p, : gw * p].reshape(B, C, gh, p, gw, p).permute(0, 2, 4, 1, 3, 5)
        w = self.patch_embed.weight.reshape(self.dim, C * p * p)
        return x.reshape(B, gh * gw, C * p * p) @ w.T + self.patch_embed.bias, gh, gw

    def forward_intermediates(self, x, indices, intermediates_only: bool = True):
        h, gh, gw = self.embed_patches(x)
        B, D = h.shape[0], self.dim
        h = h + self.pos[:, : gh * gw]
        out = []
        for i, blk in enumerate(self.blocks):
            h = blk(h)
            if i in indices:
                out.append(h.transpose(1, 2).reshape(B, D, gh, gw))
        return out


class HFBackbone(nn.Module):
    """A transformers vision model (e.g. DINOv3 ViT) as a ``forward_intermediates`` backbone."""

    def __init__(self, model, patch: int):
        super().__init__()
        self.model, self.patch = model, patch
        self.depth = model.config.num_hidden_layers

    def forward_intermediates(self, x, indices, intermediates_only: bool = True):
        hs = self.model(pixel_values=x, output_hidden_states=True).hidden_states  # embeddings + each block
        gh, gw = x.shape[-2] // self.patch, x.shape[-1] // self.patch
        out = []
        for i in indices:
            tok = hs[i + 1][:, -gh * gw:]  # drop CLS / register tokens
            out.append(tok.transpose(1, 2).reshape(x.shape[0], -1, gh, gw))
        return out


# ---------------------------------------------------------------------------- heads
class BatchNormLocal(nn.Module):
    """BatchNorm over virtual groups of ``group`` samples (StyleGAN-T), per channel, affine."""

    def __init__(self, ch: int, group: int = 8, eps: float = 1e-5):
        super().__init__()
        self.group, self.eps = group, eps
        self.weight = nn.Parameter(torch.ones(ch))
        self.bias = nn.Parameter(torch.zeros(ch))

    def forward(self, x):  # (B, C, L)
        B, C, L = x.shape
        G = max(1, math.ceil(B / self.group))
        if B % G:
            G = 1
        xg = x.view(G, -1, C, L)
        d = xg - xg.mean((1, 3), keepdim=True)
        var = d.square().mean((1, 3), keepdim=True)  # population variance, two-pass (Tensor.var over two
        # non-adjacent dims was ~1.3 ms a call here, the slowest op of the head after its matmuls)
        return (d * torch.rsqrt(var + self.eps)).view(B, C, L) * self.weight[None, :, None] + self.bias[None, :, None]


class DiscHead(nn.Module):
    def __init__(self, ch: int, hidden: int = 64):
        super().__init__()
        self.inp = spectral_norm(nn.Conv1d(ch, hidden, 1))
        self.bn1 = BatchNormLocal(hidden)
        self.res = spectral_norm(nn.Conv1d(hidden, hidden, 9, padding=4, padding_mode="circular"))
        self.bn2 = BatchNormLocal(hidden)
        self.out = spectral_norm(nn.Conv1d(hidden, 1, 1))

    @staticmethod
    def _pointwise(conv: nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
        """A k=1 (spectral-normed) Conv1d as one matmul, W[:, :, 0] @ x + b (the same values; the conv
        kernel's backward is ~10x slower on these tiny token maps)."""
        return torch.matmul(conv.weight[..., 0], x) + conv.bias[:, None]

    @staticmethod
    def _circular(conv: nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
        """The circular-padded k=9 Conv1d: the circular padding by one concatenation, then an unpadded
        ``F.conv1d`` (the same values as ``conv(x)``; faster forward + backward here than both the
        module's own circular padding and an unfold + matmul form)."""
        p = conv.kernel_size[0] // 2
        xp = torch.cat([x[..., -p:], x, x[..., :p]], dim=-1) if p else x
        return F.conv1d(xp, conv.weight, conv.bias)

    def forward(self, x):
        h = F.leaky_relu(self.bn1(self._pointwise(self.inp, x)), 0.2)
        h = (h + F.leaky_relu(self.bn2(self._circular(self.res, h)), 0.2)) / math.sqrt(2)
        return self._pointwise(self.out, h)  # (B, 1, L)


class DinoProjectedDiscriminator(nn.Module):
    """Frozen ViT backbone + trainable SN heads on 4 taps; ``forward(x) -> (B,)`` logits."""

    def __init__(self, backbone: nn.Module, taps=None, dims=None, resolution: int | None = None,
                 backbone_trainable: bool = False, hidden: int = 64):
        super().__init__()
        self.backbone = backbone
        depth = getattr(backbone, "depth", None) or len(getattr(backbone, "blocks"))
        self.taps = list(taps) if taps is not None else default_taps(depth)
        if any(not 0 <= i < depth for i in self.taps):
            raise ValueError(f"taps must index blocks 0..{depth - 1}, got {self.taps}")
        if resolution is not None:
            resolution = check_scalar(resolution, "resolution", int, min=16)
            if resolution % 16:
                raise ValueError(f"resolution must be a multiple of 16, got {resolution}")
        self.resolution = resolution
        if dims is None:
            dims = [getattr(backbone, "dim", None) or backbone.embed_dim] * len(self.taps)
        self.heads = nn.ModuleList([DiscHead(d, hidden) for d in dims])
        self.backbone.requires_grad_(backbone_trainable)
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    def train(self, mode: bool = True):
        super().train(mode)
        if not any(p.requires_grad for p in self.backbone.parameters()):
            self.backbone.eval()  # frozen: no dropout / BN updates
        return self

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] not in (1, 3):
            raise ValueError(f"x must be (B, 1|3, H, W), got {tuple(x.shape)}")
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        if self.resolution is not None and tuple(x.shape[-2:]) != (self.resolution,) * 2:
            x = F.interpolate(x, size=(self.resolution,) * 2, mode="bilinear", align_corners=False)
        return (x - self.mean.to(x.dtype)) / self.std.to(x.dtype)

    def features(self, x: torch.Tensor) -> list[torch.Tensor]:
        return self.backbone.forward_intermediates(self.prepare(x), indices=self.taps,
                                                   intermediates_only=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = 0
        for head, f in zip(self.heads, self.features(x)):
            logits = logits + head(f.flatten(2)).mean((1, 2))
        return logits

    # ------------------------------------------------------------------ factories
    @classmethod
    def tiny(cls, patch: int = 4, dim: int = 64, depth: int = 4, heads: int = 4, img: int = 16,
             checkpoint: str | os.PathLike | None = None, seed: int = 0,
             **kw) -> "DinoProjectedDiscriminator":
        """The laptop stand-in: a frozen random-init ``TinyViT`` (seeded), or its weights from a
        safetensors ``checkpoint``."""
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        try:
            vit = TinyViT(img, patch, dim, depth, heads)
        finally:
            torch.random.set_rng_state(gen_state)
        if checkpoint is not None:
            vit.load_state_dict(_load_safetensors(checkpoint))
        return cls(vit, **kw)

    @classmethod
    def from_timm(cls, name: str = "vit_small_patch16_dinov3", checkpoint: str | os.PathLike | None = None,
                  taps=None, resolution: int | None = 224, **model_kwargs) -> "DinoProjectedDiscriminator":
        """``timm.create_model(name, pretrained=False, num_classes=0, **model_kwargs)`` + the local
        safetensors ``checkpoint`` (required: never downloads)."""
        if checkpoint is None:
            raise FileNotFoundError("from_timm needs a local checkpoint=PATH (safetensors); "
                                    "nothing is downloaded")
        state = _load_safetensors(checkpoint)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import timm
        except ImportError as e:  # pragma: no cover - optional
            raise ImportError("from_timm needs timm (pip install --no-deps timm, see the README)") from e
        model = timm.create_model(name, pretrained=False, num_classes=0, **model_kwargs)
        model.load_state_dict(state)
        depth = len(model.blocks)
        return cls(model, taps if taps is not None else default_taps(depth), [model.embed_dim] * len(
            taps if taps is not None else default_taps(depth)), resolution)

    @classmethod
    def from_hf(cls, local_dir: str | os.PathLike, taps=None, resolution: int | None = 224
                ) -> "DinoProjectedDiscriminator":
        """``transformers.AutoModel.from_pretrained(local_dir, local_files_only=True)`` (e.g. DINOv3 ViT)."""
        path = Path(local_dir)
        if not path.is_dir() or not (path / "config.json").exists():
            raise FileNotFoundError(f"no local Hugging Face model at {str(path)!r} (needs config.json)")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModel

        model = AutoModel.from_pretrained(str(path), local_files_only=True)
        patch = getattr(model.config, "patch_size", 16)
        bb = HFBackbone(model, patch)
        t = taps if taps is not None else default_taps(bb.depth)
        return cls(bb, t, [model.config.hidden_size] * len(t), resolution)


def _load_safetensors(path) -> dict:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"checkpoint not found: {str(p)!r}")
    from safetensors.torch import load_file

    return load_file(str(p))


def save_backbone(disc: DinoProjectedDiscriminator, path) -> None:
    """Write the backbone's weights as safetensors (for ``tiny(checkpoint=...)`` / ``from_timm``)."""
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in disc.backbone.state_dict().items()}, str(path))


class PatchGAN(nn.Module):
    """The ablation: a small SN PatchGAN (pix2pix style) on the raw image; ``forward(x) -> (B,)``."""

    def __init__(self, channels: int = 1, ch: int = 32):
        super().__init__()
        self.net = nn.Sequential(
            spectral_norm(nn.Conv2d(channels, ch, 3, padding=1)), nn.LeakyReLU(0.2),
            spectral_norm(nn.Conv2d(ch, 2 * ch, 4, stride=2, padding=1)), nn.LeakyReLU(0.2),
            spectral_norm(nn.Conv2d(2 * ch, 2 * ch, 3, padding=1)), nn.LeakyReLU(0.2),
            spectral_norm(nn.Conv2d(2 * ch, 1, 3, padding=1)))

    def forward(self, x):
        return self.net(x).mean((1, 2, 3))


def build_discriminator(name: str, channels: int = 1, img: int = 16, **kw) -> nn.Module:
    name = check_choice(name, "discriminator", DISCRIMINATORS)
    if name == "patchgan":
        return PatchGAN(channels)
    return DinoProjectedDiscriminator.tiny(img=img, **kw)


def hinge_d_loss(d_real: torch.Tensor, d_fake: torch.Tensor) -> torch.Tensor:
    """E relu(1 - D(x)) + E relu(1 + D(x_hat))."""
    return F.relu(1 - d_real).mean() + F.relu(1 + d_fake).mean()


def hinge_g_loss(d_fake: torch.Tensor) -> torch.Tensor:
    """-E D(x_hat)."""
    return -d_fake.mean()


def diff_augment(x: torch.Tensor, g: torch.Generator, translation: float = 0.125, cutout: float = 0.5
                 ) -> torch.Tensor:
    """DiffAugment (Zhao et al. 2020): colour (brightness, saturation, contrast), translation, cutout;
    differentiable in x, random per sample from ``g``."""
    B, C, H, W = x.shape
    r = lambda: torch.rand(B, 1, 1, 1, generator=g, dtype=x.dtype)  # noqa: E731
    x = x + (r() - 0.5)
    if C > 1:
        m = x.mean(1, keepdim=True)
        x = (x - m) * (r() * 2) + m
    m = x.mean((1, 2, 3), keepdim=True)
    x = (x - m) * (r() + 0.5) + m
    sh, sw = int(H * translation + 0.5), int(W * translation + 0.5)
    ty = torch.randint(-sh, sh + 1, (B,), generator=g)
    tx = torch.randint(-sw, sw + 1, (B,), generator=g)
    iy = (torch.arange(H)[None] - ty[:, None]).clamp(-1, H)
    ix = (torch.arange(W)[None] - tx[:, None]).clamp(-1, W)
    pad = F.pad(x, (1, 1, 1, 1))
    x = pad[torch.arange(B)[:, None, None], :, (iy + 1)[:, :, None], (ix + 1)[:, None, :]].permute(0, 3, 1, 2)
    ch, cw = int(H * cutout + 0.5), int(W * cutout + 0.5)
    oy = torch.randint(0, H + (1 - ch % 2), (B,), generator=g)
    ox = torch.randint(0, W + (1 - cw % 2), (B,), generator=g)
    gy = torch.arange(H)[None] - (oy[:, None] - ch // 2)
    gx = torch.arange(W)[None] - (ox[:, None] - cw // 2)
    keep = ~(((gy >= 0) & (gy < ch))[:, :, None] & ((gx >= 0) & (gx < cw))[:, None, :])
    return x * keep[:, None].to(x.dtype)
