"""The spec's data generators (seeded local RNGs, no download) and evaluation metrics.

1-D latents (closed-form densities for the ISE):
* ``laplace_mix_1d``: Z ~ 0.6 Laplace(3, sd 0.8) + 0.4 Laplace(-2, sd 1.0)   (Laplace scale = sd/sqrt 2)
* ``gauss_mix_1d``:   Z ~ 0.3 N(-2, 0.5^2) + 0.7 N(1.5, 1)
2-D latents: ``moons``, ``circle``, ``checkerboard``.

Metrics: ISE and W1 on the grid [-8, 10] (2000 points, trapezoid), sliced W1 x sqrt(d) and
Gaussian-kernel MMD (median bandwidth) in 2-D, denoising MSE and regret vs the oracle Bayes rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from neurips26.deconv.loss import mmd2_unbiased
from neurips26.deconv.noise import NoiseModel

SQRT2 = math.sqrt(2.0)
ISE_GRID = np.linspace(-8.0, 10.0, 2000)


@dataclass(frozen=True)
class Mixture1D:
    """A 1-D mixture of Laplace or Gaussian components given by (weight, mean, sd)."""

    family: str
    weights: tuple
    means: tuple
    sds: tuple

    def pdf(self, z) -> np.ndarray:
        z = np.asarray(z, dtype=np.float64)
        out = np.zeros_like(z)
        for w, m, s in zip(self.weights, self.means, self.sds):
            if self.family == "laplace":
                b = s / SQRT2
                out += w * np.exp(-np.abs(z - m) / b) / (2 * b)
            else:
                out += w * np.exp(-0.5 * ((z - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))
        return out

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        k = rng.choice(len(self.weights), size=n, p=np.asarray(self.weights))
        m, s = np.asarray(self.means)[k], np.asarray(self.sds)[k]
        if self.family == "laplace":
            return m + s / SQRT2 * rng.laplace(0.0, 1.0, n)
        return m + s * rng.standard_normal(n)


LAPLACE_MIX = Mixture1D("laplace", (0.6, 0.4), (3.0, -2.0), (0.8, 1.0))
GAUSS_MIX = Mixture1D("gaussian", (0.3, 0.7), (-2.0, 1.5), (0.5, 1.0))
LATENTS_1D = {"laplace_mix_1d": LAPLACE_MIX, "gauss_mix_1d": GAUSS_MIX}


def sample_latent_2d(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """2-D latents: moons (radius 1, centres (0,0) and (1,0.5), +N(0,0.05^2)), circle (radius 2),
    checkerboard (8 unit squares of a centred 4x4 board)."""
    if name == "moons":
        k = rng.integers(2, size=n)
        t = rng.uniform(0, math.pi, n)
        upper = np.stack([np.cos(t), np.sin(t)], 1)
        lower = np.stack([1 - np.cos(t), 0.5 - np.sin(t)], 1)
        z = np.where(k[:, None] == 0, upper, lower)
        return z + 0.05 * rng.standard_normal((n, 2))
    if name == "circle":
        t = rng.uniform(0, 2 * math.pi, n)
        return 2.0 * np.stack([np.cos(t), np.sin(t)], 1)
    if name == "checkerboard":
        cells = np.array([(i, j) for i in range(4) for j in range(4) if (i + j) % 2 == 0], dtype=float)
        c = cells[rng.integers(len(cells), size=n)]
        return c + rng.uniform(0, 1, (n, 2)) - 2.0
    raise ValueError(f"unknown 2-D dataset {name!r}; expected moons, circle or checkerboard")


@dataclass
class Dataset:
    z: np.ndarray          # clean latents (n, d)
    x: np.ndarray          # observations (n, d)
    noise: NoiseModel
    name: str
    latent: Mixture1D | None = None   # 1-D only: the true latent law


def make_dataset(name: str, n: int, noise_family: str = "laplace", hetero: bool = True,
                 noise_sd: float = 0.5, sd_range: tuple[float, float] | None = None, seed: int = 0,
                 outlier_fraction: float = 0.0) -> Dataset:
    """Draw (z, x = z + eps) from one of the spec's generators with its noise.

    1-D: heteroscedastic sd ~ U(0.5, 1.0) (default) or homoscedastic ``noise_sd``.
    2-D: Gaussian isotropic per-point sd ~ U(0.2, 0.6) (circle: U(0.5, 1.0)).
    ``outlier_fraction`` (off by default): that fraction of x replaced by uniform draws over 3x the range.
    """
    rng = np.random.default_rng(seed)
    if name in LATENTS_1D:
        lat = LATENTS_1D[name]
        z = lat.sample(n, rng)[:, None]
        lo, hi = sd_range if sd_range is not None else (0.5, 1.0)
        std = rng.uniform(lo, hi, (n, 1)) if hetero else noise_sd
    else:
        lat = None
        z = sample_latent_2d(name, n, rng)
        lo, hi = sd_range if sd_range is not None else ((0.5, 1.0) if name == "circle" else (0.2, 0.6))
        std = rng.uniform(lo, hi, (n, 1)) if hetero else noise_sd
        noise_family = "gaussian" if noise_family is None else noise_family
    noise = NoiseModel(noise_family, std=std)
    x = z + noise.sample(n, z.shape[1], rng)
    if outlier_fraction > 0:
        m = int(round(outlier_fraction * n))
        idx = rng.choice(n, m, replace=False)
        span = x.max(0) - x.min(0)
        x[idx] = rng.uniform(x.min(0) - span, x.max(0) + span, (m, x.shape[1]))
    return Dataset(z, x, noise, name, lat)


# ---------------------------------------------------------------------------- metrics
def ise(pdf_est: np.ndarray, pdf_true: np.ndarray, grid: np.ndarray = ISE_GRID) -> float:
    """Integrated squared error int (p_hat - p)^2 on the grid (trapezoid)."""
    return float(np.trapezoid((np.asarray(pdf_est) - pdf_true) ** 2, grid))


def cdf_from_pdf(pdf: np.ndarray, grid: np.ndarray = ISE_GRID) -> np.ndarray:
    pdf = np.maximum(np.asarray(pdf, dtype=np.float64), 0.0)
    c = np.concatenate([[0.0], np.cumsum(0.5 * (pdf[1:] + pdf[:-1]) * np.diff(grid))])
    return c / c[-1] if c[-1] > 0 else c


def cdf_from_atoms(atoms: np.ndarray, weights: np.ndarray, grid: np.ndarray = ISE_GRID) -> np.ndarray:
    order = np.argsort(atoms)
    a, w = np.asarray(atoms)[order], np.asarray(weights)[order]
    cw = np.concatenate([[0.0], np.cumsum(w)])
    return cw[np.searchsorted(a, grid, side="right")]


def w1_from_cdfs(F_est: np.ndarray, F_true: np.ndarray, grid: np.ndarray = ISE_GRID) -> float:
    """W1 = int |F_hat - F| on the grid."""
    return float(np.trapezoid(np.abs(F_est - F_true), grid))


def sliced_w1(a: np.ndarray, b: np.ndarray, n_proj: int = 1000, seed: int = 0) -> float:
    """Sliced Wasserstein-1 x sqrt(d) between equal-size samples (seeded projections)."""
    rng = np.random.default_rng(seed)
    d = a.shape[1]
    m = min(len(a), len(b))
    a, b = a[:m], b[:m]
    th = rng.standard_normal((n_proj, d))
    th /= np.linalg.norm(th, axis=1, keepdims=True)
    pa, pb = np.sort(a @ th.T, 0), np.sort(b @ th.T, 0)
    return float(np.mean(np.abs(pa - pb)) * math.sqrt(d))


def mmd_gaussian(a: np.ndarray, b: np.ndarray, max_n: int = 2000, seed: int = 0) -> float:
    """Unbiased Gaussian-kernel MMD^2 with the median-distance bandwidth (subsample to max_n)."""
    import torch

    rng = np.random.default_rng(seed)
    a = a[rng.choice(len(a), min(len(a), max_n), replace=False)]
    b = b[rng.choice(len(b), min(len(b), max_n), replace=False)]
    pool = torch.as_tensor(np.concatenate([a, b]))
    h = float(torch.median(torch.pdist(pool)))
    return float(mmd2_unbiased(torch.as_tensor(a), torch.as_tensor(b), [h], "gaussian"))


def oracle_posterior_mean_1d(x: np.ndarray, noise: NoiseModel, latent: Mixture1D,
                             grid: np.ndarray | None = None) -> np.ndarray:
    """Bayes rule E[Z | X = x_i] under the TRUE prior, by quadrature on a fine grid."""
    grid = np.linspace(-15, 17, 6401) if grid is None else grid
    x = np.asarray(x, dtype=np.float64).reshape(-1, 1)
    prior = latent.pdf(grid)
    out = np.empty(len(x))
    for s in range(0, len(x), 512):
        xs = x[s:s + 512]
        rows = noise if noise.homoscedastic else noise.subset(np.arange(s, s + len(xs)))
        if rows.homoscedastic:
            rows = NoiseModel(noise.family, std=np.broadcast_to(noise.std_matrix(1, 1), (len(xs), 1)))
        ll = rows.log_pdf(xs[:, None, :] - grid[None, :, None])            # (m, G)
        w = np.exp(ll - ll.max(1, keepdims=True)) * prior[None]
        out[s:s + len(xs)] = (w @ grid) / w.sum(1)
    return out
