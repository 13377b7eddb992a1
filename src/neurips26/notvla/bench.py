"""Performance: detokenizer per plan, renderer per frame, calls/tokens per episode vs Dense-bin."""

from __future__ import annotations

import numpy as np

from neurips26.harness.bench import BenchRow, compare
from neurips26.notvla.camera import CameraShift
from neurips26.notvla.detokenizer import Detokenizer
from neurips26.notvla.execution import OraclePolicy, run_episode
from neurips26.notvla.expert import run_expert
from neurips26.notvla.extraction import WaypointExtractor
from neurips26.notvla.plan import parse_plan, tokenize
from neurips26.notvla.sim import TEMPLATES, TabletopSim

EXAMPLE = ("approach the red cube at (41, 57) depth 0 . 62 height 8 ; "
           "grasp the red cube at (41, 57) depth 0 . 62 height 1 close ; lift height 10 ; "
           "move to the blue bowl at (70, 33) depth 0 . 58 height 10 ; "
           "place in the blue bowl at (70, 33) depth 0 . 58 height 4 open ; retreat height 12 .")


def oracle_rollouts(n: int, image_size: int = 64, shift: CameraShift | None = None, seed0: int = 0) -> dict:
    """Oracle-plan episodes over the 4 templates: success, calls, tokens, and the expert's episode length."""
    env = TabletopSim(image_size, camera_shift=shift)
    X = WaypointExtractor()
    out = {k: [] for k in ("success", "calls", "tokens", "tokens_never", "expert_steps", "train_tokens",
                           "compression")}
    for i in range(n):
        s = seed0 + i
        env.reset(seed=s, options={"template": TEMPLATES[i % 4]})
        state = env.get_state()
        demo = run_expert(env, np.random.default_rng(s), record=False)
        ex = X.extract(demo.positions, demo.gripper)
        env.set_state(state)
        pol = OraclePolicy(seed=s).reset(env)
        r = run_episode(env, pol)
        out["success"].append(bool(r.success))
        out["calls"].append(r.calls)
        out["tokens"].append(r.tokens)
        out["tokens_never"].append(len(tokenize(r.plans[0])) if r.plans else 0)
        out["expert_steps"].append(demo.n_steps)
        out["train_tokens"].append(r.tokens + 24 * r.calls)   # remaining plans + ~24 prompt tokens per sample
        out["compression"].append(ex.compression(demo.n_steps))
    return out


def bench(ctx) -> list[BenchRow]:
    smoke = ctx.scale == "smoke"
    rounds = 3 if smoke else 15
    env = TabletopSim(64)
    env.reset(seed=0)
    steps = parse_plan(EXAMPLE)
    det = Detokenizer(depth_source="predicted")
    start = np.array([0.35, 0.0, 0.25])
    lin = Detokenizer(interp="linear", depth_source="predicted")
    rows = [compare("detokenizer per 6-waypoint plan (spline vs linear)",
                    lambda: det(steps, env.camera, start),
                    lambda: lin(steps, env.camera, start), "linear detokenizer", unit="ms", rounds=rounds,
                    note="target < 1 ms"),
            compare("render 64x64 RGB + depth + seg", lambda: env.views(), None, "pybullet TINY_RENDERER",
                    unit="ms", rounds=rounds, missing="pybullet not installed (optional extra)",
                    note="target <= 5 ms")]
    n = 4 if smoke else 20
    r = oracle_rollouts(n)
    calls = float(np.mean(r["calls"]))
    dense = float(np.mean(r["expert_steps"]))
    rows.append(BenchRow("model calls per episode", calls, dense, "Dense-bin (1 call / step)", "calls",
                         note=f"oracle plans, replan every waypoint, {n} episodes; Dense-bin = expert steps"))
    rows.append(BenchRow("generated tokens per episode", float(np.mean(r["tokens"])), 4 * dense,
                         "Dense-bin (4 tokens / step)", "tokens", note=f"{n} episodes"))
    return rows
