"""Episodes exported in the LeRobot dataset format (v2.0 layout), written here without the lerobot package.

Layout (one parquet file per episode, as LeRobot v2 lays it out)::

    root/meta/info.json          codebase_version "v2.0", fps, totals, path templates, features
    root/meta/episodes.jsonl     {"episode_index", "tasks": [instruction], "length"}
    root/meta/tasks.jsonl        {"task_index", "task"}
    root/meta/stats.json         per feature: mean / std / min / max over all frames
    root/data/chunk-000/episode_000000.parquet

Columns per frame ``t``: ``observation.state`` = (x, y, z, gripper) float32 before the action,
``action`` = (dx, dy, dz, grip) float32, ``observation.images.head`` (dtype ``image``: a struct of PNG
``bytes`` and ``path``, as Hugging Face ``datasets.Image`` stores it; LeRobot's image-dtype features),
``timestamp`` = t / fps, ``frame_index``, ``episode_index``, ``index`` (global), ``task_index``,
``next.done`` (last frame), ``next.reward`` (1.0 at the last frame of a successful episode).
No video encoder is needed (the image dtype instead of ``video``; ``total_videos`` = 0).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

CODEBASE_VERSION = "v2.0"
CHUNKS_SIZE = 1000
DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
IMAGE_KEY = "observation.images.head"


def _png(rgb: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    return buf.getvalue()


def _features(image_size: int) -> dict:
    vec = {"dtype": "float32", "shape": [4]}
    return {
        "observation.state": vec | {"names": ["x", "y", "z", "gripper"]},
        "action": vec | {"names": ["dx", "dy", "dz", "grip"]},
        IMAGE_KEY: {"dtype": "image", "shape": [image_size, image_size, 3],
                    "names": ["height", "width", "channel"]},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
        "next.done": {"dtype": "bool", "shape": [1], "names": None},
        "next.reward": {"dtype": "float32", "shape": [1], "names": None},
    }


def _stats(x: np.ndarray) -> dict:
    return {"mean": x.mean(0).tolist(), "std": x.std(0).tolist(), "min": x.min(0).tolist(),
            "max": x.max(0).tolist()}


def export_lerobot(demos, root, image_size: int = 64, fps: int = 20, robot_type: str = "tabletop_sim_ee") -> Path:
    """Write ``demos`` (``Demo`` records with states, e.g. ``run_expert(..., record=True)``) as a LeRobot
    v2.0 dataset under ``root``; returns the root. Frames are re-rendered from the recorded states."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from neurips26.notvla.sim import TabletopSim

    demos = list(demos)
    if not demos:
        raise ValueError("demos: at least one demo is needed")
    if not isinstance(fps, int) or fps <= 0:
        raise ValueError(f"fps must be a positive int, got {fps!r}")
    root = Path(root)
    (root / "meta").mkdir(parents=True, exist_ok=True)
    env = TabletopSim(image_size)
    tasks: dict[str, int] = {}
    episodes, states_all, actions_all, pix = [], [], [], []
    index = 0
    for e, d in enumerate(demos):
        if not d.states or len(d.states) < d.n_steps:
            raise ValueError(f"demos[{e}]: needs the recorded simulator states (run_expert(..., record=True))")
        A = np.asarray(d.actions, np.float32)
        if A.ndim != 2 or A.shape[1] != 4:
            raise ValueError(f"demos[{e}].actions must have shape (N, 4), got {A.shape}")
        n = len(A)
        ti = tasks.setdefault(d.instruction, len(tasks))
        S = np.concatenate([d.positions[:n], d.gripper[:n, None]], 1).astype(np.float32)
        imgs = []
        for t in range(n):
            env.set_state(d.states[t])
            rgb = env.render()
            pix.append(rgb.reshape(-1, 3).mean(0) / 255.0)
            imgs.append({"bytes": _png(rgb), "path": None})
        done = np.zeros(n, bool)
        done[-1] = True
        reward = np.zeros(n, np.float32)
        reward[-1] = float(d.success)
        table = pa.table({
            "observation.state": pa.array(S.tolist(), pa.list_(pa.float32(), 4)),
            "action": pa.array(A.tolist(), pa.list_(pa.float32(), 4)),
            IMAGE_KEY: pa.array(imgs, pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
            "timestamp": pa.array((np.arange(n) / fps).astype(np.float32)),
            "frame_index": pa.array(np.arange(n), pa.int64()),
            "episode_index": pa.array(np.full(n, e), pa.int64()),
            "index": pa.array(index + np.arange(n), pa.int64()),
            "task_index": pa.array(np.full(n, ti), pa.int64()),
            "next.done": pa.array(done),
            "next.reward": pa.array(reward),
        })
        path = root / DATA_PATH.format(episode_chunk=e // CHUNKS_SIZE, episode_index=e)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        episodes.append({"episode_index": e, "tasks": [d.instruction], "length": n})
        states_all.append(S)
        actions_all.append(A)
        index += n
    info = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": len(demos),
        "total_frames": index,
        "total_tasks": len(tasks),
        "total_videos": 0,
        "total_chunks": (len(demos) - 1) // CHUNKS_SIZE + 1,
        "chunks_size": CHUNKS_SIZE,
        "fps": fps,
        "splits": {"train": f"0:{len(demos)}"},
        "data_path": DATA_PATH,
        "video_path": None,
        "features": _features(image_size),
    }
    S, A, P = np.concatenate(states_all), np.concatenate(actions_all), np.array(pix)
    stats = {"observation.state": _stats(S), "action": _stats(A),
             IMAGE_KEY: {k: [[[v]] for v in vals] for k, vals in _stats(P).items()}}  # (3, 1, 1) per channel
    (root / "meta" / "info.json").write_text(json.dumps(info, indent=4))
    (root / "meta" / "stats.json").write_text(json.dumps(stats, indent=4))
    with open(root / "meta" / "episodes.jsonl", "w") as f:
        for ep in episodes:
            f.write(json.dumps(ep) + "\n")
    with open(root / "meta" / "tasks.jsonl", "w") as f:
        for t, i in tasks.items():
            f.write(json.dumps({"task_index": i, "task": t}) + "\n")
    return root


def read_lerobot_episode(root, episode_index: int) -> dict:
    """One exported episode back as arrays: state (N, 4), action (N, 4), images (N, H, W, 3), task."""
    import pyarrow.parquet as pq
    from PIL import Image

    root = Path(root)
    info = json.loads((root / "meta" / "info.json").read_text())
    if not 0 <= episode_index < info["total_episodes"]:
        raise ValueError(f"episode_index must be in [0, {info['total_episodes']}), got {episode_index}")
    path = root / info["data_path"].format(episode_chunk=episode_index // info["chunks_size"],
                                           episode_index=episode_index)
    t = pq.read_table(path).to_pydict()
    tasks = {}
    for line in (root / "meta" / "tasks.jsonl").read_text().splitlines():
        r = json.loads(line)
        tasks[r["task_index"]] = r["task"]
    return {
        "state": np.array(t["observation.state"], np.float32),
        "action": np.array(t["action"], np.float32),
        "images": np.stack([np.asarray(Image.open(io.BytesIO(x["bytes"]))) for x in t[IMAGE_KEY]]),
        "timestamp": np.array(t["timestamp"]),
        "task": tasks[t["task_index"][0]],
    }
