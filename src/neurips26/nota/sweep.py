"""Sweeps over (method, seed, rho, bond, T) as independent trials: Ray Tune when installed, else the task map.

One trial is one whole CIL sequence (``run_trial``): the backbone is read from the on-disk cache (pre-trained
once, keyed by config hash), the glyph data from its ``.npz`` cache, the class order and initialisation come
from the trial's seed, exactly as in ``experiment.run`` — so a trial's metrics equal the in-process
``run_cil`` call (tested). ``run_sweep(..., backend="tune")`` runs each trial as a Ray Tune trial
(``tune.grid_search`` over the trial list, ``cpus``/``gpus`` per trial: 2 CPUs or 1 GPU in the spec);
``backend="map"`` uses ``harness.parallel.map_tasks`` (serial / processes / a running Ray cluster);
``"auto"`` picks Tune when ``ray[tune]`` imports.
"""
from __future__ import annotations

import itertools
import os
import tempfile
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import torch

from neurips26.harness.cache import cache_root
from neurips26.harness.parallel import map_tasks
from neurips26.harness.validation import check_choice, check_scalar
from neurips26.nota.backbone import PretrainConfig, pretrain
from neurips26.nota.cil import METHODS, TrainSettings, run_cil, task_split
from neurips26.nota.data import synth_glyphs

BACKENDS = ("auto", "tune", "map")
METRICS = ("A_last", "A_avg", "F", "trainable_per_task")


@dataclass
class SweepSpace:
    """The grid: every combination of these becomes one trial."""
    methods: tuple[str, ...] = ("nota",)
    seeds: tuple[int, ...] = (0,)
    rhos: tuple[float, ...] = (0.05,)
    bonds: tuple[int, ...] = (4,)
    n_tasks: tuple[int, ...] = (6,)


def make_trials(space: SweepSpace, pretrain_cfg: PretrainConfig, settings: TrainSettings,
                classes: Sequence[int], train_per_class: int, test_per_class: int, rank: int = 3,
                eps_rel: float = 1e-3) -> list[dict]:
    """One plain dict per grid point (picklable; what a Tune trial receives), with its ``index``."""
    for m in space.methods:
        check_choice(m, "method", (*METHODS, "ncm"))
    out = []
    grid = itertools.product(space.methods, space.seeds, space.rhos, space.bonds, space.n_tasks)
    for i, (m, seed, rho, bond, t) in enumerate(grid):
        out.append({"index": i, "method": m, "seed": check_scalar(seed, "seed", int, min=0),
                    "rho": check_scalar(rho, "rho", float, min=0, inclusive="neither"),
                    "bond": check_scalar(bond, "bond", int, min=1), "n_tasks": check_scalar(t, "n_tasks", int, min=1),
                    "rank": rank, "eps_rel": eps_rel, "pretrain": asdict(pretrain_cfg), "settings": asdict(settings),
                    "classes": list(classes), "train_per_class": train_per_class,
                    "test_per_class": test_per_class, "cache_root": str(cache_root())})
    return out


def run_trial(trial: dict) -> dict:
    """One CIL sequence of ``trial`` (from ``make_trials``); {metric: value} for ``METRICS`` plus ``index``."""
    if trial.get("cache_root"):           # a Ray worker reads the driver's backbone/data cache
        os.environ["NEURIPS26_CACHE"] = trial["cache_root"]
    torch.set_num_threads(int(trial.get("threads", 1)))
    pre = PretrainConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in trial["pretrain"].items()})
    backbone, _ = pretrain(pre)
    train = synth_glyphs(trial["classes"], trial["train_per_class"], seed=10)
    test = synth_glyphs(trial["classes"], trial["test_per_class"], seed=20)
    tasks = task_split(trial["classes"], trial["n_tasks"], trial["seed"])
    kw = {} if trial["method"] == "ncm" else dict(rho=trial["rho"], bond=trial["bond"], rank=trial["rank"],
                                                   eps_rel=trial["eps_rel"])
    r = run_cil(backbone, trial["method"], tasks, train, test, TrainSettings(**trial["settings"]),
                seed=trial["seed"], **kw)
    return {"index": trial["index"], **{k: r[k] for k in METRICS}}


def _tune_trainable(config: dict) -> None:
    from ray import tune
    tune.report(run_trial(config["trial"]))


def tune_available() -> bool:
    try:
        import ray.tune  # noqa: F401
    except ImportError:
        return False
    return True


def run_sweep(trials: Sequence[dict], backend: str = "auto", cpus: float = 2, gpus: float = 0,
              storage: str | None = None, workers: int | None = None) -> list[dict]:
    """Metrics of every trial, in trial order. backend: "tune" (one Ray Tune trial per grid point, ``cpus`` /
    ``gpus`` each; a local Ray is started when none runs), "map" (``map_tasks``), "auto" (Tune if installed)."""
    backend = check_choice(backend, "backend", BACKENDS)
    trials = list(trials)
    if not trials:
        raise ValueError("trials must hold at least one trial")
    if backend == "auto":
        backend = "tune" if tune_available() else "map"
    if backend == "map":
        return map_tasks(run_trial, trials, workers=workers, desc="nota sweep", progress=False)
    import ray
    from ray import tune
    if not ray.is_initialized():
        ray.init(num_cpus=max(1, int(cpus * (workers or 1))), include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    with tempfile.TemporaryDirectory() as tmp:
        tuner = tune.Tuner(tune.with_resources(_tune_trainable, {"cpu": cpus, "gpu": gpus}),
                           param_space={"trial": tune.grid_search(trials)},
                           run_config=tune.RunConfig(name="nota_sweep", storage_path=storage or tmp, verbose=0))
        grid = tuner.fit()
        errors = [str(r.error) for r in grid if r.error is not None]
        if errors:
            raise RuntimeError(f"{len(errors)} Tune trial(s) failed: {errors[0]}")
        got: dict[int, dict[str, Any]] = {}
        for r in grid:
            got[int(r.metrics["index"])] = {k: r.metrics[k] for k in ("index", *METRICS)}
    return [got[t["index"]] for t in trials]


__all__ = ["BACKENDS", "METRICS", "SweepSpace", "make_trials", "run_sweep", "run_trial", "tune_available"]
