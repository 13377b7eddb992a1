import numpy as np
import pytest

from neurips26.rlvr_noise.sqlex import SQLEvaluator, is_benign, make_university_db
from neurips26.rlvr_noise.sqlrl import (ERROR_TYPES, SLOTS, SQLConfig, SQLPolicy, features, inject_errors,
                                        make_items, render, rq3)


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    d = tmp_path_factory.mktemp("sqlrl")
    return [SQLEvaluator(make_university_db(d / f"{k}.db", seed=k)) for k in range(3)]


def test_generator_templates_and_literals():
    train, test = make_items(600, 0), make_items(300, 0, test=True)
    assert {it.template for it in train} == set(range(12)) and {it.paraphrase for it in train} == {0, 1, 2}
    assert not {(it.template % 3, it.value) for it in train if it.template % 3 < 2} & \
        {(it.template % 3, it.value) for it in test if it.template % 3 < 2}     # different literals
    for it in train[:50]:
        assert f"{it.value:g}" in it.question                                     # the literal is copied


def test_gold_sql_runs_and_noise_rate(dbs):
    items = make_items(600, 1)
    noisy, kinds = inject_errors(items, 0.62, seed=1)
    share = np.mean([k is not None for k in kinds])
    assert abs(share - 0.62) < 0.05
    assert {k for k in kinds if k} == set(ERROR_TYPES)
    for it, s, k in list(zip(items, noisy, kinds))[:80]:
        clean = render({**it.slots, "tag": "no"}, it)
        dbs[0].gold_rows(clean)                                                   # runs, is one SELECT
        if k is None:
            assert render({**s, "tag": "no"}, it) == clean
        else:
            assert render({**s, "tag": "no"}, it) != clean
    with pytest.raises(ValueError, match="rate"):
        inject_errors(items, 1.0, 0)


def test_benign_tag_is_execution_equivalence(dbs):
    items = make_items(200, 2)
    noisy, kinds = inject_errors(items, 0.62, seed=2)
    tags = [is_benign(render({**s, "tag": "no"}, it), render({**it.slots, "tag": "no"}, it), dbs)
            for it, s, k in zip(items, noisy, kinds) if k]
    assert 0 < sum(tags) < len(tags)            # some injected errors are benign, most are not


def test_policy_gradient_matches_finite_difference():
    items = make_items(5, 3)
    X = features(items)
    pol = SQLPolicy(seed=0)
    rng = np.random.default_rng(0)
    ch = pol.sample(X, rng)
    w = rng.standard_normal(len(X))

    def obj(p):
        P = p.probs(X)
        return sum(float(np.mean(w * np.log(P[k][np.arange(len(X)), ch[k]]))) for k in SLOTS)

    new = pol.copy()
    new.step(X, ch, w, lr=1.0)                  # one ascent step = the gradient
    k, i, j = "op", 0, 1
    p2 = pol.copy()
    p2.W[k][i, j] += 1e-6
    fd = (obj(p2) - obj(pol)) / 1e-6
    assert abs((new.W[k][i, j] - pol.W[k][i, j]) - fd) < 1e-4


def test_rq3_small_run_corrected_beats_original():
    r = rq3(SQLConfig(n_train=200, n_test=100, n_sft=100, k_instances=1, steps=25), seed=0)
    assert r["grpo_corrected"]["ex"] > r["grpo_original"]["ex"]
    assert r["grpo_corrected"]["train_reward"] > r["grpo_original"]["train_reward"]
    with pytest.raises(ValueError, match="variant"):
        rq3(SQLConfig(n_train=10, n_test=10, n_sft=10, k_instances=1, steps=1), 0, variants=("ppo",))


def test_mlp_policy_gradient_matches_finite_difference():
    from neurips26.rlvr_noise.sqlrl import SQLMLPPolicy

    items = make_items(6, 4)
    X = features(items)
    pol = SQLMLPPolicy(seed=1, hidden=8)
    rng = np.random.default_rng(1)
    ch = pol.sample(X, rng)
    w = rng.standard_normal(len(X))

    def obj(p):
        P = p.probs(X)
        return sum(float(np.mean(w * np.log(P[k][np.arange(len(X)), ch[k]]))) for k in SLOTS)

    new = pol.copy()
    new.step(X, ch, w, lr=1.0)
    for name, get in (("W1", lambda p: p.W1), ("b1", lambda p: p.b1), ("agg", lambda p: p.W["agg"])):
        p2 = pol.copy()
        arr = get(p2)
        ij = (2, 3) if arr.ndim == 2 else (3,)
        arr[ij] += 1e-6
        fd = (obj(p2) - obj(pol)) / 1e-6
        assert abs((get(new)[ij] - get(pol)[ij]) - fd) < 1e-4, name


def test_two_turn_refinement_retries_exactly_the_failed_attempts(dbs):
    from neurips26.rlvr_noise.sqlrl import FEATURE_DIM, rollout

    items = make_items(40, 5)
    X = features(items)
    pol = SQLPolicy(seed=0, dim=FEATURE_DIM + 1)
    pol.W["tag"][:] = 0.0
    pol.W["tag"][-1] = [8.0, -8.0]     # the error flag switches the answer tags on
    pol.W["tag"][0] = [-4.0, 4.0]      # without it: tags missing
    chs, retry, sql = rollout(pol, X, items, dbs[0], 2, np.random.default_rng(0), greedy=True)
    assert retry.all() and all(q is not None for q in sql)      # turn 1 malformed everywhere, turn 2 fixed
    one, r1, sql1 = rollout(SQLPolicy(seed=0), X, items, dbs[0], 1, np.random.default_rng(0), greedy=True)
    assert not r1.any() and len(one) == 1


def test_rq3_mlp_two_turns_corrected_beats_original():
    r = rq3(SQLConfig(n_train=200, n_test=100, n_sft=100, k_instances=1, steps=25, policy="mlp", turns=2),
            seed=0)
    assert r["grpo_corrected"]["ex"] > r["grpo_original"]["ex"]
    assert 0.0 <= r["grpo_original"]["retry_share"] <= 1.0
    with pytest.raises(ValueError, match="turns"):
        SQLConfig(turns=3)
    with pytest.raises(ValueError, match="policy"):
        SQLConfig(policy="transformer")
