"""One run of a paper: config by scale, seeding, output folder, wall time, provenance, result.json.

A paper's ``experiment.py`` provides::

    CONFIGS: dict[str, Config]   # the scales: "smoke" (seconds), "quick", "full" required, others allowed
    CLAIMS: list[Claim]
    def run(cfg: Config, ctx: RunContext) -> dict   # JSON-serialisable metrics; plots via ctx.save_plot
    VOLATILE_METRICS: tuple[str, ...]              # optional: dotted-path globs of wall-clock metrics

and its ``bench.py`` provides ``def bench(ctx: RunContext) -> list[BenchRow]`` (``ctx.scale`` is
``"smoke"`` for a seconds-long check of the rows, ``"quick"`` by default).

Under ``torchrun`` every rank runs the experiment (its collective calls need them all), but only rank 0
writes: the other ranks work in a private temporary folder that is removed afterwards, so the run folder
holds one ``result.json`` and one set of plots (``harness.distributed.launcher_rank``).

Seeds are an axis of the run: ``run_paper(slug, seeds=(0, 1, 2))`` (or a config with a ``seeds``
field as the default) runs each seed (through ``map_tasks`` when ``backend`` asks for it), keeps every
seed's metrics, and hands the claim checks a ``SeedMetrics`` so a verdict can rest on a paired
difference with its standard error (``harness.paper.paired``/``judge``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, TypeVar

from neurips26.harness import registry
from neurips26.harness.bench import BenchRow  # noqa: F401  (re-exported: the row lives in harness.bench)
from neurips26.harness.distributed import launcher_rank
from neurips26.harness.paper import SeedMetrics, evaluate_all
from neurips26.harness.parallel import map_tasks, resolve_backend

REQUIRED_SCALES = ("smoke", "quick", "full")  # the scales every paper has; a paper may add more (nas: "mid")
RESULT_FILE = "result.json"
BENCH_FILE = "bench.json"
RESULT_KEYS = ("paper", "scale", "seed", "seconds", "provenance", "metrics", "claims")
CLAIM_KEYS = ("id", "statement", "paper_figure", "measured", "verdict")
BENCH_ROW_KEYS = ("name", "ours", "anchor", "anchor_name", "unit", "ratio", "better")

T = TypeVar("T")


class RunSetupError(ValueError):
    """A run asked for something impossible (scale, seed, output folder), found before work starts."""


@dataclass
class RunContext:
    """What a paper's ``run``/``bench`` receives besides its config."""

    out_dir: Path
    seed: int = 0
    scale: str = "quick"
    progress: bool = True
    plots: list[str] = field(default_factory=list)

    def track(self, iterable: Iterable[T], desc: str = "", total: int | None = None,
              **kw: Any) -> Iterator[T]:
        """A progress bar over ``iterable`` (tqdm), silent when progress is off or not a TTY."""
        from tqdm.auto import tqdm

        disable = not (self.progress and sys.stderr.isatty())
        yield from tqdm(iterable, desc=desc, total=total, disable=disable, leave=False, **kw)

    def log(self, msg: str) -> None:
        """A log line on stderr (kept when output is not a TTY)."""
        if self.progress:
            print(msg, file=sys.stderr, flush=True)

    def save_plot(self, fig: Any, name: str) -> Path:
        """Write a matplotlib figure as ``out_dir/name`` (PNG) and close it."""
        import matplotlib.pyplot as plt

        if not name.endswith(".png"):
            name += ".png"
        path = self.out_dir / name
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        self.plots.append(name)
        return path


def seed_everything(seed: int) -> None:
    """Seed python, numpy and (when installed) torch; torch is imported only if already loaded."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # pragma: no cover - numpy is a core dependency
        pass
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


def git_sha() -> str | None:
    """HEAD of the checkout this package runs from (``-dirty`` if tracked files changed), None outside git."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5)
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


_VERSIONED = ("neurips26", "numpy", "scipy", "torch", "matplotlib", "transformers", "cvxpy", "zuko",
              "libcachesim", "numba", "pydivsufsort", "nltk", "pyseccomp", "ray", "networkx",
              "torch_geometric", "nashpy", "POT", "tokenizers", "scikit-learn", "scikit-image", "pydantic",
              "pyarrow", "safetensors", "gymnasium", "datasketches", "math-verify", "faiss-cpu")


def provenance() -> dict[str, Any]:
    """Where and with what a result was made."""
    versions = {}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return {
        "git_sha": git_sha(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "argv": sys.argv,
        "utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "versions": versions,
    }


def default_out_dir(slug: str, kind: str = "run", root: Path | str = "runs") -> Path:
    """``runs/<slug>/<kind>-<UTC timestamp>/``; the report picks the newest of each kind."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return Path(root) / slug / f"{kind}-{stamp}"


def prepare_out_dir(out: Path | str) -> Path:
    """Create ``out`` and check it is writable, before any work starts."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".probe-"):
            pass
    except OSError as e:
        raise RunSetupError(f"output directory {str(out)!r} is not writable: "
                            f"{e.strerror or e}") from None
    return out


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON via a temporary file and rename, so no half-written file is ever left."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=_json_default) + "\n")
    tmp.replace(path)


def to_json_types(obj: Any) -> Any:
    """``obj`` with numpy values, dataclasses and paths turned into plain JSON types."""
    return json.loads(json.dumps(obj, default=_json_default))


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):  # numpy scalars and arrays
        return o.tolist()
    if dataclasses.is_dataclass(o):
        return dataclasses.asdict(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"metrics value of type {type(o).__name__} is not JSON-serialisable")


