"""Training that "improves" robustness (spec §6; ASSUMPTION on the objective), and its baselines.

Graph level, over a family {G_1..G_M}:

- ``contrastive`` (ours): sample ``G~_i ~ N_p(G_i)``; logits ``s_ij = -||f(G~_i) - f(G_j)||^2 / tau``;
  loss ``CE(s_i., i)`` (noisy-alignment InfoNCE, tau = 0.5) + Lipschitz control.
- ``ce``: M-way identification of the clean source with a linear head on f (baseline).
- ``ce_aug``: the same on random-flip augmented inputs (rate p; no margin term) (baseline).
- ``untrained``: random init (baseline).

Node level: ``ce``, ``ce_aug``, and ``margin`` = CE + ``mean relu(mu - m_u)`` over training nodes +
Lipschitz control.

Lipschitz control: ``spectral`` (``torch.nn.utils.parametrizations.spectral_norm`` on every Linear),
``penalty`` (``lambda sum_l relu(kappa_l - 1)^2``) or ``none``.
Defaults: Adam lr 1e-2, full batch, 100 steps (graph level), 200 epochs (node level), p = 0.05,
mu = 1, lambda = 1. The seed drives init (the caller's), noise and augmentation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from neurips26.gnn_margin.embeddings import GraphEmbedding, apply_spectral_norm, lipschitz_penalty
from neurips26.gnn_margin.graphs import check_adjacency, flip_mask_batch, from_upper, stack_family, upper
from neurips26.gnn_margin.node_robustness import NodeClassifier, check_labels, margins
from neurips26.harness.validation import check_choice, check_scalar

GRAPH_OBJECTIVES = ("untrained", "ce", "ce_aug", "contrastive")
NODE_OBJECTIVES = ("untrained", "ce", "ce_aug", "margin")
LIPSCHITZ = ("none", "spectral", "penalty")


@dataclass(frozen=True)
class TrainConfig:
    """Training hyper-parameters (ASSUMPTIONs, all arguments)."""

    steps: int = 100
    lr: float = 1e-2
    p: float = 0.05
    tau: float = 0.5
    lipschitz: str = "spectral"
    penalty: float = 1.0
    mu: float = 1.0
    samples_per_graph: int = 4

    def __post_init__(self):
        check_scalar(self.steps, "steps", int, min=0)
        check_scalar(self.lr, "lr", float, min=0, inclusive="neither")
        check_scalar(self.p, "p", float, min=0, max=1)
        check_scalar(self.tau, "tau", float, min=0, inclusive="neither")
        check_choice(self.lipschitz, "lipschitz", LIPSCHITZ)
        check_scalar(self.penalty, "penalty", float, min=0)
        check_scalar(self.mu, "mu", float, min=0)
        check_scalar(self.samples_per_graph, "samples_per_graph", int, min=1)


def _control(model: nn.Module, cfg: TrainConfig, uses_control: bool) -> None:
    if uses_control and cfg.lipschitz == "spectral":
        apply_spectral_norm(model)


def _reg(model: nn.Module, cfg: TrainConfig, uses_control: bool) -> torch.Tensor:
    if uses_control and cfg.lipschitz == "penalty":
        return cfg.penalty * lipschitz_penalty(model)
    return torch.zeros(())


def train_graph_embedding(
    model: GraphEmbedding,
    family,
    objective: str = "contrastive",
    cfg: TrainConfig = TrainConfig(),
    seed: int = 0,
) -> dict:
    """Train ``model`` in place on ``family``; returns the loss history (first/last)."""
    check_choice(objective, "objective", GRAPH_OBJECTIVES)
    fam = stack_family([check_adjacency(g, f"family[{k}]") for k, g in enumerate(family)])
    M = len(fam)
    if M < 2:
        raise ValueError("family must hold at least two graphs")
    if objective == "untrained" or cfg.steps == 0:
        return {"loss_first": float("nan"), "loss_last": float("nan")}
    rng = np.random.default_rng(seed)
    _control(model, cfg, objective == "contrastive")
    head = nn.Linear(model.out_dim, M).to(model.dtype) if objective in ("ce", "ce_aug") else None
    params = list(model.parameters()) + (list(head.parameters()) if head is not None else [])
    opt = torch.optim.Adam([q for q in params if q.requires_grad], lr=cfg.lr)
    target = torch.arange(M).repeat_interleave(cfg.samples_per_graph)
    src = np.repeat(np.arange(M), cfg.samples_per_graph)
    codes = upper(fam)
    losses = []
    model.train()
    for _ in range(cfg.steps):
        if objective == "ce":
            inputs, tgt = fam, torch.arange(M)
        else:
            masks = rng.random((len(src), codes.shape[1])) < cfg.p  # N_p on every pair, every sample
            inputs = from_upper(codes[src] ^ masks.astype(np.uint8), fam.shape[-1])
            tgt = target
        z = model(inputs, validate=False)
        if objective == "contrastive":
            zf = model(fam, validate=False)
            logits = -(torch.cdist(z, zf) ** 2) / cfg.tau
        else:
            logits = head(z)
        loss = nn.functional.cross_entropy(logits, tgt) + _reg(model, cfg, objective == "contrastive")
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    model.eval()
    return {"loss_first": losses[0], "loss_last": losses[-1]}


def train_node_classifier(
    clf: NodeClassifier,
    A,
    y,
    train_idx,
    objective: str = "margin",
    cfg: TrainConfig = TrainConfig(steps=200),
    seed: int = 0,
) -> dict:
    """Train ``clf`` in place on the labelled nodes ``train_idx`` of graph ``A``."""
    check_choice(objective, "objective", NODE_OBJECTIVES)
    A = check_adjacency(A)
    y = check_labels(y, A.shape[0], clf.n_classes)
    idx = torch.as_tensor(np.asarray(train_idx, dtype=np.int64))
    if idx.numel() == 0:
        raise ValueError("train_idx must name at least one node")
    if objective == "untrained" or cfg.steps == 0:
        return {"loss_first": float("nan"), "loss_last": float("nan")}
    rng = np.random.default_rng(seed)
    _control(clf, cfg, objective == "margin")
    opt = torch.optim.Adam([q for q in clf.parameters() if q.requires_grad], lr=cfg.lr)
    yt = torch.as_tensor(y, dtype=torch.long)
    m_pairs = A.shape[0] * (A.shape[0] - 1) // 2
    losses = []
    clf.train()
    for _ in range(cfg.steps):
        G = flip_mask_batch(A, rng.random((1, m_pairs)) < cfg.p) if objective == "ce_aug" else A[None]
        z = clf(G, validate=False)[0]
        loss = nn.functional.cross_entropy(z[idx], yt[idx])
        if objective == "margin":
            m = margins(z[idx], y[idx.numpy()])
            loss = loss + torch.relu(cfg.mu - m).mean() + _reg(clf, cfg, True)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    clf.eval()
    return {"loss_first": losses[0], "loss_last": losses[-1]}
