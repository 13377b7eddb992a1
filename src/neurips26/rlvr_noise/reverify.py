"""The four-stage re-verification of a "100% incorrect" label set (spec §4, laptop analogues).

  1. oracle:   the exact solution set S(q) from the generator (paper: GPT-5 Pro lists all correct
               answers). Faults: ``oracle_extra=p`` adds a spurious "correct" answer w.p. p (only shrinks
               the data); ``oracle_miss=p`` drops alternative roots w.p. p (leaves contamination behind).
  2. symbolic: label vs every s in the oracle's set with the math reward (math-verify semantics);
               equal -> exclude, reason ``multi_answer`` (s is not the annotation) or ``symbolic_equiv``.
  3. judge:    an independent normaliser (strip ``x=``, ``\\text{}``, ``\\%`` (/100), ``\\$``, commas;
               sympy ``nsimplify``, |a - b| <= 1e-9) plus any rules added by the audit -> ``judge_equiv``.
  Stages 1 and 3 are replaceable by callables (in production: API calls to an LLM oracle / judge):
  ``oracle(problem, label) -> iterable of correct answers`` (Fractions or answer strings) and
  ``judge(label, answer: str) -> bool`` (format-only equivalence). With a custom oracle the reason of a
  stage-2 match is ``multi_answer`` when the oracle listed several answers, else ``symbolic_equiv``. A
  custom judge alone replaces stage 3 only: the built-in oracle, faults included, still lists the answers.
  For ``backend="process"`` / Ray they must pickle (module-level functions, not lambdas).
  4. audit:    100 seeded survivors checked against the generator's ground truth; e errors and the
               one-sided Clopper-Pearson 95% bound beta.ppf(0.95, e + 1, n - e); if e > 0 add a rule and
               rerun stage 3 (at most ``max_rounds`` = 2 rounds).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.rlvr_noise.mathgen import label_is_correct, render_value
from neurips26.rlvr_noise.verifiers import answers_equal

REASONS = ("multi_answer", "symbolic_equiv", "judge_equiv", "oracle_extra")


def clopper_pearson_upper(errors: int, n: int, confidence: float = 0.95) -> float:
    """Exact one-sided upper bound on an error rate after ``errors`` in ``n`` (e = 0, n = 100: 0.0295)."""
    from scipy.stats import beta

    n = check_scalar(n, "n", int, min=1)
    errors = check_scalar(errors, "errors", int, min=0, max=n)
    confidence = check_scalar(confidence, "confidence", float, min=0, max=1, inclusive="neither")
    return 1.0 if errors == n else float(beta.ppf(confidence, errors + 1, n - errors))


_STRIP = (re.compile(r"^\s*[a-z]\s*=\s*"), re.compile(r"\\text\{([^}]*)\}"), re.compile(r"\\\$|\$"),
          re.compile(r"(?<=\d),(?=\d{3})"))


def normalise(s: str) -> Fraction | None:
    """The judge's own reading of an answer as a number (independent of math-verify)."""
    import sympy

    t = _STRIP[0].sub("", s.strip())
    t = _STRIP[1].sub(r"\1", t)
    t = _STRIP[2].sub("", t)
    t = _STRIP[3].sub("", t)
    scale = Fraction(1)
    if t.endswith("\\%"):
        t, scale = t[:-2], Fraction(1, 100)
    t = re.sub(r"\\d?frac\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)", t)
    try:
        v = sympy.nsimplify(t, rational=True)
        if not v.is_Rational:
            return None
        return Fraction(int(v.p), int(v.q)) * scale
    except (sympy.SympifyError, TypeError, ValueError, SyntaxError, AttributeError):
        return None


def judge_equal(label: str, s: Fraction) -> bool:
    """Stage 3's comparison of a label with one oracle answer."""
    v = normalise(label)
    return v is not None and abs(float(v - s)) <= 1e-9


def rule_reflect_roots(problem, label: str) -> bool:
    """An audit-added rule: on |x - a| = b and x^2 = k^2, the reflected root of the annotation is correct."""
    v = normalise(label)
    if v is None:
        return False
    if problem.family == "square":
        return v == -problem.gold
    if problem.family == "absval":
        a = int(problem.text.split("- ")[1].split("|")[0])
        return v == 2 * a - problem.gold
    return False


