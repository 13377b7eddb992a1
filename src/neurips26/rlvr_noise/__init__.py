"""Noisy labels in RLVR (Zhu & Kang, NeurIPS 2026): verifiers, GRPO-family objectives, re-verification.

    from neurips26.rlvr_noise import math_reward, group_advantages, policy_loss
    r = math_reward("0.5", r"... \\boxed{\\frac{1}{2}}")          # 1 (fast path; math-verify fallback)
    loss = policy_loss(logp, old_logp, adv, mask, "dapo")          # torch, per-token log-probs [N, T]
"""

from neurips26.rlvr_noise.bandit import BanditPolicy, BanditPrior, TrainConfig, evaluate, reward_table, train
from neurips26.rlvr_noise.mathgen import (Problem, construct_noisy_labels, label_is_correct, make_problems,
                                          render_completion, render_value, weak_check)
from neurips26.rlvr_noise.objectives import (VARIANTS, Variant, advantages, get_variant, group_advantages,
                                             informative_groups, overlong_shaping, pass_at_k, pgbc_advantages,
                                             pgfc_advantages, policy_loss, sapo_gate, token_grad_coef)
from neurips26.rlvr_noise.reverify import ReverifyReport, clopper_pearson_upper, normalise, reverify
from neurips26.rlvr_noise.sqlex import (SQLEvaluator, execution_accuracy, extract_answer, is_benign,
                                        is_single_select, make_university_db, sql_reward)
from neurips26.rlvr_noise.tinylm import TinyLMConfig, build_model, evaluate_lm, sft, train_rl
from neurips26.rlvr_noise.verifiers import (compute_score, format_reward, last_boxed, math_reward,
                                            raw_math_verify, trl_math_reward)

__all__ = [
    "BanditPolicy", "BanditPrior", "TrainConfig", "evaluate", "reward_table", "train",
    "Problem", "construct_noisy_labels", "label_is_correct", "make_problems", "render_completion",
    "render_value", "weak_check",
    "VARIANTS", "Variant", "advantages", "get_variant", "group_advantages", "informative_groups",
    "overlong_shaping", "pass_at_k", "pgbc_advantages", "pgfc_advantages", "policy_loss", "sapo_gate",
    "token_grad_coef",
    "ReverifyReport", "clopper_pearson_upper", "normalise", "reverify",
    "SQLEvaluator", "execution_accuracy", "extract_answer", "is_benign", "is_single_select",
    "make_university_db", "sql_reward",
    "TinyLMConfig", "build_model", "evaluate_lm", "sft", "train_rl",
    "compute_score", "format_reward", "last_boxed", "math_reward", "raw_math_verify", "trl_math_reward",
]
