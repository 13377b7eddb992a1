"""RQ3: Text2SQL RL on the seeded university schema, original (noisy) vs corrected gold.

Generator: 12 templates (4 aggregates x 3 filters) x 3 paraphrases; questions carry their literals.
The policy is the spec's slot-factored ``sqlpolicy``, log-linear in question bag-of-words features (quick) or
a one-hidden-layer MLP (full), optionally with 2-turn refinement (after missing tags, an execution error or an
empty result, re-sample with an error-flag feature):
slots [answer tags, aggregate, filter column, operator, gender conjunct, gender literal, join key],
the numeric literal copied from the question. Noise is injected into 62% of the train gold SQL with the
spec's six error types and weights; injected errors that are execution-equivalent on the original DB
and K re-populated instances are tagged benign. ASSUMPTION: the slot set is the one the error types act
on (so a wrong gold rewards exactly one wrong slot value); PGFC uses rho1 = the injected rate.
"""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.rlvr_noise.objectives import group_advantages, pgfc_advantages
from neurips26.rlvr_noise.sqlex import SQLEvaluator, is_benign, make_university_db

AGGS = ("COUNT(*)", "COUNT(DISTINCT s.dept_id)", "AVG(s.gpa)", "MAX(s.age)")
FILTERS = ("age", "gpa", "building")
SLOTS = {
    "tag": ("yes", "no"),
    "agg": AGGS,
    "col": ("age", "gpa"),
    "op": (">", ">="),
    "conj": ("keep", "drop"),
    "glit": ("short", "long"),
    "join": ("s.dept_id", "s.id"),
}
ERROR_TYPES = {"boundary": 0.2, "column": 0.2, "conjunct": 0.15, "distinct": 0.15, "literal": 0.15,
               "join": 0.15}
_AGG_WORDS = (("how many", "count the", "number of"), ("how many departments have", "count departments of",
              "number of distinct departments among"), ("average gpa of", "mean gpa of", "avg gpa for"),
              ("oldest age of", "maximum age of", "max age among"))
_G_WORDS = {"F": "female", "M": "male"}
_G_LONG = {"F": "Female", "M": "Male"}


@dataclass(frozen=True)
class SQLItem:
    template: int
    paraphrase: int
    gender: str
    value: float
    question: str
    slots: dict = field(hash=False, compare=False)  # the correct slot values


def render(slots: dict, item: SQLItem) -> str:
    """The completion of a slot assignment (with ``<answer>`` tags unless tag == "no")."""
    filt = FILTERS[item.template % 3]
    where = []
    if filt == "building":
        where.append(f"d.building = 'B{int(item.value)}'")
    else:
        col = slots["col"]
        where.append(f"s.{col} {slots['op']} {item.value:g}")
    if slots["conj"] == "keep":
        g = item.gender if slots["glit"] == "short" else _G_LONG[item.gender]
        where.append(f"s.gender = '{g}'")
    frm = "students s" + (f" JOIN departments d ON {slots['join']} = d.id" if filt == "building" else "")
    sql = f"SELECT {slots['agg']} FROM {frm} WHERE {' AND '.join(where)}"
    return f"<answer>{sql}</answer>" if slots["tag"] == "yes" else sql


