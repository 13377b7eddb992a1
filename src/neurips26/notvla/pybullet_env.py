"""``PandaBulletEnv``: the optional physics backend on pybullet's bundled Franka Panda (``pybullet_data``).

Same protocol as ``TabletopSim`` for what it implements: ``reset(seed=, options={"template": ...})``,
``step(a)`` / ``advance(a)`` with ``a = (dx, dy, dz, grip)`` at 20 Hz (translation clipped to 2 cm per
step; ``grip > 0.5`` closes), ``render()`` / ``observe()`` (RGB, metric z-depth, segmentation id map from
``getCameraImage(..., renderer=ER_TINY_RENDERER)``, CPU only), ``ee``, ``closed``, ``instruction()``,
``success()``. The head camera is our ``Camera`` (same pinhole and target; the eye across the table at
``BULLET_EYE``, since the arm's links occlude the view from above its base), handed to pybullet as a
view / projection matrix, so its ``project`` / ``backproject`` ground plans in this env too.

Control: the end-effector target moves by the clipped delta; inverse kinematics
(``calculateInverseKinematics`` on the grasp-target link, gripper pointing down) drives the arm joints
by position control; 12 physics substeps of 1/240 s per 20 Hz step. Objects: 5 cm box primitives (the size of
``cube_small.urdf``, whose textured mesh renders black under the tiny renderer) in the task colours on
pybullet_data's ``plane.urdf`` at z = 0. Templates: ``pick`` (lifted >= 5 cm, as in
``TabletopSim``) and ``stack`` (the cube rests on the target cube); the container templates need bowl /
plate meshes pybullet_data does not ship, and raise ``ValueError``. Requires the optional ``pybullet``
package (``ImportError`` naming it otherwise).
"""

from __future__ import annotations

import numpy as np

from neurips26.harness.validation import check_array, check_choice
from neurips26.notvla.camera import Camera, CameraShift
from neurips26.notvla.scene import COLOURS
from neurips26.notvla.sim import EE_START, LIFT_SUCCESS, MAX_STEP, MAX_STEPS, ROBOT_COLOURS

BULLET_TEMPLATES = ("pick", "stack")
SUBSTEPS = 12  # 240 Hz physics / 20 Hz control
EE_LINK = 11  # panda_grasptarget in pybullet_data's franka_panda/panda.urdf
ARM_JOINTS = tuple(range(7))
FINGER_JOINTS = (9, 10)
CUBE = 0.05
REST = (0.0, -0.4, 0.0, -2.4, 0.0, 2.0, 0.8)
BULLET_EYE = (0.95, 0.0, 0.60)


