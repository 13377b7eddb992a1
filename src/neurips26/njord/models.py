"""Njord (Graph-EFM-style latent-variable hierarchical GNN) and its deterministic twin (Graph-FM).

State ``X^t`` (B, N, d_x) on wet cells, standardised. One step:
``X^t = X^{t-1} + dstd * delta(X^{t-2}, X^{t-1}, F^t, S, Z^t) + dmean`` with the latent ``Z^t``
(B, N_L, d_z) on the top mesh level; prior ``N(mu_theta, I)``, variational posterior
``N(mu_phi, diag sigma_phi^2)``, ``sigma_phi = 1e-4 + softplus(raw)`` (spec §1, §5).
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from neurips26.harness.validation import check_scalar
from neurips26.njord.data import Normaliser
from neurips26.njord.layers import InteractionNet, PropagationNet, mlp
from neurips26.njord.mesh import Mesh


def _edge_feats(src_pos, dst_pos, ei, scale):
    d = dst_pos[ei[1]] - src_pos[ei[0]]
    f = np.concatenate([np.linalg.norm(d, axis=1, keepdims=True), d], axis=1) / scale
    return torch.tensor(f, dtype=torch.float32)


class GraphTensors(nn.Module):
    """The mesh as buffers: edge indices and static edge/node features (lengths over the longest
    g2m/m2g edge, mesh node coordinates over the domain span)."""

    def __init__(self, mesh: Mesh):
        super().__init__()
        self.mesh = mesh
        g, lv = mesh.grid_pos, mesh.levels
        scale = max(
            np.linalg.norm(lv[0][mesh.g2m[1]] - g[mesh.g2m[0]], axis=1).max(),
            np.linalg.norm(g[mesh.m2g[1]] - lv[0][mesh.m2g[0]], axis=1).max(),
            1e-6,
        )
        sphere = mesh.info.get("geometry") == "sphere"  # (n, 3) unit vectors: used as they are
        span = 1.0 if sphere else (float(np.ptp(g, axis=0).max()) or 1.0)
        self.L = len(lv)
        self.sizes = [len(p) for p in lv]
        self.n_grid = len(g)
        self.edges = {"g2m": torch.as_tensor(mesh.g2m), "m2g": torch.as_tensor(mesh.m2g)}
        self.feats = {
            "g2m": _edge_feats(g, lv[0], mesh.g2m, scale),
            "m2g": _edge_feats(lv[0], g, mesh.m2g, scale),
        }
        for i in range(self.L):
            self.edges[f"m2m{i}"] = torch.as_tensor(mesh.m2m[i])
            self.feats[f"m2m{i}"] = _edge_feats(lv[i], lv[i], mesh.m2m[i], scale)
        for i in range(self.L - 1):
            self.edges[f"up{i}"] = torch.as_tensor(mesh.up[i])
            self.feats[f"up{i}"] = _edge_feats(lv[i], lv[i + 1], mesh.up[i], scale)
            self.edges[f"down{i}"] = torch.as_tensor(mesh.down[i])
            self.feats[f"down{i}"] = _edge_feats(lv[i + 1], lv[i], mesh.down[i], scale)
        origin = np.zeros(g.shape[1]) if sphere else g.min(0)
        self.node_feats = [torch.tensor((p - origin) / span, dtype=torch.float32) for p in lv]


class _Embedders(nn.Module):
    def __init__(self, gt: GraphTensors, d_h: int):
        super().__init__()
        self.gt = gt
        # [length, delta position]: 3 features on the plane, 4 on the sphere; node features = position
        self.edge = nn.ModuleDict({k: mlp(gt.feats[k].shape[1], d_h, d_h) for k in gt.edges})
        self.node = nn.ModuleList([mlp(gt.node_feats[i].shape[1], d_h, d_h) for i in range(gt.L)])
        self.cache: dict | None = None  # a dict inside ``Forecaster.reuse_static()``

    def _static(self, key, embed):
        """``embed()``, computed once per ``reuse_static()`` block (every call outside one)."""
        if self.cache is None:
            return embed()
        if key not in self.cache:
            self.cache[key] = embed()
        return self.cache[key]

    def e(self, k):
        """Embedded static features of edge set ``k`` (E, d_h)."""
        return self._static(k, lambda: self.edge[k](self.gt.feats[k]))

    def m(self, i, B):
        """Embedded mesh-node features of level ``i``, expanded to (B, n_i, d_h)."""
        return self._static(i, lambda: self.node[i](self.gt.node_feats[i]))[None].expand(B, -1, -1)


class WholeGraph:
    """The undivided graph, the default ``view`` of every network's forward: a layer uses its own edge
    set, static embeddings cover every node / edge and no halo is exchanged. ``njord.decomposition.
    PartView`` has the same four methods for one part of a K-means domain decomposition (the part's
    receivers, its edges into them, and the halo of senders owned by other parts)."""

    @staticmethod
    def e(emb, k):
        return emb.e(k)

    @staticmethod
    def m(emb, i, B):
        return emb.m(i, B)

    @staticmethod
    def edges(k):
        return None  # the layer's own edge_index

    @staticmethod
    def halo(nodes, h):
        """Sender reps of node set ``nodes`` ("grid" or a level 0..L-1) for the next layer: ``h``."""
        return h

    @staticmethod
    def rows(nodes, t):
        """Rows of a whole-set tensor ``t`` (B, n, d) or (n, d) that this view owns: all of them."""
        return t


WHOLE = WholeGraph()


class CallCounter(nn.Module):
    """Counts forward calls and the rows (batch size) each saw: check 8."""

    def __init__(self):
        super().__init__()
        self.calls: list[int] = []

    def record(self, B: int) -> None:
        self.calls.append(int(B))


class LatentMap(CallCounter):
    """Prior (mean head, ``d_z``) or encoder (``2 d_z``): g2m PropagationNet, intra InteractionNets,
    up PropagationNets to the top level, linear head."""

    def __init__(self, gt: GraphTensors, d_in: int, d_h: int, d_z: int, out_mult: int, n_layers: int = 1):
        super().__init__()
        self.gt, self.out_mult = gt, out_mult
        self.emb = _Embedders(gt, d_h)
        self.grid = mlp(d_in, d_h, d_h)
        self.g2m = PropagationNet(gt.edges["g2m"], d_h, gt.sizes[0])
        self.intra = nn.ModuleList(
            [
                nn.ModuleList(
                    [InteractionNet(gt.edges[f"m2m{i}"], d_h, gt.sizes[i]) for _ in range(n_layers)]
                )
                for i in range(gt.L)
            ]
        )
        self.up = nn.ModuleList(
            [PropagationNet(gt.edges[f"up{i}"], d_h, gt.sizes[i + 1]) for i in range(gt.L - 1)]
        )
        self.head = nn.Linear(d_h, out_mult * d_z)

    def forward(self, grid_in: torch.Tensor, view: WholeGraph = WHOLE):
        """``view``: the whole graph, or one part of a domain decomposition (``grid_in`` then holds the
        part's own grid rows and the output its own top-level rows)."""
        B, v, emb = grid_in.shape[0], view, self.emb
        self.record(B)
        g = self.grid(grid_in)
        h, _ = self.g2m(v.halo("grid", g), v.m(emb, 0, B), v.e(emb, "g2m"), v.edges("g2m"))
        for i in range(self.gt.L):
            if i > 0:
                h, _ = self.up[i - 1](v.halo(i - 1, h), v.m(emb, i, B), v.e(emb, f"up{i - 1}"),
                                      v.edges(f"up{i - 1}"))
            e = v.e(emb, f"m2m{i}")
            for layer in self.intra[i]:
                h, e = layer(v.halo(i, h), h, e, v.edges(f"m2m{i}"))
        out = self.head(h)
        if self.out_mult == 1:
            return out
        mu, raw = out.chunk(2, dim=-1)
        return mu, 1e-4 + F.softplus(raw)


class Decoder(CallCounter):
    """Hierarchical decoder; the receiver at the top level is the embedded latent when ``d_z`` > 0."""

    def __init__(self, gt: GraphTensors, d_in: int, d_h: int, d_x: int, d_z: int = 0, n_layers: int = 1):
        super().__init__()
        self.gt = gt
        self.emb = _Embedders(gt, d_h)
        self.grid = mlp(d_in, d_h, d_h)
        self.grid_res = mlp(d_h, d_h, d_h)
        self.latent = mlp(d_z, d_h, d_h) if d_z else None
        self.g2m = InteractionNet(gt.edges["g2m"], d_h, gt.sizes[0])
        L = gt.L

        def intra(i):
            return nn.ModuleList(
                [InteractionNet(gt.edges[f"m2m{i}"], d_h, gt.sizes[i]) for _ in range(n_layers)]
            )

        self.intra_up = nn.ModuleList([intra(i) for i in range(L)])
        self.intra_down = nn.ModuleList([intra(i) for i in range(L - 1)])
        self.up = nn.ModuleList(
            [InteractionNet(gt.edges[f"up{i}"], d_h, gt.sizes[i + 1]) for i in range(L - 1)]
        )
        self.down = nn.ModuleList(
            [PropagationNet(gt.edges[f"down{i}"], d_h, gt.sizes[i]) for i in range(L - 1)]
        )
        self.m2g = PropagationNet(gt.edges["m2g"], d_h, gt.n_grid)
        self.out = mlp(d_h, d_x, d_h, layer_norm=False)

    def forward(self, grid_in: torch.Tensor, z: torch.Tensor | None = None, view: WholeGraph = WHOLE) -> torch.Tensor:
        """``view``: the whole graph, or one part of a domain decomposition (``grid_in`` / ``z`` / the
        output then hold the part's own grid / top-level / grid rows; halos are exchanged by the view)."""
        B, L, v, emb = grid_in.shape[0], self.gt.L, view, self.emb
        self.record(B)
        g = self.grid(grid_in)
        g = g + self.grid_res(g)
        recv = [v.m(emb, i, B) for i in range(L)]
        if self.latent is not None:
            if z is None:
                raise ValueError("this decoder needs a latent z")
            recv[L - 1] = self.latent(z)
        h, _ = self.g2m(v.halo("grid", g), recv[0], v.e(emb, "g2m"), v.edges("g2m"))
        ups = []
        for i in range(L):
            if i > 0:
                h, _ = self.up[i - 1](v.halo(i - 1, ups[-1]), recv[i], v.e(emb, f"up{i - 1}"), v.edges(f"up{i - 1}"))
            e = v.e(emb, f"m2m{i}")
            for layer in self.intra_up[i]:
                h, e = layer(v.halo(i, h), h, e, v.edges(f"m2m{i}"))
            ups.append(h)
        for i in range(L - 2, -1, -1):
            h, _ = self.down[i](v.halo(i + 1, h), ups[i], v.e(emb, f"down{i}"), v.edges(f"down{i}"))
            e = v.e(emb, f"m2m{i}")
            for layer in self.intra_down[i]:
                h, e = layer(v.halo(i, h), h, e, v.edges(f"m2m{i}"))
        g, _ = self.m2g(v.halo(0, h), g, v.e(emb, "m2g"), v.edges("m2g"))
        return self.out(g)


def kl_diag_gaussians(mu_q, sigma_q, mu_p, sigma_p=None):
    """Closed-form KL(N(mu_q, sigma_q^2) || N(mu_p, sigma_p^2)) per element (sigma_p = 1 by default)."""
    if sigma_p is None:
        sigma_p = torch.ones_like(mu_p)
    return torch.log(sigma_p / sigma_q) + (sigma_q**2 + (mu_q - mu_p) ** 2) / (2 * sigma_p**2) - 0.5


class Forecaster(nn.Module):
    """Shared plumbing: inputs, residual update with one-step-difference statistics, rollout."""

    def __init__(self, mesh: Mesh, d_x: int, d_f: int, static: torch.Tensor, diff_mean, diff_std, d_h: int):
        super().__init__()
        self.gt = GraphTensors(mesh)
        self.d_x, self.d_f, self.d_h = int(d_x), int(d_f), int(d_h)
        self.register_buffer("static", torch.as_tensor(static, dtype=torch.float32))
        self.register_buffer("diff_mean", torch.as_tensor(diff_mean, dtype=torch.float32))
        self.register_buffer("diff_std", torch.as_tensor(diff_std, dtype=torch.float32))
        if self.static.shape[0] != self.gt.n_grid:
            raise ValueError(f"static has {self.static.shape[0]} rows, mesh has {self.gt.n_grid} grid nodes")

    @torch.no_grad()
    def zero_init_output(self) -> Forecaster:
        """Zero the decoder's output Linear, so the untrained model forecasts ``X^{t-1} + dmean``
        (persistence plus the mean one-step increment) and training moves away from persistence only
        along directions that lower the loss (a randomly initialised head starts with an increment of
        O(1) diff-std of noise on every channel). ASSUMPTION: an initialisation choice, not from the paper."""
        last = self.decoder.out[-1]
        last.weight.zero_()
        last.bias.zero_()
        return self

    @contextlib.contextmanager
    def reuse_static(self):
        """Inside: every network embeds its static edge / mesh-node features once and reuses them for
        every step (they depend on the weights only), instead of once per call. Use around one
        forward (a rollout, a training loss) -- not across an optimiser step. Re-entrant."""
        embs = [m for m in self.modules() if isinstance(m, _Embedders)]
        outer = any(m.cache is not None for m in embs)
        if not outer:
            for m in embs:
                m.cache = {}
        try:
            yield self
        finally:
            if not outer:
                for m in embs:
                    m.cache = None

    def set_checkpointing(self, on: bool = True) -> "Forecaster":
        """Activation checkpointing per message-passing layer (recompute activations in backward:
        less memory for long unrolls, same gradients)."""
        for m in self.modules():
            if isinstance(m, InteractionNet):
                m.checkpoint = bool(on)
        return self

    # --- save / load (the ``save_pretrained`` / ``from_pretrained`` interface) ---------------------
    def save_pretrained(self, path, norm: Normaliser | None = None) -> Path:
        """Write ``config.json`` (class, sizes, mesh kind/info), ``model.pt`` (state dict: weights,
        static features, one-step-difference stats), ``mesh.npz`` and, if given, ``norm.npz`` (the
        per-channel standardisation) into the folder ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        mesh = self.gt.mesh
        cfg = dict(cls=type(self).__name__, mesh_kind=mesh.kind, **self.init_args)
        info = {k: v for k, v in mesh.info.items() if isinstance(v, (int, float, str, bool, list))}
        (path / "config.json").write_text(json.dumps(cfg | dict(mesh_info=info), indent=1, default=int))
        torch.save(self.state_dict(), path / "model.pt")
        np.savez(path / "mesh.npz", **mesh.to_arrays())
        if norm is not None:
            np.savez(path / "norm.npz", mean=norm.mean, std=norm.std, diff_mean=norm.diff_mean,
                     diff_std=norm.diff_std)
        return path

    @staticmethod
    def from_pretrained(path) -> "Forecaster":
        """Rebuild a saved Njord / DeterministicTwin in eval mode; ``.norm`` is the saved
        ``Normaliser`` (None if none was saved). The state dict is loaded with ``weights_only``."""
        path = Path(path)
        if not (path / "config.json").is_file():
            raise ValueError(f"path {str(path)!r} has no config.json (not a saved Njord model)")
        cfg = json.loads((path / "config.json").read_text())
        cls = {"Njord": Njord, "DeterministicTwin": DeterministicTwin}.get(cfg.pop("cls"))
        if cls is None:
            raise ValueError("config.json names an unknown model class")
        with np.load(path / "mesh.npz") as z:
            mesh = Mesh.from_arrays(cfg.pop("mesh_kind"), dict(z), cfg.pop("mesh_info", {}))
        state = torch.load(path / "model.pt", weights_only=True)
        model = cls(mesh, static=state["static"].numpy(), diff_mean=state["diff_mean"].numpy(),
                    diff_std=state["diff_std"].numpy(), **cfg)
        model.load_state_dict(state)
        model.norm = None
        if (path / "norm.npz").is_file():
            with np.load(path / "norm.npz") as z:
                model.norm = Normaliser(z["mean"], z["std"], z["diff_mean"], z["diff_std"])
        return model.eval()

    @property
    def d_in(self) -> int:
        return 2 * self.d_x + self.d_f + self.static.shape[1]

    def check_inputs(self, x_prev2, x_prev1, forcing, n_grid: int | None = None):
        N = self.gt.n_grid if n_grid is None else n_grid
        for name, t, d in (
            ("x_prev2", x_prev2, self.d_x),
            ("x_prev1", x_prev1, self.d_x),
            ("forcing", forcing, self.d_f),
        ):
            if t.ndim != 3 or t.shape[1] != N or t.shape[2] != d:
                raise ValueError(f"{name} must have shape (B, {N}, {d}), got {tuple(t.shape)}")
            if not torch.isfinite(t).all():
                raise ValueError(f"{name} has NaN/inf values on wet cells")

    def increment(self, x_from, x_to):
        """One-step increment in diff-standardised units, ``(x_to - x_from - dmean) / dstd``."""
        return (x_to - x_from - self.diff_mean) / self.diff_std

    def grid_input(self, x_prev2, x_prev1, forcing, x_true=None, view: WholeGraph = WHOLE):
        """Grid features ``[X^{t-1}, inc(X^{t-2}->X^{t-1}), F^t, S(, inc(X^{t-1}->X^t))]``.

        The pair (X^{t-2}, X^{t-1}) enters as X^{t-1} and its standardised increment: the same
        information (an invertible linear map), but a daily increment is ~1-4% of a channel's std, so
        with raw X^{t-2} the network had to difference two nearly equal inputs and amplify the result
        by 1/dstd (up to ~175x) -- it never did, and the encoder could not see the target increment,
        so the posterior collapsed. ASSUMPTION (Graph-EFM feeds X^{t-2}, X^{t-1} raw)."""
        B = x_prev1.shape[0]
        static = view.rows("grid", self.static)
        parts = [x_prev1, self.increment(x_prev2, x_prev1), forcing, static[None].expand(B, -1, -1)]
        if x_true is not None:
            parts.append(self.increment(x_prev1, x_true))
        return torch.cat(parts, dim=-1)

    def update(self, x_prev1, delta):
        return x_prev1 + delta * self.diff_std + self.diff_mean

    def rollout(self, x_prev2, x_prev1, forcings, members: int = 1, generator=None, boundary=None,
                view: WholeGraph = WHOLE) -> torch.Tensor:
        """Autoregressive forecast: ``forcings`` (B, T, N, d_f) -> (members, B, T, N, d_x).

        Members are batched along the batch axis: per step one model call on B*members rows.

        ``boundary = (m_b, x_b)``: an open regional boundary (spec §7, as neural-lam): ``m_b`` (N,) in
        [0, 1] marks the boundary strip, ``x_b`` (B, T, N, d_x) its known states; after every step
        ``X = m_b X_b + (1 - m_b) X_hat`` before it feeds the next step. Score and train on the
        interior only (``m_b == 0``).

        ``view``: one part of a K-means domain decomposition (``njord.decomposition``): the inputs and the
        output are the part's own grid rows; run by every part at once (the view exchanges halos)."""
        members = check_scalar(members, "members", int, min=1)
        if forcings.ndim != 4 or forcings.shape[1] < 1:
            raise ValueError(f"forcings must have shape (B, T>=1, N, d_f), got {tuple(forcings.shape)}")
        if boundary is not None and view is not WHOLE:
            raise ValueError("boundary is not supported with a decomposed view")
        self.check_inputs(x_prev2, x_prev1, forcings[:, 0], view.rows("grid", self.static).shape[0])
        B, T = forcings.shape[:2]
        if boundary is not None:
            m_b, x_b = (torch.as_tensor(v, dtype=x_prev1.dtype) for v in boundary)
            if m_b.shape != (self.gt.n_grid,) or (m_b < 0).any() or (m_b > 1).any():
                raise ValueError(f"boundary mask must be ({self.gt.n_grid},) in [0, 1], got {tuple(m_b.shape)}")
            if x_b.shape != (B, T, self.gt.n_grid, self.d_x) or not torch.isfinite(x_b).all():
                raise ValueError(f"boundary states must be finite (B, T, N, d_x) = {(B, T, self.gt.n_grid, self.d_x)}, "
                                 f"got {tuple(x_b.shape)}")
            m_b, x_b = m_b[None, :, None], x_b.repeat(members, 1, 1, 1)
        a = x_prev2.repeat(members, 1, 1)
        b = x_prev1.repeat(members, 1, 1)
        fs = forcings.repeat(members, 1, 1, 1)
        out = []
        with self.reuse_static():
            for t in range(T):
                c = self.predict_step(a, b, fs[:, t], generator=generator, view=view)
                if boundary is not None:  # X = m_b X_true + (1 - m_b) X_hat
                    c = m_b * x_b[:, t] + (1 - m_b) * c
                out.append(c)
                a, b = b, c
        return torch.stack(out, 1).reshape(members, B, T, *x_prev1.shape[1:])


class Njord(Forecaster):
    """Latent-variable forecaster: prior latent map, variational encoder, decoder with Z at the top level."""

    def __init__(
        self,
        mesh: Mesh,
        d_x: int,
        d_f: int,
        static,
        diff_mean,
        diff_std,
        d_h: int = 32,
        d_z: int | None = None,
        n_layers: int = 1,
    ):
        check_scalar(d_h, "d_h", int, min=1)
        super().__init__(mesh, d_x, d_f, static, diff_mean, diff_std, d_h)
        self.d_z = int(d_z or d_h)
        self.init_args = dict(d_x=self.d_x, d_f=self.d_f, d_h=self.d_h, d_z=self.d_z, n_layers=int(n_layers))
        self.prior = LatentMap(self.gt, self.d_in, d_h, self.d_z, 1, n_layers)
        self.encoder = LatentMap(self.gt, self.d_in + d_x, d_h, self.d_z, 2, n_layers)
        self.decoder = Decoder(self.gt, self.d_in, d_h, d_x, self.d_z, n_layers)

    def predict_step(self, x_prev2, x_prev1, forcing, generator=None, z=None, view: WholeGraph = WHOLE):
        """``Z = mu_theta + eps``, ``eps ~ N(0, I)`` drawn for the whole top level (so a decomposed
        part, which keeps its own rows of it, draws the same numbers as the undivided model)."""
        gin = self.grid_input(x_prev2, x_prev1, forcing, view=view)
        if z is None:
            mu = self.prior(gin, view)
            eps = torch.randn((mu.shape[0], self.gt.sizes[-1], mu.shape[2]), generator=generator, dtype=mu.dtype)
            z = mu + view.rows(self.gt.L - 1, eps)
        return self.update(x_prev1, self.decoder(gin, z, view))

    def posterior_step(self, x_prev2, x_prev1, forcing, x_true):
        """(mean prediction with Z ~ q, KL(q || p) per top-level entry)."""
        gin = self.grid_input(x_prev2, x_prev1, forcing)
        mu_p = self.prior(gin)
        mu_q, s_q = self.encoder(self.grid_input(x_prev2, x_prev1, forcing, x_true))
        z = mu_q + s_q * torch.randn_like(mu_q)
        return self.update(x_prev1, self.decoder(gin, z)), kl_diag_gaussians(mu_q, s_q, mu_p)


class DeterministicTwin(Forecaster):
    """Graph-FM / Hi-LAM: the same decoder without a latent (top receiver = its own mesh embedding)."""

    def __init__(
        self, mesh: Mesh, d_x: int, d_f: int, static, diff_mean, diff_std, d_h: int = 32, n_layers: int = 1
    ):
        check_scalar(d_h, "d_h", int, min=1)
        super().__init__(mesh, d_x, d_f, static, diff_mean, diff_std, d_h)
        self.init_args = dict(d_x=self.d_x, d_f=self.d_f, d_h=self.d_h, n_layers=int(n_layers))
        self.decoder = Decoder(self.gt, self.d_in, d_h, d_x, 0, n_layers)

    def predict_step(self, x_prev2, x_prev1, forcing, generator=None, view: WholeGraph = WHOLE):
        return self.update(x_prev1, self.decoder(self.grid_input(x_prev2, x_prev1, forcing, view=view), view=view))


def gaussian_nll(x, mean, sigma):
    return 0.5 * ((x - mean) / sigma) ** 2 + torch.log(sigma) + 0.5 * math.log(2 * math.pi)
