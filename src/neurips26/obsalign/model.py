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

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.obsalign.kernels import HAVE_NUMBA, guided_kernel

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


NEG = -1e30   # additive InfoNCE mask: exp(NEG + |s| - max) == 0 in float32, and finite (0 * NEG == 0)


@dataclass
class GuidedTables:
    """One source's guided-loss lookup tables, built once per round from the broadcast guidance and the
    split's masks (a batch then indexes one row per sample instead of rebuilding masks and weights).

    Every per-sample guided weight depends only on the sample's observed-modality pattern ``p`` and its
    class ``c``, so ``rows[p C + c]`` holds, in this order (parts present per ``Guidance``):
    ``T_p[m', c] 1[m' not in O]`` (K C; imputation), ``t^m(c) = sum_m' w_tr(m, m', c) 1[m in O, m' not in O]
    mu(m', c)/||mu(m', c)||`` (k d; transfer target), ``sum_{m, m'} w_tr(m, m', c) 1[m in O, m' not in O]``
    (1), ``W[p] = 0.5 align(m_a, m_b, c) 1[m_a, m_b in O]`` for each pair ``p = (a < b)`` of ``modalities``
    (the source's own, k of them, in tuple order; InfoNCE weight) and the InfoNCE mask ``0 / NEG`` of each pair. ``key[i] = p_i C`` for each sample of the split.
    """

    modalities: tuple[int, ...]
    key: torch.Tensor               # (n,) long: pattern id x C of each sample
    rows: torch.Tensor              # (P C, width)
    mu_flat: torch.Tensor           # (K C, d) global prototypes, flattened for the imputation matmul
    impute: bool                    # rows carry T (transfer is on)
    align: bool                     # rows carry W and the mask (alignment is on and k >= 2)
    pairs: tuple[list[int], list[int]] = ([], [])   # the pairs' (a, b) indices into modalities


@torch.no_grad()
def guided_tables(g: Guidance, mask: torch.Tensor, modalities: tuple[int, ...]) -> GuidedTables:
    """The lookup tables of ``g`` for samples with observed-modality ``mask`` (n, K) (see ``GuidedTables``)."""
    K, C, d = g.mu.shape
    mods = list(modalities)
    k = len(mods)
    code = (mask.long() << torch.arange(K)).sum(dim=1)            # pattern code of each sample
    ucode, inv = torch.unique(code, return_inverse=True)
    pats = ((ucode[:, None] >> torch.arange(K)) & 1).bool()       # (P, K) observed modalities per pattern
    P = len(ucode)
    obs, miss = pats[:, mods], ~pats                                # (P, k), (P, K)
    dt = g.mu.dtype
    cols = []
    if g.transfer is not None:
        tr = g.transfer[mods]                                       # (k, K, C) w_tr(m, m', c)
        # T_p[m', c] = max_{m in O_p} w_tr(m, m', c), 0 for observed m' (only missing ones are imputed)
        T = torch.where(obs[:, :, None, None], tr[None], 0.0).amax(dim=1) * miss[:, :, None].to(dt)
        w = tr[None] * (obs[:, :, None] & miss[:, None, :]).to(dt)[..., None]       # (P, k, K, C)
        t = torch.einsum("pamc,mcd->pcad", w, g.mu_unit)                           # (P, C, k, d)
        cols += [T.reshape(P, 1, K * C).expand(P, C, K * C).reshape(P * C, K * C),
                 t.reshape(P * C, k * d), w.sum(dim=(1, 2)).reshape(P * C, 1)]
    align = g.align is not None and k >= 2
    if align:
        pa, pb = torch.triu_indices(k, k, offset=1)                 # the source's pairs a < b (tuple order)
        co = (obs[:, pa] & obs[:, pb]).to(dt)                       # (P, npairs) both observed
        W = 0.5 * g.align[[mods[i] for i in pa], [mods[i] for i in pb]].t()[None] * co[:, None]   # (P, C, np)
        bias = torch.where(co > 0, 0.0, NEG).to(dt)[:, None].expand(P, C, len(pa))
        cols += [W.reshape(P * C, -1), bias.reshape(P * C, -1)]
    rows = torch.cat(cols, dim=1) if cols else torch.zeros(P * C, 0, dtype=dt)
    pairs = tuple(x.tolist() for x in torch.triu_indices(k, k, offset=1))
    return GuidedTables(tuple(modalities), inv * C, rows.contiguous(), g.mu.reshape(K * C, d),
                        g.transfer is not None, align, pairs)


