"""Feature extractors without downloaded weights: ``forward_features(x, pooling) -> (B, K)``.

- ``RCF``: random convolutional features (MOSAIKS; torchgeo-bench's weights-free default): ``K/2``
  Gaussian k x k filters ``w`` with bias ``b``; features ``pool(relu(w*x + b))`` and ``pool(relu(-w*x - b))``.
- ``ResNet18``: the ResNet-18 layout (BasicBlocks [2, 2, 2, 2]) with a small-image stem (3x3 conv,
  stride 1, no max-pool), first layer built for the task's band count, random init; eval-mode BN.
- ``ViTTiny``: ViT-Ti/ (dim 192, depth 12, 3 heads) on p x p patches, tokens mean-pooled (or CLS).
- ``RawPCA``: raw pixels flattened, PCA fitted on the unlabeled pool (no seed involved).
- ``SmallEncoder`` + ``pretrain_simclr`` / ``pretrain_mae``: a 3-layer CNN pretrained locally on
  the unlabeled pool, SimCLR-style (NT-Xent, two augmented views) or MAE-style (masked-patch pixel
  reconstruction); fixed step counts (deterministic), weights SHA-256-hashed and cached under
  ``neurips26.harness.cache.cache_dir("gfm_audit")``.

Written in plain torch (no torchvision / timm).
"""

from __future__ import annotations

import hashlib
import io
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from neurips26.harness.cache import cache_dir
from neurips26.harness.validation import check_choice, check_scalar

POOLINGS = ("mean", "max")


def weights_sha256(module: nn.Module) -> str:
    """SHA-256 over the state dict (names, shapes and bytes, in name order)."""
    h = hashlib.sha256()
    for k, v in sorted(module.state_dict().items()):
        t = v.detach().cpu().contiguous()
        h.update(k.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def _pool(f: torch.Tensor, pooling: str) -> torch.Tensor:
    if f.ndim == 2:
        return f
    return f.mean(dim=(2, 3)) if pooling == "mean" else f.amax(dim=(2, 3))


class FeatureModel(nn.Module):
    """Base: ``forward_features`` in eval mode under ``torch.inference_mode``; records what a seed touches."""

    name = "model"
    license = "n/a (no weights: random init)"
    seed_dependent = True
    default_pooling = "mean"

    def spec(self) -> dict[str, Any]:
        return {"name": self.name}

    def fit(self, x_pool: np.ndarray) -> "FeatureModel":  # models with data-fitted parts override
        return self

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, pooling: str = "mean") -> torch.Tensor:
        return _pool(self.feature_map(x), pooling)

    def forward_features(
        self, x: np.ndarray | torch.Tensor, pooling: str = "mean", batch_size: int = 256
    ) -> np.ndarray:
        check_choice(pooling, "pooling", POOLINGS)
        self.eval()
        xt = torch.as_tensor(np.asarray(x, dtype=np.float32))
        outs = []
        with torch.inference_mode():
            for i in range(0, len(xt), batch_size):
                outs.append(self(xt[i : i + batch_size], pooling))
        f = torch.cat(outs).numpy().astype(np.float64) if outs else np.zeros((0, 0))
        if f.ndim != 2:
            raise ValueError(f"{self.name}: features must be 2-D (B, K) after pooling, got shape {f.shape}")
        return f

    def weights_sha256(self) -> str:
        return weights_sha256(self)


