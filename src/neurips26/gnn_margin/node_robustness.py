"""Node-level certified robustness (spec §5): margin-Lipschitz certificate, randomized smoothing with
Bernoulli flips, and empirical attacks (upper bounds on the true radius).

Node classifier: ``z_u = W_o h_u^L + b``, label y, margin ``m_u = z_{u,y} - max_{c != y} z_{u,c}``.

1. Margin-Lipschitz: certified at budget r iff ``m_u > max_{c != y} ||w_y - w_c||_2 * delta_L(r)``
   (``delta_L`` the node-wise bound of the embedding, valid for every u). Radius = the largest such r
   (-1: misclassified).
2. Smoothing (Wang et al. KDD 2021 / Lee et al. 2019): ``g(G)_u = argmax_c P[f(G (+) eps)_u = c]``,
   ``eps_e ~ Bernoulli(beta)`` on every pair. ``n0`` samples pick c_A, ``n`` samples give the one-sided
   Clopper-Pearson bound ``p_A = Beta.ppf(alpha, k, n - k + 1)`` (abstain if p_A <= 1/2), p_B = 1 - p_A.
   For ``||delta||_0 = r`` only the r changed pairs matter; region k (the noisy graph agrees with G on
   k of them) has mass ``C(r,k)(1-beta)^k beta^(r-k)`` under G and ``C(r,k) beta^k (1-beta)^(r-k)``
   under G', ratio ``((1-beta)/beta)^(2k-r)``. Neyman-Pearson: fill regions by decreasing ratio up to
   G-mass p_A (fractional last region) -> a lower bound on P_G'[A]; by increasing ratio up to p_B ->
   an upper bound on P_G'[B]; certified iff lower > upper.
3. Attacks: exhaustive over all flip sets of size 1 (and 2 when C(n,2) <= 600), batched; greedy
   sequential flips (each step the flip with the largest drop of m_u) beyond.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
from scipy import stats
from torch import nn

from neurips26.gnn_margin.embeddings import GraphEmbedding
from neurips26.gnn_margin.graphs import check_adjacency, flip_batch, flip_mask_batch, flip_sets, n_pairs
from neurips26.harness.validation import check_array, check_scalar

EXHAUSTIVE_PAIR_LIMIT = 600


class NodeClassifier(nn.Module):
    """An embedding's node states ``h^L`` followed by a linear head."""

    def __init__(self, embedding: GraphEmbedding, n_classes: int):
        super().__init__()
        if not isinstance(embedding, GraphEmbedding):
            raise TypeError(f"embedding must be a GraphEmbedding, got {type(embedding).__name__}")
        self.embedding = embedding
        self.n_classes = check_scalar(n_classes, "n_classes", int, min=2)
        self.head = nn.Linear(embedding.width, self.n_classes).to(embedding.dtype)

    def forward(self, A, X=None, validate: bool = True) -> torch.Tensor:
        """Logits ``B x n x C``."""
        return self.head(self.embedding.node_embeddings(A, X, validate))


def check_labels(y, n: int, n_classes: int | None = None) -> np.ndarray:
    y = check_array(y, "y", ndim=1, dtype=int, shape=(n,))
    if y.min() < 0 or (n_classes is not None and y.max() >= n_classes):
        raise ValueError(f"y must hold class indices in [0, {n_classes}), got range [{y.min()}, {y.max()}]")
    return y


def margins(logits: torch.Tensor, y: np.ndarray) -> torch.Tensor:
    """``m_u = z_{u,y} - max_{c != y} z_{u,c}`` (last dim: classes)."""
    yt = torch.as_tensor(y, dtype=torch.long).expand(logits.shape[:-1])
    own = logits.gather(-1, yt[..., None])[..., 0]
    other = logits.scatter(-1, yt[..., None], -math.inf).max(-1).values
    return own - other


# ---------------------------------------------------------------------------- 1. margin-Lipschitz
@torch.no_grad()
def lipschitz_certificate(clf: NodeClassifier, A, y, r_max: int = 3) -> np.ndarray:
    """Certified radius per node (-1 misclassified, 0 correct but no flip certified, ...)."""
    A = check_adjacency(A)
    n = A.shape[0]
    y = check_labels(y, n, clf.n_classes)
    r_max = check_scalar(r_max, "r_max", int, min=0, max=n_pairs(n))
    m = margins(clf(A)[0].double(), y).numpy()
    W = clf.head.weight.detach().double()
    lip = np.array(
        [
            max(float((W[c] - W[k]).norm()) for k in range(clf.n_classes) if k != c)
            for c in range(clf.n_classes)
        ]
    )[y]
    radius = np.where(m > 0, 0, -1)
    for r in range(1, r_max + 1):
        delta = clf.embedding.node_bounds(A, r)[-1]
        ok = (radius == r - 1) & (m > lip * delta)
        if not ok.any():
            break
        radius[ok] = r
    return radius


