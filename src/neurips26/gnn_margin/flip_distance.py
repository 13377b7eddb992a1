"""The flip distance d_F and its bounds (spec §1).

    d_F(G, H) = min_{pi bijection} #{pairs where A_G and pi(A_H) differ}
              = min_P  1/2 ||A_G - P A_H P^T||_F^2 = |E_G| + |E_H| - max_P trace(A_G P A_H P^T)

(graph edit distance with edge edits only; a smaller graph is padded with isolated nodes).

1. Exact, n <= 8: every graph's upper triangle is a bit code (C(n,2) <= 28 bits); all ``n!`` permuted
   codes of H are built once, and ``d_F = min_pi popcount(code(G) xor code(pi H))`` (``np.bitwise_count``).
2. Lower bounds (rigorous; any n):
   (a) degree: ``1/2 ||sort(deg G) - sort(deg H)||_1`` (one flip moves two degrees by one);
   (b) Hoffman-Wielandt: ``1/2 ||lambda(A_G) - lambda(A_H)||_2^2`` (sorted eigenvalues;
       ``||lambda(A) - lambda(B)||_2 <= ||A - B||_F`` for symmetric matrices).
3. Upper bound: ``d_F(P)`` of the permutation ``scipy.optimize.quadratic_assignment`` (method ``faq``,
   ``maximize=True`` on ``trace(A_G P A_H P^T)``) finds, best over several seeds.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from typing import Sequence

import numpy as np
from scipy.optimize import quadratic_assignment

from neurips26.gnn_margin.graphs import check_adjacency, pairs, stack_family
from neurips26.harness.validation import check_scalar

EXACT_MAX_N = 8


@lru_cache(maxsize=None)
def permutations(n: int) -> np.ndarray:
    """All ``n!`` permutations of ``range(n)``, ``(n!, n)`` int8."""
    return np.array(list(itertools.permutations(range(n))), dtype=np.int8)


def _check_exact_n(n: int) -> None:
    if n > EXACT_MAX_N:
        raise ValueError(
            f"exact d_F enumerates n! permutations and is allowed for n <= {EXACT_MAX_N}, "
            f"got n = {n}; use degree_lower_bound / spectral_lower_bound / qap_upper_bound"
        )


def codes(A: np.ndarray) -> np.ndarray:
    """Bit code of the upper triangle of each graph in ``A`` (``... x n x n``), uint32."""
    n = A.shape[-1]
    i, j = pairs(n)
    bits = A[..., i, j].astype(np.uint32)
    return (bits << np.arange(i.size, dtype=np.uint32)).sum(-1).astype(np.uint32)


def permuted_codes(A: np.ndarray) -> np.ndarray:
    """Codes of ``pi(A)`` for every permutation pi: ``(n!,)`` for one graph, ``(M, n!)`` for a batch."""
    n = A.shape[-1]
    P = permutations(n).astype(np.int64)
    batch = A[..., P[:, :, None], P[:, None, :]]  # (..., n!, n, n)
    return codes(batch)


def _pad_pair(G: np.ndarray, H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if G.shape[0] == H.shape[0]:
        return G, H
    s = stack_family([G, H])
    return s[0], s[1]


def flip_distance(G, H) -> int:
    """Exact ``d_F(G, H)`` by enumerating permutations (n <= 8; a smaller graph is padded)."""
    G, H = _pad_pair(check_adjacency(G, "G"), check_adjacency(H, "H"))
    _check_exact_n(G.shape[0])
    return int(np.bitwise_count(codes(G) ^ permuted_codes(H)).min())


def flip_distance_matrix(graphs: Sequence, others: Sequence | None = None, block: int = 64) -> np.ndarray:
    """Exact ``d_F`` between every graph of ``graphs`` (rows) and of ``others`` (columns; default:
    ``graphs``), computed by row blocks of ``block`` graphs (each block is independent)."""
    rows = stack_family([check_adjacency(g, f"graphs[{k}]") for k, g in enumerate(graphs)])
    cols = (
        rows
        if others is None
        else stack_family([check_adjacency(g, f"others[{k}]") for k, g in enumerate(others)])
    )
    n = max(rows.shape[-1], cols.shape[-1])
    rows, cols = _pad_to(rows, n), _pad_to(cols, n)
    _check_exact_n(n)
    block = check_scalar(block, "block", int, min=1)
    pc = permuted_codes(cols)  # (M_cols, n!)
    rc = codes(rows)
    out = np.empty((rows.shape[0], cols.shape[0]), dtype=np.int64)
    for s in range(0, rows.shape[0], block):
        x = rc[s : s + block, None, None] ^ pc[None, :, :]
        out[s : s + block] = np.bitwise_count(x).min(-1)
    return out


def _pad_to(batch: np.ndarray, n: int) -> np.ndarray:
    if batch.shape[-1] == n:
        return batch
    k = n - batch.shape[-1]
    return np.pad(batch, ((0, 0), (0, k), (0, k)))


# ---------------------------------------------------------------------------- bounds
def degree_lower_bound(G, H) -> float:
    """``1/2 ||sort(deg G) - sort(deg H)||_1 <= d_F(G, H)``."""
    G, H = _pad_pair(check_adjacency(G, "G"), check_adjacency(H, "H"))
    return 0.5 * float(np.abs(np.sort(G.sum(0).astype(np.int64)) - np.sort(H.sum(0).astype(np.int64))).sum())


def spectral_lower_bound(G, H) -> float:
    """Hoffman-Wielandt: ``1/2 ||lambda(A_G) - lambda(A_H)||_2^2 <= d_F(G, H)``."""
    G, H = _pad_pair(check_adjacency(G, "G"), check_adjacency(H, "H"))
    lg = np.linalg.eigvalsh(G.astype(np.float64))
    lh = np.linalg.eigvalsh(H.astype(np.float64))
    return 0.5 * float(((lg - lh) ** 2).sum())


def lower_bound(G, H) -> int:
    """The best integer lower bound: ``ceil(max(degree, spectral))`` (with a 1e-9 float guard)."""
    lb = max(degree_lower_bound(G, H), spectral_lower_bound(G, H))
    return int(math.ceil(lb - 1e-9))


def permutation_distance(G: np.ndarray, H: np.ndarray, perm: np.ndarray) -> int:
    """``d_F(P) = #pairs where A_G and A_H[perm][:, perm] differ`` (an upper bound on d_F)."""
    Hp = H[np.ix_(perm, perm)]
    return int(np.abs(G.astype(np.int64) - Hp).sum() // 2)


def qap_upper_bound(G, H, seeds: Sequence[int] = (0, 1, 2, 3, 4)) -> int:
    """Upper bound ``d_F(P) >= d_F(G, H)`` from FAQ on ``max_P trace(A_G P A_H P^T)``, best over seeds."""
    G, H = _pad_pair(check_adjacency(G, "G"), check_adjacency(H, "H"))
    if len(seeds) == 0:
        raise ValueError("seeds must name at least one seed")
    best = None
    for s in seeds:
        # the first seed starts from the barycentre, the others from random doubly-stochastic points
        opts = {
            "maximize": True,
            "rng": np.random.default_rng(int(s)),
            "P0": "barycenter" if s == seeds[0] else "randomized",
        }
        res = quadratic_assignment(G.astype(np.float64), H.astype(np.float64), method="faq", options=opts)
        d = permutation_distance(G, H, np.asarray(res.col_ind))
        best = d if best is None else min(best, d)
    return int(best)
