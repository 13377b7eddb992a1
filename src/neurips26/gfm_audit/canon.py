"""Canonical names: slugs, the alias table, exclusion lists, evaluation-strategy normalisation.

Rules (faithful to the authors' ``aliases.py`` / ``norm_eval``):

1. ``slug(s)``: lowercase, drop every parenthesised part, delete every char not in ``[a-z0-9+]``.
2. ``AliasTable.canonical(raw, context)``: empty slug -> None; the slug in the *always* exclusion
   list, or in the list of the context (``downstream`` / ``pretrain``) -> None (dropped); the slug in
   the alias table -> its canonical name; else the same two steps on the raw string with its
   parenthesised parts stripped; else the stripped raw string itself.
3. ``normalise_eval(s)``: lowercase and delete every non-``[a-z0-9]`` char (parenthesised text is
   KEPT), then the first substring of ``EVAL_RULES`` found decides; none -> ``other``; empty ->
   ``unknown``. Paper mode keeps the authors' quirks ("5-shot" -> other, bare "Linear" -> other);
   ``paper_mode=False`` adds ``\\d+shot`` -> fewshot and ``linear``/``logistic`` -> linear.

The alias table is data: a CSV ``raw,canonical,context`` (context: ``any``, ``downstream``,
``pretrain``, ``model``, or one of the exclusion kinds ``exclude``, ``exclude_downstream``,
``exclude_pretrain`` with an empty canonical). ``default_aliases()`` loads our small table
(``data/aliases.csv``); a user edits a copy or converts the authors' tables to this format.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from neurips26.harness.validation import check_choice

_PAREN = re.compile(r"\s*\([^)]*\)\s*")
_NOT_SLUG = re.compile(r"[^a-z0-9+]+")
_NOT_EVAL = re.compile(r"[^a-z0-9]+")
DATA_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_ALIASES = DATA_DIR / "aliases.csv"
CONTEXTS = ("downstream", "pretrain", "model")
ALIAS_KINDS = (
    "any",
    "downstream",
    "pretrain",
    "model",
    "exclude",
    "exclude_downstream",
    "exclude_pretrain",
    "sensor",
    "downstream_only",
)

# authors' EVAL_NORM, in order: the first key whose squashed form is a substring wins
EVAL_RULES: tuple[tuple[str, str], ...] = (
    ("fullfinetuning", "finetune"),
    ("finetune", "finetune"),
    ("finetuning", "finetune"),
    ("linearprobe", "linear"),
    ("linearprobing", "linear"),
    ("frozen", "linear"),
    ("knn", "knn"),
    ("zeroshot", "zeroshot"),
    ("fewshot", "fewshot"),
)
EVAL_CATEGORIES = ("finetune", "linear", "knn", "zeroshot", "fewshot", "other", "unknown")
_EXT_SHOT = re.compile(r"\d+shot")


def slug(s: str | None) -> str:
    """``"Scale-MAE (ViT-L)"`` -> ``"scalemae"``."""
    s = _PAREN.sub(" ", (s or "").lower())
    return _NOT_SLUG.sub("", s)


def strip_paren(s: str | None) -> str:
    """``"Sentinel-2 (SatlasPretrain)"`` -> ``"Sentinel-2"``."""
    return _PAREN.sub(" ", s or "").strip()


def normalise_eval(s: str | None, paper_mode: bool = True) -> str:
    """Evaluation-strategy category of a raw string (see rule 3 of the module docstring)."""
    if not s or not s.strip():
        return "unknown"
    s2 = _NOT_EVAL.sub("", s.strip().lower())
    if not s2:
        return "unknown"
    for key, cat in EVAL_RULES:
        if key in s2:
            return cat
    if not paper_mode:
        if _EXT_SHOT.search(s2):
            return "fewshot"
        if "linear" in s2 or "logistic" in s2:
            return "linear"
    return "other"


@dataclass
class AliasTable:
    """slug -> canonical name per context, plus the three exclusion slug sets and sensor names."""

    aliases: dict[str, dict[str, str]] = field(default_factory=dict)  # context -> slug -> canonical
    exclude: set[str] = field(default_factory=set)
    exclude_downstream: set[str] = field(default_factory=set)
    exclude_pretrain: set[str] = field(default_factory=set)
    sensors: set[str] = field(default_factory=set)
    downstream_only: set[str] = field(default_factory=set)  # raw names of benchmarks never used to pretrain

    @classmethod
    def from_csv(cls, path: Path | str) -> "AliasTable":
        """Read ``raw,canonical,context`` rows; an unknown context or a missing canonical names its row."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"aliases: no such file {str(path)!r}")
        table = cls()
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = {"raw", "canonical", "context"} - set(reader.fieldnames or ())
            if missing:
                raise ValueError(
                    f"aliases {str(path)!r}: header must have raw,canonical,context; "
                    f"missing {sorted(missing)}"
                )
            for i, row in enumerate(reader, 2):
                raw, canon, ctx = (
                    (row["raw"] or "").strip(),
                    (row["canonical"] or "").strip(),
                    (row["context"] or "any").strip() or "any",
                )
                if ctx not in ALIAS_KINDS:
                    raise ValueError(
                        f"aliases {str(path)!r} line {i}: context must be one of {ALIAS_KINDS}, got {ctx!r}"
                    )
                if not raw:
                    raise ValueError(f"aliases {str(path)!r} line {i}: raw is empty")
                table.add(raw, canon, ctx, where=f"line {i}")
        return table

    def add(self, raw: str, canonical: str, context: str = "any", where: str = "") -> None:
        check_choice(context, "context", ALIAS_KINDS)
        key = slug(raw)
        if context == "downstream_only":
            self.downstream_only.add(raw)
            return
        if context in ("exclude", "exclude_downstream", "exclude_pretrain", "sensor"):
            {
                "exclude": self.exclude,
                "exclude_downstream": self.exclude_downstream,
                "exclude_pretrain": self.exclude_pretrain,
                "sensor": self.sensors,
            }[context].add(key)
            return
        if not canonical:
            raise ValueError(f"aliases {where}: canonical is empty for {raw!r}")
        self.aliases.setdefault(context, {})[key] = canonical

    def _lookup(self, key: str, context: str) -> str | None:
        for ctx in (context, "any"):
            hit = self.aliases.get(ctx, {}).get(key)
            if hit is not None:
                return hit
        return None

    def _excluded(self, key: str, context: str) -> bool:
        return (
            key in self.exclude
            or (context == "downstream" and key in self.exclude_downstream)
            or (context == "pretrain" and key in self.exclude_pretrain)
        )

    def canonical(self, raw: str | None, context: str = "downstream") -> str | None:
        """Canonical name of ``raw`` in ``context`` (``downstream``, ``pretrain`` or ``model``), or None."""
        check_choice(context, "context", CONTEXTS)
        if not raw:
            return None
        key = slug(raw)
        if not key or self._excluded(key, context):
            return None
        hit = self._lookup(key, context)
        if hit is not None:
            return hit
        stripped = strip_paren(raw)
        if stripped != raw:
            key2 = slug(stripped)
            if self._excluded(key2, context):
                return None
            hit = self._lookup(key2, context)
            if hit is not None:
                return hit
        return stripped or raw.strip()

    def downstream_only_canonical(self) -> set[str]:
        """Canonical names of the downstream-only benchmarks (dropped from pretraining sets)."""
        return {c for x in self.downstream_only if (c := self.canonical(x, "downstream"))}

    def is_sensor_only(self, raw: str | None) -> bool:
        """True iff ``raw`` is a bare sensor name (``"Sentinel-2"``, ``"Sentinel-2 (L2A)"``)."""
        if not raw:
            return False
        if slug(raw) in self.sensors:
            return True
        stripped = strip_paren(raw)
        return stripped != raw and slug(stripped) in self.sensors


def default_aliases() -> AliasTable:
    """Our small default table (RESISC45, UC Merced, EuroSAT, GEO-Bench variants, the example's raw names)."""
    return AliasTable.from_csv(DEFAULT_ALIASES)


def load_aliases(path: Path | str | None) -> AliasTable:
    return default_aliases() if path is None else AliasTable.from_csv(path)
