"""The GRPO family as small exact functions on per-token log-prob tensors (spec §2).

Token t of response i in a group of size G; rho_{i,t} = exp(logp_{i,t} - old_logp_{i,t}).

  GRPO      A_i = (R_i - mean R) / (std R + 1e-6)  (population std, ``scale_rewards="group"``)
            L = -(1/G) sum_i (1/|o_i|) sum_t min(rho A, clip(rho, 1-eps, 1+eps) A)       (loss_agg="seq_mean")
  Dr. GRPO  A_i = R_i - mean R (``scale_rewards="none"``);  L = -(1/(G L_max)) sum_i sum_t min(...)
                                                                                   (loss_agg="seq_sum_norm")
  DAPO      eps_low 0.2, eps_high 0.28; L = -(1/sum_i |o_i|) sum_i sum_t min(...)      (loss_agg="token_mean")
  SAPO      min/clip -> f_tau(rho) = (4/tau) sigmoid(tau (rho - 1)), tau = 1.0 if A > 0 else 1.05
  TIS       per-token term times stop_grad(min(pi_old / mu, C)), mu = the sampler's probabilities
  PGFC      A = R~ - (1 - rho1)     (no group normalisation; E[A | o] = (1 - rho0 - rho1)(R(o) - 1))
  PGBC      A = (R~ - rho0) / (1 - rho0 - rho1)   (E[A | R] = R)
  KL        every per-token term minus beta * k3, k3 = pi_ref/pi - log(pi_ref/pi) - 1 (beta = 0 by default)

``token_grad_coef`` (and ``kl_grad_coef`` for the KL term) is the derivative of the per-token term with
respect to logp, in numpy: the bandit's fast path, tested equal to autograd of ``policy_loss``.
Placement of the corrections (ASSUMPTION): PGFC / PGBC replace the group-normalised advantage; both are
affine in R~ with constants shared by the group, so putting them *before* GRPO's standardisation gives
GRPO's advantages exactly (tested) — the only distinct placement is this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np

from neurips26.harness.validation import check_array, check_choice, check_scalar

ADV_EPS = 1e-6
LOSS_AGGS = ("seq_mean", "token_mean", "seq_sum_norm")
SCALES = ("group", "none")
GATES = ("clip", "sapo")


@dataclass(frozen=True)
class Variant:
    """One objective: advantage, gate, aggregation, and the options around them."""

    name: str
    advantage: str = "grpo"            # grpo | drgrpo | pgfc | pgbc
    gate: str = "clip"                 # clip | sapo
    loss_agg: str = "seq_mean"
    eps_low: float = 0.2
    eps_high: float = 0.2
    tau_pos: float = 1.0
    tau_neg: float = 1.05
    tis_cap: float | None = None       # C of TIS; None = off
    dynamic_sampling: bool = False
    max_resample_rounds: int = 10
    bf16_sampler: bool | None = None   # sample from bfloat16-rounded logits; None = on iff TIS (ASSUMPTION)

    @property
    def samples_bf16(self) -> bool:
        """Whether the sampler rounds logits to bfloat16 (the sampler/trainer mismatch TIS corrects)."""
        return self.tis_cap is not None if self.bf16_sampler is None else self.bf16_sampler

    def __post_init__(self) -> None:
        check_choice(self.advantage, "advantage", ("grpo", "drgrpo", "pgfc", "pgbc"))
        check_choice(self.gate, "gate", GATES)
        check_choice(self.loss_agg, "loss_agg", LOSS_AGGS)
        check_scalar(self.eps_low, "eps_low", float, min=0, inclusive="neither")
        check_scalar(self.eps_high, "eps_high", float, min=self.eps_low)
        check_scalar(self.tau_pos, "tau_pos", float, min=0, inclusive="neither")
        check_scalar(self.tau_neg, "tau_neg", float, min=0, inclusive="neither")
        if self.tis_cap is not None:
            check_scalar(self.tis_cap, "tis_cap", float, min=1)
        check_scalar(self.max_resample_rounds, "max_resample_rounds", int, min=0)
        if self.bf16_sampler is not None and not isinstance(self.bf16_sampler, bool):
            raise TypeError(f"bf16_sampler must be a bool or None, got {type(self.bf16_sampler).__name__}")


VARIANTS = {
    "grpo": Variant("grpo"),
    "dr_grpo": Variant("dr_grpo", advantage="drgrpo", loss_agg="seq_sum_norm"),
    "dapo": Variant("dapo", eps_high=0.28, loss_agg="token_mean", dynamic_sampling=True),
    "sapo": Variant("sapo", gate="sapo"),
    "tis": Variant("tis", tis_cap=2.0, dynamic_sampling=True),
    "pgfc": Variant("pgfc", advantage="pgfc"),
    "pgbc": Variant("pgbc", advantage="pgbc"),
}


def get_variant(name: str) -> Variant:
    """The named objective; ``ValueError`` listing the known names otherwise."""
    return VARIANTS[check_choice(name, "variant", tuple(VARIANTS))]


# ---- advantages ------------------------------------------------------------------------------------
def _rewards(rewards) -> np.ndarray:
    r = check_array(rewards, "rewards", ndim=2, dtype=float)
    if r.shape[0] == 0:
        raise ValueError("rewards must hold at least one group")
    if r.shape[1] < 2:
        raise ValueError(f"group size G must be >= 2, got {r.shape[1]}")
    return r


def group_advantages(rewards, scale_rewards: str = "group", eps: float = ADV_EPS) -> np.ndarray:
    """GRPO (``"group"``: (R - mean)/(population std + eps)) or Dr. GRPO (``"none"``: R - mean); [B, G]."""
    r = _rewards(rewards)
    check_choice(scale_rewards, "scale_rewards", SCALES)
    centred = r - r.mean(axis=1, keepdims=True)
    if scale_rewards == "none":
        return centred
    return centred / (r.std(axis=1, keepdims=True) + eps)


def _rates(rho0: float, rho1: float) -> tuple[float, float]:
    rho0 = check_scalar(rho0, "rho0", float, min=0, max=1, inclusive="left")
    rho1 = check_scalar(rho1, "rho1", float, min=0, max=1, inclusive="left")
    if rho0 + rho1 >= 1:
        raise ValueError(f"rho0 + rho1 must be < 1, got {rho0} + {rho1}")
    return rho0, rho1


def pgfc_advantages(rewards, rho1: float, rho0: float = 0.0) -> np.ndarray:
    """Forward correction: A = R~ - (1 - rho1) (w_1 = rho1, w_0 = rho1 - 1)."""
    _, rho1 = _rates(rho0, rho1)
    return _rewards(rewards) - (1.0 - rho1)


def pgbc_advantages(rewards, rho0: float, rho1: float) -> np.ndarray:
    """Backward correction: A = R^ = (R~ - rho0) / (1 - rho0 - rho1), unbiased for the clean reward."""
    rho0, rho1 = _rates(rho0, rho1)
    return (_rewards(rewards) - rho0) / (1.0 - rho0 - rho1)


def advantages(rewards, variant: Variant, rho0: float = 0.0, rho1: float = 0.0) -> np.ndarray:
    """The variant's advantages for a [B, G] reward array."""
    if variant.advantage == "grpo":
        return group_advantages(rewards, "group")
    if variant.advantage == "drgrpo":
        return group_advantages(rewards, "none")
    if variant.advantage == "pgfc":
        return pgfc_advantages(rewards, rho1, rho0)
    return pgbc_advantages(rewards, rho0, rho1)


