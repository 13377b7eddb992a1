"""``Runner``: one (task, model, protocol, seed) cell -> one ``provenance="rerun"`` row with every knob.

Steps of a cell:
1. key = SHA-256 of (task hash, model name + config, protocol knobs, seed); a key already in the
   results file is skipped (resume) and counted as a hit.
2. inputs: DN -> reflectance (or fed as DN through reflectance statistics: ``dn_mismatch``), then
   per-band normalisation with fixed statistics of the unlabeled pool;
3. features: ``forward_features`` of the frozen model on every split, cached by (model weights
   SHA-256, task hash, input knobs, pooling); wider than ``feature_pca`` -> train-fitted PCA;
   standardised with train statistics;
4. probe (kNN / L-BFGS sweep / fixed C / SGD / k-shot / label fraction) or fine-tune;
5. test accuracy + bootstrap 95 % CI over test samples (200 resamples, seed 0); the row appended
   atomically (file lock, one JSON line, fsync).

A cell whose seed touches nothing (a seed-independent model and a protocol without sampling) is
computed once and reused for every seed; the row records ``reused_from_seed``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch

from neurips26.gfm_audit.harness.data import DN_SCALE, Task, split_hash
from neurips26.gfm_audit.harness.models import FeatureModel
from neurips26.gfm_audit.harness.probes import (
    bootstrap_accuracy_ci,
    k_shot,
    knn_predict,
    label_fraction,
    standardise,
    sgd_probe,
    sweep,
    LogisticProbe,
)
from neurips26.gfm_audit.harness.protocol import Protocol
from neurips26.harness.validation import check_scalar

HARNESS_NAME = "neurips26.gfm_audit.harness"
HARNESS_VERSION = "0.1.0"
VOLATILE_ROW_FIELDS = ("wall_s", "timestamp", "git_sha")
INPUT_CACHE = 8  # normalised input arrays kept per Runner (about 18 MB each for 1500 x 12 x 16 x 16)


@dataclass(frozen=True)
class ModelEntry:
    """How to build a model for a task and seed. ``seed_dependent=False``: the seed changes nothing."""

    name: str
    build: Callable[[Task, int], FeatureModel]
    seed_dependent: bool = True
    config: tuple = ()


class Runner:
    """Runs cells, caches features, resumes from and appends to ``results_path`` (JSONL)."""

    def __init__(self, results_path: Path | str | None = None, cache_features: bool = True):
        self.results_path = Path(results_path) if results_path is not None else None
        self.cache_features = cache_features
        self._features: dict[str, np.ndarray] = {}
        self._input_cache: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._models: dict[tuple, FeatureModel] = {}
        self._reuse: dict[str, dict] = {}
        self._done: dict[str, dict] = {}
        self.stats = {"cells": 0, "skipped": 0, "feature_hits": 0, "feature_misses": 0, "reused": 0}
        self._git = None
        if self.results_path is not None and self.results_path.is_file():
            for line in self.results_path.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    self._done[row["key"]] = row

    # ----------------------------------------------------------------------------------- keys
    @staticmethod
    def cell_key(task: Task, model: ModelEntry, protocol: Protocol, seed: int) -> str:
        obj = {
            "task": task.task_hash(),
            "model": [model.name, list(model.config)],
            "protocol": protocol.knobs(),
            "seed": seed,
        }
        return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()

    # --------------------------------------------------------------------------------- inputs
    @staticmethod
    def inputs(task: Task, protocol: Protocol) -> np.ndarray:
        """Step 2: units and per-band normalisation with fixed pool statistics."""
        x = task.x.astype(np.float64)
        ref = x / DN_SCALE if task.units == "dn" else x
        pool = ref[task.pool]
        inp = x if (task.units == "dn" and protocol.input_scale == "dn_mismatch") else ref
        if protocol.normalisation == "zscore":
            mu = pool.mean(axis=(0, 2, 3), keepdims=True)
            sd = pool.std(axis=(0, 2, 3), keepdims=True) + 1e-8
            inp = (inp - mu) / sd
        elif protocol.normalisation == "minmax":
            lo = pool.min(axis=(0, 2, 3), keepdims=True)
            hi = pool.max(axis=(0, 2, 3), keepdims=True)
            inp = (inp - lo) / (hi - lo + 1e-8)
        return inp.astype(np.float32)

    def _inputs(self, task: Task, protocol: Protocol) -> np.ndarray:
        """``inputs``, kept for the last ``INPUT_CACHE`` (task, pool, normalisation, input scale)."""
        k = (task.task_hash(), split_hash(task.pool), protocol.normalisation, protocol.input_scale)
        if k in self._input_cache:
            self._input_cache.move_to_end(k)
            return self._input_cache[k]
        x = self.inputs(task, protocol)  # callers never write into it
        self._input_cache[k] = x
        while len(self._input_cache) > INPUT_CACHE:
            self._input_cache.popitem(last=False)
        return x

    def model(self, entry: ModelEntry, task: Task, seed: int) -> FeatureModel:
        k = (entry.name, entry.config, task.task_hash(), seed if entry.seed_dependent else None)
        if k not in self._models:
            m = entry.build(task, seed)
            m.fit(self._inputs(task, Protocol())[task.pool])  # data-fitted parts see pinned inputs
            self._models[k] = m
        return self._models[k]

    def features(self, model: FeatureModel, task: Task, protocol: Protocol) -> np.ndarray:
        """Step 3 (before PCA): frozen features of every sample, cached."""
        p = protocol
        k = f"{model.weights_sha256()}|{task.task_hash()}|{p.normalisation}|{p.input_scale}|{p.pooling}"
        if self.cache_features and k in self._features:
            self.stats["feature_hits"] += 1
            return self._features[k]
        self.stats["feature_misses"] += 1
        f = model.forward_features(self._inputs(task, protocol), pooling=protocol.pooling)
        if f.ndim != 2 or len(f) != len(task.x):
            raise ValueError(f"{model.name}: model output must be 2-D (N, K) after pooling, got {f.shape}")
        if self.cache_features:
            self._features[k] = f
        return f

    # ---------------------------------------------------------------------------------- cells
    @classmethod
    def reuse_key(cls, task: Task, entry: ModelEntry, protocol: Protocol) -> str | None:
        """The key of a cell whose seed touches nothing (same for every seed), else None."""
        touched = (["model_init"] if entry.seed_dependent else []) + protocol.seeded_parts()
        return None if touched else cls.cell_key(task, entry, protocol, 0)

    def run(self, task: Task, entry: ModelEntry, protocol: Protocol, seed: int) -> dict[str, Any]:
        """One cell (steps 1-5); returns the row (from the results file when already there)."""
        seed = check_scalar(seed, "seed", int, min=0)
        if not isinstance(protocol, Protocol):
            raise TypeError(f"protocol must be a Protocol, got {type(protocol).__name__}")
        key = self.cell_key(task, entry, protocol, seed)
        self.stats["cells"] += 1
        if key in self._done:
            self.stats["skipped"] += 1
            return self._done[key]
        reuse_key = self.reuse_key(task, entry, protocol)
        if reuse_key is not None and reuse_key in self._reuse:
            self.stats["reused"] += 1
            row = self.reused_row(self._reuse[reuse_key], key, seed)
        else:
            row = self.compute(task, entry, protocol, seed, key)
            if reuse_key is not None:
                self._reuse[reuse_key] = row
        self._append(row)
        self._done[key] = row
        return row

    @staticmethod
    def reused_row(src: dict[str, Any], key: str, seed: int) -> dict[str, Any]:
        """The row of a seed-independent cell for another ``seed``: ``src``'s numbers, recorded as reused."""
        origin = src["reused_from_seed"] if src.get("reused_from_seed") is not None else src["seed"]
        row = dict(src, key=key, seed=seed, reused_from_seed=origin, wall_s=0.0, timestamp=time.time())
        return json.loads(json.dumps(row, sort_keys=True))

    def compute(
        self, task: Task, entry: ModelEntry, protocol: Protocol, seed: int, key: str | None = None
    ) -> dict[str, Any]:
        """Evaluate one cell and build its row (no resume, no reuse, nothing written)."""
        key = key if key is not None else self.cell_key(task, entry, protocol, seed)
        touched = (["model_init"] if entry.seed_dependent else []) + protocol.seeded_parts()
        t0 = time.perf_counter()
        core = self._evaluate(task, entry, protocol, seed)
        core["reused_from_seed"] = None
        if self._git is None:
            from neurips26.harness.run import git_sha  # lazily: the run module is not needed to evaluate

            self._git = git_sha() or "unknown"
        row = {
            "key": key,
            "provenance": "rerun",
            "dataset": task.name,
            "domain": task.domain,
            "task_hash": task.task_hash(),
            "split_hashes": task.split_hashes(),
            "model": entry.name,
            "model_config": list(entry.config),
            "protocol": protocol.nominal,
            "protocol_name": protocol.name,
            "regime": protocol.regime,
            "knobs": protocol.knobs(),
            "seed": seed,
            "seed_touched": touched,
            **{k: v for k, v in core.items() if k != "seed"},
            "metric": task.metric,
            "harness": f"{HARNESS_NAME}@{HARNESS_VERSION}+{protocol.digest()}",
            "git_sha": self._git,
            "versions": {
                "torch": torch.__version__,
                "numpy": np.__version__,
                "python": platform.python_version(),
            },
            "wall_s": time.perf_counter() - t0,
            "timestamp": time.time(),
        }
        return json.loads(json.dumps(row, sort_keys=True))  # the row as stored (and as a resume reads it)

    def run_grid(self, cells: Iterable[tuple[Task, ModelEntry, Protocol, int]]) -> list[dict]:
        return [self.run(*c) for c in cells]

    def run_seeds(
        self, task: Task, entry: ModelEntry, protocol: Protocol, seeds: Sequence[int]
    ) -> dict[str, Any]:
        """One cell over ``seeds``: the rows and mean, std (ddof 1), n — what a paper should report (E4)."""
        seeds = list(seeds)
        if not seeds:
            raise ValueError("seeds must name at least one seed, got an empty list")
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be distinct, got {seeds}")
        rows = [self.run(task, entry, protocol, s) for s in seeds]
        v = np.array([r["value"] for r in rows], dtype=float)
        return {
            "rows": rows,
            "values": v.tolist(),
            "mean": float(v.mean()),
            "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
            "n_seeds": len(v),
        }

    def _append(self, row: dict) -> None:
        if self.results_path is None:
            return
        self.results_path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(row, sort_keys=True) + "\n"
        with open(self.results_path, "a", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    # ------------------------------------------------------------------------------ evaluation
    def _evaluate(self, task: Task, entry: ModelEntry, p: Protocol, seed: int) -> dict[str, Any]:
        tr, va, te = (task.splits[s] for s in ("train", "val", "test"))
        y = task.y
        if p.label_fraction < 1.0:
            tr = label_fraction(y, tr, p.label_fraction, seed)
        if p.kind == "fewshot":
            tr = k_shot(y, tr, p.shots, seed)
        model = self.model(entry, task, seed)
        info: dict[str, Any] = {
            "weights_sha256": model.weights_sha256(),
            "license": model.license,
            "n_train": int(len(tr)),
            "n_val": int(len(va)),
            "n_test": int(len(te)),
        }
        if p.kind == "finetune":
            pred, ft = self._finetune(model, task, p, tr, va, te, seed)
            info.update(ft)
        else:
            f = self.features(model, task, p)
            ftr, fva, fte = f[tr], f[va], f[te]
            info["feature_dim"] = int(f.shape[1])
            info["feature_pca"] = None
            if p.feature_pca is not None and f.shape[1] > p.feature_pca:
                from sklearn.decomposition import PCA

                k = min(p.feature_pca, len(ftr))
                pca = PCA(n_components=k, svd_solver="full").fit(ftr)
                ftr, fva, fte = pca.transform(ftr), pca.transform(fva), pca.transform(fte)
                info["feature_pca"] = int(k)
            ftr, fva, fte = standardise(ftr, fva, fte)
            if p.kind == "knn" or (p.kind == "fewshot" and p.fewshot_probe == "knn"):
                k = min(p.k, len(ftr))
                pred = knn_predict(
                    np.vstack([ftr, fva]) if p.kind == "knn" else ftr,
                    np.r_[y[tr], y[va]] if p.kind == "knn" else y[tr],
                    fte,
                    k=k,
                    metric=p.knn_metric,
                )
                info["k"] = k
            elif p.solver == "lbfgs_sweep":
                probe, sw = sweep(
                    ftr,
                    y[tr],
                    fva,
                    y[va],
                    p.c_grid,
                    merge_val=p.merge_val and p.kind != "fewshot",
                    max_iter=p.max_iter,
                    n_classes=task.n_classes,
                    tol=p.tol,
                )
                pred = probe.predict(fte)
                info.update(best_C=sw["best_C"], c_grid=sw["c_grid"])
            elif p.solver == "fixed_c":
                probe = LogisticProbe(p.fixed_c, p.max_iter, p.tol).fit(
                    np.vstack([ftr, fva]), np.r_[y[tr], y[va]], task.n_classes
                )
                pred = probe.predict(fte)
                info["best_C"] = p.fixed_c
            else:
                probe = sgd_probe(
                    np.vstack([ftr, fva]),
                    np.r_[y[tr], y[va]],
                    task.n_classes,
                    p.sgd_lr,
                    p.sgd_batch,
                    p.sgd_epochs,
                    seed,
                )
                pred = probe.predict(fte)
        correct = (pred == y[te]).astype(float)
        lo, hi = bootstrap_accuracy_ci(correct)
        info.update(value=100.0 * float(correct.mean()), ci_low=100.0 * lo, ci_high=100.0 * hi, seed=seed)
        return info

    def _finetune(self, model: FeatureModel, task: Task, p: Protocol, tr, va, te, seed: int):
        """Full network + linear head, AdamW, lr chosen on val, early stopping on val (patience)."""
        import copy

        import torch.nn as nn
        import torch.nn.functional as F

        if not list(model.parameters()):
            raise ValueError(f"{model.name} has no trainable parameters: fine-tune needs a torch network")
        x = torch.as_tensor(self._inputs(task, p))
        y = torch.as_tensor(task.y)
        with torch.inference_mode():
            dim = model(x[:2], p.pooling).shape[1]
        best = (-1.0, None, None)
        for lr in p.ft_lrs:
            torch.manual_seed(seed)
            net = copy.deepcopy(model)
            head = nn.Linear(dim, task.n_classes)
            opt = torch.optim.AdamW(
                list(net.parameters()) + list(head.parameters()), lr=lr, weight_decay=p.ft_weight_decay
            )
            g = torch.Generator().manual_seed(seed)
            top, bad, state = -1.0, 0, None
            for _ in range(p.ft_epochs):
                net.train()
                perm = torch.as_tensor(tr)[torch.randperm(len(tr), generator=g)]
                for i in range(0, len(perm), p.ft_batch):
                    idx = perm[i : i + p.ft_batch]
                    loss = F.cross_entropy(head(net(x[idx], p.pooling)), y[idx])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                net.eval()
                with torch.inference_mode():
                    acc = float((head(net(x[va], p.pooling)).argmax(1) == y[va]).float().mean())
                if acc > top:
                    top, bad, state = (
                        acc,
                        0,
                        (copy.deepcopy(net.state_dict()), copy.deepcopy(head.state_dict())),
                    )
                else:
                    bad += 1
                    if bad >= p.ft_patience:
                        break
            if top > best[0]:
                best = (top, lr, state)
        net = copy.deepcopy(model)
        head = nn.Linear(dim, task.n_classes)
        net.load_state_dict(best[2][0])
        head.load_state_dict(best[2][1])
        net.eval()
        with torch.inference_mode():
            pred = head(net(x[te], p.pooling)).argmax(1).numpy()
        return pred, {"ft_lr": best[1], "ft_val_acc": best[0]}


def row_without_volatile(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in VOLATILE_ROW_FIELDS}
