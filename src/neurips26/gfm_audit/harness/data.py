"""Tasks: offline datasets with fixed, hashed splits.

A ``Task`` holds images ``x`` (N, C, H, W) float32 in the task's stored ``units``, labels ``y``, the
fixed splits (index arrays, each with its SHA-256), an unlabeled pool (for statistics and local
pretraining), optional coordinates and an honest ``domain`` label.

Datasets (all offline):
- ``digits_task``: scikit-learn ``load_digits`` (1797 8x8 grey digits, 10 classes), non-EO;
- ``texture_task``: 16x16 patches of scikit-image brick / grass / gravel (3 classes), non-EO;
- ``lfw_task``: scikit-image ``lfw_subset`` (200 25x25, face / non-face), non-EO;
- ``multispectral_task``: SYNTHETIC multispectral generator: C classes with random spectral signatures
  over B = 12 bands, class-specific Gaussian-random-field texture (class-dependent correlation
  length), sensor noise, per-"sensor" gain/offset, stored as DN 0-10000 (reflectance x 10000), with
  longitude/latitude so spatially disjoint splits exist.

Splits: ``random_split`` assigns each sample by the SHA-256 of ``"<salt>:<sample id>"`` (stable across
runs, machines and numpy versions); ``spatial_split`` uses longitude blocks (EuroSAT-spatial style).
``save_split``/``load_split`` write index files with their SHA-256 and refuse a file whose hash differs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neurips26.harness.validation import check_array, check_scalar

SPLITS = ("train", "val", "test")
DN_SCALE = 10000.0


class SplitHashError(ValueError):
    """A split file whose content does not match its recorded SHA-256."""


def split_hash(idx: np.ndarray) -> str:
    """SHA-256 of a split's sorted int64 indices."""
    a = np.sort(np.asarray(idx, dtype=np.int64))
    return hashlib.sha256(a.tobytes()).hexdigest()


def _bucket(ids: np.ndarray, salt: str) -> np.ndarray:
    """A uniform number in [0, 1) per sample id from SHA-256 (no RNG state involved)."""
    out = np.empty(len(ids), dtype=np.float64)
    for i, s in enumerate(ids):
        h = hashlib.sha256(f"{salt}:{s}".encode()).digest()
        out[i] = int.from_bytes(h[:8], "big") / 2**64
    return out


def random_split(
    n: int,
    fractions: tuple[float, float, float] = (0.6, 0.2, 0.2),
    salt: str = "split",
    ids: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """train/val/test indices by SHA-256 buckets of each sample id."""
    n = check_scalar(n, "n", int, min=3)
    f = check_array(fractions, "fractions", ndim=1, dtype=float, shape=(3,))
    if np.any(f <= 0) or abs(f.sum() - 1) > 1e-9:
        raise ValueError(f"fractions must be three positive numbers summing to 1, got {tuple(f)}")
    u = _bucket(np.arange(n) if ids is None else ids, salt)
    edges = np.cumsum(f)[:2]
    part = np.searchsorted(edges, u, side="right")
    return {name: np.flatnonzero(part == k) for k, name in enumerate(SPLITS)}


def spatial_split(
    lon: np.ndarray,
    n_blocks: int = 10,
    fractions: tuple[float, float, float] = (0.6, 0.2, 0.2),
    salt: str = "spatial",
) -> dict[str, np.ndarray]:
    """Spatially disjoint splits: longitude cut into ``n_blocks`` equal blocks, blocks assigned by hash."""
    lon = check_array(lon, "lon", ndim=1, dtype=float, min_size=3)
    n_blocks = check_scalar(n_blocks, "n_blocks", int, min=3)
    edges = np.linspace(lon.min(), lon.max(), n_blocks + 1)[1:-1]
    block = np.searchsorted(edges, lon, side="right")
    u = _bucket(np.arange(n_blocks), salt)
    order = np.argsort(u)
    counts = np.round(np.asarray(fractions) * n_blocks).astype(int)
    counts[0] = n_blocks - counts[1:].sum()
    assign = np.empty(n_blocks, dtype=int)
    assign[order] = np.repeat(np.arange(3), counts)
    part = assign[block]
    return {name: np.flatnonzero(part == k) for k, name in enumerate(SPLITS)}


def save_split(splits: dict[str, np.ndarray], path: Path | str) -> Path:
    path = Path(path)
    obj = {k: {"indices": np.asarray(v).tolist(), "sha256": split_hash(v)} for k, v in splits.items()}
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj))
    tmp.replace(path)
    return path


