"""Hierarchical meshes over the wet cells: the K-means cluster mesh (Njord) and a SeaCast-style
rectangular lattice (the ablation). Both give the same edge sets: g2m, m2m per level, up/down, m2g.

Positions are in grid-cell units (cell (j, i) has centre (i + 0.5, j + 0.5) as (x, y)). The K-means
recipe is an ASSUMPTION (spec §3); every choice is a parameter.

``spherical_kmeans_mesh`` is the global / lat-lon variant (spec §3 step 1, 5): wet cells become unit
vectors ``(cos phi cos lam, cos phi sin lam, sin phi)`` (no date-line or pole seams), K-means is
weighted by the cell area ``cos phi``, centroids are projected back onto the sphere, intra-level edges
come from the ``ConvexHull`` of the 3-D points (= the spherical Delaunay triangulation), distances are
great-circle angles (radians) and land crossings are counted on the great-circle arc. Positions of a
spherical mesh are (n, 3) unit vectors and ``info["geometry"] == "sphere"``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import Delaunay, cKDTree

from neurips26.harness.validation import check_choice, check_scalar

MESH_TYPES = ("kmeans", "rectangular", "spherical")


@dataclass
class Mesh:
    """Node positions per level and edge index arrays (2, E) as (sender, receiver)."""

    kind: str
    grid_pos: np.ndarray  # (N, 2)
    levels: list[np.ndarray]  # positions per level, finest first
    m2m: list[np.ndarray]
    repair: list[np.ndarray]  # bool per m2m edge: re-added to restore connectivity
    up: list[np.ndarray]  # level l -> l+1
    down: list[np.ndarray]  # level l+1 -> l
    g2m: np.ndarray
    m2g: np.ndarray
    member: np.ndarray  # level-1 node of each grid cell
    info: dict = field(default_factory=dict)

    @property
    def sizes(self) -> list[int]:
        return [len(p) for p in self.levels]

    def n_edges(self) -> int:
        return (
            self.g2m.shape[1]
            + self.m2g.shape[1]
            + sum(e.shape[1] for e in self.m2m)
            + sum(e.shape[1] for e in self.up)
            + sum(e.shape[1] for e in self.down)
        )

    def to_arrays(self) -> dict:
        """Flat name -> array dict (for ``np.savez``); ``from_arrays`` inverts it."""
        out = dict(grid_pos=self.grid_pos, g2m=self.g2m, m2g=self.m2g, member=self.member)
        for name in ("levels", "m2m", "repair", "up", "down"):
            for i, a in enumerate(getattr(self, name)):
                out[f"{name}_{i}"] = a
        return out

    @classmethod
    def from_arrays(cls, kind: str, arrays, info: dict | None = None) -> "Mesh":
        def seq(name):
            return [np.asarray(arrays[k]) for k in sorted((k for k in arrays if k.startswith(name + "_")),
                                                          key=lambda k: int(k.rsplit("_", 1)[1]))]

        return cls(kind, np.asarray(arrays["grid_pos"]), seq("levels"), seq("m2m"), seq("repair"), seq("up"),
                   seq("down"), np.asarray(arrays["g2m"]), np.asarray(arrays["m2g"]),
                   np.asarray(arrays["member"]), dict(info or {}))

    def hash(self) -> str:
        h = hashlib.sha256()
        for a in [self.grid_pos, *self.levels, *self.m2m, *self.up, *self.down, self.g2m, self.m2g]:
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()[:16]


def wet_positions(mask: np.ndarray) -> np.ndarray:
    j, i = np.nonzero(mask)
    return np.stack([i + 0.5, j + 0.5], axis=1).astype(float)


def land_cells_on_segment(mask: np.ndarray, p: np.ndarray, q: np.ndarray) -> int:
    """Land cells on the rasterised segment p -> q (skimage.draw.line, as SeaCast)."""
    from skimage.draw import line

    rr, cc = line(int(p[1]), int(p[0]), int(q[1]), int(q[0]))
    return int((~mask[rr, cc]).sum())


def _on_land(mask: np.ndarray, p: np.ndarray) -> bool:
    return not mask[int(p[1]), int(p[0])]


class _Plane:
    """Grid-cell-unit plane geometry over a closed-wall mask (the regional meshes)."""

    def __init__(self, mask: np.ndarray):
        self.mask = mask

    def land(self, p, q) -> int:
        return land_cells_on_segment(self.mask, p, q)

    def on_land(self, p) -> bool:
        return _on_land(self.mask, p)

    def cell(self, p) -> tuple:
        return tuple(np.floor(p).astype(int))

    def dist(self, a, b):
        return np.linalg.norm(np.asarray(a) - np.asarray(b), axis=-1)

    def chord(self, d: float) -> float:  # KD-tree radius for a distance d
        return d

    def from_chord(self, c):
        return c

    def candidates(self, pos) -> set:
        """Delaunay triangulation edges (a < b)."""
        n, cand = len(pos), set()
        if n == 2:
            return {(0, 1)}
        try:
            tri = Delaunay(pos)
            for s in tri.simplices:
                for a, b in ((s[0], s[1]), (s[1], s[2]), (s[0], s[2])):
                    cand.add((min(a, b), max(a, b)))
        except Exception:  # collinear points: a chain in sorted order
            o = np.lexsort(pos.T[::-1])
            cand.update((min(a, b), max(a, b)) for a, b in zip(o[:-1], o[1:]))
        return cand


def lonlat_to_xyz(lat, lon) -> np.ndarray:
    """Unit vectors ``(cos phi cos lam, cos phi sin lam, sin phi)`` of latitudes/longitudes in degrees."""
    phi, lam = np.radians(np.asarray(lat, float)), np.radians(np.asarray(lon, float))
    return np.stack([np.cos(phi) * np.cos(lam), np.cos(phi) * np.sin(lam), np.sin(phi)], axis=-1)


def xyz_to_lonlat(p) -> tuple[np.ndarray, np.ndarray]:
    """(lat, lon) in degrees (lon in (-180, 180]) of points ``p`` (..., 3) (normalised first)."""
    p = np.asarray(p, float)
    p = p / np.linalg.norm(p, axis=-1, keepdims=True)
    return np.degrees(np.arcsin(np.clip(p[..., 2], -1, 1))), np.degrees(np.arctan2(p[..., 1], p[..., 0]))


class _Sphere:
    """Unit-sphere geometry over a regular lat/lon mask (``lat``/``lon`` cell centres in degrees);
    longitudes are periodic when the grid spans 360 degrees, cells outside a regional grid count as land."""

    def __init__(self, mask: np.ndarray, lat: np.ndarray, lon: np.ndarray):
        self.mask, self.lat, self.lon = mask, lat, lon
        self.dlat = float(lat[1] - lat[0]) if len(lat) > 1 else 180.0
        self.dlon = float(lon[1] - lon[0]) if len(lon) > 1 else 360.0
        self.periodic = abs(len(lon) * self.dlon - 360.0) < 1e-6 * 360
        self.step = np.radians(0.25 * min(abs(self.dlat), abs(self.dlon)))  # arc sampling step

    def _cells_lonlat(self, la, lo):
        """Raw row j, column i and the outside-the-grid mask of latitudes / longitudes (degrees)."""
        j = np.rint((la - self.lat[0]) / self.dlat).astype(int)
        i = np.rint(((lo - self.lon[0]) % 360.0) / self.dlon).astype(int)
        if self.periodic:
            i %= len(self.lon)
        return j, i, (j < 0) | (j >= len(self.lat)) | (i < 0) | (i >= len(self.lon))

    def cells(self, p):
        """(j, i) cell indices of points p (..., 3), or -1 where outside the grid."""
        j, i, out = self._cells_lonlat(*xyz_to_lonlat(p))
        return np.where(out, -1, j), np.where(out, -1, i)

    def _wet(self, j, i):
        return (j >= 0) & self.mask[np.maximum(j, 0), np.maximum(i, 0)]

    def land(self, p, q) -> int:
        """Distinct land cells under the great-circle arc p -> q (sampled at 1/4 cell, slerp)."""
        th = float(self.dist(p, q))
        if th < 1e-12:
            return 0
        t = np.linspace(0.0, 1.0, int(np.ceil(th / self.step)) + 2)[:, None]
        pts = (np.sin((1 - t) * th) * p + np.sin(t * th) * q) / np.sin(th)
        la, lo = xyz_to_lonlat(pts)  # outside a regional grid: every sampled outside cell is land
        jr, i, out = self._cells_lonlat(la, lo)
        j, i = np.where(out, -1, jr), np.where(out, -1, i)
        ir = np.rint(((lo - self.lon[0] + 180.0) % 360.0 - 180.0) / self.dlon).astype(int)
        cells = {(int(a), int(b)) if a >= 0 else ("out", int(c), int(d))
                 for a, b, c, d, w in zip(j, i, jr, ir, self._wet(j, i)) if not w}
        return len(cells)

    def on_land(self, p) -> bool:
        j, i = self.cells(np.asarray(p)[None])
        return not bool(self._wet(j, i)[0])

    def cell(self, p) -> tuple:
        j, i = self.cells(np.asarray(p)[None])
        return int(j[0]), int(i[0])

    def dist(self, a, b):
        """Great-circle angle (radians)."""
        dot = (np.asarray(a) * np.asarray(b)).sum(-1)
        cross = np.linalg.norm(np.cross(a, b), axis=-1)
        return np.arctan2(cross, dot)

    def chord(self, d: float) -> float:
        return 2.0 * math.sin(min(d, math.pi) / 2.0)

    def from_chord(self, c):
        return 2.0 * np.arcsin(np.clip(np.asarray(c) / 2.0, 0.0, 1.0))

    def candidates(self, pos) -> set:
        """Spherical Delaunay edges: the convex hull of the unit vectors, keeping only facets whose
        plane has the origin on its inner side (a regional cap's flat 'lid' facets do not)."""
        n = len(pos)
        if n <= 3:
            return {(a, b) for a in range(n) for b in range(a + 1, n)}
        cand = set()
        for s in self.facets(pos):
            for a, b in ((s[0], s[1]), (s[1], s[2]), (s[0], s[2])):
                cand.add((min(a, b), max(a, b)))
        return cand

    @staticmethod
    def facets(pos, lid: bool = False) -> np.ndarray:
        """Convex-hull triangles of unit vectors: the spherical ones (``lid=False``) or the others."""
        from scipy.spatial import ConvexHull

        hull = ConvexHull(pos)
        # hull.equations: n.x + c <= 0 inside; c > 0 puts the origin outside the facet's half-space:
        # a flat 'lid' across a regional point set, not a spherical Delaunay triangle
        keep = hull.equations[:, 3] > 0 if lid else hull.equations[:, 3] <= 0
        return hull.simplices[keep]


def _kmeans(points: np.ndarray, k: int, weights: np.ndarray | None, seed: int, n_init: int):
    from sklearn.cluster import KMeans, MiniBatchKMeans

    cls = MiniBatchKMeans if len(points) > 100_000 else KMeans
    km = cls(n_clusters=k, n_init=n_init, random_state=seed).fit(points, sample_weight=weights)
    return km.cluster_centers_, km.labels_


def _snap(geo, centres, labels, points):
    """Snap each centre on land to its nearest member point (distinct), keeping every node wet."""
    out = centres.copy()
    used = set()
    for c in range(len(centres)):
        members = np.nonzero(labels == c)[0]
        if len(members) == 0:
            members = np.arange(len(points))
        if geo.on_land(centres[c]) or geo.cell(centres[c]) in used:
            order = members[np.argsort(geo.dist(points[members], centres[c]))]
            for m in order:
                if geo.cell(points[m]) not in used:
                    out[c] = points[m]
                    break
        used.add(geo.cell(out[c]))
    return out


def _intra_edges(geo, pos, land_cross_max, lattice_spacing: float | None = None):
    """Bidirectional Delaunay (spherical: ConvexHull; or 8-neighbour lattice) edges without land
    crossings + repair edges."""
    n = len(pos)
    if n < 2:
        return np.zeros((2, 0), int), np.zeros(0, bool)
    cand = set()
    if lattice_spacing is not None:
        tree = cKDTree(pos)
        for a, b in tree.query_pairs(lattice_spacing * math.sqrt(2) * 1.01):
            cand.add((a, b))
    else:
        cand = geo.candidates(pos)
    keep, removed = [], []
    for a, b in sorted(cand):
        (removed if geo.land(pos[a], pos[b]) >= land_cross_max else keep).append((a, b))
    repair = []
    while True:
        e = np.array(keep + repair, int).reshape(-1, 2)
        adj = (
            coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n)) if len(e) else coo_matrix((n, n))
        )
        k, lab = connected_components(adj, directed=False)
        if k == 1:
            break
        cross = [(float(geo.dist(pos[a], pos[b])), a, b) for a, b in removed if lab[a] != lab[b]]
        if not cross:  # nothing removed links them: the nearest pair across components
            d = geo.dist(pos[:, None], pos[None])
            d[lab[:, None] == lab[None]] = np.inf
            a, b = np.unravel_index(np.argmin(d), d.shape)
            cross = [(d[a, b], min(a, b), max(a, b))]
        _, a, b = min(cross)
        repair.append((a, b))
    pairs = keep + repair
    flag = [False] * len(keep) + [True] * len(repair)
    src = [a for a, b in pairs] + [b for a, b in pairs]
    dst = [b for a, b in pairs] + [a for a, b in pairs]
    return np.array([src, dst], int), np.array(flag + flag, bool)


