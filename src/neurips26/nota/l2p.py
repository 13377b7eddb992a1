"""L2P baseline (Wang et al., CVPR 2022): a prompt pool selected by key-query matching, frozen backbone.

Query = the frozen backbone's pooled feature (our backbone has no [CLS]); the ``top_k`` prompts whose
keys have the largest cosine similarity with the query are prepended (``length`` tokens each) and the
output of the prompt tokens is pooled; loss = CE over the current task's logits + ``pull`` x
(1 - cos(key, query)) of the selected keys. Inference takes two forward passes (query, then prompted).
The pool's shared pieces (query pass, key cosine, loss, logits) are ``prompt_pool.PromptPool``; the loop is
``cil.run_frozen_cil``. The prompts and keys are shared by all tasks and trained in every task.
"""
from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import nn

from neurips26.harness.validation import check_scalar
from neurips26.nota.cil import TrainSettings, check_tasks, run_frozen_cil
from neurips26.nota.prompt_pool import PromptPool


class L2P(PromptPool):
    def __init__(self, backbone: nn.Module, pool: int = 10, length: int = 5, top_k: int = 5,
                 pull: float = 0.5, generator: torch.Generator | None = None):
        super().__init__(backbone)
        self.pool = check_scalar(pool, "pool", int, min=1)
        self.length = check_scalar(length, "length", int, min=1)
        self.top_k = check_scalar(top_k, "top_k", int, min=1, max=pool)
        self.pull = check_scalar(pull, "pull", float, min=0)
        d = backbone.dim
        self.prompts = nn.Parameter(torch.empty(pool, length, d).uniform_(-1, 1, generator=generator) * 0.02)
        self.keys = nn.Parameter(torch.empty(pool, d).uniform_(-1, 1, generator=generator))

    def new_task(self, classes: Sequence[int], generator: torch.Generator | None = None) -> None:
        for r in self.rows:
            r.requires_grad_(False)
        self.add_rows(classes, generator)

    def task_params(self) -> list[torch.Tensor]:
        return [self.prompts, self.keys]

    def select_tokens(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(prompt tokens (N, top_k*length, d), pull loss) of ``embed`` tokens — the first of the two passes."""
        sim = self.key_cosine(self.query(tokens), self.keys)
        idx = sim.topk(self.top_k, dim=1).indices
        prompt = self.prompts[idx].reshape(len(tokens), self.top_k * self.length, -1)
        pull = (1 - sim.gather(1, idx)).mean()
        return prompt, pull

    def select(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``select_tokens`` of images ``x``."""
        return self.select_tokens(self.backbone.embed(x))

    def prompted(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(features pooled over the selected prompt tokens' outputs, ``pull`` x the pull loss)."""
        prompt, pull = self.select_tokens(tokens)
        return self.backbone.encode(tokens, prompt), self.pull * pull

    def trainable_params(self) -> int:
        return self.prompts.numel() + self.keys.numel()

    def stored_params(self) -> int:
        return self.trainable_params()


def run_l2p(backbone: nn.Module, tasks: Sequence[Sequence[int]], train: tuple, test: tuple,
            settings: TrainSettings | None = None, seed: int = 0, **kwargs) -> dict:
    """The whole L2P CIL sequence (prompts/keys trained in every task, rows per task)."""
    tasks = check_tasks(tasks)
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = L2P(copy.deepcopy(backbone), generator=g, **kwargs)
    return run_frozen_cil(model, tasks, train, test, settings or TrainSettings(), g)
