"""Benchmarks (``neurips26 bench rlvr_noise``), every row through ``harness.bench.compare``.

(a) reward throughput: our cached + fast-path ``math_reward`` vs raw math-verify (gold first, ``$...$``)
    on the (label, completion) pairs one bandit RL run samples (answers repeat, as in RL); the cache is
    cleared before every timed call, so ours pays its first-time math-verify calls too. Target >= 50x.
(b) one 60 x 32 x 8 bandit GRPO run (target <= 0.5 s; the spec's pure-Python loop prototype ~2 s), and
    rollouts/s.
(c) SQL EX evaluations/s: our read-only, step-budgeted, result-cached evaluator vs a BIRD-style evaluator
    (a new connection per evaluation, gold re-executed, ``func_timeout``) on template queries with
    perturbations sampled with repeats (as an RL run repeats them); identical EX required. Target >= 3x.
(d) one tinylm GRPO step (sample B x G, score, 2 Adam mini-batch steps) vs TRL's ``GRPOTrainer`` on a
    ``GPT2LMHeadModel`` of the same shape (local ``GPT2Config``, the tinylm vocabulary as a local tokenizer),
    same prompts and reward; target ours/TRL <= 1.0. The note carries the loss check: our ``policy_loss`` ==
    TRL's ``_compute_loss`` for ``loss_type`` grpo / dr_grpo / dapo on identical tensors (1e-6). Skipped with
    the reason without trl.
"""

from __future__ import annotations

import dataclasses
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
    rows.append(_tinylm_row(smoke))
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


# ---- (b) tinylm vs TRL GRPOTrainer ------------------------------------------------------------------
TRL_MISSING = "trl not installed (pip install trl==1.16.0: the tinylm-vs-GRPOTrainer row and loss check skip)"


def hf_char_tokenizer():
    """The tinylm vocabulary as a local ``PreTrainedTokenizerFast`` (no hub download): specials as added
    tokens, the multi-char LaTeX tokens and single characters split out by one regex."""
    import re

    from tokenizers import Regex, Tokenizer, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    from neurips26.rlvr_noise.tinylm import MULTI_CHAR, SPECIALS, VOCAB

    tok = Tokenizer(WordLevel({t: i for i, t in enumerate(VOCAB)}, unk_token="<pad>"))
    pattern = "|".join(re.escape(t) for t in sorted(MULTI_CHAR, key=len, reverse=True)) + "|."
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                 additional_special_tokens=list(SPECIALS[1:2] + SPECIALS[3:]))
    return hf


def trl_grpo_trainer(problems, cfg, loss_type: str = "grpo", max_steps: int = 2, out_dir=None, seed: int = 0):
    """A TRL ``GRPOTrainer`` on a fresh ``GPT2LMHeadModel`` with tinylm's shape (local ``GPT2Config``) and
    vocabulary, the same prompts (``<tag>text<ans>``) and ``math_reward`` through TRL's reward signature.

    Batch shape mirrors one tinylm step: ``cfg.batch`` prompts x ``cfg.group`` completions generated once and
    consumed in ``cfg.minibatches`` optimizer steps (steps_per_generation), so one tinylm step = that many TRL
    optimizer steps."""
    from datasets import Dataset
    from transformers import GPT2Config, GPT2LMHeadModel
    from trl import GRPOConfig, GRPOTrainer

    from neurips26.rlvr_noise.tinylm import ANS, EOS, PAD, VOCAB
    from neurips26.rlvr_noise.verifiers import trl_math_reward

    tok = hf_char_tokenizer()
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(VOCAB), n_positions=cfg.block_size, n_embd=cfg.n_embd,
                                       n_layer=cfg.n_layer, n_head=cfg.n_head, bos_token_id=ANS,
                                       eos_token_id=EOS, pad_token_id=PAD, resid_pdrop=0.0, embd_pdrop=0.0,
                                       attn_pdrop=0.0))
    ds = Dataset.from_dict({"prompt": [f"<{p.family}>{p.text}<ans>" for p in problems],
                            "ground_truth": [p.gold_label for p in problems]})
    n_seq = cfg.batch * cfg.group
    args = GRPOConfig(
        output_dir=str(out_dir or tempfile.mkdtemp(prefix="rlvr-trl-")), use_cpu=True, bf16=False, fp16=False,
        report_to="none", save_strategy="no", logging_steps=10_000, disable_tqdm=True, seed=seed,
        per_device_train_batch_size=n_seq // cfg.minibatches, gradient_accumulation_steps=1,
        steps_per_generation=cfg.minibatches, num_generations=cfg.group, max_completion_length=cfg.l_max,
        max_steps=max_steps, learning_rate=cfg.lr, beta=0.0, loss_type=loss_type, scale_rewards="group",
        temperature=1.0, top_p=1.0, epsilon=0.2, epsilon_high=0.28 if loss_type == "dapo" else 0.2,
        lr_scheduler_type="constant", warmup_steps=0, dataloader_num_workers=0, use_vllm=False,
    )

    def reward(completions, ground_truth=None, **kw):
        return trl_math_reward(completions, ground_truth=ground_truth)

    return GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=ds, processing_class=tok)


TRL_LOSS_TYPES = {"grpo": "grpo", "dr_grpo": "dr_grpo", "dapo": "dapo"}   # TRL loss_type -> our variant