def make_items(n: int, seed: int, test: bool = False) -> list[SQLItem]:
    """Seeded questions; test items use literals disjoint from train (odd vs even tenths / ages)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        t, p = int(rng.integers(12)), int(rng.integers(3))
        agg, filt = t // 3, FILTERS[t % 3]
        g = "F" if rng.random() < 0.5 else "M"
        if filt == "age":
            v = float(2 * rng.integers(9, 14) + (1 if test else 0))
            phrase = f"older than {v:g}"
        elif filt == "gpa":
            v = round(float(rng.integers(10, 19)) / 5 + (0.1 if test else 0.0), 1)
            phrase = f"with gpa above {v:g}"
        else:
            v = float(rng.integers(1, 6))
            phrase = f"in building B{int(v)}"
        q = f"{_AGG_WORDS[agg][p]} {_G_WORDS[g]} students {phrase}"
        slots = {"tag": "yes", "agg": AGGS[agg], "col": filt if filt != "building" else "age", "op": ">",
                 "conj": "keep", "glit": "short", "join": "s.dept_id"}
        out.append(SQLItem(t, p, g, v, q, slots))
    return out


def inject_errors(items, rate: float, seed: int) -> tuple[list[dict], list[str | None]]:
    """Noisy gold slots for ``rate`` of the items (spec weights; inapplicable types re-drawn)."""
    rate = check_scalar(rate, "rate", float, min=0, max=1, inclusive="left")
    rng = np.random.default_rng(seed)
    names, w = list(ERROR_TYPES), np.array(list(ERROR_TYPES.values()))
    gold, kinds = [], []
    for it in items:
        s = dict(it.slots)
        kind = None
        if rng.random() < rate:
            filt = FILTERS[it.template % 3]
            ok = [k for k in names if not ((k in ("boundary", "column") and filt == "building")
                                          or (k == "join" and filt != "building")
                                          or (k == "distinct" and it.slots["agg"] not in AGGS[:2]))]
            p = np.array([w[names.index(k)] for k in ok])
            kind = ok[int(rng.choice(len(ok), p=p / p.sum()))]
            if kind == "boundary":
                s["op"] = ">="
            elif kind == "column":
                s["col"] = "gpa" if s["col"] == "age" else "age"
            elif kind == "conjunct":
                s["conj"] = "drop"
            elif kind == "distinct":
                s["agg"] = AGGS[1] if s["agg"] == AGGS[0] else AGGS[0]
            elif kind == "literal":
                s["glit"] = "long"
            else:
                s["join"] = "s.id"
        gold.append(s)
        kinds.append(kind)
    return gold, kinds


def _tokens(question: str) -> list[str]:
    return [("<num>" if w.replace(".", "").isdigit() else "<bld>" if w[:1] == "b" and w[1:].isdigit() else w)
            for w in question.lower().split()]


_VOCAB = {w: i for i, w in enumerate(sorted(
    {w for ws in _AGG_WORDS for p in ws for w in _tokens(p)} | set(_G_WORDS.values())
    | {"students", "older", "than", "with", "gpa", "above", "in", "building", "<num>", "<bld>"}))}
FEATURE_DIM = 1 + len(_VOCAB)


def features(items) -> np.ndarray:
    """Bag-of-words (+ bias) of the questions over the generator's fixed vocabulary; literals map to one
    token per kind (the policy copies them from the question)."""
    X = np.zeros((len(items), FEATURE_DIM))
    X[:, 0] = 1.0
    for i, it in enumerate(items):
        for w in _tokens(it.question):
            X[i, 1 + _VOCAB[w]] = 1.0
    return X


class SQLPolicy:
    """Log-linear slot-factored policy: one softmax per slot over its options, logits = X @ W_slot."""

    def __init__(self, seed: int = 0, dim: int = FEATURE_DIM):
        rng = np.random.default_rng(seed)
        self.W = {k: 0.01 * rng.standard_normal((dim, len(v))) for k, v in SLOTS.items()}

    def probs(self, X) -> dict:
        out = {}
        for k, W in self.W.items():
            z = X @ W
            z -= z.max(1, keepdims=True)
            e = np.exp(z)
            out[k] = e / e.sum(1, keepdims=True)
        return out

    def sample(self, X, rng, greedy: bool = False) -> dict:
        P = self.probs(X)
        if greedy:
            return {k: p.argmax(1) for k, p in P.items()}
        return {k: (rng.random((len(X), 1)) > np.cumsum(p, 1)).sum(1).clip(0, p.shape[1] - 1)
                for k, p in P.items()}

    def step(self, X, choice: dict, weight, lr: float) -> None:
        """W += lr * mean_i weight_i * grad log pi(choice_i | x_i)."""
        P = self.probs(X)
        for k, p in P.items():
            g = -p
            g[np.arange(len(X)), choice[k]] += 1.0
            self.W[k] += lr * X.T @ (weight[:, None] * g) / len(X)

    def copy(self) -> "SQLPolicy":
        c = SQLPolicy.__new__(SQLPolicy)
        c.W = {k: v.copy() for k, v in self.W.items()}
        return c


class SQLMLPPolicy(SQLPolicy):
    """The full-scale ``sqlpolicy``: one shared tanh hidden layer, then one softmax head per slot.

    h = tanh(X W1 + b1);  logits_slot = [h, 1] V_slot;  ``step`` back-propagates
    mean_i weight_i * grad log pi(choice_i | x_i) through the heads and the hidden layer (numpy).
    """

    def __init__(self, seed: int = 0, dim: int = FEATURE_DIM, hidden: int = 32):
        rng = np.random.default_rng(seed)
        self.W1 = rng.standard_normal((dim, hidden)) / np.sqrt(dim)
        self.b1 = np.zeros(hidden)
        self.W = {k: 0.01 * rng.standard_normal((hidden + 1, len(v))) for k, v in SLOTS.items()}

    def _hidden(self, X) -> np.ndarray:
        h = np.tanh(X @ self.W1 + self.b1)
        return np.hstack([h, np.ones((len(X), 1))])

    def probs(self, X) -> dict:
        return super().probs(self._hidden(X))

    def step(self, X, choice: dict, weight, lr: float) -> None:
        """Ascent on mean_i weight_i * sum_slots log pi(choice_i | x_i) (heads and hidden layer)."""
        H = self._hidden(X)
        P = super().probs(H)
        dh = np.zeros((len(X), self.W1.shape[1]))
        grads = {}
        for k, p in P.items():
            g = -p
            g[np.arange(len(X)), choice[k]] += 1.0
            g *= weight[:, None] / len(X)
            grads[k] = H.T @ g
            dh += g @ self.W[k][:-1].T
        dpre = dh * (1.0 - H[:, :-1] ** 2)
        for k, gk in grads.items():
            self.W[k] += lr * gk
        self.W1 += lr * X.T @ dpre
        self.b1 += lr * dpre.sum(0)

    def copy(self) -> "SQLMLPPolicy":
        c = SQLMLPPolicy.__new__(SQLMLPPolicy)
        c.W1, c.b1 = self.W1.copy(), self.b1.copy()
        c.W = {k: v.copy() for k, v in self.W.items()}
        return c


def _slots_of(choice: dict, i: int) -> dict:
    return {k: SLOTS[k][int(choice[k][i])] for k in SLOTS}


def _idx(slots_list) -> dict:
    return {k: np.array([SLOTS[k].index(s[k]) for s in slots_list]) for k in SLOTS}


@dataclass
class SQLConfig:
    n_train: int = 600
    n_test: int = 300
    n_sft: int = 100
    noise: float = 0.62
    k_instances: int = 5
    steps: int = 40
    batch: int = 32
    group: int = 8
    lr: float = 2.0
    sft_steps: int = 1  # base EX ~0.4-0.6 on the test set (spec: ~0.4-0.5)
    sft_lr: float = 0.3
    policy: str = "loglinear"  # "loglinear" (quick) | "mlp" (full: one tanh hidden layer per slot head)
    hidden: int = 32           # MLP width
    turns: int = 1             # 2 = multi-turn refinement: re-sample after an execution error / empty result

    def __post_init__(self) -> None:
        check_choice(self.policy, "policy", ("loglinear", "mlp"))
        check_scalar(self.hidden, "hidden", int, min=1)
        check_scalar(self.turns, "turns", int, min=1, max=2)
        for name in ("n_train", "n_test", "n_sft", "k_instances", "steps", "batch"):
            check_scalar(getattr(self, name), name, int, min=0 if name in ("steps", "k_instances") else 1)
        check_scalar(self.group, "group", int, min=2)
        check_scalar(self.noise, "noise", float, min=0, max=1, inclusive="left")


def _needs_retry(ev: SQLEvaluator, sql: str | None) -> bool:
    """The refinement trigger: missing answer tags, an execution error, or an empty / NULL result."""
    if sql is None:
        return True
    try:
        rows = ev.execute(sql)
    except sqlite3.Error:
        return True
    return not rows or rows == frozenset({(None,)})


def _with_flag(X, flag) -> np.ndarray:
    return np.hstack([X, np.asarray(flag, dtype=float)[:, None]])


def rollout(pol, X, items, ev: SQLEvaluator, turns: int, rng, greedy: bool = False):
    """One attempt, and with ``turns = 2`` a second one (error-flag feature on) where the first needs a retry.

    Returns (choices per turn, rows that took turn 2, the final SQL per row or None if the tags are missing).
    """
    flag = np.zeros(len(X))
    XX = _with_flag(X, flag) if turns == 2 else X
    ch1 = pol.sample(XX, rng, greedy)
    sql = [None if ch1["tag"][j] == 1 else render({**_slots_of(ch1, j), "tag": "no"}, it)
           for j, it in enumerate(items)]
    if turns == 1:
        return [ch1], np.zeros(len(X), bool), sql
    retry = np.array([_needs_retry(ev, q) for q in sql])
    ch2 = pol.sample(_with_flag(X, np.ones(len(X))), rng, greedy)
    for j in np.flatnonzero(retry):
        sql[j] = None if ch2["tag"][j] == 1 else render({**_slots_of(ch2, j), "tag": "no"}, items[j])
    return [ch1, ch2], retry, sql


def rq3(cfg: SQLConfig, seed: int, variants=("grpo", "pgfc")) -> dict:
    """Base (SFT) then RL with original vs corrected gold for each variant; test EX (greedy, corrected).

    ``cfg.policy``: log-linear (quick) or MLP (full); ``cfg.turns = 2``: multi-turn refinement (the reward is
    on the final answer; the policy-gradient weight applies to both turns' choices of a trajectory)."""
    for v in variants:
        check_choice(v, "variant", ("grpo", "pgfc"))
    tmp = Path(tempfile.mkdtemp(prefix="rlvr-sql-"))
    dbs = [make_university_db(tmp / f"i{k}.db", seed=seed * 100 + k) for k in range(cfg.k_instances + 1)]
    evs = [SQLEvaluator(p) for p in dbs]
    ev = evs[0]
    train = make_items(cfg.n_train, seed)
    test = make_items(cfg.n_test, seed + 50_000, test=True)
    sft = make_items(cfg.n_sft, seed + 90_000)
    noisy, kinds = inject_errors(train, cfg.noise, seed + 1)
    gold_sql = {"corrected": [render({**it.slots, "tag": "no"}, it) for it in train],
                "original": [render({**s, "tag": "no"}, it) for s, it in zip(noisy, train)]}
    injected = [i for i, k in enumerate(kinds) if k]
    benign = [i for i in injected if is_benign(gold_sql["original"][i], gold_sql["corrected"][i], evs)]
    rng = np.random.default_rng(seed + 2)
    dim = FEATURE_DIM + (cfg.turns == 2)
    base = SQLMLPPolicy(seed, dim, cfg.hidden) if cfg.policy == "mlp" else SQLPolicy(seed, dim)
    Xs = features(sft)
    sft_idx = _idx([it.slots for it in sft])
    for _ in range(cfg.sft_steps):
        for flag in ((0.0,) if cfg.turns == 1 else (0.0, 1.0)):
            XX = Xs if cfg.turns == 1 else _with_flag(Xs, np.full(len(Xs), flag))
            base.step(XX, sft_idx, np.ones(len(sft)), cfg.sft_lr)
    Xtr, Xte = features(train), features(test)
    test_gold = [render({**it.slots, "tag": "no"}, it) for it in test]

    def ex_test(pol) -> float:
        _, _, sql = rollout(pol, Xte, test, ev, cfg.turns, rng, greedy=True)
        return float(np.mean([0 if q is None else ev.ex(q, test_gold[i]) for i, q in enumerate(sql)]))

    out = {"base": {"ex": ex_test(base)}, "injected_share": len(injected) / len(train),
           "benign_share_of_injected": len(benign) / max(1, len(injected))}
    order_rng = np.random.default_rng(seed + 3)
    batches = [order_rng.choice(len(train), cfg.batch, replace=False) for _ in range(cfg.steps)]
    uniforms = np.random.default_rng(seed + 4)
    for v in variants:
        for arm in ("original", "corrected"):
            pol = base.copy()
            srng = np.random.default_rng(uniforms.integers(2**31))
            rew_curve, retry_curve = [], []
            for b in batches:
                idx = np.repeat(b, cfg.group)
                X = Xtr[idx]
                chs, retry, sql = rollout(pol, X, [train[i] for i in idx], ev, cfg.turns, srng)
                R = np.array([-1.0 if q is None else float(ev.ex(q, gold_sql[arm][i]))
                              for q, i in zip(sql, idx)]).reshape(cfg.batch, cfg.group)
                if v == "grpo":
                    A = group_advantages(R)
                else:
                    A = pgfc_advantages(R.clip(0, 1), rho1=cfg.noise) - (R < 0)
                A = A.reshape(-1)
                if cfg.turns == 1:
                    pol.step(X, chs[0], A, cfg.lr)
                else:   # both turns of each trajectory (turn 2 only where it was taken)
                    pol.step(_with_flag(X, np.zeros(len(X))), chs[0], A, cfg.lr)
                    pol.step(_with_flag(X, np.ones(len(X))), chs[1], A * retry, cfg.lr)
                rew_curve.append(float(R.mean()))
                retry_curve.append(float(retry.mean()))
            out[f"{v}_{arm}"] = {"ex": ex_test(pol), "train_reward": float(np.mean(rew_curve[-5:])),
                                 "retry_share": float(np.mean(retry_curve[-5:]))}
    for e in evs:
        e.close()
    return out
