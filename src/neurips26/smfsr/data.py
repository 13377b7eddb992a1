"""Offline natural images and seeded LR-HR pair pools (cached by config hash).

Images: the natural photographs inside the scikit-image wheel (``skimage/data``) plus scikit-learn's
``china.jpg`` / ``flower.jpg``; no downloaders. Split (the spec's): test = astronaut, coffee, chelsea,
china, flower; train = the other natural images, without motorcycle_right (a near-duplicate of the
left view). Synthetic or binary pictures shipped in ``skimage/data`` (text, page, chessboards, logos,
phantom, horse silhouette, ...) are left out: they are not natural images.

A pool of n pairs costs n degradations: each random HR crop (``crop`` x ``crop``, 64 at quick) is
degraded by the Real-ESRGAN pipeline and one aligned (``patch`` x ``patch``, ``patch/4``) HR/LR pair is
cut from it. Pools are built in chunks with their own seeds (the same pool with any backend of
``map_tasks``) and cached at ``cache_dir('smfsr')/pool-<sha>.pt``, keyed by the whole config.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from neurips26.harness.cache import cache_dir
from neurips26.harness.parallel import map_tasks
from neurips26.harness.validation import check_choice, check_scalar
from neurips26.smfsr.base import SCALE
from neurips26.smfsr.degradation import DegradationConfig, degrade

TEST_IMAGES = ("astronaut", "coffee", "chelsea", "china", "flower")
TRAIN_IMAGES = ("rocket", "motorcycle_left", "hubble_deep_field", "retina", "ihc", "brick", "grass", "gravel",
                "camera", "moon", "coins", "cell", "microaneurysms")
EXCLUDED = ("motorcycle_right",)
POOL_VERSION = 3  # 2: batched torch JPEG, per-kind noise draws; 3: JPEG DCT as one GEMM (D kron D), 3 x 3
                  # colour products (float rounding moved: a few pixels differ by quantisation flips)


def _skimage_file(name: str) -> Path:
    import skimage.data

    folder = Path(skimage.data.__file__).parent
    for ext in (".png", ".jpg"):
        if (folder / f"{name}{ext}").exists():
            return folder / f"{name}{ext}"
    raise FileNotFoundError(f"image {name!r} not found in {folder}")


def load_image(name: str, channels: int = 3) -> np.ndarray:
    """One named image as float32 (H, W, C) in [0, 1]; grey via BT.601 luma for ``channels=1``."""
    from PIL import Image

    channels = check_choice(channels, "channels", (1, 3))
    if name in ("china", "flower"):
        import sklearn.datasets

        path = Path(sklearn.datasets.__file__).parent / "images" / f"{name}.jpg"
    else:
        path = _skimage_file(check_choice(name, "name", TEST_IMAGES + TRAIN_IMAGES + EXCLUDED))
    im = Image.open(path)
    im = im.convert("L" if channels == 1 else "RGB")
    arr = np.asarray(im, dtype=np.float32) / 255.0
    return arr[..., None] if channels == 1 else arr


def load_split(split: str, channels: int = 3) -> list[np.ndarray]:
    check_choice(split, "split", ("train", "test"))
    return [load_image(n, channels) for n in (TRAIN_IMAGES if split == "train" else TEST_IMAGES)]


def random_crops(images: list[np.ndarray], n: int, size: int, g: torch.Generator) -> torch.Tensor:
    """``n`` random ``size`` x ``size`` crops (B, C, size, size), images drawn in proportion to area."""
    ok = [im for im in images if im.shape[0] >= size and im.shape[1] >= size]
    if not ok:
        raise ValueError(f"no image is at least {size} x {size}")
    areas = torch.tensor([im.shape[0] * im.shape[1] for im in ok], dtype=torch.float64)
    which = torch.multinomial(areas / areas.sum(), n, replacement=True, generator=g)
    out = np.empty((n, ok[0].shape[2], size, size), dtype=np.float32)
    for k, i in enumerate(which.tolist()):
        im = ok[i]
        y = int(torch.randint(0, im.shape[0] - size + 1, (1,), generator=g))
        x = int(torch.randint(0, im.shape[1] - size + 1, (1,), generator=g))
        out[k] = im[y:y + size, x:x + size].transpose(2, 0, 1)
    return torch.from_numpy(out)


@dataclass(frozen=True)
class PoolConfig:
    """What a pair pool is made of (its hash is the cache key)."""
    split: str = "train"
    n: int = 20000
    channels: int = 1
    crop: int = 64
    patch: int = 16
    seed: int = 0
    chunk: int = 512
    degradation: DegradationConfig = DegradationConfig()

    def key(self) -> str:
        text = json.dumps({"v": POOL_VERSION, **asdict(self)}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class PairPool:
    hr: torch.Tensor  # (n, C, patch, patch)
    lr: torch.Tensor  # (n, C, patch/4, patch/4)
    config: PoolConfig
    cached: bool = False
    seconds: float = 0.0

    def __len__(self) -> int:
        return self.hr.shape[0]

    def subset(self, n: int) -> "PairPool":
        return PairPool(self.hr[:n], self.lr[:n], self.config, self.cached, self.seconds)


def _pool_chunk(job: tuple[PoolConfig, int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk of a pool (module level: a process pool can run it)."""
    cfg, index, count = job
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + index)
    images = load_split(cfg.split, cfg.channels)
    hr_big = random_crops(images, count, cfg.crop, g)
    lr_big = degrade(hr_big, g, cfg.degradation)
    lp = cfg.patch // SCALE
    hi = cfg.crop // SCALE - lp
    ys = torch.randint(0, hi + 1, (count,), generator=g)
    xs = torch.randint(0, hi + 1, (count,), generator=g)
    hr = torch.stack([hr_big[i, :, SCALE * y:SCALE * (y + lp), SCALE * x:SCALE * (x + lp)]
                      for i, (y, x) in enumerate(zip(ys.tolist(), xs.tolist()))])
    lr = torch.stack([lr_big[i, :, y:y + lp, x:x + lp]
                      for i, (y, x) in enumerate(zip(ys.tolist(), xs.tolist()))])
    return hr.contiguous(), lr.contiguous()


