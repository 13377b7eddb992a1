"""Data plumbing: wet-cell node states, forcing (deterministic wind + season, never the noise),
static features, per-channel and one-step-difference standardisation, xarray/zarr export,
pseudo-observations. Spec §1, §8."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neurips26.harness.validation import check_array, check_scalar
from neurips26.njord.simulator import CHANNELS


def to_nodes(fields: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(..., n, n, C) grid fields -> (..., N, C) wet-cell node states (land values are dropped)."""
    mask = check_array(mask, "mask", ndim=2, dtype=bool)
    if tuple(fields.shape[-3:-1]) != mask.shape:
        raise ValueError(f"mask shape {mask.shape} != grid shape {tuple(fields.shape[-3:-1])}")
    return fields[..., mask, :]


def to_grid(nodes: np.ndarray, mask: np.ndarray, fill: float = np.nan) -> np.ndarray:
    out = np.full(nodes.shape[:-2] + mask.shape + nodes.shape[-1:], fill, dtype=float)
    out[..., mask, :] = nodes
    return out


def forcing(mask: np.ndarray, days: np.ndarray) -> np.ndarray:
    """(T, N, 3): normalised deterministic wind ``-cos(2 pi y/L)(1 + 0.2 sin season)``, sin/cos season."""
    n = mask.shape[0]
    y = (np.nonzero(mask)[0] + 0.5) / n
    s = np.sin(2 * np.pi * days / 365.0)[:, None]
    c = np.cos(2 * np.pi * days / 365.0)[:, None]
    wind = -np.cos(2 * np.pi * y)[None] * (1 + 0.2 * s)
    return np.stack([wind, np.broadcast_to(s, wind.shape), np.broadcast_to(c, wind.shape)], -1).astype(
        np.float32
    )


def static_features(mask: np.ndarray) -> np.ndarray:
    """(N, 3): x, y in [0, 1] and the fraction of wet 8-neighbours (a coast indicator)."""
    from scipy import ndimage

    n = mask.shape[0]
    j, i = np.nonzero(mask)
    nb = ndimage.convolve(mask.astype(float), np.ones((3, 3)), mode="constant")[mask] - 1
    return np.stack([(i + 0.5) / n, (j + 0.5) / n, nb / 8.0], 1).astype(np.float32)


@dataclass
class Normaliser:
    mean: np.ndarray
    std: np.ndarray
    diff_mean: np.ndarray  # of one-step differences, in standardised units
    diff_std: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray) -> "Normaliser":
        """From training states (traj, T, N, C)."""
        mean = x.mean((0, 1, 2))
        std = x.std((0, 1, 2)) + 1e-12
        z = (x - mean) / std
        d = np.diff(z, axis=1)
        return cls(mean, std, d.mean((0, 1, 2)), d.std((0, 1, 2)) + 1e-12)

    def __call__(self, x):
        return ((x - self.mean) / self.std).astype(np.float32)

    def inverse(self, z):
        return z * self.std + self.mean


@dataclass
class Dataset:
    """Node states (traj, T, N, C) standardised, forcing (T, N, d_f), static (N, d_s), split indices."""

    x: np.ndarray
    forcing: np.ndarray
    static: np.ndarray
    mask: np.ndarray
    norm: Normaliser
    train: range
    val: range
    test: range
    days: np.ndarray


def build_dataset(raw: dict, split=(0.7, 0.1, 0.2)) -> Dataset:
    fields, mask = raw["fields"], raw["mask"].astype(bool)
    nodes = to_nodes(fields.astype(np.float64), mask)
    if not np.isfinite(nodes).all():
        raise ValueError("fields have NaN/inf values on wet cells")
    T = nodes.shape[1]
    a, b = int(round(split[0] * T)), int(round((split[0] + split[1]) * T))
    norm = Normaliser.fit(nodes[:, :a])
    days = float(raw["day0"]) + np.arange(T)
    return Dataset(
        norm(nodes),
        forcing(mask, days),
        static_features(mask),
        mask,
        norm,
        range(0, a),
        range(a, b),
        range(b, T),
        days,
    )


def to_xarray(ds: Dataset):
    """The dataset as an ``xarray.Dataset`` on the full grid (NaN on land), OceanBench-like names."""
    import xarray as xr

    grid = to_grid(ds.norm.inverse(ds.x), ds.mask)
    n = ds.mask.shape[0]
    coords = dict(trajectory=np.arange(grid.shape[0]), time=ds.days, y=np.arange(n), x=np.arange(n))
    return xr.Dataset(
        {c: (("trajectory", "time", "y", "x"), grid[..., k]) for k, c in enumerate(CHANNELS)}
        | {"mask": (("y", "x"), ds.mask)},
        coords=coords,
    )


def to_zarr(ds: Dataset, path) -> None:
    to_xarray(ds).to_zarr(str(path), mode="w")


def from_xarray(xds, channels=CHANNELS) -> dict:
    """Adapter for a local OceanBench-shaped xarray dataset (time, y, x per variable; never downloaded):
    returns the ``raw`` dict that ``build_dataset`` takes (mask = finite everywhere in time)."""
    arr = np.stack([np.asarray(xds[c]) for c in channels], -1)
    if arr.ndim == 4:
        arr = arr[None]
    mask = np.isfinite(arr).all(axis=(0, 1, 4))
    return dict(fields=np.nan_to_num(arr), mask=mask, day0=np.array(0.0))


def pseudo_observations(
    truth: np.ndarray,
    clim_std: np.ndarray,
    frac: float = 0.05,
    noise: float = 0.1,
    channels=(0, 3),
    seed: int = 0,
):
    """EMULATION of class-4 scoring: per day a seeded ``frac`` of wet cells, channels ``channels``
    (SSH and T) observed from the simulator truth plus Gaussian noise of ``noise`` x climatological std.
    ``truth`` (T, N, C) -> (index (T, k), values (T, k, len(channels)))."""
    frac = check_scalar(frac, "frac", float, min=0.0, max=1.0, inclusive="right")
    rng = np.random.default_rng(seed)
    T, N, _ = truth.shape
    k = max(1, int(round(frac * N)))
    idx = np.stack([rng.choice(N, k, replace=False) for _ in range(T)])
    ch = list(channels)
    vals = truth[np.arange(T)[:, None], idx][..., ch]
    vals = vals + noise * np.asarray(clim_std)[ch] * rng.standard_normal(vals.shape)
    return idx, vals
