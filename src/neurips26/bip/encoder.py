"""The face-recognition encoder f: image -> S^{D-1} of the image side, its ArcFace head, and a local
ArcFace checkpoint loader.

- ``FREncoder``: the spec's small conv encoder (5 conv layers 16-16-32-32-64, BN, PReLU, 2 max-pools,
  linear to D = 32); ``features`` are the pre-normalisation outputs (the feature Frechet distance is
  computed on them), ``forward`` returns ``f(x) = features / ||features||``.
- ``ArcFaceHead``: additive angular margin, ``logits_j = s cos(theta_j + m [j = y])`` (s = 30, m = 0.3).
- ``train_encoder``: Adam (lr 2e-3) on ``cross_entropy(ArcFaceHead(f(x)), y)``.
- ``load_checkpoint``: a local ArcFace model by path (TorchScript archive, a torch state dict into a
  module you pass, or ONNX through onnxruntime when it is importable); never downloads anything.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from neurips26.bip.gallery import check_unit
from neurips26.harness.validation import check_scalar


def check_images(x, name: str = "images") -> torch.Tensor:
    """``x`` as a float32 (B, 1, H, W) tensor with values in [0, 1] (the renderer's output format)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (B, 1, H, W), got {type(x).__name__}")
    if x.ndim != 4 or x.shape[1] != 1:
        raise ValueError(f"{name} must have rank 4 with one channel (B, 1, H, W), got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    x = x.float()
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite")
    lo, hi = float(x.min()), float(x.max())
    if lo < 0 or hi > 1:
        raise ValueError(f"{name} must lie in [0, 1], got values in [{lo:.3g}, {hi:.3g}]")
    return x


def _block(cin: int, cout: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.PReLU(cout)]


class FREncoder(nn.Module):
    """conv16-conv16-pool-conv32-conv32-pool-conv64 (BN + PReLU each), 3x3 average pool, linear to ``dim``.

    The adaptive 3x3 pool keeps coarse layout (where the eyes and mouth are) and makes the encoder
    size-agnostic (24x24 and 32x32 renderer images).
    """

    def __init__(self, dim: int = 32):
        super().__init__()
        self.dim = check_scalar(dim, "dim", int, min=1)
        self.body = nn.Sequential(*_block(1, 16), *_block(16, 16), nn.MaxPool2d(2),
                                  *_block(16, 32), *_block(32, 32), nn.MaxPool2d(2),
                                  *_block(32, 64), nn.AdaptiveAvgPool2d(3), nn.Flatten())
        self.fc = nn.Linear(64 * 9, self.dim)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Pre-normalisation features (B, dim)."""
        return self.fc(self.body(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """f(x) = features(x) / ||features(x)|| on S^{dim-1}."""
        return F.normalize(self.features(x), dim=1)


class ArcFaceHead(nn.Module):
    """logits_j = s cos(theta_j + m [j = y]), theta_j = angle(normalize(x), normalize(W_j)).

    When theta_y + m > pi the margin-free monotone fallback ``cos(theta) - m sin(m)`` is used (the
    insightface ``easy_margin=False`` rule).
    """

    def __init__(self, dim: int, n_classes: int, s: float = 30.0, m: float = 0.3):
        super().__init__()
        self.s = check_scalar(s, "s", float, min=0, inclusive="neither")
        self.m = check_scalar(m, "m", float, min=0, max=math.pi / 2)
        self.weight = nn.Parameter(torch.randn(check_scalar(n_classes, "n_classes", int, min=1),
                                               check_scalar(dim, "dim", int, min=1)) * 0.01)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        cos = F.normalize(x, dim=1) @ F.normalize(self.weight, dim=1).T
        cos_y = cos.gather(1, y[:, None]).clamp(-1 + 1e-7, 1 - 1e-7)
        sin_y = torch.sqrt(1 - cos_y ** 2)
        target = cos_y * math.cos(self.m) - sin_y * math.sin(self.m)      # cos(theta_y + m)
        target = torch.where(cos_y > math.cos(math.pi - self.m), target, cos_y - self.m * math.sin(self.m))
        return self.s * cos.scatter(1, y[:, None], target)

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.forward(x, y), y)


@dataclass(frozen=True)
class EncoderConfig:
    dim: int = 32
    epochs: int = 5
    lr: float = 2e-3
    batch: int = 32
    s: float = 30.0
    m: float = 0.3


def train_encoder(images: torch.Tensor, labels: torch.Tensor, cfg: EncoderConfig = EncoderConfig(),
                  seed: int = 0, deadline: float | None = None,
                  clock: Callable[[], float] | None = None) -> tuple[FREncoder, list[float]]:
    """Train ``FREncoder`` with an ArcFace head on (images, identity labels); returns (encoder in eval
    mode, mean loss per epoch). ``deadline`` (a value of ``clock``, default ``time.perf_counter``; the
    run passes ``time.process_time`` for a CPU-seconds budget) stops after the epoch that passes it."""
    import time

    clock = time.perf_counter if clock is None else clock
    x = check_images(images)
    y = torch.as_tensor(labels)
    if y.ndim != 1 or y.shape[0] != x.shape[0] or y.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"labels must be a ({x.shape[0]},) integer tensor, got {tuple(y.shape)} {y.dtype}")
    y = y.long()
    n_cls = int(y.max()) + 1
    g = torch.Generator().manual_seed(check_scalar(seed, "seed", int, min=0))
    torch.manual_seed(seed)                       # layer initialisation
    enc, head = FREncoder(cfg.dim), ArcFaceHead(cfg.dim, n_cls, cfg.s, cfg.m)
    opt = torch.optim.Adam(list(enc.parameters()) + list(head.parameters()), lr=cfg.lr)
    losses = []
    enc.train()
    for _ in range(cfg.epochs):
        perm, tot = torch.randperm(x.shape[0], generator=g), 0.0
        for i in range(0, x.shape[0], cfg.batch):
            b = perm[i:i + cfg.batch]
            loss = head.loss(enc.features(x[b]), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += float(loss.detach()) * b.numel()
        losses.append(tot / x.shape[0])
        if deadline is not None and clock() > deadline:
            break
    return enc.eval(), losses


@torch.no_grad()
def embed(encoder: Callable[[torch.Tensor], torch.Tensor], images: torch.Tensor, batch: int = 512,
          features: bool = False) -> torch.Tensor:
    """Unit embeddings f(x) (or, with ``features``, the pre-normalisation features) in batches."""
    x = check_images(images)
    batch = check_scalar(batch, "batch", int, min=1)
    fn = encoder.features if features else encoder
    if isinstance(encoder, nn.Module):
        encoder.eval()
    return torch.cat([fn(x[i:i + batch]) for i in range(0, x.shape[0], batch)])


def identity_centers(emb: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """c_j = normalize(mean of the image embeddings of identity j), for j = 0..max(labels)."""
    emb = check_unit(emb, "emb")
    y = torch.as_tensor(labels)
    if y.shape != (emb.shape[0],) or y.is_floating_point() or int(y.min()) < 0:
        raise ValueError(f"labels must be ({emb.shape[0]},) non-negative integers, got {tuple(y.shape)} {y.dtype}")
    y = y.long()
    n = int(y.max()) + 1
    s = torch.zeros(n, emb.shape[1]).index_add_(0, y, emb)
    return F.normalize(s, dim=1)


class Checkpoint:
    """A local face-recognition model as an embedding function: ``ckpt(images) -> (B, D)`` unit rows.

    images: (B, 1 or 3, H, W) in [0, 1]; they are resized to ``size`` (112 for ArcFace), grey images are
    repeated to 3 channels and mapped to [-1, 1] (the insightface ``(x - 127.5) / 127.5`` convention).
    """

    def __init__(self, fn: Callable, size: int, kind: str):
        self._fn, self.size, self.kind = fn, size, kind

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        if not isinstance(images, torch.Tensor) or images.ndim != 4 or images.shape[1] not in (1, 3):
            raise ValueError(f"images must be a (B, 1 or 3, H, W) tensor, got {getattr(images, 'shape', images)}")
        x = images.float()
        if float(x.min()) < 0 or float(x.max()) > 1:
            raise ValueError("images must lie in [0, 1]")
        if x.shape[-1] != self.size or x.shape[-2] != self.size:
            x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)
        if x.shape[1] == 1:
            x = x.repeat(1, 3, 1, 1)
        with torch.no_grad():
            return F.normalize(torch.as_tensor(self._fn(x * 2 - 1)).float(), dim=1)


def load_checkpoint(path: str | os.PathLike, model: nn.Module | None = None, size: int = 112) -> Checkpoint:
    """Load a local ArcFace-style model from ``path`` (never downloaded).

    ``*.onnx``: run through onnxruntime (ImportError naming it when not installed). Otherwise a
    TorchScript archive (``torch.jit.load``) or a torch state dict (``torch.load(weights_only=True)``)
    loaded into ``model`` (the architecture, e.g. an iresnet100 you provide; required for a state dict).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"path: checkpoint {path!r} does not exist (nothing is downloaded; pass a local file)")
    size = check_scalar(size, "size", int, min=8)
    if path.endswith(".onnx"):
        try:
            import onnxruntime as ort
        except ImportError:
            raise ImportError("an ONNX checkpoint needs onnxruntime: pip install onnxruntime") from None
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        return Checkpoint(lambda x: sess.run(None, {name: x.numpy()})[0], size, "onnx")
    try:
        mod = torch.jit.load(path, map_location="cpu")
        return Checkpoint(mod.eval(), size, "torchscript")
    except RuntimeError:
        pass
    state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ValueError(f"path: {path!r} holds neither a TorchScript module nor a state dict")
    if model is None:
        raise ValueError("model: a state-dict checkpoint needs the architecture (pass model=...)")
    model.load_state_dict(state)
    return Checkpoint(model.eval(), size, "state_dict")
