"""Gallery geometry (spec §1-§2): embeddings on S^{D-1}, impostor threshold tau(FAR), spread rho,
collision tests, the allocation margin, the PCA energy report, the realizable subspace and density
containment; plus the synthetic ArcFace-like gallery (a) of the reproduction.

Everything is float32 torch on CPU; exact (brute-force) maximum-cosine search is chunked ``torch.mm``.
faiss is the fast path for kNN (``maxcos_faiss``) and is tested equal to the brute force.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import chi2

from neurips26.harness.validation import check_array, check_choice, check_scalar

CHUNK = 4096          # rows per brute-force chunk (4096 x N floats of scores at a time)
MIN_ABOVE = 10        # tau(FAR) refuses to extrapolate with fewer impostor pairs above it


def as_unit(x, name: str = "x", dim: int | None = None, normalize: bool = False) -> torch.Tensor:
    """``x`` (N, D) as float32 torch, checked finite, non-zero norm and (unless ``normalize``) unit."""
    arr = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x
    arr = check_array(arr, name, ndim=2, min_size=1)
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(f"{name} has dimension {arr.shape[1]}, expected {dim} (dimension mismatch)")
    t = torch.as_tensor(np.ascontiguousarray(arr), dtype=torch.float32)
    n = t.norm(dim=1)
    if bool((n <= 1e-12).any()):
        raise ValueError(f"{name} has zero-norm rows (e.g. row {int((n <= 1e-12).nonzero()[0])})")
    if normalize:
        return t / n[:, None]
    if bool(((n - 1).abs() > 1e-3).any()):
        err = float((n - 1).abs().max())
        raise ValueError(f"{name} rows must be unit-norm (max | ||x|| - 1 | = {err:.3g});"
                         " pass normalize=True or L2-normalise")
    return t


def check_unit(x, name: str = "x", dim: int | None = None) -> torch.Tensor:
    """``as_unit``'s checks (non-empty 2-D, ``dim`` columns, finite, no zero-norm rows, unit-norm rows); a
    torch tensor is checked in place and returned as it is (same dtype, no copy), anything else goes
    through ``as_unit``."""
    if not isinstance(x, torch.Tensor):
        return as_unit(x, name, dim=dim)
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional (n, D), got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    if dim is not None and x.shape[1] != dim:
        raise ValueError(f"{name} has dimension {x.shape[1]}, expected {dim} (dimension mismatch)")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite (it holds NaN or inf)")
    n = x.detach().norm(dim=1)
    if bool((n <= 1e-12).any()):
        raise ValueError(f"{name} has zero-norm rows (e.g. row {int((n <= 1e-12).nonzero()[0])})")
    if bool(((n - 1).abs() > 1e-3).any()):
        raise ValueError(f"{name} rows must be unit-norm (max | ||x|| - 1 | = {float((n - 1).abs().max()):.3g});"
                         " L2-normalise them")
    return x


def synthetic_gallery(n: int, D: int = 64, k: int = 32, alpha: float = 0.3, noise: float = 0.01,
                      seed: int = 0, basis: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Gallery (a): ``c = normalize(U diag(s) g + noise * n)``, ``s_i = i^-alpha``; returns (centers, U).

    Pass ``basis`` (the U of an earlier call) to draw more identities from the same source (held-out
    reals for the enrollment-robustness test).
    """
    n = check_scalar(n, "n", int, min=1)
    D = check_scalar(D, "D", int, min=2)
    k = check_scalar(k, "k", int, min=1, max=D)
    alpha = check_scalar(alpha, "alpha", float, min=0)
    noise = check_scalar(noise, "noise", float, min=0)
    gen = torch.Generator().manual_seed(check_scalar(seed, "seed", int, min=0))
    if basis is None:
        basis, _ = torch.linalg.qr(torch.randn(D, k, generator=gen, dtype=torch.float64))
        basis = basis.float()
    s = torch.arange(1, k + 1, dtype=torch.float32) ** (-alpha)
    g = torch.randn(n, k, generator=gen)
    c = (g * s) @ basis.T + noise * torch.randn(n, D, generator=gen)
    return c / c.norm(dim=1, keepdim=True), basis


