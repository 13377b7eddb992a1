"""Offline data: SynthGlyphs-48 (rendered with Pillow's built-in FreeType font) and upsampled digits.

SynthGlyphs-48, per 32x32 grayscale image in [0, 1]: font size U{16..24}, stroke width U{0,1}, rendered
centred on a 64x64 canvas, rotated U(-20, 20) degrees (bilinear), sheared U(-0.3, 0.3), translated
U{-3..3} px, centre-cropped to 32x32, Gaussian blur sigma ~ U(0, 1), plus N(0, 0.05) noise, clipped.
Seeded ``numpy.random.default_rng``; arrays are cached as ``.npz`` under the user cache dir.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from neurips26.harness.cache import cache_dir as harness_cache_dir
from neurips26.harness.validation import check_array, check_scalar

CHARSET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabdefghijkmnqrtu"
N_CLASSES = len(CHARSET)
SIZE = 32


def cache_dir() -> Path:
    d = harness_cache_dir("nota")
    d.mkdir(parents=True, exist_ok=True)
    return d


def render_glyph(ch: str, rng: np.random.Generator) -> np.ndarray:
    """One augmented 32x32 image of character ``ch`` (float32 in [0, 1])."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont
    font = ImageFont.load_default(size=int(rng.integers(16, 25)))
    img = Image.new("L", (64, 64), 0)
    ImageDraw.Draw(img).text((32, 32), ch, fill=255, font=font, anchor="mm",
                             stroke_width=int(rng.integers(0, 2)), stroke_fill=255)
    img = img.rotate(float(rng.uniform(-20, 20)), resample=Image.BILINEAR)
    sh = float(rng.uniform(-0.3, 0.3))
    tx, ty = (int(v) for v in rng.integers(-3, 4, size=2))
    img = img.transform((64, 64), Image.AFFINE, (1, sh, -sh * 32 + tx, 0, 1, ty), resample=Image.BILINEAR)
    img = img.crop((16, 16, 48, 48)).filter(ImageFilter.GaussianBlur(float(rng.uniform(0, 1))))
    x = np.asarray(img, dtype=np.float32) / 255.0
    return np.clip(x + rng.normal(0, 0.05, x.shape).astype(np.float32), 0.0, 1.0)


def synth_glyphs(classes, per_class: int, seed: int, cache: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)``: ``per_class`` images of each class index in ``classes`` (x: (N, 32, 32) float32)."""
    classes = [check_scalar(c, "classes[i]", int, min=0, max=N_CLASSES - 1) for c in classes]
    per_class = check_scalar(per_class, "per_class", int, min=1)
    seed = check_scalar(seed, "seed", int, min=0)
    key = hashlib.sha256(f"{classes}-{per_class}-{seed}-v1".encode()).hexdigest()[:16]
    path = cache_dir() / f"glyphs-{key}.npz"
    if cache and path.exists():
        z = np.load(path)
        return z["x"], z["y"]
    xs, ys = [], []
    for c in classes:
        rng = np.random.default_rng([seed, c])
        xs += [render_glyph(CHARSET[c], rng) for _ in range(per_class)]
        ys += [c] * per_class
    x, y = np.stack(xs), np.asarray(ys, dtype=np.int64)
    if cache:
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, x=x, y=y)
        tmp.replace(path)
    return x, y


def digits(seed: int = 0, test_size: float = 0.3) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn digits upsampled to 32x32 (bilinear, /16), stratified split: x_tr, y_tr, x_te, y_te."""
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = torch.from_numpy(d.images.astype(np.float32) / 16.0)[:, None]
    x = torch.nn.functional.interpolate(x, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    x = x[:, 0].numpy()
    xtr, xte, ytr, yte = train_test_split(x, d.target.astype(np.int64), test_size=test_size,
                                          stratify=d.target, random_state=seed)
    return xtr, ytr, xte, yte


def check_images(x, name: str = "x") -> np.ndarray:
    """Images as float32 (N, 32, 32) in [0, 1]: integer images must lie in [0, 255] and are scaled."""
    arr = np.asarray(x)
    if arr.dtype.kind in "iu":
        if arr.size and (arr.min() < 0 or arr.max() > 255):
            raise ValueError(f"{name}: integer images must lie in [0, 255], got [{arr.min()}, {arr.max()}]")
        arr = arr.astype(np.float32) / 255.0
    arr = check_array(arr, name, ndim=3, dtype=np.float32)
    if arr.shape[1:] != (SIZE, SIZE):
        raise ValueError(f"{name} must have shape (N, {SIZE}, {SIZE}), got {arr.shape}")
    return arr
