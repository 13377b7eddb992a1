"""Lifecycle micro-benchmarks shared by ``experiment.py`` and ``bench.py``.

Backends are interleaved per iteration (the machine is shared and noisy), so ratios compare
neighbouring measurements. Each iteration: create, exec ``true``, exec ``echo``, write_file 1 KiB,
read_file, 100 writes then reset, delete. A backend with ``before_cold_create`` (NitroBox: it empties
its pool of standby trees) gets it before the timed create, so ``create`` always spawns; NitroBox's
create right after a delete (a pool hit) is ``create_pooled``.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

OPS = ("create", "create_pooled", "exec_true", "exec_echo", "write_1k", "read_1k", "reset", "delete", "delete_free")
WRITE_100 = "for i in $(seq 100); do echo $i > /workspace/f$i; done"


def _took(be, t: float) -> float:
    """Seconds since ``t``, or the backend's own measurement of its last call (an out-of-process
    anchor reports the time inside its worker, without our pipe round trip)."""
    inner = getattr(be, "last_inner_s", None)
    return inner if inner is not None else time.perf_counter() - t


def one_lifecycle(be, out: dict[str, list[float]]) -> None:
    pc = time.perf_counter
    cold = getattr(be, "before_cold_create", None)
    if cold is not None:
        cold()
    t = pc()
    h = be.create()
    out["create"].append(_took(be, t))
    t = pc()
    code, _ = be.exec(h, "true")
    out["exec_true"].append(_took(be, t))
    t = pc()
    code, text = be.exec(h, "echo hi")
    out["exec_echo"].append(_took(be, t))
    if (code, text) != (0, "hi\n"):
        raise RuntimeError(f"{be.name}: echo returned {(code, text)!r}")
    payload = b"x" * 1024
    t = pc()
    be.write_file(h, "/workspace/k.bin", payload)
    out["write_1k"].append(_took(be, t))
    t = pc()
    back = be.read_file(h, "/workspace/k.bin")
    out["read_1k"].append(_took(be, t))
    if back != payload:
        raise RuntimeError(f"{be.name}: read_file returned {len(back)} bytes")
    be.exec(h, WRITE_100)
    t = pc()
    h = be.reset(h)
    out["reset"].append(_took(be, t))
    code, text = be.exec(h, "ls /workspace")
    if text.strip():
        raise RuntimeError(f"{be.name}: reset left {text.split()[:3]}")
    t = pc()
    be.delete(h)
    out["delete"].append(_took(be, t))
    # time-to-free: until every process is gone and the state is unlinked (NitroBox's visible
    # delete returns after SIGKILL + rename; the other backends' delete is already synchronous)
    if getattr(be, "async_delete", False):
        t = pc()
        h = be.create()                      # right after a delete: the pool's tree, when it has one
        if cold is not None:
            out["create_pooled"].append(_took(be, t))
        be.exec(h, WRITE_100)
        t = pc()
        be.delete(h, wait=True)
        out["delete_free"].append(_took(be, t))
    else:
        out["delete_free"].append(out["delete"][-1])


def interleaved(backends: dict[str, Any], reps: dict[str, int],
                track: Callable | None = None) -> dict[str, dict[str, list[float]]]:
    """{backend: {op: [seconds]}}; iteration k runs every backend that still needs reps."""
    samples = {n: {op: [] for op in OPS} for n in backends}
    n_max = max(reps.values()) if reps else 0
    it = range(n_max) if track is None else track(range(n_max), desc="micro-benchmarks", total=n_max)
    for k in it:
        for name, be in backends.items():
            if k < reps.get(name, 0):
                one_lifecycle(be, samples[name])
    return samples


def summarize(samples: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """op -> {median_ms, p90_ms, n}."""
    out = {}
    for op, xs in samples.items():
        if xs:
            out[op] = {"median_ms": 1e3 * statistics.median(xs),
                       "p90_ms": 1e3 * float(np.percentile(xs, 90)), "n": len(xs)}
    return out


def lifecycles_per_s(be, c: int, total: int, execs: int = 5) -> float:
    """Full lifecycles (create, ``execs`` x exec, reset, exec, delete) per second at concurrency c."""
    if hasattr(be, "lifecycles_per_s"):  # an out-of-process anchor runs the same loop in its worker
        return be.lifecycles_per_s(c, total, execs)

    def life(_):
        h = be.create()
        for _k in range(execs):
            be.exec(h, "echo x")
        h = be.reset(h)
        be.exec(h, "echo y")
        be.delete(h)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=c) as pool:
        list(pool.map(life, range(total)))
    return total / (time.perf_counter() - t0)
