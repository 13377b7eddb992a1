"""Families of graphs and the real graphs shipped by networkx (spec "Data"; nothing is downloaded).

- ``atlas_graphs(n)``: the n-node graphs of ``nx.graph_atlas_g()`` (connected by default: n = 5/6/7 ->
  21/112/853), in atlas order.
- ``codebook(n, d_min)``: greedy scan of those in atlas order, keeping a graph when its exact d_F to
  every kept one is ``>= d_min`` (n = 6: d_min 2/3/4/5 -> 57/16/11/5). ``r_comb = ceil(d_min/2) - 1``.
- ``csl_graphs``: circular skip links (Murphy et al. 2019): n = 41, edges (i, i+1), (i, i+s) mod 41,
  s in {2,3,4,5,6,9,11,12,13,16}; the 10 class representatives, plus seeded relabelings.
- ``wl_equivalent_pairs``: 1-WL-equivalent non-isomorphic pairs (C_2k vs 2 C_k, decalin vs
  bicyclopentyl, 4x4 rook vs Shrikhande, random regular pairs).
- ``sbm_graph``: node classification SBM (3 x 40, p_in 0.3, p_out 0.05); ``real_graph``: karate
  (``club`` labels), Les Miserables, Florentine families, Davis women; ``pyg_karate`` when PyG is installed.
- ``random_family``: G(n, p) graphs kept when the lower bounds certify pairwise d_F >= d_min.
"""

from __future__ import annotations

import math
from functools import lru_cache

import networkx as nx
import numpy as np

from neurips26.gnn_margin.flip_distance import flip_distance_matrix, lower_bound, permuted_codes, codes
from neurips26.gnn_margin.graphs import to_adjacency
from neurips26.harness.validation import check_choice, check_scalar

CSL_SKIPS = (2, 3, 4, 5, 6, 9, 11, 12, 13, 16)
REAL_GRAPHS = ("karate", "les_miserables", "florentine_families", "davis_southern_women")


@lru_cache(maxsize=None)
def _atlas() -> tuple:
    return tuple(nx.graph_atlas_g())


def atlas_graphs(n: int, connected: bool = True) -> list[np.ndarray]:
    """The n-node atlas graphs (atlas order) as adjacency matrices."""
    n = check_scalar(n, "n", int, min=1, max=7)
    return [
        to_adjacency(g)
        for g in _atlas()
        if g.number_of_nodes() == n and (not connected or (n > 0 and nx.is_connected(g)))
    ]


def codebook(n: int, d_min: int, connected: bool = True) -> list[np.ndarray]:
    """Greedy atlas codebook with pairwise exact d_F >= ``d_min`` (deterministic, atlas order)."""
    d_min = check_scalar(d_min, "d_min", int, min=1)
    graphs = atlas_graphs(n, connected)
    stack = np.stack(graphs)
    pc = permuted_codes(stack)  # (M, n!)
    c = codes(stack)
    kept: list[int] = []
    for k in range(len(graphs)):
        if not kept or np.bitwise_count(c[k] ^ pc[kept]).min() >= d_min:
            kept.append(k)
    return [graphs[k] for k in kept]


def r_comb(d_min: int) -> int:
    """Combinatorial identifiability radius ``ceil(delta/2) - 1`` of a family with separation delta."""
    return int(math.ceil(d_min / 2)) - 1


def separation(graphs) -> np.ndarray:
    """``delta_F(G) = min_{H != G} d_F(G, H)`` for every graph of the family (exact)."""
    D = flip_distance_matrix(graphs).astype(float)
    np.fill_diagonal(D, np.inf)
    return D.min(1).astype(int)


# ---------------------------------------------------------------------------- CSL
def csl_graph(skip: int, n: int = 41) -> np.ndarray:
    G = nx.cycle_graph(n)
    G.add_edges_from((i, (i + skip) % n) for i in range(n))
    return to_adjacency(G)


def csl_graphs(relabelings: int = 0, seed: int = 0, n: int = 41) -> tuple[list[np.ndarray], np.ndarray]:
    """The 10 CSL class representatives (``relabelings = 0``), or ``relabelings`` random relabelings
    of each; returns (graphs, class labels)."""
    relabelings = check_scalar(relabelings, "relabelings", int, min=0)
    reps = [csl_graph(s, n) for s in CSL_SKIPS]
    if relabelings == 0:
        return reps, np.arange(len(reps))
    rng = np.random.default_rng(seed)
    out, lab = [], []
    for c, A in enumerate(reps):
        for _ in range(relabelings):
            p = rng.permutation(n)
            out.append(A[np.ix_(p, p)])
            lab.append(c)
    return out, np.array(lab)


# ---------------------------------------------------------------------------- 1-WL-equivalent pairs
def decalin() -> np.ndarray:
    """Two fused 6-rings (10 nodes, 11 edges)."""
    G = nx.cycle_graph(6)
    G.add_edges_from([(0, 6), (6, 7), (7, 8), (8, 9), (9, 5)])
    return to_adjacency(G)


