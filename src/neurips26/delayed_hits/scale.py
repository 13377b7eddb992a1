"""Scale-out: sweeps as Ray tasks (when Ray is installed) or local worker processes, and the
sharded-cache path for one huge trace.

* ``run_tasks(fn, tasks, backend)``: ``fn(task)`` for every task; ``backend`` = "serial",
  "process" (a fork-based process pool of ``workers``), "ray" (``ray.remote`` tasks on the running
  or a new local Ray instance) or "auto" (Ray if importable and already initialised, else
  processes). Results come back in task order.
* ``sweep(trace_path, policies, Zs, Ks, seeds, backend)``: the (policy x Z x K x seed) grid over one
  trace file; each task memory-maps its own trace (``numpy.memmap`` of an oracleGeneral file) so no
  copy of the trace travels with the task. Returns plain dict rows (``to_parquet`` writes them with
  pyarrow when installed).
* ``sharded_simulate(trace, make_policy, K, Z, S, backend)``: the cache is sharded by
  hash(id) mod S (set-associative, like Atre et al.'s ``--csa``); shard s has capacity
  floor(K/S) (+1 for the first K mod S shards) and sees only its own items; each shard is an
  independent simulator (a Ray actor per shard with backend="ray"); total latency = sum over
  shards. Regret guarantees then hold per shard.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Sequence

import multiprocessing as mp
import numpy as np

from neurips26.delayed_hits.simulator import check_int
from neurips26.delayed_hits.trace import Trace, as_trace

BACKENDS = ("auto", "serial", "process", "ray")


def _ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def run_tasks(fn: Callable[[Any], Any], tasks: Sequence[Any], backend: str = "auto",
              workers: int = 2) -> list:
    """``[fn(t) for t in tasks]`` on the chosen backend (results in task order)."""
    return list(iter_tasks(fn, tasks, backend, workers))


def iter_tasks(fn: Callable[[Any], Any], tasks: Sequence[Any], backend: str = "auto",
               workers: int = 2):
    """Like ``run_tasks`` but yields the results (in task order) as they become available."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    workers = check_int("workers", workers, lo=1)
    tasks = list(tasks)
    if backend == "auto":
        backend = "process"
        if _ray_available():
            import ray

            if ray.is_initialized():
                backend = "ray"
    if backend == "serial" or (backend == "process" and (workers == 1 or len(tasks) <= 1)):
        for t in tasks:
            yield fn(t)
        return
    if backend == "process":
        ctx = mp.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as ex:
            yield from ex.map(fn, tasks)
        return
    if not _ray_available():
        raise ImportError("backend='ray' needs ray: pip install 'neurips26[scale]'")
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(num_cpus=1)(fn)
    refs = [remote.remote(t) for t in tasks]
    for r in refs:
        yield ray.get(r)


def _sweep_task(task: dict) -> dict:
    from neurips26.delayed_hits.experiment import make_policy
    from neurips26.delayed_hits.simulator import simulate
    from neurips26.delayed_hits.trace import read_oracle_general

    tr = read_oracle_general(task["path"])            # memory-mapped read of the task's trace
    pol = make_policy(task["policy"], seed=task["seed"])
    r = simulate(tr, pol, K=task["K"], Z=task["Z"])
    return {"policy": task["policy"], "Z": task["Z"], "K": task["K"], "seed": task["seed"],
            "mean_latency": r.mean_latency, "miss_ratio": r.miss_ratio,
            "delayed_hit_ratio": r.delayed_hit_ratio, "static_regret": r.static_regret(),
            "shadow_regret": r.shadow_regret(), "requests": r.n_requests}


def sweep(trace_path: str | os.PathLike, policies: Sequence[str], Zs: Sequence[int], Ks: Sequence[int],
          seeds: Sequence[int] = (0,), backend: str = "auto", workers: int = 2) -> list[dict]:
    """The (policy x Z x K x seed) grid on one oracleGeneral trace file (see module docstring)."""
    from neurips26.delayed_hits.experiment import POLICY_NAMES

    for p in policies:
        if p not in POLICY_NAMES:
            raise ValueError(f"policies: unknown policy {p!r}; known: {sorted(POLICY_NAMES)}")
    tasks = [{"path": str(trace_path), "policy": p, "Z": check_int("Z", z, lo=1),
              "K": check_int("K", k, lo=1), "seed": check_int("seed", s, lo=0)}
             for p in policies for z in Zs for k in Ks for s in seeds]
    return run_tasks(_sweep_task, tasks, backend=backend, workers=workers)


