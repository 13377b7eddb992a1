"""Instances by spec and one identification run as a task (what the experiment and the bench share).

An instance *spec* is a small tuple that names a generator and its arguments, so a task is picklable
and a config is plain data::

    ("random", S, A, seed[, support])     random_mdp(S, A, gamma, seed, support)
    ("riverswim", n)                      riverswim(n, gamma)
    ("double_chain", L)                   double_chain(L, gamma=gamma)
    ("lazy_ring", S, q)                   lazy_ring(S, q) with one reward table shared by the family
    ("near_tie", S, A, seed, gamma)       random_mdp(S, A, gamma, seed, state_rewards=True,
                                          min_gap=NEAR_TIE_MIN_GAP): the hard family, T* > 0

``run_task(task)`` is module-level so ``harness.parallel.map_tasks`` can ship it to a process pool or
Ray; it returns plain lists (one entry per delta) that the experiment aggregates.
"""

from __future__ import annotations

import numpy as np

from neurips26.harness.validation import check_choice
from neurips26.nas.identify import identify
from neurips26.nas.mdp import MDP, double_chain, lazy_ring, lazy_ring_rewards, random_mdp, riverswim

KINDS = ("random", "riverswim", "double_chain", "lazy_ring", "near_tie")
#: the two frozen quick instances: random(S=2, A=2, seed 14) and random(3, 2, seed 13), U_o in [10, 100]
QUICK_INSTANCES = (("random", 2, 2, 14), ("random", 3, 2, 13))
DEFAULT_RING_QS = (1.0, 0.5, 0.2, 0.1, 0.05)
#: hard instances (rewards depend on the state only: every gap comes from the transitions, so
#: Alt(M) is not empty and T(M, omega*_U) > 0): U_o = 350 and 417, U_o / T(M, omega*_U) ~ 48
HARD_INSTANCES = (("near_tie", 2, 2, 4, 0.5), ("near_tie", 2, 2, 4, 0.7))
NEAR_TIE_MIN_GAP = 0.02


def build_instance(spec: tuple, gamma: float = 0.5, ring_qs: tuple = DEFAULT_RING_QS) -> MDP:
    """The MDP a spec names (see the module docstring); ``ring_qs`` fixes the lazy-ring reward table."""
    if not isinstance(spec, (tuple, list)) or not spec:
        raise TypeError(f"spec must be a non-empty tuple such as ('random', 2, 2, 14), got {spec!r}")
    kind = check_choice(spec[0], "spec[0] (instance kind)", KINDS)
    if kind == "random":
        S, A, seed = spec[1:4]
        return random_mdp(S, A, gamma=gamma, seed=seed, support=spec[4] if len(spec) > 4 else None)
    if kind == "riverswim":
        return riverswim(spec[1], gamma)
    if kind == "double_chain":
        return double_chain(spec[1], gamma=gamma)
    if kind == "near_tie":          # its own gamma (the spec's), not the config's
        S, A, seed, g = spec[1:5]
        return random_mdp(S, A, gamma=g, seed=seed, state_rewards=True, min_gap=NEAR_TIE_MIN_GAP)
    _, S, q = spec
    # one reward table shared across q, with Delta_min >= 0.05 at every q of the family
    r = lazy_ring_rewards(S, tuple(sorted(set(ring_qs) | {q})), gamma)
    return lazy_ring(S, q, r, gamma)


def task_seed(base: int, *keys: int) -> int:
    """A run's seed from the run seed and its coordinates (experiment, instance, algorithm, repeat)."""
    return int(np.random.SeedSequence([base, *keys]).generate_state(1)[0])


def run_task(task: dict) -> dict:
    """One identification run: ``task`` holds spec, gamma, ring_qs, alg, deltas, seed, K_s, t_max
    (and any labels, e.g. exp/inst, which are passed through)."""
    mdp = build_instance(task["spec"], task["gamma"], task["ring_qs"])
    res = identify(mdp, task["alg"], task["deltas"], seed=task["seed"], K_s=task["K_s"],
                   t_max=task["t_max"])
    return {
        "exp": task.get("exp"), "inst": task.get("inst"), "alg": task["alg"], "seed": task["seed"],
        "steps": res.steps, "seconds": res.seconds, "n_oracle_solves": res.n_oracle_solves,
        "delta": [o.delta for o in res.outcomes],
        "tau": [o.tau for o in res.outcomes],
        "correct": [o.correct for o in res.outcomes],
        "U_hat": [o.U_hat for o in res.outcomes],
        "beta": [o.beta for o in res.outcomes],
        "freq": [o.freq for o in res.outcomes],
    }
