"""Known additive noise laws: X_i = Z_i + eps_i with eps_i ~ F_i (Gaussian or Laplace).

Conventions (kept from the authors' package):

* ``std`` is always the *standard deviation* of each coordinate of the noise.  For the Laplace
  family the Laplace scale is ``b = std / sqrt(2)`` (so Var = 2 b^2 = std^2) and its characteristic
  function is ``phi(t) = 1 / (1 + std^2 t^2 / 2)`` (ordinary smooth, beta = 2).  The Gaussian family
  has ``phi(t) = exp(-std^2 t^2 / 2)`` (super smooth).
* Homoscedastic noise: ``std`` a float, or an array of shape (1,), (d,), (1, 1) or (1, d).
  Heteroscedastic noise: ``std`` of shape (n, 1) (isotropic per observation) or (n, d) (diagonal).
* Gaussian noise can instead carry full covariances ``cov`` of shape (d, d) or (n, d, d) (d <= 3
  in the spec's scope, any d works here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

FAMILIES = ("gaussian", "laplace")
_SQRT2 = math.sqrt(2.0)


def _as_float_array(value, name: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a float or an array of floats, got bool")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a float or an array of floats, got {type(value).__name__}") from None
    return arr


@dataclass
class NoiseModel:
    """Additive noise with a known law, homoscedastic or heteroscedastic.

    Parameters
    ----------
    family: ``"gaussian"`` or ``"laplace"``.
    std:    noise standard deviation per coordinate (see module docstring for the shapes).
    cov:    Gaussian only, full covariance (d, d) or (n, d, d); replaces ``std``.

    Examples
    --------
    >>> NoiseModel("laplace", std=0.5)                     # homoscedastic
    >>> NoiseModel("gaussian", std=s[:, None])              # heteroscedastic isotropic, s shape (n,)
    """

    family: str = "gaussian"
    std: object = None
    cov: object = None
    _std: np.ndarray = field(init=False, repr=False)
    _chol: np.ndarray | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if not isinstance(self.family, str) or self.family.lower() not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")
        self.family = self.family.lower()
        if self.cov is not None:
            if self.family != "gaussian":
                raise ValueError("cov (full noise covariance) is only supported for family='gaussian'")
            if self.std is not None:
                raise ValueError("give either std or cov, not both")
            cov = _as_float_array(self.cov, "cov")
            if cov.ndim == 2:
                cov = cov[None]
            if cov.ndim != 3 or cov.shape[1] != cov.shape[2]:
                raise ValueError(f"cov must have shape (d, d) or (n, d, d), got {cov.shape}")
            if not np.all(np.isfinite(cov)):
                raise ValueError("cov must be finite")
            if not np.allclose(cov, np.swapaxes(cov, 1, 2), atol=1e-10):
                raise ValueError("cov must be symmetric positive definite (it is not symmetric)")
            try:
                self._chol = np.linalg.cholesky(cov)
            except np.linalg.LinAlgError:
                raise ValueError("cov must be symmetric positive definite (Cholesky failed)") from None
            self.cov = cov
            self._std = np.sqrt(np.einsum("nii->ni", cov))
            return
        if self.std is None:
            raise ValueError("std must be given (noise standard deviation), "
                             "e.g. NoiseModel('gaussian', std=0.5)")
        std = _as_float_array(self.std, "std")
        if std.ndim == 0:
            std = std.reshape(1, 1)
        elif std.ndim == 1:
            std = std.reshape(1, -1)
        if std.ndim != 2:
            raise ValueError(f"std must be a float or have shape (d,), (n, 1) or (n, d); got {std.shape}")
        if not np.all(np.isfinite(std)):
            raise ValueError("std must be finite")
        if np.any(std <= 0):
            raise ValueError(f"std must be strictly positive (noise sd), got min {std.min():.3g}")
        self._std = std

    # ------------------------------------------------------------------ shapes
    @property
    def full_cov(self) -> bool:
        return self._chol is not None

    @property
    def n_rows(self) -> int:
        """1 for homoscedastic noise, n for per-observation noise."""
        return self._std.shape[0]

    @property
    def homoscedastic(self) -> bool:
        return self.n_rows == 1

    def check_data(self, x: np.ndarray, name: str = "noise") -> None:
        """Check this noise fits data ``x`` of shape (n, d); raises ValueError naming ``name``."""
        n, d = x.shape
        if self.n_rows not in (1, n):
            raise ValueError(f"{name}: per-observation noise has {self.n_rows} rows but x has n = {n} rows")
        cols = self._chol.shape[-1] if self.full_cov else self._std.shape[1]
        if cols not in ((d,) if self.full_cov else (1, d)):
            raise ValueError(f"{name}: noise has {cols} columns but x has d = {d} columns "
                             f"(expected std of shape (n, 1) or (n, {d}))")

    def std_matrix(self, n: int, d: int) -> np.ndarray:
        """Per-observation, per-coordinate sd, shape (n, d)."""
        return np.broadcast_to(self._std, (n, d)).copy() if self._std.shape != (n, d) else self._std.copy()

    def cov_matrix(self, n: int, d: int) -> np.ndarray:
        """Per-observation covariance (n, d, d) (Gaussian; for Laplace the covariance of the law)."""
        if self.full_cov:
            return np.broadcast_to(self.cov, (n, d, d)).copy()
        s = self.std_matrix(n, d)
        return np.einsum("ni,ij->nij", s**2, np.eye(d))

    def chol_matrix(self, n: int, d: int) -> np.ndarray:
        if self.full_cov:
            return np.broadcast_to(self._chol, (n, d, d)).copy()
        s = self.std_matrix(n, d)
        return np.einsum("ni,ij->nij", s, np.eye(d))

    def subset(self, idx) -> "NoiseModel":
        """The noise of observations ``idx`` (homoscedastic noise is returned unchanged)."""
        if self.homoscedastic:
            return self
        if self.full_cov:
            return NoiseModel("gaussian", cov=self.cov[idx])
        return NoiseModel(self.family, std=self._std[idx])

    # ------------------------------------------------------------------ sampling
    def sample(self, n: int, d: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
        """One noise draw per observation, shape (n, d) (numpy)."""
        rng = np.random.default_rng(rng)
        if self.family == "gaussian":
            u = rng.standard_normal((n, d))
            return np.einsum("nij,nj->ni", self.chol_matrix(n, d), u)
        return self.std_matrix(n, d) / _SQRT2 * rng.laplace(0.0, 1.0, (n, d))

    # ------------------------------------------------------------------ densities
    def log_pdf(self, r: np.ndarray) -> np.ndarray:
        """log f_{eps_i}(r_i) for residuals r of shape (n, d) (or (n, M, d), noise of row i)."""
        r = np.asarray(r, dtype=np.float64)
        squeeze = r.ndim == 2
        if squeeze:
            r = r[:, None, :]
        n, _, d = r.shape
        if self.family == "laplace":
            b = self.std_matrix(n, d)[:, None, :] / _SQRT2
            out = np.sum(-np.log(2 * b) - np.abs(r) / b, axis=-1)
        else:
            chol = self.chol_matrix(n, d)
            # solve L y = r for each row: log N(r; 0, L L^T)
            y = np.linalg.solve(chol[:, None], r[..., None])[..., 0] if self.full_cov else \
                r / np.einsum("nii->ni", chol)[:, None, :]
            logdet = np.sum(np.log(np.einsum("nii->ni", chol)), axis=-1)[:, None]
            out = -0.5 * np.sum(y**2, -1) - logdet - 0.5 * d * math.log(2 * math.pi)
        return out[:, 0] if squeeze else out

    def char_fn(self, t: np.ndarray) -> np.ndarray:
        """1-D characteristic function phi_{eps_i}(t), shape (n_rows, len(t)) (real, symmetric laws)."""
        if self.full_cov or self._std.shape[1] != 1:
            raise ValueError("char_fn is defined for 1-D noise (std of shape (n, 1))")
        t = np.asarray(t, dtype=np.float64)[None, :]
        s = self._std[:, :1]
        if self.family == "gaussian":
            return np.exp(-0.5 * (s * t) ** 2)
        return 1.0 / (1.0 + 0.5 * (s * t) ** 2)


# ---------------------------------------------------------------------- torch helpers (training)
def torch_noise(family: str, std: torch.Tensor, generator: torch.Generator | None = None,
                chol: torch.Tensor | None = None) -> torch.Tensor:
    """A noise draw with per-row sd ``std`` (b, d) — Laplace scale std/sqrt(2) — or Cholesky ``chol``.

    Laplace(0, 1) is drawn as the difference of two Exp(1) variables (no log(0) at the edges).
    """
    if family == "gaussian":
        u = torch.randn(std.shape, generator=generator, dtype=std.dtype, device=std.device)
        if chol is not None:
            return torch.einsum("bij,bj->bi", chol, u)
        return std * u
    e1 = torch.empty(std.shape, dtype=std.dtype, device=std.device).exponential_(generator=generator)
    e2 = torch.empty(std.shape, dtype=std.dtype, device=std.device).exponential_(generator=generator)
    return std / _SQRT2 * (e1 - e2)


def torch_log_lik(family: str, r: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """log f_eps(r) summed over the last axis, diagonal noise with sd ``std`` broadcast to r."""
    if family == "gaussian":
        return torch.sum(-0.5 * (r / std) ** 2 - torch.log(std) - 0.5 * math.log(2 * math.pi), -1)
    b = std / _SQRT2
    return torch.sum(-torch.log(2 * b) - r.abs() / b, -1)
