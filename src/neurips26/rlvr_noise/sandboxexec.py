"""Rewards that execute untrusted output (SQL, a user's code reward) inside ``neurips26.nitrobox`` sandboxes.

``executor="nitrobox"`` runs each job in a sandbox of a ``nitrobox.pool.SandboxPool`` (daemon-less
namespace sandboxes, reset on release) when nitrobox imports and a probe sandbox's ``features`` report a
working sandbox (namespaces and a python3 that imports sqlite3 under the ``host`` image); otherwise it
raises with the reason, which ``nitrobox_status()`` also returns. nitrobox is imported lazily here, so
quick runs and CI never need it. ``executor="process"`` runs the same job in a local subprocess.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from neurips26.harness.validation import check_choice, check_scalar

CODE_EXECUTORS = ("process", "nitrobox")


@dataclass(frozen=True)
class JobResult:
    """Exit code and output of one executed job (124 and ``timed_out`` for a timeout)."""

    exit_code: int
    output: str
    timed_out: bool = False


@functools.lru_cache(maxsize=1)
def nitrobox_status() -> tuple[bool, str]:
    """(True, "ok") iff nitrobox imports and a probe sandbox works here; else (False, why)."""
    try:
        from neurips26.nitrobox import Sandbox
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        return False, f"neurips26.nitrobox does not import: {type(e).__name__}: {e}"
    try:
        sb = Sandbox()
    except Exception as e:  # noqa: BLE001
        return False, f"no nitrobox sandbox can start here: {type(e).__name__}: {e}"
    try:
        feats = sb.features
        if "pid" not in feats.get("namespaces", []) or "mnt" not in feats.get("namespaces", []):
            return False, f"nitrobox features report no pid/mnt namespaces: {feats.get('namespaces')}"
        r = sb.exec("python3 -c 'import sqlite3, json'", timeout=30)
        if r.exit_code != 0:
            return False, (f"python3 with sqlite3 does not run in the sandbox (exit {r.exit_code}): "
                           f"{r.output[:200]}")
    except Exception as e:  # noqa: BLE001
        return False, f"the probe sandbox failed: {type(e).__name__}: {e}"
    finally:
        sb.delete()
    return True, "ok"


def _run_local(job: tuple[str, dict, float]) -> JobResult:
    script, files, timeout = job
    with tempfile.TemporaryDirectory(prefix="rlvr-exec-") as d:
        for name, data in files.items():
            p = Path(d) / name
            p.write_bytes(data if isinstance(data, bytes) else data.encode())
        (Path(d) / "main.py").write_text(script)
        try:
            r = subprocess.run([sys.executable, "main.py"], cwd=d, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return JobResult(124, "", True)
        return JobResult(r.returncode, (r.stdout + r.stderr).decode(errors="replace"))


def run_python_jobs(jobs, executor: str = "process", workers: int = 2, timeout: float = 30.0,
                    sandbox_config: dict | None = None) -> list[JobResult]:
    """Run each ``(script, files)`` job as ``python3 main.py`` next to ``files`` ({name: str | bytes}).

    executor ``"process"``: a local subprocess per job; ``"nitrobox"``: one sandbox of a ``SandboxPool``
    of ``workers`` per job (files written inside it by its agent, reset when released).
    """
    check_choice(executor, "executor", CODE_EXECUTORS)
    workers = check_scalar(workers, "workers", int, min=1)
    timeout = check_scalar(timeout, "timeout", float, min=0.0, inclusive="right")
    jobs = [(s, dict(f), timeout) for s, f in jobs]
    if not jobs:
        raise ValueError("jobs must not be empty")
    if executor == "process":
        with ThreadPoolExecutor(max_workers=min(workers, len(jobs))) as ex:
            return list(ex.map(_run_local, jobs))
    ok, why = nitrobox_status()
    if not ok:
        raise RuntimeError(f"executor='nitrobox' is not available here: {why}")
    from neurips26.nitrobox.pool import SandboxPool

    n = min(workers, len(jobs))
    with SandboxPool(sandbox_config or {}, size=n) as pool:

        def one(job):
            script, files, tmo = job
            sb = pool.acquire()
            try:
                for name, data in files.items():
                    sb.write_file(name, data)
                sb.write_file("main.py", script)
                r = sb.exec("python3 main.py", timeout=tmo)
                return JobResult(r.exit_code, r.output if isinstance(r.output, str)
                                 else r.output.decode(errors="replace"), bool(r.timed_out))
            finally:
                pool.release(sb)

        with ThreadPoolExecutor(max_workers=n) as ex:
            return list(ex.map(one, jobs))


def code_rewards(programs, tests, executor: str = "process", workers: int = 2, timeout: float = 10.0,
                 sandbox_config: dict | None = None) -> list[int]:
    """A code-execution reward: 1 iff ``program + "\\n" + test`` exits 0 within ``timeout``, else 0."""
    programs, tests = list(programs), list(tests)
    if len(programs) != len(tests):
        raise ValueError(f"programs and tests differ in length: {len(programs)} != {len(tests)}")
    jobs = [(f"{p}\n{t}\n", {}) for p, t in zip(programs, tests)]
    res = run_python_jobs(jobs, executor, workers, timeout, sandbox_config)
    return [int(r.exit_code == 0 and not r.timed_out) for r in res]