def _parents(child_pos, parent_pos):
    return cKDTree(parent_pos).query(child_pos)[1]


def _finish(kind, geo, grid_pos, levels, member, land_cross_max, lattice=None, info=None) -> Mesh:
    m2m, rep, up, down, lcms = [], [], [], [], []
    d1 = None
    for lvl, pos in enumerate(levels):
        scale = 1.0
        if lvl > 0 and d1:
            scale = max(1.0, _median_len(geo, levels[lvl]) / d1) if len(levels[lvl]) > 1 else 1.0
        lcms.append(max(land_cross_max, int(round(land_cross_max * scale))))
        e, r = _intra_edges(geo, pos, lcms[-1], None if lattice is None else lattice[lvl])
        m2m.append(e)
        rep.append(r)
        if lvl == 0:
            d1 = float(np.median(geo.dist(pos[e[0]], pos[e[1]]))) if e.shape[1] else 1.0
    for lvl in range(len(levels) - 1):
        par = _parents(levels[lvl], levels[lvl + 1])
        down.append(np.stack([par, np.arange(len(levels[lvl]))]))
        up.append(np.stack([np.arange(len(levels[lvl])), par]))
    # g2m: membership plus radius edges within 0.67 d_1 not crossing land
    p1 = levels[0]
    g2m = {(g, int(member[g])) for g in range(len(grid_pos))}
    tree = cKDTree(p1)
    for g, near in enumerate(tree.query_ball_point(grid_pos, geo.chord(0.67 * d1))):
        for m in near:
            if geo.land(grid_pos[g], p1[m]) == 0:
                g2m.add((g, m))
    g2m = np.array(sorted(g2m), int).T
    # m2g: 4 nearest level-1 nodes reachable without crossing land (fallback: membership node)
    k = min(8, len(p1))
    _, idx = tree.query(grid_pos, k=k)
    idx = idx.reshape(len(grid_pos), k)
    m2g = []
    for g in range(len(grid_pos)):
        chosen = [int(member[g])]
        for m in idx[g]:
            if len(chosen) == min(4, len(p1)):
                break
            if m not in chosen and geo.land(p1[m], grid_pos[g]) == 0:
                chosen.append(int(m))
        m2g += [(m, g) for m in chosen]
    m2g = np.array(m2g, int).T
    info = dict(info or {})
    info.update(
        sizes=[len(p) for p in levels],
        repair_edges=int(sum(r.sum() for r in rep)) // 2,
        land_nodes=int(sum(sum(geo.on_land(p) for p in pos) for pos in levels)),
        d1=d1,
        land_cross_max=land_cross_max,
        land_cross=lcms,
    )
    return Mesh(kind, grid_pos, levels, m2m, rep, up, down, g2m, m2g, member, info)


