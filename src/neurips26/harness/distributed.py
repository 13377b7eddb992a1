"""One local launcher for ``torch.distributed`` code: ``world`` gloo processes on this machine.

Papers' scale-out code is written per rank (under ``torchrun`` each rank calls it after
``init_process_group``). For CPU tests and examples, ``launch_local(fn, *args, world=2)`` starts the ranks
here, initialises one process group in each (a ``file://`` rendezvous in a temporary directory: no port
to race for), calls ``fn(*args)`` on every rank and returns the ranks' return values in rank order
(``torch.save``-able objects; ``fn`` must be importable by name, i.e. module level, for ``spawn``).

A rank that raises makes ``launch_local`` raise (torch's ``ProcessRaisedException`` names the rank and
carries its traceback); ``timeout`` kills every rank and raises ``TimeoutError``.

``launcher_rank()`` is this process's rank as a launcher (``torchrun``) set it in the environment, known
before ``init_process_group``: the harness writes a run's folder and result from rank 0 only.
"""
from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neurips26.harness.validation import check_choice, check_scalar


def launcher_rank() -> int:
    """``RANK`` as ``torchrun`` (or any launcher following its environment contract) set it, when
    ``WORLD_SIZE`` > 1; 0 for a single process. Read from the environment, so it is known before the
    process group exists (and without importing torch)."""
    world, rank = os.environ.get("WORLD_SIZE", "1"), os.environ.get("RANK", "0")
    try:
        if int(world) <= 1:
            return 0
        world_n, rank_n = int(world), int(rank)
    except ValueError:
        raise ValueError(f"environment WORLD_SIZE={world!r} / RANK={rank!r} must be integers") from None
    if not 0 <= rank_n < world_n:
        raise ValueError(f"environment RANK={rank_n} is outside 0..WORLD_SIZE-1={world_n - 1}")
    return rank_n


def _rank_main(rank: int, world: int, init_file: str, out_dir: str, fn: Callable[..., Any], args: tuple,
               threads: int, backend: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        result = fn(*args)
        torch.save(result, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def launch_local(fn: Callable[..., Any], *args: Any, world: int = 2, threads: int = 1, backend: str = "gloo",
                 start_method: str = "spawn", timeout: float | None = None) -> list[Any]:
    """``fn(*args)`` on ``world`` local processes, each in one ``backend`` process group (rank =
    ``torch.distributed.get_rank()``); every rank's return value, in rank order.

    threads:      torch threads per rank (1: ranks do not oversubscribe the cores).
    start_method: ``"spawn"`` (default; ``fn`` and ``args`` are pickled) or ``"fork"``.
    timeout:      seconds until every rank is killed and ``TimeoutError`` raised (None: no limit).
    """
    import torch
    import torch.multiprocessing as mp

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    world = check_scalar(world, "world", int, min=1)
    threads = check_scalar(threads, "threads", int, min=1)
    backend = check_choice(backend, "backend", ("gloo", "nccl", "mpi"))
    start_method = check_choice(start_method, "start_method", ("spawn", "fork", "forkserver"))
    if timeout is not None:
        timeout = check_scalar(timeout, "timeout", float, min=0.0)
    with tempfile.TemporaryDirectory(prefix="neurips26-dist-") as tmp:
        init_file = os.path.join(tmp, "rendezvous")
        ctx = mp.start_processes(_rank_main, args=(world, init_file, tmp, fn, args, threads, backend),
                                 nprocs=world, join=False, start_method=start_method)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while not ctx.join(timeout=1.0):
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"launch_local: {world} ranks of {getattr(fn, '__name__', fn)!r} "
                                       f"still running after timeout={timeout} s")
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
                    p.join(timeout=10)
        return [torch.load(Path(tmp) / f"rank{r}.pt", weights_only=False) for r in range(world)]


__all__ = ["launch_local", "launcher_rank"]
