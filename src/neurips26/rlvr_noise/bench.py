"""Benchmarks (``neurips26 bench rlvr_noise``), every row through ``harness.bench.compare``.

(a) reward throughput: our cached + fast-path ``math_reward`` vs raw math-verify (gold first, ``$...$``)
    on the (label, completion) pairs one bandit RL run samples (answers repeat, as in RL); the cache is
    cleared before every timed call, so ours pays its first-time math-verify calls too. Target >= 50x.
(b) one 60 x 32 x 8 bandit GRPO run (target <= 0.5 s; the spec's pure-Python loop prototype ~2 s), and
    rollouts/s. The tinylm-vs-TRL GRPOTrainer row and the SQL-vs-func_timeout row are not built yet.
"""

from __future__ import annotations

import numpy as np

from neurips26.harness.bench import BenchRow, compare
from neurips26.harness.run import RunContext
from neurips26.rlvr_noise.bandit import BanditPolicy, TrainConfig, problem_index, reward_table, train
from neurips26.rlvr_noise.mathgen import N_FORMATS, N_SKILLS, make_problems, render_completion
from neurips26.rlvr_noise.objectives import VARIANTS
from neurips26.rlvr_noise.verifiers import answers_equal, math_reward, math_reward_uncached


def rl_reward_pairs(n_problems: int, n_pairs: int, seed: int = 0) -> list[tuple[str, str]]:
    """(label, completion) pairs as one RL run samples them from the base policy (with repeats)."""
    data = make_problems(n_problems, 1, seed=seed)
    pol = BanditPolicy(seed=seed)
    fam, buck = problem_index(data.train)
    pk, pf = pol.skill_probs(fam, buck), pol.format_probs()
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_pairs):
        i = int(rng.integers(len(data.train)))
        k = int(rng.choice(N_SKILLS, p=pk[i]))
        f = int(rng.choice(N_FORMATS, p=pf))
        p = data.train[i]
        out.append((p.gold_label, render_completion(p.skill_answers[k], f)))
    return out


def bench(ctx: RunContext) -> list[BenchRow]:
    smoke = ctx.scale == "smoke"
    pairs = rl_reward_pairs(20 if smoke else 64, 40 if smoke else 2048)
    rows = []
    try:
        import math_verify  # noqa: F401

        def ours():
            answers_equal.cache_clear()
            return [math_reward(a, b) for a, b in pairs]

        def anchor():
            return [math_reward_uncached(a, b) for a, b in pairs]

        same = ours() == anchor()
        rows.append(compare("math reward, answers of one RL run", ours, anchor, anchor_name="raw math-verify",
                            unit="rewards/s", work=len(pairs), rounds=3 if smoke else 5,
                            note=f"{len(pairs)} pairs, identical rewards: {same}"))
    except ImportError:
        rows.append(compare("math reward, answers of one RL run", lambda: None, None,
                            anchor_name="raw math-verify", missing="math-verify not installed"))
    data = make_problems(100 if smoke else 1000, 1, seed=0)
    fam, buck = problem_index(data.train)
    T = reward_table(data.train, [p.gold_label for p in data.train])
    cfg = TrainConfig(steps=10 if smoke else 60, batch=32, group=8)

    def run_bandit():
        train(BanditPolicy(seed=0), fam, buck, T, VARIANTS["grpo"], cfg, seed=0)

    rows.append(compare(f"bandit GRPO run {cfg.steps} x 32 x 8", run_bandit, None,
                        anchor_name="loop prototype (spec: ~2 s)", unit="s", rounds=3 if smoke else 7,
                        missing="the prototype is not shipped; target <= 0.5 s"))
    rows.append(compare("bandit rollouts/s", run_bandit, None, anchor_name="-", unit="rollouts/s",
                        work=cfg.steps * 32 * 8, rounds=3 if smoke else 7, missing="sampling bound"))
    return rows
