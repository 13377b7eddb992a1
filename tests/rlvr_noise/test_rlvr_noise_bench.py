"""The bench's workloads: our evaluators agree with the anchors they are timed against."""

import pytest

from neurips26.rlvr_noise.bench import bird_style_ex, rl_reward_pairs, sql_pairs
from neurips26.rlvr_noise.sqlex import SQLEvaluator, make_university_db
from neurips26.rlvr_noise.verifiers import math_reward, math_reward_uncached


def test_sql_ex_equals_bird_style_evaluator(tmp_path):
    pytest.importorskip("func_timeout")
    db = make_university_db(tmp_path / "u.db", seed=1)
    ev = SQLEvaluator(db)
    pairs = sql_pairs(60, seed=2)
    ours = [ev.ex(p, g) for p, g in pairs]
    assert ours == [bird_style_ex(db, p, g) for p, g in pairs]
    assert 0 < sum(ours) < len(ours)                 # both outcomes occur


def test_reward_pairs_agree_with_raw_math_verify():
    pytest.importorskip("math_verify")
    pairs = rl_reward_pairs(10, 60, seed=1)
    assert len(set(pairs)) < len(pairs)              # RL answers repeat
    assert [math_reward(a, b) for a, b in pairs] == [math_reward_uncached(a, b) for a, b in pairs]
