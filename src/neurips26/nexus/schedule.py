"""The source schedule (spec M2 step 2), the source-tagged micro-batch sampler and the mixed control.

Rule (one stream over the whole run, blocks of ``L = 100`` slots):

1. counts ``n_s = largest_remainder(w_s * L)`` for the block (integers summing to L);
2. slot by slot, with R slots left in the block and p the previous slot's source (also across block
   and outer-step boundaries):
   a. a source ``s != p`` whose remaining count exceeds ``(R - 1) / 2`` is taken at once (otherwise
      it could not be placed without two of it side by side);
   b. else pick a source with probability proportional to its remaining count, excluding p
      (p only when nothing else is left);
3. outer step t takes the next K slots.

This never repeats a source back-to-back when ``max w_s <= 1/2`` and realises the frequencies w
within ``max_s |n_s/L - w_s| <= 1/L`` per block.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import torch

from neurips26.harness.validation import check_array, check_scalar
from neurips26.nexus.base import MicroBatch

BLOCK = 100


def check_weights(weights: Sequence[float], name: str = "weights") -> np.ndarray:
    """Mixture weights as a float array summing to 1; ValueError for negative or all-zero weights."""
    w = check_array(weights, name, ndim=1, dtype=float, min_size=1)
    if np.any(w < 0):
        raise ValueError(f"{name} must be non-negative, got {w.tolist()}")
    if w.sum() <= 0:
        raise ValueError(f"{name} must not be all zero, got {w.tolist()}")
    return w / w.sum()


def largest_remainder(weights: Sequence[float], total: int) -> np.ndarray:
    """Integers n_s >= 0 with sum ``total`` closest to ``w_s * total`` (Hamilton's method)."""
    w = check_weights(weights)
    total = check_scalar(total, "total", int, min=0)
    quota = w * total
    n = np.floor(quota).astype(np.int64)
    rest = total - int(n.sum())
    order = np.argsort(-(quota - n), kind="stable")
    n[order[:rest]] += 1
    return n


class SourceSchedule:
    """An endless stream of source indices following the rule of the module docstring."""

    def __init__(self, weights: Sequence[float], seed: int = 0, block: int = BLOCK):
        self.weights = check_weights(weights)
        self.block = check_scalar(block, "block", int, min=1)
        self.rng = np.random.default_rng(check_scalar(seed, "seed", int, min=0))
        self.prev = -1
        self._left = np.zeros(len(self.weights), dtype=np.int64)

    def next_slot(self) -> int:
        if self._left.sum() == 0:
            self._left = largest_remainder(self.weights, self.block)
        left, p = self._left, self.prev
        r = int(left.sum())
        others = [s for s in range(len(left)) if s != p and left[s] > 0]
        forced = [s for s in others if left[s] > (r - 1) / 2]
        if forced:
            s = forced[0]
        elif others:
            counts = [int(left[o]) for o in others]
            u = self.rng.random() * sum(counts)
            s, acc = others[-1], 0
            for o, c in zip(others, counts):
                acc += c
                if u < acc:
                    s = o
                    break
        else:
            s = p
        left[s] -= 1
        self.prev = s
        return s

    def take(self, k: int) -> list[int]:
        """The next ``k`` slots (one outer step)."""
        k = check_scalar(k, "k", int, min=1)
        return [self.next_slot() for _ in range(k)]


class SourceSampler:
    """Source-tagged micro-batches: ``next_step()`` gives K ``MicroBatch(source, tokens)``.

    sources:  objects with ``name`` and ``batch(rng, batch, ctx)`` (``data.Source``).
    mixed:    the mixed-source control: every sequence of a micro-batch draws its own source
              with probability w (the tag is then ``"mixed"``).
    rank:     with several data-parallel ranks, the schedule (seeded by ``seed``) is identical on
              every rank -- micro-batch k comes from the same source everywhere (source-synchronised)
              -- while the sequences differ (the data rng is seeded by ``seed`` and ``rank``).
    """

    def __init__(self, sources: Sequence, weights: Sequence[float] | None = None, k: int = 4,
                 micro_batch: int = 8, ctx: int = 64, seed: int = 0, mixed: bool = False,
                 require_all_sources: bool = False, rank: int = 0):
        if not sources:
            raise ValueError("sources must name at least one source")
        self.sources = list(sources)
        names = [s.name for s in self.sources]
        if len(set(names)) != len(names):
            raise ValueError(f"sources must have distinct names, got {names}")
        for s in self.sources:
            if len(s.train) <= ctx + 1:
                raise ValueError(f"source {s.name!r} has no data (needs more than ctx + 1 = {ctx + 1} "
                                 f"tokens)")
        w = [1.0] * len(self.sources) if weights is None else weights
        self.weights = check_weights(w)
        if len(self.weights) != len(self.sources):
            raise ValueError(f"weights has {len(self.weights)} entries for {len(self.sources)} sources")
        self.k = check_scalar(k, "k", int, min=1)
        self.micro_batch = check_scalar(micro_batch, "micro_batch", int, min=1)
        self.ctx = check_scalar(ctx, "ctx", int, min=1)
        n_used = int(np.count_nonzero(self.weights))
        if require_all_sources and self.k < n_used:
            raise ValueError(f"k = {self.k} micro-batches cannot cover all {n_used} sources "
                             f"(require_all_sources=True)")
        self.mixed = bool(mixed)
        self.schedule = SourceSchedule(self.weights, seed)
        rank = check_scalar(rank, "rank", int, min=0)
        self.rng = np.random.default_rng([seed, rank, 7])

    def next_step(self) -> list[MicroBatch]:
        if self.mixed:
            out = []
            for _ in range(self.k):
                picks = self.rng.choice(len(self.sources), size=self.micro_batch, p=self.weights)
                rows = [self.sources[i].batch(self.rng, 1, self.ctx) for i in picks]
                out.append(MicroBatch("mixed", torch.cat(rows)))
            return out
        return [MicroBatch(self.sources[s].name, self.sources[s].batch(self.rng, self.micro_batch, self.ctx))
                for s in self.schedule.take(self.k)]

    def __iter__(self) -> Iterator[list[MicroBatch]]:
        while True:
            yield self.next_step()
