"""The head camera: a pinhole with intrinsics K and extrinsics T_wc, and its perturbations.

Conventions (OpenCV): camera x right, y down, z forward; pixel coordinates are continuous with the
image's left/top edge at 0, so pixel (i, j) has its centre at (i + 0.5, j + 0.5).

    f = (W / 2) / tan(fov / 2),   K = [[f, 0, W/2], [0, f, H/2], [0, 0, 1]]
    project:      c = R^T (P - eye),  (u, v) = (f c_x / c_z + W/2, f c_y / c_z + H/2),  z-depth = c_z
    backproject:  P = eye + R (d K^-1 [u, v, 1]^T)

The 0-99 anchor grid of the plan text: ``U = floor(100 u / W)``; back to pixels ``(U + 0.5) W / 100``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from neurips26.harness.validation import check_array, check_scalar

DEFAULT_EYE = (0.0, 0.0, 0.60)
DEFAULT_TARGET = (0.45, 0.0, 0.0)
DEFAULT_FOV_DEG = 60.0
GRID = 100  # the anchor grid is 0..GRID-1 in each image axis


class SingularIntrinsicsError(ValueError):
    """Intrinsics that cannot be inverted (zero focal length, NaN)."""


@dataclass(frozen=True)
class CameraShift:
    """A perturbation of the head pose: azimuth and elevation (degrees) about the target, distance factor."""

    azimuth: float = 0.0
    elevation: float = 0.0
    distance: float = 1.0

    def __post_init__(self) -> None:
        check_scalar(self.azimuth, "azimuth", float, min=-180, max=180)
        check_scalar(self.elevation, "elevation", float, min=-80, max=80)
        check_scalar(self.distance, "distance", float, min=0.1, max=10)


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """The rotation R_wc whose columns are the camera's right, down and forward axes in world coordinates."""
    eye, target = np.asarray(eye, float), np.asarray(target, float)
    fwd = target - eye
    n = np.linalg.norm(fwd)
    if n == 0:
        raise ValueError("eye and target must differ")
    fwd /= n
    right = np.cross(fwd, np.asarray(up, float))
    if np.linalg.norm(right) < 1e-9:  # looking straight down: pick +y as "up" in the image
        right = np.cross(fwd, np.array([1.0, 0.0, 0.0]))
    right /= np.linalg.norm(right)
    down = np.cross(fwd, right)
    return np.stack([right, down, fwd], axis=1)


def intrinsics(width: int, height: int, fov_deg: float = DEFAULT_FOV_DEG) -> np.ndarray:
    f = (width / 2) / math.tan(math.radians(fov_deg) / 2)
    return np.array([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]])


def check_intrinsics(K) -> np.ndarray:
    K = check_array(K, "K", shape=(3, 3), dtype=float, finite=False)
    if not np.all(np.isfinite(K)) or abs(np.linalg.det(K)) < 1e-12:
        raise SingularIntrinsicsError(f"K must be finite and invertible, got det {np.linalg.det(K)!r}")
    return K


class Camera:
    """A pinhole head camera (no wrist camera): ``K`` and ``T_wc`` (4x4, camera -> world)."""

    def __init__(self, width: int = 64, height: int | None = None, fov_deg: float = DEFAULT_FOV_DEG,
                 eye=DEFAULT_EYE, target=DEFAULT_TARGET, shift: CameraShift | None = None, K=None):
        self.width = check_scalar(width, "width", int, min=8, max=1024)
        self.height = check_scalar(height if height is not None else width, "height", int, min=8, max=1024)
        fov_deg = check_scalar(fov_deg, "fov_deg", float, min=1, max=170, inclusive="neither")
        eye = check_array(eye, "eye", shape=(3,), dtype=float)
        target = check_array(target, "target", shape=(3,), dtype=float)
        self.shift = shift or CameraShift()
        if not isinstance(self.shift, CameraShift):
            raise TypeError(f"shift must be a CameraShift, got {type(shift).__name__}")
        self.base_eye, self.target = eye.copy(), target.copy()
        self.eye = shifted_eye(eye, target, self.shift)
        self.K = check_intrinsics(K if K is not None else intrinsics(self.width, self.height, fov_deg))
        self.K_inv = np.linalg.inv(self.K)
        self.R = look_at(self.eye, target)
        self.T_wc = np.eye(4)
        self.T_wc[:3, :3], self.T_wc[:3, 3] = self.R, self.eye

    def with_shift(self, shift: CameraShift) -> "Camera":
        return Camera(self.width, self.height, eye=self.base_eye, target=self.target, shift=shift, K=self.K)

    def project(self, P) -> tuple[np.ndarray, np.ndarray]:
        """World points (..., 3) -> continuous pixel coordinates (..., 2) and z-depth (...)."""
        P = np.asarray(P, float)
        c = (P - self.eye) @ self.R
        z = c[..., 2]
        uv = np.stack([self.K[0, 0] * c[..., 0] / z + self.K[0, 2],
                       self.K[1, 1] * c[..., 1] / z + self.K[1, 2]], axis=-1)
        return uv, z

    def backproject(self, uv, depth) -> np.ndarray:
        """Pixel coordinates (..., 2) and z-depth (...) -> world points (..., 3): eye + R d K^-1 [u, v, 1]."""
        uv, d = np.asarray(uv, float), np.asarray(depth, float)
        h = np.concatenate([uv, np.ones(uv.shape[:-1] + (1,))], axis=-1)
        c = (h @ self.K_inv.T) * d[..., None]
        return c @ self.R.T + self.eye

    def ray_dirs(self) -> np.ndarray:
        """World directions (H, W, 3) through every pixel centre, scaled to camera z = 1 (t = z-depth).

        Memoised (a camera never moves; ``with_shift`` makes a new one); the array is read-only."""
        if getattr(self, "_rays", None) is not None:
            return self._rays
        u = np.arange(self.width) + 0.5
        v = np.arange(self.height) + 0.5
        uu, vv = np.meshgrid(u, v)
        h = np.stack([uu, vv, np.ones_like(uu)], axis=-1)
        self._rays = (h @ self.K_inv.T) @ self.R.T
        self._rays.flags.writeable = False
        return self._rays

    # --- the 0-99 anchor grid of the plan text
    def to_grid(self, uv) -> tuple[int, int]:
        uv = np.asarray(uv, float)
        return int(math.floor(GRID * uv[0] / self.width)), int(math.floor(GRID * uv[1] / self.height))

    def from_grid(self, U: int, V: int) -> np.ndarray:
        for name, x in (("U", U), ("V", V)):
            check_scalar(x, name, int, min=0, max=GRID - 1)
        return np.array([(U + 0.5) * self.width / GRID, (V + 0.5) * self.height / GRID])


def shifted_eye(eye: np.ndarray, target: np.ndarray, shift: CameraShift) -> np.ndarray:
    """Rotate the eye about the target's vertical axis (azimuth), tilt it (elevation), scale its distance."""
    v = eye - target
    r = np.linalg.norm(v)
    az = math.atan2(v[1], v[0]) + math.radians(shift.azimuth)
    el = math.asin(np.clip(v[2] / r, -1, 1)) + math.radians(shift.elevation)
    el = float(np.clip(el, math.radians(5), math.radians(89)))
    r = r * shift.distance
    return target + r * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
