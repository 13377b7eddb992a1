"""Objects of the tabletop and the ray-cast renderer (RGB with Lambert shading, metric z-depth, segmentation).

World: table plane z = 0 (a finite table x in [TABLE_X], y in [TABLE_Y]); objects stand on it:
cube 4 cm (yawed box), cylinder r 2 cm x h 5 cm, bowl r 6 cm x h 3 cm and plate r 7 cm x h 1 cm
(containers, drawn as solid vertical cylinders; what is inside rests on their floor). The gripper is a
grey box above the end effector. Every pixel-centre ray ``eye + t dir`` (``t`` = z-depth) is intersected
with the plane, the boxes (slabs in the box frame) and the cylinders (side quadric + top cap); the
nearest hit gives depth, segmentation id and the shaded colour. Pixels that hit nothing: depth 0, id -1.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from neurips26.notvla.camera import Camera

KINDS = ("cube", "cylinder", "bowl", "plate")
CONTAINERS = ("bowl", "plate")
GRASPABLE = ("cube", "cylinder")
SIZE = {"cube": (0.02, 0.04), "cylinder": (0.02, 0.05), "bowl": (0.06, 0.03), "plate": (0.07, 0.01)}
FLOOR = {"bowl": 0.005, "plate": 0.01}   # where an object put into the container rests
COLOURS = {"red": (0.85, 0.1, 0.1), "green": (0.1, 0.7, 0.2), "blue": (0.15, 0.25, 0.9),
           "yellow": (0.95, 0.85, 0.1), "purple": (0.55, 0.15, 0.7), "orange": (1.0, 0.5, 0.05),
           "white": (0.95, 0.95, 0.95), "black": (0.08, 0.08, 0.08)}
TABLE_RGB = (0.62, 0.5, 0.38)
BACKGROUND_RGB = (0.35, 0.45, 0.55)
GRIPPER_RGB = (0.5, 0.5, 0.5)
TABLE_X, TABLE_Y = (-0.1, 0.9), (-0.5, 0.5)
TABLE_ID, NONE_ID, GRIPPER_ID = 0, -1, 100
GRIPPER_HALF = (0.012, 0.012, 0.02)  # a box whose bottom face sits 1 cm above the end effector
LIGHT = np.array([0.3, -0.2, 1.0]) / np.linalg.norm([0.3, -0.2, 1.0])


@dataclass
class Obj:
    """One object: kind, colour, base centre ``pos`` (x, y, z of its bottom), yaw (cubes), id >= 1."""

    id: int
    kind: str
    colour: str
    pos: np.ndarray
    yaw: float = 0.0
    support: int = 0               # id of what it rests on (0 = table)
    attached: bool = False
    start_z: float = field(default=0.0)

    @property
    def radius(self) -> float:
        return SIZE[self.kind][0]

    @property
    def height(self) -> float:
        return SIZE[self.kind][1]

    @property
    def top(self) -> np.ndarray:
        return self.pos + np.array([0.0, 0.0, self.height])

    @property
    def name(self) -> str:
        return f"{self.colour} {self.kind}"


def _hit_plane(eye, d, z, xlim, ylim):
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (z - eye[2]) / d[..., 2]
    p = eye + t[..., None] * d
    ok = ((t > 0) & (p[..., 0] >= xlim[0]) & (p[..., 0] <= xlim[1])
          & (p[..., 1] >= ylim[0]) & (p[..., 1] <= ylim[1]))
    return np.where(ok, t, np.inf)


def _hit_box(eye, d, centre, half, yaw):
    """Slab intersection with a box yawed about z; returns t and the outward normal at the hit."""
    c, s = np.cos(yaw), np.sin(yaw)
    Rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    o = (eye - centre) @ Rz          # to the box frame: R^T x, written as x @ R
    dl = d @ Rz
    half = np.asarray(half)
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = (-half - o) / dl
        t2 = (half - o) / dl
    tmin = np.minimum(t1, t2)
    tmax = np.maximum(t1, t2)
    t_near = np.max(tmin, axis=-1)
    t_far = np.min(tmax, axis=-1)
    ok = (t_near <= t_far) & (t_near > 0)
    axis = np.argmax(tmin, axis=-1)
    sign = -np.sign(np.take_along_axis(dl, axis[..., None], -1)[..., 0])
    n_local = np.zeros(d.shape)
    np.put_along_axis(n_local, axis[..., None], sign[..., None], -1)
    return np.where(ok, t_near, np.inf), n_local @ Rz.T


def _hit_cylinder(eye, d, base, r, h):
    """A vertical solid cylinder: side (quadric in x, y) and top cap; returns t and the normal."""
    ox, oy = eye[0] - base[0], eye[1] - base[1]
    a = d[..., 0] ** 2 + d[..., 1] ** 2
    b = 2 * (ox * d[..., 0] + oy * d[..., 1])
    cc = ox * ox + oy * oy - r * r
    disc = b * b - 4 * a * cc
    with np.errstate(invalid="ignore", divide="ignore"):
        ts = (-b - np.sqrt(disc)) / (2 * a)
    zs = eye[2] + ts * d[..., 2]
    side_ok = (disc >= 0) & (ts > 0) & (zs >= base[2]) & (zs <= base[2] + h)
    t_side = np.where(side_ok, ts, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        tt = (base[2] + h - eye[2]) / d[..., 2]
    px, py = ox + tt * d[..., 0], oy + tt * d[..., 1]
    top_ok = (tt > 0) & (px * px + py * py <= r * r)
    t_top = np.where(top_ok, tt, np.inf)
    t = np.minimum(t_side, t_top)
    n = np.zeros(d.shape)
    n[..., 2] = 1.0
    side = t_side < t_top
    sx, sy = ox + ts * d[..., 0], oy + ts * d[..., 1]
    n[side, 0], n[side, 1], n[side, 2] = sx[side] / r, sy[side] / r, 0.0
    return t, n


_TABLE_HITS: "weakref.WeakKeyDictionary[Camera, np.ndarray]" = weakref.WeakKeyDictionary()


def _table_hit(camera: Camera, d: np.ndarray, ray_dirs) -> np.ndarray:
    """The table plane's hit distances for the camera's own rays (memoised per camera: it never moves)."""
    if ray_dirs is not None:
        return _hit_plane(camera.eye, d, 0.0, TABLE_X, TABLE_Y)
    t = _TABLE_HITS.get(camera)
    if t is None:
        t = _TABLE_HITS[camera] = _hit_plane(camera.eye, d, 0.0, TABLE_X, TABLE_Y)
    return t.copy()


def _window(camera: Camera, lo, hi, H: int, W: int):
    """The pixel rows/columns whose centres can see the axis-aligned box [lo, hi] (a conservative bound).

    The box is convex and, when all its corners are in front of the camera, its image lies inside the
    convex hull of the projected corners, hence inside their bounding rectangle (1 pixel margin).
    Returns None for the whole image (a corner behind the camera), or slices (possibly empty).
    """
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    uv, z = camera.project(corners)
    if np.any(z <= 1e-6):
        return None
    u0 = max(int(np.floor(uv[:, 0].min() - 0.5)) - 1, 0)
    u1 = min(int(np.ceil(uv[:, 0].max() - 0.5)) + 2, W)
    v0 = max(int(np.floor(uv[:, 1].min() - 0.5)) - 1, 0)
    v1 = min(int(np.ceil(uv[:, 1].max() - 0.5)) + 2, H)
    return slice(v0, max(v1, v0)), slice(u0, max(u1, u0))


def render(camera: Camera, objects: list[Obj], ee=None, ray_dirs=None,
           cull: bool = True) -> dict[str, np.ndarray]:
    """RGB (H, W, 3) uint8, z-depth (H, W) float64 metres (0 = no hit) and segmentation ids (H, W) int.

    ``cull=True`` intersects each object only with the rays inside its projected bounding rectangle
    (identical output, several times faster; ``ray_dirs`` must then be ``camera.ray_dirs()``).
    """
    d = camera.ray_dirs() if ray_dirs is None else ray_dirs
    eye = camera.eye
    H, W = d.shape[:2]
    best = _table_hit(camera, d, ray_dirs)
    seg = np.where(np.isfinite(best), TABLE_ID, NONE_ID)
    normal = np.zeros((H, W, 3))
    normal[..., 2] = 1.0
    colour = np.empty((H, W, 3))
    colour[:] = TABLE_RGB
    parts = [(o.id, o.kind, o.pos, o.yaw, COLOURS[o.colour]) for o in objects]
    if ee is not None:
        ee = np.asarray(ee, float)
        parts.append((GRIPPER_ID, "gripper", ee + np.array([0, 0, 0.01 + GRIPPER_HALF[2]]), 0.0, GRIPPER_RGB))
    full = (slice(None), slice(None))
    for oid, kind, pos, yaw, rgb in parts:
        pos = np.asarray(pos, float)
        if kind in ("cube", "gripper"):
            half = GRIPPER_HALF if kind == "gripper" else (SIZE["cube"][0],) * 3
            centre = pos if kind == "gripper" else pos + np.array([0, 0, SIZE["cube"][0]])
            ext = np.array([np.hypot(half[0], half[1])] * 2 + [half[2]])
            lo, hi = centre - ext, centre + ext
        else:
            r, h = SIZE[kind]
            lo, hi = pos - np.array([r, r, 0.0]), pos + np.array([r, r, h])
        win = _window(camera, lo, hi, H, W) if cull else full
        win = full if win is None else win
        dw = d[win]
        if dw.size == 0:
            continue
        if kind in ("cube", "gripper"):
            t, n = _hit_box(eye, dw, centre, half, yaw)
        else:
            t, n = _hit_cylinder(eye, dw, pos, r, h)
        bw = best[win]
        closer = t < bw
        bw[closer] = t[closer]
        seg[win][closer] = oid
        normal[win][closer] = n[closer]
        colour[win][closer] = rgb
    hit = np.isfinite(best)
    depth = np.where(hit, best, 0.0)
    shade = 0.35 + 0.65 * np.clip(normal @ LIGHT, 0.0, 1.0)
    rgb = np.where(hit[..., None], colour * shade[..., None], BACKGROUND_RGB)
    return {"rgb": np.clip(np.round(rgb * 255), 0, 255).astype(np.uint8), "depth": depth, "seg": seg}