def to_parquet(rows: list[dict], path: str | os.PathLike) -> None:
    """Write sweep rows as Parquet (needs pyarrow, e.g. via ``pip install 'ray[data]'``)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("to_parquet needs pyarrow (pip install pyarrow); to_csv needs nothing") from None
    pq.write_table(pa.Table.from_pylist(rows), str(path))


def to_csv(rows: list[dict], path: str | os.PathLike) -> None:
    """Write sweep rows as CSV (header from the first row)."""
    import csv

    if not rows:
        raise ValueError("rows is empty")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def shard_of(ids: np.ndarray, S: int) -> np.ndarray:
    """hash(id) mod S with a fixed 64-bit mixer (splitmix64), stable across processes."""
    x = np.asarray(ids, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x % np.uint64(S)).astype(np.int64)


def shard_capacities(K: int, S: int) -> list[int]:
    """floor(K/S) each, the remainder spread over the first shards."""
    return [K // S + (1 if s < K % S else 0) for s in range(S)]


def _shard_trace(tr: Trace, mask_items: np.ndarray) -> Trace:
    """The sub-trace of the items with mask_items[i] True, keeping every slot (idle where empty)."""
    keep = mask_items[tr.ids]
    slots = tr.slot_of_request()[keep]
    per = np.bincount(slots, minlength=tr.n_slots + 1)[1:]
    ptr = np.zeros(tr.n_slots + 1, dtype=np.int64)
    np.cumsum(per, out=ptr[1:])
    return Trace(tr.ids[keep], ptr, tr.n_items, f"{tr.name} shard")


def _run_shard(args) -> dict:
    tr, make_policy, K, Z = args
    from neurips26.delayed_hits.simulator import simulate

    if K == 0 or tr.n_requests == 0:
        from neurips26.delayed_hits.shadow import shadow_losses

        L = shadow_losses(tr, Z) if tr.n_requests else np.zeros(tr.n_items, dtype=np.int64)
        return {"total_latency": int(L.sum()), "misses": -1, "requests": tr.n_requests}
    r = simulate(tr, make_policy(), K=K, Z=Z)
    return {"total_latency": r.total_latency, "misses": r.misses, "requests": r.n_requests}


def sharded_simulate(trace, make_policy: Callable[[], Any], K: int, Z: int, S: int,
                     backend: str = "serial", workers: int = 2) -> dict:
    """Shard the cache by hash(id) mod S; returns total latency and per-shard results.

    With backend="ray" each shard is a Ray actor fed with its partition of the stream.
    """
    tr = as_trace(trace)
    K, Z, S = check_int("K", K, lo=1), check_int("Z", Z, lo=1), check_int("S", S, lo=1)
    if S > K:
        raise ValueError(f"S must be <= K (every shard needs capacity >= 1), got S={S}, K={K}")
    owner = shard_of(np.arange(tr.n_items), S)
    caps = shard_capacities(K, S)
    parts = [(_shard_trace(tr, owner == s), make_policy, caps[s], Z) for s in range(S)]
    if backend == "ray":
        if not _ray_available():
            raise ImportError("backend='ray' needs ray: pip install 'neurips26[scale]'")
        import ray

        if not ray.is_initialized():
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)

        @ray.remote(num_cpus=0.5)
        class Shard:
            def __init__(self, part):
                self.part = part

            def run(self):
                return _run_shard(self.part)

        actors = [Shard.remote(p) for p in parts]
        res = ray.get([a.run.remote() for a in actors])
    else:
        res = run_tasks(_run_shard, parts, backend="serial" if backend == "auto" else backend,
                        workers=workers)
    return {"total_latency": int(sum(r["total_latency"] for r in res)), "shards": res,
            "capacities": caps, "requests": tr.n_requests}
