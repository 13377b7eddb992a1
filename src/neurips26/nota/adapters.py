"""Per-task adapter stacks on frozen linear layers: ``MPOAdapter``, ``LoRAAdapter``, ``AdaptedLinear``.

``AdaptedLinear`` wraps a frozen ``nn.Linear`` (weight ``W0``) and holds one adapter per task. At task t
the adapters of tasks < t are frozen (``requires_grad=False``, never touched by an optimizer) and the
update ``dW^(t)`` follows the accumulation rule (``accumulation.py``). ``rule="hier"`` is H-NoTA: the
global rule with learnable task coefficients alpha_i and identity-initialised modulation matrices
``M_i^(k)`` between the cores of every historical MPO adapter.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import torch
from torch import nn

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.nota import mpo
from neurips26.nota.accumulation import NORM_FLOOR, accumulate, global_normalize

RULES = ("plain", "taskwise", "global", "hier")
INITS = ("zero_last", "dota")


class MPOAdapter(nn.Module):
    """One task's MPO update: cores over ``out_factors`` x ``in_factors`` with bond ``bond`` (clipped).

    init="zero_last" (default): cores 1..n-1 ~ N(0, 1/(D_{k-1} i_k)), last core zero, so dW = 0.
    init="dota": cores from the TT-SVD of ``w0`` (needs ``w0``).
    """

    def __init__(self, d_out: int, d_in: int, out_factors: Sequence[int], in_factors: Sequence[int],
                 bond: int = 4, init: str = "zero_last", w0: torch.Tensor | None = None,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.out_factors = mpo.check_factors(d_out, out_factors, "out_factors")
        self.in_factors = mpo.check_factors(d_in, in_factors, "in_factors")
        self.bonds = mpo.bond_dims(self.out_factors, self.in_factors, bond)
        init = check_choice(init, "init", INITS)
        if init == "dota":
            if w0 is None:
                raise ValueError("init='dota' needs w0")
            cores = [c.detach().clone().float() for c in mpo.tt_svd(w0.detach(), self.out_factors,
                                                                     self.in_factors, bond)]
        else:
            cores = []
            n = len(self.out_factors)
            for k, (j, i) in enumerate(zip(self.out_factors, self.in_factors)):
                shape = (self.bonds[k], j, i, self.bonds[k + 1])
                if k == n - 1:
                    cores.append(torch.zeros(shape))
                else:
                    std = 1.0 / math.sqrt(self.bonds[k] * i)
                    cores.append(torch.randn(shape, generator=generator) * std)
        self.cores = nn.ParameterList([nn.Parameter(c) for c in cores])

    @property
    def n_params(self) -> int:
        return sum(c.numel() for c in self.cores)

    def delta(self, mods: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        return mpo.contract(list(self.cores), mods)

    def product_norm(self) -> torch.Tensor:
        """``prod_k ||T^(k)||_F``, an upper bound of ``||dW||_F`` (the taskwise ``norm="product"``)."""
        return math.prod(c.norm() for c in self.cores)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ dW.T``: input-side contraction or one materialisation, whichever needs fewer FLOPs."""
        cores = list(self.cores)
        b = int(math.prod(x.shape[:-1]))
        d_out, d_in = math.prod(self.out_factors), math.prod(self.in_factors)
        if mpo.flops_apply(cores, b) < mpo.flops_contract(cores) + b * d_out * d_in:
            return mpo.apply(cores, x)
        return x @ self.delta().T


class LoRAAdapter(nn.Module):
    """One task's rank-r update ``dW = B A`` (A ~ N(0, 1/d_in), B = 0, so dW = 0 at the start)."""

    def __init__(self, d_out: int, d_in: int, rank: int = 3, generator: torch.Generator | None = None):
        super().__init__()
        rank = check_scalar(rank, "rank", int, min=1)
        self.a = nn.Parameter(torch.randn(rank, d_in, generator=generator) / math.sqrt(d_in))
        self.b = nn.Parameter(torch.zeros(d_out, rank))

    @property
    def n_params(self) -> int:
        return self.a.numel() + self.b.numel()

    def delta(self, mods: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        return self.b @ self.a

    def product_norm(self) -> torch.Tensor:
        return self.b.norm() * self.a.norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.a.T) @ self.b.T


