"""Acceptance checks 1-2: renderer depth/segmentation/back-projection, simulator rules, the expert."""

import numpy as np
import pytest

from neurips26.notvla.camera import Camera, CameraShift, SingularIntrinsicsError
from neurips26.notvla.expert import run_expert
from neurips26.notvla.scene import Obj
from neurips26.notvla.sim import NoTableInViewError, TabletopSim


def _ray_top_depth(cam, o, i, j):
    """Analytic z-depth of pixel (j, i)'s centre ray hitting the plane z = top of o."""
    d = cam.ray_dirs()[i, j]
    return (o.top[2] - cam.eye[2]) / d[2]


@pytest.mark.parametrize("seed", range(6))
def test_rendered_depth_equals_analytic_top_face_hit(seed):
    env = TabletopSim(image_size=64)
    env.reset(seed=seed)
    env.ee = np.array([0.9, 0.5, 0.5])  # gripper out of the way
    v = env.views()
    checked = 0
    for o in env.objects.values():
        uv, _ = env.camera.project(o.top)
        j, i = int(uv[0]), int(uv[1])
        if v["seg"][i, j] != o.id:
            continue
        assert abs(v["depth"][i, j] - _ray_top_depth(env.camera, o, i, j)) < 1e-6
        checked += 1
    assert checked >= 1


def test_backproject_inverts_project_and_shift_leaves_world():
    cam = Camera(64, shift=CameraShift(azimuth=20))
    P = np.random.default_rng(0).uniform([0.3, -0.2, 0], [0.6, 0.2, 0.1], (50, 3))
    uv, z = cam.project(P)
    assert np.abs(cam.backproject(uv, z) - P).max() < 1e-9
    env = TabletopSim()
    env.reset(seed=3)
    before = {k: o.pos.copy() for k, o in env.objects.items()}
    img0 = env.render()
    env.set_camera(CameraShift(azimuth=20))
    assert not np.array_equal(img0, env.render())
    assert all(np.array_equal(before[k], o.pos) for k, o in env.objects.items())


def test_segmentation_ids_and_table():
    env = TabletopSim()
    env.reset(seed=1)
    seg = env.views()["seg"]
    assert (seg == 0).sum() > 1000
    assert set(np.unique(seg)) - {-1, 0, 100} <= set(env.objects)


def _place(env, objs):
    env.objects = {o.id: o for o in objs}
    env.ee, env.closed, env.held, env.t = np.array([0.4, 0.0, 0.2]), False, 0, 0


def _go(env, target, grip):
    for _ in range(40):
        env.advance(np.concatenate([np.asarray(target) - env.ee, [grip]]))


def test_attach_release_stack_and_container_rules():
    env = TabletopSim()
    env.reset(seed=0)
    a = Obj(1, "cube", "red", np.array([0.4, 0.0, 0.0]))
    b = Obj(2, "cube", "blue", np.array([0.5, 0.1, 0.0]))
    bowl = Obj(3, "bowl", "green", np.array([0.4, -0.15, 0.0]))
    _place(env, [a, b, bowl])
    _go(env, [0.4, 0.0, 0.04 + 0.02], 0.0)   # 2 cm above the top: too high to grasp
    env.advance(np.array([0, 0, 0, 1.0]))
    assert env.held == 0
    env.advance(np.array([0, 0, 0, 0.0]))
    _go(env, [0.41, 0.0, 0.045], 0.0)        # 1 cm off, 0.5 cm above: grasps
    env.advance(np.array([0, 0, 0, 1.0]))
    assert env.held == 1
    _go(env, [0.5, 0.1, 0.2], 1.0)
    assert a.pos[2] > 0.1
    _go(env, [0.5 + 0.01, 0.1, 0.09], 1.0)
    env.advance(np.array([0, 0, 0, 0.0]))     # within 2 cm of b's centre: stacked
    assert a.support == 2 and abs(a.pos[2] - 0.04) < 1e-12
    _place(env, [Obj(1, "cube", "red", np.array([0.4, 0.0, 0.0])), bowl])
    _go(env, [0.4, 0.0, 0.04], 0.0)
    env.advance(np.array([0, 0, 0, 1.0]))
    _go(env, [0.4 + 0.045, -0.15, 0.1], 1.0)   # 4.5 cm off the bowl centre (< 5 cm): inside
    env.advance(np.array([0, 0, 0, 0.0]))
    assert env.objects[1].support == 3
    _place(env, [Obj(1, "cube", "red", np.array([0.4, 0.0, 0.0])), bowl])
    _go(env, [0.4, 0.0, 0.04], 0.0)
    env.advance(np.array([0, 0, 0, 1.0]))
    _go(env, [0.4 + 0.055, -0.15, 0.1], 1.0)   # 5.5 cm off: onto the table
    env.advance(np.array([0, 0, 0, 0.0]))
    assert env.objects[1].support == 0 and env.objects[1].pos[2] == 0.0


