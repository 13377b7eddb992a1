"""The ``bandit`` policy (spec §5): a 2-token response (skill, format) and GRPO-family training in numpy.

Model:  logits_skill(q) = W[family(q)] + U[bucket(q)]   (64 hashed problem buckets; each bucket's base
        preference is a problem-specific bug, so wrong labels are problem-specific like a model's errors)
        logits_format   = F                              (format 4 = malformed, no box)
        pi(o | q) = softmax(logits_skill)[k] * softmax(F)[f],  |o| = 2 tokens.
Update: plain SGD ascent on -L for W, U, F. The gradient of the per-token term w.r.t. a token's logits
        is ``token_grad_coef`` x (e_token - pi), the exact derivative of ``objectives.policy_loss``
        (tested against autograd). Every response has 2 tokens, so GRPO's 1/(G|o|), DAPO's 1/sum|o| and
        Dr. GRPO's 1/(G L_max) coincide here (L_max = 2); their difference is real only in ``tinylm``.
PPO:    one epoch over each batch in ``minibatches`` mini-batches: the first is on-policy (rho = 1), the
        later ones see rho != 1 (so clipping, SAPO and TIS act).
TIS:    the sampler draws from bfloat16-rounded logits (7 stored mantissa bits), the trainer uses float64.
Rewards come from a per-(problem, label) table over the 6 x 5 renderable answers, filled once through
``math_reward`` (``reward_table``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neurips26.harness.validation import check_array, check_scalar
from neurips26.rlvr_noise.mathgen import FAMILIES, MALFORMED, MULTI, N_FORMATS, N_SKILLS, render_completion
from neurips26.rlvr_noise.objectives import Variant, advantages, informative_groups, kl_grad_coef, token_grad_coef
from neurips26.rlvr_noise.verifiers import format_reward, math_reward

N_BUCKETS = 64


def bucket_of(problem) -> int:
    """A deterministic hash of the problem text into one of 64 buckets."""
    h = 0
    for ch in problem.text:
        h = (h * 131 + ord(ch)) % 1_000_003
    return h % N_BUCKETS


def bf16_round(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 precision (keep 7 stored mantissa bits, round to nearest even)."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class BanditPrior:
    """The base policy: P(correct skill) ~ p_correct, a per-bucket bug of random strength, P(malformed)."""

    p_correct: float = 0.4
    bug_strength: float = 3.0  # max boost (logits) of the bucket's bug skill, drawn U(0, max)
    p_malformed: float = 0.35
    p_canonical: float = 0.63  # share of well-formed answers in the canonical format
    other_root_logit: float = 3.2  # family-level pull of the equations towards the other root (skill 3)

    def __post_init__(self) -> None:
        for name in ("p_correct", "p_malformed", "p_canonical"):
            check_scalar(getattr(self, name), name, float, min=0, max=1, inclusive="neither")
        check_scalar(self.bug_strength, "bug_strength", float, min=0)
        check_scalar(self.other_root_logit, "other_root_logit", float)


class BanditPolicy:
    """Tabular logits (W, U, F) with exact probabilities; ``copy`` gives independent parameters."""

    def __init__(self, prior: BanditPrior = BanditPrior(), seed: int = 0):
        rng = np.random.default_rng(seed)
        c0 = np.log(prior.p_correct / (1 - prior.p_correct) * (N_SKILLS - 1))
        self.W = np.zeros((len(FAMILIES), N_SKILLS))
        self.W[:, 0] = c0
        for fam in MULTI:
            self.W[FAMILIES.index(fam), 3] += prior.other_root_logit
        self.U = np.zeros((N_BUCKETS, N_SKILLS))
        bugs = rng.integers(1, N_SKILLS, size=N_BUCKETS)
        self.U[np.arange(N_BUCKETS), bugs] = rng.uniform(0, prior.bug_strength, size=N_BUCKETS)
        pw = 1 - prior.p_malformed
        pf = np.array([prior.p_canonical * pw] + [(1 - prior.p_canonical) * pw / 3] * 3 + [prior.p_malformed])
        self.F = np.log(pf)

    def copy(self) -> "BanditPolicy":
        new = object.__new__(BanditPolicy)
        new.W, new.U, new.F = self.W.copy(), self.U.copy(), self.F.copy()
        return new

    def skill_logits(self, fam: np.ndarray, buck: np.ndarray) -> np.ndarray:
        return self.W[fam] + self.U[buck]

    def skill_probs(self, fam, buck) -> np.ndarray:
        return _softmax(self.skill_logits(fam, buck))

    def format_probs(self) -> np.ndarray:
        return _softmax(self.F)


def problem_index(problems) -> tuple[np.ndarray, np.ndarray]:
    """(family id, bucket) arrays of ``problems``."""
    fam = np.array([FAMILIES.index(p.family) for p in problems])
    return fam, np.array([bucket_of(p) for p in problems])


def reward_table(problems, labels, kind: str = "math") -> np.ndarray:
    """R[i, k, f] = reward of skill k's answer rendered in format f against ``labels[i]``.

    kind ``"math"``: ``math_reward(label, completion)``; ``"format"``: ``format_reward`` (labels unused).
    """
    if len(problems) == 0:
        raise ValueError("problems must not be empty")
    if kind == "math" and len(labels) != len(problems):
        raise ValueError(f"labels has {len(labels)} entries for {len(problems)} problems")
    R = np.zeros((len(problems), N_SKILLS, N_FORMATS))
    for i, p in enumerate(problems):
        for k in range(N_SKILLS):
            for f in range(N_FORMATS):
                c = render_completion(p.skill_answers[k], f)
                R[i, k, f] = format_reward(c) if kind == "format" else math_reward(labels[i], c)
    return R


def correct_table(problems) -> np.ndarray:
    """C[i, k] = 1 iff skill k's answer is in S(q) (the truth, for evaluation and rates)."""
    return np.array([[float(a in p.truth) for a in p.skill_answers] for p in problems])