class RCF(FeatureModel):
    name = "rcf"

    def __init__(
        self, in_channels: int, features: int = 128, kernel_size: int = 3, bias: float = -1.0, seed: int = 0
    ):
        super().__init__()
        features = check_scalar(features, "features", int, min=2)
        if features % 2:
            raise ValueError(f"features must be even (two signs per filter), got {features}")
        g = torch.Generator().manual_seed(seed)
        w = torch.randn(features // 2, in_channels, kernel_size, kernel_size, generator=g)
        self.register_buffer("weight", w)
        self.register_buffer("bias", torch.full((features // 2,), float(bias)))
        self.cfg = {"features": features, "kernel_size": kernel_size, "bias": bias}

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, **self.cfg}

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        z = F.conv2d(x, self.weight, self.bias)
        return torch.cat([F.relu(z), F.relu(-z)], dim=1)


class _Basic(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.b1(self.c1(x)))
        out = self.b2(self.c2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet18(FeatureModel):
    name = "resnet18"

    def __init__(self, in_channels: int, width: int = 64, seed: int = 0):
        super().__init__()
        width = check_scalar(width, "width", int, min=1)
        torch.manual_seed(seed)
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        layers, cin = [], width
        for i, cout in enumerate((width, 2 * width, 4 * width, 8 * width)):
            stride = 1 if i == 0 else 2
            layers += [_Basic(cin, cout, stride), _Basic(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.out_dim = 8 * width
        self.cfg = {"width": width, "in_channels": in_channels}

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, **self.cfg}

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(self.stem(x))


class ViTTiny(FeatureModel):
    name = "vit_tiny"

    def __init__(
        self,
        in_channels: int,
        image_size: int,
        patch: int = 4,
        dim: int = 192,
        depth: int = 12,
        heads: int = 3,
        seed: int = 0,
        token_pooling: str = "mean",
    ):
        super().__init__()
        if image_size % patch:
            raise ValueError(f"image_size {image_size} must be a multiple of patch {patch}")
        self.token_pooling = check_choice(token_pooling, "token_pooling", ("mean", "cls"))
        torch.manual_seed(seed)
        self.embed = nn.Conv2d(in_channels, dim, patch, patch)
        n = (image_size // patch) ** 2
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(0.02 * torch.randn(1, n + 1, dim))
        layer = nn.TransformerEncoderLayer(
            dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.cfg = {
            "patch": patch,
            "dim": dim,
            "depth": depth,
            "heads": heads,
            "token_pooling": token_pooling,
        }

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, **self.cfg}

    def forward(self, x: torch.Tensor, pooling: str = "mean") -> torch.Tensor:
        t = self.embed(x).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(len(t), -1, -1), t], dim=1) + self.pos
        t = self.norm(self.blocks(t))
        if self.token_pooling == "cls":
            return t[:, 0]
        return t[:, 1:].mean(1) if pooling == "mean" else t[:, 1:].amax(1)


class RawPCA(FeatureModel):
    """Raw pixels + PCA fitted on the unlabeled pool (deterministic full SVD; no seed)."""

    name = "raw_pca"
    seed_dependent = False
    license = "n/a (no weights)"

    def __init__(self, n_components: int = 128):
        super().__init__()
        self.n_components = check_scalar(n_components, "n_components", int, min=1)
        self.pca = None

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "n_components": self.n_components}

    def fit(self, x_pool: np.ndarray) -> "RawPCA":
        from sklearn.decomposition import PCA

        flat = np.asarray(x_pool, dtype=np.float64).reshape(len(x_pool), -1)
        k = min(self.n_components, flat.shape[0], flat.shape[1])
        self.pca = PCA(n_components=k, svd_solver="full").fit(flat)
        return self

    def forward_features(self, x, pooling: str = "mean", batch_size: int = 256) -> np.ndarray:
        check_choice(pooling, "pooling", POOLINGS)
        if self.pca is None:
            raise RuntimeError("RawPCA must be fitted on the unlabeled pool first (call fit)")
        x = np.asarray(x, dtype=np.float64)
        return self.pca.transform(x.reshape(len(x), -1))

    def weights_sha256(self) -> str:
        if self.pca is None:
            return "unfitted"
        return hashlib.sha256(np.ascontiguousarray(self.pca.components_).tobytes()).hexdigest()


class SmallEncoder(FeatureModel):
    """A 3-layer CNN (32-64-128 channels) for local self-supervised pretraining."""

    name = "small_encoder"
    license = "CC0-1.0 (trained here)"

    def __init__(self, in_channels: int, seed: int = 0, algorithm: str = "untrained"):
        super().__init__()
        torch.manual_seed(seed)
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, 32, 3, 1, 1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, 2, 1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.Conv2d(64, 128, 3, 2, 1),
            nn.ReLU(),
        )
        self.out_dim = 128
        self.algorithm = algorithm
        self.name = f"{algorithm}_encoder"
        self.in_channels = in_channels

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.weights_sha256()}

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _augment(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Flips, 90-degree rotations, circular shifts, per-band gain and noise (SimCLR views)."""
    if torch.rand((), generator=g) < 0.5:
        x = x.flip(3)
    x = torch.rot90(x, int(torch.randint(0, 4, (), generator=g)), dims=(2, 3))
    s = int(torch.randint(-2, 3, (), generator=g)), int(torch.randint(-2, 3, (), generator=g))
    x = torch.roll(x, s, dims=(2, 3))
    gain = 1 + 0.1 * torch.randn(x.shape[0], x.shape[1], 1, 1, generator=g)
    return x * gain + 0.1 * torch.randn(x.shape, generator=g)


def _nt_xent(z1: torch.Tensor, z2: torch.Tensor, tau: float = 0.2) -> torch.Tensor:
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.T / tau
    n = len(z1)
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
    return F.cross_entropy(sim, target)


def _train_encoder(
    x_pool: np.ndarray, algorithm: str, steps: int, batch: int, seed: int, lr: float
) -> SmallEncoder:
    x = torch.as_tensor(np.asarray(x_pool, dtype=np.float32))
    enc = SmallEncoder(x.shape[1], seed=seed, algorithm=algorithm)
    g = torch.Generator().manual_seed(seed)
    if algorithm == "simclr":
        head = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 64))
    else:
        head = nn.Conv2d(128, x.shape[1] * 16, 1)  # 4x4 pixels per feature cell (two stride-2 convs)
    opt = torch.optim.Adam(list(enc.parameters()) + list(head.parameters()), lr=lr)
    enc.train()
    for _ in range(steps):
        idx = torch.randint(0, len(x), (min(batch, len(x)),), generator=g)
        xb = x[idx]
        if algorithm == "simclr":
            loss = _nt_xent(head(enc(_augment(xb, g))), head(enc(_augment(xb, g))))
        else:
            b, c, h, w = xb.shape
            cells = torch.rand(b, 1, (h + 3) // 4, (w + 3) // 4, generator=g) < 0.6
            mask = cells.repeat_interleave(4, 2).repeat_interleave(4, 3)[:, :, :h, :w].float()
            rec = head(enc.feature_map(xb * (1 - mask)))
            rec = F.pixel_shuffle(rec, 4)[:, :, :h, :w]
            loss = (((rec - xb) ** 2) * mask).sum() / (mask.sum() * c + 1e-8)
        opt.zero_grad()
        loss.backward()
        opt.step()
    enc.eval()
    return enc


def pretrained_encoder(
    x_pool: np.ndarray,
    algorithm: str = "simclr",
    steps: int = 150,
    batch: int = 128,
    seed: int = 0,
    lr: float = 1e-3,
    data_key: str = "",
    use_cache: bool = True,
) -> SmallEncoder:
    """A ``SmallEncoder`` pretrained on ``x_pool`` (SimCLR- or MAE-style), cached by its inputs.

    ``data_key`` names the pool (e.g. the task hash plus the input normalisation) in the cache key.
    """
    check_choice(algorithm, "algorithm", ("simclr", "mae"))
    steps = check_scalar(steps, "steps", int, min=1)
    pool_sha = hashlib.sha256(np.ascontiguousarray(x_pool, dtype=np.float32).tobytes()).hexdigest()[:16]
    key = f"{algorithm}-{data_key or pool_sha}-{pool_sha}-s{seed}-n{steps}-b{batch}-lr{lr:g}"
    path = cache_dir("gfm_audit") / "encoders" / f"{key}.pt"
    if use_cache and path.is_file():
        enc = SmallEncoder(np.asarray(x_pool).shape[1], seed=seed, algorithm=algorithm)
        enc.load_state_dict(torch.load(path, weights_only=True))
        enc.eval()
        return enc
    enc = _train_encoder(x_pool, algorithm, steps, batch, seed, lr)
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        torch.save(enc.state_dict(), buf)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(buf.getvalue())
        tmp.replace(path)
    return enc


def build_model(name: str, task_bands: int, image_size: int, seed: int = 0, **kw: Any) -> FeatureModel:
    """A model by name: ``rcf``, ``resnet18``, ``vit_tiny``, ``raw_pca`` (pretrained encoders: see
    ``pretrained_encoder``)."""
    check_choice(name, "model", ("rcf", "resnet18", "vit_tiny", "raw_pca"))
    if name == "rcf":
        return RCF(task_bands, seed=seed, **kw)
    if name == "resnet18":
        return ResNet18(task_bands, seed=seed, **kw)
    if name == "vit_tiny":
        return ViTTiny(task_bands, image_size, seed=seed, **kw)
    return RawPCA(**kw)