def load_split(path: Path | str, expected: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    """Read a split file; ``SplitHashError`` if an index list does not match its (or ``expected``) hash."""
    obj = json.loads(Path(path).read_text())
    out = {}
    for k, v in obj.items():
        idx = np.asarray(v["indices"], dtype=np.int64)
        want = (expected or {}).get(k, v["sha256"])
        got = split_hash(idx)
        if got != want:
            raise SplitHashError(f"split {k!r} in {str(path)!r}: SHA-256 {got[:12]} != recorded {want[:12]}")
        out[k] = idx
    return out


@dataclass
class Task:
    """A dataset with fixed splits. ``x`` is stored in ``units`` (``"dn"`` or ``"unit"``)."""

    name: str
    x: np.ndarray
    y: np.ndarray
    splits: dict[str, np.ndarray]
    pool: np.ndarray  # unlabeled pool indices (statistics, pretraining)
    n_classes: int
    domain: str  # "non-EO" or "synthetic multispectral"
    units: str = "unit"
    coords: np.ndarray | None = None
    metric: str = "accuracy"
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.x = check_array(self.x, "x", ndim=4, dtype=np.float32)
        self.y = check_array(self.y, "y", ndim=1, dtype=int)
        if len(self.y) != len(self.x):
            raise ValueError(
                f"y must have one label per image: {len(self.y)} labels for {len(self.x)} images"
            )
        missing = [s for s in SPLITS if s not in self.splits]
        if missing:
            raise ValueError(f"splits must have {SPLITS}; missing {missing}")
        for s in SPLITS:
            idx = np.asarray(self.splits[s], dtype=np.int64)
            if idx.size == 0:
                raise ValueError(f"split {s!r} is empty")
            if idx.min() < 0 or idx.max() >= len(self.y):
                raise ValueError(f"split {s!r} has indices outside [0, {len(self.y)})")
            if np.any(self.y[idx] < 0):
                raise ValueError(
                    f"labels missing (negative) for {int(np.sum(self.y[idx] < 0))} samples of split {s!r}"
                )
            self.splits[s] = idx

    @property
    def bands(self) -> int:
        return self.x.shape[1]

    def split_hashes(self) -> dict[str, str]:
        return {k: split_hash(v) for k, v in self.splits.items()}

    def task_hash(self) -> str:
        h = hashlib.sha256(self.name.encode())
        for s in SPLITS:
            h.update(split_hash(self.splits[s]).encode())
        return h.hexdigest()

    def with_splits(self, splits: dict[str, np.ndarray], tag: str) -> "Task":
        return Task(
            f"{self.name}/{tag}",
            self.x,
            self.y,
            dict(splits),
            self.pool,
            self.n_classes,
            self.domain,
            self.units,
            self.coords,
            self.metric,
            dict(self.meta),
        )


def digits_task(salt: str = "digits") -> Task:
    """scikit-learn digits, values 0-16 scaled to [0, 1] (non-EO)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images[:, None] / 16.0).astype(np.float32)
    sp = random_split(len(x), salt=salt)
    return Task("digits", x, d.target, sp, sp["train"], 10, "non-EO (handwritten digits)")


def texture_task(patch: int = 16, per_class: int = 256, salt: str = "texture") -> Task:
    """Non-overlapping patches of scikit-image brick / grass / gravel (3 classes, non-EO)."""
    from skimage import data

    patch = check_scalar(patch, "patch", int, min=4, max=128)
    imgs = [data.brick(), data.grass(), data.gravel()]
    xs, ys = [], []
    for c, im in enumerate(imgs):
        im = im.astype(np.float32) / 255.0
        tiles = [
            im[i : i + patch, j : j + patch]
            for i in range(0, 512 - patch + 1, patch)
            for j in range(0, 512 - patch + 1, patch)
        ]
        xs += tiles[:per_class]
        ys += [c] * min(per_class, len(tiles))
    x = np.stack(xs)[:, None]
    sp = random_split(len(x), salt=salt)
    return Task("textures", x, np.array(ys), sp, sp["train"], 3, "non-EO (texture photographs)")


def lfw_task(salt: str = "lfw") -> Task:
    """scikit-image ``lfw_subset``: 100 faces, 100 non-faces, 25x25 (non-EO)."""
    from skimage import data

    x = data.lfw_subset().astype(np.float32)[:, None]
    y = np.r_[np.ones(100, int), np.zeros(100, int)]
    sp = random_split(len(x), salt=salt)
    return Task("lfw_subset", x, y, sp, sp["train"], 2, "non-EO (faces)")


def _grf(rng: np.random.Generator, n: int, size: int, length: np.ndarray) -> np.ndarray:
    """Unit-variance Gaussian random fields with a Gaussian spectrum of correlation length ``length``."""
    k = np.fft.fftfreq(size)
    k2 = k[:, None] ** 2 + k[None, :] ** 2
    white = rng.standard_normal((n, size, size))
    amp = np.exp(-2 * (np.pi**2) * k2[None] * (length[:, None, None] ** 2))
    f = np.real(np.fft.ifft2(np.fft.fft2(white) * amp))
    f -= f.mean(axis=(1, 2), keepdims=True)
    return f / (f.std(axis=(1, 2), keepdims=True) + 1e-8)


def multispectral_task(
    n: int = 3000,
    n_classes: int = 6,
    size: int = 16,
    bands: int = 12,
    seed: int = 0,
    separation: float = 0.004,
    noise: float = 0.04,
    n_sensors: int = 3,
    texture_range: tuple[float, float] = (1.0, 1.3),
    salt: str = "multispectral",
) -> Task:
    """SYNTHETIC multispectral patches in DN 0-10000 (see the module docstring); fixed by ``seed``."""
    n = check_scalar(n, "n", int, min=30)
    n_classes = check_scalar(n_classes, "n_classes", int, min=2)
    size = check_scalar(size, "size", int, min=4, max=256)
    bands = check_scalar(bands, "bands", int, min=1)
    separation = check_scalar(separation, "separation", float, min=0)
    noise = check_scalar(noise, "noise", float, min=0)
    rng = np.random.default_rng(seed)
    base = np.sort(rng.uniform(0.05, 0.35, bands))  # a vegetation-like mean spectrum
    sig = np.clip(base[None] + separation * rng.standard_normal((n_classes, bands)), 0.01, 0.9)
    length = np.linspace(*texture_range, n_classes)[rng.permutation(n_classes)]
    tex_amp = rng.uniform(0.1, 0.3, n_classes)
    y = np.arange(n) % n_classes
    rng.shuffle(y)
    field_ = _grf(rng, n, size, length[y] + 0.15 * rng.standard_normal(n).clip(-2, 2))
    sensor = rng.integers(0, n_sensors, n)
    gain = rng.uniform(0.85, 1.15, (n_sensors, bands))
    offset = rng.uniform(-0.02, 0.02, (n_sensors, bands))
    refl = sig[y][:, :, None, None] * (1 + tex_amp[y][:, None, None, None] * field_[:, None])
    refl = refl * gain[sensor][:, :, None, None] + offset[sensor][:, :, None, None]
    refl = refl + noise * rng.standard_normal(refl.shape)
    dn = np.clip(refl * DN_SCALE, 0, DN_SCALE).astype(np.float32)
    lon = rng.uniform(-10, 30, n)
    lat = rng.uniform(35, 60, n)
    sp = random_split(n, salt=salt)
    return Task(
        "multispectral",
        dn,
        y,
        sp,
        sp["train"],
        n_classes,
        "SYNTHETIC multispectral (not real EO)",
        units="dn",
        coords=np.c_[lon, lat],
        meta={"generator_seed": seed, "bands": bands, "size": size, "separation": separation},
    )
