"""The baselines of the paper with Nexus's interface: ``step(micro_batches, loss_fn)`` per outer step.

* ``GradAccumulation`` -- the AdamW (or Muon) baseline: Delta = mean_k g_k(theta), one outer step.
* ``Fish`` (Shi et al. 2022) -- raw inner SGD over the micro-batches, then
  theta <- theta + eps (phi_K - theta).
* ``Lookahead`` (Zhang et al. 2019) -- k = K fast AdamW steps (one per micro-batch), then
  slow <- slow + alpha (fast - slow), fast <- slow.
* ``PCGrad`` (Yu et al. 2020) -- per-source gradients at theta; g_i -= (g_i.g_j / ||g_j||^2) g_j when
  g_i.g_j < 0 (other sources in random order); the mean of the projected gradients feeds the outer step.
* ``GradVac`` (Wang et al. 2021) -- raise cos(g_i, g_j) to an EMA target phî_ij (init 0, beta 0.01):
  if cos < phî: g_i += ||g_i|| (phî sqrt(1 - cos^2) - cos sqrt(1 - phî^2)) / (||g_j|| sqrt(1 - phî^2)) g_j,
  then phî <- (1 - beta) phî + beta cos.

PCGrad and GradVac need all per-source gradients at the same theta: S flat gradient copies.
Mixed-source micro-batches (the control) come from ``schedule.SourceSampler(mixed=True)``; Nexus
with ``normalize=False`` is the Reptile-style variant. Muon is ``outer.make_outer("muon", ...)``.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch

from neurips26.harness.validation import check_scalar
from neurips26.nexus.base import MicroBatch, check_step_inputs
from neurips26.nexus.optimizer import collect_grads, global_norm
from neurips26.nexus.outer import as_optimizers, make_outer


class _MicroBatchOptimizer:
    """Shared plumbing: params, outer optimizer(s), clipping, stats and state_dict."""

    def __init__(self, params: Iterable, outer: Any, max_grad_norm: float | None, outer_lr: float,
                 sources: Sequence[str] | None = None):
        items = list(params)
        self.params = [p for _, p in items] if items and isinstance(items[0], tuple) else items
        if not self.params:
            raise ValueError("params must hold at least one tensor")
        built = make_outer(outer, items, lr=outer_lr) if isinstance(outer, str) else outer
        self.outers = as_optimizers(built)
        if max_grad_norm is not None:
            max_grad_norm = check_scalar(max_grad_norm, "max_grad_norm", float, min=0, inclusive="neither")
        self.max_grad_norm = max_grad_norm
        self.sources = None if sources is None else tuple(sources)
        self.outer_steps = 0
        self.last_stats: dict[str, float] = {}

    def _outer_step(self) -> None:
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        for o in self.outers:
            o.step()
        for o in self.outers:
            o.zero_grad(set_to_none=True)
        self.outer_steps += 1

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.outers:
            o.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {"outer_steps": self.outer_steps, "outer": [o.state_dict() for o in self.outers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for o, s in zip(self.outers, state["outer"]):
            o.load_state_dict(s)
        self.outer_steps = int(state["outer_steps"])


class GradAccumulation(_MicroBatchOptimizer):
    """Gradient accumulation over the K micro-batches (each loss / K), one outer step: the anchor."""

    def __init__(self, params: Iterable, outer: Any = "adamw", max_grad_norm: float | None = None,
                 outer_lr: float = 1e-3, sources: Sequence[str] | None = None, ddp: Any = None):
        super().__init__(params, outer, max_grad_norm, outer_lr, sources)
        self.ddp = ddp  # a DistributedDataParallel model: the first K - 1 backwards run under no_sync

    def step(self, micro_batches: Sequence[MicroBatch],
             loss_fn: Callable | Sequence[Callable] | None = None) -> float:
        pairs = check_step_inputs(micro_batches, loss_fn, self.sources)
        K = len(pairs)
        for p in self.params:
            p.grad = None
        total = 0.0
        for k, (mb, fn) in enumerate(pairs):
            quiet = self.ddp is not None and k < K - 1
            with self.ddp.no_sync() if quiet else contextlib.nullcontext():
                loss = fn(mb.data)
                (loss / K).backward()
            total += float(loss.detach())
        with torch.no_grad():
            gn = float(global_norm(collect_grads(self.params)))
        self._outer_step()
        self.last_stats = {"inner_loss": total / K, "grad_norm": gn, "delta_norm": gn, "cos": math.nan}
        return total / K


class Fish:
    """Fish: phi <- theta; phi <- phi - eta g_k for each micro-batch; theta <- theta + eps (phi - theta)."""

    def __init__(self, params: Iterable, inner_lr: float, eps: float = 0.1):
        self.params = list(params)
        if not self.params:
            raise ValueError("params must hold at least one tensor")
        self.inner_lr = check_scalar(inner_lr, "inner_lr", float, min=0, inclusive="neither")
        self.eps = check_scalar(eps, "eps", float, min=0, inclusive="neither")
        self.outer_steps = 0
        self.last_stats: dict[str, float] = {}

    def step(self, micro_batches: Sequence[MicroBatch],
             loss_fn: Callable | Sequence[Callable] | None = None) -> float:
        pairs = check_step_inputs(micro_batches, loss_fn)
        with torch.no_grad():
            theta = [p.detach().clone() for p in self.params]
        total = 0.0
        for mb, fn in pairs:
            for p in self.params:
                p.grad = None
            loss = fn(mb.data)
            loss.backward()
            total += float(loss.detach())
            with torch.no_grad():
                for p, g in zip(self.params, collect_grads(self.params)):
                    p.sub_(self.inner_lr * g)
        with torch.no_grad():
            for p, th in zip(self.params, theta):
                p.copy_(th + self.eps * (p - th))
                p.grad = None
        self.outer_steps += 1
        self.last_stats = {"inner_loss": total / len(pairs), "cos": math.nan}
        return total / len(pairs)


class Lookahead(_MicroBatchOptimizer):
    """Lookahead(inner, k = K, alpha): one inner step per micro-batch, then the slow-weight pull."""

    def __init__(self, params: Iterable, outer: Any = "adamw", alpha: float = 0.5,
                 max_grad_norm: float | None = None, outer_lr: float = 1e-3):
        super().__init__(params, outer, max_grad_norm, outer_lr)
        self.alpha = check_scalar(alpha, "alpha", float, min=0, max=1, inclusive="right")
        self._slow: list[torch.Tensor] | None = None

    def step(self, micro_batches: Sequence[MicroBatch],
             loss_fn: Callable | Sequence[Callable] | None = None) -> float:
        pairs = check_step_inputs(micro_batches, loss_fn)
        with torch.no_grad():
            if self._slow is None:
                self._slow = [p.detach().clone() for p in self.params]
        total = 0.0
        for mb, fn in pairs:
            for p in self.params:
                p.grad = None
            loss = fn(mb.data)
            loss.backward()
            total += float(loss.detach())
            if self.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
            for o in self.outers:
                o.step()
        with torch.no_grad():
            for p, s in zip(self.params, self._slow):
                s.add_(p - s, alpha=self.alpha)
                p.copy_(s)
                p.grad = None
        self.outer_steps += 1
        self.last_stats = {"inner_loss": total / len(pairs), "cos": math.nan}
        return total / len(pairs)


# ----------------------------------------------------------------------------- gradient surgery


def pcgrad_project(grads: Sequence[torch.Tensor],
                   rng: np.random.Generator | None = None) -> list[torch.Tensor]:
    """PCGrad: each g_i projected off every g_j it conflicts with (g_i . g_j < 0), others in random order."""
    out = []
    for i, gi in enumerate(grads):
        g = gi.clone()
        others = [j for j in range(len(grads)) if j != i]
        if rng is not None:
            rng.shuffle(others)
        for j in others:
            dot = torch.dot(g, grads[j])
            if dot < 0:
                g = g - dot / (torch.dot(grads[j], grads[j]) + 1e-20) * grads[j]
        out.append(g)
    return out


def gradvac_project(grads: Sequence[torch.Tensor], targets: np.ndarray, beta: float = 0.01,
                    rng: np.random.Generator | None = None) -> list[torch.Tensor]:
    """GradVac: raise cos(g_i, g_j) to the EMA target targets[i, j] (updated in place)."""
    out = []
    for i, gi in enumerate(grads):
        g = gi.clone()
        others = [j for j in range(len(grads)) if j != i]
        if rng is not None:
            rng.shuffle(others)
        for j in others:
            gj = grads[j]
            nj = torch.linalg.vector_norm(gj)
            ng = torch.linalg.vector_norm(g)
            phi = float(torch.dot(g, gj) / (ng * nj + 1e-20))
            hat = float(targets[i, j])
            if phi < hat:
                num = hat * math.sqrt(max(0.0, 1 - phi ** 2)) - phi * math.sqrt(max(0.0, 1 - hat ** 2))
                coef = ng * num / (nj * math.sqrt(max(1e-20, 1 - hat ** 2)))
                g = g + coef * gj
            targets[i, j] = (1 - beta) * hat + beta * phi
        out.append(g)
    return out


class _SurgeryOptimizer(_MicroBatchOptimizer):
    """Per-source mean gradients at theta (S flat copies), a projection, their mean -> outer step."""

    def __init__(self, params: Iterable, outer: Any = "adamw", max_grad_norm: float | None = None,
                 outer_lr: float = 1e-3, seed: int = 0):
        super().__init__(params, outer, max_grad_norm, outer_lr)
        self.rng = np.random.default_rng(seed)

    def _project(self, grads: list[torch.Tensor], names: list[str]) -> list[torch.Tensor]:
        raise NotImplementedError

    def step(self, micro_batches: Sequence[MicroBatch],
             loss_fn: Callable | Sequence[Callable] | None = None) -> float:
        pairs = check_step_inputs(micro_batches, loss_fn)
        by_source: dict[str, list[torch.Tensor]] = {}
        total = 0.0
        for mb, fn in pairs:
            for p in self.params:
                p.grad = None
            loss = fn(mb.data)
            loss.backward()
            total += float(loss.detach())
            flat = torch.cat([g.reshape(-1) for g in collect_grads(self.params)]).detach()
            by_source.setdefault(mb.source, []).append(flat)
        names = sorted(by_source)
        grads = [torch.stack(by_source[n]).mean(0) for n in names]
        combined = torch.stack(self._project(grads, names)).mean(0)
        with torch.no_grad():
            offset = 0
            for p in self.params:
                n = p.numel()
                p.grad = combined[offset:offset + n].view_as(p).clone()
                offset += n
        self._outer_step()
        self.last_stats = {"inner_loss": total / len(pairs), "cos": math.nan, "sources": len(names)}
        return total / len(pairs)


class PCGrad(_SurgeryOptimizer):
    """PCGrad over the sources of the K micro-batches, feeding the outer optimizer."""

    def _project(self, grads, names):
        return pcgrad_project(grads, self.rng)


class GradVac(_SurgeryOptimizer):
    """GradVac over the sources of the K micro-batches (targets phî initialised to 0, beta = 0.01)."""

    def __init__(self, params: Iterable, outer: Any = "adamw", beta: float = 0.01,
                 max_grad_norm: float | None = None, outer_lr: float = 1e-3, seed: int = 0):
        super().__init__(params, outer, max_grad_norm, outer_lr, seed)
        self.beta = check_scalar(beta, "beta", float, min=0, max=1)
        self.targets: dict[tuple[str, str], float] = {}

    def _project(self, grads, names):
        t = np.array([[self.targets.get((a, b), 0.0) for b in names] for a in names])
        out = gradvac_project(grads, t, self.beta, self.rng)
        for i, a in enumerate(names):
            for j, b in enumerate(names):
                if i != j:
                    self.targets[(a, b)] = float(t[i, j])
        return out
