"""Graph embeddings f: dense message-passing networks on ``B x n x n`` batches (spec §3), each with its
rigorous sensitivity bound (spec §4) as a method.

Layers (width d, depth L, ReLU):

- GIN:  ``H^{l+1} = MLP_l((1 + eps) H^l + A H^l)``, ``MLP = Linear-ReLU-Linear-ReLU``, readout sum.
- GCN:  ``H^{l+1} = ReLU(A_hat H^l W_l + b_l)``, ``A_hat = D~^{-1/2} (A + I) D~^{-1/2}``, readout mean.
- SAGE: ``H^{l+1} = ReLU(H^l W_self + mean_{N(u)} H^l W_nbr + b_l)`` (isolated node: mean = 0), readout mean.

Readout: ``sum`` or ``mean`` over nodes of ``H^L``; ``jk=True`` concatenates the readouts of H^1..H^L.

Sensitivity (``node_bounds``/``graph_bound``), with clean-graph quantities ``B_l = max_u ||h_u^l||``,
``d_max``/``d_min`` the degrees, ``r_max = min(r, n - 1)`` flips at one node, ``kappa`` exact spectral
norms of the weights actually applied:

- GIN:  ``delta_{l+1} <= kappa_l [ (|1 + eps| + d_max) delta_l + r_max (B_l + delta_l) ]``
- SAGE: ``delta_{l+1} <= kappa_self delta_l + kappa_nbr (delta_l + 2 B_l rho)``,
        ``rho = min(1, r_max / max(1, d_min - r_max))``
- GCN (Frobenius): ``||dH^{l+1}||_F <= kappa_l (||dH^l||_F + ||A_hat' - A_hat||_2 ||H^l||_F)`` with
        ``||A_hat' - A_hat||_2 <= 2`` for any flip set, exact for a given perturbation.
- Readout: sum ``n delta_L`` (GCN: ``sqrt(n) ||dH||_F``), mean ``delta_L`` (GCN: ``||dH||_F / sqrt(n)``),
  JK ``sqrt(sum_l bound_l^2)``.
"""

from __future__ import annotations

import math
import numpy as np
import torch
from torch import nn

from neurips26.gnn_margin.features import FEATURES, feature_dim, feature_sensitivity, node_features
from neurips26.gnn_margin.graphs import check_adjacency, check_features
from neurips26.harness.validation import check_choice, check_scalar

ARCHITECTURES = ("gin", "gcn", "sage")
READOUTS = ("sum", "mean")


def as_batch(A, dtype: torch.dtype, validate: bool = True) -> torch.Tensor:
    """A graph or batch (numpy/torch/networkx) as a ``B x n x n`` float tensor of ``dtype``."""
    if validate:
        arr = A if isinstance(A, np.ndarray) else (A.detach().cpu().numpy() if torch.is_tensor(A) else A)
        arr = np.asarray(check_adjacency(arr, "A", batch=np.ndim(arr) == 3))
        A = torch.from_numpy(arr)
    elif not torch.is_tensor(A):
        A = torch.from_numpy(np.asarray(A))
    if A.dim() == 2:
        A = A[None]
    return A.to(dtype)


def spectral(W: torch.Tensor) -> float:
    """Exact spectral norm ``kappa(W)`` of the weight as applied."""
    return float(torch.linalg.matrix_norm(W.detach().double(), 2))


