"""Input checks at the API boundary (ValueError/TypeError naming the argument)."""

from __future__ import annotations

import numpy as np
import torch

from neurips26.deconv.noise import NoiseModel


def check_x(x, name: str = "x", min_rows: int = 2) -> np.ndarray:
    """x as a float64 array of shape (n, d), finite, n >= min_rows."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be an array of shape (n, d), got {type(x).__name__}")
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a numeric array of shape (n, d), got {type(x).__name__}") from None
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D of shape (n, d), got shape {arr.shape} "
                         f"(use {name}.reshape(-1, 1) for 1-D data)")
    if arr.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows, got n = {arr.shape[0]}")
    if arr.shape[1] < 1:
        raise ValueError(f"{name} must have at least one column")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf values")
    return arr


def check_noise(noise, x_arr: np.ndarray, x_raw=None, name: str = "noise") -> NoiseModel:
    """A NoiseModel that fits x (n, d); a float is read as homoscedastic Gaussian sd."""
    if isinstance(noise, (int, float)) and not isinstance(noise, bool):
        noise = NoiseModel("gaussian", std=float(noise))
    if not isinstance(noise, NoiseModel):
        raise TypeError(f"{name} must be a neurips26.deconv.NoiseModel (or a float sd for Gaussian noise), "
                        f"got {type(noise).__name__}")
    src = noise.cov if noise.cov is not None and not isinstance(noise.cov, np.ndarray) else noise.std
    xd = getattr(x_raw, "dtype", None)
    nd = getattr(src, "dtype", None)
    if isinstance(x_raw, torch.Tensor) and isinstance(src, torch.Tensor) and xd != nd:
        raise TypeError(f"{name}: dtype {nd} does not match x dtype {xd}")
    noise.check_data(x_arr, name)
    return noise


def check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_positive(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a float, got {type(value).__name__}")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value}")
    return float(value)
