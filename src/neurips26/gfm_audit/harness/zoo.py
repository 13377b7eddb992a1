"""The named models of the reproduction, as picklable ``ModelSpec`` builders (registered name + kwargs).

``rcf`` (RCF / MOSAIKS), ``resnet18`` (random init), ``vit_tiny`` (random init), ``raw_pca``, ``simclr`` and
``mae`` (small encoders pretrained locally on the task's unlabeled pool with seed 0, pinned inputs; cached
and hashed, so the run's seed does not touch them).

A ``ModelSpec`` is a registered builder name plus keyword arguments: it pickles (a process pool or Ray
worker rebuilds the model from it), and its kwargs are the model config recorded in every row and in the
row key. ``register_model`` adds a builder ``fn(task, seed, **kwargs) -> FeatureModel``; a worker process
sees it when the registering module is imported there (register at import time of your own module).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from neurips26.gfm_audit.harness.data import Task
from neurips26.gfm_audit.harness.models import RCF, FeatureModel, RawPCA, ResNet18, ViTTiny, pretrained_encoder
from neurips26.gfm_audit.harness.protocol import Protocol
from neurips26.gfm_audit.harness.runner import ModelEntry, Runner
from neurips26.harness.validation import check_choice

MODEL_NAMES = ("rcf", "resnet18", "vit_tiny", "raw_pca", "simclr", "mae")


def _rcf(task: Task, seed: int, features: int = 128) -> FeatureModel:
    return RCF(task.bands, features=features, seed=seed)


def _resnet18(task: Task, seed: int, width: int = 64) -> FeatureModel:
    return ResNet18(task.bands, width=width, seed=seed)


def _vit_tiny(task: Task, seed: int) -> FeatureModel:
    size = task.x.shape[-1]
    return ViTTiny(task.bands, size, patch=4 if size % 4 == 0 else 1, seed=seed)


def _raw_pca(task: Task, seed: int, n_components: int = 128) -> FeatureModel:
    return RawPCA(n_components)


def _pretrained(algorithm: str) -> Callable[..., FeatureModel]:
    def build(task: Task, seed: int, steps: int = 150) -> FeatureModel:
        pool = Runner.inputs(task, Protocol())[task.pool]  # pinned inputs; seed 0 whatever the run's seed
        return pretrained_encoder(pool, algorithm, steps=steps, seed=0)  # cached by the pool's content

    build.__name__ = f"_{algorithm}"
    return build


# name -> (builder, seed_dependent)
_BUILDERS: dict[str, tuple[Callable[..., FeatureModel], bool]] = {
    "rcf": (_rcf, True),
    "resnet18": (_resnet18, True),
    "vit_tiny": (_vit_tiny, True),
    "raw_pca": (_raw_pca, False),
    "simclr": (_pretrained("simclr"), False),
    "mae": (_pretrained("mae"), False),
}


def register_model(name: str, fn: Callable[..., FeatureModel], seed_dependent: bool = True) -> None:
    """Register ``fn(task, seed, **kwargs) -> FeatureModel`` under ``name`` (replaces an earlier one)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    _BUILDERS[name] = (fn, bool(seed_dependent))


def registered_models() -> tuple[str, ...]:
    return tuple(_BUILDERS)


@dataclass(frozen=True)
class ModelSpec:
    """A picklable builder: ``ModelSpec("rcf", (("features", 128),))(task, seed) -> RCF``."""

    builder: str
    kwargs: tuple = ()

    def __post_init__(self) -> None:
        check_choice(self.builder, "model", tuple(_BUILDERS))

    def __call__(self, task: Task, seed: int) -> FeatureModel:
        return _BUILDERS[self.builder][0](task, seed, **dict(self.kwargs))


def model_entry(name: str, **kwargs: Any) -> ModelEntry:
    """A ``ModelEntry`` whose builder is a ``ModelSpec`` (picklable); ``config`` = the sorted kwargs."""
    check_choice(name, "model", tuple(_BUILDERS))
    config = tuple(sorted(kwargs.items()))
    return ModelEntry(name, ModelSpec(name, config), _BUILDERS[name][1], config)


def harness_models(
    task: Task | None,
    names,
    rcf_features: int = 128,
    resnet_width: int = 64,
    simclr_steps: int = 150,
    mae_steps: int = 0,
) -> dict[str, ModelEntry]:
    """``ModelEntry`` per name (``mae`` only when ``mae_steps > 0``), each built from a ``ModelSpec``.

    ``task`` is not needed (kept for callers that pass it): a spec builds for whatever task it is given.
    """
    for n in names:
        check_choice(n, "model", MODEL_NAMES)
    names = list(names) + (["mae"] if mae_steps > 0 and "mae" not in names else [])
    kw = {
        "rcf": {"features": rcf_features},
        "resnet18": {"width": resnet_width},
        "vit_tiny": {},
        "raw_pca": {"n_components": 128},
        "simclr": {"steps": simclr_steps},
        "mae": {"steps": mae_steps},
    }
    return {n: model_entry(n, **kw[n]) for n in names if n != "mae" or mae_steps > 0}