def informative_groups(rewards) -> np.ndarray:
    """Dynamic sampling's filter: True for groups whose rewards are not all equal."""
    r = _rewards(rewards)
    return r.max(axis=1) > r.min(axis=1)


def overlong_shaping(lengths, l_max: int = 24, l_cache: int = 8) -> np.ndarray:
    """DAPO's soft overlong penalty: 0 up to L_max - L_cache, linear to -1 in the buffer, -1 beyond."""
    n = check_array(lengths, "lengths", dtype=float)
    l_max = check_scalar(l_max, "l_max", int, min=1)
    l_cache = check_scalar(l_cache, "l_cache", int, min=1, max=l_max)
    lo = l_max - l_cache
    return np.where(n <= lo, 0.0, np.where(n <= l_max, (lo - n) / l_cache, -1.0))


# ---- the per-token objective (torch reference) ------------------------------------------------------
def sapo_gate(ratio, tau):
    """f_tau(rho) = (4/tau) sigmoid(tau (rho - 1)); f'(1) = 1 for every tau (works on numpy and torch)."""
    if hasattr(ratio, "sigmoid"):
        return 4.0 / tau * (tau * (ratio - 1.0)).sigmoid()
    return 4.0 / tau / (1.0 + np.exp(-tau * (ratio - 1.0)))


