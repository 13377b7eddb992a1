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


@dataclass
class LossPlan:
    """The per-sample parts of the guided loss that depend only on the masks and the broadcast guidance.

    They are fixed for a whole round, so ``train_epochs`` builds them once per split and takes rows per
    batch; ``local_loss``/``forward`` without a plan build one for the batch (same values). For sample i
    with observed set O_i (within the source's modalities) and class c:

        impute[i, m', c]  = T_i(m', c) [m' not observed in i],  T_i(m', c) = max_{m in O_i} w_tr(m, m', c)
        trans_w[i, c]     = sum_{m in O_i} sum_{m' not in O_i} w_tr(m, m', c)
        trans_t[i, c, j]  = sum_{m' not in O_i} w_tr(m_j, m', c) mu(m', c) / ||mu(m', c)||   (0 if m_j not in O_i)
    """

    impute: torch.Tensor      # (n, K, C)
    trans_w: torch.Tensor     # (n, C)
    trans_t: torch.Tensor     # (n, C, k, d), j over the source's modalities in order

    @classmethod
    @torch.no_grad()
    def build(cls, g: Guidance, mask: torch.Tensor, modalities: tuple[int, ...]) -> LossPlan:
        if g.transfer is None:
            raise ValueError("a LossPlan needs guidance with transfer weights (g.transfer is None)")
        mods = list(modalities)
        dt = g.mu.dtype
        obs = mask[:, mods]                                                        # (n, k)
        wt = g.transfer[mods]                                                      # (k, K, C)
        T = torch.where(obs[:, :, None, None], wt[None], 0.0).amax(dim=1)          # (n, K, C)
        impute = T * (~mask).to(dt)[:, :, None]
        sel = (obs[:, :, None] & ~mask[:, None, :]).to(dt)                         # (n, k, K): m_j seen, m' not
        A = sel[..., None] * wt[None]                                              # (n, k, K, C)
        trans_w = A.sum(dim=(1, 2))
        trans_t = torch.einsum("njqc,qcd->ncjd", A, g.mu_unit)
        return cls(impute, trans_w, trans_t)

    def take(self, idx: torch.Tensor) -> LossPlan:
        return LossPlan(self.impute[idx], self.trans_w[idx], self.trans_t[idx])


def forward(model: ObsModel, x: list[torch.Tensor], mask: torch.Tensor, modalities: tuple[int, ...],
            g: Guidance | None, y_obs: torch.Tensor | None = None, plan: LossPlan | None = None):
    """Embeddings, fused logits (with imputation), pseudo-classes and the unimputed posterior."""
    z = model.embed(x, modalities)
    maskf = mask.to(z[modalities[0]].dtype)
    h0 = sum(maskf[:, m:m + 1] * z[m] for m in modalities)
    impute = g is not None and g.transfer is not None
    with torch.set_grad_enabled(torch.is_grad_enabled() and not impute):   # imputed: only p0 needs it
        logits0 = model.logits(h0)
    with torch.no_grad():
        p0 = torch.softmax(logits0, dim=1)
        chat = p0.argmax(dim=1)
        p = p0
        if y_obs is not None:
            lab = y_obs >= 0
            chat = torch.where(lab, y_obs, chat)
            p = torch.where(lab[:, None], F.one_hot(y_obs.clamp(min=0), model.C).to(p0.dtype), p0)
    if not impute:
        return z, logits0, chat, p0
    if plan is None:
        plan = LossPlan.build(g, mask, modalities)
    with torch.no_grad():   # a constant of the parameters: p is detached, mu and the weights broadcast
        # lambda_{m'} = sum_c p(c|x) T(m', c) for each missing m'; z~^{m'} = sum_c p(c|x) mu(m', c)
        lam = torch.einsum("nc,nkc->nk", p, plan.impute)
        n, K, C = plan.impute.shape
        imp = (lam[:, :, None] * p[:, None, :]).reshape(n, K * C) @ g.mu.reshape(K * C, -1)
    return z, model.logits(h0 + imp), chat, p0


def local_loss(model: ObsModel, x: list[torch.Tensor], mask: torch.Tensor, y_obs: torch.Tensor,
               modalities: tuple[int, ...], g: Guidance | None, tau: float = 0.1, lam_uni: float = 1.0,
               lam_al: float = 1.0, lam_tr: float = 1.0, plan: LossPlan | None = None) -> torch.Tensor:
    """The source's loss on one batch (CE on labelled samples, alignment/transfer on all).

    ``plan``: ``LossPlan.build(g, mask, modalities)`` rows of this batch (built here when not given).
    """
    if g is not None and g.transfer is not None and plan is None:
        plan = LossPlan.build(g, mask, modalities)
    z, logits, chat, _ = forward(model, x, mask, modalities, g, y_obs, plan)
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
                both = mask[:, m] & mask[:, m2]
                if int(both.sum()) < 2:
                    continue
                loss = loss + (lam_al / n) * gated_infonce(z[m], z[m2], both, g.align[m, m2, chat], tau)
    if g.transfer is not None:
        # L_trans = sum_i sum_{m in O_i} sum_{m' not in O_i} w_tr(m, m', c_i) (1 - cos(z^m_i, mu(m', c_i))) / n
        #         = [sum_i trans_w[i, c_i] - sum_{i, j} z^{m_j}_i . trans_t[i, c_i, j]] / n
        # (w and the unit prototypes carry no gradient, so the plan holds them outside autograd)
        rows = torch.arange(n)
        t = plan.trans_t[rows, chat].unbind(dim=1)                                  # k x (n, d)
        dots = _FixedDots.apply(t, *(z[m] for m in modalities))
        loss = loss + (lam_tr / n) * (plan.trans_w[rows, chat].sum() - dots)
    return loss