def _median_len(geo, pos):
    if len(pos) < 2:
        return 1.0
    d, _ = cKDTree(pos).query(pos, k=2)
    return float(np.median(geo.from_chord(d[:, 1])))


def level_sizes(n_wet: int, r1: float, r: float, levels: int) -> list[int]:
    sizes = [math.ceil(n_wet / r1)]
    for _ in range(levels - 1):
        sizes.append(math.ceil(sizes[-1] / r))
    return sizes


def _check_sizes(sizes, n_wet):
    if sizes[0] >= n_wet:
        raise ValueError(f"k_1 = {sizes[0]} must be < the number of wet cells N = {n_wet}")
    for a, b in zip(sizes[:-1], sizes[1:]):
        if b >= a or b < 1:
            raise ValueError(f"level sizes must be strictly decreasing and >= 1, got {sizes}")


def kmeans_mesh(
    mask: np.ndarray,
    r1: float = 9.0,
    r: float = 5.0,
    levels: int = 3,
    sizes: list[int] | None = None,
    land_cross_max: int = 2,
    seed: int = 0,
    n_init: int = 2,
) -> Mesh:
    """The K-means cluster mesh: weighted hierarchical K-means on wet-cell positions (spec §3)."""
    from neurips26.njord.simulator import check_mask

    mask = check_mask(mask)
    r1 = check_scalar(r1, "r1", float, min=1.0, inclusive="neither")
    r = check_scalar(r, "r", float, min=1.0, inclusive="neither")
    levels = check_scalar(levels, "levels", int, min=1)
    land_cross_max = check_scalar(land_cross_max, "land_cross_max", int, min=1)
    grid = wet_positions(mask)
    sizes = list(sizes) if sizes is not None else level_sizes(len(grid), r1, r, levels)
    _check_sizes(sizes, len(grid))
    geo = _Plane(mask)
    pos, member = _hierarchy(geo, grid, None, sizes, seed, n_init, sphere=False)
    return _finish("kmeans", geo, grid, pos, member, land_cross_max, info=dict(r1=r1, r=r))


