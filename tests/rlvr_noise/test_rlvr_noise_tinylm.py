"""tinylm: tokenizer, sequences, objectives on real token log-probs, and learning at smoke size."""

from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurips26.rlvr_noise.bandit import BanditPolicy, problem_index  # noqa: E402
from neurips26.rlvr_noise.mathgen import N_FORMATS, make_problems  # noqa: E402
from neurips26.rlvr_noise.objectives import VARIANTS, policy_loss  # noqa: E402
from neurips26.rlvr_noise.tinylm import (EOS, TOKENIZER, TinyLMConfig, build_model, completion_logp,  # noqa: E402
                                         encode_prompts, evaluate_lm, generate, is_correct, lm_completion,
                                         sft, train_rl)


@pytest.fixture
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


SMALL = TinyLMConfig(steps=30, batch=8, group=8, sft_epochs=10, sft_batch=32, n_eval=8, device="cpu")


def test_tokenizer_round_trips_every_rendered_answer_and_prompt():
    data = make_problems(200, 50, seed=3)
    for p in data.train + data.test:
        assert TOKENIZER.decode(TOKENIZER.prompt(p)) == f"<{p.family}>{p.text}"
        for v in p.skill_answers:
            for f in range(N_FORMATS):
                c = lm_completion(v, f)
                ids = TOKENIZER.encode(c)
                assert TOKENIZER.decode(ids) == c and len(ids) + 1 <= SMALL.l_max
    assert TOKENIZER.encode("\\boxed{\\frac{3}{4}}") == [TOKENIZER.index[t] for t in
                                                        ("\\boxed{", "\\frac{", "3", "}{", "4", "}", "}")]
    with pytest.raises(ValueError, match="vocabulary"):
        TOKENIZER.encode("abc")


def test_is_correct_uses_the_exact_solution_set():
    p = next(q for q in make_problems(200, 1, seed=0).train if q.family == "square")
    other = -p.gold
    assert is_correct(p, lm_completion(p.gold, 0)) and is_correct(p, lm_completion(other, 1))
    assert not is_correct(p, lm_completion(p.gold, 4))   # malformed: no box
    assert not is_correct(p, lm_completion(p.gold + Fraction(1), 0))


def test_config_and_input_validation():
    with pytest.raises(ValueError, match="n_head"):
        TinyLMConfig(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match="group"):
        TinyLMConfig(group=1)
    with pytest.raises(ValueError, match="device"):
        TinyLMConfig(device="tpu")
    probs = make_problems(10, 1, seed=0).train
    m = build_model(SMALL)
    with pytest.raises(ValueError, match="labels"):
        train_rl(m, probs, ["1"] * 3, VARIANTS["grpo"], SMALL)
    with pytest.raises(ValueError, match="empty"):
        train_rl(m, [], None, VARIANTS["grpo"], SMALL)
    with pytest.raises(ValueError, match="empty"):
        sft(m, [], np.zeros((0, 6)), np.ones(N_FORMATS), SMALL)
    with pytest.raises(ValueError, match="skill_probs"):
        sft(m, probs, np.zeros((3, 6)), np.ones(N_FORMATS), SMALL)


def test_generation_masks_after_eos_and_logp_matches_sampler(one_thread):
    probs = make_problems(6, 1, seed=1).train
    m = build_model(SMALL, seed=1)
    pr = encode_prompts(probs)
    tok, mask, mu = generate(m, pr, SMALL.l_max, torch.Generator().manual_seed(0))
    for t, mk in zip(tok, mask):
        ends = (t == EOS).nonzero()
        if len(ends):
            e = int(ends[0])
            assert mk[: e + 1].all() and not mk[e + 1:].any()
    lp = completion_logp(m, pr, tok)
    # float32 sampler == trainer: the recorded sampler log-probs are the model's own
    assert torch.allclose((lp * mask), (mu * mask), atol=1e-5)
    # bfloat16 sampler (TIS): mu differs from the trainer's float32 log-probs
    tok2, mask2, mu2 = generate(m, pr, SMALL.l_max, torch.Generator().manual_seed(0), bf16=True)
    with torch.no_grad():
        gap = float(((completion_logp(m, pr, tok2) - mu2).abs() * mask2).max())
    assert gap > 1e-4


