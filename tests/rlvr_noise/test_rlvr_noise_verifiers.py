"""Acceptance check 9 and the verifier contract: extraction, fast path == math-verify, cache, signatures."""

from fractions import Fraction

import pytest

from neurips26.rlvr_noise.mathgen import N_FORMATS, make_problems, render_completion, render_value
from neurips26.rlvr_noise.verifiers import (REWARD_STATS, _fast, answers_equal, compute_score, format_reward,
                                            last_boxed, math_reward, math_reward_uncached, raw_math_verify,
                                            trl_math_reward)

pytest.importorskip("math_verify")


def test_last_boxed_is_brace_matched_and_last():
    assert last_boxed(r"\boxed{1} then \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert last_boxed(r"a \boxed{\{-2, 2\}} b") == r"\{-2, 2\}"
    assert last_boxed(r"\boxed{3} and \boxed{unclosed") == "3"
    assert last_boxed("no box") is None and last_boxed(None) is None


@pytest.mark.parametrize("gold,pred,equal", [
    (r"\frac{1}{2}", "0.5", 1), ("0.5", r"\frac{2}{4}", 1), ("2", "2.0", 1), ("x=2", "2", 1),
    ("12", "13", 0), (r"\{-2,2\}", "2", 0), ("0.333333", r"\frac{1}{3}", 1), (r"50\%", "0.5", 1),
    (r"50\%", "50", 1), (r"12\%", "12", 1),
])
def test_check9_equivalences_match_raw_math_verify(gold, pred, equal):
    from math_verify import parse

    assert parse(f"${gold}$") and parse(f"${pred}$"), "both sides must parse non-empty"
    assert raw_math_verify(gold, pred) == equal
    assert math_reward(gold, rf"so \boxed{{{pred}}}") == equal


def test_fast_path_never_disagrees_and_defers_near_ties():
    assert _fast("0.333333", r"\frac{1}{3}") is None          # within 1e-5: math-verify decides
    assert _fast("3/4", "0.75") == 1 and _fast("3", "4") == 0
    assert _fast(r"25\%", "0.25") == 1 and _fast(r"25\%", "25") == 1 and _fast(r"25\%", "3") == 0


def _renderable_pairs(n_problems: int, seed: int):
    data = make_problems(n_problems, 1, seed=seed)
    pairs = set()
    for p in data.train:
        labels = {render_value(v, f) for v in p.skill_answers[:3] for f in range(4)}
        pairs |= {(lab, render_completion(v, f)) for lab in labels for v in p.skill_answers
                  for f in range(N_FORMATS)}
    return sorted(pairs)


def test_wrapper_equals_raw_math_verify_on_renderable_pairs():
    for lab, c in _renderable_pairs(3, seed=3):
        assert math_reward(lab, c) == math_reward_uncached(lab, c), (lab, c)


@pytest.mark.slow
def test_wrapper_equals_raw_math_verify_on_many_renderable_pairs():
    for lab, c in _renderable_pairs(40, seed=4):
        assert math_reward(lab, c) == math_reward_uncached(lab, c), (lab, c)


def test_cache_and_unreadable_label():
    answers_equal.cache_clear()
    math_reward("7", r"\boxed{7}")
    math_reward("7", r"\boxed{7}")
    assert answers_equal.cache_info().hits >= 1
    before = REWARD_STATS["unreadable"]
    assert math_reward("", r"\boxed{7}") == 0 and math_reward(None, r"\boxed{7}") == 0
    assert REWARD_STATS["unreadable"] == before + 2
    assert math_reward(r"\frac{", r"\boxed{7}") == 0            # never raises


def test_format_reward():
    assert format_reward(r"\boxed{x}") == 1
    assert format_reward(r"\boxed{}") == 0 and format_reward("7") == 0


def test_trl_and_verl_signatures():
    comps = [r"\boxed{1/2}", [{"role": "assistant", "content": r"\boxed{3}"}]]
    assert trl_math_reward(comps, ground_truth=["0.5", "4"]) == [1.0, 0.0]
    with pytest.raises(ValueError, match="ground_truth"):
        trl_math_reward(comps, ground_truth=["1"])
    assert compute_score("math", r"The answer is \boxed{\frac{3}{4}}", "0.75", None) == 1.0
    assert render_value(Fraction(-3, 4), 1) == r"-\frac{3}{4}"
