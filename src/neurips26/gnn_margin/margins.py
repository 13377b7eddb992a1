"""Noisy alignment, margins and the graph-level robustness radius (spec §2; ASSUMPTION on the exact form).

Family ``G = {G_1..G_M}`` (pairwise non-isomorphic), embedding f, norm ||.|| (l2; l1 for f_WL):

1. Identifiable perturbation of source G: ``d_F(G~, G) < min_{H != G} d_F(G~, H)`` (exact d_F, n <= 8;
   for larger n the sufficient rule ``|F| < delta_F(G) / 2``).
2. Alignment margin ``a_f(G~; G) = min_{H != G} ||f(G~) - f(H)|| - ||f(G~) - f(G)||``; aligned iff > 0.
3. ``f`` is (G, r)-noisy-expressive iff every identifiable G~ with |F| <= r is aligned. Empirical radius
   ``r_emp(G)`` = the largest r with that property for G (exhaustive, censored at ``r_max``; -1 when
   G itself is not aligned, i.e. gamma = 0).
4. Embedding margin ``gamma_f(G) = 1/2 min_{H != G} ||f(G) - f(H)||``. With r = 0, aligned for all G
   <=> ``gamma_f(G) > 0`` for all G (the isomorphism limit).
5. Radius: ``r*(G) = max{r : beta_f(G, r) < gamma_f(G)}`` (triangle inequality; -1 when gamma = 0).
   Under N_p: ``P[aligned] >= BinomCDF(r*; C(n,2), p)``; the conditional alpha obeys it when r* <= r_comb.
6. Normalised margin ``gamma_f(G) / L1_hat(G)``, ``L1_hat(G) = max_e ||f(G (+) e) - f(G)||`` (exact over
   the C(n, 2) single flips). A predictor, not a certificate.
7. Alignment probability ``alpha_f(G; p) = P_{G~ ~ N_p(G)}[aligned | identifiable]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from scipy import stats

from neurips26.gnn_margin.flip_distance import EXACT_MAX_N, flip_distance_matrix
from neurips26.gnn_margin.graphs import (
    check_adjacency,
    check_family,
    check_probability,
    flip_batch,
    flip_sets,
    n_pairs,
    noise_masks,
    flip_mask_batch,
    stack_family,
)
from neurips26.harness.parallel import map_tasks
from neurips26.harness.validation import check_choice, check_scalar

NORMS = ("l2", "l1")
# distances below TOL * (1 + max |f|) are rounding noise and count as 0 (forward passes in float64
# leave ~1e-15; float32 ~1e-6 -- use float64 models for margins, spec X1)
TOL = 1e-9


def snap(x: np.ndarray, scale: float) -> np.ndarray:
    """``x`` with entries of magnitude <= ``TOL * (1 + scale)`` set to exactly 0."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.abs(x) <= TOL * (1.0 + scale), 0.0, x)


def _scale(*embs: torch.Tensor) -> float:
    return max(float(e.abs().max()) if e.numel() else 0.0 for e in embs)


def norm_of(f) -> str:
    """The embedding's distance: its ``norm`` attribute (``l1`` for f_WL), else l2."""
    return getattr(f, "norm", "l2")


@torch.no_grad()
def embed(f, graphs: np.ndarray, batch_size: int = 8192) -> torch.Tensor:
    """``f`` on a ``B x n x n`` batch in chunks, float64, no gradient (graphs already validated)."""
    chunks = []
    for s in range(0, len(graphs), batch_size):
        chunks.append(f(graphs[s : s + batch_size], validate=False).double())
    width = max(c.shape[1] for c in chunks)
    return torch.cat([pad(c, width) for c in chunks])


def pad(x: torch.Tensor, width: int) -> torch.Tensor:
    """Zero-pad embeddings to ``width`` columns (f_WL grows its vocabulary; a no-op for MPNNs)."""
    return x if x.shape[1] == width else torch.nn.functional.pad(x, (0, width - x.shape[1]))


def distances(x: torch.Tensor, y: torch.Tensor, norm: str = "l2") -> torch.Tensor:
    """Pairwise ``||x_i - y_j||`` (l2 or l1), float64; ``x`` and ``y`` are zero-padded to one width."""
    check_choice(norm, "norm", NORMS)
    w = max(x.shape[1], y.shape[1])
    x, y = pad(x.double(), w), pad(y.double(), w)
    return torch.cdist(x, y, p=2.0 if norm == "l2" else 1.0)


def _family(family) -> np.ndarray:
    return stack_family(check_family(family))


def embedding_margin(f, family, norm: str | None = None) -> np.ndarray:
    """``gamma_f(G) = 1/2 min_{H != G} ||f(G) - f(H)||`` for every member; shape (M,)."""
    fam = _family(family)
    if len(fam) < 2:
        raise ValueError("family must hold at least two graphs for a margin")
    E = embed(f, fam)
    D = distances(E, E, norm or norm_of(f))
    D.fill_diagonal_(math.inf)
    return snap(0.5 * D.min(1).values.numpy(), _scale(E))


