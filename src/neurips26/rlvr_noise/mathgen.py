"""Seeded math problems with exact solution sets, the multi-format renderer, and the noisy-label construction.

Families (spec §6): ``prec`` a + b*c, ``frac`` a/b + c/d (reduced Fraction), ``pct`` p% of q, and the
multi-answer equations ``absval`` |x - a| = b and ``square`` x^2 = k^2 (the annotation lists one root).
Each problem carries the answer of the correct procedure (skill 0) and of five typed bugs (skills 1-5:
left-to-right precedence, off-by-one up, dropped sign / other root, off-by-one down, wrong operand).
On equations the "dropped sign" skill gives the OTHER root, which is correct: the source of the
multi-answer contamination.

Formats: 0 canonical (``7``, ``3/4``), 1 ``\\frac{a}{b}``, 2 decimal (when terminating), 3 percent
(``75\\%``), 4 malformed (no box).

Construction (spec §3, mirrors Spurious Rewards): n = 16 base-policy answers per problem, judged by a
deliberately weak checker (stripped string match against the single canonical annotation); the label is
the most frequent answer judged wrong (ties -> lowest index); problems with no wrong answer are dropped.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from neurips26.harness.validation import check_scalar
from neurips26.rlvr_noise.verifiers import as_fraction

FAMILIES = ("prec", "frac", "pct", "absval", "square")
MULTI = ("absval", "square")
N_SKILLS = 6
N_FORMATS = 5
MALFORMED = 4
SKILL_NAMES = (
    "correct",
    "left_to_right",
    "off_by_one_up",
    "dropped_sign",
    "off_by_one_down",
    "wrong_operand",
)
FORMAT_NAMES = ("canonical", "tex_frac", "decimal", "percent", "malformed")


@dataclass(frozen=True)
class Problem:
    pid: int
    family: str
    text: str
    truth: frozenset  # the exact solution set S(q) (Fractions)
    gold: Fraction  # the single annotated answer
    skill_answers: tuple  # the value each of the 6 skills produces

    @property
    def multi(self) -> bool:
        return len(self.truth) > 1

    @property
    def gold_label(self) -> str:
        return render_value(self.gold, 0)


def _terminating(v: Fraction) -> bool:
    d = v.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def _decimal(v: Fraction) -> str:
    s = f"{float(v):.6f}".rstrip("0")
    return s + "0" if s.endswith(".") else s


def render_value(v: Fraction, fmt: int) -> str:
    """The answer string of value ``v`` in format ``fmt`` (the text inside the box; malformed: bare text)."""
    if fmt == 0 or fmt == MALFORMED:
        return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"
    if fmt == 1:
        sign = "-" if v < 0 else ""
        return f"{sign}\\frac{{{abs(v.numerator)}}}{{{v.denominator}}}"
    if fmt == 2:
        return _decimal(v) if _terminating(v) else render_value(v, 1)
    p = v * 100
    return (
        (_decimal(p) if p.denominator != 1 else str(p.numerator)) + "\\%"
        if _terminating(p)
        else render_value(v, 1)
    )


def render_completion(v: Fraction, fmt: int) -> str:
    """A completion carrying value ``v`` in format ``fmt`` (malformed: no ``\\boxed``)."""
    body = render_value(v, fmt)
    return f"The answer is {body}." if fmt == MALFORMED else f"So the answer is \\boxed{{{body}}}."


def _avoid(v: Fraction, truth: frozenset) -> Fraction:
    while v in truth:
        v += 3
    return v


def _make(pid: int, family: str, rng: np.random.Generator) -> tuple[Problem, tuple]:
    r = lambda lo, hi: int(rng.integers(lo, hi + 1))  # noqa: E731
    if family == "prec":
        a, b, c = r(2, 30), r(2, 12), r(2, 12)
        key, text, v = (a, b, c), f"{a} + {b} * {c}", Fraction(a + b * c)
        bugs = {1: Fraction((a + b) * c), 5: Fraction(a + b + c)}
    elif family == "frac":
        a, b, c, d = r(1, 9), r(2, 9), r(1, 9), r(2, 9)
        key, text, v = (a, b, c, d), f"{a}/{b} + {c}/{d}", Fraction(a, b) + Fraction(c, d)
        bugs = {1: Fraction(a + c, b + d), 5: Fraction(a, b) * Fraction(c, d)}
    elif family == "pct":
        p, q = int(rng.choice([5, 10, 12, 15, 20, 25, 40, 50, 75])), r(2, 40) * 4
        key, text, v = (p, q), f"{p}% of {q}", Fraction(p * q, 100)
        bugs = {1: Fraction(p * q), 5: Fraction(q, p)}
    elif family == "absval":
        a, b = r(-9, 9), r(1, 9)
        key, text, v = (a, b), f"|x - {a}| = {b}", Fraction(a + b)
        bugs = {1: Fraction(b - a), 5: Fraction(a * b)}
    else:
        k = r(2, 15)
        key, text, v = (k,), f"x^2 = {k * k}", Fraction(k)
        bugs = {1: Fraction(k * k), 5: Fraction(2 * k)}
    truth = frozenset(
        {v, Fraction(2 * key[0] - v)} if family == "absval" else ({v, -v} if family == "square" else {v})
    )
    other = min(truth - {v}) if len(truth) > 1 else None
    ans = [
        v,
        _avoid(bugs[1], truth),
        _avoid(v + 1, truth),
        other if other is not None else _avoid(-v if v != 0 else Fraction(2), truth),
        _avoid(v - 1, truth),
        _avoid(bugs[5], truth),
    ]
    return Problem(pid, family, text, truth, v, tuple(ans)), (family, key)


@dataclass
class MathData:
    train: list
    test: list
    multi_share: float = field(default=0.0)


def make_problems(
    n_train: int = 2000, n_test: int = 600, multi_share: float = 0.33, seed: int = 0
) -> MathData:
    """Train and test problems (disjoint operand tuples), ``multi_share`` of them multi-answer equations."""
    n_train = check_scalar(n_train, "n_train", int, min=1)
    n_test = check_scalar(n_test, "n_test", int, min=1)
    multi_share = check_scalar(multi_share, "multi_share", float, min=0, max=1)
    rng = np.random.default_rng(seed)
    seen: set = set()
    out: list = []
    pid = 0
    while len(out) < n_train + n_test:
        fam = MULTI[int(rng.integers(2))] if rng.random() < multi_share else FAMILIES[int(rng.integers(3))]
        p, key = _make(pid, fam, rng)
        if key in seen and len(seen) < 50_000:
            continue
        seen.add(key)
        out.append(p)
        pid += 1
    return MathData(out[:n_train], out[n_train:], multi_share)


def weak_check(gold_label: str, answer: str | None) -> bool:
    """The construction checker: whitespace-stripped string match (deliberately weak)."""
    return answer is not None and "".join(answer.split()) == "".join(gold_label.split())


def construct_noisy_labels(
    problems, skill_probs: np.ndarray, format_probs: np.ndarray, n_samples: int = 16, seed: int = 0
) -> dict:
    """The "100% incorrect" set: {problem index: label string}, from n base-policy samples per problem.

    skill_probs: [P, 6] base skill distribution per problem; format_probs: [5] base format distribution.
    """
    n_samples = check_scalar(n_samples, "n_samples", int, min=1)
    if len(problems) == 0:
        raise ValueError("problems must not be empty")
    sp = np.asarray(skill_probs, dtype=float)
    if sp.shape != (len(problems), N_SKILLS):
        raise ValueError(f"skill_probs must have shape ({len(problems)}, {N_SKILLS}), got {sp.shape}")
    pf = np.asarray(format_probs, dtype=float)
    if pf.shape != (N_FORMATS,) or (pf < 0).any() or pf.sum() <= 0:
        raise ValueError(f"format_probs must be {N_FORMATS} non-negative weights, got {pf.tolist()}")
    rng = np.random.default_rng(seed)
    labels = {}
    cdf = np.cumsum(sp, axis=1)
    ks = (rng.random((len(problems), n_samples))[:, :, None] > cdf[:, None, :]).sum(axis=2).clip(0, 5)
    fs = rng.choice(
        N_FORMATS, size=(len(problems), n_samples), p=np.asarray(format_probs) / np.sum(format_probs)
    )
    for i, p in enumerate(problems):
        wrong = Counter()
        first = {}
        for j in range(n_samples):
            if fs[i, j] == MALFORMED:
                continue
            s = render_value(p.skill_answers[ks[i, j]], int(fs[i, j]))
            if not weak_check(p.gold_label, s):
                wrong[s] += 1
                first.setdefault(s, j)
        if wrong:
            best = max(wrong.values())
            labels[i] = min((s for s, c in wrong.items() if c == best), key=first.__getitem__)
    return labels


def label_is_correct(problem: Problem, label: str) -> bool:
    """Ground truth: does ``label`` denote a member of S(q)? (exact, via the renderer's inverse)."""
    s = label.strip()
    pct = s.endswith("\\%")
    v = as_fraction(s[:-2] if pct else s)
    if v is None and s.startswith("-\\frac"):
        v = as_fraction(s[1:])
        v = -v if v is not None else None
    if v is None:
        return False
    return (v / 100 if pct else v) in problem.truth