def _forward(model: ObsModel, x: list[torch.Tensor], mask: torch.Tensor, modalities: tuple[int, ...],
             g: Guidance | None, y_obs: torch.Tensor | None, tables: GuidedTables | None,
             key: torch.Tensor | None, need_chat: bool = True):
    """``forward`` plus each sample's table row (None without guidance)."""
    z = model.embed(x, modalities)
    maskf = mask.to(z[modalities[0]].dtype)
    h0 = sum(maskf[:, m:m + 1] * z[m] for m in modalities)
    if g is None:   # FedAvg-NoAlign: the loss uses these logits; pseudo-classes only if the caller wants them
        logits0 = model.logits(h0)
        with torch.no_grad():
            p0 = torch.softmax(logits0, dim=1)
            chat = None if not need_chat else p0.argmax(dim=1) if y_obs is None else \
                torch.where(y_obs >= 0, y_obs, p0.argmax(dim=1))
        return z, logits0, chat, p0, None, None
    with torch.no_grad():   # with guidance the loss uses the imputed logits only
        p0 = torch.softmax(model.logits(h0), dim=1)
        chat = p0.argmax(dim=1)
        p = p0
        if y_obs is not None:
            lab = y_obs >= 0
            chat = torch.where(lab, y_obs, chat)
            p = torch.where(lab[:, None], F.one_hot(y_obs.clamp(min=0), model.C).to(p0.dtype), p0)
    if tables is None:
        tables = guided_tables(g, mask, modalities)
        key = tables.key
    elif key is None:
        raise ValueError("key (the batch's rows of GuidedTables.key) must be given with tables")
    dtype = z[modalities[0]].dtype   # a float64 Guidance with a float32 model: the tables in the model's
    row = tables.rows[key + chat].to(dtype)                         # (n, width): the sample's weights
    h = h0
    if tables.impute:
        with torch.no_grad():   # a constant of the parameters: p is detached, mu and the weights broadcast
            n, K, C = len(p), model.K, model.C
            T = row[:, :K * C].view(n, K, C)                        # T[i, m', c] = max_{m in O_i} w_tr(m, m', c)
            lam = torch.bmm(T, p[:, :, None])                       # lambda_{m'} = sum_c p(c|x) T[i, m', c]
            # z~^{m'} = sum_c p(c|x) mu(m', c), added with weight lambda_{m'} for each missing m'
            imp = (lam * p[:, None, :]).view(n, K * C) @ tables.mu_flat.to(dtype)
        h = h0 + imp
    return z, model.logits(h), chat, p0, row, tables


def forward(model: ObsModel, x: list[torch.Tensor], mask: torch.Tensor, modalities: tuple[int, ...],
            g: Guidance | None, y_obs: torch.Tensor | None = None, tables: GuidedTables | None = None,
            key: torch.Tensor | None = None):
    """Embeddings, fused logits (with imputation), pseudo-classes and the unimputed posterior.

    ``tables`` / ``key``: ``guided_tables(g, ...)`` built once for a split and ``tables.key[batch]``
    (built from ``mask`` when not given)."""
    z, logits, chat, p0, _, _ = _forward(model, x, mask, modalities, g, y_obs, tables, key)
    return z, logits, chat, p0


USE_KERNEL = HAVE_NUMBA   # the guided terms as one compiled kernel (``kernels``); False: the torch path
try:
    from numba.core.errors import NumbaError
    KERNEL_ERRORS: tuple[type[BaseException], ...] = (NumbaError,)
except ImportError:  # pragma: no cover - exercised only without numba
    KERNEL_ERRORS = ()