# ---------------------------------------------------------------------------- 2. smoothing
def clopper_pearson_lower(k: int, n: int, alpha: float) -> float:
    """One-sided (1 - alpha) Clopper-Pearson lower bound on a binomial proportion."""
    return 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))


def _np_fill(p_mass: float, mass_g: np.ndarray, mass_gp: np.ndarray, order: np.ndarray) -> float:
    """G'-mass of the regions taken in ``order`` until their G-mass reaches ``p_mass`` (fractional)."""
    total, got = 0.0, 0.0
    for k in order:
        if got >= p_mass:
            break
        take = min(1.0, (p_mass - got) / mass_g[k]) if mass_g[k] > 0 else 1.0
        got += take * mass_g[k]
        total += take * mass_gp[k]
    return total


def smoothing_bounds(p_a: float, beta: float, r: int) -> tuple[float, float]:
    """Neyman-Pearson (lower bound on P_G'[A], upper bound on P_G'[B]) for ``||delta||_0 = r``."""
    p_a = check_scalar(p_a, "p_a", float, min=0.0, max=1.0)
    beta = check_scalar(beta, "beta", float, min=0.0, max=0.5, inclusive="right")
    r = check_scalar(r, "r", int, min=0)
    k = np.arange(r + 1)
    mass_g = stats.binom.pmf(k, r, 1 - beta)  # k agreements with G
    mass_gp = stats.binom.pmf(k, r, beta)  # under G' the same region has k agreements with G
    order_desc = np.argsort(-(2 * k - r), kind="stable")  # decreasing ratio ((1-beta)/beta)^(2k-r)
    lower_a = _np_fill(p_a, mass_g, mass_gp, order_desc)
    upper_b = _np_fill(1 - p_a, mass_g, mass_gp, order_desc[::-1])
    return lower_a, upper_b


def smoothing_radius(p_a: float, beta: float, r_max: int = 50) -> int:
    """Largest certified ``r`` (-1: abstain, p_A <= 1/2)."""
    if p_a <= 0.5:
        return -1
    r = 0
    while r < r_max:
        lo, up = smoothing_bounds(p_a, beta, r + 1)
        if not lo > up:
            break
        r += 1
    return r


def brute_force_bounds(p_a: float, beta: float, r: int, D: int) -> tuple[float, float]:
    """The same Neyman-Pearson bounds by enumerating all ``2^D`` noise outcomes on D positions, of which
    G' differs from G on the first r (the reference the k-region form is tested against)."""
    D = check_scalar(D, "D", int, min=1, max=16)
    if r > D:
        raise ValueError(f"r must be <= D, got r = {r}, D = {D}")
    z = np.array(list(itertools.product([0, 1], repeat=D)), dtype=np.int64)  # 1 = noisy pair differs from G
    g_prime = np.zeros(D, dtype=np.int64)
    g_prime[:r] = 1
    flips_g = z.sum(1)
    flips_gp = (z ^ g_prime).sum(1)
    pg = beta**flips_g * (1 - beta) ** (D - flips_g)
    pgp = beta**flips_gp * (1 - beta) ** (D - flips_gp)
    ratio = np.log(pg) - np.log(pgp)
    desc = np.argsort(-ratio, kind="stable")
    return _np_fill(p_a, pg, pgp, desc), _np_fill(1 - p_a, pg, pgp, desc[::-1])


@torch.no_grad()
def _votes(clf: NodeClassifier, A: np.ndarray, beta: float, n_samples: int, rng, batch: int) -> np.ndarray:
    n = A.shape[0]
    counts = np.zeros((n, clf.n_classes), dtype=np.int64)
    done = 0
    while done < n_samples:
        b = min(batch, n_samples - done)
        masks = rng.random((b, n_pairs(n))) < beta
        pred = clf(flip_mask_batch(A, masks), validate=False).argmax(-1).numpy()  # b x n
        for c in range(clf.n_classes):
            counts[:, c] += (pred == c).sum(0)
        done += b
    return counts