def _hierarchy(geo, grid, w1, sizes, seed, n_init, sphere: bool):
    """Weighted hierarchical K-means (spec §3 steps 2-4): level 1 on the grid points (weights ``w1``),
    level l+1 on level-l nodes weighted by the summed weight of their members; snapped to wet members."""

    def fit(points, k, w):
        cent, lab = _kmeans(points, k, w, seed, n_init)
        if sphere:  # the spherical mean direction of each cluster
            cent = cent / np.maximum(np.linalg.norm(cent, axis=1, keepdims=True), 1e-12)
        return _snap(geo, cent, lab, points), lab

    p, member = fit(grid, sizes[0], w1)
    pos = [p]
    weight = np.bincount(member, weights=w1, minlength=sizes[0]).astype(float)
    for k in sizes[1:]:
        p, _ = fit(pos[-1], k, weight)
        pos.append(p)
        par = _parents(pos[-2], pos[-1])
        weight = np.bincount(par, weights=weight, minlength=k)
    return pos, member


def _lattice(mask, spacing):
    n = mask.shape[0]
    c = np.arange(spacing / 2, n, spacing)
    c = c[c < n]
    xx, yy = np.meshgrid(c, c)
    p = np.stack([xx.ravel(), yy.ravel()], 1)
    return p[mask[p[:, 1].astype(int), p[:, 0].astype(int)]]