def alignment_margins(
    emb: torch.Tensor, family_emb: torch.Tensor, source: np.ndarray, norm: str = "l2"
) -> np.ndarray:
    """``a_f(G~_s; G_source[s])`` for every sample s; aligned iff > 0."""
    D = distances(emb, family_emb, norm)
    src = torch.as_tensor(np.asarray(source, dtype=np.int64))
    own = D.gather(1, src[:, None])[:, 0]
    D = D.scatter(1, src[:, None], math.inf)
    return snap((D.min(1).values - own).numpy(), _scale(emb, family_emb))


def lipschitz_hat(f, A, norm: str | None = None) -> float:
    """``L1_hat(G) = max over the C(n,2) single flips e of ||f(G (+) e) - f(G)||``."""
    A = check_adjacency(A)
    pert = flip_batch(A, flip_sets(n_pairs(A.shape[0]), 1))
    E = embed(f, np.concatenate([A[None], pert]))
    return float(distances(E[:1], E[1:], norm or norm_of(f)).max())


def normalised_margin(f, family, norm: str | None = None) -> np.ndarray:
    """``gamma_f(G) / L1_hat(G)`` for every member (0 where gamma = 0)."""
    fam = _family(family)
    gamma = embedding_margin(f, fam, norm)
    L = np.array([lipschitz_hat(f, A, norm) for A in fam])
    return np.where(gamma > 0, gamma / np.maximum(L, 1e-300), 0.0)


def certified_radius(f, A, gamma: float, r_max: int | None = None) -> int:
    """``r*(G) = max{r <= r_max : beta_f(G, r) < gamma}`` from ``f.graph_bound``; -1 when gamma = 0."""
    A = check_adjacency(A)
    gamma = check_scalar(gamma, "gamma", float, min=0.0)
    m = n_pairs(A.shape[0])
    r_max = m if r_max is None else check_scalar(r_max, "r_max", int, min=0, max=m)
    if gamma <= 0:
        return -1
    r = 0
    while r < r_max and f.graph_bound(A, r + 1) < gamma:
        r += 1
    return r


def alignment_lower_bound(r_star: int, n: int, p: float) -> float:
    """``P_{G~ ~ N_p(G)}[aligned] >= BinomCDF(r*; C(n,2), p)`` (0 when r* < 0)."""
    p = check_probability(p)
    if r_star < 0:
        return 0.0
    return float(stats.binom.cdf(r_star, n_pairs(n), p))


# ---------------------------------------------------------------------------- identifiability
def identifiable(
    perturbed: np.ndarray,
    source: np.ndarray,
    family: np.ndarray,
    flips: np.ndarray | None = None,
    separation: np.ndarray | None = None,
) -> np.ndarray:
    """Which perturbed graphs are identifiable for their source (rule 1 of the module docstring)."""
    n = family.shape[-1]
    if n <= EXACT_MAX_N:
        D = flip_distance_matrix(perturbed, family).astype(float)
        own = D[np.arange(len(source)), source]
        D[np.arange(len(source)), source] = np.inf
        return own < D.min(1)
    if flips is None or separation is None:
        raise ValueError(
            f"for n > {EXACT_MAX_N} identifiability needs flips and separation "
            f"(the sufficient rule |F| < delta_F / 2)"
        )
    return 2 * np.asarray(flips) < np.asarray(separation)[source]


