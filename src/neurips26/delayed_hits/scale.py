"""Scale-out: sweeps through the harness's task map, and the sharded-cache path for one huge trace.

* Parallel work goes through ``neurips26.harness.parallel.map_tasks`` (``backend`` = "serial",
  "process", "ray" or "auto": Ray when a cluster is already running or ``address`` is given, else
  local processes; failures are reported per task). There is no task map of our own.
* ``sweep(trace_path, policies, Zs, Ks, seeds, backend)``: the (policy x Z x K x seed) grid over one
  trace file; each task memory-maps its own trace (``numpy.memmap`` of an oracleGeneral file) so no
  copy of the trace travels with the task. Returns plain dict rows (``to_parquet`` writes them with
  pyarrow when installed).
* ``sharded_simulate(trace, make_policy, K, Z, S, backend)``: the cache is sharded by
  hash(id) mod S (set-associative, like Atre et al.'s ``--csa``); shard s has capacity
  floor(K/S) (+1 for the first K mod S shards) and sees only its own items; each shard is an
  independent simulator (one task per shard, so a Ray cluster runs them on its nodes); total
  latency = sum over shards. Regret guarantees then hold per shard.
"""

from __future__ import annotations

import csv
import os
from typing import Any, Callable, Sequence

import numpy as np

from neurips26.harness.parallel import map_tasks
from neurips26.harness.validation import check_choice, check_scalar
from neurips26.delayed_hits.catalog import POLICY_NAMES, make_policy
from neurips26.delayed_hits.shadow import shadow_losses
from neurips26.delayed_hits.simulator import simulate
from neurips26.delayed_hits.trace import Trace, as_trace, read_oracle_general


def _sweep_task(task: dict) -> dict:
    tr = read_oracle_general(task["path"])            # memory-mapped read of the task's trace
    pol = make_policy(task["policy"], seed=task["seed"])
    r = simulate(tr, pol, K=task["K"], Z=task["Z"])
    return {"policy": task["policy"], "Z": task["Z"], "K": task["K"], "seed": task["seed"],
            "mean_latency": r.mean_latency, "miss_ratio": r.miss_ratio,
            "delayed_hit_ratio": r.delayed_hit_ratio, "static_regret": r.static_regret(),
            "shadow_regret": r.shadow_regret(), "requests": r.n_requests}


def sweep(trace_path: str | os.PathLike, policies: Sequence[str], Zs: Sequence[int], Ks: Sequence[int],
          seeds: Sequence[int] = (0,), backend: str = "auto", workers: int | None = None,
          address: str | None = None) -> list[dict]:
    """The (policy x Z x K x seed) grid on one oracleGeneral trace file (see module docstring);
    ``backend``/``workers``/``address`` go to ``map_tasks``."""
    for p in policies:
        check_choice(p, "policies", sorted(POLICY_NAMES))
    tasks = [{"path": str(trace_path), "policy": p, "Z": check_scalar(z, "Z", int, min=1),
              "K": check_scalar(k, "K", int, min=1), "seed": check_scalar(s, "seed", int, min=0)}
             for p in policies for z in Zs for k in Ks for s in seeds]
    return map_tasks(_sweep_task, tasks, backend=backend, workers=workers, address=address,
                     desc="sweep", mp_start="fork")


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
    if K == 0 or tr.n_requests == 0:
        L = shadow_losses(tr, Z) if tr.n_requests else np.zeros(tr.n_items, dtype=np.int64)
        return {"total_latency": int(L.sum()), "misses": -1, "requests": tr.n_requests}
    r = simulate(tr, make_policy(), K=K, Z=Z)
    return {"total_latency": r.total_latency, "misses": r.misses, "requests": r.n_requests}


def sharded_simulate(trace, make_policy: Callable[[], Any], K: int, Z: int, S: int,
                     backend: str = "serial", workers: int | None = None,
                     address: str | None = None) -> dict:
    """Shard the cache by hash(id) mod S; returns total latency and per-shard results.

    One task per shard through ``map_tasks`` (``backend`` as there; ``make_policy`` must pickle for
    the process backend, Ray pickles closures too).
    """
    tr = as_trace(trace)
    K, Z = check_scalar(K, "K", int, min=1), check_scalar(Z, "Z", int, min=1)
    S = check_scalar(S, "S", int, min=1)
    if S > K:
        raise ValueError(f"S must be <= K (every shard needs capacity >= 1), got S={S}, K={K}")
    owner = shard_of(np.arange(tr.n_items), S)
    caps = shard_capacities(K, S)
    parts = [(_shard_trace(tr, owner == s), make_policy, caps[s], Z) for s in range(S)]
    res = map_tasks(_run_shard, parts, backend=backend, workers=workers, address=address,
                    desc="shards", mp_start="fork")
    return {"total_latency": int(sum(r["total_latency"] for r in res)), "shards": res,
            "capacities": caps, "requests": tr.n_requests}
