"""The audit's records: one ``PaperRecord`` per audited paper, one ``ResultRecord`` per reported number.

The fields mirror the authors' extraction (``extracted_info.jsonl`` / ``reported_numbers.jsonl`` of
taylor-geospatial/gfm-leaderboard) plus the NEW provenance fields the paper's expectation 3 asks for
(``provenance``, ``copied_from``, ``n_seeds``, ``std``/``ci_*``, ``harness``) and the tags the data rule
needs (``synthetic``, ``note``). Rules checked (every violation is reported, with row and field):

1. types and enums (``metric_name``, ``metric_scale``, ``provenance``, ``train_regime`` pattern);
2. ``metric_value`` finite; for bounded metrics (all but rmse, r2, other) within [0, 100] on the
   percent scale and [0, 1] on the fraction scale; ``ci_low <= value <= ci_high``;
3. ``copied_from`` given iff ``provenance == "copied"``;
4. across rows: unique ``paper_id`` (papers); unique result key (``RESULT_KEY``); every result's
   ``paper_id`` names a known paper (when papers are given).

Values are normalised to points (0-100) by ``ResultRecord.points``.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

METRICS = (
    "accuracy",
    "accuracy_macro",
    "f1",
    "f1_macro",
    "miou",
    "iou",
    "kappa",
    "map",
    "map50",
    "map75",
    "micro_map",
    "rmse",
    "r2",
    "other",
)
UNBOUNDED_METRICS = frozenset({"rmse", "r2", "other"})
LOWER_IS_BETTER = frozenset({"rmse"})
PROVENANCE = ("own", "rerun", "copied", "unknown")
REGIME_RE = re.compile(r"^(full|\d+(\.\d+)?%|\d+-shot)$")
RESULT_KEY = (
    "paper_id",
    "model_name_raw",
    "benchmark_name_raw",
    "metric_name",
    "evaluation_strategy",
    "train_regime",
    "table_ref",
)
SPDX_RE = re.compile(r"^[A-Za-z0-9.+-]+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Architecture(_Strict):
    backbone: str | None = None
    type: str | None = None
    params_millions: float | None = Field(default=None, ge=0)
    notes: str | None = None


class Pretraining(_Strict):
    method: str | None = None
    method_details: str | None = None
    objective: str | None = None
    is_self_supervised: bool | None = None
    is_vision_language: bool | None = None


class PretrainingData(_Strict):
    datasets: list[str] = Field(default_factory=list)
    sensors: list[str] = Field(default_factory=list)
    modalities: list[str] = Field(default_factory=list)
    num_images: str | int | None = None
    spatial_resolution: str | None = None
    geographic_coverage: str | None = None


class Control(_Strict):
    """A controlled comparison inside a paper (expectation E6): rows differing in one factor only."""

    varied: Literal["data", "architecture", "algorithm"]
    rows: list[str] = Field(default_factory=list)


class PaperRecord(_Strict):
    """One audited paper. Only paper_id, title, year and citation are required (citation-only records)."""

    paper_id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    year: int = Field(ge=1990, le=2100)
    citation: str = Field(min_length=1)
    model_name: str | None = None
    architecture: Architecture | None = None
    pretraining: Pretraining | None = None
    pretraining_data: PretrainingData | None = None
    downstream_datasets: list[str] | None = None
    code_available: bool | None = None
    weights_available: bool | None = None
    weights_license: str | None = None  # SPDX id | "none" | "unspecified" (NEW)
    weights_url: str | None = None
    synthetic: bool = False
    note: str | None = None
    controls: list[Control] | None = None

    @field_validator("weights_license")
    @classmethod
    def _license(cls, v: str | None) -> str | None:
        if v is not None and not SPDX_RE.match(v):
            raise ValueError(f"must be an SPDX id, 'none' or 'unspecified', got {v!r}")
        return v

    @property
    def citation_only(self) -> bool:
        """No model or dataset fields: excluded from corpus statistics."""
        return (
            self.model_name is None
            and self.pretraining_data is None
            and not self.downstream_datasets
            and self.pretraining is None
            and self.architecture is None
        )


class ResultRecord(_Strict):
    """One reported number."""

    paper_id: str = Field(min_length=1)
    model_name_raw: str
    model_name: str | None = None
    benchmark_name_raw: str
    benchmark_name: str | None = None
    metric_name: Literal[METRICS]  # type: ignore[valid-type]
    metric_value: float
    metric_scale: Literal["percent", "fraction"] = "percent"
    higher_is_better: bool | None = None
    evaluation_strategy: str = ""
    train_regime: str = "full"
    num_training_samples: str | int | None = None
    split: str | None = None
    provenance: Literal[PROVENANCE] = "unknown"  # type: ignore[valid-type]
    copied_from: str | None = None
    n_seeds: int | None = Field(default=None, ge=1)
    std: float | None = Field(default=None, ge=0)
    ci_low: float | None = None
    ci_high: float | None = None
    harness: str | None = None
    table_ref: str | None = None
    synthetic: bool = False
    note: str | None = None

    @field_validator("metric_value")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError(f"must be a finite number, got {v!r}")
        return v

    @field_validator("train_regime")
    @classmethod
    def _regime(cls, v: str) -> str:
        if not REGIME_RE.match(v):
            raise ValueError(
                f"must be 'full', a label fraction like '10%' or 'k-shot' like '5-shot', got {v!r}"
            )
        return v

    @model_validator(mode="after")
    def _cross_field(self) -> "ResultRecord":
        if self.metric_name not in UNBOUNDED_METRICS:
            hi = 100.0 if self.metric_scale == "percent" else 1.0
            if not 0.0 <= self.metric_value <= hi:
                raise ValueError(
                    f"metric_value: {self.metric_value} is outside [0, {hi:g}] for a "
                    f"{self.metric_scale} {self.metric_name}"
                )
        if self.ci_low is not None and self.ci_low > self.metric_value:
            raise ValueError(f"ci_low: {self.ci_low} > metric_value {self.metric_value}")
        if self.ci_high is not None and self.ci_high < self.metric_value:
            raise ValueError(f"ci_high: {self.ci_high} < metric_value {self.metric_value}")
        if self.provenance == "copied" and not self.copied_from:
            raise ValueError("copied_from: required when provenance is 'copied'")
        if self.provenance != "copied" and self.copied_from:
            raise ValueError(
                f"copied_from: given ({self.copied_from!r}) but provenance is {self.provenance!r}"
            )
        if self.higher_is_better is None:
            self.higher_is_better = self.metric_name not in LOWER_IS_BETTER
        return self

    @property
    def points(self) -> float:
        """The value on the 0-100 points scale (fractions of bounded metrics times 100)."""
        if self.metric_scale == "fraction" and self.metric_name not in UNBOUNDED_METRICS:
            return self.metric_value * 100.0
        return self.metric_value

    def key(self) -> tuple:
        return tuple(getattr(self, f) for f in RESULT_KEY)


# ----------------------------------------------------------------------------------------- validation


@dataclass(frozen=True)
class Violation:
    row: int  # 1-based row (JSONL line / CSV data row / list position)
    field: str
    message: str

    def __str__(self) -> str:
        return f"row {self.row}, field {self.field!r}: {self.message}"


class RecordValidationError(ValueError):
    """Every violation of a table, each naming its row and field."""

    def __init__(self, what: str, violations: Sequence[Violation]):
        self.violations = list(violations)
        shown = "\n  ".join(str(v) for v in self.violations[:50])
        more = f"\n  ... and {len(self.violations) - 50} more" if len(self.violations) > 50 else ""
        super().__init__(f"{what}: {len(self.violations)} violation(s)\n  {shown}{more}")


def _field_of(err: dict, fallback: str = "<record>") -> str:
    loc = [str(x) for x in err.get("loc", ())]
    if loc:
        return ".".join(loc)
    msg = str(err.get("msg", ""))
    m = re.match(r"Value error, (\w+):", msg)
    return m.group(1) if m else fallback


def _parse(
    cls: type[BaseModel], rows: Sequence[Any], rownums: Sequence[int] | None = None
) -> tuple[list[Any], list[Violation]]:
    out, bad = [], []
    nums = list(rownums) if rownums is not None else list(range(1, len(rows) + 1))
    for i, raw in zip(nums, rows):
        if isinstance(raw, cls):
            out.append(raw)
            continue
        if not isinstance(raw, dict):
            bad.append(Violation(i, "<record>", f"must be an object, got {type(raw).__name__}"))
            continue
        try:
            out.append(cls.model_validate(raw))
        except ValidationError as e:
            for err in e.errors():
                msg = str(err["msg"]).removeprefix("Value error, ")
                bad.append(Violation(i, _field_of(err), msg))
    return out, bad


def validate_papers(rows: Sequence[Any], rownums: Sequence[int] | None = None) -> list[PaperRecord]:
    """``PaperRecord``s from dicts; raises ``RecordValidationError`` listing every violation."""
    papers, bad = _parse(PaperRecord, rows, rownums)
    nums = list(rownums) if rownums is not None else list(range(1, len(rows) + 1))
    seen: dict[str, int] = {}
    for n, raw in zip(nums, rows):
        pid = raw.get("paper_id") if isinstance(raw, dict) else getattr(raw, "paper_id", None)
        if pid in seen:
            bad.append(Violation(n, "paper_id", f"duplicate paper_id {pid!r} (first at row {seen[pid]})"))
        elif pid is not None:
            seen[pid] = n
    if bad:
        raise RecordValidationError("papers", sorted(bad, key=lambda v: v.row))
    return papers


def validate_results(
    rows: Sequence[Any], papers: Iterable[PaperRecord] | None = None, rownums: Sequence[int] | None = None
) -> list[ResultRecord]:
    """``ResultRecord``s from dicts; raises ``RecordValidationError`` listing every violation.

    With ``papers``, every ``paper_id`` (and ``copied_from``) must name one of them.
    """
    nums = list(rownums) if rownums is not None else list(range(1, len(rows) + 1))
    results, bad = [], []
    seen: dict[tuple, int] = {}
    known = {p.paper_id for p in papers} if papers is not None else None
    for n, raw in zip(nums, rows):
        got, errs = _parse(ResultRecord, [raw], [n])
        bad += errs
        if not got:
            pid = raw.get("paper_id") if isinstance(raw, dict) else None
            if known is not None and isinstance(pid, str) and pid and pid not in known:
                bad.append(Violation(n, "paper_id", f"unknown paper_id {pid!r} (not in the papers table)"))
            continue
        r = got[0]
        k = r.key()
        if k in seen:
            bad.append(
                Violation(n, "<key>", f"duplicate result {dict(zip(RESULT_KEY, k))} (first at row {seen[k]})")
            )
        else:
            seen[k] = n
        if known is not None:
            if r.paper_id not in known:
                bad.append(
                    Violation(n, "paper_id", f"unknown paper_id {r.paper_id!r} (not in the papers table)")
                )
            if r.copied_from and r.copied_from not in known:
                bad.append(Violation(n, "copied_from", f"unknown paper_id {r.copied_from!r}"))
        results.append(r)
    if bad:
        raise RecordValidationError("results", sorted(bad, key=lambda v: v.row))
    return results


def json_schema(kind: str = "result") -> dict:
    """The JSON Schema of ``PaperRecord`` (``kind="paper"``) or ``ResultRecord`` (``"result"``)."""
    from neurips26.harness.validation import check_choice

    check_choice(kind, "kind", ("paper", "result"))
    return (PaperRecord if kind == "paper" else ResultRecord).model_json_schema()


# ----------------------------------------------------------------------------------------------- I/O


def _suffix(path: Path) -> str:
    s = path.suffix.lower()
    if s not in (".jsonl", ".csv", ".parquet"):
        raise ValueError(f"path must end in .jsonl, .csv or .parquet, got {str(path)!r}")
    return s


def read_rows(path: Path | str) -> tuple[list[Any], list[int]]:
    """Raw dict rows of a JSONL/CSV/Parquet table and their 1-based row numbers.

    An unreadable JSONL line raises ``RecordValidationError`` naming every bad line; nested fields in
    CSV/Parquet cells are JSON text; an empty cell is null.
    """
    path = Path(path)
    kind = _suffix(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such table: {str(path)!r}")
    if kind == ".jsonl":
        rows, nums, bad = [], [], []
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                bad.append(Violation(i, "<json>", f"unreadable JSON line: {e.msg} at column {e.colno}"))
                continue
            if not isinstance(obj, dict):
                bad.append(Violation(i, "<json>", f"line must hold a JSON object, got {type(obj).__name__}"))
                continue
            rows.append(obj)
            nums.append(i)
        if bad:
            raise RecordValidationError(str(path), bad)
        return rows, nums
    if kind == ".csv":
        with path.open(newline="", encoding="utf-8") as f:
            raw = list(csv.DictReader(f))
        return [_uncell(r) for r in raw], list(range(1, len(raw) + 1))
    import pyarrow.parquet as pq

    raw = pq.read_table(path).to_pylist()
    return [_uncell(r) for r in raw], list(range(1, len(raw) + 1))


def _uncell(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if v is None or (isinstance(v, str) and v == ""):
            continue
        if isinstance(v, str) and v[:1] in "[{":
            try:
                v = json.loads(v)
            except json.JSONDecodeError:
                pass
        elif isinstance(v, str) and v in ("true", "false", "True", "False"):
            v = v.lower() == "true"
        out[k] = v
    return out


def _cell(v: Any) -> Any:
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return v


def write_records(records: Sequence[BaseModel], path: Path | str) -> Path:
    """Write records as JSONL, CSV or Parquet (by suffix); written to a temp file, then renamed."""
    path = Path(path)
    kind = _suffix(path)
    dicts = [r.model_dump(mode="json", exclude_none=True) for r in records]
    tmp = path.with_name(f".{path.name}.tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == ".jsonl":
        tmp.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in dicts), encoding="utf-8")
    else:
        cols = list(dict.fromkeys(k for d in dicts for k in d))
        flat = [{c: _cell(d.get(c)) for c in cols} for d in dicts]
        if kind == ".csv":
            with tmp.open("w", newline="", encoding="utf-8") as f:
                w = csv.DictWriter(f, fieldnames=cols)
                w.writeheader()
                w.writerows(flat)
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            # every cell as text (nested fields as JSON), so a column may mix ints and strings
            text = {
                c: [
                    None
                    if r[c] is None
                    else (
                        r[c]
                        if isinstance(r[c], str)
                        else repr(r[c])
                        if isinstance(r[c], float)
                        else str(r[c])
                    )
                    for r in flat
                ]
                for c in cols
            }
            pq.write_table(pa.table({c: pa.array(v, type=pa.string()) for c, v in text.items()}), tmp)
    tmp.replace(path)
    return path


def load_papers(path: Path | str) -> list[PaperRecord]:
    rows, nums = read_rows(path)
    return validate_papers(rows, nums)


def load_results(path: Path | str, papers: Iterable[PaperRecord] | None = None) -> list[ResultRecord]:
    rows, nums = read_rows(path)
    return validate_results(rows, papers, nums)
