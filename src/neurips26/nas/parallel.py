"""Runs are independent (instance x seed x algorithm): map them over a process pool (default) or Ray
tasks (``backend="ray"`` or ``"auto"`` when Ray is installed), each worker single-threaded.
Results come back in task order, so the aggregation is the same whatever the backend."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

BACKENDS = ("serial", "process", "ray", "auto")


def _single_thread() -> None:
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def map_tasks(fn: Callable[[Any], Any], tasks: Sequence[Any], workers: int = 1, backend: str = "process",
              progress: Callable[[Iterable], Iterable] | None = None) -> list:
    """[fn(t) for t in tasks], in order. workers <= 1 or backend 'serial' runs in this process."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be an int >= 0 (0 = all CPUs), got {workers!r}")
    workers = workers or os.cpu_count() or 1
    progress = progress or (lambda it: it)
    if backend == "auto":
        backend = "ray" if ray_available() else "process"
    if backend == "serial" or workers == 1 or len(tasks) <= 1:
        return [fn(t) for t in progress(tasks)]
    if backend == "ray":
        import ray

        if not ray.is_initialized():
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}})
        remote = ray.remote(num_cpus=1)(fn)
        refs = [remote.remote(t) for t in tasks]
        out = []
        for r in progress(refs):
            out.append(ray.get(r))
        return out
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers, initializer=_single_thread) as pool:
        return list(progress(pool.map(fn, tasks, chunksize=1)))
