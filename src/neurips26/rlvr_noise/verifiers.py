"""Verifiable rewards: the math reward (last boxed answer, exact fast path, math-verify, cache) and format.

Rules (spec §1):
  1. extract: the content of the LAST ``\\boxed{...}``, brace-matched (nested braces kept).
  2. fast path: both sides plain numerals / ``a/b`` / ``\\frac{a}{b}`` -> ``Fraction``; equal -> 1; both
     Fractions with |a - b| > 1e-5 -> 0; anything else falls through (math-verify rounds to ~6 decimals,
     so ``0.333333`` == ``\\frac{1}{3}`` must not be decided here). ``a\\%`` on one side equals the other
     side iff it is ``a/100``, or ``a`` written without a decimal point (math-verify's percent
     leniency, replicated: ``50`` == ``50\\%`` but ``50.0`` != ``50\\%``).
  3. fallback: ``math_verify.verify(parse("$gold$"), parse("$pred$"))`` — gold first, both wrapped in
     ``$...$`` (bare ``\\{-2,2\\}`` parses to nothing). Called only in a process's main thread
     (math-verify uses signal timeouts); elsewhere ``parsing_timeout=None``.
  4. cache: an LRU keyed by (label, extracted answer).
An unreadable label or answer scores 0 and is counted in ``REWARD_STATS``; it never raises.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from fractions import Fraction
from functools import lru_cache
from typing import Any, Sequence

REWARD_STATS: Counter = Counter()   # "unreadable", "fast", "math_verify", "no_box"
_NUM = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)$")
_FRAC_SLASH = re.compile(r"^([+-]?\d+)\s*/\s*([+-]?\d+)$")
_FRAC_TEX = re.compile(r"^([+-]?)\\d?frac\{([+-]?\d+)\}\{([+-]?\d+)\}$")
_PCT = re.compile(r"^(.*?)\s*\\%$")
TOL = 1e-5


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` with braces matched; None if there is none or it is unclosed."""
    if not isinstance(text, str):
        return None
    start = text.rfind("\\boxed{")
    while start != -1:
        i, depth = start + len("\\boxed{"), 1
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            return text[start + len("\\boxed{"):i - 1].strip()
        start = text.rfind("\\boxed{", 0, start)
    return None


def as_fraction(s: str) -> Fraction | None:
    """``s`` as an exact Fraction when it is a plain numeral, ``a/b`` or ``\\frac{a}{b}``; else None."""
    s = s.strip()
    try:
        if _NUM.match(s):
            return Fraction(s)
        m = _FRAC_SLASH.match(s)
        if m and int(m.group(2)) != 0:
            return Fraction(int(m.group(1)), int(m.group(2)))
        m = _FRAC_TEX.match(s)
        if m and int(m.group(3)) != 0:
            v = Fraction(int(m.group(2)), int(m.group(3)))
            return -v if m.group(1) == "-" else v
    except (ValueError, ZeroDivisionError):
        return None
    return None


def _fast(label: str, answer: str) -> int | None:
    """1 / 0 when decidable exactly without math-verify (never disagreeing with it), else None."""
    a, b = as_fraction(label), as_fraction(answer)
    if a is not None and b is not None:
        if a == b:
            return 1
        return 0 if abs(a - b) > TOL else None
    for pct_side, other in ((label, answer), (answer, label)):
        m = _PCT.match(pct_side.strip())
        if m:
            p, o = as_fraction(m.group(1)), as_fraction(other)
            if p is not None and o is not None and _PCT.match(other.strip()) is None:
                if o == p / 100:
                    return 1
                if o == p:      # math-verify: "50" == "50\%" but "50.0" != "50\%" (checked on 0.9.0)
                    return 0 if "." in other else 1
                return 0 if abs(o - p) > TOL and abs(o - p / 100) > TOL else None
    return None


def raw_math_verify(label: str, answer: str) -> int:
    """math-verify alone, gold first, both wrapped as ``$...$``; 0 on any parse failure."""
    from math_verify import parse, verify

    main = threading.current_thread() is threading.main_thread()
    kw: dict[str, Any] = {} if main else {"parsing_timeout": None}
    vkw: dict[str, Any] = {} if main else {"timeout_seconds": None}
    try:
        gold = parse(f"${label}$", **kw)
        pred = parse(f"${answer}$", **kw)
        if not gold or not pred:
            REWARD_STATS["unreadable"] += 1
            return 0
        return int(bool(verify(gold, pred, **vkw)))
    except Exception:  # math-verify raises on odd LaTeX; an unreadable side scores 0, counted
        REWARD_STATS["unreadable"] += 1
        return 0


@lru_cache(maxsize=1 << 18)
def answers_equal(label: str, answer: str) -> int:
    """The cached equivalence of a label and an extracted answer (fast path, then math-verify)."""
    r = _fast(label, answer)
    if r is not None:
        REWARD_STATS["fast"] += 1
        return r
    REWARD_STATS["math_verify"] += 1
    return raw_math_verify(label, answer)


def math_reward(label: str, completion: str) -> int:
    """1 iff the last boxed answer of ``completion`` equals ``label`` (math-verify semantics), else 0."""
    if not isinstance(label, str) or not label.strip():
        REWARD_STATS["unreadable"] += 1
        return 0
    ans = last_boxed(completion)
    if not ans:
        REWARD_STATS["no_box"] += 1
        return 0
    return answers_equal(label.strip(), ans)


def math_reward_uncached(label: str, completion: str) -> int:
    """Reference: raw math-verify on the extracted answer (no fast path, no cache)."""
    ans = last_boxed(completion)
    if not ans or not isinstance(label, str) or not label.strip():
        return 0
    return raw_math_verify(label.strip(), ans)


def format_reward(completion: str) -> int:
    """1 iff the completion holds a non-empty ``\\boxed{...}`` (Spurious Rewards' format reward)."""
    return int(bool(last_boxed(completion)))


# ---- framework signatures -------------------------------------------------------------------------
def trl_math_reward(completions: Sequence[Any], ground_truth: Sequence[str] | None = None,
                    **kw: Any) -> list[float]:
    """TRL ``reward_funcs`` signature: ``f(completions, **dataset_columns) -> list[float]``.

    ``completions`` are strings or conversational lists (the last message's ``content`` is used);
    the labels come from the dataset column ``ground_truth`` (or ``solution``/``answer``).
    """
    labels = ground_truth if ground_truth is not None else kw.get("solution", kw.get("answer"))
    if labels is None:
        raise ValueError("trl_math_reward needs a ground_truth (or solution/answer) column")
    if len(labels) != len(completions):
        raise ValueError(f"ground_truth has {len(labels)} labels for {len(completions)} completions")
    out = []
    for c, y in zip(completions, labels):
        text = c[-1]["content"] if isinstance(c, list) else c
        out.append(float(math_reward(y, text)))
    return out


def compute_score(data_source: str, solution_str: str, ground_truth: str,
                  extra_info: dict | None = None) -> float:
    """verl's custom reward: ``compute_score(data_source, solution_str, ground_truth, extra_info)``."""
    return float(math_reward(ground_truth, solution_str))
