"""The full-scale generator: a small fixed-window MLP language model in PyTorch.

p(x_t | x_{t-4..t-1}, topic, domain) = softmax(W_out · GELU(W_2 · GELU(W_1 · [e(x_{t-4}); …; e(x_{t-1});
e_topic; e_domain])))  over the same vocabulary as the count LM (specials are never sampled).
Pre-trained on the pydoc windows; each generation fine-tunes the previous generation's weights on the
selected synthetic documents (single lineage), ``epochs_per_generation`` epochs. Sampling is batched
ancestral sampling at temperature τ with a numpy generator (deterministic on CPU).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from neurips26.entropy_filter.count_lm import Doc, Vocab


@dataclass(frozen=True)
class NeuralLMConfig:
    window: int = 4
    d_emb: int = 64
    d_hidden: int = 256
    pretrain_epochs: int = 8
    epochs_per_generation: int = 3
    lr_pretrain: float = 2e-3
    lr_finetune: float = 1e-3
    batch_size: int = 256
    threads: int = 1


class _MLP(nn.Module):
    def __init__(self, vocab_size: int, n_topics: int, n_domains: int, cfg: NeuralLMConfig):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, cfg.d_emb)
        self.topic = nn.Embedding(n_topics, cfg.d_emb)
        self.domain = nn.Embedding(n_domains, cfg.d_emb)
        self.net = nn.Sequential(nn.Linear((cfg.window + 2) * cfg.d_emb, cfg.d_hidden), nn.GELU(),
                                 nn.Linear(cfg.d_hidden, cfg.d_hidden), nn.GELU(),
                                 nn.Linear(cfg.d_hidden, vocab_size))

    def forward(self, ctx: torch.Tensor, topic: torch.Tensor, domain: torch.Tensor) -> torch.Tensor:
        h = torch.cat([self.emb(ctx).flatten(1), self.topic(topic), self.domain(domain)], dim=1)
        return self.net(h)


class NeuralLM:
    """Same interface as ``TrigramLM``: ``sample``, ``finetune`` (returns a new model), ``token_stats``."""

    def __init__(self, vocab: Vocab, n_domains: int, n_topics: int, cfg: NeuralLMConfig, seed: int):
        torch.set_num_threads(cfg.threads)
        self.vocab, self.n_domains, self.n_topics, self.cfg, self.seed = vocab, n_domains, n_topics, cfg, seed
        g = torch.manual_seed(seed)
        del g
        self.model = _MLP(vocab.size, n_topics, n_domains, cfg)
        self.mask = torch.tensor(~vocab.sampleable)
        self.generation = 0

    # ---- data -----------------------------------------------------------------------------------
    def _pairs(self, docs: list[Doc]) -> tuple[torch.Tensor, ...]:
        W = self.cfg.window
        ctx, tgt, top, dom = [], [], [], []
        for d in docs:
            full = np.concatenate([np.zeros(W, np.int64), d.ids])
            idx = np.arange(d.ids.size)[:, None] + np.arange(W)[None, :]
            ctx.append(full[idx])
            tgt.append(d.ids)
            top.append(np.full(d.ids.size, d.topic))
            dom.append(np.full(d.ids.size, d.domain))
        return tuple(torch.from_numpy(np.concatenate(x)) for x in (ctx, tgt, top, dom))

    def _logits(self, ctx: torch.Tensor, top: torch.Tensor, dom: torch.Tensor) -> torch.Tensor:
        return self.model(ctx, top, dom).masked_fill(self.mask, float("-inf"))

    def _train(self, docs: list[Doc], epochs: int, lr: float, seed: int,
               track: Callable[..., Any] | None = None) -> None:
        if not any(d.ids.size for d in docs):
            # an empty selection (every candidate unscorable: the null policy never fills a quota with
            # them) gives no gradient step: the weights stay as they are
            return
        ctx, tgt, top, dom = self._pairs(docs)
        opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        gen = torch.Generator().manual_seed(seed)
        self.model.train()
        it = range(epochs) if track is None else track(range(epochs), desc="epochs", total=epochs)
        for _ in it:
            perm = torch.randperm(tgt.numel(), generator=gen)
            for s in range(0, perm.numel(), self.cfg.batch_size):
                b = perm[s:s + self.cfg.batch_size]
                loss = nn.functional.cross_entropy(self._logits(ctx[b], top[b], dom[b]), tgt[b])
                opt.zero_grad()
                loss.backward()
                opt.step()
        self.model.eval()

    # ---- the collapse-loop interface --------------------------------------------------------------
    @classmethod
    def pretrain(cls, vocab: Vocab, n_domains: int, n_topics: int, docs: list[Doc], cfg: NeuralLMConfig,
                 seed: int = 0, track: Callable[..., Any] | None = None) -> "NeuralLM":
        lm = cls(vocab, n_domains, n_topics, cfg, seed)
        lm._train(docs, cfg.pretrain_epochs, cfg.lr_pretrain, seed, track)
        return lm

    def finetune(self, docs: list[Doc]) -> "NeuralLM":
        """M_g = fine-tune(M_{g-1}, S_{g-1}): continue from this model's weights; returns a new model."""
        new = copy.copy(self)
        new.model = copy.deepcopy(self.model)
        new.generation = self.generation + 1
        new._train(docs, self.cfg.epochs_per_generation, self.cfg.lr_finetune, self.seed * 1000 + new.generation)
        return new

    @torch.no_grad()
    def sample(self, domains: np.ndarray, topics: np.ndarray, length: int, temperature: float,
               rng: np.random.Generator) -> np.ndarray:
        n, W = domains.size, self.cfg.window
        ctx = torch.zeros((n, W), dtype=torch.long)
        top, dom = torch.from_numpy(np.asarray(topics, np.int64)), torch.from_numpy(np.asarray(domains, np.int64))
        out = np.empty((n, length), dtype=np.int64)
        for t in range(length):
            logits = self._logits(ctx, top, dom).double() / temperature
            p = torch.softmax(logits, dim=1).numpy()
            u = rng.random(n)
            c = np.minimum((p.cumsum(axis=1) < u[:, None]).sum(axis=1), p.shape[1] - 1)
            bad = p[np.arange(n), c] == 0
            if bad.any():
                c[bad] = p[bad].argmax(axis=1)
            out[:, t] = c
            ctx = torch.cat([ctx[:, 1:], torch.from_numpy(c)[:, None]], dim=1)
        return out

    @torch.no_grad()
    def token_stats(self, docs: list[Doc]) -> tuple[np.ndarray, np.ndarray]:
        """Teacher-forced per-document mean next-token entropy and surprisal (bits)."""
        ctx, tgt, top, dom = self._pairs(docs)
        logp = torch.log_softmax(self._logits(ctx, top, dom).double(), dim=1)
        p = logp.exp()
        ent = -(torch.where(p > 0, p * logp, torch.zeros_like(p))).sum(1) / np.log(2)
        sur = -logp[torch.arange(tgt.numel()), tgt] / np.log(2)
        sizes = [d.ids.size for d in docs]
        owner = np.repeat(np.arange(len(docs)), sizes)
        cnt = np.maximum(np.bincount(owner, minlength=len(docs)), 1)
        return (np.bincount(owner, weights=ent.numpy(), minlength=len(docs)) / cnt,
                np.bincount(owner, weights=sur.numpy(), minlength=len(docs)) / cnt)
