"""The scripted expert and demonstration records.

approach above the object (+10 cm) -> descend to its top -> close -> lift (+10 cm) -> move above the
target -> descend (object 1 cm above the target's support) -> open -> retreat (+10 cm). Each segment is a
straight line with a minimum-jerk profile ``s(tau) = 10 tau^3 - 15 tau^4 + 6 tau^5`` at a mean speed of
1 cm/step x U(0.7, 1.3); 3 stationary steps at each gripper change; 2 mm Gaussian noise on the commanded
position. The expert is closed loop (each action = commanded position - current position), so the
2 cm clip only delays it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neurips26.harness.validation import check_array
from neurips26.notvla.scene import CONTAINERS, FLOOR
from neurips26.notvla.sim import TabletopSim

APPROACH_H = 0.10
MEAN_STEP = 0.01
DWELL = 3
NOISE = 0.002


@dataclass
class Demo:
    """One demonstration: EE positions p_0..p_N (N+1, 3), gripper states g_0..g_N, actions (N, 4),
    the simulator state at every step (for rendering decision frames), success, task and instruction."""

    positions: np.ndarray
    gripper: np.ndarray
    actions: np.ndarray
    states: list
    success: bool
    instruction: str

    def __post_init__(self) -> None:
        self.positions = check_demo_positions(self.positions)

    @property
    def n_steps(self) -> int:
        return len(self.actions)


def check_demo_positions(p) -> np.ndarray:
    p = check_array(p, "positions", ndim=2, dtype=float)
    if p.shape[1] != 3:
        raise ValueError(f"positions must have width 3, got shape {p.shape}")
    if len(p) < 2:
        raise ValueError(f"positions: a demo needs at least 2 steps, got {len(p)}")
    return p


def min_jerk(tau: np.ndarray) -> np.ndarray:
    return 10 * tau**3 - 15 * tau**4 + 6 * tau**5


def expert_waypoints(env: TabletopSim) -> list[tuple[np.ndarray, bool]]:
    """The expert's phase-end poses and the gripper state (closed?) while moving to each."""
    task = env.task
    o = env.objects[task.obj]
    top = o.top.copy()
    above = top + [0, 0, APPROACH_H]
    wps = [(above, False), (top.copy(), False), (top.copy(), True), (above.copy(), True)]
    if task.template == "pick":
        return wps
    t = env.objects[task.target]
    rest = t.pos[2] + (FLOOR[t.kind] if t.kind in CONTAINERS else t.height)
    place = np.array([t.pos[0], t.pos[1], rest + o.height + 0.01])
    move = np.array([t.pos[0], t.pos[1], max(above[2], place[2] + 0.03)])
    wps += [(move, True), (place, True), (place.copy(), False), (place + [0, 0, APPROACH_H], False)]
    return wps


def run_expert(env: TabletopSim, rng: np.random.Generator, record: bool = True) -> Demo:
    """Roll the expert out from the env's current state (after ``reset``); returns the demonstration."""
    positions, grips, actions, states = [env.ee.copy()], [float(env.closed)], [], []
    if record:
        states.append(env.get_state())
    done = False
    ever = False

    def act(target, closed):
        nonlocal done, ever
        if done:
            return
        a = np.concatenate([target - env.ee, [float(closed)]])
        term, trunc = env.advance(a)
        actions.append(a)
        positions.append(env.ee.copy())
        grips.append(float(env.closed))
        if record:
            states.append(env.get_state())
        ever = ever or term
        done = trunc   # the script runs to its end (retreat included), success or not

    closed = False
    for goal, want in expert_waypoints(env):
        if want != closed:  # gripper change: 3 stationary steps, then switch
            for _ in range(DWELL):
                act(env.ee.copy(), closed)
            closed = want
            act(env.ee.copy(), closed)
            continue
        start = positions[-1].copy()
        dist = float(np.linalg.norm(goal - start))
        n = max(int(np.ceil(dist / (MEAN_STEP * rng.uniform(0.7, 1.3)))), 2)
        s = min_jerk(np.arange(1, n + 1) / n)
        for k in range(n):
            cmd = start + s[k] * (goal - start) + (rng.normal(0, NOISE, 3) if k < n - 1 else 0)
            act(cmd, closed)
    return Demo(np.array(positions), np.array(grips), np.array(actions).reshape(-1, 4), states,
                ever or env.success(), env.instruction())
