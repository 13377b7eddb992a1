"""InfLoRA baseline (Liang & Li, CVPR 2024): a designed, frozen down-projection per task + DualGPM.

Per adapted layer and task t: collect the layer-input covariance ``C = sum_x x x^T`` on task t's data
(through the model of task t-1), project it away from the DualGPM memory (``remove``: ``C - U U^T C``
with U the occupied basis; ``retain``: ``V V^T C`` with V the free basis), and set the new LoRA's
``A`` to the top-r left singular vectors (rows) scaled by ``1/sqrt(3)``; only ``B`` (init 0) trains,
the updates are summed (plain rule). After the task the memory is extended with the directions that
bring the captured energy of the task's inputs up to the threshold ``lam_t = lam_b + (lam_e - lam_b) t/T``;
when the occupied basis exceeds half the dimension the memory switches to storing the free space
(``retain``) — the official code's behaviour. (Reconstruction from the official repository's logic.)
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from neurips26.harness.validation import check_scalar
from neurips26.nota.cil import (CILModel, TrainSettings, check_tasks, cil_metrics, predict, task_accuracies,
                                train_task)


def threshold(t: int, n_tasks: int, lam_b: float = 0.95, lam_e: float = 1.0) -> float:
    """``lam_b + (lam_e - lam_b) t / T`` for task index ``t`` (0-based, as the official schedule)."""
    return lam_b + (lam_e - lam_b) * t / n_tasks


class DualGPM:
    """The gradient-projection memory of one layer: an orthonormal basis and its meaning."""

    def __init__(self, dim: int):
        self.dim = check_scalar(dim, "dim", int, min=1)
        self.mode = "remove"                              # basis = occupied space
        self.basis = torch.zeros(dim, 0, dtype=torch.float64)

    def occupied(self) -> torch.Tensor:
        """Projector onto the occupied (old tasks') input space."""
        u = self.basis
        p = u @ u.T
        return p if self.mode == "remove" else torch.eye(self.dim, dtype=torch.float64) - p

    def project(self, cov: torch.Tensor) -> torch.Tensor:
        """The covariance minus the occupied space (``remove``) or kept in the free space (``retain``)."""
        u = self.basis
        if self.mode == "remove":
            return cov - u @ (u.T @ cov)
        return u @ (u.T @ cov)

    def update(self, cov: torch.Tensor, lam: float) -> None:
        """Add the directions of ``cov`` needed to capture a fraction ``lam`` of its energy."""
        cov = cov.double()
        total = float(torch.trace(cov))
        if total <= 0:
            return
        occ = self.occupied()
        resid = cov - occ @ cov - cov @ occ + occ @ cov @ occ            # (I-P) C (I-P)
        evals, evecs = torch.linalg.eigh((resid + resid.T) / 2)
        order = torch.argsort(evals, descending=True)
        evals, evecs = evals[order].clamp_min(0), evecs[:, order]
        captured = (total - float(evals.sum())) / total
        r = 0
        for e in evals.tolist():
            if captured >= lam:
                break
            captured += e / total
            r += 1
        if r == 0:
            return
        new = evecs[:, :r]
        if self.mode == "remove":
            u = torch.linalg.qr(torch.cat([self.basis, new], 1)).Q
            self.basis = u
            if u.shape[1] > self.dim // 2:                  # switch: store the free space instead
                self.basis = _complement(u, self.dim)
                self.mode = "retain"
        else:
            free = self.basis - new @ (new.T @ self.basis)  # remove the new directions from the free space
            self.basis = _orth(free, self.basis.shape[1] - r)


def _orth(m: torch.Tensor, k: int) -> torch.Tensor:
    if k <= 0:
        return torch.zeros(m.shape[0], 0, dtype=m.dtype)
    u, _, _ = torch.linalg.svd(m, full_matrices=False)
    return u[:, :k]


def _complement(u: torch.Tensor, dim: int) -> torch.Tensor:
    p = torch.eye(dim, dtype=u.dtype) - u @ u.T
    return _orth(p, dim - u.shape[1])


def design_down_projection(cov: torch.Tensor, memory: DualGPM, rank: int) -> torch.Tensor:
    """``A`` (rank x d_in): top-``rank`` left singular vectors of the projected covariance / sqrt(3)."""
    u, _, _ = torch.linalg.svd(memory.project(cov.double()), full_matrices=False)
    return (u[:, :rank].T / math.sqrt(3)).float()


@torch.no_grad()
def input_covariances(model: CILModel, x: np.ndarray, batch: int = 256) -> list[torch.Tensor]:
    """``sum x x^T`` of every adapted layer's inputs (all tokens) on images ``x``."""
    dims = [lay.base.in_features for lay in model.layers]
    covs = [torch.zeros(d, d, dtype=torch.float64) for d in dims]
    hooks = []
    for i, lay in enumerate(model.layers):
        def hook(mod, inp, out, i=i):
            h = inp[0].reshape(-1, inp[0].shape[-1]).double()
            covs[i] += h.T @ h
        hooks.append(lay.register_forward_hook(hook))
    try:
        xs = torch.from_numpy(x)
        for j in range(0, len(xs), batch):
            model.features(xs[j:j + batch])
    finally:
        for h in hooks:
            h.remove()
    return covs


def run_inflora(backbone: torch.nn.Module, tasks: Sequence[Sequence[int]], train: tuple, test: tuple,
                settings: TrainSettings | None = None, seed: int = 0, rank: int = 3, lam_b: float = 0.95,
                lam_e: float = 1.0, **adapter_kwargs) -> dict:
    """The whole InfLoRA CIL sequence; same metrics as ``cil.run_cil``."""
    tasks = check_tasks(tasks)
    lam_b = check_scalar(lam_b, "lam_b", float, min=0, max=1)
    lam_e = check_scalar(lam_e, "lam_e", float, min=lam_b, max=1)
    settings = settings or TrainSettings()
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    adapter_kwargs = {k: v for k, v in adapter_kwargs.items() if k not in ("bond", "rho", "eps_rel")}
    model = CILModel(backbone, "lora_plain", rank=rank, **adapter_kwargs)
    memories = [DualGPM(lay.base.in_features) for lay in model.layers]
    xtr, ytr = train
    xte, yte = test
    t_n = len(tasks)
    acc = np.full((t_n, t_n), np.nan)
    for t, cs in enumerate(tasks):
        m = np.isin(ytr, cs)
        covs = input_covariances(model, xtr[m])
        model.new_task(cs, g)
        for lay, mem, cov in zip(model.layers, memories, covs):
            ad = lay.adapters[-1]
            with torch.no_grad():
                ad.a.copy_(design_down_projection(cov, mem, rank))
            ad.a.requires_grad_(False)
        train_task(model, xtr[m], ytr[m], settings, g)
        covs = input_covariances(model, xtr[m])
        for mem, cov in zip(memories, covs):
            mem.update(cov, threshold(t, t_n, lam_b, lam_e))
        seen = np.isin(yte, model.seen_classes)
        acc[t, :t + 1] = task_accuracies(predict(model, xte[seen]), yte[seen], tasks[:t + 1])
    counts = [int(np.isin(yte, cs).sum()) for cs in tasks]
    return {**cil_metrics(acc, counts), "acc": acc.tolist(),
            "trainable_per_task": sum(lay.adapters[-1].b.numel() for lay in model.layers),
            "stored_adapter_params": model.stored_adapter_params(), "drift": None, "model": model,
            "memory": [(mem.mode, mem.basis.shape[1]) for mem in memories]}