AUDIT_RULES: tuple[Callable, ...] = (rule_reflect_roots,)


@dataclass
class ReverifyReport:
    n_input: int
    truly_noisy: dict                       # index -> label
    excluded: dict                          # index -> reason
    audit_rounds: list = field(default_factory=list)   # [{"round", "n", "errors", "upper95", "rules"}]

    @property
    def excluded_fraction(self) -> float:
        return len(self.excluded) / max(self.n_input, 1)

    def reason_shares(self) -> dict:
        return {r: sum(1 for v in self.excluded.values() if v == r) / max(self.n_input, 1) for r in REASONS}

    def to_dict(self) -> dict:
        return {"n_input": self.n_input, "n_truly_noisy": len(self.truly_noisy),
                "excluded_fraction": self.excluded_fraction, "reason_shares": self.reason_shares(),
                "audit_rounds": self.audit_rounds}


def _as_answer(s) -> str:
    return render_value(s, 0) if isinstance(s, Fraction) else str(s)


def screen_item(task: tuple) -> str | None:
    """Stages 1-3 for one item: the exclusion reason, or None (a survivor).

    task = (problem, index, label, oracle_extra, oracle_miss, seed[, oracle, judge]); the oracle's fault
    draws come from a generator seeded by (seed, index), so the result does not depend on how items are
    split over workers. ``oracle`` / ``judge``: the callables of the module docstring (None: built in).
    """
    p, i, lab, oracle_extra, oracle_miss, seed, *fns = task
    oracle_fn, judge_fn = (fns + [None, None])[:2]
    if oracle_fn is None:
        answers = _builtin_oracle(p, i, lab, oracle_extra, oracle_miss, seed)
    else:
        answers = sorted(oracle_fn(p, lab), key=str)
        if not answers:
            raise ValueError(f"the oracle listed no correct answer for item {i}")
    for s in answers:                                                     # stage 2: symbolic
        if answers_equal(_as_answer(s), lab):
            if oracle_fn is not None:
                return "multi_answer" if len(answers) > 1 else "symbolic_equiv"
            return "symbolic_equiv" if s == p.gold else ("multi_answer" if s in p.truth else "oracle_extra")
    if judge_fn is not None:                                              # stage 3: judge
        return "judge_equiv" if any(bool(judge_fn(lab, _as_answer(s))) for s in answers) else None
    values = (s if isinstance(s, Fraction) else normalise(str(s)) for s in answers)
    return "judge_equiv" if any(v is not None and judge_equal(lab, v) for v in values) else None


def _builtin_oracle(p, i: int, label: str, oracle_extra: float, oracle_miss: float, seed: int) -> list[Fraction]:
    """Stage 1's built-in oracle: the generator's solution set S(q), each alternative root dropped w.p.
    ``oracle_miss`` and a spurious answer added w.p. ``oracle_extra``, drawn from a generator seeded by
    (seed, item index)."""
    rng = np.random.default_rng([seed, i])
    oracle = {s for s in sorted(p.truth) if s == p.gold or rng.random() >= oracle_miss}
    if rng.random() < oracle_extra:
        oracle.add(_spurious(p, label, rng))
    return sorted(oracle)


def screen_chunk(tasks: list) -> list:
    """``screen_item`` over a chunk (one task of the process pool / one Ray Data batch)."""
    return [screen_item(t) for t in tasks]


