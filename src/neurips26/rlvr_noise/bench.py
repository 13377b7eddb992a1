"""Benchmarks (``neurips26 bench rlvr_noise``), every row through ``harness.bench.compare``.

(a) reward throughput: our cached + fast-path ``math_reward`` vs raw math-verify (gold first, ``$...$``)
    on the (label, completion) pairs one bandit RL run samples (answers repeat, as in RL); the cache is
    cleared before every timed call, so ours pays its first-time math-verify calls too. Target >= 50x.
(b) one 60 x 32 x 8 bandit GRPO run (target <= 0.5 s; the spec's pure-Python loop prototype ~2 s), and
    rollouts/s.
(c) SQL EX evaluations/s: our read-only, step-budgeted, result-cached evaluator vs a BIRD-style evaluator
    (a new connection per evaluation, gold re-executed, ``func_timeout``) on template queries with
    perturbations sampled with repeats (as an RL run repeats them); identical EX required. Target >= 3x.
The tinylm-vs-TRL GRPOTrainer row is not built yet (no tinylm policy in this version).
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import numpy as np

from neurips26.harness.bench import BenchRow, compare
from neurips26.harness.run import RunContext
from neurips26.rlvr_noise.bandit import BanditPolicy, TrainConfig, problem_index, reward_table, train
from neurips26.rlvr_noise.mathgen import N_FORMATS, N_SKILLS, make_problems, render_completion
from neurips26.rlvr_noise.objectives import VARIANTS
from neurips26.rlvr_noise.sqlex import SQLEvaluator, make_university_db
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
        rows.append(
            compare(
                "math reward, answers of one RL run",
                ours,
                anchor,
                anchor_name="raw math-verify",
                unit="rewards/s",
                work=len(pairs),
                rounds=3 if smoke else 5,
                note=f"{len(pairs)} pairs, identical rewards: {same}",
            )
        )
    except ImportError:
        rows.append(
            compare(
                "math reward, answers of one RL run",
                lambda: None,
                None,
                anchor_name="raw math-verify",
                missing="math-verify not installed",
            )
        )
    data = make_problems(100 if smoke else 1000, 1, seed=0)
    fam, buck = problem_index(data.train)
    T = reward_table(data.train, [p.gold_label for p in data.train])
    cfg = TrainConfig(steps=10 if smoke else 60, batch=32, group=8)

    def run_bandit():
        train(BanditPolicy(seed=0), fam, buck, T, VARIANTS["grpo"], cfg, seed=0)

    rows.append(
        compare(
            f"bandit GRPO run {cfg.steps} x 32 x 8",
            run_bandit,
            None,
            anchor_name="loop prototype (spec: ~2 s)",
            unit="s",
            rounds=3 if smoke else 7,
            missing="the prototype is not shipped; target <= 0.5 s",
        )
    )
    rows.append(_sql_row(ctx, smoke))
    rows.append(
        compare(
            "bandit rollouts/s",
            run_bandit,
            None,
            anchor_name="-",
            unit="rollouts/s",
            work=cfg.steps * 32 * 8,
            rounds=3 if smoke else 7,
            missing="sampling bound",
        )
    )
    return rows


SQL_GOLD = (
    "SELECT COUNT(*) FROM students WHERE gender = 'F' AND age > {a}",
    "SELECT AVG(gpa) FROM students WHERE dept_id = {d}",
    "SELECT MAX(gpa) FROM students WHERE age >= {a}",
    "SELECT name FROM students WHERE gpa > {g} ORDER BY gpa DESC LIMIT 1",
    "SELECT COUNT(DISTINCT s.id) FROM students s JOIN enrollments e ON e.student_id = s.id "
    "WHERE e.year = {y}",
    "SELECT d.name FROM departments d JOIN students s ON s.dept_id = d.id GROUP BY d.id "
    "HAVING COUNT(*) > {n}",
    "SELECT c.title FROM courses c JOIN enrollments e ON e.course_id = c.id "
    "WHERE e.grade = 'A' AND c.credits > 2",
    "SELECT COUNT(*) FROM enrollments e JOIN courses c ON c.id = e.course_id WHERE c.dept_id = {d}",
)
PERTURB = ((">", ">="), ("gpa", "age"), ("COUNT(DISTINCT s.id)", "COUNT(*)"), ("'F'", "'Female'"))


def sql_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """(predicted, gold) SQL pairs: template golds and perturbed predictions, drawn with repeats."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        t = SQL_GOLD[int(rng.integers(len(SQL_GOLD)))]
        gold = t.format(
            a=int(rng.integers(18, 24)),
            d=int(rng.integers(1, 5)),
            g=2.5 + 0.5 * int(rng.integers(3)),
            y=2020 + int(rng.integers(3)),
            n=30 + 5 * int(rng.integers(3)),
        )
        pred = gold
        if rng.random() < 0.5:
            a, b = PERTURB[int(rng.integers(len(PERTURB)))]
            pred = gold.replace(a, b, 1)
        out.append((pred, gold))
    return out


def bird_style_ex(db_path, pred: str, gold: str, timeout_s: float = 30.0) -> int:
    """BIRD's evaluation: a new connection, pred and gold executed under func_timeout, set equality."""
    from func_timeout import FunctionTimedOut, func_timeout

    def execute():
        conn = sqlite3.connect(db_path)
        try:
            p = conn.execute(pred).fetchall()
            g = conn.execute(gold).fetchall()
            return int(set(p) == set(g))
        finally:
            conn.close()

    try:
        return func_timeout(timeout_s, execute)
    except FunctionTimedOut:
        return 0
    except sqlite3.Error:
        return 0


def _sql_row(ctx: RunContext, smoke: bool) -> BenchRow:
    db = make_university_db(Path(tempfile.mkdtemp()) / "university.db", seed=0)
    pairs = sql_pairs(30 if smoke else 400)
    ev = SQLEvaluator(db)

    def ours():
        ev.cache.clear()
        return [ev.ex(p, g) for p, g in pairs]

    try:
        import func_timeout  # noqa: F401
    except ImportError:
        return compare(
            "SQL EX evaluations",
            ours,
            None,
            anchor_name="BIRD func_timeout evaluator",
            unit="evals/s",
            work=len(pairs),
            rounds=3,
            missing="func-timeout not installed",
        )

    def anchor():
        return [bird_style_ex(db, p, g) for p, g in pairs]

    same = ours() == anchor()
    return compare(
        "SQL EX evaluations",
        ours,
        anchor,
        anchor_name="BIRD func_timeout evaluator",
        unit="evals/s",
        work=len(pairs),
        rounds=3 if smoke else 5,
        note=f"{len(pairs)} pairs, identical EX: {same}",
    )