# ---- exact search -----------------------------------------------------------------------------

def check_pair(q, ref, q_name: str = "q", ref_name: str = "ref") -> None:
    """Cheap checks of a (query, reference) pair for the search routines (they run inside the allocator's
    loops, so no copy): 2-D tensors with the same dimension, finite (a NaN row would score NaN, which no
    ``>= tau_c`` test counts as a collision)."""
    for x, name in ((q, q_name), (ref, ref_name)):
        if not isinstance(x, torch.Tensor) or x.ndim != 2:
            raise ValueError(f"{name} must be a 2-D torch.Tensor (n, D), got "
                             f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name} must be finite (it holds NaN or inf)")
    if q.shape[1] != ref.shape[1]:
        raise ValueError(f"{q_name} has dimension {q.shape[1]}, {ref_name} has {ref.shape[1]} (dimension mismatch)")


def maxcos(q: torch.Tensor, ref: torch.Tensor, chunk: int = CHUNK,
           exclude_self: bool = False) -> torch.Tensor:
    """Exact ``max_j <q_i, ref_j>`` by chunked brute force (``exclude_self``: q is ref, skip i == j)."""
    check_pair(q, ref)
    if ref.shape[0] == 0:
        return torch.full((q.shape[0],), -math.inf)
    out = torch.empty(q.shape[0])
    for a in range(0, q.shape[0], chunk):
        s = q[a:a + chunk] @ ref.T
        if exclude_self:
            idx = torch.arange(a, min(a + chunk, q.shape[0]))
            s[idx - a, idx] = -math.inf
        out[a:a + chunk] = s.max(dim=1).values
    return out