def check_scale(scale: str, configs: Mapping[str, Any] | None = None, slug: str = "") -> str:
    """``scale`` if the paper has it (any key of its ``CONFIGS``; without them, a required scale)."""
    known = sorted(configs) if configs is not None else list(REQUIRED_SCALES)
    if not isinstance(scale, str) or scale not in known:
        whose = f"paper {slug!r} has scales" if slug else "scale must be one of"
        raise RunSetupError(f"{whose} {', '.join(known)}; got {scale!r}")
    return scale


def check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise RunSetupError(f"seed must be a non-negative integer, got {seed!r}")
    return seed


def resolve_seeds(seed: int | None, seeds: "Iterable[int] | None", cfg: Any) -> list[int]:
    """The seeds of a run: ``seeds``, else ``[seed]``, else the config's ``seeds`` field, else ``[0]``."""
    if seeds is not None and seed is not None:
        raise RunSetupError("give seed or seeds, not both")
    if seeds is not None:
        chosen = list(seeds)
    elif seed is not None:
        chosen = [seed]
    else:
        chosen = list(getattr(cfg, "seeds", None) or [0])
    if not chosen:
        raise RunSetupError("seeds must name at least one seed")
    for s in chosen:
        check_seed(s)
    if len(set(chosen)) != len(chosen):
        raise RunSetupError(f"seeds must be distinct, got {chosen}")
    return chosen


def _seed_dir(out_dir: Path, seeds: list[int], seed: int) -> Path:
    """The first seed writes into the run folder itself, every further seed into ``seed-<s>/``."""
    return out_dir if seed == seeds[0] else out_dir / f"seed-{seed}"


def _run_one_seed(job: tuple[str, Any, str, int, str, bool]) -> tuple[dict[str, Any], float, list[str]]:
    """One seed of one paper (module-level, so a process pool or Ray can run it)."""
    slug, cfg, scale, seed, out_dir, progress = job
    exp = registry.load(slug, "experiment")
    ctx = RunContext(out_dir=prepare_out_dir(out_dir), seed=seed, scale=scale, progress=progress)
    seed_everything(seed)
    t0 = time.perf_counter()
    metrics = exp.run(cfg, ctx)
    seconds = time.perf_counter() - t0
    if not isinstance(metrics, Mapping):
        raise TypeError(f"{slug}.experiment.run must return a dict of metrics, got {type(metrics).__name__}")
    return to_json_types(dict(metrics)), seconds, ctx.plots