def build_pool(cfg: PoolConfig, backend: str = "serial", workers: int | None = None) -> PairPool:
    """Build a pool (uncached)."""
    import time

    check_scalar(cfg.n, "n", int, min=1)
    check_scalar(cfg.crop, "crop", int, min=2 * SCALE)
    check_scalar(cfg.patch, "patch", int, min=SCALE, max=cfg.crop)
    if cfg.patch % SCALE or cfg.crop % SCALE:
        raise ValueError(f"crop ({cfg.crop}) and patch ({cfg.patch}) must be multiples of {SCALE}")
    t0 = time.perf_counter()
    jobs = [(cfg, i, min(cfg.chunk, cfg.n - s)) for i, s in enumerate(range(0, cfg.n, cfg.chunk))]
    parts = map_tasks(_pool_chunk, jobs, backend=backend, workers=workers, progress=False)
    hr = torch.cat([p[0] for p in parts])
    lr = torch.cat([p[1] for p in parts])
    return PairPool(hr, lr, cfg, False, time.perf_counter() - t0)


def get_pool(cfg: PoolConfig, cache: bool = True, backend: str = "serial",
             workers: int | None = None) -> PairPool:
    """The pool of ``cfg`` from the cache when present, else built (and cached when ``cache``).

    With ``cache`` one process builds a missing pool and every other process that asks for the same key
    meanwhile waits on its lock file (``fcntl.flock``) and then reads it: the quick run's seed processes,
    side by side, share one build (the pools' seeds are fixed by the config, not by the run seed) instead
    of each building the same pool on the same cores."""
    path = cache_dir("smfsr") / f"pool-{cfg.key()}.pt"
    if not cache:
        return build_pool(cfg, backend, workers)
    if path.exists():
        return _read_pool(path, cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_suffix(".lock")):
        if path.exists():                                  # built by another process while this one waited
            return _read_pool(path, cfg)
        pool = build_pool(cfg, backend, workers)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        torch.save({"hr": pool.hr, "lr": pool.lr}, tmp)
        tmp.replace(path)
    return pool


def _read_pool(path: Path, cfg: PoolConfig) -> PairPool:
    d = torch.load(path, weights_only=True)
    return PairPool(d["hr"], d["lr"], cfg, True, 0.0)


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive advisory lock on ``path`` (created) for the block; where ``fcntl`` is missing or the lock
    file cannot be opened (a read-only cache, another user's file), none: the caller builds unlocked, as
    before the lock existed. flock works on a read-only descriptor, so the file is opened read-only."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
