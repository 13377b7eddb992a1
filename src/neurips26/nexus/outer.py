"""Outer optimizers: AdamW, SGD, and the Muon + AdamW composite (Muon on hidden matrices).

The Nexus wrapper and every baseline take an ``outer`` optimizer (or a list of them, for the Muon
composite). ``lr_source`` says whose learning rate drives the inner step: the first AdamW of the
list (for Muon + AdamW: the AdamW group), else the first optimizer, always its first param group,
read at every step so schedulers attached to the outer optimizer act on the inner step too.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import torch

from neurips26.harness.validation import check_choice, check_scalar

OUTER_NAMES = ("adamw", "sgd", "muon")


def as_optimizers(outer: Any) -> list[torch.optim.Optimizer]:
    """``outer`` as a non-empty list of ``torch.optim.Optimizer``; TypeError naming ``outer`` otherwise."""
    opts = list(outer) if isinstance(outer, (list, tuple)) else [outer]
    if not opts or not all(isinstance(o, torch.optim.Optimizer) for o in opts):
        raise TypeError(f"outer must be a torch.optim.Optimizer, a list of them, or one of {OUTER_NAMES}; "
                        f"got {outer!r}")
    return opts


def lr_source(opts: Sequence[torch.optim.Optimizer]) -> dict:
    """The param group whose ``lr`` is lr_t: the first AdamW's first group, else the first optimizer's."""
    for o in opts:
        if isinstance(o, torch.optim.AdamW):
            return o.param_groups[0]
    return opts[0].param_groups[0]


def is_muon_param(name: str, p: torch.Tensor) -> bool:
    """Muon takes the 2-D hidden weights (attention / MLP projections), not embeddings or lm_head."""
    return p.ndim == 2 and "embed" not in name and "lm_head" not in name


def make_outer(name: str, params: Iterable, lr: float = 1e-3, weight_decay: float | None = None,
               **kw: Any) -> list[torch.optim.Optimizer]:
    """Build the outer optimizer(s) by name.

    params: tensors, or ``(name, tensor)`` pairs (``model.named_parameters()``; needed for ``muon``).
    ``muon``: ``torch.optim.Muon`` on the 2-D hidden weights with ``adjust_lr_fn="match_rms_adamw"``
    and the same lr and weight decay, AdamW on the rest (returned as ``[AdamW, Muon]``).
    ``weight_decay`` None means the torch default of AdamW (0.01) / SGD (0).
    """
    check_choice(name, "outer", OUTER_NAMES)
    lr = check_scalar(lr, "lr", float, min=0, inclusive="neither")
    items = list(params)
    named = [(n, p) for n, p in items] if items and isinstance(items[0], tuple) else \
        [(f"p{i}", p) for i, p in enumerate(items)]
    tensors = [p for _, p in named if p.requires_grad]
    if not tensors:
        raise ValueError("params must hold at least one trainable tensor")
    if name == "sgd":
        return [torch.optim.SGD(tensors, lr=lr, weight_decay=weight_decay or 0.0, **kw)]
    wd = 0.01 if weight_decay is None else check_scalar(weight_decay, "weight_decay", float, min=0)
    if name == "adamw":
        return [torch.optim.AdamW(tensors, lr=lr, weight_decay=wd, **kw)]
    if not items or not isinstance(items[0], tuple):
        raise ValueError("outer='muon' needs named parameters (model.named_parameters()) to split "
                         "hidden matrices from embeddings and norms")
    hidden = [p for n, p in named if p.requires_grad and is_muon_param(n, p)]
    rest = [p for n, p in named if p.requires_grad and not is_muon_param(n, p)]
    opts: list[torch.optim.Optimizer] = []
    if rest:
        opts.append(torch.optim.AdamW(rest, lr=lr, weight_decay=wd))
    if hidden:
        opts.append(torch.optim.Muon(hidden, lr=lr, weight_decay=wd, adjust_lr_fn="match_rms_adamw"))
    return opts
