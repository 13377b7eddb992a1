"""``Protocol``: every knob of an evaluation, recorded in each result row.

Pinned defaults (ours where torchgeo-bench / GEO-Bench leave it open; all recorded):
input in reflectance units (DN / 10000), per-band z-score with fixed statistics of the unlabeled pool,
global mean pooling, features wider than ``feature_pca`` reduced by a train-fitted PCA, probe inputs
standardised with train statistics, L-BFGS + C sweep selected on val and refit on train + val, all
train labels. The hidden knobs of the mechanism experiment change one of these at a time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

from neurips26.gfm_audit.harness.probes import C_GRID
from neurips26.harness.validation import check_choice, check_scalar

KINDS = ("knn", "linear", "fewshot", "finetune")
NORMALISATIONS = ("zscore", "minmax", "none")
INPUT_SCALES = ("reflectance", "dn_mismatch")
SOLVERS = ("lbfgs_sweep", "fixed_c", "sgd")


@dataclass(frozen=True)
class Protocol:
    kind: str = "linear"
    normalisation: str = "zscore"
    input_scale: str = "reflectance"
    pooling: str = "mean"
    solver: str = "lbfgs_sweep"
    c_grid: tuple = C_GRID
    fixed_c: float = 1.0
    max_iter: int = 100
    tol: float = 1e-4
    merge_val: bool = True
    feature_pca: int | None = 128
    label_fraction: float = 1.0
    reported_regime: str | None = None  # what the row says; None = the truth
    k: int = 5
    knn_metric: str = "l2"
    shots: int = 10
    fewshot_probe: str = "linear"
    sgd_lr: float = 0.01
    sgd_batch: int = 64
    sgd_epochs: int = 50
    ft_lrs: tuple = (1e-4, 3e-4, 1e-3)
    ft_weight_decay: float = 0.05
    ft_batch: int = 64
    ft_epochs: int = 20
    ft_patience: int = 5
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        check_choice(self.kind, "protocol", KINDS)
        check_choice(self.normalisation, "normalisation", NORMALISATIONS)
        check_choice(self.input_scale, "input_scale", INPUT_SCALES)
        check_choice(self.pooling, "pooling", ("mean", "max"))
        check_choice(self.solver, "solver", SOLVERS)
        check_choice(self.knn_metric, "knn_metric", ("l2", "cosine"))
        check_choice(self.fewshot_probe, "fewshot_probe", ("linear", "knn"))
        check_scalar(self.label_fraction, "label_fraction", float, min=0, max=1, inclusive="right")
        check_scalar(self.k, "k", int, min=1)
        check_scalar(self.shots, "shots", int, min=1)
        check_scalar(self.max_iter, "max_iter", int, min=1)
        check_scalar(self.tol, "tol", float, min=0, inclusive="neither")
        check_scalar(self.fixed_c, "fixed_c", float, min=0, inclusive="neither")
        if not self.c_grid:
            raise ValueError("c_grid must hold at least one value")
        if self.feature_pca is not None:
            check_scalar(self.feature_pca, "feature_pca", int, min=1)

    @property
    def regime(self) -> str:
        """The train regime the row reports (``reported_regime`` overrides the truth: mis-reporting)."""
        if self.reported_regime is not None:
            return self.reported_regime
        if self.kind == "fewshot":
            return f"{self.shots}-shot"
        return "full" if self.label_fraction == 1.0 else f"{self.label_fraction * 100:g}%"

    @property
    def nominal(self) -> str:
        """The protocol as a paper would name it."""
        return {"knn": "kNN", "linear": "linear probe", "fewshot": "few-shot", "finetune": "fine-tune"}[
            self.kind
        ]

    def knobs(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("name")
        d["c_grid"] = list(d["c_grid"])
        d["ft_lrs"] = list(d["ft_lrs"])
        return d

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.knobs(), sort_keys=True).encode()).hexdigest()[:16]

    def seeded_parts(self) -> list[str]:
        """What the run's seed changes inside the protocol (model init is the model's)."""
        parts = []
        if self.kind == "fewshot":
            parts.append("kshot_sampling")
        if self.label_fraction < 1.0:
            parts.append("label_fraction_sampling")
        if self.kind == "linear" and self.solver == "sgd":
            parts.append("sgd_order")
        if self.kind == "finetune":
            parts.append("finetune_order")
        return parts