def _kernel_off(err: BaseException) -> None:
    """The compiled path failed to compile or type (not a bad input: those raise ValueError first): warn once
    and use the torch path from now on (same formulas)."""
    global USE_KERNEL
    import warnings

    warnings.warn(f"obsalign: the compiled guided kernel failed ({type(err).__name__}: {err}); using the torch "
                  "path", RuntimeWarning, stacklevel=3)
    USE_KERNEL = False


def _ce_terms(model: ObsModel, z: dict[int, torch.Tensor], logits: torch.Tensor, mask: torch.Tensor,
              y_obs: torch.Tensor, modalities: tuple[int, ...], lam_uni: float) -> torch.Tensor:
    """CE(fused) + lambda_uni sum_m CE(z^m) over the labelled samples of the batch, each / n."""
    n = len(y_obs)
    lab = y_obs >= 0
    zero = logits.sum() * 0.0
    loss = F.cross_entropy(logits[lab], y_obs[lab], reduction="sum") / n if lab.any() else zero
    for m in modalities:
        sel = lab & mask[:, m]
        if sel.any():
            loss = loss + lam_uni * F.cross_entropy(model.logits(z[m][sel]), y_obs[sel], reduction="sum") / n
    return loss


def local_loss(model: ObsModel, x: list[torch.Tensor], mask: torch.Tensor, y_obs: torch.Tensor,
               modalities: tuple[int, ...], g: Guidance | None, tau: float = 0.1, lam_uni: float = 1.0,
               lam_al: float = 1.0, lam_tr: float = 1.0, tables: GuidedTables | None = None,
               key: torch.Tensor | None = None) -> torch.Tensor:
    """The source's loss on one batch (CE on labelled samples, alignment/transfer on all).

    ``tables`` / ``key`` as in ``forward`` (a round's tables for the split, indexed by the batch; the
    compiled path, ``USE_KERNEL``, reads the guidance directly and does not need them)."""
    if g is not None and USE_KERNEL:
        if tables is not None and key is None:
            raise ValueError("key (the batch's rows of GuidedTables.key) must be given with tables")
        try:
            return _kernel_loss(model, x, mask, y_obs, modalities, g, tau, lam_uni, lam_al, lam_tr)
        except KERNEL_ERRORS as e:   # numba present but the kernel cannot compile here: the torch path
            _kernel_off(e)
    z, logits, chat, _, row, tables = _forward(model, x, mask, modalities, g, y_obs, tables, key,
                                               need_chat=g is not None)
    n = len(y_obs)
    loss = _ce_terms(model, z, logits, mask, y_obs, modalities, lam_uni)
    if g is None or not (tables.align or tables.impute):
        return loss
    k, d, at = len(modalities), model.d, model.K * model.C if tables.impute else 0
    t = wsum = W = bias = None
    if tables.impute:
        t = row[:, at:at + k * d].view(n, k, d).transpose(0, 1)    # (k, n, d) t^m_i
        wsum = row[:, at + k * d].sum()
        at += k * d + 1
    if tables.align:
        npairs = k * (k - 1) // 2
        W = row[:, at:at + npairs].t()                              # (npairs, n) W[p, i]
        bias = row[:, at + npairs:at + 2 * npairs].t()[:, None]     # (npairs, 1, n) column mask
    return loss + _GuidedTerms.apply(t, wsum, W, bias, tables.pairs, 1.0 / tau, lam_al, lam_tr, 1.0 / n,
                                     *(z[m] for m in modalities))


