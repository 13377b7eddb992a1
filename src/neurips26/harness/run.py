"""One run of a paper: config by scale, seeding, output folder, wall time, provenance, result.json.

A paper's ``experiment.py`` provides::

    CONFIGS: dict[str, Config]          # at least "quick" and "full"; Config is a plain dataclass
    CLAIMS: list[Claim]
    def run(cfg: Config, ctx: RunContext) -> dict   # JSON-serialisable metrics; plots via ctx.save_plot

and its ``bench.py`` provides ``def bench(ctx: RunContext) -> list[BenchRow]``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import random
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
from neurips26.harness.paper import evaluate_all

SCALES = ("quick", "full")
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


@dataclass(frozen=True)
class BenchRow:
    """One side-by-side comparison.

    ratio = how many times better ours is than the anchor: anchor/ours when lower is better
    (times, memory), ours/anchor when higher is better (throughput). None when the anchor did
    not run (``note`` says why).
    """

    name: str
    ours: float
    anchor: float | None
    anchor_name: str
    unit: str
    better: str = "lower"
    note: str = ""

    def __post_init__(self) -> None:
        if self.better not in ("lower", "higher"):
            raise ValueError(f"better must be 'lower' or 'higher', got {self.better!r}")

    @property
    def ratio(self) -> float | None:
        if self.anchor is None or not self.ours or not self.anchor:
            return None
        r = self.anchor / self.ours if self.better == "lower" else self.ours / self.anchor
        return r if math.isfinite(r) else None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["ratio"] = self.ratio
        return d


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


def _git_sha() -> str | None:
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
              "libcachesim", "numba", "pydivsufsort", "nltk", "pyseccomp", "ray")


def provenance() -> dict[str, Any]:
    """Where and with what a result was made."""
    versions = {}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return {
        "git_sha": _git_sha(),
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


def check_scale(scale: str) -> str:
    if scale not in SCALES:
        raise RunSetupError(f"scale must be one of {', '.join(SCALES)}; got {scale!r}")
    return scale


def check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise RunSetupError(f"seed must be a non-negative integer, got {seed!r}")
    return seed


def run_paper(slug: str, scale: str = "quick", seed: int = 0, out: Path | str | None = None,
              progress: bool = True) -> dict[str, Any]:
    """Run ``slug``'s reproduction at ``scale`` and write ``out/result.json``; returns the result."""
    check_scale(scale)
    check_seed(seed)
    exp = registry.load(slug, "experiment")
    if scale not in exp.CONFIGS:
        raise RunSetupError(f"paper {slug!r} has no {scale!r} config; it has {sorted(exp.CONFIGS)}")
    out_dir = prepare_out_dir(out if out is not None else default_out_dir(slug))
    ctx = RunContext(out_dir=out_dir, seed=seed, scale=scale, progress=progress)
    cfg = exp.CONFIGS[scale]
    seed_everything(seed)
    t0 = time.perf_counter()
    metrics = exp.run(cfg, ctx)
    seconds = time.perf_counter() - t0
    if not isinstance(metrics, Mapping):
        raise TypeError(f"{slug}.experiment.run must return a dict of metrics, got {type(metrics).__name__}")
    claims = evaluate_all(exp.CLAIMS, metrics)
    result = {
        "paper": slug,
        "scale": scale,
        "seed": seed,
        "seconds": round(seconds, 3),
        "provenance": provenance() | {"config": cfg, "plots": ctx.plots},
        "metrics": dict(metrics),
        "claims": [c.to_dict() for c in claims],
    }
    result = to_json_types(result)
    write_json_atomic(out_dir / RESULT_FILE, result)
    return result


def bench_paper(slug: str, out: Path | str | None = None, progress: bool = True) -> dict[str, Any]:
    """Run ``slug``'s benchmark and write ``out/bench.json``; returns it."""
    mod = registry.load(slug, "bench")
    out_dir = prepare_out_dir(out if out is not None else default_out_dir(slug, "bench"))
    ctx = RunContext(out_dir=out_dir, progress=progress)
    seed_everything(0)
    t0 = time.perf_counter()
    rows = mod.bench(ctx)
    result = {
        "paper": slug,
        "seconds": round(time.perf_counter() - t0, 3),
        "provenance": provenance(),
        "rows": [r.to_dict() for r in rows],
    }
    result = to_json_types(result)
    write_json_atomic(out_dir / BENCH_FILE, result)
    return result


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