class AdaptedLinear(nn.Module):
    """A frozen linear layer plus a per-task adapter stack under one accumulation rule.

    kind: "mpo" or "lora"; rule: "plain" | "taskwise" | "global" | "hier" (H-NoTA, MPO only).
    rho: gamma = rho ||W0||_F (global/hier); eps = eps_rel * gamma; learn_gamma clamps gamma to
    [0, rho_max ||W0||_F] (default max(0.2, rho)); alpha_init: the task coefficients' start (taskwise/hier;
    fixed 1 for plain/global); train_old_alphas / freeze_hier_after_task: whether alpha/M of earlier
    tasks keep training in later tasks; norm: taskwise divisor ("exact" ||dW_i|| or "product").
    """

    def __init__(self, base: nn.Linear, kind: str = "mpo", rule: str = "global", *, bond: int = 4,
                 out_factors: Sequence[int] | None = None, in_factors: Sequence[int] | None = None,
                 rank: int = 3, rho: float = 0.05, eps_rel: float = 1e-3, learn_gamma: bool = False,
                 rho_max: float | None = None, alpha_init: float = 1.0, norm: str = "exact",
                 train_old_alphas: bool = True, freeze_hier_after_task: bool = False, init: str = "zero_last",
                 shared: bool = False):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"base must be an nn.Linear, got {type(base).__name__}")
        self.kind = check_choice(kind, "kind", ("mpo", "lora"))
        self.rule = check_choice(rule, "rule", RULES)
        if self.rule == "hier" and self.kind != "mpo":
            raise ValueError("rule 'hier' (H-NoTA) needs kind='mpo'")
        self.norm = check_choice(norm, "norm", ("exact", "product"))
        self.init = check_choice(init, "init", INITS)
        rho = check_scalar(rho, "rho", float, min=0, inclusive="neither")
        eps_rel = check_scalar(eps_rel, "eps_rel", float, min=0, inclusive="neither")
        self.rho_max = check_scalar(max(0.2, rho) if rho_max is None else rho_max, "rho_max", float, min=rho)
        self.alpha_init = check_scalar(alpha_init, "alpha_init", float)
        self.bond, self.rank = check_scalar(bond, "bond", int, min=1), check_scalar(rank, "rank", int, min=1)
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        d_out, d_in = base.weight.shape
        self.out_factors = mpo.check_factors(d_out, out_factors or _cube(d_out), "out_factors")
        self.in_factors = mpo.check_factors(d_in, in_factors or _cube(d_in), "in_factors")
        if len(self.out_factors) != len(self.in_factors):
            raise ValueError(f"out_factors {self.out_factors} and in_factors {self.in_factors} must have the "
                             f"same n")
        self.w0_norm = float(base.weight.detach().norm())
        self.gamma0 = rho * self.w0_norm
        self.eps = eps_rel * self.gamma0
        self.learn_gamma = bool(learn_gamma)
        self.gamma_param = nn.Parameter(torch.tensor(self.gamma0)) if self.learn_gamma else None
        self.train_old_alphas = bool(train_old_alphas)
        self.freeze_hier_after_task = bool(freeze_hier_after_task)
        self.shared = bool(shared)          # Seq-LoRA: one adapter continually trained, no new ones
        self.adapters = nn.ModuleList()
        self.alphas = nn.ParameterList()
        self.mods = nn.ModuleList()         # mods[i]: ParameterList of M_i^(k), historical adapter i
        self.scope: ModelScope | None = None   # set by ModelScope for scope="model"

    # -- tasks ---------------------------------------------------------------------------------
    @property
    def n_tasks(self) -> int:
        return len(self.alphas)

    def new_task(self, generator: torch.Generator | None = None) -> None:
        """Freeze the current adapter and create task t's (zero update at the start)."""
        d_out, d_in = self.base.weight.shape
        if self.shared and self.adapters:
            self.alphas.append(nn.Parameter(torch.tensor(1.0), requires_grad=False))
            return
        for a in self.adapters:
            a.requires_grad_(False)
        if self.rule == "hier":
            for i, m in enumerate(self.mods):
                m.requires_grad_(not self.freeze_hier_after_task)
            if self.adapters:
                self.mods.append(nn.ParameterList([nn.Parameter(torch.eye(d)) for d in
                                                   self.adapters[-1].bonds[1:-1]]))
        learn_alpha = self.rule in ("taskwise", "hier")
        for a in self.alphas:
            a.requires_grad_(learn_alpha and self.train_old_alphas)
        if self.kind == "mpo":
            w0 = self.base.weight.detach() if self.init == "dota" else None
            ad = MPOAdapter(d_out, d_in, self.out_factors, self.in_factors, self.bond, self.init, w0,
                            generator)
        else:
            ad = LoRAAdapter(d_out, d_in, self.rank, generator)
        self.adapters.append(ad)
        start = self.alpha_init if learn_alpha else 1.0
        self.alphas.append(nn.Parameter(torch.tensor(start), requires_grad=learn_alpha))

    def modulations(self, i: int) -> list[torch.Tensor]:
        """H-NoTA's M_i^(k) of historical adapter i (0-based)."""
        if self.rule != "hier":
            raise ValueError(f"modulation matrices exist only for rule 'hier', not {self.rule!r}")
        if i >= len(self.mods):
            raise ValueError(f"no historical adapter {i} has modulation matrices yet "
                             f"({len(self.mods)} exist)")
        return list(self.mods[i])

    # -- the update ----------------------------------------------------------------------------
    @property
    def gamma(self) -> torch.Tensor | float:
        if self.gamma_param is None:
            return self.gamma0
        return self.gamma_param.clamp(0.0, self.rho_max * self.w0_norm)

    def task_deltas(self) -> list[torch.Tensor]:
        out = []
        for i, ad in enumerate(self.adapters):
            mods = list(self.mods[i]) if self.rule == "hier" and i < len(self.mods) else None
            out.append(ad.delta(mods))
        return out

    def raw_sum(self) -> torch.Tensor:
        """``S_t = sum_i alpha_i dW_i`` (the global rules' un-normalized sum)."""
        return sum(a * d for a, d in zip(self.alphas, self.task_deltas()))

    def delta(self) -> torch.Tensor:
        """``dW^(t)`` under the rule (zeros before the first task)."""
        if not self.adapters:
            return torch.zeros_like(self.base.weight)
        deltas = self.task_deltas()
        if self.shared:
            return deltas[0]
        if self.scope is not None and self.rule in ("global", "hier"):
            return self.scope.gamma * self.raw_sum() / self.scope.denominator()
        if self.rule == "hier":
            return global_normalize(self.raw_sum(), self.gamma, self.eps)
        divisors = None
        if self.rule == "taskwise":
            divisors = ([d.norm().clamp_min(NORM_FLOOR) for d in deltas[:-1]] if self.norm == "exact"
                        else [ad.product_norm().clamp_min(NORM_FLOOR) for ad in self.adapters[:-1]])
        return accumulate(deltas, self.rule, list(self.alphas), self.gamma, self.eps, divisors)

    def merged_weight(self) -> torch.Tensor:
        return self.base.weight + self.delta()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, self.merged_weight(), self.base.bias)

    def hier_penalty(self) -> torch.Tensor:
        """``sum ||M - I||_F^2`` over all modulation matrices (0 when none)."""
        terms = [(m - torch.eye(m.shape[0])).pow(2).sum() for ml in self.mods for m in ml]
        return sum(terms) if terms else torch.zeros(())

    def trainable_params(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def stored_params(self) -> int:
        """Adapter parameters kept after training (cores/A,B + alphas + modulations)."""
        return (sum(a.n_params for a in self.adapters) + len(self.alphas)
                + sum(m.numel() for ml in self.mods for m in ml))


def _cube(d: int) -> tuple[int, ...]:
    """A default 3-factor split of ``d`` (64 -> 4*4*4), else (d,)."""
    r = round(d ** (1 / 3))
    for a in range(r, 0, -1):
        if d % a == 0:
            rest = d // a
            b = int(math.isqrt(rest))
            while rest % b:
                b -= 1
            return tuple(sorted((a, b, rest // b), reverse=True))
    return (d,)


def attach_adapters(model: nn.Module, targets: Iterable[str] = ("q", "v"), **kwargs) -> list[AdaptedLinear]:
    """Replace every ``nn.Linear`` child named in ``targets`` (e.g. ``attn.q``) by an ``AdaptedLinear``.

    kwargs go to ``AdaptedLinear``. Raises ValueError naming a target that matches no linear layer.
    """
    targets = tuple(targets)
    if not targets:
        raise ValueError("targets must name at least one layer")
    found: dict[str, int] = {t: 0 for t in targets}
    layers = []
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if name in found and isinstance(child, nn.Linear):
                al = AdaptedLinear(child, **kwargs)
                setattr(parent, name, al)
                layers.append(al)
                found[name] += 1
    missing = [t for t, c in found.items() if c == 0]
    if missing:
        raise ValueError(f"target layer(s) {missing} not found as nn.Linear children in the model")
    return layers


class ModelScope:
    """``scope="model"``: one global normalization over the concatenation of all layers' sums.

    ``dW_l = gamma S_l / sqrt(sum_l ||S_l||^2 + eps^2)`` with ``gamma = rho sqrt(sum_l ||W0_l||^2)`` and
    ``eps = eps_rel gamma``, so ``||(dW_1, ..., dW_L)||_F <= gamma``. Inside ``with scope:`` (one forward)
    the shared denominator is computed once and reused by every layer.
    """

    def __init__(self, layers: Sequence[AdaptedLinear], rho: float = 0.05, eps_rel: float = 1e-3):
        layers = list(layers)
        if not layers:
            raise ValueError("layers must hold at least one AdaptedLinear")
        bad = [lay.rule for lay in layers if lay.rule not in ("global", "hier")]
        if bad:
            raise ValueError(f"scope='model' needs the rules 'global' or 'hier', got {bad[0]!r}")
        rho = check_scalar(rho, "rho", float, min=0, inclusive="neither")
        eps_rel = check_scalar(eps_rel, "eps_rel", float, min=0, inclusive="neither")
        self.layers = layers
        self.gamma = rho * math.sqrt(sum(lay.w0_norm ** 2 for lay in layers))
        self.eps = eps_rel * self.gamma
        self._cached: torch.Tensor | None = None
        for lay in layers:
            lay.scope = self

    def denominator(self) -> torch.Tensor:
        if self._cached is not None:
            return self._cached
        return torch.sqrt(sum(lay.raw_sum().pow(2).sum() for lay in self.layers) + self.eps ** 2)

    def __enter__(self) -> "ModelScope":
        self._cached = None
        self._cached = self.denominator()
        return self

    def __exit__(self, *exc) -> None:
        self._cached = None
