"""Every compared method by name, built the same way around one model (spec "Baselines").

=============  ==================================================================================
``adamw``       AdamW gradient accumulation over the same K single-source micro-batches (the foil)
``nexus``       Nexus(AdamW), normalised inner steps, eta = r lr sqrt(N)
``nexus_raw``   Nexus(AdamW) with normalize=False (Reptile-style inner steps)
``nexus_mixed`` Nexus(AdamW) fed mixed-source micro-batches (isolates the source effect)
``muon``        accumulation into Muon (hidden matrices) + AdamW (the rest)
``nexus_muon``  Nexus over the Muon + AdamW composite
``fish``        Fish: raw inner SGD, theta + eps (phi_K - theta)
``lookahead``   Lookahead(AdamW, k = K, alpha = 0.5), one AdamW step per micro-batch
``pcgrad``      PCGrad over the step's sources into AdamW
``gradvac``     GradVac over the step's sources into AdamW
=============  ==================================================================================
"""

from __future__ import annotations

import math

import torch

from neurips26.harness.validation import check_choice
from neurips26.nexus.baselines import Fish, GradAccumulation, GradVac, Lookahead, PCGrad
from neurips26.nexus.optimizer import Nexus
from neurips26.nexus.outer import make_outer

METHODS = ("adamw", "nexus", "nexus_raw", "nexus_mixed", "muon", "nexus_muon", "fish", "lookahead",
           "pcgrad", "gradvac")
MIXED = ("nexus_mixed",)
FISH_EPS = 0.5  # ASSUMPTION: Fish's outer interpolation; its inner SGD step is Nexus's eta at t = 0


def build(method: str, model: torch.nn.Module, lr: float, ratio: float = 0.1, clip: float | None = 1.0,
          log_cos: bool = True, seed: int = 0):
    """The optimizer of ``method`` for ``model`` (all with ``step(micro_batches, loss_fn)``)."""
    check_choice(method, "method", METHODS)
    named = list(model.named_parameters())
    params = [p for _, p in named]
    if method in ("adamw", "muon"):
        return GradAccumulation(params, make_outer("muon" if method == "muon" else "adamw", named, lr=lr),
                                max_grad_norm=clip)
    if method.startswith("nexus"):
        outer = make_outer("muon" if method == "nexus_muon" else "adamw", named, lr=lr)
        return Nexus(params, outer=outer, inner_lr_ratio=ratio, normalize=method != "nexus_raw",
                     max_grad_norm=clip, log_cos=log_cos)
    if method == "fish":
        eta = ratio * lr * math.sqrt(sum(p.numel() for p in params))
        return Fish(params, inner_lr=eta, eps=FISH_EPS)
    if method == "lookahead":
        return Lookahead(params, make_outer("adamw", named, lr=lr), alpha=0.5, max_grad_norm=clip)
    cls = PCGrad if method == "pcgrad" else GradVac
    return cls(params, make_outer("adamw", named, lr=lr), max_grad_norm=clip, seed=seed)