def policy_loss(logp, old_logp, adv, mask, variant: Variant | str = "grpo", sampler_logp=None,
                l_max: int | None = None, ref_logp=None, beta: float = 0.0):
    """The variant's loss L (to minimise) on [N, T] per-token log-probs; adv is [N] (one per response).

    logp:         log pi_theta (requires grad);   old_logp: log pi_old (detached)
    mask:         1 for completion tokens, 0 for padding; |o_i| = mask[i].sum()
    sampler_logp: log mu of the sampler (TIS only; default old_logp, so TIS == GRPO exactly)
    l_max:        the constant of Dr. GRPO's 1/(G L_max) (default: the padded length T)
    ref_logp, beta: the KL penalty, per token term - beta * k3 with
                  k3 = pi_ref/pi_theta - log(pi_ref/pi_theta) - 1 (ASSUMPTION: beta = 0, the
                  Spurious-Rewards config; then ref_logp is not needed)
    """
    import torch

    v = get_variant(variant) if isinstance(variant, str) else variant
    beta = check_scalar(beta, "beta", float, min=0)
    if beta > 0 and (ref_logp is None or ref_logp.shape != logp.shape):
        raise ValueError(f"beta > 0 needs ref_logp of shape {tuple(logp.shape)}")
    if logp.shape != old_logp.shape or logp.shape != mask.shape or logp.ndim != 2:
        raise ValueError(f"logp, old_logp and mask must share one [N, T] shape, got {tuple(logp.shape)}, "
                         f"{tuple(old_logp.shape)}, {tuple(mask.shape)}")
    if adv.shape != logp.shape[:1]:
        raise ValueError(f"adv must have shape [N] = {tuple(logp.shape[:1])}, got {tuple(adv.shape)}")
    mask = mask.to(logp.dtype)
    a = adv.to(logp.dtype)[:, None]
    ratio = torch.exp(logp - old_logp)
    if v.gate == "clip":
        term = torch.minimum(ratio * a, ratio.clamp(1 - v.eps_low, 1 + v.eps_high) * a)
    else:
        tau = torch.where(a > 0, torch.as_tensor(v.tau_pos, dtype=logp.dtype),
                          torch.as_tensor(v.tau_neg, dtype=logp.dtype))
        term = sapo_gate(ratio, tau) * a
    if v.tis_cap is not None:
        mu = old_logp if sampler_logp is None else sampler_logp
        term = term * torch.exp(old_logp - mu).clamp(max=v.tis_cap).detach()
    if beta > 0:
        d = ref_logp - logp
        term = term - beta * (torch.exp(d) - d - 1.0)     # k3 estimator of KL(pi_theta || pi_ref)
    term = term * mask
    lengths = mask.sum(dim=1)
    n = logp.shape[0]
    if v.loss_agg == "seq_mean":
        return -(term.sum(dim=1) / lengths.clamp(min=1)).sum() / n
    if v.loss_agg == "token_mean":
        return -term.sum() / lengths.sum().clamp(min=1)
    return -term.sum() / (n * (l_max if l_max is not None else logp.shape[1]))


# ---- the same objective's gradient in numpy (bandit fast path) -------------------------------------
def token_grad_coef(ratio, adv, variant: Variant, tis_w=None) -> np.ndarray:
    """d(term)/d(logp) per token, where term is the variant's per-token objective (before aggregation).

    clip: rho A where the min picks the unclipped branch, else 0;  sapo: f'_tau(rho) rho A;  times TIS w.
    """
    ratio = np.asarray(ratio, dtype=float)
    a = np.broadcast_to(np.asarray(adv, dtype=float), ratio.shape)
    if variant.gate == "clip":
        clipped = ((a > 0) & (ratio > 1 + variant.eps_high)) | ((a < 0) & (ratio < 1 - variant.eps_low))
        g = np.where(clipped, 0.0, ratio * a)
    else:
        tau = np.where(a > 0, variant.tau_pos, variant.tau_neg)
        s = 1.0 / (1.0 + np.exp(-tau * (ratio - 1.0)))
        g = 4.0 * s * (1.0 - s) * ratio * a
    if variant.tis_cap is not None and tis_w is not None:
        g = g * np.minimum(tis_w, variant.tis_cap)
    return g


def kl_grad_coef(logp, ref_logp, beta: float) -> np.ndarray:
    """d(-beta k3)/d(logp) per token, k3 = pi_ref/pi - log(pi_ref/pi) - 1: beta (pi_ref/pi - 1) (numpy)."""
    beta = check_scalar(beta, "beta", float, min=0)
    return beta * (np.exp(np.asarray(ref_logp, dtype=float) - np.asarray(logp, dtype=float)) - 1.0)


# ---- evaluation ------------------------------------------------------------------------------------
def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n - c, k) / C(n, k) from n samples with c correct."""
    n = check_scalar(n, "n", int, min=1)
    c = check_scalar(c, "c", int, min=0, max=n)
    k = check_scalar(k, "k", int, min=1, max=n)
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)