def knn(q: torch.Tensor, ref: torch.Tensor, k: int, chunk: int = CHUNK) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-``k`` cosines and indices of each q row in ref (brute force)."""
    check_pair(q, ref)
    k = min(check_scalar(k, "k", int, min=1), ref.shape[0])
    vals, idx = [], []
    for a in range(0, q.shape[0], chunk):
        v, i = (q[a:a + chunk] @ ref.T).topk(k, dim=1)
        vals.append(v)
        idx.append(i)
    return torch.cat(vals), torch.cat(idx)


def faiss_index(ref: torch.Tensor, kind: str = "flat", nlist: int | None = None, nprobe: int = 16,
                hnsw_m: int = 32, ef_search: int = 64):
    """A faiss inner-product index over unit rows: ``flat`` (IndexFlatIP), ``ivf`` (IndexIVFFlat,
    nlist ~ 4 sqrt(N)) or ``hnsw`` (IndexHNSWFlat, inner product)."""
    import faiss

    kind = check_choice(kind, "kind", ("flat", "ivf", "hnsw"))
    x = np.ascontiguousarray(ref.numpy(), dtype=np.float32)
    d = x.shape[1]
    if kind == "flat":
        index = faiss.IndexFlatIP(d)
    elif kind == "ivf":
        nlist = nlist or max(1, int(4 * math.sqrt(x.shape[0])))
        quant = faiss.IndexFlatIP(d)
        index = faiss.IndexIVFFlat(quant, d, nlist, faiss.METRIC_INNER_PRODUCT)
        index.train(x)
        index.nprobe = check_scalar(nprobe, "nprobe", int, min=1)
    else:
        index = faiss.IndexHNSWFlat(d, check_scalar(hnsw_m, "hnsw_m", int, min=2), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = check_scalar(ef_search, "ef_search", int, min=1)
    index.add(x)
    return index


def maxcos_faiss(q: torch.Tensor, ref: torch.Tensor, kind: str = "flat", **kw) -> torch.Tensor:
    """``maxcos`` through a faiss index (exact for ``flat``)."""
    check_pair(q, ref)
    index = faiss_index(ref, kind, **kw)
    D, _ = index.search(np.ascontiguousarray(q.numpy(), dtype=np.float32), 1)
    return torch.from_numpy(D[:, 0].copy())


class VirtualIndex:
    """The accepted virtuals as an exact faiss inner-product index that grows batch by batch.

    ``shards == 1``: one ``IndexFlatIP``. ``shards > 1``: faiss ``IndexShards`` over ``shards``
    ``IndexIDMap(IndexFlatIP)`` (the spec's scale-out: replicate the real index, shard the virtual one):
    every ``add`` is dealt across the shards with global ids in insertion order, a ``search`` asks every
    shard (in threads when ``threaded``) and merges. ``IndexShards`` has no range search, so
    ``range_search`` runs it shard by shard and merges per query (what the cross-shard audit needs).
    Exact in both forms: same neighbours and scores as one flat index (up to ties).
    """

    def __init__(self, d: int, shards: int = 1, threaded: bool = True):
        import faiss

        self.d = check_scalar(d, "d", int, min=1)
        self.shards = check_scalar(shards, "shards", int, min=1)
        if self.shards == 1:
            self.parts = [faiss.IndexFlatIP(self.d)]
            self.index = self.parts[0]
        else:
            self.parts = [faiss.IndexIDMap(faiss.IndexFlatIP(self.d)) for _ in range(self.shards)]
            self.index = faiss.IndexShards(self.d, bool(threaded), False)  # ids given: streamed adds
            for part in self.parts:                                          # (self.parts keeps them alive)
                self.index.add_shard(part)

    @property
    def ntotal(self) -> int:
        return int(self.index.ntotal)

    def add(self, x) -> None:
        x = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (n, {self.d}), got {x.shape}")
        if self.shards == 1:
            self.index.add(x)
        else:
            self.index.add_with_ids(x, np.arange(self.ntotal, self.ntotal + x.shape[0], dtype=np.int64))

    def search(self, q, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.index.search(np.ascontiguousarray(np.asarray(q, dtype=np.float32)), k)

    def range_search(self, q, radius: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lims, scores, ids) of every stored row with inner product > ``radius`` per query (faiss's layout)."""
        q = np.ascontiguousarray(np.asarray(q, dtype=np.float32))
        if self.shards == 1:
            return self.index.range_search(q, radius)
        rows, scores, ids = [], [], []
        for part in self.parts:
            lims, dd, ii = part.range_search(q, radius)
            rows.append(np.repeat(np.arange(q.shape[0]), np.diff(lims.astype(np.int64))))
            scores.append(dd)
            ids.append(ii)
        rows, scores, ids = np.concatenate(rows), np.concatenate(scores), np.concatenate(ids)
        order = np.lexsort((ids, rows))                     # per query, ids ascending
        counts = np.bincount(rows, minlength=q.shape[0])
        return np.concatenate([[0], np.cumsum(counts)]), scores[order], ids[order]


# ---- thresholds -------------------------------------------------------------------------------

def impostor_scores(centers: torch.Tensor, n_pairs: int | None = None, seed: int = 0,
                    labels: torch.Tensor | None = None) -> torch.Tensor:
    """Cosines between different identities: all pairs i < j when ``n_pairs`` is None (exact
    counting), otherwise ``n_pairs`` random pairs with distinct labels (rows are identities unless
    ``labels`` gives each row's identity)."""
    centers = check_unit(centers, "centers")
    N = centers.shape[0]
    if labels is not None:
        labels = torch.as_tensor(labels)
        if labels.shape != (N,):
            raise ValueError(f"labels must have shape ({N},), got {tuple(labels.shape)}")
    if N < 2:
        raise ValueError("centers needs at least 2 rows for impostor pairs")
    if n_pairs is None:
        if labels is not None:
            raise ValueError("exact counting needs one row per identity (labels=None)")
        iu = torch.triu_indices(N, N, offset=1)
        out = []
        for a in range(0, N, CHUNK):
            s = centers[a:a + CHUNK] @ centers.T
            rows = torch.arange(a, min(a + CHUNK, N))
            mask = rows[:, None] < torch.arange(N)[None, :]
            out.append(s[mask])
        del iu
        return torch.cat(out)
    n_pairs = check_scalar(n_pairs, "n_pairs", int, min=1)
    gen = torch.Generator().manual_seed(seed)
    i = torch.randint(0, N, (n_pairs,), generator=gen)
    j = torch.randint(0, N, (n_pairs,), generator=gen)
    ok = (i != j) if labels is None else (labels[i] != labels[j])
    i, j = i[ok], j[ok]
    # in chunks of pairs: the full scale's 100 / FAR = 1e8 pairs of 512-D rows would otherwise gather 2 x 205 GB
    step = max(1, 2 ** 24 // centers.shape[1])
    return torch.cat([(centers[i[a:a + step]] * centers[j[a:a + step]]).sum(1) for a in range(0, i.numel(), step)])


def tau_far(scores: torch.Tensor, far: float) -> float:
    """The (1 - FAR) quantile of impostor ``scores``; refuses when fewer than 10 lie above it."""
    far = check_scalar(far, "far", float, min=0, max=0.5, inclusive="neither")
    s = torch.as_tensor(scores, dtype=torch.float64).flatten()
    if not bool(torch.isfinite(s).all()):
        raise ValueError("scores must be finite")
    n_above = int(math.floor(far * s.numel()))
    if n_above < MIN_ABOVE:
        raise ValueError(f"far={far:g} with {s.numel()} impostor pairs leaves {n_above} pairs above the "
                         f"threshold (< {MIN_ABOVE}); refusing to extrapolate: use >= {int(100 / far)} pairs")
    top = torch.topk(s, n_above + 1).values
    return float(top[-1])          # n_above scores lie strictly above (ties aside)


def within_spread(images: torch.Tensor, labels: torch.Tensor, q: float = 0.95) -> tuple[float, torch.Tensor]:
    """rho: the ``q`` quantile of the angle between an image embedding and its identity's center;
    returns (rho, centers) with centers ordered by label 0..L-1."""
    images = check_unit(images, "images")
    q = check_scalar(q, "q", float, min=0, max=1)
    labels = torch.as_tensor(labels)
    if labels.shape != (images.shape[0],) or labels.is_floating_point() or int(labels.min()) < 0:
        raise ValueError(f"labels must be ({images.shape[0]},) non-negative integers, got {tuple(labels.shape)} "
                         f"{labels.dtype}")
    labels = labels.long()
    L = int(labels.max()) + 1
    c = torch.zeros(L, images.shape[1]).index_add_(0, labels, images)
    c = c / c.norm(dim=1, keepdim=True).clamp_min(1e-12)
    ang = torch.arccos((images * c[labels]).sum(1).clamp(-1, 1))
    return float(torch.quantile(ang.double(), q)), c


def margin(tau_c: float, rho: float | None = None, m: float = 2.0,
           delta: float = 0.05) -> tuple[float, float]:
    """(theta_sep, tau_m): ``arccos(tau_c) + m rho`` when rho is known, else ``tau_m = tau_c - delta``
    (center-only galleries)."""
    tau_c = check_scalar(tau_c, "tau_c", float, min=-1, max=1)
    if rho is None:
        tau_m = tau_c - check_scalar(delta, "delta", float, min=0)
        return math.acos(max(-1.0, tau_m)), tau_m
    theta = math.acos(tau_c) + check_scalar(m, "m", float, min=0) * check_scalar(rho, "rho", float, min=0)
    return theta, math.cos(min(theta, math.pi))


def collisions(v: torch.Tensor, centers: torch.Tensor, tau_c: float, mode: str = "center",
               images: torch.Tensor | None = None) -> torch.Tensor:
    """Boolean per virtual: collides with a real center (``center``) or any real image (``strict``)."""
    mode = check_choice(mode, "mode", ("center", "strict"))
    tau_c = check_scalar(tau_c, "tau_c", float, min=-1, max=1)
    v = check_unit(v, "v")
    if mode == "strict":
        if images is None:
            raise ValueError("mode='strict' needs the real image embeddings (images=...)")
        return maxcos(v, check_unit(images, "images", dim=v.shape[1])) >= tau_c
    return maxcos(v, check_unit(centers, "centers", dim=v.shape[1])) >= tau_c


# ---- PCA and the realizable subspace ----------------------------------------------------------

@dataclass(frozen=True)
class PCAReport:
    eigvals: np.ndarray            # descending, of the uncentered second moment
    k: dict                        # q -> smallest k with cumulative energy >= q
    participation_ratio: float


def pca_report(centers: torch.Tensor, qs: tuple = (0.90, 0.95, 0.99)) -> PCAReport:
    """Eigen-spectrum of ``M = (1/N) sum c c^T`` with k_q and the participation ratio."""
    c = check_unit(centers, "centers").double()
    lam = torch.linalg.eigvalsh(c.T @ c / c.shape[0]).flip(0).clamp_min(0).numpy()
    cum = np.cumsum(lam) / lam.sum()
    ks = {q: int(np.searchsorted(cum, q - 1e-12) + 1) for q in qs}
    return PCAReport(lam, ks, float(lam.sum() ** 2 / (lam ** 2).sum()))


class Subspace:
    """The realizable subspace S_k (top-k eigenvectors of the uncentered second moment) with a
    Gaussian fit of the PCA coordinates for density containment (squared Mahalanobis < chi2 quantile).

    ``k=None`` takes k_{0.99}.
    """

    def __init__(self, centers: torch.Tensor, k: int | None = None, q: float = 0.99,
                 containment_q: float = 0.99):
        centers = check_unit(centers, "centers")
        D = centers.shape[1]
        if k is not None:
            k = check_scalar(k, "k", int, min=1)
            if k > D:
                raise ValueError(f"k={k} exceeds the embedding dimension D={D}")
        c = centers.double()
        lam, vec = torch.linalg.eigh(c.T @ c / c.shape[0])
        lam, vec = lam.flip(0), vec.flip(1)
        if k is None:
            cum = torch.cumsum(lam.clamp_min(0), 0) / lam.clamp_min(0).sum()
            k = int(torch.searchsorted(cum, torch.tensor(q - 1e-12, dtype=torch.float64))) + 1
        self.k = k
        self.P = vec[:, :k].float().contiguous()                     # D x k orthonormal
        z = c @ vec[:, :k]
        self.mean = z.mean(0)
        cov = torch.cov(z.T).reshape(k, k) + 1e-9 * torch.eye(k, dtype=torch.float64)
        self.prec = torch.linalg.inv(cov)
        self.m_max = float(chi2.ppf(check_scalar(containment_q, "containment_q", float, min=0, max=1,
                                                 inclusive="neither"), k))

    def project(self, v: torch.Tensor) -> torch.Tensor:
        return (v @ self.P) @ self.P.T

    def residual(self, v: torch.Tensor) -> torch.Tensor:
        """r(v) = ||(I - P P^T) v||^2 from the residual vector (no 1 - ||P^T v||^2 cancellation)."""
        return (v - self.project(v)).pow(2).sum(1)

    def mahal2(self, v: torch.Tensor) -> torch.Tensor:
        """Squared Mahalanobis distance of P^T v under the Gaussian fit (differentiable)."""
        d = (v @ self.P).to(self.prec.dtype) - self.mean
        return ((d @ self.prec) * d).sum(1).to(v.dtype)

    def inside(self, v: torch.Tensor) -> torch.Tensor:
        return self.mahal2(v) < self.m_max

    def sample(self, n: int, gen: torch.Generator) -> torch.Tensor:
        """In-manifold seeds: PCA coordinates from the Gaussian fit, mapped back and normalised."""
        L = torch.linalg.cholesky(torch.linalg.inv(self.prec))
        z = self.mean + torch.randn(n, self.k, generator=gen, dtype=torch.float64) @ L.T
        v = (z.float()) @ self.P.T
        return v / v.norm(dim=1, keepdim=True).clamp_min(1e-12)
