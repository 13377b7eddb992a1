"""The contract every implemented paper keeps (new folders get this test for free).

- ``CONFIGS`` has the scales ``smoke``, ``quick`` and ``full``, each a dataclass;
- ``smoke`` runs (in seconds) and writes a schema-valid result.json whose verdicts are computed;
- the same seed gives the same metrics (wall-clock metrics listed in ``VOLATILE_METRICS`` aside);
- ``bench`` at ``smoke`` scale returns well-formed rows (a missing anchor says why);
- no module outside the harness uses a private name of the harness.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import math
import os
from pathlib import Path

import pytest

from neurips26.harness import registry
from neurips26.harness.paper import VERDICTS
from neurips26.harness.run import REQUIRED_SCALES, bench_paper, load_result, run_paper

SRC = Path(__file__).resolve().parents[2] / "src" / "neurips26"
# folders still being moved onto the smoke scale / bench helper (issue 27); must end empty.
# NEURIPS26_CONTRACT_ALL=1 runs them anyway (for the engineer moving one).
_MIGRATING: set[str] = set() if os.environ.get("NEURIPS26_CONTRACT_ALL") else set()
IMPLEMENTED = [pytest.param(p.slug, marks=pytest.mark.skip(reason="moving onto the smoke contract"))
               if p.slug in _MIGRATING else p.slug for p in registry.PAPERS if p.implemented]


def _load(slug: str, sub: str):
    try:
        return registry.load(slug, sub)
    except registry.MissingExtraError as e:
        pytest.skip(str(e))


def _flatten(obj, prefix=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flatten(v, f"{prefix}{k}.")
    else:
        yield prefix[:-1], obj


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_configs_have_required_scales(slug):
    exp = _load(slug, "experiment")
    missing = [s for s in REQUIRED_SCALES if s not in exp.CONFIGS]
    assert not missing, f"{slug}.experiment.CONFIGS lacks {missing}"
    for scale, cfg in exp.CONFIGS.items():
        assert dataclasses.is_dataclass(cfg) and not isinstance(cfg, type), \
            f"{slug} CONFIGS[{scale!r}] must be a dataclass instance"
    ids = [c.id for c in exp.CLAIMS]
    assert ids and len(ids) == len(set(ids))


@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_smoke_runs_and_is_deterministic(slug, tmp_path):
    exp = _load(slug, "experiment")
    a = run_paper(slug, "smoke", seed=0, out=tmp_path / "a", progress=False)
    assert load_result(tmp_path / "a" / "result.json")["paper"] == slug
    assert [c["id"] for c in a["claims"]] == [c.id for c in exp.CLAIMS]
    assert all(c["verdict"] in VERDICTS and c["measured"] for c in a["claims"])
    b = run_paper(slug, "smoke", seed=0, out=tmp_path / "b", progress=False)
    volatile = tuple(getattr(exp, "VOLATILE_METRICS", ()))
    fa, fb = dict(_flatten(a["metrics"])), dict(_flatten(b["metrics"]))
    keep = [k for k in fa if not any(fnmatch.fnmatchcase(k, pat) for pat in volatile)]
    assert set(fa) == set(fb), f"{slug}: metric keys differ between two runs of the same seed"
    differ = [k for k in keep if not _same(fa[k], fb[k])]
    assert not differ, f"{slug}: same seed, different metrics at {differ[:5]} (wall-clock? list in VOLATILE_METRICS)"


@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_bench_rows_well_formed(slug, tmp_path):
    _load(slug, "bench")
    res = bench_paper(slug, tmp_path, progress=False, scale="smoke")
    assert res["rows"], f"{slug}: bench returned no rows"
    for row in res["rows"]:
        assert isinstance(row["name"], str) and row["name"]
        assert isinstance(row["ours"], (int, float)) and math.isfinite(row["ours"]), row
        assert row["better"] in ("lower", "higher") and row["unit"]
        if row["anchor"] is None:
            assert row["ratio"] is None and row["note"], f"{slug}: row {row['name']!r} has no anchor and no why"
        else:
            assert math.isfinite(row["anchor"])


def _private_harness_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("neurips26.harness"):
            bad += [f"{path.name}:{node.lineno} {a.name}" for a in node.names if a.name.startswith("_")]
    return bad


def test_no_harness_private_names_outside_the_harness():
    bad = []
    for path in SRC.rglob("*.py"):
        if "harness" not in path.relative_to(SRC).parts:
            bad += _private_harness_uses(path)
    assert not bad, f"private harness names used outside the harness: {bad}"


def test_independence_contract_covers_every_package():
    """The import contract names papers by wildcard, so a new folder is covered without an edit."""
    import tomllib

    cfg = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())
    contracts = cfg["tool"]["importlinter"]["contracts"]
    assert any(c["type"] == "independence" and "neurips26.*" in c["modules"] for c in contracts)
    assert any(c["type"] == "acyclic_siblings" for c in contracts)