def rectangular_mesh(mask: np.ndarray, sizes: list[int], land_cross_max: int = 2) -> Mesh:
    """SeaCast-style lattice mesh: per level the spacing whose wet-node count is closest to sizes[l]."""
    from neurips26.njord.simulator import check_mask

    mask = check_mask(mask)
    grid = wet_positions(mask)
    _check_sizes(list(sizes), len(grid))
    pos, spacing = [], []
    cands = np.linspace(1.0, mask.shape[0] / 1.5, 200)
    for k in sizes:
        best = min(cands, key=lambda s: (abs(len(_lattice(mask, s)) - k), s))
        pos.append(_lattice(mask, best))
        spacing.append(float(best))
    if any(b >= a for a, b in zip([len(p) for p in pos][:-1], [len(p) for p in pos][1:])):
        raise ValueError(f"rectangular mesh level sizes not decreasing: {[len(p) for p in pos]}")
    member = cKDTree(pos[0]).query(grid)[1]
    return _finish(
        "rectangular", _Plane(mask), grid, pos, member, land_cross_max, lattice=spacing,
        info=dict(spacing=spacing),
    )


def _check_lonlat(mask, lat, lon):
    from scipy import ndimage

    mask = np.asarray(mask)
    if mask.ndim != 2 or mask.dtype != bool:
        raise ValueError(f"mask must be a 2-D boolean array (lat, lon), got shape {mask.shape} {mask.dtype}")
    lat, lon = np.asarray(lat, float), np.asarray(lon, float)
    if mask.shape != (len(lat), len(lon)):
        raise ValueError(f"mask shape {mask.shape} != (len(lat), len(lon)) = {(len(lat), len(lon))}")
    if not (np.isfinite(lat).all() and np.isfinite(lon).all()) or np.abs(lat).max() > 90:
        raise ValueError("lat must be finite degrees in [-90, 90] and lon finite degrees")
    for name, a in (("lat", lat), ("lon", lon)):
        if len(a) > 1 and not (np.allclose(np.diff(a), a[1] - a[0]) and a[1] > a[0]):
            raise ValueError(f"{name} must be regularly spaced and increasing")
    if not mask.any():
        raise ValueError("mask has no wet cells")
    return mask, lat, lon, ndimage


