"""Converters for the authors' own files (taylor-geospatial/gfm-leaderboard), which a user downloads.

Nothing here ships their data: a user points these at their copies and writes our formats into
``$GFM_AUDIT_DATA`` (``papers.jsonl``, ``results.jsonl``, ``aliases.csv``), which the optional test and the
``paper_counts`` claim read.

- ``papers_from_extracted_info(rows)``: ``extracted_info.jsonl`` records -> ``PaperRecord`` dicts
  (``paper_id`` = ``_source_pdf``, ``citation`` = title + year, fields our schema lacks dropped);
- ``results_from_reported_numbers(rows)``: ``reported_numbers.jsonl`` rows -> ``ResultRecord`` dicts
  (``provenance="unknown"``, metric names outside our enum -> ``other``);
- ``aliases_from_module(path)`` / ``downstream_only_from_analyses(path)``: the alias tables of their
  ``aliases.py`` (imported from the user's copy) and the ``DOWNSTREAM_ONLY_BENCHMARKS`` literal of their
  ``critique_analyses.py`` (read with ``ast``, not executed) -> rows of our alias CSV.
"""

from __future__ import annotations

import ast
import csv
import importlib.util
from pathlib import Path
from typing import Iterable

from neurips26.gfm_audit.schema import (
    METRICS,
    Architecture,
    PaperRecord,
    Pretraining,
    PretrainingData,
    ResultRecord,
)

_KEEP = {
    name: set(m.model_fields)
    for name, m in (
        ("architecture", Architecture),
        ("pretraining", Pretraining),
        ("pretraining_data", PretrainingData),
    )
}


def papers_from_extracted_info(rows: Iterable[dict]) -> list[dict]:
    out = []
    for r in rows:
        d = {
            k: r.get(k)
            for k in (
                "title",
                "year",
                "model_name",
                "downstream_datasets",
                "code_available",
                "weights_available",
            )
        }
        d["paper_id"] = r.get("_source_pdf") or r.get("title")
        d["citation"] = f"{r.get('title')} ({r.get('year')})"
        for k, keep in _KEEP.items():
            v = r.get(k)
            if isinstance(v, dict):
                d[k] = {a: b for a, b in v.items() if a in keep and b is not None}  # null lists -> default []
        d["note"] = "converted from the authors' extracted_info.jsonl"
        out.append({k: v for k, v in d.items() if v is not None})
    return out


def results_from_reported_numbers(rows: Iterable[dict]) -> list[dict]:
    keep = set(ResultRecord.model_fields)
    out = []
    for r in rows:
        d = {k: v for k, v in r.items() if k in keep and v is not None}
        if d.get("metric_name") not in METRICS:
            d["note"] = f"metric {d.get('metric_name')!r} mapped to 'other'"
            d["metric_name"] = "other"
        d.setdefault("model_name_raw", d.get("model_name") or "")
        d.setdefault("benchmark_name_raw", d.get("benchmark_name") or "")
        d["evaluation_strategy"] = str(d.get("evaluation_strategy") or "")
        d["train_regime"] = d.get("train_regime") or "full"
        d["provenance"] = "unknown"
        out.append(d)
    return out


def aliases_from_module(path: Path | str) -> list[tuple[str, str, str]]:
    """``(raw, canonical, context)`` rows from a copy of the authors' ``aliases.py``."""
    spec = importlib.util.spec_from_file_location("_gfm_authors_aliases", str(path))
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"aliases_from_module: cannot load {str(path)!r}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = [(k, v, "any") for k, v in mod.DATASET_ALIASES.items()]  # keys are already slugs
    rows += [(s, "", "sensor") for s in mod.SENSOR_CANONICAL]
    rows += [(s, "", "exclude") for s in mod.ALWAYS_EXCLUDE_DATASETS]
    rows += [(s, "", "exclude_downstream") for s in mod.DOWNSTREAM_EXCLUDE_DATASETS]
    rows += [(s, "", "exclude_pretrain") for s in mod.PRETRAIN_EXCLUDE_DATASETS]
    return rows


def downstream_only_from_analyses(path: Path | str) -> list[tuple[str, str, str]]:
    tree = ast.parse(Path(path).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "DOWNSTREAM_ONLY_BENCHMARKS" for t in node.targets
        ):
            return [(s, "", "downstream_only") for s in sorted(ast.literal_eval(node.value))]
    raise ValueError(f"{str(path)!r} has no DOWNSTREAM_ONLY_BENCHMARKS literal")


def write_alias_csv(rows: Iterable[tuple[str, str, str]], path: Path | str) -> Path:
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["raw", "canonical", "context"])
        w.writerows(rows)
    return path


__all__ = [
    "papers_from_extracted_info",
    "results_from_reported_numbers",
    "aliases_from_module",
    "downstream_only_from_analyses",
    "write_alias_csv",
    "PaperRecord",
]