def bicyclopentyl() -> np.ndarray:
    """Two 5-rings joined by an edge (10 nodes, 11 edges)."""
    G = nx.disjoint_union(nx.cycle_graph(5), nx.cycle_graph(5))
    G.add_edge(0, 5)
    return to_adjacency(G)


def rook_4x4() -> np.ndarray:
    return to_adjacency(
        nx.convert_node_labels_to_integers(nx.cartesian_product(nx.complete_graph(4), nx.complete_graph(4)))
    )


def shrikhande() -> np.ndarray:
    """Cayley graph on Z4 x Z4 with generators +-(1,0), +-(0,1), +-(1,1)."""
    G = nx.Graph()
    gens = [(1, 0), (3, 0), (0, 1), (0, 3), (1, 1), (3, 3)]
    for a in range(4):
        for b in range(4):
            for da, db in gens:
                G.add_edge(4 * a + b, 4 * ((a + da) % 4) + (b + db) % 4)
    return to_adjacency(G)


def wl_equivalent_pairs(seed: int = 0, n_random: int = 2) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, G, H): non-isomorphic pairs that 1-WL cannot tell apart."""
    out = []
    for k in range(3, 9):
        out.append(
            (
                f"C{2 * k}_vs_2C{k}",
                to_adjacency(nx.cycle_graph(2 * k)),
                to_adjacency(nx.disjoint_union(nx.cycle_graph(k), nx.cycle_graph(k))),
            )
        )
    out.append(("decalin_vs_bicyclopentyl", decalin(), bicyclopentyl()))
    out.append(("rook4x4_vs_shrikhande", rook_4x4(), shrikhande()))
    rng = np.random.default_rng(seed)
    made = 0
    while made < n_random:
        d = int(rng.choice([3, 4]))
        n = int(rng.integers(10, 21))
        if (d * n) % 2:
            continue
        g = nx.random_regular_graph(d, n, seed=int(rng.integers(2**31)))
        h = nx.random_regular_graph(d, n, seed=int(rng.integers(2**31)))
        if nx.is_isomorphic(g, h):
            continue
        out.append((f"random_{d}regular_n{n}_{made}", to_adjacency(g), to_adjacency(h)))
        made += 1
    return out


# ---------------------------------------------------------------------------- node-level and real graphs
def sbm_graph(sizes=(40, 40, 40), p_in: float = 0.3, p_out: float = 0.05, seed: int = 0):
    """SBM node-classification graph: (A, block labels)."""
    k = len(sizes)
    probs = [[p_in if a == b else p_out for b in range(k)] for a in range(k)]
    G = nx.stochastic_block_model(list(sizes), probs, seed=seed)
    return to_adjacency(G), np.repeat(np.arange(k), sizes)


def real_graph(name: str):
    """A real graph shipped by networkx: (A, labels or None). Karate's labels are its ``club``."""
    check_choice(name, "name", REAL_GRAPHS)
    if name == "karate":
        G = nx.karate_club_graph()
        clubs = sorted({d["club"] for _, d in G.nodes(data=True)})
        y = np.array([clubs.index(G.nodes[u]["club"]) for u in G.nodes()])
        return to_adjacency(G), y
    G = getattr(nx, f"{name}_graph")()
    G = nx.convert_node_labels_to_integers(nx.Graph(G))
    return to_adjacency(G), None


def pyg_karate():
    """PyG's built-in ``KarateClub`` (4 modularity classes; needs torch_geometric): (A, labels)."""
    try:
        from torch_geometric.datasets import KarateClub
    except ImportError as e:
        raise ImportError("pyg_karate needs torch_geometric: pip install torch_geometric") from e
    data = KarateClub()[0]
    n = data.num_nodes
    A = np.zeros((n, n), dtype=np.uint8)
    ei = data.edge_index.numpy()
    A[ei[0], ei[1]] = 1
    A[ei[1], ei[0]] = 1
    return A, data.y.numpy()


def random_family(
    n: int = 16, p: float = 0.3, d_min: int = 6, size: int = 40, max_draws: int = 20000, seed: int = 0
) -> list[np.ndarray]:
    """G(n, p) graphs kept only when the degree/spectral lower bounds certify d_F >= ``d_min`` to every
    kept one; stops at ``size`` graphs or ``max_draws`` draws (returns the family reached)."""
    rng = np.random.default_rng(seed)
    kept: list[np.ndarray] = []
    for _ in range(max_draws):
        A = to_adjacency(nx.gnp_random_graph(n, p, seed=int(rng.integers(2**31))))
        if all(lower_bound(A, B) >= d_min for B in kept):
            kept.append(A)
            if len(kept) >= size:
                break
    return kept
