"""Per-source model (encoders, cosine classifier, fusion with imputation) and the local loss (spec 1, 5a-b).

    z^m = normalise(E_m(x^m));  logits = s_c cos(h, w_c);  h = normalise(sum_obs z^m + sum_miss lambda z~)
    loss = CE(fused) + lambda_uni sum_m CE(z^m) + lambda_al L_align + lambda_tr L_trans

``Guidance`` carries what the server broadcast: global prototypes ``mu`` (K, C, d), alignment weights
``align[m, m', c]`` and transfer weights ``transfer[m, m', c]`` (already including ``1[n(m', c) > 0]``).
ObsAlign, AlwaysAlign and ProtoImpute differ only in these tensors, so with omega = 1 ObsAlign's step
is AlwaysAlign's and with no guidance it is FedAvg-NoAlign's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from neurips26.harness.validation import check_choice, check_scalar

SCALE = 10.0    # cosine-classifier scale s_c


class ObsModel(nn.Module):
    """Encoders for all K modalities (a source trains and shares only its own) and a cosine classifier."""

    def __init__(self, dims: tuple[int, ...], n_classes: int, d: int = 32, hidden: int = 64,
                 regime: str = "encoder"):
        super().__init__()
        check_choice(regime, "regime", ("encoder", "vlm"))
        d = check_scalar(d, "d", int, min=1)
        self.regime, self.d, self.K, self.C = regime, d, len(dims), n_classes
        if regime == "encoder":
            self.enc = nn.ModuleList([nn.Sequential(nn.Linear(dm, hidden), nn.ReLU(), nn.Linear(hidden, d))
                                      for dm in dims])
        else:   # VLM-compatible: frozen features, identity-initialised linear adapters
            if any(dm != d for dm in dims):
                raise ValueError(f"vlm regime needs feature dims == d = {d}, got {dims}")
            self.enc = nn.ModuleList([nn.Linear(d, d, bias=False) for _ in dims])
            for lin in self.enc:
                nn.init.eye_(lin.weight)
        self.cls = nn.Parameter(torch.randn(n_classes, d) * 0.1)

    def embed(self, x: list[torch.Tensor], modalities: tuple[int, ...]) -> dict[int, torch.Tensor]:
        return {m: F.normalize(self.enc[m](x[m]), dim=1) for m in modalities}

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return SCALE * F.normalize(h, dim=1) @ F.normalize(self.cls, dim=1).T


@dataclass
class Guidance:
    mu: torch.Tensor                     # (K, C, d) global prototypes
    align: torch.Tensor | None = None    # (K, K, C) InfoNCE weights (omega c_s 1[omega >= tau_lo]) or None
    transfer: torch.Tensor | None = None  # (K, K, C) transfer / imputation weights or None

    def __post_init__(self) -> None:
        self.mu_unit = F.normalize(self.mu, dim=-1)   # mu(m', c) / ||mu(m', c)|| (0 where unobserved)


def forward(model: ObsModel, x: list[torch.Tensor], mask: torch.Tensor, modalities: tuple[int, ...],
            g: Guidance | None, y_obs: torch.Tensor | None = None):
    """Embeddings, fused logits (with imputation), pseudo-classes and the unimputed posterior."""
    z = model.embed(x, modalities)
    maskf = mask.to(z[modalities[0]].dtype)
    h0 = sum(maskf[:, m:m + 1] * z[m] for m in modalities)
    logits0 = model.logits(h0)
    with torch.no_grad():
        p0 = torch.softmax(logits0, dim=1)
        chat = p0.argmax(dim=1)
        p = p0
        if y_obs is not None:
            lab = y_obs >= 0
            chat = torch.where(lab, y_obs, chat)
            p = torch.where(lab[:, None], F.one_hot(y_obs.clamp(min=0), model.C).to(p0.dtype), p0)
    h = h0
    if g is not None and g.transfer is not None:
        with torch.no_grad():   # a constant of the parameters: p is detached, mu and the weights broadcast
            mods = list(modalities)
            obs = mask[:, mods]                                                    # (n, k)
            # T[i, m', c] = max_{m in O_i} w_tr(m, m', c)
            T = torch.where(obs[:, :, None, None], g.transfer[mods][None], 0.0).amax(dim=1)   # (n, K, C)
            lam = (p[:, None, :] * T).sum(dim=-1) * (~mask).to(p.dtype)           # lambda_{m'} (n, K)
            # z~^{m'} = sum_c p(c|x) mu(m', c), added with weight lambda_{m'} for each missing m'
            n, K, C = T.shape
            imp = (lam[:, :, None] * p[:, None, :]).reshape(n, K * C) @ g.mu.reshape(K * C, -1)
        h = h0 + imp
    return z, model.logits(h), chat, p0


def local_loss(model: ObsModel, x: list[torch.Tensor], mask: torch.Tensor, y_obs: torch.Tensor,
               modalities: tuple[int, ...], g: Guidance | None, tau: float = 0.1, lam_uni: float = 1.0,
               lam_al: float = 1.0, lam_tr: float = 1.0) -> torch.Tensor:
    """The source's loss on one batch (CE on labelled samples, alignment/transfer on all)."""
    z, logits, chat, _ = forward(model, x, mask, modalities, g, y_obs)
    n = len(y_obs)
    lab = y_obs >= 0
    zero = logits.sum() * 0.0
    loss = F.cross_entropy(logits[lab], y_obs[lab], reduction="sum") / n if lab.any() else zero
    for m in modalities:
        sel = lab & mask[:, m]
        if sel.any():
            loss = loss + lam_uni * F.cross_entropy(model.logits(z[m][sel]), y_obs[sel], reduction="sum") / n
    if g is None:
        return loss
    if g.align is not None:
        for i, m in enumerate(modalities):
            for m2 in modalities[i + 1:]:
                idx = torch.nonzero(mask[:, m] & mask[:, m2]).squeeze(1)
                if len(idx) < 2:
                    continue
                sim = z[m][idx] @ z[m2][idx].T / tau
                tgt = torch.arange(len(idx))
                nce = 0.5 * (F.cross_entropy(sim, tgt, reduction="none")
                             + F.cross_entropy(sim.T, tgt, reduction="none"))
                loss = loss + lam_al * (g.align[m, m2, chat[idx]] * nce).sum() / n
    if g.transfer is not None:
        # L_trans = sum_i sum_{m in O_i} sum_{m' not in O_i} w_tr(m, m', c_i) (1 - cos(z^m_i, mu(m', c_i))) / n
        #         = [sum w - sum_{i, m} z^m_i . t^m_i] / n,  t^m_i = sum_{m'} w_tr(m, m', c_i) mu(m', c_i)/||mu||
        # (w and the unit prototypes carry no gradient, so t is computed once, outside autograd)
        mods = list(modalities)
        with torch.no_grad():
            sel = mask[:, mods].T[:, None, :] & ~mask.T[None, :, :]                 # (k, K, n): m seen, m' not
            w = g.transfer[mods][:, :, chat] * sel.to(g.mu.dtype)                   # (k, K, n)
            t = (w[..., None] * g.mu_unit[:, chat][None]).sum(dim=1)                # (k, n, d)
        dots = sum((z[m] * t[j]).sum() for j, m in enumerate(mods))
        loss = loss + lam_tr * (w.sum() - dots) / n
    return loss


@torch.no_grad()
def predict(model: ObsModel, x: list[torch.Tensor], mask: torch.Tensor, modalities: tuple[int, ...],
            g: Guidance | None) -> torch.Tensor:
    """Class predictions with imputation from the available modalities (p(c|x), no labels)."""
    mods = tuple(m for m in modalities if bool(mask[:, m].any()))
    _, logits, _, _ = forward(model, x, mask, mods, g)
    return logits.argmax(dim=1)
