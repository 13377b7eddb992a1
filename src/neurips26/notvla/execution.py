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
from neurips26.notvla.plan import format_plan, parse_plan, tokenize
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


def run_episode(env: TabletopSim, policy: Callable[[Query], str], detokenizer: Detokenizer | None = None,
                replan: str = "every_waypoint", instruction: str | None = None,
                max_steps: int = 300, max_calls: int | None = None) -> EpisodeResult | Refusal:
    """Run one episode from the env's current (reset) state (at most ``max_calls`` policy queries)."""
    replan = check_choice(replan, "replan", REPLAN)
    max_steps = check_scalar(max_steps, "max_steps", int, min=1)
    detok = detokenizer or Detokenizer()
    instruction = instruction if instruction is not None else env.instruction()
    refusal = check_instruction(env, instruction)
    if refusal is not None:
        return refusal
    res = EpisodeResult(False, 0, 0, 0, 0)
    obs = env.observe()
    anchor_z, done_steps, failures = None, 0, 0
    res.positions.append(env.ee.copy())
    while env.t < max_steps and (max_calls is None or res.calls < max_calls):
        q = Query(obs["rgb"], obs["depth"].astype(np.float64), env.closed, instruction, done_steps)
        text = policy(q)
        res.calls += 1
        res.tokens += len(tokenize(text))
        res.plans.append(text)
        try:
            steps = parse_plan(text)
            motion = detok(steps, env.camera, env.ee, env.closed, q.depth, anchor_z)
        except (PlanParseError, DepthUnavailableError, ValueError):
            res.parse_failures += 1
            failures += 1
            if failures >= MAX_PARSE_FAILURES:
                break
            term, trunc = env.advance(np.array([0.0, 0.0, 0.0, float(env.closed)]))
            obs = env.observe()
            if term or trunc:
                break
            continue
        failures = 0
        if replan == "every_waypoint":
            end = motion.knot_steps[0]
            if steps[0].event is not None:
                end = motion.switch_steps[0] + 1
            n_exec, anchor_z = 1, motion.waypoints.anchor_z[0]
        else:
            end, n_exec, anchor_z = len(motion.actions), len(steps), motion.waypoints.anchor_z[-1]
        term = trunc = False
        for a in motion.actions[:max(end, 1)]:
            term, trunc = env.advance(a)
            res.positions.append(env.ee.copy())
            if term or trunc or env.t >= max_steps:
                break
        done_steps += n_exec
        obs = env.observe()
        if term:
            res.success = True
            break
        if trunc:
            break
    res.steps = env.t
    res.success = res.success or env.success()
    return res


class OraclePolicy:
    """Interface upper bound: plans extracted from the scripted expert's demo of this very episode.

    ``reset(env)`` rolls the expert out on a copy of the state, extracts and encodes its waypoints; each
    call writes the remaining steps from the current view (anchors re-projected with the current camera).
    """

    def __init__(self, eta: float = 0.01, seed: int = 0):
        self.extractor = WaypointExtractor(eta)
        self.seed = seed

    def reset(self, env: TabletopSim) -> "OraclePolicy":
        self.env = env
        state = env.get_state()
        demo = run_expert(env, np.random.default_rng(self.seed), record=False)
        env.set_state(state)
        ex = self.extractor.extract(demo.positions, demo.gripper)
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
