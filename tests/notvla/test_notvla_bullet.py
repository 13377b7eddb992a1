"""PandaBulletEnv (optional pybullet backend): camera consistency with our pinhole, the 2 cm clip, the
scripted pick/stack succeeding through the same reset/step/render protocol."""

import numpy as np
import pytest

pytest.importorskip("pybullet")

from neurips26.notvla.pybullet_env import PandaBulletEnv, scripted_pick  # noqa: E402


@pytest.fixture(scope="module")
def env():
    e = PandaBulletEnv(64)
    yield e
    e.close()


def test_bullet_camera_matches_our_pinhole(env):
    obs, info = env.reset(seed=0, options={"template": "pick"})
    assert obs["rgb"].shape == (64, 64, 3) and obs["depth"].shape == (64, 64) and obs["seg"].shape == (64, 64)
    checked = 0
    for bid, colour in env.objects.items():
        top = env._obj_pos(bid) + [0, 0, 0.025]
        uv, z = env.camera.project(top)
        i, j = int(uv[1]), int(uv[0])
        if obs["seg"][i, j] == bid:
            assert abs(obs["depth"][i, j] - z) < 0.01  # pybullet's z-buffer -> our metric z-depth
            checked += 1
    assert checked >= 1
    assert env.instruction().startswith("pick up the ")
    with pytest.raises(ValueError, match="template"):
        env.reset(seed=0, options={"template": "bowl"})


def test_bullet_clip(env):
    env.reset(seed=1, options={"template": "pick"})
    before = env.target.copy()
    env.advance(np.array([0.3, 0.0, 0.0, 0.0]))
    assert np.linalg.norm(env.target - before) <= 0.02 + 1e-12
    with pytest.raises(ValueError, match="action"):
        env.advance(np.zeros(3))


@pytest.mark.slow
def test_bullet_scripted_tasks(env):
    ok = []
    for s in range(4):
        env.reset(seed=s, options={"template": ("pick", "stack")[s % 2]})
        ok.append(scripted_pick(env))
    assert all(ok), ok
