"""Graphs as dense adjacency matrices, flip sets and the noise channels (spec §1).

Objects:

1. A graph is a simple undirected graph on nodes [n]: ``A in {0,1}^{n x n}``, symmetric, zero diagonal.
   A batch is ``B x n x n``.
2. A perturbation acts on the ``m = C(n, 2)`` node pairs, indexed in ``np.triu_indices(n, 1)`` order.
   A flip set ``F`` is a set of pair indices; ``G (+) F`` toggles every pair of ``F``.
3. Random noise ``N_p`` (ASSUMPTION: symmetric Erdos-Renyi flip channel): every pair is flipped
   independently with probability ``p``. Variant ``N_{p+,p-}``: a non-edge is added w.p. ``p+``, an
   edge deleted w.p. ``p-`` (the sparse-smoothing channel of Bojchevski et al. 2020).
4. Adversarial noise ``B_r``: every flip set with ``|F| <= r``.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from typing import Iterable, Sequence

import networkx as nx
import numpy as np

from neurips26.harness.validation import check_array, check_scalar


# ---------------------------------------------------------------------------- validation
def check_adjacency(A, name: str = "A", allow_self_loops: bool = False, batch: bool = False) -> np.ndarray:
    """``A`` (n x n, or B x n x n with ``batch``) as a uint8 0/1 array; errors name ``name``.

    Refuses: non-square, non-symmetric, non-binary, NaN, and self loops unless ``allow_self_loops``.
    """
    if isinstance(A, nx.Graph):
        A = to_adjacency(A)
    if hasattr(A, "detach"):
        A = A.detach().cpu().numpy()
    arr = check_array(A, name, ndim=3 if batch else 2)
    if arr.shape[-1] != arr.shape[-2]:
        raise ValueError(f"{name} must be square (n x n), got shape {arr.shape}")
    if not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"{name} must be binary (entries 0 or 1)")
    arr = arr.astype(np.uint8)
    if not np.array_equal(arr, np.swapaxes(arr, -1, -2)):
        raise ValueError(f"{name} must be symmetric (an undirected graph)")
    if not allow_self_loops and np.any(np.diagonal(arr, axis1=-2, axis2=-1)):
        raise ValueError(f"{name} has self loops (non-zero diagonal); simple graphs only")
    return arr


def check_features(X, n: int, name: str = "X") -> np.ndarray:
    """Node features: finite float64 with ``n`` rows."""
    X = check_array(X, name, ndim=(2, 3), dtype=float)
    if X.shape[-2] != n:
        raise ValueError(f"{name} must have one row per node (n = {n}), got {X.shape[-2]} rows")
    return X


def check_probability(p, name: str = "p") -> float:
    return check_scalar(p, name, float, min=0.0, max=1.0)


def check_budget(r, n: int, name: str = "r") -> int:
    """A flip budget ``0 <= r <= C(n, 2)``."""
    return check_scalar(r, name, int, min=0, max=n_pairs(n))


# ---------------------------------------------------------------------------- conversions
def n_pairs(n: int) -> int:
    return n * (n - 1) // 2


def to_adjacency(G: nx.Graph, n: int | None = None) -> np.ndarray:
    """networkx graph -> uint8 adjacency (nodes in ``G``'s order; padded with isolated nodes to ``n``)."""
    A = nx.to_numpy_array(G, nodelist=list(G.nodes()), dtype=np.uint8, weight=None)
    np.fill_diagonal(A, 0)
    if n is not None and n > A.shape[0]:
        A = np.pad(A, ((0, n - A.shape[0]), (0, n - A.shape[0])))
    return A.astype(np.uint8)


def to_networkx(A) -> nx.Graph:
    return nx.from_numpy_array(np.asarray(A))


def pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``C(n, 2)`` node pairs ``(i, j)``, ``i < j``, in pair-index order."""
    return np.triu_indices(n, 1)


def upper(A: np.ndarray) -> np.ndarray:
    """The upper-triangle vector(s) of ``A`` (last two axes), pair-index order."""
    i, j = pairs(A.shape[-1])
    return A[..., i, j]


def from_upper(v: np.ndarray, n: int) -> np.ndarray:
    """Adjacency from upper-triangle vector(s)."""
    i, j = pairs(n)
    A = np.zeros(v.shape[:-1] + (n, n), dtype=np.uint8)
    A[..., i, j] = v
    A[..., j, i] = v
    return A


# ---------------------------------------------------------------------------- flips
def flip(A, F: Iterable[int]) -> np.ndarray:
    """``G (+) F``: toggle the pairs of ``F`` (pair indices)."""
    A = check_adjacency(A)
    F = np.asarray(list(F), dtype=np.int64)
    m = n_pairs(A.shape[0])
    if F.size and (F.min() < 0 or F.max() >= m):
        raise ValueError(f"F must hold pair indices in [0, {m}), got {F.tolist()}")
    if len(set(F.tolist())) != F.size:
        raise ValueError("F must not repeat a pair")
    out = A.copy()
    i, j = pairs(A.shape[0])
    out[i[F], j[F]] ^= 1
    out[j[F], i[F]] ^= 1
    return out


def flip_sets(m: int, r: int) -> np.ndarray:
    """All flip sets of size exactly ``r`` over ``m`` pairs, shape ``(C(m, r), r)``."""
    r = check_scalar(r, "r", int, min=0, max=m)
    count = math.comb(m, r)
    out = np.fromiter(
        itertools.chain.from_iterable(itertools.combinations(range(m), r)), dtype=np.int64, count=count * r
    )
    return out.reshape(count, r)


def flip_batch(A: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """``G (+) F`` for every row ``F`` of ``sets`` (shape (S, r)); returns ``S x n x n`` uint8."""
    n = A.shape[0]
    i, j = pairs(n)
    S, r = sets.shape
    out = np.broadcast_to(A, (S, n, n)).copy()
    if r:
        rows = np.repeat(np.arange(S), r)
        ii, jj = i[sets.ravel()], j[sets.ravel()]
        out[rows, ii, jj] ^= 1
        out[rows, jj, ii] ^= 1
    return out


def flip_mask_batch(A: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``G (+) F`` for boolean pair masks ``mask`` of shape ``(S, C(n, 2))``."""
    n = A.shape[0]
    v = upper(A)[None, :] ^ mask.astype(np.uint8)
    return from_upper(v, n)


# ---------------------------------------------------------------------------- noise channels
def noise_masks(
    A,
    p: float | None = None,
    n_samples: int = 1,
    rng=None,
    p_add: float | None = None,
    p_del: float | None = None,
) -> np.ndarray:
    """Boolean flip masks ``(n_samples, C(n, 2))`` drawn from ``N_p`` or ``N_{p+,p-}``.

    Give ``p`` (symmetric channel) or both ``p_add`` and ``p_del``.
    """
    A = check_adjacency(A)
    n_samples = check_scalar(n_samples, "n_samples", int, min=1)
    rng = np.random.default_rng(rng)
    m = n_pairs(A.shape[0])
    if p is not None:
        if p_add is not None or p_del is not None:
            raise ValueError("give p, or p_add and p_del, not both")
        p = check_probability(p, "p")
        return rng.random((n_samples, m)) < p
    if p_add is None or p_del is None:
        raise ValueError("give p (symmetric channel) or both p_add and p_del")
    p_add, p_del = check_probability(p_add, "p_add"), check_probability(p_del, "p_del")
    edge = upper(A).astype(bool)
    prob = np.where(edge, p_del, p_add)
    return rng.random((n_samples, m)) < prob[None, :]


def noisy_graphs(
    A,
    p: float | None = None,
    n_samples: int = 1,
    rng=None,
    p_add: float | None = None,
    p_del: float | None = None,
) -> np.ndarray:
    """Samples ``G~ ~ N_p(G)`` (or ``N_{p+,p-}``) as ``n_samples x n x n``."""
    A = check_adjacency(A)
    return flip_mask_batch(A, noise_masks(A, p, n_samples, rng, p_add, p_del))


# ---------------------------------------------------------------------------- families
_FAMILY_CACHE: dict[bytes, tuple[int, ...]] = {}


def _kept_indices(mats: list[np.ndarray], name: str, dedupe: bool) -> tuple[int, ...]:
    nxs = [to_networkx(a) for a in mats]
    spectra = [np.linalg.eigvalsh(a.astype(np.float64)) for a in mats]
    kept: list[int] = []
    buckets: dict[tuple, list[int]] = {}
    for k, g in enumerate(nxs):
        key = (g.number_of_nodes(), g.number_of_edges(), nx.weisfeiler_lehman_graph_hash(g, iterations=3))
        # different spectra prove non-isomorphism; only cospectral WL-equal graphs go to VF2
        dup = next(
            (
                o
                for o in buckets.get(key, [])
                if np.abs(spectra[o] - spectra[k]).max() < 1e-6 and nx.is_isomorphic(nxs[o], g)
            ),
            None,
        )
        if dup is not None:
            if dedupe:
                continue
            raise ValueError(f"{name} holds isomorphic duplicates: graphs {dup} and {k}")
        buckets.setdefault(key, []).append(k)
        kept.append(k)
    return tuple(kept)


def check_family(graphs: Sequence, name: str = "family", dedupe: bool = False) -> list[np.ndarray]:
    """A family of pairwise non-isomorphic graphs as a list of adjacency matrices.

    Raises on an empty family, and on isomorphic duplicates naming the pair (indices), unless
    ``dedupe`` (then later duplicates are dropped). Isomorphism: buckets by (n, |E|, WL hash), a
    spectrum test, then ``nx.is_isomorphic``; the verdict is cached by the family's bytes.
    """
    if graphs is None or len(graphs) == 0:
        raise ValueError(f"{name} must hold at least one graph (it is empty)")
    mats = [check_adjacency(g, f"{name}[{k}]") for k, g in enumerate(graphs)]
    key = b"".join(np.asarray(a.shape, dtype=np.int64).tobytes() + a.tobytes() for a in mats)
    key = hashlib.sha256(key).digest() + bytes([dedupe])
    if key not in _FAMILY_CACHE:
        _FAMILY_CACHE[key] = _kept_indices(mats, name, dedupe)
    return [mats[k] for k in _FAMILY_CACHE[key]]


def stack_family(graphs: Sequence[np.ndarray]) -> np.ndarray:
    """Stack a family into ``M x n x n``, padding smaller graphs with isolated nodes."""
    n = max(g.shape[0] for g in graphs)
    out = np.zeros((len(graphs), n, n), dtype=np.uint8)
    for k, g in enumerate(graphs):
        out[k, : g.shape[0], : g.shape[0]] = g
    return out


def degrees(A: np.ndarray) -> np.ndarray:
    return np.asarray(A).sum(-1)
