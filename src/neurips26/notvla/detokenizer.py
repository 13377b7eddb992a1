"""The deterministic detokenizer: plan steps -> grounded waypoints -> dense 20 Hz actions.

1. Ground each anchored step: grid (U, V) -> pixel ((U + 0.5) W / 100, (V + 0.5) H / 100), depth d by
   ``depth_source`` -> anchor top ``P = eye + R d K^-1 [u, v, 1]^T`` (current extrinsics); the waypoint is
   ``P + (0, 0, h / 100)``. An anchor-free step moves vertically from the previous waypoint to ``h`` cm
   above the most recent anchor top (the table, z = 0, if there was none).
   ``predicted``: the plan's depth; ``sensor``: the depth image at the pixel, else the median of the
   valid (> 0, finite) values of its 3 x 3 window; ``fused``: sensor when within 5 cm of predicted, else
   predicted (ASSUMPTION; the default).
2. Time: knots q_0 (current pose), q_1..q_n; segment i lasts ``max(|dq| / v_max, 3 dt)`` rounded up to whole
   steps; an event waypoint (close/open) gets a 3-step dwell knot at the same place.
3. Positions: one ``scipy.interpolate.CubicHermiteSpline`` through all knots, Catmull-Rom tangents
   ``m_i = (q_{i+1} - q_{i-1}) / (t_{i+1} - t_{i-1})``, zero at the start, the end, events and dwells;
   sampled at 20 Hz. A segment with a step above the 2 cm clip is stretched (its step count multiplied by
   ``ceil``(max step / clip)) and the spline rebuilt, until none is (deterministic).
4. Gripper: the command flips at the event waypoint after the 3-step dwell.
Same text + same camera/depth -> bitwise identical float64 output (no randomness anywhere).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import CubicHermiteSpline

from neurips26.harness.validation import check_array, check_choice, check_scalar
from neurips26.notvla.camera import Camera
from neurips26.notvla.errors import DepthUnavailableError
from neurips26.notvla.plan import Step, parse_plan

DT = 1 / 20
V_MAX = 0.3
MAX_STEP = 0.02
DWELL = 3
FUSE_TOL = 0.05
DEPTH_SOURCES = ("predicted", "sensor", "fused")
INTERPOLATIONS = ("spline", "linear")


@dataclass
class Waypoints:
    """Grounded plan: positions (n, 3), event per waypoint ("close"/"open"/None), anchor top z after each."""

    positions: np.ndarray
    events: list
    anchor_z: list


@dataclass
class Motion:
    """Dense motion: positions (T+1, 3) sampled at 20 Hz, actions (T', 4) = (dx, dy, dz, grip),
    ``knot_steps`` = the step at which each waypoint is reached, ``switch_steps`` = the action index at
    which the gripper command flips (one per event)."""

    positions: np.ndarray
    actions: np.ndarray
    knot_steps: list
    switch_steps: list
    waypoints: Waypoints


def sensor_depth(depth_image: np.ndarray, uv: np.ndarray) -> float:
    """Depth at the pixel, else the median of the valid values in its 3 x 3 window."""
    H, W = depth_image.shape
    i, j = int(math.floor(uv[1])), int(math.floor(uv[0]))
    i, j = min(max(i, 0), H - 1), min(max(j, 0), W - 1)
    d = depth_image[i, j]
    if np.isfinite(d) and d > 0:
        return float(d)
    win = depth_image[max(i - 1, 0):i + 2, max(j - 1, 0):j + 2]
    ok = win[np.isfinite(win) & (win > 0)]
    if ok.size == 0:
        raise DepthUnavailableError(f"depth_source='sensor': no valid depth at pixel ({j}, {i}) "
                                    f"or in its 3x3 window")
    return float(np.median(ok))


class Detokenizer:
    """Plan text or steps -> dense motion. Swappable: ``interp="linear"`` is the ablation."""

    def __init__(self, interp: str = "spline", depth_source: str = "fused", v_max: float = V_MAX,
                 max_step: float = MAX_STEP, dwell: int = DWELL, fuse_tol: float = FUSE_TOL):
        self.interp = check_choice(interp, "interp", INTERPOLATIONS)
        self.depth_source = check_choice(depth_source, "depth_source", DEPTH_SOURCES)
        self.v_max = check_scalar(v_max, "v_max", float, min=0, inclusive="neither")
        self.max_step = check_scalar(max_step, "max_step", float, min=0, inclusive="neither")
        self.dwell = check_scalar(dwell, "dwell", int, min=0)
        self.fuse_tol = check_scalar(fuse_tol, "fuse_tol", float, min=0)

    def parse(self, text: str) -> list[Step]:
        """The text this detokenizer renders -> steps (the narrative grammar; ``PlanParseError``)."""
        return parse_plan(text)

    # --- 1. grounding
    def ground(self, steps: list[Step], camera: Camera, start, depth_image=None,
               anchor_z: float | None = None) -> Waypoints:
        start = check_array(start, "start", shape=(3,), dtype=float)
        if self.depth_source != "predicted":
            if depth_image is None:
                raise ValueError(f"depth_image is required for depth_source={self.depth_source!r}")
            depth_image = check_array(depth_image, "depth_image", ndim=2, dtype=float, finite=False)
        z_ref = 0.0 if anchor_z is None else float(anchor_z)
        prev = start
        pos, events, zs = [], [], []
        for k, s in enumerate(steps):
            if s.anchored:
                uv = camera.from_grid(s.u, s.v)
                d = self._depth(s, uv, depth_image, k)
                P = camera.backproject(uv, d)
                z_ref = float(P[2])
                wp = P + np.array([0.0, 0.0, s.height / 100])
            else:
                wp = np.array([prev[0], prev[1], z_ref + s.height / 100])
            pos.append(wp)
            events.append(s.event)
            zs.append(z_ref)
            prev = wp
        return Waypoints(np.array(pos).reshape(-1, 3), events, zs)

    def _depth(self, s: Step, uv, depth_image, k: int) -> float:
        pred = s.depth
        if self.depth_source in ("predicted", "fused"):
            if pred is None or not (pred > 0):
                raise ValueError(f"step {k}: depth must be > 0, got {pred!r}")
            if self.depth_source == "predicted":
                return float(pred)
            try:
                sens = sensor_depth(depth_image, uv)
            except DepthUnavailableError:
                return float(pred)
            return sens if abs(sens - pred) < self.fuse_tol else float(pred)
        return sensor_depth(depth_image, uv)

    # --- 2-4. time parameterisation, spline, gripper
    def render(self, start, waypoints: Waypoints, closed: bool = False) -> Motion:
        start = check_array(start, "start", shape=(3,), dtype=float)
        q = [start]
        fixed = [True]          # zero-velocity knots
        is_dwell = [False]
        for p, ev in zip(waypoints.positions, waypoints.events):
            q.append(np.asarray(p, float))
            fixed.append(ev is not None)
            is_dwell.append(False)
            if ev is not None and self.dwell:
                q.append(np.asarray(p, float))
                fixed.append(True)
                is_dwell.append(True)
        fixed[-1] = True
        Q = np.array(q)
        seg = np.linalg.norm(np.diff(Q, axis=0), axis=1)
        n = np.array([self.dwell if d else max(math.ceil(s / (self.v_max * DT) - 1e-9), 3)
                      for s, d in zip(seg, is_dwell[1:])], dtype=np.int64)
        for _ in range(100):
            steps = np.concatenate([[0], np.cumsum(n)])
            P = self._sample(Q, steps, np.array(fixed))
            d = np.linalg.norm(np.diff(P, axis=0), axis=1)
            seg_id = np.searchsorted(steps, np.arange(len(d)), side="right") - 1
            worst = np.zeros(len(n))
            np.maximum.at(worst, seg_id, d)
            over = worst > self.max_step
            if not over.any():
                break
            n = np.where(over, np.ceil(n * worst / self.max_step).astype(np.int64) + 1, n)
        else:  # pragma: no cover - stretching always converges
            raise RuntimeError("segment stretching did not converge")
        grip = np.full(len(P) - 1, float(closed))
        knot_steps, switch = [], []
        state = float(closed)
        k = 1
        for ev in waypoints.events:
            knot_steps.append(int(steps[k]))
            if ev is not None:
                at = int(steps[k]) + self.dwell
                state = 1.0 if ev == "close" else 0.0
                grip[at:] = state
                switch.append(at)
                k += 2 if self.dwell else 1
            else:
                k += 1
        actions = np.concatenate([np.diff(P, axis=0), grip[:, None]], axis=1)
        if switch and switch[-1] >= len(actions):   # an event at the very end: one still action to flip
            actions = np.vstack([actions, [0.0, 0.0, 0.0, state]])
        return Motion(P, actions, knot_steps, switch, waypoints)

    def _sample(self, Q: np.ndarray, steps: np.ndarray, fixed: np.ndarray) -> np.ndarray:
        t = steps * DT
        T = np.arange(steps[-1] + 1) * DT
        if self.interp == "linear":
            return np.stack([np.interp(T, t, Q[:, j]) for j in range(3)], axis=1)
        m = np.zeros_like(Q)
        if len(Q) > 2:
            m[1:-1] = (Q[2:] - Q[:-2]) / (t[2:] - t[:-2])[:, None]
        m[fixed] = 0.0
        P = CubicHermiteSpline(t, Q, m, axis=0)(T)
        P[steps] = Q  # exact at the knots (the spline is, up to rounding)
        return P

    def __call__(self, plan, camera: Camera, start, closed: bool = False, depth_image=None,
                 anchor_z: float | None = None) -> Motion:
        steps = self.parse(plan) if isinstance(plan, str) else list(plan)
        return self.render(start, self.ground(steps, camera, start, depth_image, anchor_z), closed)
