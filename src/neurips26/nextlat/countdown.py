"""Countdown-4 (spec full scale; the official generator's semantics, re-written): reach a target from 4 numbers.

Generator (official ``data/countdown``): targets 10..max_target are shuffled with ``random.seed(seed)``;
the first 10 % are held out (``val_target``, the generalisation split), the rest are train targets.
Each sample draws 4 numbers uniformly from 1..max_target-1 until a depth-first search finds a
solution; the search tries pairs (i, j) in ``itertools.combinations`` order and per pair the
operations in the official order: a+b, a*b (both only below ``max_intermediate``), then the larger
minus the smaller and the exact quotient larger/smaller (smaller != 0). Text::

    n1,n2,n3,n4,target|a op b=c,c op d=e,e op f=target

Tokens (official ``Tokenizer``): one token per number 0..max_intermediate-1, then ``| * / + - = ,`` and
EOS; the commas of the prompt are dropped, ``|`` becomes ``pause`` pause tokens (8 official), the
solution keeps its commas and ends with EOS. Rows are fixed length: 5 + pause + 17 + 1.

Checker: a generated solution is correct when every equation is arithmetically true, uses only
numbers still available and the last result is the target. ASSUMPTION (stricter than the official
checker, which keeps used numbers available): each number is consumed when used (multiset semantics),
so our accuracy is at most the official one on the same generations.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

import numpy as np
import torch

from neurips26.harness.validation import check_scalar
from neurips26.nextlat.speculative import greedy_rows

SYMBOLS = ("|", "*", "/", "+", "-", "=", ",")
N_START = 4
N_EQUATIONS = N_START - 1
SOLUTION_TOKENS = 5 * N_EQUATIONS + (N_EQUATIONS - 1)  # a op b = c, comma-separated


def combine(a: int, b: int, max_intermediate: int) -> list[tuple[int, str]]:
    """The official operation order for one pair: a+b, a*b (below max_intermediate), |a-b|, exact quotient."""
    out = []
    if a + b < max_intermediate:
        out.append((a + b, f"{a}+{b}={a + b}"))
    if a * b < max_intermediate:
        out.append((a * b, f"{a}*{b}={a * b}"))
    hi, lo = (b, a) if a <= b else (a, b)
    out.append((hi - lo, f"{hi}-{lo}={hi - lo}"))
    if lo != 0 and hi % lo == 0:
        out.append((hi // lo, f"{hi}/{lo}={hi // lo}"))
    return out


def solve(target: int, nums: list[int], max_intermediate: int = 10_000) -> list[str] | None:
    """Depth-first search for equations combining all ``nums`` into ``target`` (first found, official order)."""
    if len(nums) == 1:
        return [] if nums[0] == target else None
    for i, j in itertools.combinations(range(len(nums)), 2):
        rest = [nums[k] for k in range(len(nums)) if k not in (i, j)]
        for value, eq in combine(nums[i], nums[j], max_intermediate):
            sol = solve(target, rest + [value], max_intermediate)
            if sol is not None:
                return [eq] + sol
    return None


def target_split(max_target: int = 100, seed: int = 0) -> tuple[list[int], list[int]]:
    """(train targets, held-out targets): 10..max_target shuffled with ``random.seed(seed)``, first 10 % held out."""
    max_target = check_scalar(max_target, "max_target", int, min=20)
    random.seed(seed)
    t = list(range(10, max_target + 1))
    random.shuffle(t)
    return t[len(t) // 10:], t[: len(t) // 10]


def countdown_problems(count: int, targets: list[int], max_target: int = 100, max_intermediate: int = 10_000,
                       seed: int = 0) -> list[tuple[list[int], int, list[str]]]:
    """``count`` solvable problems (numbers, target, solution equations) with targets drawn from ``targets``."""
    count = check_scalar(count, "count", int, min=1)
    max_intermediate = check_scalar(max_intermediate, "max_intermediate", int, min=max_target + 1)
    if not targets or min(targets) < 10 or max(targets) > max_target:
        raise ValueError(f"targets must be a non-empty list within [10, max_target={max_target}]")
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        target = rng.choice(targets)
        while True:
            nums = [rng.randint(1, max_target - 1) for _ in range(N_START)]
            sol = solve(target, nums, max_intermediate)
            if sol is not None:
                break
        out.append((nums, target, sol))
    return out


def problem_text(nums, target: int, solution) -> str:
    """The official text ``n1,n2,n3,n4,target|eq1,eq2,eq3``."""
    return ",".join(str(n) for n in nums) + f",{target}|" + ",".join(solution)


@dataclass(frozen=True)
class CountdownTokens:
    """Token rows [n, 5 + pause + 17 + 1]; the loss and the exact-match metric use the part from ``context_length``."""

    ids: np.ndarray
    max_intermediate: int
    pause: int

    @property
    def context_length(self) -> int:
        return N_START + 1 + self.pause

    def sym(self, s: str) -> int:
        return self.max_intermediate + SYMBOLS.index(s)

    @property
    def eos(self) -> int:
        return self.max_intermediate + len(SYMBOLS)

    @property
    def vocab(self) -> int:
        return self.max_intermediate + len(SYMBOLS) + 1

    def decode(self, tokens) -> str:
        return "".join(str(t) if t < self.max_intermediate else (SYMBOLS + ("",))[t - self.max_intermediate]
                       for t in (int(x) for x in tokens))


def countdown_tokens(problems, max_intermediate: int = 10_000, pause: int = 8) -> CountdownTokens:
    """Tokenise problems as the official ``Tokenizer.encode`` does (prompt commas dropped, ``|`` -> pause tokens)."""
    pause = check_scalar(pause, "pause", int, min=0)
    tok = CountdownTokens(np.zeros((0, 0), dtype=np.int64), max_intermediate, pause)
    rows = []
    for nums, target, sol in problems:
        row = list(nums) + [target] + [tok.sym("|")] * pause
        for k, eq in enumerate(sol):
            if k:
                row.append(tok.sym(","))
            left, right = eq.split("=")
            op = next(c for c in "+-*/" if c in left)
            a, b = left.split(op)
            row += [int(a), tok.sym(op), int(b), tok.sym("="), int(right)]
        rows.append(row + [tok.eos])
    return CountdownTokens(np.asarray(rows, dtype=np.int64), max_intermediate, pause)


def solution_correct(tok: CountdownTokens, prompt, generated) -> bool:
    """True when ``generated`` (the 17 solution tokens) reaches the prompt's target with valid equations.

    Each equation is ``a op b = c`` with a, b still available (consumed on use), c = a op b exactly; the
    last c must equal the target."""
    prompt = [int(x) for x in prompt][: N_START + 1]
    avail, target = list(prompt[:N_START]), prompt[N_START]
    g = [int(x) for x in generated]
    if len(g) != SOLUTION_TOKENS:
        return False
    ops = {tok.sym(s): s for s in "+-*/"}
    last = None
    for k in range(N_EQUATIONS):
        a, op, b, eq, c = g[6 * k: 6 * k + 5]
        if k and g[6 * k - 1] != tok.sym(","):
            return False
        if op not in ops or eq != tok.sym("=") or max(a, b, c) >= tok.max_intermediate:
            return False
        for x in (a, b):
            if x not in avail:
                return False
            avail.remove(x)
        s = ops[op]
        value = a + b if s == "+" else a * b if s == "*" else a - b if s == "-" else (a // b if b and a % b == 0 else None)
        if value is None or value != c or value < 0:
            return False
        avail.append(c)
        last = c
    return last == target and len(avail) == 1


@torch.no_grad()
def countdown_accuracy(model, tok: CountdownTokens, batch: int = 256) -> float:
    """Fraction of rows whose greedy continuation of the prompt ``ids[:, :context_length]`` (17 tokens,
    batched full forwards through ``model.next_token_logits``) is a correct solution (``solution_correct``)."""
    batch = check_scalar(batch, "batch", int, min=1)
    if len(tok.ids) == 0:
        raise ValueError("tok has no rows")
    c, ok = tok.context_length, 0
    was_training = model.training
    model.eval()
    for i in range(0, len(tok.ids), batch):
        prompts = tok.ids[i: i + batch, :c]
        gen = greedy_rows(model, torch.from_numpy(np.ascontiguousarray(prompts)), SOLUTION_TOKENS)
        ok += sum(solution_correct(tok, p, g) for p, g in zip(prompts.tolist(), gen.tolist()))
    model.train(was_training)
    return ok / len(tok.ids)


__all__ = ["countdown_accuracy", "combine", "solve", "target_split", "countdown_problems", "problem_text", "CountdownTokens",
           "countdown_tokens", "solution_correct", "SOLUTION_TOKENS"]
