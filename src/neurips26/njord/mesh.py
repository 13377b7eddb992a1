"""Hierarchical meshes over the wet cells: the K-means cluster mesh (Njord) and a SeaCast-style
rectangular lattice (the ablation). Both give the same edge sets: g2m, m2m per level, up/down, m2g.

Positions are in grid-cell units (cell (j, i) has centre (i + 0.5, j + 0.5) as (x, y)). The K-means
recipe is an ASSUMPTION (spec §3); every choice is a parameter.
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

MESH_TYPES = ("kmeans", "rectangular")


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


def _kmeans(points: np.ndarray, k: int, weights: np.ndarray | None, seed: int, n_init: int):
    from sklearn.cluster import KMeans, MiniBatchKMeans

    cls = MiniBatchKMeans if len(points) > 100_000 else KMeans
    km = cls(n_clusters=k, n_init=n_init, random_state=seed).fit(points, sample_weight=weights)
    return km.cluster_centers_, km.labels_


def _snap(mask, centres, labels, points):
    """Snap each centre on land to its nearest member point (distinct), keeping every node wet."""
    out = centres.copy()
    used = set()
    for c in range(len(centres)):
        members = np.nonzero(labels == c)[0]
        if len(members) == 0:
            members = np.arange(len(points))
        if _on_land(mask, centres[c]) or tuple(np.floor(centres[c]).astype(int)) in used:
            order = members[np.argsort(((points[members] - centres[c]) ** 2).sum(1))]
            for m in order:
                key = tuple(np.floor(points[m]).astype(int))
                if key not in used:
                    out[c] = points[m]
                    break
        used.add(tuple(np.floor(out[c]).astype(int)))
    return out


def _intra_edges(mask, pos, land_cross_max, lattice_spacing: float | None = None):
    """Bidirectional Delaunay (or 8-neighbour lattice) edges without land crossings + repair edges."""
    n = len(pos)
    if n < 2:
        return np.zeros((2, 0), int), np.zeros(0, bool)
    cand = set()
    if lattice_spacing is not None:
        tree = cKDTree(pos)
        for a, b in tree.query_pairs(lattice_spacing * math.sqrt(2) * 1.01):
            cand.add((a, b))
    elif n == 2:
        cand.add((0, 1))
    else:
        try:
            tri = Delaunay(pos)
            for s in tri.simplices:
                for a, b in ((s[0], s[1]), (s[1], s[2]), (s[0], s[2])):
                    cand.add((min(a, b), max(a, b)))
        except Exception:  # collinear points: a chain in sorted order
            o = np.lexsort(pos.T[::-1])
            cand.update((min(a, b), max(a, b)) for a, b in zip(o[:-1], o[1:]))
    keep, removed = [], []
    for a, b in sorted(cand):
        (removed if land_cells_on_segment(mask, pos[a], pos[b]) >= land_cross_max else keep).append((a, b))
    repair = []
    while True:
        e = np.array(keep + repair, int).reshape(-1, 2)
        adj = (
            coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n)) if len(e) else coo_matrix((n, n))
        )
        k, lab = connected_components(adj, directed=False)
        if k == 1:
            break
        cross = [(np.linalg.norm(pos[a] - pos[b]), a, b) for a, b in removed if lab[a] != lab[b]]
        if not cross:  # nothing removed links them: the nearest pair across components
            d = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
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


def _finish(kind, mask, grid_pos, levels, member, land_cross_max, lattice=None, info=None) -> Mesh:
    m2m, rep, up, down, lcms = [], [], [], [], []
    d1 = None
    for lvl, pos in enumerate(levels):
        scale = 1.0
        if lvl > 0 and d1:
            scale = max(1.0, _median_len(levels[lvl]) / d1) if len(levels[lvl]) > 1 else 1.0
        lcms.append(max(land_cross_max, int(round(land_cross_max * scale))))
        e, r = _intra_edges(mask, pos, lcms[-1], None if lattice is None else lattice[lvl])
        m2m.append(e)
        rep.append(r)
        if lvl == 0:
            d1 = float(np.median(np.linalg.norm(pos[e[0]] - pos[e[1]], axis=1))) if e.shape[1] else 1.0
    for lvl in range(len(levels) - 1):
        par = _parents(levels[lvl], levels[lvl + 1])
        down.append(np.stack([par, np.arange(len(levels[lvl]))]))
        up.append(np.stack([np.arange(len(levels[lvl])), par]))
    # g2m: membership plus radius edges within 0.67 d_1 not crossing land
    p1 = levels[0]
    g2m = {(g, int(member[g])) for g in range(len(grid_pos))}
    tree = cKDTree(p1)
    for g, near in enumerate(tree.query_ball_point(grid_pos, 0.67 * d1)):
        for m in near:
            if land_cells_on_segment(mask, grid_pos[g], p1[m]) == 0:
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
            if m not in chosen and land_cells_on_segment(mask, p1[m], grid_pos[g]) == 0:
                chosen.append(int(m))
        m2g += [(m, g) for m in chosen]
    m2g = np.array(m2g, int).T
    info = dict(info or {})
    info.update(
        sizes=[len(p) for p in levels],
        repair_edges=int(sum(r.sum() for r in rep)) // 2,
        land_nodes=int(sum(sum(_on_land(mask, p) for p in pos) for pos in levels)),
        d1=d1,
        land_cross_max=land_cross_max,
        land_cross=lcms,
    )
    return Mesh(kind, grid_pos, levels, m2m, rep, up, down, g2m, m2g, member, info)


def _median_len(pos):
    if len(pos) < 2:
        return 1.0
    d, _ = cKDTree(pos).query(pos, k=2)
    return float(np.median(d[:, 1]))


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
    cent, lab = _kmeans(grid, sizes[0], None, seed, n_init)
    pos = [_snap(mask, cent, lab, grid)]
    member = lab
    weight = np.bincount(lab, minlength=sizes[0]).astype(float)
    for k in sizes[1:]:
        cent, lab = _kmeans(pos[-1], k, weight, seed, n_init)
        pos.append(_snap(mask, cent, lab, pos[-1]))
        par = _parents(pos[-2], pos[-1])
        weight = np.bincount(par, weights=weight, minlength=k)
    return _finish("kmeans", mask, grid, pos, member, land_cross_max, info=dict(r1=r1, r=r))


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
        "rectangular", mask, grid, pos, member, land_cross_max, lattice=spacing, info=dict(spacing=spacing)
    )


def build_mesh(kind: str, mask: np.ndarray, **kw) -> Mesh:
    kind = check_choice(kind, "kind", MESH_TYPES)
    if kind == "kmeans":
        return kmeans_mesh(mask, **kw)
    return rectangular_mesh(mask, **kw)