@dataclass
class ExhaustivePerturbations:
    """Every flip set with 1 <= |F| <= r_max of every member, with its identifiability (model-free,
    computed once per family and reused for every embedding)."""

    family: np.ndarray
    r_max: int
    graphs: np.ndarray  # S x n x n
    source: np.ndarray  # S
    size: np.ndarray  # |F| of each
    ident: np.ndarray  # S bool

    @classmethod
    def build(cls, family, r_max: int, sources: Sequence[int] | None = None) -> "ExhaustivePerturbations":
        """All perturbations of the members ``sources`` (default: every member)."""
        fam = _family(family)
        n = fam.shape[-1]
        r_max = check_scalar(r_max, "r_max", int, min=0, max=n_pairs(n))
        sources = (
            range(len(fam))
            if sources is None
            else [check_scalar(k, "source", int, min=0, max=len(fam) - 1) for k in sources]
        )
        gs, src, size = [], [], []
        for r in range(1, r_max + 1):
            sets = flip_sets(n_pairs(n), r)
            for k in sources:
                A = fam[k]
                gs.append(flip_batch(A, sets))
                src.append(np.full(len(sets), k))
                size.append(np.full(len(sets), r))
        if not gs:
            z = np.zeros(0, dtype=np.int64)
            return cls(fam, r_max, np.zeros((0, n, n), np.uint8), z, z, z.astype(bool))
        graphs, source, size_ = np.concatenate(gs), np.concatenate(src), np.concatenate(size)
        return cls(fam, r_max, graphs, source, size_, identifiable(graphs, source, fam))

    def empirical_radius(self, f, norm: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``r_emp`` per member (-1: not aligned clean; ``r_max``: censored) and the alignment margins
        of every perturbed graph."""
        norm = norm or norm_of(f)
        E_fam = embed(f, self.family)
        E = embed(f, self.graphs) if len(self.graphs) else E_fam[:0]
        a = alignment_margins(E, E_fam, self.source, norm) if len(self.graphs) else np.zeros(0)
        D = distances(E_fam, E_fam, norm)
        D.fill_diagonal_(math.inf)
        clean_ok = snap(D.min(1).values.numpy(), _scale(E_fam)) > 0
        r_emp = np.full(len(self.family), self.r_max)
        for k in range(len(self.family)):
            if not clean_ok[k]:
                r_emp[k] = -1
                continue
            bad = (self.source == k) & self.ident & (a <= 0)
            if bad.any():
                r_emp[k] = int(self.size[bad].min()) - 1
        return r_emp, a


def is_noisy_expressive(f, family, r: int) -> bool:
    """Whether ``f`` is (family, r)-noisy-expressive: every identifiable ``G (+) F``, ``|F| <= r``, of every
    member is aligned (exhaustive; r = 0 is the isomorphism limit ``gamma_f(family) > 0``)."""
    r_emp, _ = ExhaustivePerturbations.build(family, r).empirical_radius(f)
    return bool((r_emp >= r).all())


def _radius_task(task: tuple) -> int:
    """One member's r_emp (a module-level task for ``map_tasks``)."""
    f, family, k, r_max = task
    return int(ExhaustivePerturbations.build(family, r_max, sources=[k]).empirical_radius(f)[0][k])


def parallel_empirical_radius(
    f, family, r_max: int, backend: str = "auto", workers: int | None = None
) -> np.ndarray:
    """``r_emp`` of every member as independent tasks per graph (``harness.parallel.map_tasks``: a
    process pool, or Ray when a cluster is running); equal to ``ExhaustivePerturbations.empirical_radius``
    (each member's radius depends only on its own perturbations)."""
    fam = list(_family(family))
    tasks = [(f, fam, k, r_max) for k in range(len(fam))]
    return np.array(map_tasks(_radius_task, tasks, backend=backend, workers=workers, desc="r_emp"))


@dataclass
class NoisySamples:
    """``n_samples`` draws of ``N_p`` around every member, with their identifiability (model-free)."""

    family: np.ndarray
    p: float
    graphs: np.ndarray
    source: np.ndarray
    size: np.ndarray
    ident: np.ndarray

    @classmethod
    def draw(cls, family, p: float, n_samples: int = 200, seed: int = 0) -> "NoisySamples":
        fam = _family(family)
        p = check_probability(p)
        n_samples = check_scalar(n_samples, "n_samples", int, min=1)
        if fam.shape[-1] > EXACT_MAX_N:
            raise ValueError(
                f"NoisySamples needs exact identifiability (n <= {EXACT_MAX_N}), got n = {fam.shape[-1]}"
            )
        rng = np.random.default_rng(seed)
        gs, src, size = [], [], []
        for k, A in enumerate(fam):
            masks = noise_masks(A, p, n_samples, rng)
            gs.append(flip_mask_batch(A, masks))
            src.append(np.full(n_samples, k))
            size.append(masks.sum(1))
        graphs, source, size_ = np.concatenate(gs), np.concatenate(src), np.concatenate(size)
        return cls(fam, p, graphs, source, size_, identifiable(graphs, source, fam))

    def alignment_probability(self, f, norm: str | None = None) -> dict:
        """Per member: ``alpha`` (aligned | identifiable), the unconditional P[aligned], and the
        identifiable fraction; plus their min/mean over the family."""
        norm = norm or norm_of(f)
        E_fam = embed(f, self.family)
        a = alignment_margins(embed(f, self.graphs), E_fam, self.source, norm)
        M = len(self.family)
        alpha, uncond, frac = np.zeros(M), np.zeros(M), np.zeros(M)
        for k in range(M):
            s = self.source == k
            idk = s & self.ident
            alpha[k] = float((a[idk] > 0).mean()) if idk.any() else math.nan
            uncond[k] = float((a[s] > 0).mean())
            frac[k] = float(idk.sum() / s.sum())
        return {
            "alpha": alpha,
            "aligned": uncond,
            "identifiable": frac,
            "alpha_min": float(np.nanmin(alpha)) if np.isfinite(alpha).any() else math.nan,
            "alpha_mean": float(np.nanmean(alpha)) if np.isfinite(alpha).any() else math.nan,
        }


def radii(f, family, r_max: int | None = None) -> dict:
    """gamma, L1_hat, gamma / L1_hat and r* for every member of ``family``."""
    fam = _family(family)
    gamma = embedding_margin(f, fam)
    L = np.array([lipschitz_hat(f, A) for A in fam])
    r_star = np.array([certified_radius(f, A, float(g), r_max) for A, g in zip(fam, gamma)])
    normalised = np.where(gamma > 0, gamma / np.maximum(L, 1e-300), 0.0)
    return {"gamma": gamma, "l1_hat": L, "normalised": normalised, "r_star": r_star}


def spearman(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """``scipy.stats.spearmanr`` (rho, p); NaN when either side is constant."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan, math.nan
    res = stats.spearmanr(x, y)
    return float(res.statistic), float(res.pvalue)