class PandaBulletEnv:
    """A pybullet Franka Panda tabletop with the ``TabletopSim`` protocol (``pick`` and ``stack``)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, image_size: int = 64, colours=ROBOT_COLOURS, camera_shift: CameraShift | None = None):
        try:
            import pybullet as p
            import pybullet_data
        except ImportError as e:  # the optional extra
            raise ImportError("PandaBulletEnv needs the optional 'pybullet' package (pip install pybullet)") from e
        self.p, self.data = p, pybullet_data.getDataPath()
        self.image_size = image_size
        self.colours = tuple(colours)
        # the Panda's links rise through TabletopSim's head pose above the base, so the head camera faces
        # the robot from across the table (same pinhole and target, eye mirrored about the target)
        self.camera = Camera(image_size, eye=BULLET_EYE, shift=camera_shift)
        self.cid = p.connect(p.DIRECT)
        self.t, self.closed, self.objects, self.task = 0, False, {}, None

    def close(self) -> None:
        if self.cid is not None:
            self.p.disconnect(self.cid)
            self.cid = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # --- episode
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        p, c = self.p, self.cid
        rng = np.random.default_rng(seed)
        template = check_choice((options or {}).get("template", "pick"), "template", BULLET_TEMPLATES)
        p.resetSimulation(physicsClientId=c)
        p.setGravity(0, 0, -9.81, physicsClientId=c)
        p.setTimeStep(1 / 240, physicsClientId=c)
        p.setAdditionalSearchPath(self.data, physicsClientId=c)
        self.plane = p.loadURDF("plane.urdf", physicsClientId=c)
        self.robot = p.loadURDF("franka_panda/panda.urdf", [0, 0, 0], useFixedBase=True, physicsClientId=c)
        for j, q in zip(ARM_JOINTS, REST):
            p.resetJointState(self.robot, j, q, physicsClientId=c)
        for j in FINGER_JOINTS:
            p.resetJointState(self.robot, j, 0.04, physicsClientId=c)
        self.objects = {}
        colours = rng.permutation(self.colours)
        n = 2 + int(rng.integers(2))
        xy = []
        while len(xy) < n:
            cand = np.array([rng.uniform(0.35, 0.6), rng.uniform(-0.2, 0.2)])
            if all(np.linalg.norm(cand - q) > 0.1 for q in xy):
                xy.append(cand)
        for k in range(n):
            rgb = [float(x) for x in COLOURS[colours[k]]]  # already in 0-1
            half = [CUBE / 2] * 3
            col = p.createCollisionShape(p.GEOM_BOX, halfExtents=half, physicsClientId=c)
            vis = p.createVisualShape(p.GEOM_BOX, halfExtents=half, rgbaColor=[*rgb, 1.0], physicsClientId=c)
            bid = p.createMultiBody(0.1, col, vis, [xy[k][0], xy[k][1], CUBE / 2], physicsClientId=c)
            p.changeDynamics(bid, -1, lateralFriction=1.5, physicsClientId=c)
            self.objects[bid] = str(colours[k])
        ids = list(self.objects)
        self.task = (template, ids[0], ids[1] if template == "stack" else None)
        self.z0 = self._obj_pos(ids[0])[2]
        self.target = np.array(EE_START, float)
        self.closed = False
        self.t = 0
        for _ in range(60):  # settle the arm at the start pose
            self._drive()
        self.target = self.ee.copy()
        return self.observe(), self._info()

    def instruction(self) -> str:
        template, o, t = self.task
        if template == "pick":
            return f"pick up the {self.objects[o]} cube"
        return f"stack the {self.objects[o]} cube on the {self.objects[t]} cube"

    def success(self) -> bool:
        template, o, t = self.task
        po = self._obj_pos(o)
        if template == "pick":
            return bool(po[2] - self.z0 >= LIFT_SUCCESS)
        pt = self._obj_pos(t)
        return bool(np.linalg.norm(po[:2] - pt[:2]) < 0.025 and abs(po[2] - pt[2] - CUBE) < 0.01 and not self.closed)

    # --- control
    @property
    def ee(self) -> np.ndarray:
        s = self.p.getLinkState(self.robot, EE_LINK, computeForwardKinematics=True, physicsClientId=self.cid)
        return np.array(s[4], float)

    def step(self, action):
        term, trunc = self.advance(action)
        return self.observe(), float(term), term, trunc, self._info()

    def advance(self, action) -> tuple[bool, bool]:
        a = check_array(action, "action", shape=(4,), dtype=float)
        d = a[:3]
        n = np.linalg.norm(d)
        if n > MAX_STEP:
            d = d * (MAX_STEP / n)
        self.closed = bool(a[3] > 0.5)
        self.target = self.target + d
        self.target[2] = max(self.target[2], 0.0)
        self._drive()
        self.t += 1
        term = self.success()
        return term, (not term) and self.t >= MAX_STEPS

    def _drive(self) -> None:
        p, c = self.p, self.cid
        down = p.getQuaternionFromEuler([np.pi, 0.0, 0.0])
        q = p.calculateInverseKinematics(self.robot, EE_LINK, self.target.tolist(), down, maxNumIterations=50,
                                         physicsClientId=c)
        p.setJointMotorControlArray(self.robot, list(ARM_JOINTS), p.POSITION_CONTROL,
                                    targetPositions=list(q[:7]), forces=[200.0] * 7, physicsClientId=c)
        w = 0.0 if self.closed else 0.04
        p.setJointMotorControlArray(self.robot, list(FINGER_JOINTS), p.POSITION_CONTROL,
                                    targetPositions=[w, w], forces=[40.0, 40.0], physicsClientId=c)
        for _ in range(SUBSTEPS):
            p.stepSimulation(physicsClientId=c)

    def _obj_pos(self, bid: int) -> np.ndarray:
        return np.array(self.p.getBasePositionAndOrientation(bid, physicsClientId=self.cid)[0], float)

    def object_position(self, colour: str) -> np.ndarray:
        for bid, col in self.objects.items():
            if col == colour:
                return self._obj_pos(bid)
        raise ValueError(f"colour: no {colour!r} cube in the scene")

    # --- camera
    def _matrices(self):
        cam = self.camera
        up = -cam.R[:, 1]  # image v runs downward
        view = self.p.computeViewMatrix(cam.eye.tolist(), cam.target.tolist(), up.tolist())
        fov = float(np.degrees(2 * np.arctan(cam.height / (2 * cam.K[1, 1]))))
        self.near, self.far = 0.05, 3.0
        proj = self.p.computeProjectionMatrixFOV(fov, cam.width / cam.height, self.near, self.far)
        return view, proj

    def observe(self) -> dict[str, np.ndarray]:
        """RGB (H, W, 3) uint8, metric z-depth (H, W) and segmentation body ids (H, W)."""
        view, proj = self._matrices()
        W, H = self.camera.width, self.camera.height
        _, _, rgba, zbuf, seg = self.p.getCameraImage(W, H, view, proj, renderer=self.p.ER_TINY_RENDERER,
                                                      physicsClientId=self.cid)
        rgba = np.asarray(rgba, np.uint8).reshape(H, W, 4)
        zbuf = np.asarray(zbuf, float).reshape(H, W)
        n, f = self.near, self.far
        depth = f * n / (f - (f - n) * zbuf)  # OpenGL depth buffer -> metric z-depth
        return {"rgb": rgba[..., :3].copy(), "depth": depth, "seg": np.asarray(seg).reshape(H, W)}

    def render(self) -> np.ndarray:
        return self.observe()["rgb"]

    def _info(self) -> dict:
        return {"t": self.t, "closed": self.closed, "ee": self.ee}


def scripted_pick(env: PandaBulletEnv, max_steps: int = 200) -> bool:
    """A scripted pick (or stack) on ``PandaBulletEnv``: above the cube, descend, close, lift (and for
    ``stack``: over the target, lower, open). Closed loop on the measured cube position."""
    template, o, t = env.task
    colour = env.objects[o]

    def go(goal, closed, tol=0.006, limit=80):
        for _ in range(limit):
            d = np.asarray(goal, float) - env.target
            if np.linalg.norm(d) < tol:
                break
            term, trunc = env.advance(np.concatenate([np.clip(d, -MAX_STEP, MAX_STEP), [float(closed)]]))
            if term or trunc or env.t >= max_steps:
                return True
        return False

    po = env.object_position(colour)
    if go(po + [0, 0, 0.10], False) or go(po + [0, 0, 0.0], False):
        return env.success()
    for _ in range(10):
        env.advance(np.array([0.0, 0.0, 0.0, 1.0]))
    if go(env.target + [0, 0, 0.12], True):
        return env.success()
    if template == "stack":
        pt = env._obj_pos(t)
        if go(pt + [0, 0, 0.12], True) or go(pt + [0, 0, CUBE + 0.005], True):
            return env.success()
        for _ in range(10):
            env.advance(np.array([0.0, 0.0, 0.0, 0.0]))
        go(env.target + [0, 0, 0.08], False)
    return env.success()
