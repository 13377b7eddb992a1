"""The Nexus step: a dual loop that turns K single-source micro-batches into one outer update.

Spec M2 (a reconstruction, marked ASSUMPTION where it is one; each is a flag). For outer step t:

1. phi <- theta. The wrapper keeps theta as one fp32 snapshot and runs the inner steps in place on
   the model's own parameters (they *are* phi during the loop); no other copy exists.
2. micro-batches B_1..B_K, each from one source s_k (``schedule.SourceSampler``).
3. for k = 1..K:   g_k = grad_phi L_{s_k}(phi; B_k)                        (one forward + backward)
                   u_k = g_k / (||g_k||_2 + 1e-12), the norm over ALL tensors   (``normalize=True``)
                   phi <- phi - eta_t u_k                 (plain SGD: no momentum, decay or clipping)
4. Delta = (theta - phi) / (eta_t K), times mean_k ||g_k|| when normalised (``rescale=True``,
   ASSUMPTION: Delta in gradient units keeps clipping and Adam's eps meaningful);
   theta.grad <- Delta, optional global clip, outer.step() (weight decay, lr schedule live only here).
5. log: mean inner loss, cos(g_k, g_{k-1}) of consecutive micro-batches (``log_cos``), ||Delta||.

Inner step size (ASSUMPTION): eta_t = r * lr_t * sqrt(N_trainable) with lr_t the outer lr read each
step (``outer.lr_source``), or a fixed ``inner_lr`` (exactly one of the two).

Equivalences by construction: normalize=False and eta -> 0 give Delta = mean_k g_k(theta) (gradient
accumulation); normalize=False with outer SGD(lr = eps K eta) is Fish: theta + eps (phi_K - theta).

Data parallel: under DDP each ``backward`` all-reduces g_k, so phi stays identical on ranks when the
sampler is source-synchronised (the synchronous, faithful variant, K reducer rounds per step).
``sync="delta"`` is the local DiLoCo-like variant -- a *different algorithm*: run the inner loop under
``no_sync`` (the caller's model) and all-reduce Delta once per outer step.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

import torch

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.nexus.base import MicroBatch, check_step_inputs
from neurips26.nexus.outer import as_optimizers, lr_source, make_outer

EPS_NORM = 1e-12
DEFAULT_RATIO = 0.1
_UNSET: Any = object()  # inner_lr_ratio not given: 0.1 unless a fixed inner_lr is


def global_norm(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """||(t_1, ..., t_n)||_2 over all tensors together."""
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(list(tensors))))


def collect_grads(params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Each parameter's ``.grad``, a zero tensor where the loss did not reach it."""
    return [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]


