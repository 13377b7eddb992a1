"""Performance: detokenizer per plan, renderer per frame, calls/tokens per episode vs Dense-bin."""

from __future__ import annotations

import numpy as np

from neurips26.harness.bench import BenchRow, compare
from neurips26.notvla.detokenizer import Detokenizer
from neurips26.notvla.evaluation import oracle_rollouts
from neurips26.notvla.plan import parse_plan
from neurips26.notvla.sim import TabletopSim

EXAMPLE = (
    "approach the red cube at (41, 57) depth 0 . 62 height 8 ; "
    "grasp the red cube at (41, 57) depth 0 . 62 height 1 close ; lift height 10 ; "
    "move to the blue bowl at (70, 33) depth 0 . 58 height 10 ; "
    "place in the blue bowl at (70, 33) depth 0 . 58 height 4 open ; retreat height 12 ."
)


def bench(ctx) -> list[BenchRow]:
    smoke = ctx.scale == "smoke"
    rounds = 3 if smoke else 15
    env = TabletopSim(64)
    env.reset(seed=0)
    steps = parse_plan(EXAMPLE)
    det = Detokenizer(depth_source="predicted")
    start = np.array([0.35, 0.0, 0.25])
    lin = Detokenizer(interp="linear", depth_source="predicted")
    rows = [
        compare(
            "detokenizer per 6-waypoint plan (spline vs linear)",
            lambda: det(steps, env.camera, start),
            lambda: lin(steps, env.camera, start),
            "linear detokenizer",
            unit="ms",
            rounds=rounds,
            note="target < 1 ms",
        ),
        compare(
            "render 64x64 RGB + depth + seg",
            lambda: env.views(),
            None,
            "pybullet TINY_RENDERER",
            unit="ms",
            rounds=rounds,
            missing="pybullet not installed (optional extra)",
            note="target <= 5 ms",
        ),
    ]
    n = 4 if smoke else 20
    r = oracle_rollouts(n)
    calls = float(np.mean(r["calls"]))
    dense = float(np.mean(r["expert_steps"]))
    rows.append(
        BenchRow(
            "model calls per episode",
            calls,
            dense,
            "Dense-bin (1 call / step)",
            "calls",
            note=f"oracle plans, replan every waypoint, {n} episodes; Dense-bin = expert steps",
        )
    )
    rows.append(
        BenchRow(
            "generated tokens per episode",
            float(np.mean(r["tokens"])),
            4 * dense,
            "Dense-bin (4 tokens / step)",
            "tokens",
            note=f"{n} episodes",
        )
    )
    return rows