def evaluate(policy: BanditPolicy, fam, buck, correct: np.ndarray, ks=(1, 2, 4, 8, 16, 32)) -> dict:
    """Exact test metrics: mean-over-samples accuracy, greedy accuracy, pass@k (exact, n -> inf), entropy."""
    pk = policy.skill_probs(fam, buck)
    pf = policy.format_probs()
    p = (pk * correct).sum(axis=1) * (1.0 - pf[MALFORMED])
    greedy = correct[np.arange(len(correct)), pk.argmax(axis=1)] * float(pf.argmax() != MALFORMED)
    ent = -(pk * np.log(pk + 1e-300)).sum(axis=1).mean() - (pf * np.log(pf + 1e-300)).sum()
    return {
        "acc": float(p.mean()),
        "greedy_acc": float(greedy.mean()),
        "pass_at_k": {str(k): float((1 - (1 - p) ** k).mean()) for k in ks},
        "entropy": float(ent),
        "p_malformed": float(pf[MALFORMED]),
    }


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 60
    batch: int = 32  # prompts per step
    group: int = 8  # G
    lr: float = 0.3
    minibatches: int = 2
    ppo_epochs: int = 1  # passes over each batch (ASSUMPTION: 1, in ``minibatches`` steps)
    beta: float = 0.0    # KL coefficient (ASSUMPTION: 0); > 0: k3 penalty to the policy as it was before training

    def __post_init__(self) -> None:
        check_scalar(self.steps, "steps", int, min=0)
        check_scalar(self.batch, "batch", int, min=1)
        check_scalar(self.group, "group", int, min=2)
        check_scalar(self.lr, "lr", float, min=0, inclusive="neither")
        check_scalar(self.minibatches, "minibatches", int, min=1, max=self.batch)
        check_scalar(self.ppo_epochs, "ppo_epochs", int, min=1)
        check_scalar(self.beta, "beta", float, min=0)