class _GuidedTerms(torch.autograd.Function):
    """``lam_tr L_trans + lam_al L_align`` of one batch from the own embeddings ``z^m`` (k tensors (n, d)),
    with the analytic gradient (one autograd node instead of ~15; the values are the formulas below).

    L_trans = sum_i sum_{m in O_i} sum_{m' not in O_i} w_tr(m, m', c_i) (1 - cos(z^m_i, mu(m', c_i))) / n
            = [sum w - sum_{i, m} z^m_i . t^m_i] / n,  t^m_i = sum_{m'} w_tr(m, m', c_i) mu(m', c_i)/||mu||
    L_align = sum_{m < m'} sum_{i in I} align(m, m', c_i) 0.5 (CE_i(S) + CE_i(S^T)) / n over the co-observed I,
            S_ij = z^m_i . z^{m'}_j / tau, CE_i(S) = -log softmax_{j in I}(S_i)[i]: every pair's S in one bmm,
            the columns outside I masked by NEG (exp -> 0), W[p, i] = 0.5 align(m, m', c_i) 1[i in I], so
            L_align = -sum_{p, i} W[p, i] (log P[p, i, i] + log Q[p, i, i]) / n with P, Q the masked softmax of
            the rows of S and of S^T.
    Gradient: dL_trans/dz^m_i = -t^m_i / n;  dL_align/dS = [W (P - 1) + (W (Q - 1))^T] / n (W on the rows,
    1 the identity), dz^m = dS z^{m'} / tau, dz^{m'} = dS^T z^m / tau.
    (t, w, W and the mask carry no gradient: they are table rows of the broadcast guidance.)
    """

    @staticmethod
    def forward(ctx, t, wsum, W, bias, pairs, alpha, lam_al, lam_tr, inv_n, *zs):
        Z = torch.stack(zs)                                         # (k, n, d)
        val = None
        logp = logq = A = B = None
        if t is not None:
            val = wsum - (Z * t).sum()
            val = val if lam_tr == 1.0 else lam_tr * val
        if W is not None:
            pa, pb = pairs
            A, B = (Z[:1], Z[1:]) if len(zs) == 2 else (Z[pa], Z[pb])   # (npairs, n, d)
            S = torch.bmm(A, B.transpose(1, 2))                      # (npairs, n, n)
            logp = torch.add(bias, S, alpha=alpha).log_softmax(dim=2)
            logq = torch.add(bias, S.transpose(1, 2), alpha=alpha).log_softmax(dim=2)
            nll = (W * (logp.diagonal(dim1=1, dim2=2) + logq.diagonal(dim1=1, dim2=2))).sum()
            nll = nll if lam_al == 1.0 else lam_al * nll
            val = -nll if val is None else val - nll
        ctx.save_for_backward(t, W, logp, logq, A, B)
        ctx.consts = (pairs, alpha, lam_al, lam_tr, inv_n, len(zs))
        return val * inv_n

    @staticmethod
    @torch.autograd.function.once_differentiable   # the saved tensors carry no graph: no double backward
    def backward(ctx, grad):
        t, W, logp, logq, A, B = ctx.saved_tensors
        pairs, alpha, lam_al, lam_tr, inv_n, k = ctx.consts
        dZ = None
        if W is not None:
            cW = (W * (grad * (lam_al * alpha * inv_n)))[:, :, None]   # (npairs, n, 1)
            G = logp.exp().mul_(cW)                                  # W (P - 1) + (W (Q - 1))^T, times alpha / n
            G.add_(logq.exp().mul_(cW).transpose(1, 2))
            G.diagonal(dim1=1, dim2=2).sub_(cW[:, :, 0], alpha=2)
            dA, dB = torch.bmm(G, B), torch.bmm(G.transpose(1, 2), A)
            if k == 2:
                dZ = torch.cat([dA, dB])
            else:
                dZ = A.new_zeros((k,) + A.shape[1:])
                dZ.index_add_(0, torch.tensor(pairs[0]), dA).index_add_(0, torch.tensor(pairs[1]), dB)
        if t is not None:
            dt = t * (grad * (-lam_tr * inv_n))
            dZ = dt if dZ is None else dZ + dt
        return (None,) * 9 + tuple(dZ.unbind(0))



