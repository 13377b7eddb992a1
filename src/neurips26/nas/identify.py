"""The identification loop: sample, update counts, check the stopping rule, answer pi_hat.

``identify(env_or_mdp, algorithm, deltas, ...)`` runs ONE trajectory and records the stopping time
of every delta in ``deltas`` (the sampling rules of NaS, uniform, generative and PSRL do not depend
on delta, so tau_delta for all deltas come from the same trajectory -- each has exactly the law of a
separate run at that delta, with common random numbers across deltas).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.nas.agents import (
    BPIUCRLSampler,
    GenerativeTracker,
    NaSConfig,
    NaSSampler,
    NextDue,
    PSRLSampler,
    UniformSampler,
)
from neurips26.nas.bound import BOUNDS
from neurips26.nas.connectivity import path_length_m
from neurips26.nas.env import TabularEnv
from neurips26.nas.kernels import EXPLORATION_CODE, MAX_A_BITWISE, UNIFORM, run_steps
from neurips26.nas.mdp import MDP
from neurips26.nas.stopping import EmpiricalModel, check_delta, stopping_statistic, threshold

ALGORITHMS = ("nas", "nas_no_avg", "nas_fixed_eps", "nas_practical", "nas_ergodic", "uniform",
              "generative", "bpi_ucrl", "psrl")
LOOPS = ("auto", "compiled", "python")


@dataclass
class DeltaOutcome:
    """What happened at one confidence level."""

    delta: float
    stopped: bool
    tau: int | None
    pi_hat: list | None
    correct: bool | None
    U_hat: float | None = None           # U(M_tau, N/tau) at stopping
    beta: float | None = None
    beta_log_delta: float | None = None  # the log(1/delta) part of beta
    freq: list | None = None             # N(tau)/tau


@dataclass
class IdentificationResult:
    algorithm: str
    outcomes: list[DeltaOutcome]
    steps: int
    seconds: float
    n_oracle_solves: int = 0
    n_stop_checks: int = 0
    counts: np.ndarray | None = field(default=None, repr=False)
    N_sas: np.ndarray | None = field(default=None, repr=False)
    n_states_visits: np.ndarray | None = field(default=None, repr=False)
    allocator_failures: int = 0
    oracle_seconds: float = 0.0          # time in oracle updates (model + convex solves)
    check_seconds: float = 0.0           # time in stopping checks (policy iteration on M_t + U + beta)

    def outcome(self, delta: float) -> DeltaOutcome:
        for o in self.outcomes:
            if o.delta == delta:
                return o
        raise KeyError(delta)

    def to_dict(self) -> dict:
        return {"algorithm": self.algorithm, "steps": self.steps, "seconds": self.seconds,
                "n_oracle_solves": self.n_oracle_solves, "n_stop_checks": self.n_stop_checks,
                "outcomes": [o.__dict__ for o in self.outcomes]}


def _compiled_loop(env: TabularEnv, sampler, model: EmpiricalModel, s: int, K_s: int, t_max: int,
                   pending: list, stop_check) -> int:
    """The Python loop's trajectory, in chunks of ``kernels.run_steps``: a chunk ends at every
    stopping check (t a multiple of K_s) and before every step at which the oracle schedule may fire;
    the oracle update of a chunk's first step (as ``NaSSampler.act`` does it) runs here. Returns t."""
    nas = isinstance(sampler, NaSSampler)
    S, A = model.S, model.A
    if nas:
        code = EXPLORATION_CODE[sampler.cfg.exploration]
        averaging, exp_theory, epsilon = bool(sampler.cfg.averaging), sampler._exp_theory, sampler.cfg.epsilon
        schedule = sampler.schedule
        nxt = NextDue(sampler.cfg)
    else:
        code, averaging, exp_theory, epsilon = UNIFORM, False, 1.0, 0.0
        W = pi_o = np.zeros((S, A))
        t_last = 1
    cdf, r = env.cdf, env.mdp.r
    agent_rng, env_rng = sampler.rng, env.np_random
    t = 0
    while t < t_max and pending:
        t1 = t + 1
        end = min(-(-t1 // K_s) * K_s, t_max)
        if nas:
            if model.all_visited and schedule.due(t1):
                sampler._oracle_update(t1)
            end = min(end, nxt.after(t1) - 1)
            W, pi_o, t_last = sampler.W, sampler.pi_o, sampler.t_last
        n = end - t
        s, new = run_steps(code, s, t, n, agent_rng.random(n), env_rng.random(n), cdf, r, model.N_sas,
                           model.N_sa, model.N_s, model.r_hat, model.r_seen, W, pi_o, t_last, averaging,
                           exp_theory, epsilon)
        model.n_unvisited -= new
        model.t += n
        t = end
        if t % K_s == 0 and model.all_visited:
            stop_check(t)
    env.state = s
    return t


def _spaces(env) -> tuple[int, int]:
    try:
        return int(env.observation_space.n), int(env.action_space.n)
    except AttributeError:
        raise TypeError("env must expose observation_space.n and action_space.n (finite, integer "
                        "states and actions) or be an MDP") from None


def identify(env, algorithm: str = "nas", deltas=(0.1,), *, gamma: float | None = None, seed: int = 0,
             K_s: int = 10, t_max: int = 1_000_000, nas: NaSConfig | None = None, bound: str = "primary",
             rewards_known: bool = False, ucrl_delta: float | None = None,
             loop: str = "auto") -> IdentificationResult:
    """Run one best-policy-identification trajectory.

    env: an ``MDP`` (wrapped in ``TabularEnv``) or a gymnasium-style env with integer spaces; for a
      user env give ``gamma``. An MDP must have a unique pi* and be communicating (ValueError).
    algorithm: one of ALGORITHMS ('nas' = MDP-NaS with the ``nas`` config; 'nas_no_avg',
      'nas_fixed_eps', 'nas_practical', 'nas_ergodic' are its ablations; 'uniform', 'generative'
      (KLB-TS, needs ``env.sample``), 'bpi_ucrl', 'psrl' the baselines).
    deltas: confidence levels; the run continues until every one has stopped or t = t_max
      (censored: ``stopped=False``, never a silent answer).
    loop: 'auto' (the compiled loop of ``kernels.run_steps`` where it applies: NaS and its ablations
      and uniform exploration on a ``TabularEnv`` with A < 8; the Python loop otherwise), 'compiled'
      (raise if it does not apply) or 'python'. Both loops give the same trajectory bit for bit.
    """
    check_choice(algorithm, "algorithm", ALGORITHMS)
    check_choice(loop, "loop", LOOPS)
    if isinstance(deltas, (int, float)):
        deltas = (deltas,)
    deltas = sorted({check_delta(d) for d in deltas}, reverse=True)
    if not deltas:
        raise ValueError("deltas must hold at least one confidence level in (0, 1)")
    K_s = check_scalar(K_s, "K_s", int, min=1)
    t_max = check_scalar(t_max, "t_max", int, min=1)
    check_choice(bound, "bound", BOUNDS)
    mdp = None
    if isinstance(env, MDP):
        mdp = env
        env = TabularEnv(mdp)
    elif getattr(env, "mdp", None) is not None:
        mdp = env.mdp
    S, A = _spaces(env)
    if mdp is not None:
        sol = mdp.require_identifiable()
        gamma = mdp.gamma
        pi_star = sol.pi
        m = path_length_m(mdp.P)
    else:
        if gamma is None:
            raise ValueError("gamma must be given for a user environment (it has no .mdp)")
        gamma = check_scalar(gamma, "gamma", float, min=0.0, max=1.0, inclusive="neither")
        pi_star, m = None, None
    if S < 2 or A < 2:
        raise ValueError(f"env needs S >= 2 states and A >= 2 actions, got S={S}, A={A}")
    cfg = nas if nas is not None else NaSConfig()
    if not isinstance(cfg, NaSConfig):
        raise TypeError(f"nas must be a NaSConfig, got {type(cfg).__name__}")
    variants = {"nas_no_avg": {"averaging": False}, "nas_fixed_eps": {"exploration": "fixed"},
                "nas_practical": {"exploration": "practical"}, "nas_ergodic": {"exploration": "ergodic"}}
    if algorithm in variants:
        cfg = NaSConfig(**{**cfg.__dict__, **variants[algorithm]})

    rng = np.random.default_rng(seed)
    env_seed, agent_seed = (int(x) for x in rng.integers(0, 2**63 - 1, size=2))
    s, _ = env.reset(seed=env_seed)
    agent_rng = np.random.default_rng(agent_seed)
    model = EmpiricalModel(S, A, gamma, mdp.r if (rewards_known and mdp is not None) else None, bound)

    generative = algorithm == "generative"
    if generative and not hasattr(env, "sample"):
        raise TypeError("algorithm 'generative' needs generative access: env.sample(state, action)")
    sampler = None
    if algorithm.startswith("nas"):
        if m is None:  # user env: m from the support graph seen so far is unknown -> conservative S-1
            m = S - 1
        sampler = NaSSampler(model, agent_rng, cfg, m)
    elif algorithm == "uniform":
        sampler = UniformSampler(model, agent_rng)
    elif algorithm == "bpi_ucrl":
        sampler = BPIUCRLSampler(model, agent_rng, ucrl_delta if ucrl_delta is not None else min(deltas))
    elif algorithm == "psrl":
        sampler = PSRLSampler(model, agent_rng)
    else:
        sampler = GenerativeTracker(model, agent_rng)

    compiled = (isinstance(env, TabularEnv) and A < MAX_A_BITWISE
                and isinstance(sampler, (NaSSampler, UniformSampler)))
    if loop == "compiled" and not compiled:
        raise ValueError("loop='compiled' needs algorithm 'nas*' or 'uniform' on a TabularEnv (or an MDP) "
                         f"with fewer than {MAX_A_BITWISE} actions; use loop='auto' or 'python'")
    if loop == "python":
        compiled = False

    outcomes = {d: DeltaOutcome(d, False, None, None, None) for d in deltas}
    pending = list(deltas)                       # largest delta first: it stops first
    log_inv = {d: math.log(1 / d) for d in deltas}
    t0 = time.perf_counter()
    n_checks = 0
    check_s = 0.0

    def stop_check(t: int) -> None:
        """Z_t >= beta(N(t), delta) for the pending deltas (largest first)."""
        nonlocal n_checks, check_s
        tc = time.perf_counter()
        n_checks += 1
        terms = model.terms()
        if generative:
            sampler.refresh()
        Z, u = stopping_statistic(terms, model.N_sa, t)   # Z_t = t / U(M_t, N(t)/t)
        if Z > 0:
            base = threshold(model.N_sa, pending[0]) - log_inv[pending[0]]
            while pending and Z >= base + log_inv[pending[0]]:   # Z_t >= beta(N(t), delta)
                d = pending.pop(0)
                o = outcomes[d]
                o.stopped, o.tau = True, t
                o.pi_hat = terms.pi.tolist()
                o.correct = None if pi_star is None else bool(np.array_equal(terms.pi, pi_star))
                o.U_hat, o.beta, o.beta_log_delta = u, base + log_inv[d], log_inv[d]
                o.freq = (model.N_sa / t).tolist()
        check_s += time.perf_counter() - tc

    if compiled:
        t = _compiled_loop(env, sampler, model, s, K_s, t_max, pending, stop_check)
    else:
        t = 0
        update = model.update
        while t < t_max and pending:
            if generative:
                s, a = sampler.pair(t + 1)
                s2, r = env.sample(s, a)
            else:
                a = sampler.act(s, t + 1)
                s2, r, _, _, _ = env.step(a)
                s2 = int(s2)
            update(s, a, float(r), s2)
            t += 1
            s = s2
            if t % K_s == 0 and model.all_visited:
                stop_check(t)
    res = IdentificationResult(
        algorithm=algorithm, outcomes=[outcomes[d] for d in deltas], steps=t,
        seconds=time.perf_counter() - t0, n_stop_checks=n_checks,
        n_oracle_solves=getattr(sampler, "n_oracle", 0),
        counts=model.N_sa.copy(), N_sas=model.N_sas.copy(), n_states_visits=model.N_s.copy(),
        allocator_failures=getattr(getattr(sampler, "allocator", None), "n_insane", 0),
        oracle_seconds=getattr(sampler, "oracle_seconds", 0.0), check_seconds=check_s)
    return res