def run_paper(slug: str, scale: str = "quick", seed: int | None = None, out: Path | str | None = None,
              progress: bool = True, config: Any = None, seeds: "Iterable[int] | None" = None,
              backend: str | None = None, workers: int | None = None) -> dict[str, Any]:
    """Run ``slug``'s reproduction and write ``out/result.json``; returns the result.

    scale:   a key of the paper's ``CONFIGS`` (``smoke``, ``quick``, ``full``, and any it adds).
    config:  a config object of the user's instead of ``CONFIGS[scale]`` (recorded as scale ``custom``).
    seed, seeds: one seed, or several (each seed's metrics kept; claims see them all); default:
             the config's ``seeds`` field, else 0.
    backend, workers: how seeds run (``map_tasks``): ``serial``, ``process``, ``ray``, ``auto``; default
             the config's ``seed_backend`` field, else ``serial`` (a paper whose seeds are independent and
             whose metrics time nothing may run them side by side on the machine's cores); ``workers``
             defaults to the config's ``seed_workers`` field, else the CPUs this process may use (a paper
             whose seeds each run one thread may ask for one process per seed on a 2-core box).
    """
    exp = registry.load(slug, "experiment")
    if config is None:
        check_scale(scale, exp.CONFIGS, slug)
        cfg = exp.CONFIGS[scale]
    else:
        cfg, scale = config, "custom"
    chosen = resolve_seeds(seed, seeds, cfg)
    backend = backend if backend is not None else getattr(cfg, "seed_backend", "serial")
    workers = workers if workers is not None else getattr(cfg, "seed_workers", None)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers (or the config's seed_workers) must be an int >= 1, got {workers!r}")
    out = out if out is not None else default_out_dir(slug)
    with _rank_out_dir(out, slug) as (out_dir, writer):
        return _run_seeds(exp, slug, cfg, scale, chosen, out_dir, progress and writer, backend, workers, writer)


def _run_seeds(exp: Any, slug: str, cfg: Any, scale: str, chosen: list[int], out_dir: Path, progress: bool,
               backend: str, workers: int | None, writer: bool) -> dict[str, Any]:
    jobs = [(slug, cfg, scale, s, str(_seed_dir(out_dir, chosen, s)), progress) for s in chosen]
    prov = provenance()  # before the work: a commit made during a long run must not relabel it
    t0 = time.perf_counter()
    if resolve_backend(backend, len(jobs), workers, None) == "serial":
        # in this process: a paper's own error (a missing corpus, a bad config) reaches the caller as itself
        runs = [_run_one_seed(job) for job in jobs]
    else:
        runs = map_tasks(_run_one_seed, jobs, backend=backend, workers=workers, desc=f"{slug} seeds",
                         progress=progress)
    seconds = time.perf_counter() - t0
    per_seed = [m for m, _, _ in runs]
    plots = [os.path.relpath(_seed_dir(out_dir, chosen, s) / p, out_dir)
             for s, (_, _, ps) in zip(chosen, runs) for p in ps]
    seen = SeedMetrics(chosen, per_seed) if len(chosen) > 1 else per_seed[0]
    claims = evaluate_all(exp.CLAIMS, seen)
    result = {
        "paper": slug,
        "scale": scale,
        "seed": chosen[0],
        "seeds": chosen,
        "seconds": round(seconds, 3),
        "provenance": prov | {"config": cfg, "plots": plots},
        "metrics": per_seed[0],
        "claims": [c.to_dict() for c in claims],
    }
    if len(chosen) > 1:
        result["per_seed"] = [{"seed": s, "seconds": round(t, 3), "metrics": m}
                              for s, (m, t, _) in zip(chosen, runs)]
    result = to_json_types(result)
    if writer:
        write_json_atomic(out_dir / RESULT_FILE, result)
    return result


@contextlib.contextmanager
def _rank_out_dir(out: Path | str, slug: str) -> Iterator[tuple[Path, bool]]:
    """``(folder, writes)``: ``out`` prepared, on rank 0 / a single process; a temporary folder, removed
    at the end, on every other ``torchrun`` rank (so ranks never race on one run folder)."""
    rank = launcher_rank()
    if rank == 0:
        yield prepare_out_dir(out), True
        return
    tmp = Path(tempfile.mkdtemp(prefix=f"neurips26-{slug}-rank{rank}-"))
    try:
        yield tmp, False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench_paper(slug: str, out: Path | str | None = None, progress: bool = True,
                scale: str = "quick") -> dict[str, Any]:
    """Run ``slug``'s benchmark and write ``out/bench.json``; returns it.

    ``scale="smoke"`` asks the bench for seconds-long versions of its rows (the contract test).
    """
    mod = registry.load(slug, "bench")
    with _rank_out_dir(out if out is not None else default_out_dir(slug, "bench"), slug) as (out_dir, writer):
        ctx = RunContext(out_dir=out_dir, progress=progress and writer, scale=scale)
        prov = provenance()
        seed_everything(0)
        t0 = time.perf_counter()
        rows = mod.bench(ctx)
        result = {
            "paper": slug,
            "scale": scale,
            "seconds": round(time.perf_counter() - t0, 3),
            "provenance": prov,
            "rows": [r.to_dict() for r in rows],
        }
        result = to_json_types(result)
        if writer:
            write_json_atomic(out_dir / BENCH_FILE, result)
        return result


def finished(slug: str, scale: str = "quick", seed: int | None = None, root: Path | str = "runs",
             kind: str = "run") -> Path | None:
    """The newest ``root/slug/<kind>-*/`` folder whose result (``kind="run"``: same scale and seeds) or
    bench (``kind="bench"``: same scale) this exact commit made; None if there is none, or if the
    checkout is dirty or not in git (then it cannot tell). ``neurips26 reproduce --resume`` skips those."""
    sha = git_sha()
    if sha is None or sha.endswith("-dirty"):
        return None
    if kind == "run":
        exp = registry.load(slug, "experiment")
        check_scale(scale, exp.CONFIGS, slug)
        want = resolve_seeds(seed, None, exp.CONFIGS[scale])
    for path in sorted(Path(root, slug).glob(f"{kind}-*/{RESULT_FILE if kind == 'run' else BENCH_FILE}"),
                       reverse=True):                      # run-<UTC stamp>: newest first
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if data.get("provenance", {}).get("git_sha") != sha or data.get("scale") != scale:
            continue
        if kind == "bench" or (data.get("seeds") or [data.get("seed")]) == want:
            return path.parent
    return None


def load_result(path: Path | str) -> dict[str, Any]:
    """Read a result.json and check it has the schema's keys."""
    path = Path(path)
    data = json.loads(path.read_text())
    missing = [k for k in RESULT_KEYS if k not in data]
    if missing:
        raise ValueError(f"{path}: not a result.json, missing keys {missing}")
    for c in data["claims"]:
        if any(k not in c for k in CLAIM_KEYS):
            raise ValueError(f"{path}: claim {c.get('id')!r} lacks keys of {CLAIM_KEYS}")
    return data
