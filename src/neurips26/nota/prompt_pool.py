"""The prompt-pool pieces L2P and CODA-Prompt share (``PromptPool``).

Both keep the backbone frozen and run two passes per image: pass 1, the query ``q(x)`` = the frozen
backbone's pooled feature of the stem tokens (no prompts, no gradient); pass 2, the backbone again with
prompts chosen or weighted by the cosine between the query and learned keys. They differ only in how the
keys turn into prompts (``prompted``): L2P takes the top-k keys and prepends their prompt tokens, CODA-Prompt
weights every component by ``cos(q * A_m, K_m)`` and uses the sum as prefix keys/values.
"""
from __future__ import annotations

import torch
from torch import nn

from neurips26.nota.cil import FrozenBackboneCIL


class PromptPool(FrozenBackboneCIL):
    """A frozen backbone with learned keys/prompts; subclasses define ``prompted(tokens) -> (features, reg)``.

    ``task_loss`` = CE over the current task's logits of the prompted features + ``reg`` (the method's
    regulariser: L2P's key pull, CODA-Prompt's orthogonality penalty; None for none).
    """

    @torch.no_grad()
    def query(self, tokens: torch.Tensor) -> torch.Tensor:
        """Pass 1: the frozen backbone's pooled feature of ``embed`` tokens."""
        return self.backbone.encode(tokens)

    @staticmethod
    def key_cosine(q: torch.Tensor, keys: torch.Tensor, attn: torch.Tensor | None = None) -> torch.Tensor:
        """``cos(q_n, K_m)`` (L2P), or ``cos(q_n * A_m, K_m)`` with attention vectors ``attn`` (CODA-Prompt);
        (N, M)."""
        k = nn.functional.normalize(keys, dim=1)
        if attn is None:
            return nn.functional.normalize(q, dim=1) @ k.T
        return nn.functional.normalize(q[:, None, :] * attn[None], dim=2).mul(k[None]).sum(2)

    def prompted(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise NotImplementedError

    def encode(self, tokens: torch.Tensor) -> torch.Tensor:
        """Both passes: the prompted features of ``embed`` tokens."""
        return self.prompted(tokens)[0]

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.encode(self.backbone.embed(x))

    def all_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.encode(tokens) @ torch.cat(list(self.rows)).T

    def task_loss(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        feats, reg = self.prompted(tokens)
        loss = nn.functional.cross_entropy(feats @ self.rows[-1].T, labels)
        return loss if reg is None else loss + reg