def _kernel_arrays(g: Guidance, dtype: torch.dtype, modalities: tuple[int, ...]) -> tuple:
    """``g``'s tensors as the kernel's numpy arrays in the model's dtype (made once per Guidance, dtype and
    modality tuple: the broadcast is not changed after it is made)."""
    cache = g.__dict__.setdefault("_kernel_cache", {})
    ck = (dtype, modalities)
    if ck not in cache:
        def arr(t):
            return np.zeros((1, 1, 1), np.float32 if dtype == torch.float32 else np.float64) if t is None \
                else np.ascontiguousarray(t.detach().to(dtype).numpy())
        cache[ck] = (np.asarray(modalities, np.int64), arr(g.mu), arr(g.mu_unit), arr(g.align),
                     arr(g.transfer), g.align is not None, g.transfer is not None)
    return cache[ck]


def _kernel_loss(model: ObsModel, x: list[torch.Tensor], mask: torch.Tensor, y_obs: torch.Tensor,
                 modalities: tuple[int, ...], g: Guidance, tau: float, lam_uni: float, lam_al: float,
                 lam_tr: float) -> torch.Tensor:
    """``local_loss`` with guidance, the guided part in ``kernels.guided_kernel`` (same formulas as the torch
    path): the kernel returns the imputation z~, lam_tr L_trans + lam_al L_align and its gradient in z^m;
    CE(fused on h = h0 + z~) and the unimodal CEs are the CE-only step's own calls."""
    # numba does not check bounds: what the torch path would refuse must be refused here, not read past an array
    n, K, C = len(y_obs), model.K, model.C
    if tuple(mask.shape) != (n, K):
        raise ValueError(f"mask must have shape (len(y_obs), K) = ({n}, {K}), got {tuple(mask.shape)}")
    if n and (int(y_obs.max()) >= C or int(y_obs.min()) < -1):
        raise ValueError(f"y_obs must hold class ids in [0, {C}) or -1 (unlabelled), got "
                         f"[{int(y_obs.min())}, {int(y_obs.max())}]")
    if not modalities or min(modalities) < 0 or max(modalities) >= K:
        raise ValueError(f"modalities must be ids in [0, {K}), got {modalities}")
    if tuple(g.mu.shape[:2]) != (K, C):
        raise ValueError(f"the guidance's mu must have shape (K, C, d) = ({K}, {C}, d), got {tuple(g.mu.shape)}")
    z = model.embed(x, modalities)
    zs = [z[m] for m in modalities]
    dtype = zs[0].dtype
    mods, mu, mu_unit, al, tr, use_al, use_tr = _kernel_arrays(g, dtype, modalities)
    with torch.no_grad():
        Z = torch.stack(zs)
    imp, val, dZ = guided_kernel(Z.numpy(), mask.numpy(), mods, y_obs.numpy(), model.cls.detach().numpy(),
                                 mu, mu_unit, al, tr, use_al, use_tr, SCALE, 1.0 / tau, float(lam_al),
                                 float(lam_tr), 1.0 / n)
    maskf = mask.to(dtype)
    h = sum(maskf[:, m:m + 1] * z[m] for m in modalities)          # h0 = sum_obs z^m
    if use_tr:
        h = h + torch.from_numpy(imp)                               # h = h0 + sum_miss lambda z~ (a constant)
    loss = _ce_terms(model, z, model.logits(h), mask, y_obs, modalities, lam_uni)
    return loss + _Injected.apply(val, torch.from_numpy(dZ), *zs)


class _Injected(torch.autograd.Function):
    """A value computed outside autograd with its gradient in each ``z^m`` (``dZ[j]``, for an incoming
    gradient of 1): forward returns the value, backward ``grad * dZ[j]``."""

    @staticmethod
    def forward(ctx, val, dZ, *zs):
        ctx.dZ = dZ
        return zs[0].new_tensor(val)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        return (None, None) + tuple((ctx.dZ * grad).unbind(0))


@torch.no_grad()
def predict(model: ObsModel, x: list[torch.Tensor], mask: torch.Tensor, modalities: tuple[int, ...],
            g: Guidance | None) -> torch.Tensor:
    """Class predictions with imputation from the available modalities (p(c|x), no labels)."""
    mods = tuple(m for m in modalities if bool(mask[:, m].any()))
    _, logits, _, _ = forward(model, x, mask, mods, g)
    return logits.argmax(dim=1)