class _FixedDots(torch.autograd.Function):
    """sum_j <z_j, t_j> for constant targets t_j, with the backward d/dz_j = t_j in one node."""

    @staticmethod
    def forward(ctx, t, *zs):
        ctx.t = t
        return sum((zj * tj).sum() for zj, tj in zip(zs, t))

    @staticmethod
    def backward(ctx, grad):
        return (None, *(grad * tj for tj in ctx.t))


class _GatedInfoNCE(torch.autograd.Function):
    """Forward and backward of :func:`gated_infonce` in a handful of whole-batch ops (no index/scatter)."""

    @staticmethod
    def forward(ctx, a, b, valid, w, tau):
        v = valid.to(a.dtype)
        V = torch.outer(v, v)                                        # both samples co-observed
        pad = 1.0 - v                                                # rows/columns outside: log(0 + 1) = 0
        if 2.0 / tau < 80.0:   # |S| <= 1/tau, so exp(S - 1/tau) in [e^(-2/tau), 1]: no under/overflow
            Sc = torch.addmm(a.new_tensor(-1.0 / tau), a, b.T, alpha=1.0 / tau)   # S - 1/tau, S = a b^T / tau
            Er = Ec = Sc.exp() * V
            dr = dc = Sc.diagonal()
        else:                  # small tau: shift by the row / column maxima over co-observed entries
            S = (a @ b.T) / tau
            Sm = S.masked_fill(V == 0, float("-inf"))
            shift_r = Sm.amax(dim=1).nan_to_num(0.0, neginf=0.0)
            shift_c = Sm.amax(dim=0).nan_to_num(0.0, neginf=0.0)
            Er = torch.exp(S - shift_r[:, None]) * V
            Ec = torch.exp(S - shift_c[None, :]) * V
            dr, dc = S.diagonal() - shift_r, S.diagonal() - shift_c
        rs, cs = Er.sum(dim=1) + pad, Ec.sum(dim=0) + pad
        wv = w * v
        # 0.5 [(lse_j S_ij - S_ii) + (lse_j S_ji - S_ii)] per co-observed i, weighted by w_i (shifts cancel)
        loss = 0.5 * (wv * (rs.log() - dr + cs.log() - dc)).sum()
        ctx.save_for_backward(a, b, Er, Ec, rs, cs, wv)
        ctx.tau = tau
        return loss

    @staticmethod
    def backward(ctx, grad):
        a, b, Er, Ec, rs, cs, wv = ctx.saved_tensors
        # dL/dS_kl = 0.5 (w_k P^row_kl + w_l P^col_kl) - w_k [k = l],  P^row = Er / rs,  P^col = Ec / cs
        g = grad / ctx.tau
        dS = Er * (0.5 * g * wv / rs)[:, None] + Ec * (0.5 * g * wv / cs)[None, :]
        dS.diagonal().sub_(g * wv)
        return dS @ b, dS.T @ a, None, None, None


def gated_infonce(a: torch.Tensor, b: torch.Tensor, valid: torch.Tensor, w: torch.Tensor,
                  tau: float) -> torch.Tensor:
    """The gated symmetric InfoNCE of one modality pair over the co-observed samples of a batch.

        L = sum_{i in P} w_i * 0.5 [CE(S_i., i) + CE(S_.i, i)],  S = z^m_P (z^m'_P)^T / tau,  P = {i: valid_i}

    ``a``, ``b``: (n, d) unit embeddings of the two modalities; ``valid``: (n,) bool, both observed;
    ``w``: (n,) weights (no gradient). Equal to indexing the co-observed rows and calling
    ``F.cross_entropy`` twice, computed on the whole batch with masks and an analytic backward.
    """
    return _GatedInfoNCE.apply(a, b, valid, w.detach(), float(tau))


@torch.no_grad()
def predict(model: ObsModel, x: list[torch.Tensor], mask: torch.Tensor, modalities: tuple[int, ...],
            g: Guidance | None) -> torch.Tensor:
    """Class predictions with imputation from the available modalities (p(c|x), no labels)."""
    mods = tuple(m for m in modalities if bool(mask[:, m].any()))
    _, logits, _, _ = forward(model, x, mask, mods, g)
    return logits.argmax(dim=1)