def trl_loss_check(cfg=None, n_seq: int = 16, seed: int = 0) -> dict:
    """|our loss - TRL's loss| for ``loss_type`` grpo / dr_grpo / dapo on identical tensors.

    TRL's own ``GRPOTrainer._compute_loss`` runs on a batch of prompts + variable-length completions with
    given advantages (TRL's Bessel std + 1e-4 standardisation of seeded rewards) and old log-probs perturbed
    away from the current ones (so ratios != 1 and both clip sides act); ours is ``policy_loss`` on the per-token
    log-probs TRL's ``_get_per_token_logps_and_entropies`` returns for the same batch."""
    import torch

    from neurips26.rlvr_noise.objectives import policy_loss
    from neurips26.rlvr_noise.tinylm import EOS, PAD, TinyLMConfig, encode_prompts

    cfg = cfg or TinyLMConfig(batch=4, group=4, device="cpu")
    problems = make_problems(max(8, n_seq), 1, seed=seed).train[:n_seq]
    tr = trl_grpo_trainer(problems, cfg, max_steps=1)
    model = tr.model
    model.eval()
    g = torch.Generator().manual_seed(seed)
    prompt_ids = encode_prompts(problems)
    prompt_mask = (prompt_ids != PAD).long()
    L = cfg.l_max
    comp = torch.randint(3, int(model.config.vocab_size), (n_seq, L), generator=g)
    lengths = torch.randint(1, L + 1, (n_seq,), generator=g)
    cmask = (torch.arange(L)[None, :] < lengths[:, None]).long()
    comp[torch.arange(n_seq), lengths - 1] = EOS
    comp = torch.where(cmask.bool(), comp, torch.full_like(comp, PAD))
    R = torch.randint(0, 2, (n_seq // cfg.group, cfg.group), generator=g).float()
    adv = ((R - R.mean(1, keepdim=True)) / (R.std(1, keepdim=True) + 1e-4)).reshape(-1)
    with torch.no_grad():
        cur = tr._get_per_token_logps_and_entropies(model, torch.cat([prompt_ids, comp], 1),
                                                       torch.cat([prompt_mask, cmask], 1), L)[0]
    old = cur + 0.3 * torch.randn(cur.shape, generator=g)
    inputs = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": comp,
              "completion_mask": cmask, "advantages": adv, "old_per_token_logps": old,
              "num_items_in_batch": cmask.sum()}
    out = {}
    for lt, ours_name in TRL_LOSS_TYPES.items():
        tr.loss_type = lt
        tr.epsilon_low, tr.epsilon_high = 0.2, (0.28 if lt == "dapo" else 0.2)
        theirs = float(tr._compute_loss(model, inputs).detach())
        logp = tr._get_per_token_logps_and_entropies(model, torch.cat([prompt_ids, comp], 1),
                                                        torch.cat([prompt_mask, cmask], 1), L)[0]
        ours = float(policy_loss(logp, old, adv, cmask, ours_name, l_max=L).detach())
        out[lt] = {"ours": ours, "trl": theirs, "abs_diff": abs(ours - theirs)}
    # the KL term (beta > 0; TRL's bias-corrected KL off, so both use the plain k3 estimator)
    ref = cur + 0.2 * torch.randn(cur.shape, generator=g)
    tr.loss_type, tr.beta, tr.epsilon_high = "grpo", 0.04, 0.2
    tr.args.use_bias_correction_kl = False
    theirs = float(tr._compute_loss(model, {**inputs, "ref_per_token_logps": ref}).detach())
    logp = tr._get_per_token_logps_and_entropies(model, torch.cat([prompt_ids, comp], 1),
                                                 torch.cat([prompt_mask, cmask], 1), L)[0]
    ours = float(policy_loss(logp, old, adv, cmask, "grpo", l_max=L, ref_logp=ref, beta=0.04).detach())
    out["grpo_kl"] = {"ours": ours, "trl": theirs, "abs_diff": abs(ours - theirs)}
    tr.beta = 0.0
    return out


def _tinylm_row(smoke: bool) -> BenchRow:
    from neurips26.rlvr_noise.tinylm import TinyLMConfig, build_model, train_rl

    name = "tinylm GRPO step (8 prompts x G 8)"
    try:
        import trl
    except ImportError:
        return compare(name, lambda: None, None, anchor_name="TRL GRPOTrainer", unit="s", rounds=1,
                       missing=TRL_MISSING)
    steps = 1 if smoke else 2
    cfg = TinyLMConfig(batch=8, group=8, steps=steps, device="cpu")
    problems = make_problems(64, 1, seed=0).train
    labels = [p.gold_label for p in problems]
    if smoke:   # the contract test: no ~10 s TRL trainer build (the bench and test_rlvr_noise_trl run it)
        model = build_model(cfg, seed=0)
        return compare(name, lambda: train_rl(model, problems, labels, VARIANTS["grpo"], cfg, seed=0), None,
                       anchor_name=f"TRL {trl.__version__} GRPOTrainer", unit="s", rounds=1, warmup=0,
                       missing="smoke scale (the TRL trainer runs in the full bench and the TRL loss test)")
    trainer = trl_grpo_trainer(problems, cfg, max_steps=steps * cfg.minibatches)
    model = build_model(cfg, seed=0)
    lengths = []

    def ours():
        lengths.append(np.mean(train_rl(model, problems, labels, VARIANTS["grpo"], cfg, seed=0)["length"]))

    check = trl_loss_check()
    worst = max(v["abs_diff"] for v in check.values())
    row = compare(name, ours, trainer.train, anchor_name=f"TRL {trl.__version__} GRPOTrainer", unit="s",
                  rounds=2 if smoke else 5)
    return dataclasses.replace(row, note=f"{steps} step(s) = {steps * cfg.minibatches} TRL optimizer steps, fresh-init models of one "
                f"shape (mean completion length ours {np.mean(lengths):.1f} tokens; "
                f"{steps * cfg.batch * cfg.group / row.ours:.0f} rollouts/s); loss == TRL _compute_loss "
                f"for {'/'.join(check)}: max |diff| {worst:.1e} (needs <= 1e-6); {row.note}")