def test_step_clip_and_action_width():
    env = TabletopSim()
    env.reset(seed=0)
    p = env.ee.copy()
    env.step(np.array([0.3, 0.0, 0.0, 0.0]))
    assert np.isclose(np.linalg.norm(env.ee - p), 0.02)
    with pytest.raises(ValueError, match="action must have width 4"):
        env.step(np.zeros(3))
    with pytest.raises(ValueError, match="action"):
        env.step(np.array([np.nan, 0, 0, 0]))


def test_camera_that_sees_no_table_and_singular_intrinsics():
    env = TabletopSim()
    with pytest.raises(NoTableInViewError):
        env.set_camera(Camera(64, eye=(0.0, 0.0, 0.6), target=(-1.0, 0.0, 1.2)))
    with pytest.raises(SingularIntrinsicsError):
        Camera(64, K=np.zeros((3, 3)))


def test_gymnasium_env_checker_and_determinism():
    from gymnasium.utils.env_checker import check_env

    env = TabletopSim()
    check_env(env, skip_render_check=True)
    o1, _ = env.reset(seed=5)
    o2, _ = TabletopSim().reset(seed=5)
    assert np.array_equal(o1["rgb"], o2["rgb"])


@pytest.mark.parametrize("template", ["pick", "bowl", "plate", "stack"])
def test_expert_success(template):
    env = TabletopSim()
    ok = 0
    n = 25
    for s in range(n):
        env.reset(seed=s, options={"template": template})
        ok += run_expert(env, np.random.default_rng(s), record=False).success
    assert ok / n >= 0.98


@pytest.mark.slow
@pytest.mark.parametrize("template", ["pick", "bowl", "plate", "stack"])
def test_expert_success_200(template):
    env = TabletopSim()
    ok = 0
    for s in range(200):
        env.reset(seed=s, options={"template": template})
        ok += run_expert(env, np.random.default_rng(s), record=False).success
    assert ok / 200 >= 0.98


def test_culled_render_equals_full_render():
    """Per-object ray windows (the fast path) give bit-identical RGB, depth and segmentation."""
    from neurips26.notvla.scene import COLOURS, render
    from neurips26.notvla.sim import TEMPLATES, sample_scene

    rng = np.random.default_rng(3)
    for i in range(40):
        shift = CameraShift(float(rng.uniform(-40, 40)), float(rng.uniform(-15, 15)),
                            float(rng.uniform(0.7, 1.3)))
        cam = Camera(48, shift=shift)
        objs, _ = sample_scene(rng, TEMPLATES[i % 4], tuple(COLOURS))
        ee = np.array([rng.uniform(0.2, 0.6), rng.uniform(-0.2, 0.2), rng.uniform(0.02, 0.3)])
        fast, ref = render(cam, objs, ee), render(cam, objs, ee, cull=False)
        for k in ("rgb", "depth", "seg"):
            np.testing.assert_array_equal(fast[k], ref[k])
    # the gripper right in front of the lens: a corner behind the camera falls back to all rays
    cam = Camera(48)
    close = render(cam, [], cam.eye + 0.6 * cam.R[:, 2] - np.array([0, 0, 0.03]))
    np.testing.assert_array_equal(close["seg"], render(cam, [], cam.eye + 0.6 * cam.R[:, 2]
                                                       - np.array([0, 0, 0.03]), cull=False)["seg"])


def test_sample_scene_always_places_without_overlap():
    """Crowded draws (several bowls / plates) are re-laid out instead of failing (pre-training seeds 1 and 2
    hit one); the task objects always come first and nothing overlaps."""
    import numpy as np

    from neurips26.notvla.scene import COLOURS
    from neurips26.notvla.sim import TEMPLATES, sample_scene

    for seed in (1, 2):  # the draws of the pre-training scene pools of seeds 1 and 2 (without rendering)
        rng = np.random.default_rng(seed)
        for i in range(2000):
            rng.uniform(-35, 35), rng.uniform(-12, 12), rng.uniform(0.8, 1.2)  # the random camera
            template = TEMPLATES[int(rng.integers(4))]
            objs, task = sample_scene(rng, template, tuple(COLOURS))
            _check(objs, task, template)


def _check(objs, task, template):
    import numpy as np

    assert len(objs) >= (1 if template == "pick" else 2) and task.obj == 1
    for a in objs:
        for b in objs:
            if a.id < b.id:
                assert np.hypot(*(a.pos[:2] - b.pos[:2])) > a.radius + b.radius