def _sample(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    return (u[..., None] > np.cumsum(probs, axis=-1)[..., None, :]).sum(axis=-1).clip(0, probs.shape[-1] - 1)


def train(
    policy: BanditPolicy,
    fam,
    buck,
    table,
    variant: Variant,
    cfg: TrainConfig = TrainConfig(),
    seed: int = 0,
    rho1: float = 0.0,
    correct=None,
) -> dict:
    """Train ``policy`` in place on items (fam, buck, table [n, 6, 5]); returns per-step curves.

    seed fixes the prompt order and the sampling uniforms (common random numbers across conditions).
    rho1: the FN rate given to PGFC/PGBC (share of wrong labels); PGBC's rho0 is measured on the fly from
    ``correct`` [n, 6] (wrong well-formed answers that were rewarded).
    """
    table = check_array(table, "table", ndim=3, dtype=float)
    n = table.shape[0]
    if n == 0:
        raise ValueError("empty dataset: table has no items")
    if len(fam) != n or len(buck) != n:
        raise ValueError(f"fam/buck have {len(fam)}/{len(buck)} entries for {n} items")
    rng = np.random.default_rng(seed)
    G = cfg.group
    ref = policy.copy() if cfg.beta > 0 else None    # pi_ref of the KL term: the policy before training
    ref_logf = None if ref is None else np.log(ref.format_probs())   # frozen: once, not per mini-batch
    curves = {"reward": [], "entropy": [], "kept_groups": []}
    for _ in range(cfg.steps):
        rounds = 1 + (variant.max_resample_rounds if variant.dynamic_sampling else 0)
        idx_l, k_l, f_l, r_l, mu_l = [], [], [], [], []
        have = 0
        for _r in range(rounds):
            idx = rng.integers(n, size=cfg.batch)
            u1, u2 = rng.random((cfg.batch, G)), rng.random((cfg.batch, G))
            zk = policy.skill_logits(fam[idx], buck[idx])
            zf = np.broadcast_to(policy.F, (cfg.batch, N_FORMATS))
            if variant.samples_bf16:
                zk, zf = bf16_round(zk).astype(float), bf16_round(zf).astype(float)
            muk, muf = _softmax(zk), _softmax(zf)
            k, f = _sample(muk, u1), _sample(muf, u2)
            R = table[idx[:, None], k, f]
            keep = informative_groups(R) if variant.dynamic_sampling else np.ones(cfg.batch, bool)
            idx_l.append(idx[keep])
            k_l.append(k[keep])
            f_l.append(f[keep])
            r_l.append(R[keep])
            mu_l.append(
                (np.take_along_axis(muk[keep], k[keep], 1), np.take_along_axis(muf[keep], f[keep], 1))
            )
            have += int(keep.sum())
            if have >= cfg.batch:
                break
        idx, k, f, R = (np.concatenate(x)[: cfg.batch] for x in (idx_l, k_l, f_l, r_l))
        muk_s = np.concatenate([m[0] for m in mu_l])[: cfg.batch]
        muf_s = np.concatenate([m[1] for m in mu_l])[: cfg.batch]
        curves["reward"].append(float(R.mean()) if R.size else 0.0)
        curves["kept_groups"].append(int(len(idx)))
        if len(idx) == 0:
            curves["entropy"].append(curves["entropy"][-1] if curves["entropy"] else float("nan"))
            continue
        rho0 = 0.0
        if variant.advantage == "pgbc" and correct is not None:
            wrong = (correct[idx[:, None], k] == 0) & (f != MALFORMED)
            rho0 = float(min(R[wrong].mean() if wrong.any() else 0.0, 0.999 - rho1))
        A = advantages(R, variant, rho0=rho0, rho1=rho1)
        old = policy.copy()
        pk_old_all = old.skill_probs(fam[idx], buck[idx])
        pf_old = old.format_probs()
        pik_old = np.take_along_axis(pk_old_all, k, 1)
        pif_old = pf_old[f]
        mbs = np.array_split(np.arange(len(idx)), min(cfg.minibatches, len(idx)))
        for mb in (m for _ep in range(cfg.ppo_epochs) for m in mbs):
            fm, bm = fam[idx[mb]], buck[idx[mb]]
            pk = policy.skill_probs(fm, bm)
            pf = policy.format_probs()
            km, fmt = k[mb], f[mb]
            rk = np.take_along_axis(pk, km, 1) / pik_old[mb]
            rf = pf[fmt] / pif_old[mb]
            ck = token_grad_coef(rk, A[mb], variant, tis_w=pik_old[mb] / muk_s[mb])
            cf = token_grad_coef(rf, A[mb], variant, tis_w=pif_old[mb] / muf_s[mb])
            if ref is not None:   # - beta k3 per token
                pk_ref = np.take_along_axis(ref.skill_probs(fm, bm), km, 1)
                ck = ck + kl_grad_coef(np.log(np.take_along_axis(pk, km, 1)), np.log(pk_ref), cfg.beta)
                cf = cf + kl_grad_coef(np.log(pf[fmt]), ref_logf[fmt], cfg.beta)
            w = 1.0 / (2 * km.size)  # 1/(G|o|) per response (= 1/sum|o| = 1/(G L_max) here)
            onehot_k = np.zeros(km.shape + (N_SKILLS,))
            np.put_along_axis(onehot_k, km[..., None], 1.0, axis=-1)
            gk = (w * ck[..., None] * (onehot_k - pk[:, None, :])).sum(axis=1)  # [mb, 6]
            onehot_f = np.eye(N_FORMATS)[fmt]
            gf = (w * cf[..., None] * (onehot_f - pf)).sum(axis=(0, 1))
            np.add.at(policy.W, fm, cfg.lr * gk)
            np.add.at(policy.U, bm, cfg.lr * gk)
            policy.F += cfg.lr * gf
        pk_now = policy.skill_probs(fam[idx], buck[idx])
        pf_now = policy.format_probs()
        curves["entropy"].append(
            float(
                -(pk_now * np.log(pk_now + 1e-300)).sum(1).mean() - (pf_now * np.log(pf_now + 1e-300)).sum()
            )
        )
    return curves
