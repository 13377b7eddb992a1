import re
import subprocess
import sys
from pathlib import Path

import pytest

from neurips26.harness import registry

ROOT = Path(__file__).resolve().parents[2]


def test_nineteen_unique_slugs_matching_the_specs():
    slugs = registry.slugs()
    assert len(slugs) == 19 == len(set(slugs))
    specs = ROOT.parent / "shared" / "papers"
    if specs.is_dir():
        assert set(slugs) == {p.stem for p in specs.glob("*.md")}


def test_status_is_derived_from_the_package():
    for p in registry.PAPERS:
        has_experiment = (ROOT / "src" / "neurips26" / p.slug / "experiment.py").is_file()
        assert p.implemented == has_experiment


def test_unknown_slug_names_known_ones():
    with pytest.raises(registry.UnknownPaperError, match="known slugs"):
        registry.get("nope")
    with pytest.raises(TypeError, match="slug"):
        registry.get(3)


def test_planned_paper_cannot_be_loaded():
    planned = [p for p in registry.PAPERS if not p.implemented]
    if not planned:
        pytest.skip("every paper is implemented")
    with pytest.raises(registry.PaperNotImplementedError):
        registry.load(planned[0].slug)


def test_missing_dependency_names_the_extra(toy_paper, monkeypatch):
    import importlib

    def fake_import(name):
        raise ModuleNotFoundError("No module named 'someheavylib'", name="someheavylib")

    monkeypatch.setattr(importlib, "import_module", fake_import)
    paper = registry.Paper("toy_paper", "t", extra="toyextra")
    monkeypatch.setitem(registry._BY_SLUG, "toy_paper", type(toy_paper)(*paper.__dict__.values()))
    with pytest.raises(registry.MissingExtraError, match=r"neurips26\[toyextra\]"):
        registry.load("toy_paper")


def test_list_is_instant_and_imports_no_paper():
    code = ("import sys; from neurips26.cli import main; main(['list']); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'cvxpy')"
            " or (m.startswith('neurips26.') and m.split('.')[1] in %r)]; "
            "assert not bad, bad" % (registry.slugs(),))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.strip().splitlines()) == 19


def test_readme_table_lists_every_paper_with_its_status():
    readme = (ROOT / "README.md").read_text()
    for p in registry.PAPERS:
        row = re.search(rf"^\|\s*\[?`{p.slug}`.*$", readme, flags=re.M)
        assert row, f"README table lacks {p.slug}"
        assert p.status in row.group(0), f"README says wrong status for {p.slug}"