def smoothing_certify(
    clf: NodeClassifier,
    A,
    beta: float = 0.1,
    n0: int = 100,
    n: int = 1000,
    alpha: float = 0.01,
    seed: int = 0,
    r_max: int = 50,
    batch: int = 500,
) -> dict:
    """Randomized-smoothing certificate per node: predicted class c_A (-1 abstain), p_A, radius."""
    A = check_adjacency(A)
    beta = check_scalar(beta, "beta", float, min=0.0, max=0.5, inclusive="neither")
    n0 = check_scalar(n0, "n0", int, min=1)
    n = check_scalar(n, "n", int, min=1)
    if n0 >= n:
        raise ValueError(
            f"n0 must be < n (selection samples fewer than estimation samples), got n0 = {n0}, n = {n}"
        )
    alpha = check_scalar(alpha, "alpha", float, min=0.0, max=1.0, inclusive="neither")
    rng = np.random.default_rng(seed)
    c_a = _votes(clf, A, beta, n0, rng, batch).argmax(1)
    counts = _votes(clf, A, beta, n, rng, batch)
    k = counts[np.arange(A.shape[0]), c_a]
    p_a = np.array([clopper_pearson_lower(int(x), n, alpha) for x in k])
    radius = np.array([smoothing_radius(float(p), beta, r_max) for p in p_a])
    pred = np.where(radius >= 0, c_a, -1)
    return {"pred": pred, "p_a": p_a, "radius": radius}


# ---------------------------------------------------------------------------- 3. attacks
@torch.no_grad()
def _margins_batch(clf, graphs: np.ndarray, y: np.ndarray, batch: int) -> np.ndarray:
    out = []
    for s in range(0, len(graphs), batch):
        out.append(margins(clf(graphs[s : s + batch], validate=False).double(), y).numpy())
    return np.concatenate(out) if out else np.zeros((0, len(y)))


def exhaustive_attack(clf: NodeClassifier, A, y, r: int = 1, batch: int = 2048) -> np.ndarray:
    """Per node, True if some flip set of size exactly ``r`` makes it misclassified (m_u <= 0)."""
    A = check_adjacency(A)
    y = check_labels(y, A.shape[0], clf.n_classes)
    m = n_pairs(A.shape[0])
    r = check_scalar(r, "r", int, min=1, max=m)
    if r >= 2 and m > EXHAUSTIVE_PAIR_LIMIT:
        raise ValueError(
            f"exhaustive r = {r} needs C(n,2) <= {EXHAUSTIVE_PAIR_LIMIT}, got {m}; use greedy_attack"
        )
    broken = np.zeros(A.shape[0], dtype=bool)
    sets = flip_sets(m, r)
    for s in range(0, len(sets), batch * 8):
        mm = _margins_batch(clf, flip_batch(A, sets[s : s + batch * 8]), y, batch)
        broken |= (mm <= 0).any(0)
    return broken


def greedy_attack(clf: NodeClassifier, A, y, node: int, budget: int, batch: int = 2048) -> int:
    """Greedy flips against ``node``: the size of the first flip set that breaks it, or ``budget + 1``."""
    A = check_adjacency(A)
    y = check_labels(y, A.shape[0], clf.n_classes)
    budget = check_scalar(budget, "budget", int, min=1)
    m = n_pairs(A.shape[0])
    single = flip_sets(m, 1)
    cur = A.copy()
    used: set[int] = set()
    for step in range(1, budget + 1):
        mm = _margins_batch(clf, flip_batch(cur, single), y, batch)[:, node]
        mm[list(used)] = math.inf
        e = int(mm.argmin())
        if mm[e] <= 0:
            return step
        used.add(e)
        cur = flip_batch(cur, single[e : e + 1])[0]
    return budget + 1


def empirical_node_radius(
    clf: NodeClassifier, A, y, r_exhaustive: int = 1, greedy_budget: int = 3, nodes=None
) -> np.ndarray:
    """Upper bound on each node's true radius: -1 misclassified; else (smallest breaking size) - 1 from
    exhaustive search up to ``r_exhaustive`` then greedy up to ``greedy_budget`` (censored there)."""
    A = check_adjacency(A)
    y = check_labels(y, A.shape[0], clf.n_classes)
    with torch.no_grad():
        m0 = margins(clf(A)[0].double(), y).numpy()
    nodes = np.arange(A.shape[0]) if nodes is None else np.asarray(nodes)
    radius = np.full(A.shape[0], greedy_budget)
    radius[m0 <= 0] = -1
    alive = m0 > 0
    for r in range(1, r_exhaustive + 1):
        hit = exhaustive_attack(clf, A, y, r) & alive
        radius[hit] = r - 1
        alive &= ~hit
    for u in nodes:
        if alive[u] and greedy_budget > r_exhaustive:
            k = greedy_attack(clf, A, y, int(u), greedy_budget)
            if k <= greedy_budget:  # k > r_exhaustive: every smaller set was searched exhaustively
                radius[u] = k - 1
    return radius[nodes]