def _ray_data_screen(chunks: list) -> list:
    """Stages 1-3 as a Ray Data ``map_batches`` over the chunks (requires ray; started locally if needed)."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ds = ray.data.from_items([{"k": k, "chunk": c} for k, c in enumerate(chunks)])

    def fn(batch):
        return {"k": list(batch["k"]), "out": [screen_chunk(list(c)) for c in batch["chunk"]]}

    rows = sorted(ds.map_batches(fn, batch_size=1, batch_format="numpy").take_all(), key=lambda r: r["k"])
    return [list(r["out"]) for r in rows]


def reverify(problems, labels: dict, oracle_extra: float = 0.0, oracle_miss: float = 0.0,
             audit_n: int = 100, max_rounds: int = 2, seed: int = 0,
             rules: tuple = AUDIT_RULES, backend: str = "serial", workers: int | None = None,
             chunk: int = 256, oracle: Callable | None = None, judge: Callable | None = None) -> ReverifyReport:
    """Run the four stages on ``labels`` ({problem index: label}) and return the report.

    backend: how stages 1-3 map over the items: ``harness.parallel.map_tasks``'s ``serial`` / ``process`` /
    ``ray`` / ``auto``, or ``ray_data`` (Ray Data ``map_batches``); every backend gives the same report.
    math-verify runs in each worker's main thread (process pool workers, Ray workers). In production the
    oracle and judge stages are API calls: pass them as ``oracle(problem, label)`` and ``judge(label,
    answer)`` (see the module docstring; the fault options belong to the built-in oracle and must be 0
    with a custom one).
    """
    from neurips26.harness.parallel import map_tasks

    oracle_extra = check_scalar(oracle_extra, "oracle_extra", float, min=0, max=1)
    oracle_miss = check_scalar(oracle_miss, "oracle_miss", float, min=0, max=1)
    audit_n = check_scalar(audit_n, "audit_n", int, min=1)
    max_rounds = check_scalar(max_rounds, "max_rounds", int, min=0)
    chunk = check_scalar(chunk, "chunk", int, min=1)
    check_choice(backend, "backend", ("serial", "process", "ray", "auto", "ray_data"))
    if not labels:
        raise ValueError("labels must not be empty")
    bad = [i for i in labels if not isinstance(i, (int, np.integer)) or not 0 <= i < len(problems)]
    if bad:
        raise ValueError(f"labels has keys that are not indices of the {len(problems)} problems: {bad[:5]}")
    for name, fn in (("oracle", oracle), ("judge", judge)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
    if oracle is not None and (oracle_extra or oracle_miss):
        raise ValueError("oracle_extra / oracle_miss are faults of the built-in oracle; use 0 with oracle=")
    keys = sorted(labels)
    fns = () if oracle is None and judge is None else (oracle, judge)
    tasks = [(problems[i], i, labels[i], oracle_extra, oracle_miss, seed, *fns) for i in keys]
    chunks = [tasks[k:k + chunk] for k in range(0, len(tasks), chunk)]
    if backend == "ray_data":
        parts = _ray_data_screen(chunks)
    else:
        parts = map_tasks(screen_chunk, chunks, backend=backend, workers=workers, progress=False)
    reasons = [r for part in parts for r in part]
    excluded = {i: r for i, r in zip(keys, reasons) if r}
    survivors = {i: labels[i] for i, r in zip(keys, reasons) if not r}
    rng = np.random.default_rng(seed)
    report = ReverifyReport(len(labels), survivors, excluded)
    active: list = []
    for rnd in range(max_rounds + 1):
        keys = sorted(report.truly_noisy)
        pick = rng.choice(len(keys), size=min(audit_n, len(keys)), replace=False) if keys else []
        errors = sum(label_is_correct(problems[keys[j]], report.truly_noisy[keys[j]]) for j in pick)
        n = len(pick)
        report.audit_rounds.append({"round": rnd, "n": n, "errors": int(errors),
                                    "upper95": clopper_pearson_upper(int(errors), n) if n else 1.0,
                                    "rules": [r.__name__ for r in active]})
        if errors == 0 or rnd == max_rounds or len(active) == len(rules):
            break
        active.append(rules[len(active)])
        for i in keys:
            if any(rule(problems[i], report.truly_noisy[i]) for rule in active):
                report.excluded[i] = "judge_equiv"
                del report.truly_noisy[i]
    return report


def _spurious(p, label: str, rng) -> Fraction:
    """An oracle error that calls the label (when numeric) correct, else a random value."""
    v = normalise(label)
    return v if v is not None else Fraction(int(rng.integers(1000)))
