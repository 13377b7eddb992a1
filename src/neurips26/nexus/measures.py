"""Measurements of common minima (spec M1): gradient similarity, closeness, OOD loss and accuracy.

* GS(theta) = mean over source pairs s < s' of cos(g_s, g_s'), each g_s averaged over M batches.
* Closeness (ASSUMPTION, the measurement protocol): from theta fine-tune a copy on source s alone for
  F steps (AdamW, lr_ft, no weight decay) -> theta_s; C_dist = mean_s ||theta_s - theta||,
  C_pair = mean_{s<s'} ||theta_s - theta_s'||, Delta L_s = L_s(theta) - L_s(theta_s).
* OOD loss: mean next-character loss on held-out text of another distribution.
* OOD arithmetic: greedy exact match on prompts ``"a+b-c="`` (3 operands, 3 digits).
"""

from __future__ import annotations

import copy
import itertools
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import torch

from neurips26.harness.validation import check_scalar

LossFn = Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]


def _params(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p for p in model.parameters() if p.requires_grad]


def source_gradient(model: torch.nn.Module, loss_fn: LossFn, batches: Sequence[torch.Tensor]) -> torch.Tensor:
    """The flat gradient of the mean loss over ``batches`` (the model's grads are left cleared)."""
    if not batches:
        raise ValueError("batches must hold at least one batch")
    params = _params(model)
    total = [torch.zeros_like(p) for p in params]
    for b in batches:
        gs = torch.autograd.grad(loss_fn(model, b), params, allow_unused=True)
        for t, g in zip(total, gs):
            if g is not None:
                t.add_(g)
    return torch.cat([t.reshape(-1) for t in total]) / len(batches)


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.dot(a, b) / (torch.linalg.vector_norm(a) * torch.linalg.vector_norm(b) + 1e-20))


def gradient_similarity(model: torch.nn.Module, loss_fn: LossFn,
                        batches: Mapping[str, Sequence[torch.Tensor]]) -> dict:
    """GS and every pair's cosine: ``{"gs": float, "pairs": {"a|b": cos}}``, pairs in sorted order."""
    if len(batches) < 2:
        raise ValueError(f"batches must cover at least 2 sources, got {list(batches)}")
    names = sorted(batches)
    grads = {n: source_gradient(model, loss_fn, batches[n]) for n in names}
    pairs = {f"{a}|{b}": cosine(grads[a], grads[b]) for a, b in itertools.combinations(names, 2)}
    return {"gs": float(np.mean(list(pairs.values()))), "pairs": pairs}


@torch.no_grad()
def batch_losses(model: torch.nn.Module, loss_fn: LossFn, batches: Iterable[torch.Tensor]) -> list[float]:
    """The loss of each batch (eval mode)."""
    was = model.training
    model.eval()
    out = [float(loss_fn(model, b)) for b in batches]
    model.train(was)
    return out


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in _params(model)])


def closeness(model: torch.nn.Module, loss_fn: LossFn, train: Mapping[str, Sequence[torch.Tensor]],
              val: Mapping[str, Sequence[torch.Tensor]], lr_ft: float = 1e-3) -> dict:
    """The closeness protocol: per-source fine-tuned copies (one AdamW step per train batch, F = len).

    Returns ``c_dist``, ``c_pair``, ``dl`` (mean Delta L_s), and per-source ``dist``/``dl_s`` and
    per-pair ``pair`` distances.
    """
    lr_ft = check_scalar(lr_ft, "lr_ft", float, min=0, inclusive="neither")
    if set(train) != set(val) or len(train) < 2:
        raise ValueError("train and val must cover the same >= 2 sources")
    theta = _flat(model)
    names = sorted(train)
    ends, dist, dl = {}, {}, {}
    for s in names:
        if not train[s]:
            raise ValueError(f"source {s!r} has no fine-tuning batches (F must be >= 1)")
        m = copy.deepcopy(model)
        m.train()
        opt = torch.optim.AdamW(_params(m), lr=lr_ft, weight_decay=0.0)
        before = float(np.mean(batch_losses(m, loss_fn, val[s])))
        for b in train[s]:
            opt.zero_grad(set_to_none=True)
            loss_fn(m, b).backward()
            opt.step()
        after = float(np.mean(batch_losses(m, loss_fn, val[s])))
        ends[s] = _flat(m)
        dist[s] = float(torch.linalg.vector_norm(ends[s] - theta))
        dl[s] = before - after
    pair = {f"{a}|{b}": float(torch.linalg.vector_norm(ends[a] - ends[b]))
            for a, b in itertools.combinations(names, 2)}
    return {"c_dist": float(np.mean(list(dist.values()))), "c_pair": float(np.mean(list(pair.values()))),
            "dl": float(np.mean(list(dl.values()))), "dist": dist, "dl_s": dl, "pair": pair}


@torch.no_grad()
def arithmetic_exact_match(model: torch.nn.Module, encode: Callable[[str], np.ndarray],
                           decode: Callable[[Sequence[int]], str], prompts: Sequence[tuple[str, str]],
                           max_new: int = 6) -> list[int]:
    """1/0 per prompt: does the greedy continuation up to the first newline equal the answer?"""
    max_new = check_scalar(max_new, "max_new", int, min=1)
    was = model.training
    model.eval()
    correct = [0] * len(prompts)
    by_len: dict[int, list[int]] = {}
    for i, (p, _) in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    for _, idx in sorted(by_len.items()):
        ids = torch.from_numpy(np.stack([encode(prompts[i][0]) for i in idx]))
        for _ in range(max_new):
            nxt = model(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)
        plen = len(prompts[idx[0]][0])
        for row, i in zip(ids[:, plen:].tolist(), idx):
            text = decode(row)
            correct[i] = int(text.split("\n", 1)[0] == prompts[i][1] and "\n" in text)
    model.train(was)
    return correct
