"""LeRobot v2.0 export: layout, metadata and a lossless round trip of states, actions and frames."""

import json

import numpy as np
import pytest

from neurips26.notvla.expert import run_expert
from neurips26.notvla.lerobot import export_lerobot, read_lerobot_episode
from neurips26.notvla.sim import TabletopSim

pytest.importorskip("pyarrow")


def test_lerobot_export_round_trip(tmp_path):
    env = TabletopSim(64)
    demos, frames0 = [], []
    for s, template in enumerate(("bowl", "stack")):
        env.reset(seed=s, options={"template": template})
        frames0.append(env.render())
        demos.append(run_expert(env, np.random.default_rng(s)))
    root = export_lerobot(demos, tmp_path / "ds")
    info = json.loads((root / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v2.0" and info["fps"] == 20
    assert info["total_episodes"] == 2 and info["total_frames"] == sum(d.n_steps for d in demos)
    assert (root / "data" / "chunk-000" / "episode_000001.parquet").is_file()
    eps = [json.loads(x) for x in (root / "meta" / "episodes.jsonl").read_text().splitlines()]
    assert [e["length"] for e in eps] == [d.n_steps for d in demos]
    stats = json.loads((root / "meta" / "stats.json").read_text())
    assert np.allclose(stats["action"]["max"], np.max(np.concatenate([d.actions for d in demos]), 0), atol=1e-6)
    for e, d in enumerate(demos):
        ep = read_lerobot_episode(root, e)
        assert ep["task"] == d.instruction
        np.testing.assert_allclose(ep["action"], d.actions, atol=1e-6)
        np.testing.assert_allclose(ep["state"][:, :3], d.positions[:-1], atol=1e-6)
        np.testing.assert_array_equal(ep["state"][:, 3], d.gripper[:-1])
        np.testing.assert_array_equal(ep["images"][0], frames0[e])   # PNG is lossless
        assert np.allclose(np.diff(ep["timestamp"]), 0.05)
    with pytest.raises(ValueError, match="episode_index"):
        read_lerobot_episode(root, 2)
    with pytest.raises(ValueError, match="demos"):
        export_lerobot([], tmp_path / "empty")
