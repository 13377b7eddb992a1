"""The execution loop: query the policy at decision points only, detokenize, act at 20 Hz.

Decision points: the initial frame, then each arrival at the next waypoint (``replan="every_waypoint"``,
default) or the end of the whole plan (``replan="never"``). Unparsable text: hold one step and re-query;
3 consecutive failures end the episode as a failure. An instruction naming an object the scene does not
contain returns a typed ``Refusal`` before any step (the env is unchanged). Episode limit 300 steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.notvla.detokenizer import Detokenizer
from neurips26.notvla.errors import DepthUnavailableError, PlanParseError, Refusal
from neurips26.notvla.expert import run_expert
from neurips26.notvla.extraction import WaypointExtractor, encode_waypoints
from neurips26.notvla.language import parse_instruction
from neurips26.notvla.plan import format_plan, tokenize
from neurips26.notvla.sim import TabletopSim

REPLAN = ("every_waypoint", "never")
MAX_PARSE_FAILURES = 3


@dataclass
class Query:
    """What a policy sees at a decision point."""

    rgb: np.ndarray
    depth: np.ndarray
    closed: bool
    instruction: str
    steps_done: int
    ee: np.ndarray | None = None  # end-effector position (m), the proprioceptive state


@dataclass
class EpisodeResult:
    success: bool
    steps: int
    calls: int
    tokens: int
    parse_failures: int
    plans: list[str] = field(default_factory=list)
    positions: list = field(default_factory=list)


def check_instruction(env: TabletopSim, instruction: str) -> Refusal | None:
    """``Refusal`` when a referenced object is not in the scene (unknown words raise ``UnknownWordError``)."""
    p = parse_instruction(instruction)
    names = {(o.colour, o.kind) for o in env.objects.values()}
    for ref in (p.obj, p.target):
        if ref is not None and (ref.colour, ref.shape) not in names:
            return Refusal("the instruction names an object that is not in the scene",
                           f"{ref.colour} {ref.shape}")
    return None


class _Episode:
    """One episode of the execution loop as a stepper: ``query()`` -> the decision point's ``Query``,
    ``consume(text)`` -> parse, detokenize and act until the next decision point. ``run_episode`` drives
    one; ``run_episodes`` drives several in lockstep (one batched policy call per round)."""

    def __init__(self, env: TabletopSim, detok: Detokenizer, replan: str, instruction: str, max_steps: int,
                 max_calls: int | None):
        self.env, self.detok, self.replan = env, detok, replan
        self.instruction, self.max_steps, self.max_calls = instruction, max_steps, max_calls
        self.res = EpisodeResult(False, 0, 0, 0, 0)
        self.obs = env.observe()
        self.anchor_z, self.done_steps, self.failures = None, 0, 0
        self.res.positions.append(env.ee.copy())
        self.done = False
        self._check_limits()

    def _check_limits(self) -> None:
        if self.env.t >= self.max_steps or (self.max_calls is not None and self.res.calls >= self.max_calls):
            self._finish()

    def _finish(self) -> None:
        self.done = True
        self.res.steps = self.env.t
        self.res.success = self.res.success or self.env.success()

    def query(self) -> Query:
        return Query(self.obs["rgb"], self.obs["depth"].astype(np.float64), self.env.closed, self.instruction,
                     self.done_steps, self.env.ee.copy())

    def consume(self, text: str, q: Query) -> None:
        env, res = self.env, self.res
        res.calls += 1
        res.tokens += len(tokenize(text))
        res.plans.append(text)
        try:
            steps = self.detok.parse(text)
            motion = self.detok(steps, env.camera, env.ee, env.closed, q.depth, self.anchor_z)
        except (PlanParseError, DepthUnavailableError, ValueError):
            res.parse_failures += 1
            self.failures += 1
            if self.failures >= MAX_PARSE_FAILURES:
                return self._finish()
            term, trunc = env.advance(np.array([0.0, 0.0, 0.0, float(env.closed)]))
            self.obs = env.observe()
            if term or trunc:
                return self._finish()
            return self._check_limits()
        self.failures = 0
        if self.replan == "every_waypoint":
            end = motion.knot_steps[0]
            if steps[0].event is not None:
                end = motion.switch_steps[0] + 1
            n_exec, self.anchor_z = 1, motion.waypoints.anchor_z[0]
        else:
            end, n_exec, self.anchor_z = len(motion.actions), len(steps), motion.waypoints.anchor_z[-1]
        term = trunc = False
        for a in motion.actions[:max(end, 1)]:
            term, trunc = env.advance(a)
            res.positions.append(env.ee.copy())
            if term or trunc or env.t >= self.max_steps:
                break
        self.done_steps += n_exec
        self.obs = env.observe()
        if term:
            res.success = True
            return self._finish()
        if trunc:
            return self._finish()
        self._check_limits()


def run_episode(env: TabletopSim, policy: Callable[[Query], str], detokenizer: Detokenizer | None = None,
                replan: str = "every_waypoint", instruction: str | None = None,
                max_steps: int = 300, max_calls: int | None = None) -> EpisodeResult | Refusal:
    """Run one episode from the env's current (reset) state (at most ``max_calls`` policy queries)."""
    return run_episodes([env], policy, detokenizer, replan, [instruction], max_steps, max_calls)[0]