def _basins(mask, periodic: bool, ndimage) -> int:
    """Connected wet basins of a lat/lon mask (4-neighbour; joined across the seam when periodic)."""
    lab, k = ndimage.label(mask)
    parent = list(range(k + 1))

    def root(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    if periodic:
        for a, b in zip(lab[:, 0], lab[:, -1]):
            if a and b:
                parent[root(a)] = root(b)
    return len({root(a) for a in range(1, k + 1)})


def spherical_kmeans_mesh(
    mask: np.ndarray,
    lat,
    lon,
    r1: float = 9.0,
    r: float = 5.0,
    levels: int = 3,
    sizes: list[int] | None = None,
    land_cross_max: int = 2,
    seed: int = 0,
    n_init: int = 2,
    area_weights: bool = True,
    allow_multi_basin: bool = False,
) -> Mesh:
    """The K-means cluster mesh on the sphere for a lat/lon ``mask`` (``mask[j, i]`` = cell at
    ``lat[j]``, ``lon[i]``, degrees, True = ocean). K-means runs on unit vectors
    ``(cos phi cos lam, cos phi sin lam, sin phi)`` with sample weights ``cos phi`` (cell area, when
    ``area_weights``); m2m edges from the spherical Delaunay (``ConvexHull``) minus great-circle arcs
    over ``>= land_cross_max`` land cells, plus flagged repair edges; radii and lengths are
    great-circle angles (radians)."""
    mask, lat, lon, ndimage = _check_lonlat(mask, lat, lon)
    r1 = check_scalar(r1, "r1", float, min=1.0, inclusive="neither")
    r = check_scalar(r, "r", float, min=1.0, inclusive="neither")
    levels = check_scalar(levels, "levels", int, min=1)
    land_cross_max = check_scalar(land_cross_max, "land_cross_max", int, min=1)
    geo = _Sphere(mask, lat, lon)
    if not allow_multi_basin and _basins(mask, geo.periodic, ndimage) > 1:
        raise ValueError("mask has several disconnected basins (pass allow_multi_basin=True)")
    j, i = np.nonzero(mask)
    grid = lonlat_to_xyz(lat[j], lon[i])
    sizes = list(sizes) if sizes is not None else level_sizes(len(grid), r1, r, levels)
    _check_sizes(sizes, len(grid))
    w1 = np.cos(np.radians(lat[j])) if area_weights else None
    pos, member = _hierarchy(geo, grid, w1, sizes, seed, n_init, sphere=True)
    return _finish("spherical", geo, grid, pos, member, land_cross_max,
                   info=dict(r1=r1, r=r, geometry="sphere", periodic=geo.periodic))


def build_mesh(kind: str, mask: np.ndarray, **kw) -> Mesh:
    kind = check_choice(kind, "kind", MESH_TYPES)
    if kind == "kmeans":
        return kmeans_mesh(mask, **kw)
    if kind == "spherical":
        return spherical_kmeans_mesh(mask, **kw)
    return rectangular_mesh(mask, **kw)
