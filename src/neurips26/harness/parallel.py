"""``map_tasks``: one task map for the whole project (serial, a process pool, or Ray).

``backend="auto"`` has one meaning everywhere: **Ray when a Ray cluster is already running** (this
process called ``ray.init``, or ``RAY_ADDRESS`` is set) **or an ``address`` is given, otherwise
processes** (serial when there is one task or one worker). Ray is never started behind the user's
back by ``auto``; ``backend="ray"`` starts a local one when none is running.

Results come back in task order. A task that raises does not stop the others: after all have run,
``TaskError`` lists every failure with its index and traceback (``on_error="raise"``), or each
failure is returned in place as a ``TaskFailure`` (``on_error="return"``).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from neurips26.harness.validation import check_choice, check_scalar

BACKENDS = ("auto", "serial", "process", "ray")


@dataclass(frozen=True)
class TaskFailure:
    """One task that raised: its index in the task list, the task, and the formatted traceback."""

    index: int
    task: Any
    error: str

    def __str__(self) -> str:
        last = self.error.strip().splitlines()[-1] if self.error.strip() else "?"
        return f"task {self.index} ({_short(self.task)}): {last}"


class TaskError(RuntimeError):
    """Some tasks failed; ``failures`` holds each, ``results`` the others (``TaskFailure`` in place)."""

    def __init__(self, failures: list[TaskFailure], results: list[Any]):
        self.failures = failures
        self.results = results
        head = "; ".join(str(f) for f in failures[:3])
        more = f" (+{len(failures) - 3} more)" if len(failures) > 3 else ""
        super().__init__(f"{len(failures)} of {len(results)} tasks failed: {head}{more}\n"
                         f"first traceback:\n{failures[0].error}")


def _short(task: Any, n: int = 60) -> str:
    text = repr(task)
    return text if len(text) <= n else text[: n - 1] + "…"


def ray_running() -> bool:
    """True when this process is connected to Ray or ``RAY_ADDRESS`` names a cluster."""
    if os.environ.get("RAY_ADDRESS"):
        return True
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


def resolve_backend(backend: str, n_tasks: int, workers: int | None, address: str | None) -> str:
    """The backend ``map_tasks`` will use (``auto`` resolved as the module docstring says)."""
    check_choice(backend, "backend", BACKENDS)
    if backend != "auto":
        return backend
    if address is not None or ray_running():
        return "ray"
    if n_tasks <= 1 or (workers is not None and workers <= 1):
        return "serial"
    return "process"


def default_workers() -> int:
    """CPUs this process may use (affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _call(fn: Callable[[Any], Any], task: Any) -> tuple[bool, Any]:
    try:
        return True, fn(task)
    except Exception:  # reported per task, never lost
        return False, traceback.format_exc()


def map_tasks(fn: Callable[[Any], Any], tasks: Iterable[Any], backend: str = "auto",
              workers: int | None = None, address: str | None = None, desc: str = "",
              progress: bool = True, on_error: str = "raise", mp_start: str = "spawn") -> list[Any]:
    """``[fn(t) for t in tasks]`` on ``backend``, in task order, with a progress bar.

    fn:       a picklable (module-level) function of one task, for the process and Ray backends.
    workers:  processes (or Ray tasks in flight); default: the CPUs this process may use.
    address:  a Ray cluster to connect to (implies Ray under ``auto``).
    on_error: ``"raise"`` a ``TaskError`` after all tasks ran, or ``"return"`` ``TaskFailure`` in place.
    mp_start: the multiprocessing start method for the process pool (``spawn`` is safe with threads,
              torch and numba; ``fork`` starts faster).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    tasks = list(tasks)
    if workers is not None:
        workers = check_scalar(workers, "workers", int, min=1)
    check_choice(on_error, "on_error", ("raise", "return"))
    check_choice(mp_start, "mp_start", mp.get_all_start_methods())
    chosen = resolve_backend(backend, len(tasks), workers, address)
    workers = min(workers or default_workers(), max(1, len(tasks)))
    bar = _bar(len(tasks), desc, progress)
    try:
        if chosen == "serial":
            outcomes = []
            for t in tasks:
                outcomes.append(_call(fn, t))
                bar.update(1)
        elif chosen == "process":
            outcomes = _run_processes(fn, tasks, workers, mp_start, bar)
        else:
            outcomes = _run_ray(fn, tasks, workers, address, bar)
    finally:
        bar.close()
    results: list[Any] = []
    failures: list[TaskFailure] = []
    for i, (ok, value) in enumerate(outcomes):
        if ok:
            results.append(value)
        else:
            failures.append(TaskFailure(i, tasks[i], value))
            results.append(failures[-1])
    if failures and on_error == "raise":
        raise TaskError(failures, results)
    return results


def _bar(total: int, desc: str, progress: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, leave=False, disable=not (progress and sys.stderr.isatty()))


def _run_processes(fn, tasks: Sequence[Any], workers: int, mp_start: str, bar) -> list[tuple[bool, Any]]:
    outcomes: list[tuple[bool, Any] | None] = [None] * len(tasks)
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context(mp_start)) as ex:
        pending: dict[Future, int] = {ex.submit(_call, fn, t): i for i, t in enumerate(tasks)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                i = pending.pop(fut)
                try:
                    outcomes[i] = fut.result()
                except Exception:  # the worker died (BrokenProcessPool, unpicklable result)
                    outcomes[i] = (False, traceback.format_exc())
                bar.update(1)
    return outcomes  # type: ignore[return-value]


def _run_ray(fn, tasks: Sequence[Any], workers: int, address: str | None, bar) -> list[tuple[bool, Any]]:
    try:
        import ray
    except ImportError as e:
        raise ImportError("backend 'ray' needs Ray: pip install 'neurips26[scale]'") from e
    if not ray.is_initialized():
        if address is not None or os.environ.get("RAY_ADDRESS"):
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(_call)
    refs = [remote.remote(fn, t) for t in tasks]
    index = {r: i for i, r in enumerate(refs)}
    outcomes: list[tuple[bool, Any] | None] = [None] * len(tasks)
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            try:
                outcomes[index[ref]] = ray.get(ref)
            except Exception:  # node loss, worker crash
                outcomes[index[ref]] = (False, traceback.format_exc())
            bar.update(1)
    return outcomes  # type: ignore[return-value]
