"""Countdown-4 generator, tokeniser and checker (official semantics; stricter checker)."""

import numpy as np
import pytest
import torch

from neurips26.nextlat.countdown import (SOLUTION_TOKENS, combine, countdown_accuracy, countdown_problems, countdown_tokens,
                                         problem_text, solution_correct, solve, target_split)


def _eval(eq: str) -> tuple[int, int]:
    left, right = eq.split("=")
    return int(eval(left.replace("/", "//"))), int(right)  # noqa: S307 - test-only arithmetic on our own strings


def test_combine_follows_the_official_operation_order():
    assert [e for _, e in combine(6, 3, 10_000)] == ["6+3=9", "6*3=18", "6-3=3", "6/3=2"]
    assert [e for _, e in combine(3, 7, 10_000)] == ["3+7=10", "3*7=21", "7-3=4"]       # 7 % 3 != 0
    assert [e for _, e in combine(90, 99, 100)] == ["99-90=9"]                          # sums/products capped


def test_solutions_are_valid_and_reach_the_target():
    train, held = target_split(100, seed=0)
    assert sorted(train + held) == list(range(10, 101)) and len(held) == 9
    assert target_split(100, seed=0) == (train, held)                                   # deterministic
    probs = countdown_problems(40, train, seed=3)
    assert probs == countdown_problems(40, train, seed=3)
    for nums, target, sol in probs:
        assert len(nums) == 4 and all(1 <= n <= 99 for n in nums) and target in train
        assert len(sol) == 3
        avail = list(nums)
        for eq in sol:                                       # each equation true, on available numbers
            got, right = _eval(eq)
            assert got == right
            a, b = (int(x) for x in eq.split("=")[0].replace("*", "+").replace("/", "+").replace("-", "+").split("+"))
            avail.remove(a)
            avail.remove(b)
            avail.append(right)
        assert avail == [target]
        assert solve(target, nums) == sol                    # first DFS solution, reproducible


def test_tokens_checker_and_negative_cases():
    probs = countdown_problems(30, list(range(10, 101)), seed=1)
    tok = countdown_tokens(probs, pause=8)
    c = tok.context_length
    assert c == 13 and tok.ids.shape == (30, c + SOLUTION_TOKENS + 1) and (tok.ids[:, -1] == tok.eos).all()
    assert (tok.ids[:, 5:c] == tok.sym("|")).all()
    assert tok.decode(tok.ids[0][:5]) + "|" + tok.decode(tok.ids[0][c:-1]) == \
        problem_text(*probs[0]).replace(",", "", 4)
    assert all(solution_correct(tok, r[:c], r[c:-1]) for r in tok.ids)
    row = tok.ids[0].copy()
    wrong_result = row.copy()
    wrong_result[c + 4] += 1                                 # first equation's result off by one
    assert not solution_correct(tok, row[:c], wrong_result[c:-1])
    def enc(eqs):
        return countdown_tokens([([2, 5, 3, 1], 20, eqs)]).ids[0]

    good = enc(["5*2=10", "3-1=2", "10*2=20"])
    assert solution_correct(tok, good[:c], good[c:-1])
    reuse = enc(["5*2=10", "10+10=20", "20*1=20"])           # true equations, but 10 used twice
    assert not solution_correct(tok, reuse[:c], reuse[c:-1])
    wrong_target = row.copy()
    wrong_target[4] = (row[4] % 90) + 10 if (row[4] % 90) + 10 != row[4] else 11
    assert not solution_correct(tok, wrong_target[:c], row[c:-1])
    assert not solution_correct(tok, row[:c], row[c:-2])     # too short
    with pytest.raises(ValueError, match="targets"):
        countdown_problems(2, [5], max_target=100)
    with pytest.raises(ValueError, match="max_intermediate"):
        countdown_problems(2, [20], max_target=100, max_intermediate=50)
    assert np.unique(tok.ids).max() < tok.vocab


class _Oracle(torch.nn.Module):
    """next_token_logits from a lookup of the true rows (shift > 0: a wrong token instead)."""

    def __init__(self, ids, vocab, shift=0):
        super().__init__()
        self.rows, self.vocab, self.shift = {tuple(r[:13]): r for r in ids.tolist()}, vocab, shift

    def next_token_logits(self, seq):
        out = torch.zeros(seq.shape[0], seq.shape[1], self.vocab)
        for b, row in enumerate(seq.tolist()):
            true = self.rows[tuple(row[:13])]
            out[b, -1, (true[len(row)] + self.shift) % self.vocab] = 1.0
        return out


def test_accuracy_of_an_oracle_and_of_a_wrong_model():
    tok = countdown_tokens(countdown_problems(12, list(range(10, 101)), seed=2))
    assert countdown_accuracy(_Oracle(tok.ids, tok.vocab), tok, batch=5) == 1.0
    assert countdown_accuracy(_Oracle(tok.ids, tok.vocab, shift=1), tok) == 0.0