class Nexus(torch.optim.Optimizer):
    """Nexus around an outer optimizer: ``step(micro_batches, loss_fn)`` does one outer step.

    params:           the trainable tensors (the same ones ``outer`` owns).
    outer:            a ``torch.optim.Optimizer``, a list (Muon + AdamW), or a name in
                      ``outer.OUTER_NAMES`` built with ``outer_lr``.
    inner_lr_ratio:   r in eta_t = r * lr_t * sqrt(N) (default 0.1 unless ``inner_lr`` is given).
    inner_lr:         a fixed eta instead of r (exactly one of the two; both, or both None, is an error).
    normalize:        inner steps on globally normalised gradients (True; CWA) or raw (False; Reptile).
    rescale:          multiply Delta by mean ||g_k|| when normalised (gradient units).
    log_cos:          keep g_{k-1} to log consecutive cosines (a second parameter-sized buffer).
    max_grad_norm:    global clip of Delta before the outer step (None: no clip).
    sources:          known source names; micro-batches tagged otherwise are refused.
    require_all_sources: refuse a step whose K micro-batches cannot cover every source.
    sync:             None, or ``"delta"`` for the local variant (all-reduce Delta once per step).

    After each step ``last_stats`` holds ``inner_loss``, ``cos`` (mean consecutive cosine, NaN for
    K = 1 or without ``log_cos``), ``delta_norm``, ``inner_lr`` and ``grad_norm``.
    """

    def __init__(self, params: Iterable, outer: Any = "adamw", inner_lr_ratio: float | None = _UNSET,
                 inner_lr: float | None = None, normalize: bool = True, rescale: bool = True,
                 log_cos: bool = True, max_grad_norm: float | None = None,
                 sources: Sequence[str] | None = None, require_all_sources: bool = False,
                 sync: str | None = None, outer_lr: float = 1e-3):
        params = [p for p in params]
        if params and isinstance(params[0], tuple):
            named, params = params, [p for _, p in params]
        else:
            named = params
        if inner_lr_ratio is _UNSET:
            inner_lr_ratio = None if inner_lr is not None else DEFAULT_RATIO
        if inner_lr is not None and inner_lr_ratio is not None:
            raise ValueError("give inner_lr_ratio or inner_lr, not both")
        if inner_lr is None and inner_lr_ratio is None:
            raise ValueError("give exactly one of inner_lr_ratio (eta = r lr sqrt(N)) and inner_lr "
                             "(fixed eta); got neither")
        if inner_lr is not None:
            inner_lr = check_scalar(inner_lr, "inner_lr", float, min=0, inclusive="neither")
        else:
            inner_lr_ratio = check_scalar(inner_lr_ratio, "inner_lr_ratio", float, min=0, inclusive="neither")
        if max_grad_norm is not None:
            max_grad_norm = check_scalar(max_grad_norm, "max_grad_norm", float, min=0, inclusive="neither")
        if sync is not None:
            check_choice(sync, "sync", ("delta",))
        if isinstance(outer, str):
            outer = make_outer(outer, named, lr=outer_lr)
        self.outers = as_optimizers(outer)
        super().__init__(params, dict(inner_lr_ratio=inner_lr_ratio, inner_lr=inner_lr,
                                      normalize=bool(normalize), rescale=bool(rescale)))
        mine = {id(p) for g in self.param_groups for p in g["params"]}
        theirs = {id(p) for o in self.outers for g in o.param_groups for p in g["params"]}
        if mine != theirs:
            raise ValueError("outer must own exactly the parameters given to Nexus "
                             f"({len(theirs - mine)} extra, {len(mine - theirs)} missing)")
        self.log_cos = bool(log_cos)
        self.max_grad_norm = max_grad_norm
        self.sources = None if sources is None else tuple(sources)
        self.require_all_sources = bool(require_all_sources)
        self.sync = sync
        self.outer_steps = 0
        self.last_stats: dict[str, float] = {}
        self._theta: list[torch.Tensor] | None = None  # the one extra parameter-sized copy
        self._prev: list[torch.Tensor] | None = None   # g_{k-1} (log_cos only)

    # ------------------------------------------------------------------ helpers
    @property
    def params(self) -> list[torch.Tensor]:
        return [p for g in self.param_groups for p in g["params"] if p.requires_grad]

    def inner_lr(self) -> float:
        """eta_t: the fixed ``inner_lr``, or r * lr_t * sqrt(N_trainable) with lr_t read now."""
        d = self.defaults
        if d["inner_lr"] is not None:
            return d["inner_lr"]
        n = sum(p.numel() for p in self.params)
        return d["inner_lr_ratio"] * float(lr_source(self.outers)["lr"]) * math.sqrt(n)

    # ------------------------------------------------------------------ the step
    def step(self, micro_batches: Sequence[MicroBatch] | None = None,  # type: ignore[override]
             loss_fn: Callable[[Any], torch.Tensor] | Sequence[Callable] | None = None) -> float:
        """One outer step over the K micro-batches; returns the mean inner loss."""
        params = self._delta_into_grads(micro_batches, loss_fn)
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)
        for o in self.outers:
            o.step()
        for o in self.outers:
            o.zero_grad(set_to_none=True)
        self.outer_steps += 1
        return self.last_stats["inner_loss"]

    def pseudo_gradient(self, micro_batches: Sequence[MicroBatch],
                        loss_fn: Callable[[Any], torch.Tensor] | Sequence[Callable]) -> list[torch.Tensor]:
        """Delta of steps 1-4 at the current theta, without the outer step (theta is left unchanged)."""
        params = self._delta_into_grads(micro_batches, loss_fn)
        out = [p.grad.detach().clone() for p in params]
        for p in params:
            p.grad = None
        return out

    def _delta_into_grads(self, micro_batches, loss_fn) -> list[torch.Tensor]:
        """Steps 1-5: run the inner loop, leave Delta in ``p.grad`` and theta in ``p``."""
        if micro_batches is None:
            raise TypeError("step() needs micro_batches and loss_fn: step(micro_batches, loss_fn)")
        pairs = check_step_inputs(micro_batches, loss_fn, self.sources, self.require_all_sources)
        eta = self.inner_lr()
        if not (math.isfinite(eta) and eta > 0):
            raise ValueError(f"inner step size eta must be finite and > 0, got {eta!r} (outer lr "
                             f"{lr_source(self.outers)['lr']!r})")
        params, K = self.params, len(pairs)
        normalize, t = self.defaults["normalize"], self.outer_steps
        with torch.no_grad():  # 1. phi <- theta: snapshot theta, the loop runs on the params in place
            if self._theta is None:
                self._theta = [p.detach().clone() for p in params]
            else:
                for th, p in zip(self._theta, params):  # per tensor: also for FSDP2's DTensor shards
                    th.copy_(p.detach())
        if self.log_cos and self._prev is None and K > 1:
            self._prev = [torch.zeros_like(p) for p in params]
        losses, norms, coss = [], [], []
        for k, (mb, fn) in enumerate(pairs):  # 3. the inner loop
            for p in params:
                p.grad = None
            loss = fn(mb.data)
            loss.backward()                                              # a. g_k
            with torch.no_grad():
                g = collect_grads(params)
                norm = float(global_norm(g))
                if not math.isfinite(norm):
                    self._restore(params)
                    raise FloatingPointError(f"non-finite gradient norm {norm} at outer step {t}, "
                                             f"micro-batch {k} (source {mb.source!r})")
                if self.log_cos and K > 1:
                    if k > 0:
                        dot = sum(float(torch.dot(a.reshape(-1), b.reshape(-1)))
                                  for a, b in zip(g, self._prev))
                        coss.append(dot / (norm * norms[-1] + EPS_NORM))
                    for pv, gk in zip(self._prev, g):
                        pv.copy_(gk)
                scale = 1.0 / (norm + EPS_NORM) if normalize else 1.0  # b. u_k
                torch._foreach_add_(params, g, alpha=-eta * scale)     # c. phi <- phi - eta u_k
            losses.append(float(loss.detach()))
            norms.append(norm)
        with torch.no_grad():  # 4. Delta = (theta - phi) / (eta K) [* mean ||g_k||], restore theta
            factor = 1.0 / (eta * K)
            if normalize and self.defaults["rescale"]:
                factor *= sum(norms) / K
            for p, th in zip(params, self._theta):
                if p.grad is None:
                    p.grad = torch.empty_like(p)
                torch.sub(th, p, out=p.grad)
                p.grad.mul_(factor)
                p.copy_(th)
            dist = torch.distributed
            if self.sync == "delta" and dist.is_available() and dist.is_initialized():
                ws = torch.distributed.get_world_size()
                for p in params:
                    torch.distributed.all_reduce(p.grad)
                    p.grad.div_(ws)
            delta_norm = float(global_norm([p.grad for p in params]))
        self.last_stats = {"inner_loss": sum(losses) / K, "cos": sum(coss) / len(coss) if coss else math.nan,
                           "delta_norm": delta_norm, "inner_lr": eta, "grad_norm": sum(norms) / K}
        return params

    def _restore(self, params: list[torch.Tensor]) -> None:
        with torch.no_grad():
            for p, th in zip(params, self._theta or []):
                p.copy_(th)
                p.grad = None

    # ------------------------------------------------------------------ torch.optim semantics
    def state_dict(self) -> dict[str, Any]:  # type: ignore[override]
        return {"nexus": {"outer_steps": self.outer_steps, "defaults": dict(self.defaults)},
                "outer": [o.state_dict() for o in self.outers]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:  # type: ignore[override]
        outer = state_dict.get("outer")
        if not isinstance(outer, list) or len(outer) != len(self.outers):
            raise ValueError(f"state_dict must hold {len(self.outers)} outer optimizer state(s)")
        for o, s in zip(self.outers, outer):
            o.load_state_dict(s)
        self.outer_steps = int(state_dict["nexus"]["outer_steps"])
