"""Performance side by side (spec "Performance"), every row through ``harness.bench.compare``.

1. Dense batched GIN (B x n x n bmm) vs PyG ``GINConv`` on a ``Batch`` of 10,000 six-node graphs,
   same weights (graphs/s; issue target >= 2x).
2. WL colouring + histogram of 10,000 graphs vs ``networkx.weisfeiler_lehman_graph_hash`` (graphs/s;
   target >= 3x).
3. Exact d_F all-pairs on the 112 connected six-node graphs (target <= 2 s; no tool computes it), and
   exact d_F per pair vs networkx ``graph_edit_distance`` restricted to edge edits.
4. Exhaustive-search throughput: all 1- and 2-flip perturbations of the 112 graphs through GIN
   (width 32, 3 layers; perturbed graphs/s, target >= 1e5), and the GFLOP/s this reaches vs a torch
   matmul of the same flop count (the machine's dense peak).
"""

from __future__ import annotations

import numpy as np
import torch

from neurips26.gnn_margin.embeddings import GIN
from neurips26.gnn_margin.families import atlas_graphs
from neurips26.gnn_margin.flip_distance import flip_distance, flip_distance_matrix
from neurips26.gnn_margin.graphs import flip_batch, flip_sets, to_networkx
from neurips26.gnn_margin.wl import WLHistogram
from neurips26.harness.bench import BenchRow, compare


def _pyg_gin(model: GIN, graphs: np.ndarray):
    """PyG GINConv stack sharing ``model``'s MLPs, and a Batch of ``graphs``; None without PyG."""
    try:
        from torch_geometric.data import Batch, Data
        from torch_geometric.nn import GINConv, global_add_pool
    except ImportError:
        return None
    convs = [GINConv(layer.mlp, eps=0.0) for layer in model.layers]
    data = []
    for A in graphs:
        i, j = np.nonzero(A)
        data.append(
            Data(x=torch.ones(A.shape[0], 1), edge_index=torch.tensor(np.stack([i, j]), dtype=torch.long))
        )
    batch = Batch.from_data_list(data)

    @torch.no_grad()
    def run():
        h = batch.x
        for conv in convs:
            h = conv(h, batch.edge_index)
        return global_add_pool(h, batch.batch, size=len(graphs))

    return run


def _flops(n: int, d: int, L: int, in_dim: int = 1) -> float:
    """Dense GIN flops per graph: aggregation ``2 n^2 d_in`` + MLP ``2 n (d_in d + d d)`` per layer."""
    total = 0.0
    for k in range(L):
        di = in_dim if k == 0 else d
        total += 2 * n * n * di + 2 * n * (di * d + d * d)
    return total


def bench(ctx) -> list[BenchRow]:
    smoke = ctx.scale == "smoke"
    rounds = 1 if smoke else 5
    n_graphs = 300 if smoke else 10_000
    atlas = np.stack(atlas_graphs(6))
    graphs = atlas[np.arange(n_graphs) % len(atlas)]
    torch.manual_seed(0)
    model = GIN(width=32, depth=3).eval()
    rows = []

    # 1. dense GIN vs PyG GINConv
    pyg = _pyg_gin(model, graphs) if not smoke else None
    At = torch.from_numpy(graphs).float()
    with torch.no_grad():
        ours_gin = lambda: model(At, validate=False)  # noqa: E731
        if pyg is not None:
            diff = float((ours_gin() - pyg()).abs().max())
    rows.append(
        compare(
            f"GIN forward, {n_graphs} six-node graphs",
            ours_gin,
            pyg,
            "PyG GINConv + Batch",
            unit="graphs/s",
            work=n_graphs,
            rounds=rounds,
            missing="torch_geometric not installed" if not smoke else "skipped at smoke scale",
            note=f"same weights, max |diff| {diff:.1e}" if pyg is not None else "",
        )
    )

    # 2. WL colouring vs networkx hash
    nxg = [to_networkx(a) for a in graphs]
    import networkx as nx

    rows.append(
        compare(
            f"1-WL colouring (T=3), {n_graphs} graphs",
            lambda: WLHistogram(3)(graphs, validate=False),
            lambda: [nx.weisfeiler_lehman_graph_hash(g, iterations=3) for g in nxg],
            "networkx weisfeiler_lehman_graph_hash",
            unit="graphs/s",
            work=n_graphs,
            rounds=rounds,
        )
    )

    # 3. exact d_F
    fam = list(atlas if not smoke else atlas[:30])
    pairs_n = len(fam) * (len(fam) - 1) // 2
    rows.append(
        compare(
            f"exact d_F all pairs, {len(fam)} six-node graphs ({pairs_n} pairs)",
            lambda: flip_distance_matrix(fam),
            None,
            "no anchor tool",
            unit="s",
            rounds=rounds,
            missing="no tool computes exact edge-only d_F all-pairs (issue target <= 2 s)",
        )
    )
    sample = [(atlas[a], atlas[b]) for a, b in ((3, 50), (10, 90), (20, 111))][: 1 if smoke else 3]

    def ged():
        for G, H in sample:
            nx.graph_edit_distance(
                to_networkx(G),
                to_networkx(H),
                node_del_cost=lambda a: 1e3,
                node_ins_cost=lambda a: 1e3,
                node_subst_cost=lambda a, b: 0.0,
            )

    rows.append(
        compare(
            f"exact d_F, {len(sample)} pairs",
            lambda: [flip_distance(G, H) for G, H in sample],
            ged,
            "networkx graph_edit_distance (edge edits only)",
            unit="ms",
            rounds=1 if smoke else 3,
        )
    )

    # 4. exhaustive search throughput and GFLOP/s
    src = atlas if not smoke else atlas[:10]
    sets = [flip_sets(15, 1), flip_sets(15, 2)]
    pert = np.concatenate([flip_batch(A, s) for A in src for s in sets])
    Pt = torch.from_numpy(pert).float()
    with torch.no_grad():
        search = lambda: model(Pt, validate=False)  # noqa: E731
        pyg_p = _pyg_gin(model, pert) if not smoke else None
        rows.append(
            compare(
                f"exhaustive search, {len(pert)} perturbed graphs (r <= 2)",
                search,
                pyg_p,
                "PyG GINConv + Batch",
                unit="graphs/s",
                work=len(pert),
                rounds=rounds,
                missing="torch_geometric not installed" if not smoke else "skipped at smoke scale",
            )
        )
        gflop = _flops(6, 32, 3) * len(pert) / 1e9
        k = max(64, int(round((gflop * 1e9 / 2) ** (1 / 3))))
        X, Y = torch.randn(k, k), torch.randn(k, k)
        rows.append(
            compare(
                "exhaustive search GFLOP/s vs torch matmul peak (same flops)",
                search,
                lambda: X @ Y,
                f"torch.matmul {k}x{k}",
                unit="GFLOP/s",
                work=gflop,
                rounds=rounds,
                note="ratio = our share of the dense matmul rate",
            )
        )
    return rows