def run_episodes(envs: list[TabletopSim], policy, detokenizer: Detokenizer | None = None,
                 replan: str = "every_waypoint", instructions: list[str | None] | None = None,
                 max_steps: int = 300, max_calls: int | None = None) -> list[EpisodeResult | Refusal]:
    """Episodes in lockstep: each round, every live episode at a decision point is queried at once
    through ``policy.batch(queries) -> texts`` when the policy has it (one batched VLM forward), else
    ``policy(query)`` per episode. Each episode's result equals ``run_episode`` on it alone (the policy
    answers each query independently of the others)."""
    replan = check_choice(replan, "replan", REPLAN)
    max_steps = check_scalar(max_steps, "max_steps", int, min=1)
    detok = detokenizer or Detokenizer()
    instructions = list(instructions) if instructions is not None else [None] * len(envs)
    if len(instructions) != len(envs):
        raise ValueError(f"instructions: {len(instructions)} given for {len(envs)} envs")
    out: list = [None] * len(envs)
    eps: dict[int, _Episode] = {}
    for i, (env, ins) in enumerate(zip(envs, instructions)):
        ins = ins if ins is not None else env.instruction()
        refusal = check_instruction(env, ins)
        if refusal is not None:
            out[i] = refusal
        else:
            eps[i] = _Episode(env, detok, replan, ins, max_steps, max_calls)
    batch = getattr(policy, "batch", None)
    while True:
        live = [i for i, e in eps.items() if not e.done]
        if not live:
            break
        qs = [eps[i].query() for i in live]
        texts = batch(qs) if batch is not None else [policy(q) for q in qs]
        for i, q, t in zip(live, qs, texts):
            eps[i].consume(t, q)
    for i, e in eps.items():
        out[i] = e.res
    return out


class OraclePolicy:
    """Interface upper bound: plans extracted from the scripted expert's demo of this very episode.

    ``reset(env)`` rolls the expert out on a copy of the state, extracts and encodes its waypoints; each
    call writes the remaining steps from the current view (anchors re-projected with the current camera).
    """

    def __init__(self, eta: float = 0.01, seed: int = 0):
        self.extractor = WaypointExtractor(eta)
        self.seed = seed

    def reset(self, env: TabletopSim, demo=None, extraction=None) -> "OraclePolicy":
        """``demo`` / ``extraction``: the expert's demo of this episode (``run_expert`` from the current
        state with ``default_rng(seed)``) and its waypoints, when the caller already has them."""
        self.env = env
        state = env.get_state()
        if demo is None:
            demo = run_expert(env, np.random.default_rng(self.seed), record=False)
            env.set_state(state)
        ex = extraction if extraction is not None else self.extractor.extract(demo.positions, demo.gripper)
        enc = encode_waypoints(demo.positions, ex.frames, ex.phases, state, env.camera, env.task)
        self.positions = demo.positions
        self.frames, self.phases = [0] + enc.frames, ["approach"] + enc.phases
        self.plan, self.anchor_z = enc.steps, enc.anchor_z
        return self

    def __call__(self, q: Query) -> str:
        k = min(q.steps_done, len(self.plan) - 1)
        anchor_z = self.anchor_z[k - 1] if k >= 1 else None
        enc = encode_waypoints(self.positions, self.frames, self.phases, self.env.get_state(),
                               self.env.camera, self.env.task, first=k + 1, anchor_z=anchor_z)
        steps = enc.steps or self.plan[-1:]
        return format_plan(steps)
