"""Channel-mixing layers: the prior ``Cffn`` (M2), the new ``GatedCF`` (M3), native FFN baselines, the
MoE expert container ``CFExperts`` and the prior work's dyadic schedule.

Every layer maps ``[..., p] -> [..., p]`` and records ``self.stats`` (detached tensors) after each
forward: ``pole_hits`` (elements with |K_d| < eps) and ``max_abs_out`` (max |output|), which the
training loop logs.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from neurips26.cofrgenet.continued_fraction import (
    DEFAULT_SHARPNESS,
    DIVISIONS,
    fused_positive_gate,
    positive_log_ladder_terms,
    signed_ladder,
)
from neurips26.harness.validation import check_choice, check_scalar

DENOMINATORS = ("positive", "signed")
FORMS = ("glu", "gated_input")
POSITIVE_MAPS = ("softplus", "exp")
LADDER_IMPLS = ("fused", "reference")


def _check_input(x: object, p: int) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"x must have a floating dtype, got {x.dtype}")
    if x.dim() == 0 or x.shape[-1] != p:
        raise ValueError(f"x must have last dimension p={p}, got shape {tuple(x.shape)}")
    return x


def count_params(module: nn.Module) -> int:
    """Number of trainable parameters of ``module``."""
    return sum(t.numel() for t in module.parameters() if t.requires_grad)


class _StatsMixin:
    def _record(self, y: Tensor, hits: Tensor | int) -> None:
        with torch.no_grad():
            pole = hits.sum() if isinstance(hits, Tensor) else torch.tensor(hits)
            n_ladder = hits.numel() if isinstance(hits, Tensor) else y.numel()   # ladder elements
            self.stats = {"pole_hits": pole.detach(), "max_abs_out": y.detach().abs().max().float(),
                          "n_elements": torch.tensor(float(n_ladder))}


# ============================================================================ prior component (M2)

class Cffn(_StatsMixin, nn.Module):
    """Prior CoFrGeNet FFN replacement ("CoFrGeNet-F"), L ladders of depth d on p channels.

        x_hat   = sigmoid(G x) * x                     G in R^{p x p}
        a^(j)_k = W^(j)[:, k] * x_hat                  W^(j) in R^{p x d}
        z_j     = f(a^(j)_1, ..., a^(j)_d)             (signed ladder, back-end ``division``)
        y       = U x + sum_j V[:, j] * z_j            U in R^{p x p}, V in R^{p x L}

    Params = 2 p^2 + L p (d + 1). Defaults are the prior work's: L=3, d=5, eps=0.01, ``clamp`` with the
    Proposition-1 custom backward. Init N(0, 0.02) for U, G, W, V (re-implementation's choice;
    ASSUMPTION w.r.t. the paper: switch with ``init_std``).
    """

    def __init__(self, p: int, ladders: int = 3, depth: int = 5, eps: float = 0.01,
                 division: str = "clamp", sharpness: float = DEFAULT_SHARPNESS, init_std: float = 0.02):
        super().__init__()
        self.p = check_scalar(p, "p", int, min=1)
        self.ladders = check_scalar(ladders, "ladders", int, min=1)
        self.depth = check_scalar(depth, "depth", int, min=1)
        self.eps = check_scalar(eps, "eps", float, min=0, inclusive="neither")
        self.division = check_choice(division, "division", DIVISIONS)
        self.sharpness = check_scalar(sharpness, "sharpness", float, min=0, inclusive="neither")
        self.init_std = check_scalar(init_std, "init_std", float, min=0, inclusive="neither")
        self.G = nn.Linear(p, p, bias=False)
        self.U = nn.Linear(p, p, bias=False)
        self.W = nn.Parameter(torch.empty(ladders, p, depth))   # W^(j)[:, k] = W[j, :, k]
        self.V = nn.Parameter(torch.empty(p, ladders))
        self.stats: dict[str, Tensor] = {}
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for t in (self.G.weight, self.U.weight, self.W, self.V):
            nn.init.normal_(t, 0.0, self.init_std)

    def layer_config(self) -> dict:
        """Constructor arguments that rebuild this layer (recorded in a saved model's config)."""
        return dict(p=self.p, ladders=self.ladders, depth=self.depth, eps=self.eps, division=self.division,
                    sharpness=self.sharpness, init_std=self.init_std)

    def ladder_parameters(self) -> list[nn.Parameter]:
        """Parameters that must never get weight decay (spec M6)."""
        return [self.W, self.V]

    def forward(self, x: Tensor) -> Tensor:
        _check_input(x, self.p)
        x_hat = torch.sigmoid(self.G(x)) * x                              # x_hat = sigmoid(Gx) * x
        w = self.W.permute(2, 0, 1).reshape(self.depth, *([1] * (x.dim() - 1)), self.ladders, self.p)
        a = x_hat.unsqueeze(-2).unsqueeze(0) * w                          # a^(j)_k: [d, ..., L, p]
        z, hits = signed_ladder(a, self.eps, self.division, self.sharpness)
        y = self.U(x) + (z * self.V.t()).sum(-2)                          # U x + sum_j V[:, j] z_j
        self._record(y, hits)
        return y

    def extra_repr(self) -> str:
        return (f"p={self.p}, ladders={self.ladders}, depth={self.depth}, eps={self.eps}, "
                f"division={self.division!r}")


# ============================================================================ new component (M3)

class GatedCF(_StatsMixin, nn.Module):
    """Non-expanding gated continued-fraction channel mixer (ASSUMPTION: our reading of the follow-up).

        u       = W_u x,   h = W_g x                    W_u, W_g in R^{m x p}, m = expand * p (default p)
        pre_k   = alpha^(j)_k * h + beta^(j)_k          per channel, k = 1..d, j = 1..L
        a^(j)_k = softplus(pre_k) + delta               (denominators='positive', default)
                | exp(pre_k), i.e. log a = pre             (denominators='positive', positive_map='exp')
                | pre_k                                 (denominators='signed', has poles)
        c       = sum_j gamma^(j) * f(a^(j)_1..a^(j)_d)
        y       = W_o (u * c)                           W_o in R^{p x m}

    Params = 3 p m + L m (2 d + 1). Positive ladders use the log-space recurrence (no division at all);
    signed ladders use back-end ``division`` ('clamp' | 'logexp' | 'logspace', default 'logexp').
    Init: beta = 1, alpha ~ N(0, 0.1^2), gamma = 1, W_u, W_g ~ N(0, 0.02), W_o ~ N(0, 0.02/sqrt(2 n_layers)).

    ``positive_map='exp'`` (ours, an extension): a = exp(pre), so the log-space ladder gets log a = pre with
    no transcendental op (no delta floor: 0 < f <= 1/a_1 = exp(-pre_1), still no pole).

    ``form='gated_input'`` is the alternative reading (ablation): the prior Cffn's gated input with U
    removed, x_hat = sigmoid(G x) * x, pre_k = alpha_k x_hat + beta_k, y = W_o(x_hat * c(x_hat)); m = p,
    G is stored as ``W_g`` and there is no ``W_u``: params = 2 p^2 + L p (2 d + 1).
    """

    def __init__(self, p: int, m: int | None = None, ladders: int = 2, depth: int = 4,
                 denominators: str = "positive", delta: float = 0.05, division: str = "logexp",
                 eps: float = 0.01, sharpness: float = DEFAULT_SHARPNESS, expand: float = 1.0,
                 n_layers: int = 1, form: str = "glu", positive_map: str = "softplus",
                 ladder_impl: str = "fused"):
        super().__init__()
        self.ladder_impl = check_choice(ladder_impl, "ladder_impl", LADDER_IMPLS)
        self.p = check_scalar(p, "p", int, min=1)
        self.form = check_choice(form, "form", FORMS)
        if form == "gated_input":
            if m is not None and m != p:
                raise ValueError(f"m must equal p={p} for form='gated_input', got {m}")
            m = p
        if m is None:
            check_scalar(expand, "expand", float, min=0, inclusive="neither")
            m = max(1, int(round(expand * p)))
        self.m = check_scalar(m, "m", int, min=1)
        self.ladders = check_scalar(ladders, "ladders", int, min=1)
        self.depth = check_scalar(depth, "depth", int, min=1)
        self.denominators = check_choice(denominators, "denominators", DENOMINATORS)
        self.delta = check_scalar(delta, "delta", float, min=0, inclusive="neither")
        self.positive_map = check_choice(positive_map, "positive_map", POSITIVE_MAPS)
        self.division = check_choice(division, "division", DIVISIONS)
        self.eps = check_scalar(eps, "eps", float, min=0, inclusive="neither")
        self.sharpness = check_scalar(sharpness, "sharpness", float, min=0, inclusive="neither")
        self.n_layers = check_scalar(n_layers, "n_layers", int, min=1)
        self.W_u = nn.Linear(p, self.m, bias=False) if form == "glu" else None
        self.W_g = nn.Linear(p, self.m, bias=False)
        self.W_o = nn.Linear(self.m, p, bias=False)
        self.alpha = nn.Parameter(torch.empty(ladders, depth, self.m))
        self.beta = nn.Parameter(torch.empty(ladders, depth, self.m))
        self.gamma = nn.Parameter(torch.empty(ladders, self.m))
        self.stats: dict[str, Tensor] = {}
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.W_u is not None:
            nn.init.normal_(self.W_u.weight, 0.0, 0.02)
        nn.init.normal_(self.W_g.weight, 0.0, 0.02)
        nn.init.normal_(self.W_o.weight, 0.0, 0.02 / math.sqrt(2 * self.n_layers))
        nn.init.normal_(self.alpha, 0.0, 0.1)
        nn.init.ones_(self.beta)
        nn.init.ones_(self.gamma)

    def ladder_parameters(self) -> list[nn.Parameter]:
        return [self.alpha, self.beta, self.gamma]

    def layer_config(self) -> dict:
        """Constructor arguments that rebuild this layer (recorded in a saved model's config)."""
        return dict(p=self.p, m=self.m, ladders=self.ladders, depth=self.depth, denominators=self.denominators,
                    delta=self.delta, division=self.division, eps=self.eps, sharpness=self.sharpness,
                    n_layers=self.n_layers, form=self.form, positive_map=self.positive_map,
                    ladder_impl=self.ladder_impl)

    def gate(self, h: Tensor) -> tuple[Tensor, Tensor | int]:
        """c = sum_j gamma^(j) f(a^(j)) from the gate pre-activation h [..., m]; returns (c, pole hits)."""
        return gated_cf_gate(h, self.alpha, self.beta, self.gamma, self)

    def forward(self, x: Tensor) -> Tensor:
        _check_input(x, self.p)
        if self.form == "gated_input":
            x_hat = torch.sigmoid(self.W_g(x)) * x                             # x_hat = sigmoid(Gx) * x
            c, hits = self.gate(x_hat)
            y = self.W_o(x_hat * c)                                            # y = W_o (x_hat * c(x_hat))
        else:
            u = self.W_u(x)
            c, hits = self.gate(self.W_g(x))
            y = self.W_o(u * c)                                                # y = W_o (u * c)
        self._record(y, hits)
        return y

    def extra_repr(self) -> str:
        return (f"p={self.p}, m={self.m}, form={self.form!r}, ladders={self.ladders}, depth={self.depth}, "
                f"denominators={self.denominators!r}" +
                (f", division={self.division!r}, eps={self.eps}" if self.denominators == "signed" else
                 f", delta={self.delta}, positive_map={self.positive_map!r}"))


def gated_cf_gate(h: Tensor, alpha: Tensor, beta: Tensor, gamma: Tensor, opts: "GatedCF") -> tuple[Tensor, Tensor | int]:
    """The GatedCF gate c = sum_j gamma^(j) f(a^(j)) on h [..., m] with the ladder settings of ``opts``;
    alpha, beta [..., L, d, m] and gamma [..., L, m] broadcast against h (batched MoE experts).

    Positive ladders: the fused recomputing Function (``ladder_impl='fused'``, default) or the log-space
    recurrence with plain autograd (``'reference'``). Ladder math in fp32 at least, even under autocast.
    """
    in_dtype = h.dtype
    with torch.autocast(device_type=h.device.type, enabled=False):
        h32 = h if h.dtype in (torch.float32, torch.float64) else h.float()
        if opts.denominators == "positive" and opts.ladder_impl == "fused":
            return fused_positive_gate(h32, alpha, beta, gamma, opts.delta,
                                       opts.positive_map == "exp").to(in_dtype), 0
        pre = h32[..., None, None, :] * alpha + beta                        # pre^(j)_k: [..., L, d, m]
        if opts.denominators == "positive":
            if opts.positive_map == "exp":
                log_a = pre                                                   # a = exp(pre): log a = pre
            else:
                log_a = torch.log(F.softplus(pre) + opts.delta)               # log(softplus(pre) + delta)
            f = positive_log_ladder_terms(list(log_a.unbind(-2)))             # [..., L, m]
            hits: Tensor | int = 0
        else:
            f, hits = signed_ladder(list(pre.unbind(-2)), opts.eps, opts.division, opts.sharpness)
        c = (gamma * f).sum(-2)                                                # sum_j gamma^(j) f_j
    return c.to(in_dtype), hits


# ============================================================================ native baselines

class SwiGLU(nn.Module):
    """Llama-style gated FFN: y = W_down(silu(W_gate x) * W_up x); params 3 p m (no biases)."""

    def __init__(self, p: int, m: int | None = None):
        super().__init__()
        self.p = check_scalar(p, "p", int, min=1)
        self.m = check_scalar(m if m is not None else int(math.ceil(8 * p / 3)), "m", int, min=1)
        self.gate_proj = nn.Linear(p, self.m, bias=False)
        self.up_proj = nn.Linear(p, self.m, bias=False)
        self.down_proj = nn.Linear(self.m, p, bias=False)
        for lin in (self.gate_proj, self.up_proj, self.down_proj):
            nn.init.normal_(lin.weight, 0.0, 0.02)

    def layer_config(self) -> dict:
        return dict(p=self.p, m=self.m)

    def forward(self, x: Tensor) -> Tensor:
        _check_input(x, self.p)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class GeluMLP(nn.Module):
    """GPT-2-style MLP: y = W_2 gelu_tanh(W_1 x + b_1) + b_2 (width m, default 4p)."""

    def __init__(self, p: int, m: int | None = None):
        super().__init__()
        self.p = check_scalar(p, "p", int, min=1)
        self.m = check_scalar(m if m is not None else 4 * p, "m", int, min=1)
        self.fc = nn.Linear(p, self.m)
        self.proj = nn.Linear(self.m, p)
        for lin in (self.fc, self.proj):
            nn.init.normal_(lin.weight, 0.0, 0.02)
            nn.init.zeros_(lin.bias)

    def layer_config(self) -> dict:
        return dict(p=self.p, m=self.m)

    def forward(self, x: Tensor) -> Tensor:
        _check_input(x, self.p)
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


def matched_width(target_params: int, p: int, kind: str = "swiglu") -> int:
    """Width m of a native FFN whose parameter count is nearest to ``target_params``."""
    check_scalar(target_params, "target_params", int, min=1)
    check_scalar(p, "p", int, min=1)
    if kind == "swiglu":
        return max(1, round(target_params / (3 * p)))               # 3 p m
    if kind == "gelu":
        return max(1, round((target_params - p) / (2 * p + 1)))     # 2 p m + m + p
    raise ValueError(f"kind must be 'swiglu' or 'gelu', got {kind!r}")


# ============================================================================ MoE experts

class CFExperts(nn.Module):
    """E experts built by ``factory(p)``, with the dispatch contract of HF ``MixtralExperts``.

    forward(hidden_states [N, p], top_k_index [N, k], top_k_weights [N, k]) -> [N, p]: each token's
    output is sum_i top_k_weights[n, i] * expert_{top_k_index[n, i]}(h_n); index E is a padding
    sentinel that is skipped (one_hot over E + 1 classes, as in HF).
    """

    def __init__(self, num_experts: int, p: int, factory: Callable[[int], nn.Module]):
        super().__init__()
        self.num_experts = check_scalar(num_experts, "num_experts", int, min=1)
        self.hidden_dim = check_scalar(p, "p", int, min=1)
        if not callable(factory):
            raise TypeError(f"factory must be callable (p -> nn.Module), got {type(factory).__name__}")
        self.experts = nn.ModuleList([factory(p) for _ in range(num_experts)])

    def forward(self, hidden_states: Tensor, top_k_index: Tensor, top_k_weights: Tensor) -> Tensor:
        _check_input(hidden_states, self.hidden_dim)
        out = torch.zeros_like(hidden_states)
        with torch.no_grad():
            mask = F.one_hot(top_k_index, num_classes=self.num_experts + 1).permute(2, 1, 0)  # [E+1, k, N]
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for e in hit[:, 0].tolist():
            if e == self.num_experts:     # padding sentinel
                continue
            pos, tok = torch.where(mask[e])
            y = self.experts[e](hidden_states[tok]) * top_k_weights[tok, pos, None]
            out.index_add_(0, tok, y.to(out.dtype))
        return out


def _route(top_k_index: Tensor, top_k_weights: Tensor, num_experts: int) -> tuple[Tensor, Tensor, Tensor, Tensor, int]:
    """Token-expert assignments grouped by expert: (expert, token, weight, slot within the expert's group,
    capacity = largest group); the padding sentinel index ``num_experts`` is dropped."""
    n, k = top_k_index.shape
    e = top_k_index.reshape(-1)
    tok = torch.arange(n, device=e.device).repeat_interleave(k)
    w = top_k_weights.reshape(-1)
    keep = e < num_experts
    e, tok, w = e[keep], tok[keep], w[keep]
    order = torch.argsort(e, stable=True)
    e, tok, w = e[order], tok[order], w[order]
    counts = torch.bincount(e, minlength=num_experts)
    start = torch.cumsum(counts, 0) - counts
    slot = torch.arange(e.numel(), device=e.device) - start[e]
    cap = int(counts.max()) if e.numel() else 0
    return e, tok, w, slot, cap


class GatedCFExperts(_StatsMixin, nn.Module):
    """E GatedCF experts (``form='glu'``) with stacked weights and batched dispatch: the HF
    ``MixtralExperts`` contract (forward(hidden_states [N, p], top_k_index [N, k], top_k_weights [N, k])),
    with no Python loop over experts.

    Tokens are grouped by expert into a padded [E, C, p] batch (C = the largest group), the three
    projections are batched matmuls (``torch.bmm``) and the ladders run once on [E, C, m] with per-expert
    alpha/beta/gamma broadcast; outputs are weighted and scattered back with ``index_add_``. Expert e
    equals ``GatedCF(p, **kwargs)`` with weights ``W_u[e]``, ... (see :meth:`expert`).
    """

    def __init__(self, num_experts: int, p: int, **gated_kwargs: Any):
        super().__init__()
        self.num_experts = check_scalar(num_experts, "num_experts", int, min=1)
        self.hidden_dim = check_scalar(p, "p", int, min=1)
        if gated_kwargs.get("form", "glu") != "glu":
            raise ValueError("GatedCFExperts supports form='glu' only; use CFExperts for other forms")
        protos = [GatedCF(p, **gated_kwargs) for _ in range(num_experts)]   # per-expert init, then stacked
        self.gated_kwargs = {k: v for k, v in protos[0].layer_config().items() if k != "p"}
        self.m = protos[0].m
        self.W_u = nn.Parameter(torch.stack([q.W_u.weight.detach() for q in protos]))    # [E, m, p]
        self.W_g = nn.Parameter(torch.stack([q.W_g.weight.detach() for q in protos]))    # [E, m, p]
        self.W_o = nn.Parameter(torch.stack([q.W_o.weight.detach() for q in protos]))    # [E, p, m]
        self.alpha = nn.Parameter(torch.stack([q.alpha.detach() for q in protos]))       # [E, L, d, m]
        self.beta = nn.Parameter(torch.stack([q.beta.detach() for q in protos]))
        self.gamma = nn.Parameter(torch.stack([q.gamma.detach() for q in protos]))       # [E, L, m]
        object.__setattr__(self, "opts", protos[0])     # settings only; not a submodule (no extra weights)
        self.stats: dict[str, Tensor] = {}

    def ladder_parameters(self) -> list[nn.Parameter]:
        return [self.alpha, self.beta, self.gamma]

    def projection_parameters(self) -> list[nn.Parameter]:
        """The (decayed) projection weights, stored as 3-D stacks rather than nn.Linear."""
        return [self.W_u, self.W_g, self.W_o]

    def expert(self, e: int) -> GatedCF:
        """Expert ``e`` as a standalone GatedCF with copies of its weights."""
        e = check_scalar(e, "e", int, min=0, max=self.num_experts - 1)
        g = GatedCF(self.hidden_dim, **self.gated_kwargs).to(self.W_u.dtype)
        with torch.no_grad():
            g.W_u.weight.copy_(self.W_u[e])
            g.W_g.weight.copy_(self.W_g[e])
            g.W_o.weight.copy_(self.W_o[e])
            g.alpha.copy_(self.alpha[e])
            g.beta.copy_(self.beta[e])
            g.gamma.copy_(self.gamma[e])
        return g

    def forward(self, hidden_states: Tensor, top_k_index: Tensor, top_k_weights: Tensor) -> Tensor:
        _check_input(hidden_states, self.hidden_dim)
        e, tok, w, slot, cap = _route(top_k_index, top_k_weights, self.num_experts)
        out = torch.zeros_like(hidden_states)
        if cap == 0:
            return out
        x = hidden_states.new_zeros(self.num_experts, cap, self.hidden_dim)
        x = x.index_put((e, slot), hidden_states[tok])                       # [E, C, p], zero padding
        u = torch.bmm(x, self.W_u.transpose(1, 2))                            # [E, C, m]
        h = torch.bmm(x, self.W_g.transpose(1, 2))
        c, _ = gated_cf_gate(h, self.alpha[:, None], self.beta[:, None], self.gamma[:, None], self.opts)
        y = torch.bmm(u * c, self.W_o.transpose(1, 2))                        # [E, C, p]
        contrib = y[e, slot] * w[:, None].to(y.dtype)
        out = out.index_add(0, tok, contrib.to(out.dtype))
        self._record(out, 0)
        return out

    def extra_repr(self) -> str:
        return f"num_experts={self.num_experts}, p={self.hidden_dim}, m={self.m}, batched dispatch"


# ============================================================================ dyadic schedule (M2)

class DyadicSchedule:
    """Prior work's incremental training: depth level k (a_k, column k-1 of every W^(j)) trains from
    step s_k = (1 - 2^-k) * total_steps; U, G, V train from step 0.

    active_depth(step) = #{k in 1..d : step >= s_k} (real-valued comparison), d for step >= total.
    ``apply(model, step)`` (call after backward, before the optimiser step) zeroes the gradient of
    every frozen W column of every ``Cffn`` in ``model``; the forward still uses all d levels with
    their frozen init values (ASSUMPTION: freeze, not truncate).
    """

    def __init__(self, total_steps: int, depth: int):
        self.total_steps = check_scalar(total_steps, "total_steps", int, min=1)
        self.depth = check_scalar(depth, "depth", int, min=1)

    def unfreeze_step(self, k: int) -> float:
        """s_k = (1 - 2^-k) T."""
        return (1.0 - 2.0 ** (-k)) * self.total_steps

    def active_depth(self, step: int) -> int:
        step = check_scalar(step, "step", int, min=0)
        if step >= self.total_steps:
            return self.depth
        return sum(1 for k in range(1, self.depth + 1) if step >= self.unfreeze_step(k))

    def apply(self, model: nn.Module, step: int) -> int:
        active = self.active_depth(step)
        for mod in model.modules():
            if isinstance(mod, Cffn) and mod.W.grad is not None:
                # per-module depth may differ from the schedule's: freeze levels k > active of it
                mod.W.grad[:, :, active:].zero_()
        return active
