"""Shape and noise-model checks at the API boundary (ValueError/TypeError naming the argument); scalar
arguments are checked with the harness vocabulary (``neurips26.harness.validation.check_scalar``)."""

from __future__ import annotations

import numbers

import numpy as np
import torch

from neurips26.deconv.noise import NoiseModel
from neurips26.harness.validation import check_array, check_scalar


def check_x(x, name: str = "x", min_rows: int = 2) -> np.ndarray:
    """x as a float64 array of shape (n, d), finite, n >= min_rows."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be an array of shape (n, d), got {type(x).__name__}")
    arr = check_array(x, name, dtype=float, finite=False)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D of shape (n, d), got shape {arr.shape} "
                         f"(use {name}.reshape(-1, 1) for 1-D data)")
    if arr.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows (samples), got n_samples = {arr.shape[0]}")
    if arr.shape[1] < 1:
        raise ValueError(f"{name} must have at least one column: found 0 feature(s) (shape={arr.shape}) "
                         "while a minimum of 1 is required.")
    return check_array(arr, name, finite=True)


def check_noise(noise, x_arr: np.ndarray, x_raw=None, name: str = "noise") -> NoiseModel:
    """A NoiseModel that fits x (n, d); a float is read as homoscedastic Gaussian sd."""
    if isinstance(noise, numbers.Real) and not isinstance(noise, (bool, np.bool_)):
        noise = NoiseModel("gaussian", std=check_scalar(noise, name, float, min=0, inclusive="neither"))
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


_NOISE_CHOICES = ("NoiseModel('gaussian', std=...)", "NoiseModel('laplace', std=...)",
                  "NoiseModel('gaussian', cov=...)")


def _check_typed_noise(noise, name: str = "noise") -> NoiseModel:
    """The noise model must be a NoiseModel: a bare float is ambiguous (which family?) and an error."""
    if noise is None:
        raise ValueError(f"{name} is required: fit(X, noise=NoiseModel(...)) with one of "
                         f"{', '.join(_NOISE_CHOICES)} (or set it in the constructor)")
    if not isinstance(noise, NoiseModel):
        got = f"{noise!r}" if isinstance(noise, (numbers.Real, str)) else type(noise).__name__
        raise TypeError(f"{name} must be a neurips26.deconv.NoiseModel, one of {', '.join(_NOISE_CHOICES)} "
                        f"(a bare float does not say which family); got {got}")
    return noise


def _dense_2d(X, name: str = "X"):
    """Reject sparse and complex input (scikit-learn conventions), then the shared shape/finite checks."""
    if isinstance(X, torch.Tensor):
        return X
    if hasattr(X, "toarray") or type(X).__module__.startswith("scipy.sparse"):
        raise TypeError(f"{name}: sparse input is not supported, pass a dense array ({name}.toarray())")
    arr = np.asarray(X) if not isinstance(X, (str, bytes)) and X is not None else X
    if isinstance(arr, np.ndarray) and arr.dtype == object:
        try:
            arr = X = arr.astype(np.float64)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{name} must be numeric: {e}") from None
    if isinstance(arr, np.ndarray) and np.iscomplexobj(arr):
        raise ValueError(f"{name}: Complex data not supported")
    if isinstance(arr, np.ndarray) and arr.dtype.kind in "fc" and arr.size and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (it contains NaN or inf)")
    return X
