"""The harness grid as ``neurips26.harness.parallel.map_tasks`` tasks: one cell, one task, one shard.

A ``Cell`` is (``TaskSpec``, ``ModelEntry`` built from a ``ModelSpec``, ``Protocol``, seed): every part
pickles, so a process pool or Ray worker rebuilds the dataset and the model from names and kwargs.
``run_cells(cells, results_path, backend=...)``:

1. keys: each cell's row key (SHA-256 of task hash, model name + config, protocol knobs, seed), the same
   key ``Runner.run`` uses; cells whose key is already in the results file or in a shard are skipped
   (resume), repeated keys in ``cells`` are computed once;
2. reuse: of the cells whose seed touches nothing (``Runner.reuse_key``), only the first (in cell order)
   is computed; the others get its numbers, ``reused_from_seed`` recorded (decided before any task runs,
   so the same rows come out whatever the backend);
3. ``map_tasks(run_cell, ...)``: each task evaluates its cell in a per-process ``Runner`` (features and
   models cached per process), writes its row as one shard ``<shard_dir>/<key>.json`` (atomic rename)
   and returns it;
4. merge: the rows already in the results file (in file order), then every cell's row in cell order,
   de-duplicated by key, written to ``results_path`` atomically under a file lock; merged shards are
   removed. Rows (wall time, timestamp and git sha aside) are bit-identical across backends and worker
   counts, and equal to ``Runner.run`` over the same cells in the same order.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from neurips26.gfm_audit.harness.data import (
    Task,
    digits_task,
    lfw_task,
    multispectral_task,
    random_split,
    spatial_split,
    texture_task,
)
from neurips26.gfm_audit.harness.protocol import Protocol
from neurips26.gfm_audit.harness.runner import ModelEntry, Runner
from neurips26.gfm_audit.harness.zoo import ModelSpec
from neurips26.harness.parallel import map_tasks
from neurips26.harness.validation import check_choice, check_scalar

_DATASETS = {
    "digits": digits_task,
    "textures": texture_task,
    "lfw_subset": lfw_task,
    "multispectral": multispectral_task,
}


@dataclass(frozen=True)
class TaskSpec:
    """A picklable dataset: a registered name, its kwargs, and the split.

    split: ``"fixed"`` (the dataset's own hashed split), ``"spatial"`` (longitude blocks) or
    ``"random:<salt>"`` (a fresh SHA-256 split with that salt). The unlabeled pool (normalisation
    statistics, local pretraining) stays the dataset's own in every case, so a pretrained encoder is the
    same checkpoint whatever the split — as a released model evaluated on another split would be.
    """

    dataset: str
    kwargs: tuple = ()
    split: str = "fixed"

    def __post_init__(self) -> None:
        check_choice(self.dataset, "dataset", tuple(_DATASETS))
        if not (self.split in ("fixed", "spatial") or self.split.startswith("random:")):
            raise ValueError(f"split must be 'fixed', 'spatial' or 'random:<salt>', got {self.split!r}")

    def build(self) -> Task:
        """The task (cached per process: building is deterministic)."""
        if self not in _TASK_CACHE:
            base = TaskSpec(self.dataset, self.kwargs)
            if base not in _TASK_CACHE:
                _TASK_CACHE[base] = _DATASETS[self.dataset](**dict(self.kwargs))
            t = _TASK_CACHE[base]
            if self.split == "spatial":
                if t.coords is None:
                    raise ValueError(f"split 'spatial' needs coordinates; {self.dataset} has none")
                t = t.with_splits(spatial_split(t.coords[:, 0]), "spatial")
            elif self.split.startswith("random:"):
                salt = self.split.split(":", 1)[1]
                t = t.with_splits(random_split(len(t.y), salt=salt), f"split-{salt}")
            _TASK_CACHE[self] = t
        return _TASK_CACHE[self]


def task_spec(dataset: str, split: str = "fixed", **kwargs: Any) -> TaskSpec:
    return TaskSpec(dataset, tuple(sorted(kwargs.items())), split)


_TASK_CACHE: dict[TaskSpec, Task] = {}
_WORKER: dict[str, Runner] = {}


@dataclass(frozen=True)
class Cell:
    """One grid cell; ``model.build`` must be a ``ModelSpec`` (picklable)."""

    task: TaskSpec
    model: ModelEntry
    protocol: Protocol
    seed: int

    def __post_init__(self) -> None:
        if not isinstance(self.task, TaskSpec):
            raise TypeError(f"task must be a TaskSpec, got {type(self.task).__name__}")
        if not isinstance(self.model, ModelEntry) or not isinstance(self.model.build, ModelSpec):
            raise TypeError("model must be a ModelEntry built by a ModelSpec (zoo.model_entry), so it pickles")
        if not isinstance(self.protocol, Protocol):
            raise TypeError(f"protocol must be a Protocol, got {type(self.protocol).__name__}")
        check_scalar(self.seed, "seed", int, min=0)

    def key(self) -> str:
        return Runner.cell_key(self.task.build(), self.model, self.protocol, self.seed)


@dataclass(frozen=True)
class _Job:
    cell: Cell
    key: str
    shard_dir: str | None
    threads: int | None


@dataclass
class GridResult:
    rows: list[dict]  # one per input cell, in cell order
    stats: dict = field(default_factory=dict)


@contextmanager
def thread_limit(threads: int | None) -> Iterator[None]:
    """torch and BLAS (OpenBLAS / MKL via threadpoolctl) limited to ``threads`` inside the block."""
    if threads is None:
        yield
        return
    # load scipy's OpenBLAS and sklearn's OpenMP runtime now: threadpoolctl limits loaded libraries only
    import scipy.linalg  # noqa: F401
    import sklearn.utils._openmp_helpers  # noqa: F401
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(threads):
            yield
    finally:
        torch.set_num_threads(before)


def run_cell(job: _Job) -> tuple[dict, dict]:
    """One task of the grid (module-level, picklable): the row, and the worker's feature-cache counts."""
    runner = _WORKER.setdefault("runner", Runner(None))
    before = (runner.stats["feature_hits"], runner.stats["feature_misses"])
    c = job.cell
    with thread_limit(job.threads):
        row = runner.compute(c.task.build(), c.model, c.protocol, c.seed, job.key)
    if job.shard_dir is not None:
        _write_atomic(Path(job.shard_dir) / f"{job.key}.json", json.dumps(row, sort_keys=True))
    return row, {
        "feature_hits": runner.stats["feature_hits"] - before[0],
        "feature_misses": runner.stats["feature_misses"] - before[1],
    }


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def _read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def shard_dir_for(results_path: Path | str) -> Path:
    p = Path(results_path)
    return p.with_name(f"{p.name}.shards")


def run_cells(
    cells: Sequence[Cell],
    results_path: Path | str | None = None,
    backend: str = "serial",
    workers: int | None = None,
    threads: int | None = 1,
    shard_dir: Path | str | None = None,
    progress: bool = False,
) -> GridResult:
    """Run ``cells`` as ``map_tasks`` tasks (steps 1-4 of the module docstring); rows in cell order.

    backend, workers: as ``map_tasks`` (``serial``, ``process``, ``ray``, ``auto``).
    threads: torch + BLAS threads per task (None: leave as is); equal settings give bit-identical rows.
    shard_dir: where tasks write their shards (default ``<results_path>.shards``; none without a path).
    """
    cells = list(cells)
    if not cells:
        raise ValueError("cells must hold at least one cell, got an empty list")
    for i, c in enumerate(cells):
        if not isinstance(c, Cell):
            raise TypeError(f"cells[{i}] must be a Cell, got {type(c).__name__}")
    if threads is not None:
        threads = check_scalar(threads, "threads", int, min=1)
    path = Path(results_path) if results_path is not None else None
    sdir = Path(shard_dir) if shard_dir is not None else (shard_dir_for(path) if path is not None else None)
    existing = _read_rows(path) if path is not None else []
    done: dict[str, dict] = {r["key"]: r for r in existing}
    shard_rows: dict[str, dict] = {}
    if sdir is not None and sdir.is_dir():
        for f in sorted(sdir.glob("*.json")):
            r = json.loads(f.read_text())
            shard_rows.setdefault(r["key"], r)
    for k, r in shard_rows.items():
        done.setdefault(k, r)
    # plan (steps 1-2)
    keys, sources, to_run, first_of = [], {}, [], {}
    stats = {"cells": len(cells), "skipped": 0, "duplicates": 0, "computed": 0, "reused": 0}
    for c in cells:
        task = c.task.build()
        k = Runner.cell_key(task, c.model, c.protocol, c.seed)
        keys.append(k)
        rk = Runner.reuse_key(task, c.model, c.protocol)
        if k in done:
            stats["skipped"] += 1
            if rk is not None:
                sources.setdefault(rk, k)
            continue
        if k in first_of:
            stats["duplicates"] += 1
            continue
        first_of[k] = c
        if rk is not None:
            if rk in sources:
                stats["reused"] += 1
                continue
            sources[rk] = k
        to_run.append(_Job(c, k, str(sdir) if sdir is not None else None, threads))
    # step 3 (a serial run evaluates in this process: its cache lives for this call only)
    _WORKER.clear()
    try:
        outs = map_tasks(
            run_cell, to_run, backend=backend, workers=workers, desc="harness grid", progress=progress
        )
    finally:
        _WORKER.clear()
    computed = {job.key: row for job, (row, _) in zip(to_run, outs)}
    stats["computed"] = len(computed)
    stats["feature_hits"] = sum(s["feature_hits"] for _, s in outs)
    stats["feature_misses"] = sum(s["feature_misses"] for _, s in outs)
    # derived rows and the rows in cell order
    rows_by_key = dict(done)
    rows_by_key.update(computed)
    for c, k in zip(cells, keys):
        if k in rows_by_key:
            continue
        rk = Runner.reuse_key(c.task.build(), c.model, c.protocol)
        rows_by_key[k] = Runner.reused_row(rows_by_key[sources[rk]], k, c.seed)
    rows = [rows_by_key[k] for k in keys]
    # step 4
    if path is not None:
        _merge(path, existing, rows, sdir)
    return GridResult(rows, stats)


def _merge(path: Path, existing: list[dict], rows: list[dict], sdir: Path | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            current = _read_rows(path)  # another process may have merged meanwhile
            seen, out = set(), []
            for r in current + existing + rows:
                if r["key"] not in seen:
                    seen.add(r["key"])
                    out.append(r)
            _write_atomic(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in out))
            if sdir is not None and sdir.is_dir():
                for f in sdir.glob("*.json"):
                    if f.stem in seen:
                        f.unlink()
                if not any(sdir.iterdir()):
                    sdir.rmdir()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def rows_equal(a: Sequence[dict], b: Sequence[dict]) -> bool:
    """Row lists equal with the volatile fields (wall time, timestamp, git sha) left out."""
    from neurips26.gfm_audit.harness.runner import row_without_volatile

    return [row_without_volatile(r) for r in a] == [row_without_volatile(r) for r in b]


__all__ = ["Cell", "GridResult", "TaskSpec", "run_cell", "run_cells", "rows_equal", "shard_dir_for", "task_spec"]
