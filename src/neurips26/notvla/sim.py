"""``TabletopSim``: a deterministic numpy tabletop with a 20 Hz end effector and a head RGB-D camera.

Rules (numbered as the tests check them):
1. Action ``a = (dx, dy, dz, grip)``; the translation is clipped to 2 cm per step (0.4 m/s at 20 Hz),
   ``grip > 0.5`` means closed. The gripper command is applied first, then the translation.
2. Closing within 2 cm horizontally of a graspable object's centre and within 1.5 cm of its top
   (the grasp height) attaches it (the nearest such object); it then moves with the end effector.
3. Opening releases it: it drops onto what is below its centre — inside a container when its centre
   is within ``radius - 1 cm`` of the container's centre, on a cube when within 2 cm of the cube's
   centre (stack), else onto the table.
4. The episode terminates when the task's success predicate holds, and truncates after 300 steps.
5. Camera shifts change the image, never the world; depth perturbations (Gaussian noise, a scale
   bias, holes of value 0) apply to the observed depth only, drawn from the reset seed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from neurips26.harness.validation import check_array, check_choice, check_scalar
from neurips26.notvla.camera import Camera, CameraShift
from neurips26.notvla.scene import COLOURS, CONTAINERS, FLOOR, GRASPABLE, SIZE, Obj, render

DT = 1 / 20
MAX_STEP = 0.02
EE_START = (0.35, 0.0, 0.25)
EE_LOW, EE_HIGH = np.array([-0.5, -0.6, 0.0]), np.array([0.95, 0.6, 0.6])  # reachable box
ATTACH_XY, ATTACH_Z, STACK_XY, CONTAINER_MARGIN = 0.02, 0.015, 0.02, 0.01
LIFT_SUCCESS = 0.05
MAX_STEPS = 300
PLACE_X, PLACE_Y = (0.3, 0.6), (-0.2, 0.2)
TEMPLATES = ("pick", "bowl", "plate", "stack")
ROBOT_COLOURS = ("red", "green", "blue", "yellow")


class NoTableInViewError(ValueError):
    """The camera sees no table pixel (it looks away from the workspace)."""


@dataclass(frozen=True)
class DepthNoise:
    """Perturbation of the observed depth: Gaussian sigma (m), a scale bias and a fraction of holes."""

    sigma: float = 0.0
    scale: float = 1.0
    holes: float = 0.0

    def __post_init__(self) -> None:
        check_scalar(self.sigma, "sigma", float, min=0, max=1)
        check_scalar(self.scale, "scale", float, min=0.5, max=2)
        check_scalar(self.holes, "holes", float, min=0, max=0.9)

    def apply(self, depth: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = depth * self.scale
        if self.sigma:
            out = out + rng.normal(0, self.sigma, depth.shape)
        if self.holes:
            out = np.where(rng.random(depth.shape) < self.holes, 0.0, out)
        return np.where(depth > 0, np.maximum(out, 0.0), 0.0)


@dataclass(frozen=True)
class Task:
    """A task instance: template, the manipulated object's id and the target's id (0 for ``pick``)."""

    template: str
    obj: int
    target: int = 0

    def instruction(self, objects: dict[int, Obj]) -> str:
        o = objects[self.obj]
        if self.template == "pick":
            return f"pick up the {o.colour} {o.kind}"
        t = objects[self.target]
        if self.template == "bowl":
            return f"put the {o.colour} {o.kind} in the {t.colour} bowl"
        if self.template == "plate":
            return f"put the {o.colour} {o.kind} on the {t.colour} plate"
        return f"stack the {o.colour} cube on the {t.colour} cube"


def sample_scene(rng: np.random.Generator, template: str, colours=ROBOT_COLOURS,
                 max_objects: int = 5) -> tuple[list[Obj], Task]:
    """The task's objects plus 0-3 distractors, placed without overlap by rejection sampling.

    No distractor repeats the colour and kind of a named object, so every reference is unique.
    """
    colours = list(colours)
    kinds: list[tuple[str, str]] = []
    c = [colours[i] for i in rng.choice(len(colours), size=2, replace=False)]
    if template == "pick":
        kinds.append((str(rng.choice(GRASPABLE)), c[0]))
    elif template in ("bowl", "plate"):
        kinds += [(str(rng.choice(GRASPABLE)), c[0]), (template, c[1])]
    else:
        kinds += [("cube", c[0]), ("cube", c[1])]
    n_extra = int(rng.integers(2 - min(len(kinds), 2), max_objects - len(kinds) + 1))
    for _ in range(n_extra):
        while True:
            k = (str(rng.choice(("cube", "cylinder", "bowl", "plate"))), str(rng.choice(colours)))
            if k not in kinds:
                break
        kinds.append(k)
    # sequential rejection sampling; when an early layout leaves no room (several bowls / plates), the whole
    # layout is drawn again (a layout that fits at the first attempt consumes the same draws as before)
    for _attempt in range(100):
        objs: list[Obj] = []
        for i, (kind, colour) in enumerate(kinds):
            r = SIZE[kind][0]
            for _ in range(1000):
                xy = np.array([rng.uniform(*PLACE_X), rng.uniform(*PLACE_Y)])
                if all(np.hypot(*(xy - o.pos[:2])) > r + o.radius + 0.02 for o in objs):
                    break
            else:
                break
            yaw = float(rng.uniform(-np.pi / 4, np.pi / 4)) if kind == "cube" else 0.0
            objs.append(Obj(i + 1, kind, colour, np.array([xy[0], xy[1], 0.0]), yaw))
        if len(objs) == len(kinds):
            return objs, Task(template, 1, 2 if template != "pick" else 0)
        kinds = kinds[:-1] if len(kinds) > 2 else kinds  # drop a distractor before trying again
    raise RuntimeError("could not place objects")  # pragma: no cover


class TabletopSim(gym.Env):
    """Gymnasium environment: observation ``{"rgb", "depth", "ee"}`` (ee = x, y, z, gripper), 4-D action.

    ``reset(seed=s, options={"template": ..., "colours": [...]})`` samples a scene deterministically;
    ``render()`` is the RGB head view; ``views()`` gives RGB, depth and segmentation; ``set_camera``
    shifts the head camera without touching the world.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, image_size: int = 64, templates=TEMPLATES, colours=ROBOT_COLOURS,
                 camera_shift: CameraShift | None = None, depth_noise: DepthNoise | None = None,
                 max_steps: int = MAX_STEPS, render_mode: str | None = "rgb_array"):
        self.image_size = check_scalar(image_size, "image_size", int, min=16, max=512)
        self.templates = tuple(check_choice(t, "templates", TEMPLATES) for t in templates)
        self.colours = tuple(check_choice(c, "colours", tuple(COLOURS)) for c in colours)
        if len(self.colours) < 2:
            raise ValueError("colours must name at least 2 colours")
        self.max_steps = check_scalar(max_steps, "max_steps", int, min=1)
        self.render_mode = render_mode
        self.depth_noise = depth_noise or DepthNoise()
        self.set_camera(camera_shift or CameraShift())
        n = self.image_size
        self.observation_space = gym.spaces.Dict({
            "rgb": gym.spaces.Box(0, 255, (n, n, 3), np.uint8),
            "depth": gym.spaces.Box(0.0, 10.0, (n, n), np.float32),
            "ee": gym.spaces.Box(-1.0, 1.0, (4,), np.float32)})
        self.action_space = gym.spaces.Box(np.array([-MAX_STEP] * 3 + [0.0], np.float32),
                                           np.array([MAX_STEP] * 3 + [1.0], np.float32))
        self.objects: dict[int, Obj] = {}
        self.task: Task | None = None
        self.ee = np.array(EE_START)
        self.closed = False
        self.held = 0
        self.t = 0
        self._noise_rng = np.random.default_rng(0)

    # --- camera
    def set_camera(self, shift: "CameraShift | Camera") -> None:
        """Move the head camera (a shift of the default pose, or any ``Camera``); the world is unchanged.
        Refuses a pose that sees no table pixel."""
        if isinstance(shift, Camera):
            if shift.width != self.image_size or shift.height != self.image_size:
                raise ValueError(f"camera must be {self.image_size}x{self.image_size}, got "
                                 f"{shift.width}x{shift.height}")
            cam = shift
        else:
            cam = Camera(self.image_size, shift=shift)
        probe = render(cam, [])
        if not np.any(probe["seg"] == 0):
            raise NoTableInViewError(f"camera shift {shift} sees no table pixel")
        self.camera, self._rays = cam, cam.ray_dirs()

    # --- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        template = options.get("template")
        if template is None:
            template = self.templates[int(self.np_random.integers(len(self.templates)))]
        check_choice(template, "template", TEMPLATES)
        colours = options.get("colours", self.colours)
        objs, self.task = sample_scene(self.np_random, template, colours)
        for o in objs:
            o.start_z = float(o.pos[2])
        self.objects = {o.id: o for o in objs}
        self.ee = np.array(EE_START, dtype=float)
        self.closed, self.held, self.t = False, 0, 0
        self._noise_rng = np.random.default_rng(self.np_random.integers(2**63))
        return self.observe(), self._info()

    def step(self, action):
        success, truncated = self.advance(action)
        return self.observe(), float(success), success, truncated, self._info()

    def advance(self, action) -> tuple[bool, bool]:
        """Apply one action by rules 1-4 without rendering; returns (terminated, truncated)."""
        a = check_array(action, "action", ndim=1, dtype=float)
        if a.shape != (4,):
            raise ValueError(f"action must have width 4 (dx, dy, dz, grip), got shape {a.shape}")
        want_closed = a[3] > 0.5
        if want_closed and not self.closed:
            self._close()
        elif not want_closed and self.closed:
            self._open()
        d = a[:3]
        n = float(np.linalg.norm(d))
        if n > MAX_STEP:
            d = d * (MAX_STEP / n)
        self.ee = np.clip(self.ee + d, EE_LOW, EE_HIGH)
        if self.held:
            o = self.objects[self.held]
            o.pos = self.ee - np.array([0.0, 0.0, o.height])
            o.pos[2] = max(o.pos[2], 0.0)
        self.t += 1
        success = self.success()
        return success, self.t >= self.max_steps and not success

    def render(self):
        return self.views()["rgb"]

    def views(self, camera: Camera | None = None) -> dict[str, np.ndarray]:
        """Noise-free RGB, z-depth and segmentation of the current state (from ``camera`` if given)."""
        cam = camera or self.camera
        return render(cam, list(self.objects.values()), self.ee)

    # --- rules 2 and 3
    def _close(self) -> None:
        self.closed = True
        best, best_d = 0, np.inf
        for o in self.objects.values():
            if o.kind not in GRASPABLE:
                continue
            dxy = float(np.hypot(*(self.ee[:2] - o.pos[:2])))
            if dxy <= ATTACH_XY and abs(self.ee[2] - o.top[2]) <= ATTACH_Z and dxy < best_d:
                best, best_d = o.id, dxy
        if best:
            self.held = best
            self.objects[best].attached = True
            self.objects[best].support = -1

    def _open(self) -> None:
        self.closed = False
        if not self.held:
            return
        o = self.objects[self.held]
        self.held, o.attached = 0, False
        z, support = 0.0, 0
        for s in self.objects.values():
            if s.id == o.id or s.pos[2] > o.pos[2] + 1e-9:
                continue
            dxy = float(np.hypot(*(o.pos[:2] - s.pos[:2])))
            if s.kind in CONTAINERS and dxy < s.radius - CONTAINER_MARGIN:
                zs = s.pos[2] + FLOOR[s.kind]
            elif s.kind == "cube" and dxy < STACK_XY:
                zs = s.top[2]
            else:
                continue
            if zs > z:
                z, support = zs, s.id
        o.pos = np.array([o.pos[0], o.pos[1], z])
        o.support = support

    def success(self) -> bool:
        """The task's predicate: lifted >= 5 cm (pick), released inside / on the target (others)."""
        if self.task is None:
            return False
        o = self.objects[self.task.obj]
        if self.task.template == "pick":
            return bool(o.attached and o.pos[2] - o.start_z >= LIFT_SUCCESS)
        return bool(not o.attached and o.support == self.task.target)

    # --- state
    def instruction(self) -> str:
        return self.task.instruction(self.objects)

    def get_state(self) -> dict:
        return {"objects": copy.deepcopy(self.objects), "ee": self.ee.copy(), "closed": self.closed,
                "held": self.held, "t": self.t, "task": self.task}

    def set_state(self, state: dict) -> None:
        self.objects = copy.deepcopy(state["objects"])
        self.ee, self.closed, self.held = state["ee"].copy(), state["closed"], state["held"]
        self.t, self.task = state["t"], state["task"]

    def observe(self) -> dict[str, np.ndarray]:
        v = self.views()
        depth = self.depth_noise.apply(v["depth"], self._noise_rng)
        return {"rgb": v["rgb"], "depth": depth.astype(np.float32),
                "ee": np.array([*self.ee, float(self.closed)], np.float32)}

    def _info(self) -> dict:
        return {"instruction": self.instruction() if self.task else "", "t": self.t}
