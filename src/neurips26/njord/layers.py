"""Message-passing layers (neural-lam InteractionNet / PropagationNet) with ``index_add_`` scatter.

Node representations are batched ``(B, n, d)``; an edge set is a ``(2, E)`` long tensor
(sender, receiver). No torch-scatter: sums and means are ``index_add_`` along the node axis.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint


def mlp(d_in: int, d_out: int, d_h: int, layer_norm: bool = True, hidden_layers: int = 1) -> nn.Sequential:
    """``Linear -> SiLU -> ... -> Linear (-> LayerNorm)``, the neural-lam blueprint."""
    layers: list[nn.Module] = [nn.Linear(d_in, d_h), nn.SiLU()]
    for _ in range(hidden_layers - 1):
        layers += [nn.Linear(d_h, d_h), nn.SiLU()]
    layers.append(nn.Linear(d_h, d_out))
    if layer_norm:
        layers.append(nn.LayerNorm(d_out))
    return nn.Sequential(*layers)


def gather(h: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows ``index`` of the node axis of ``h`` (B, n, d) -> (B, E, d): ``index_select``, whose
    backward is an ``index_add_`` (cheaper than advanced indexing's accumulating ``index_put_``)."""
    return h.index_select(1, index)


def scatter_sum(msg: torch.Tensor, index: torch.Tensor, n: int) -> torch.Tensor:
    """Sum of ``msg`` (B, E, d) into ``n`` receivers along axis 1."""
    out = msg.new_zeros(msg.shape[0], n, msg.shape[2])
    return out.index_add_(1, index, msg)


def scatter_mean(msg: torch.Tensor, index: torch.Tensor, n: int) -> torch.Tensor:
    """Mean of ``msg`` into ``n`` receivers (receivers without edges get 0)."""
    count = torch.zeros(n, dtype=msg.dtype, device=msg.device).index_add_(
        0, index, torch.ones_like(index, dtype=msg.dtype)
    )
    return scatter_sum(msg, index, n) / count.clamp(min=1.0)[None, :, None]


class InteractionNet(nn.Module):
    """``m = MLP_e([e, h_s, h_r])``, ``a_r = sum m``, ``h_r <- h_r + MLP_n([h_r, a_r])``, ``e <- e + m``."""

    aggregation = "sum"
    checkpoint = False  # activation checkpointing of this layer (recompute in backward); set per model

    def __init__(self, edge_index: torch.Tensor, d: int, n_receivers: int, hidden_layers: int = 1):
        super().__init__()
        ei = torch.as_tensor(edge_index, dtype=torch.long)
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise ValueError(f"edge_index must have shape (2, E), got {tuple(ei.shape)}")
        self.register_buffer("edge_index", ei, persistent=False)
        self.n_receivers = int(n_receivers)
        self.edge_mlp = mlp(3 * d, d, d, hidden_layers=hidden_layers)
        self.node_mlp = mlp(2 * d, d, d, hidden_layers=hidden_layers)

    def message(self, send, recv, edge, edge_index=None):
        """``MLP_e([e, h_s, h_r])`` per edge. The first Linear acts on the concatenation, so it is
        split into its three column blocks, ``W_e e + W_s h_s + W_r h_r + b``: the sender and
        receiver blocks are applied per NODE and then gathered to the edges, and the static first-layer
        edge reps (E, d) stay without the batch axis -- the same function as the concatenated form
        (tested against it) without building the (B, E, 3d) input."""
        s, r = self.edge_index if edge_index is None else edge_index
        first, rest = self.edge_mlp[0], self.edge_mlp[1:]
        d = send.shape[-1]
        w = first.weight
        pre = F.linear(edge, w[:, :d], first.bias)  # (E, d) or (B, E, d)
        pre = pre + gather(F.linear(send, w[:, d : 2 * d]), s) + gather(F.linear(recv, w[:, 2 * d :]), r)
        return rest(pre), edge

    def update(self, recv, agg):
        """``MLP_n([h_r, a_r])`` with the first Linear split the same way (no (B, n, 2d) concat)."""
        first, rest = self.node_mlp[0], self.node_mlp[1:]
        d = recv.shape[-1]
        w = first.weight
        return rest(F.linear(recv, w[:, :d], first.bias) + F.linear(agg, w[:, d:]))

    def forward(self, send: torch.Tensor, recv: torch.Tensor, edge: torch.Tensor, edge_index=None):
        """``edge_index`` (2, E') replaces the layer's own edges for one call (a sub-graph: one part of
        a domain decomposition, ``njord.decomposition``); the receivers are then the rows of ``recv``."""
        if self.checkpoint and torch.is_grad_enabled():
            return checkpoint(self._forward, send, recv, edge, edge_index, use_reentrant=False)
        return self._forward(send, recv, edge, edge_index)

    def _edges(self, recv, edge_index):
        if edge_index is None:
            return self.edge_index, self.n_receivers
        return edge_index, recv.shape[1]

    def _forward(self, send, recv, edge, edge_index=None):
        ei, n = self._edges(recv, edge_index)
        m, e = self.message(send, recv, edge, ei)
        agg = scatter_sum(m, ei[1], n)
        return recv + self.update(recv, agg), e + m


class PropagationNet(InteractionNet):
    """``m = h_s + MLP_e([e, h_s, h_r])``, mean aggregation, ``h_r <- a_r + MLP_n([h_r, a_r])``."""

    aggregation = "mean"

    def _forward(self, send, recv, edge, edge_index=None):
        ei, n = self._edges(recv, edge_index)
        m, e = self.message(send, recv, edge, ei)
        m = m + gather(send, ei[0])
        agg = scatter_mean(m, ei[1], n)
        return agg + self.update(recv, agg), e + m
