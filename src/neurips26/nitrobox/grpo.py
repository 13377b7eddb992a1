"""Toy GRPO over generated bug-fix tasks in which every rollout really runs in a sandbox.

Tabular policy theta_j in R^K per task (init 0); the same B tasks (``tasks.generate(B, seed)``) at
every step. Each step: B tasks x G rollouts run concurrently (c = B*G trajectories):
acquire sandbox -> ``cat solution.py`` -> simulated generation delay ``gen_ms`` -> sample
a ~ softmax(theta_j) with ``numpy.random.default_rng([seed, step, j, i])`` -> write candidate a ->
run the verifier (timeout 20 s) -> r = 1[exit 0] -> release (reset). Update (GRPO advantage):

    A_i = (r_i - mean_g r) / (std_g r + 1e-6)            (population std, ddof = 0)
    theta_j += lr * (1/G) * sum_i A_i * (onehot(a_i) - softmax(theta_j))      lr = 1.0
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from neurips26.harness.validation import check_scalar
from neurips26.nitrobox.tasks import VERIFY_CMD, K, Task, generate


def softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def sample_action(theta_j: np.ndarray, seed: int, step: int, j: int, i: int) -> int:
    """a ~ softmax(theta_j) with ``default_rng([seed, step, j, i])`` (a list: the 4-arg form raises)."""
    rng = np.random.default_rng([seed, step, j, i])
    return int(rng.choice(K, p=softmax(theta_j)))


def grpo_update(theta: np.ndarray, actions: np.ndarray, rewards: np.ndarray, lr: float = 1.0) -> np.ndarray:
    """One GRPO step for all tasks; ``actions``/``rewards`` have shape (B, G)."""
    B, G = actions.shape
    new = theta.copy()
    for j in range(B):
        r = rewards[j].astype(float)
        adv = (r - r.mean()) / (r.std(ddof=0) + 1e-6)          # A_i = (r_i - mean) / (std + 1e-6)
        p = softmax(theta[j])
        onehot = np.eye(K)[actions[j]]                          # (G, K)
        new[j] = theta[j] + lr * (adv[:, None] * (onehot - p[None, :])).sum(0) / G
    return new


@dataclass
class GRPOResult:
    backend: str
    gen_ms: float
    actions: list = field(default_factory=list)       # per step: B x G
    rewards: list = field(default_factory=list)       # per step: B x G
    labels: list = field(default_factory=list)        # per step: oracle labels of the sampled actions
    pass_rate: list = field(default_factory=list)     # per step
    p_correct: list = field(default_factory=list)     # per step, after the update (mean over tasks)
    wall_s: list = field(default_factory=list)        # per step
    sandbox_s: float = 0.0                            # summed over rollouts
    rollout_s: float = 0.0                            # summed over rollouts
    create_s: float = 0.0
    teardown_s: float = 0.0

    @property
    def sandbox_share(self) -> float:
        """f: fraction of rollout time spent in sandbox operations."""
        return self.sandbox_s / self.rollout_s if self.rollout_s > 0 else float("nan")

    def to_dict(self) -> dict:
        return {"backend": self.backend, "gen_ms": self.gen_ms, "pass_rate": self.pass_rate,
                "p_correct": self.p_correct, "wall_s": self.wall_s,
                "mean_wall_per_step_s": float(np.mean(self.wall_s)) if self.wall_s else float("nan"),
                "sandbox_share": self.sandbox_share, "create_s": self.create_s,
                "teardown_s": self.teardown_s, "rewards": self.rewards, "actions": self.actions,
                "rewards_equal_labels": self.rewards == self.labels}


def run_grpo(backend, B: int = 4, G: int = 4, steps: int = 2, seed: int = 0, gen_ms: float = 0.0,
             lr: float = 1.0, verify_timeout: float = 20.0, tasks: list[Task] | None = None,
             progress=None) -> GRPOResult:
    """Run the loop on ``backend`` (a ``SandboxBackend``; ``None`` = oracle rewards, no sandbox)."""
    for name, v in (("B", B), ("G", G), ("steps", steps)):
        check_scalar(v, name, int, min=1)
    check_scalar(gen_ms, "gen_ms", float, min=0)
    tasks = tasks if tasks is not None else generate(B, seed)
    theta = np.zeros((B, K))
    res = GRPOResult(getattr(backend, "name", "oracle"), float(gen_ms))
    c = B * G
    handles: list = []
    lock = threading.Lock()
    pool = ThreadPoolExecutor(max_workers=c) if backend is not None else None
    try:
        if backend is not None:
            t0 = time.perf_counter()
            handles = list(pool.map(lambda _: backend.create(), range(c)))
            res.create_s = time.perf_counter() - t0
        for step in range(steps):
            probs_theta = theta.copy()

            def rollout(slot: int):
                j, i = divmod(slot, G)
                task = tasks[j]
                t_start = time.perf_counter()
                sb_time = 0.0
                if backend is not None:
                    h = handles[slot]
                    t = time.perf_counter()
                    for fname, content in task.files.items():
                        backend.write_file(h, f"/workspace/{fname}", content.encode())
                    backend.exec(h, "cat solution.py", timeout=verify_timeout)
                    sb_time += time.perf_counter() - t
                if gen_ms:
                    time.sleep(gen_ms / 1000.0)                  # simulated LLM generation
                a = sample_action(probs_theta[j], seed, step, j, i)
                if backend is not None:
                    t = time.perf_counter()
                    backend.write_file(h, "/workspace/solution.py", task.candidates[a].encode())
                    code, _ = backend.exec(h, VERIFY_CMD, timeout=verify_timeout)
                    r = task.label(a) if getattr(backend, "oracle_rewards", False) else int(code == 0)
                    handles[slot] = backend.reset(h)             # release: back to the image
                    sb_time += time.perf_counter() - t
                else:
                    r = task.label(a)
                with lock:
                    res.sandbox_s += sb_time
                    res.rollout_s += time.perf_counter() - t_start
                return a, r, task.label(a)

            t0 = time.perf_counter()
            outs = list(pool.map(rollout, range(c))) if pool is not None else [rollout(s) for s in range(c)]
            res.wall_s.append(time.perf_counter() - t0)
            actions = np.array([o[0] for o in outs]).reshape(B, G)
            rewards = np.array([o[1] for o in outs]).reshape(B, G)
            labels = np.array([o[2] for o in outs]).reshape(B, G)
            theta = grpo_update(theta, actions, rewards, lr)
            res.actions.append(actions.tolist())
            res.rewards.append(rewards.tolist())
            res.labels.append(labels.tolist())
            res.pass_rate.append(float(rewards.mean()))
            res.p_correct.append(float(np.mean([softmax(theta[j])[tasks[j].correct] for j in range(B)])))
            if progress is not None:
                progress(step)
    finally:
        if backend is not None:
            t0 = time.perf_counter()
            if pool is not None and handles:
                list(pool.map(backend.delete, handles))
            res.teardown_s = time.perf_counter() - t0
        if pool is not None:
            pool.shutdown()
    return res