class GraphEmbedding(nn.Module):
    """Base class: features -> L message-passing layers -> readout. Subclasses define ``_make_layer``,
    ``_layer_forward`` and ``_node_deltas``. ``forward(A)`` gives ``B x d_out``;
    ``node_embeddings(A)`` gives ``B x n x d``."""

    arch = "?"
    default_readout = "sum"

    def __init__(
        self,
        features: str = "const",
        width: int = 32,
        depth: int = 3,
        readout: str | None = None,
        jk: bool = False,
        rwse_steps: int = 8,
        n_max: int = 64,
        dtype: torch.dtype = torch.float32,
    ):
        super().__init__()
        self.features = check_choice(features, "features", FEATURES)
        self.width = check_scalar(width, "width", int, min=1)
        self.depth = check_scalar(depth, "depth", int, min=1)
        self.readout = check_choice(readout or self.default_readout, "readout", READOUTS)
        self.jk = bool(jk)
        self.rwse_steps = check_scalar(rwse_steps, "rwse_steps", int, min=1)
        self.n_max = check_scalar(n_max, "n_max", int, min=1)
        self.in_dim = feature_dim(self.features, self.rwse_steps, self.n_max)
        self.layers = nn.ModuleList(
            self._make_layer(self.in_dim if k == 0 else width, width) for k in range(depth)
        )
        self.to(dtype)

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    @property
    def out_dim(self) -> int:
        return self.width * (self.depth if self.jk else 1)

    # ---------------------------------------------------------------- forward
    def inputs(self, A, X=None, validate: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        A = as_batch(A, self.dtype, validate)
        if X is None:
            X = node_features(A, self.features, self.rwse_steps, self.n_max)
        else:
            X = torch.as_tensor(check_features(X, A.shape[-1]), dtype=self.dtype)
            X = X.expand(A.shape[0], *X.shape[-2:]) if X.dim() == 2 else X
            if X.shape[-1] != self.in_dim:
                raise ValueError(f"X must have {self.in_dim} columns for this model, got {X.shape[-1]}")
        return A, X

    def hidden(self, A, X=None, validate: bool = True) -> list[torch.Tensor]:
        """``[H^0, H^1, ..., H^L]``, each ``B x n x .``."""
        A, H = self.inputs(A, X, validate)
        prep = self._prepare(A)
        out = [H]
        for layer in self.layers:
            H = self._layer_forward(layer, prep, H)
            out.append(H)
        return out

    def node_embeddings(self, A, X=None, validate: bool = True) -> torch.Tensor:
        return self.hidden(A, X, validate)[-1]

    def _read(self, H: torch.Tensor) -> torch.Tensor:
        return H.sum(-2) if self.readout == "sum" else H.mean(-2)

    def forward(self, A, X=None, validate: bool = True) -> torch.Tensor:
        hs = self.hidden(A, X, validate)
        if self.jk:
            return torch.cat([self._read(h) for h in hs[1:]], -1)
        return self._read(hs[-1])

    # ---------------------------------------------------------------- bounds (spec §4)
    def kappas(self) -> list:
        """Exact spectral norms of each layer's weights (architecture-specific tuple per layer)."""
        raise NotImplementedError

    def node_bounds(self, A, r: int, A_perturbed=None) -> list[float]:
        """Node-wise ``[delta_0, ..., delta_L]``: ``max_u ||h'_u^l - h_u^l||`` over every flip set with
        ``|F| <= r`` (or for the given ``A_perturbed``, GCN only uses it to tighten)."""
        A = check_adjacency(A)
        r = check_scalar(r, "r", int, min=0, max=A.shape[0] * (A.shape[0] - 1) // 2)
        with torch.no_grad():
            hs = [h[0] for h in self.hidden(A)]
        return self._node_deltas(A, r, hs, A_perturbed)

    def graph_bound(self, A, r: int, A_perturbed=None) -> float:
        """``beta_f(G, r) >= ||f(G (+) F) - f(G)||`` for every ``|F| <= r`` (non-decreasing in r)."""
        A = check_adjacency(A)
        n = A.shape[0]
        deltas = self.node_bounds(A, r, A_perturbed)
        per = [self._readout_bound(d, n) for d in deltas[1:]]
        return float(math.sqrt(sum(b * b for b in per))) if self.jk else float(per[-1])

    def _readout_bound(self, delta: float, n: int) -> float:
        return n * delta if self.readout == "sum" else delta

    def _delta0(self, r: int) -> float:
        return feature_sensitivity(self.features, self.rwse_steps) if r > 0 else 0.0


class GIN(GraphEmbedding):
    """Dense GIN (Xu et al. 2019); ``eps`` fixed at 0 unless ``train_eps``."""

    arch = "gin"
    default_readout = "sum"

    def __init__(self, *args, train_eps: bool = False, **kw):
        self.train_eps = bool(train_eps)
        super().__init__(*args, **kw)

    def _make_layer(self, i: int, o: int) -> nn.Module:
        layer = nn.Module()
        layer.mlp = nn.Sequential(nn.Linear(i, o), nn.ReLU(), nn.Linear(o, o), nn.ReLU())
        layer.eps = nn.Parameter(torch.zeros(()), requires_grad=self.train_eps)
        return layer

    def _prepare(self, A):
        return A

    def _layer_forward(self, layer, A, H):
        if layer.eps.requires_grad:
            return layer.mlp((1 + layer.eps) * H + A @ H)
        # fixed eps: one fused batched kernel, (1 + eps) H + A H
        return layer.mlp(torch.baddbmm(H, A, H, beta=1.0 + float(layer.eps)))

    def kappas(self) -> list:
        return [
            math.prod(spectral(m.weight) for m in layer.mlp if isinstance(m, nn.Linear))
            for layer in self.layers
        ]

    def _node_deltas(self, A, r, hs, A_perturbed=None):
        n = A.shape[0]
        d_max = int(A.sum(0).max())
        r_max = min(r, n - 1)
        deltas = [self._delta0(r)]
        for layer, k, H in zip(self.layers, self.kappas(), hs):
            B = float(H.norm(dim=-1).max())
            e = abs(1.0 + float(layer.eps))
            d = deltas[-1]
            deltas.append(k * ((e + d_max) * d + r_max * (B + d)))
        return deltas


class GCN(GraphEmbedding):
    """Dense GCN (Kipf & Welling 2017): ``ReLU(A_hat H W + b)``, bias after propagation (as PyG)."""

    arch = "gcn"
    default_readout = "mean"

    def _make_layer(self, i: int, o: int) -> nn.Module:
        layer = nn.Module()
        layer.lin = nn.Linear(i, o, bias=False)
        layer.bias = nn.Parameter(torch.zeros(o))
        return layer

    @staticmethod
    def normalise(A: torch.Tensor) -> torch.Tensor:
        """``A_hat = D~^{-1/2} (A + I) D~^{-1/2}``."""
        At = A + torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
        s = At.sum(-1).rsqrt()
        return s[..., :, None] * At * s[..., None, :]

    def _prepare(self, A):
        return self.normalise(A)

    def _layer_forward(self, layer, Ahat, H):
        return torch.relu(Ahat @ layer.lin(H) + layer.bias)

    def kappas(self) -> list:
        return [spectral(layer.lin.weight) for layer in self.layers]

    def propagation_change(self, A, A_perturbed=None) -> float:
        """``||A_hat' - A_hat||_2``: exact for a given perturbation, else the universal bound 2."""
        if A_perturbed is None:
            return 2.0
        P = check_adjacency(A_perturbed, "A_perturbed")
        if P.shape != A.shape:
            raise ValueError(f"A_perturbed must have shape {A.shape}, got {P.shape}")
        a = self.normalise(torch.from_numpy(np.asarray(A)).double())
        b = self.normalise(torch.from_numpy(P).double())
        return float(torch.linalg.matrix_norm(b - a, 2))

    def _node_deltas(self, A, r, hs, A_perturbed=None):
        """Frobenius recursion; every node-wise change is at most ``||dH||_F``."""
        n = A.shape[0]
        dA = 0.0 if r == 0 else self.propagation_change(A, A_perturbed)
        fro = [math.sqrt(n) * self._delta0(r)]
        for k, H in zip(self.kappas(), hs):
            fro.append(k * (fro[-1] + dA * float(H.norm())))
        self._last_fro = fro
        return fro

    def _readout_bound(self, delta: float, n: int) -> float:
        # delta here is ||dH||_F: sum readout <= sqrt(n) ||dH||_F, mean <= ||dH||_F / sqrt(n)
        return math.sqrt(n) * delta if self.readout == "sum" else delta / math.sqrt(n)


class GraphSAGE(GraphEmbedding):
    """Dense GraphSAGE with mean aggregation (Hamilton et al. 2017)."""

    arch = "sage"
    default_readout = "mean"

    def _make_layer(self, i: int, o: int) -> nn.Module:
        layer = nn.Module()
        layer.lin_self = nn.Linear(i, o, bias=False)
        layer.lin_nbr = nn.Linear(i, o, bias=True)
        return layer

    def _prepare(self, A):
        return A / A.sum(-1, keepdim=True).clamp(min=1.0)  # row-normalised; isolated node: mean = 0

    def _layer_forward(self, layer, Amean, H):
        return torch.relu(layer.lin_self(H) + layer.lin_nbr(Amean @ H))

    def kappas(self) -> list:
        return [(spectral(layer.lin_self.weight), spectral(layer.lin_nbr.weight)) for layer in self.layers]

    def _node_deltas(self, A, r, hs, A_perturbed=None):
        n = A.shape[0]
        d_min = int(A.sum(0).min())
        r_max = min(r, n - 1)
        rho = min(1.0, r_max / max(1, d_min - r_max))
        deltas = [self._delta0(r)]
        for (ks, kn), H in zip(self.kappas(), hs):
            B = float(H.norm(dim=-1).max())
            d = deltas[-1]
            deltas.append(ks * d + kn * (d + 2 * B * rho))
        return deltas


_CLASSES = {"gin": GIN, "gcn": GCN, "sage": GraphSAGE}


def make_embedding(arch: str, **kw) -> GraphEmbedding:
    """``make_embedding("gin", features="rwse", width=32)``; unknown names raise naming ``arch``."""
    return _CLASSES[check_choice(arch, "arch", ARCHITECTURES)](**kw)


def apply_spectral_norm(model: nn.Module) -> nn.Module:
    """Spectral normalisation of every Linear weight (``torch.nn.utils.parametrizations.spectral_norm``).
    The bounds always use the exact norm of the weight as applied (power iteration may leave it > 1)."""
    for m in list(model.modules()):
        if isinstance(m, nn.Linear):
            torch.nn.utils.parametrizations.spectral_norm(m)
    return model


def lipschitz_penalty(model: nn.Module) -> torch.Tensor:
    """``sum_l relu(kappa_l - 1)^2`` over every Linear weight (exact, differentiable matrix 2-norms)."""
    terms = [
        torch.relu(torch.linalg.matrix_norm(m.weight, 2) - 1) ** 2
        for m in model.modules()
        if isinstance(m, nn.Linear)
    ]
    return torch.stack(terms).sum()