def test_aggregations_differ_on_real_variable_length_sequences(one_thread):
    """GRPO (1/(G|o_i|)), DAPO (1/sum|o_i|), Dr. GRPO (1/(G L_max)) give different gradients once lengths
    vary (the bandit cannot show this: every response there has 2 tokens)."""
    probs = make_problems(4, 1, seed=2).train
    m = build_model(SMALL, seed=2)
    pr = encode_prompts(probs).repeat_interleave(4, 0)
    tok, mask, _ = generate(m, pr, SMALL.l_max, torch.Generator().manual_seed(1))
    assert len(set(mask.sum(1).tolist())) > 1
    adv = torch.linspace(-1, 1, len(tok))
    grads = {}
    for v in ("grpo", "dapo", "dr_grpo"):
        m.zero_grad()
        logp = completion_logp(m, pr, tok)
        policy_loss(logp, logp.detach(), adv, mask, v, l_max=SMALL.l_max).backward()
        grads[v] = torch.cat([p.grad.flatten() for p in m.parameters() if p.grad is not None]).clone()
    for a, b in (("grpo", "dapo"), ("grpo", "dr_grpo")):
        cos = float(torch.nn.functional.cosine_similarity(grads[a], grads[b], dim=0))
        assert cos < 0.9999, (a, b, cos)
    # DAPO and Dr. GRPO both sum the token terms: same direction, scaled by (G L_max) / sum |o_i|
    ratio = len(tok) * SMALL.l_max / float(mask.sum())
    rel = float((grads["dapo"] - ratio * grads["dr_grpo"]).norm() / grads["dapo"].norm())
    assert rel < 1e-5, rel


def test_sft_then_clean_grpo_learns(one_thread):
    """Smoke-size tinylm: SFT reproduces a prior with format failures and bugs, then RL on the clean labels
    raises both the training reward and the (sampled) accuracy above the SFT base."""
    cfg = TinyLMConfig(steps=20, batch=8, group=8, sft_epochs=16, sft_samples=12, sft_batch=32, n_eval=8,
                       device="cpu")
    data = make_problems(16, 1, seed=0)
    pol = BanditPolicy(seed=0)
    f, b = problem_index(data.train)
    m = build_model(cfg, seed=0)
    losses = sft(m, data.train, pol.skill_probs(f, b), pol.format_probs(), cfg, seed=0)
    assert losses[-1] < 0.4 * losses[0]
    base = evaluate_lm(m, data.train, cfg, seed=1)
    assert 0.05 < base["p_malformed"] < 0.8          # the prior keeps format failures
    curves = train_rl(m, data.train, [p.gold_label for p in data.train], VARIANTS["grpo"], cfg, seed=2)
    after = evaluate_lm(m, data.train, cfg, seed=1)
    r = np.array(curves["reward"])
    assert r[-5:].mean() > r[:5].mean() + 0.05, r
    assert after["acc"] > base["acc"] + 0.08, (base, after)
    assert after["p_malformed"] < base["p_malformed"]


def test_kl_and_ppo_epochs_options_run_and_tis_dapo_paths(one_thread):
    """The ASSUMPTION knobs are live: KL to a frozen SFT copy (beta > 0), 2 PPO epochs, TIS (bf16 sampler)
    and DAPO (dynamic sampling, overlong shaping) on real sequences."""
    probs = make_problems(8, 1, seed=4).train
    labels = [p.gold_label for p in probs]
    for variant, kw in (("grpo", dict(beta=0.1, ppo_epochs=2)), ("tis", {}), ("dapo", {})):
        cfg = TinyLMConfig(steps=2, batch=4, group=4, device="cpu", **kw)
        m = build_model(cfg, seed=4)
        c = train_rl(m, probs, labels, VARIANTS[variant], cfg, seed=0)
        assert len(c["reward"]) == 2 and all(k >= 0 for k in c["kept_groups"])
    with pytest.raises(ValueError, match="beta"):
        TinyLMConfig(beta=-0.1)


def test_pgbc_with_dynamic_sampling_checks_ground_truth_only_on_informative_groups(one_thread, monkeypatch):
    """PGBC's rho0 needs the ground truth of kept completions only: with dynamic sampling, groups whose
    rewards are all equal are dropped, so their completions are never checked (the check is the hot path)."""
    import dataclasses

    from neurips26.rlvr_noise import tinylm
    from neurips26.rlvr_noise.objectives import informative_groups

    checked, expected, total = [0], [0], [0]
    real_check, real_score = tinylm.is_correct, tinylm.score

    def counting_check(problem, completion):
        checked[0] += 1
        return real_check(problem, completion)

    def recording_score(problems, labels, texts, group):
        R = real_score(problems, labels, texts, group)
        expected[0] += group * int(informative_groups(R).sum())
        total[0] += len(texts)
        return R

    monkeypatch.setattr(tinylm, "is_correct", counting_check)
    monkeypatch.setattr(tinylm, "score", recording_score)
    probs = make_problems(8, 1, seed=4).train
    cfg = TinyLMConfig(steps=3, batch=4, group=4, device="cpu")
    variant = dataclasses.replace(VARIANTS["pgbc"], dynamic_sampling=True)
    curves = train_rl(build_model(cfg, seed=4), probs, [p.gold_label for p in probs], variant, cfg, seed=0)
    assert checked[0] == expected[0] and 0 < checked[0] < total[0], (checked, total)   # some groups dropped
    assert len(curves["reward"]) == 3
