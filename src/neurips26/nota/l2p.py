"""L2P baseline (Wang et al., CVPR 2022): a prompt pool selected by key-query matching, frozen backbone.

Query = the frozen backbone's pooled feature (our backbone has no [CLS]); the ``top_k`` prompts whose
keys have the largest cosine similarity with the query are prepended (``length`` tokens each) and the
output of the prompt tokens is pooled; loss = CE over the current task's logits + ``pull`` x
(1 - cos(key, query)) of the selected keys. Inference takes two forward passes (query, then prompted).
"""
from __future__ import annotations

import copy
from typing import Sequence

import numpy as np
import torch
from torch import nn

from neurips26.harness.validation import check_scalar
from neurips26.nota.cil import TrainSettings, check_tasks, cil_metrics, task_accuracies
from neurips26.nota.data import check_images


class L2P(nn.Module):
    def __init__(self, backbone: nn.Module, pool: int = 10, length: int = 5, top_k: int = 5,
                 pull: float = 0.5, generator: torch.Generator | None = None):
        super().__init__()
        self.pool = check_scalar(pool, "pool", int, min=1)
        self.length = check_scalar(length, "length", int, min=1)
        self.top_k = check_scalar(top_k, "top_k", int, min=1, max=pool)
        self.pull = check_scalar(pull, "pull", float, min=0)
        self.backbone = backbone.eval()
        for p in self.backbone.parameters():
            p.requires_grad_(False)
        d = backbone.dim
        self.prompts = nn.Parameter(torch.empty(pool, length, d).uniform_(-1, 1, generator=generator) * 0.02)
        self.keys = nn.Parameter(torch.empty(pool, d).uniform_(-1, 1, generator=generator))
        self.rows = nn.ParameterList()
        self.classes: list[list[int]] = []

    def train(self, mode: bool = True):
        super().train(mode)
        self.backbone.eval()
        return self

    @property
    def seen_classes(self) -> list[int]:
        return [c for cs in self.classes for c in cs]

    def new_task(self, classes: Sequence[int], generator: torch.Generator | None = None) -> None:
        for r in self.rows:
            r.requires_grad_(False)
        rows = torch.randn(len(classes), self.backbone.dim, generator=generator) * 0.02
        self.rows.append(nn.Parameter(rows))
        self.classes.append(list(classes))

    def select(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(prompt tokens (N, top_k*length, d), pull loss) — the first of the two passes."""
        with torch.no_grad():
            q = nn.functional.normalize(self.backbone.features(x), dim=1)
        k = nn.functional.normalize(self.keys, dim=1)
        sim = q @ k.T
        idx = sim.topk(self.top_k, dim=1).indices
        tokens = self.prompts[idx].reshape(len(x), self.top_k * self.length, -1)
        pull = (1 - sim.gather(1, idx)).mean()
        return tokens, pull

    def features(self, x: torch.Tensor) -> torch.Tensor:
        tokens, _ = self.select(x)
        return self.backbone.features(x, prompts=tokens)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x) @ torch.cat(list(self.rows)).T


def run_l2p(backbone: nn.Module, tasks: Sequence[Sequence[int]], train: tuple, test: tuple,
            settings: TrainSettings | None = None, seed: int = 0, **kwargs) -> dict:
    """The whole L2P CIL sequence (prompts/keys trained in every task, rows per task)."""
    tasks = check_tasks(tasks)
    settings = settings or TrainSettings()
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = L2P(copy.deepcopy(backbone), generator=g, **kwargs)
    xtr, ytr = train
    xte, yte = test
    t_n = len(tasks)
    acc = np.full((t_n, t_n), np.nan)
    for t, cs in enumerate(tasks):
        model.new_task(cs, g)
        m = np.isin(ytr, cs)
        xs = torch.from_numpy(check_images(xtr[m]))
        local = {c: i for i, c in enumerate(cs)}
        ys = torch.tensor([local[int(c)] for c in ytr[m]])
        opt = torch.optim.Adam([{"params": [model.prompts, model.keys], "lr": settings.lr_adapter},
                                {"params": [model.rows[-1]], "lr": settings.lr_rows}])
        model.train()
        for _ in range(settings.epochs):
            perm = torch.randperm(len(xs), generator=g)
            for i in range(0, len(xs), settings.batch):
                idx = perm[i:i + settings.batch]
                tokens, pull = model.select(xs[idx])
                logits = model.backbone.features(xs[idx], prompts=tokens) @ model.rows[-1].T
                loss = nn.functional.cross_entropy(logits, ys[idx]) + model.pull * pull
                opt.zero_grad()
                loss.backward()
                opt.step()
        model.eval()
        sel = np.isin(yte, model.seen_classes)
        with torch.no_grad():
            logits = model(torch.from_numpy(check_images(xte[sel])))
        pred = np.asarray(model.seen_classes)[logits.argmax(1).numpy()]
        acc[t, :t + 1] = task_accuracies(pred, yte[sel], tasks[:t + 1])
    counts = [int(np.isin(yte, cs).sum()) for cs in tasks]
    n_p = model.prompts.numel() + model.keys.numel()
    return {**cil_metrics(acc, counts), "acc": acc.tolist(), "trainable_per_task": n_p,
            "stored_adapter_params": n_p, "drift": None, "model": model}
