"""Every implemented paper's README: generated tables, runnable code, commands that exist.

- the claims and bench tables sit between the generated markers (``neurips26 report --readme``);
- every ``python`` block runs as written, in a scratch folder (a block that runs a whole reproduction,
  ``run_paper(``, is in the slow suite); papers whose blocks need a fixture (a user's trace file, a
  sandbox's workspace) run them in their own README test, listed in ``OWN_BLOCK_TEST``;
- every ``neurips26`` command in a ``bash`` block names this paper (or its tool) and a scale it has.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from neurips26.harness import registry

SRC = Path(__file__).resolve().parents[2] / "src" / "neurips26"
PAPERS = [p for p in registry.PAPERS if p.implemented]
OWN_BLOCK_TEST = {"delayed_hits", "ftrl_surplus", "gnn_margin", "nitrobox"}


def _text(slug: str) -> str:
    return (SRC / slug / "README.md").read_text()


def _blocks(slug: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", _text(slug), flags=re.DOTALL)


def _load(slug: str, sub: str = "experiment"):
    try:
        return registry.load(slug, sub)
    except registry.MissingExtraError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("slug", [p.slug for p in PAPERS])
def test_readme_has_generated_tables_and_code(slug):
    text = _text(slug)
    for name in ("claims", "bench"):
        assert f"<!-- neurips26:{name} -->" in text and f"<!-- /neurips26:{name} -->" in text, \
            f"{slug}/README.md lacks the generated {name} block"
    assert _blocks(slug, "python"), f"{slug}/README.md shows no python usage"
    assert "python -m neurips26." not in text or "data fetch" in text, f"{slug}: use `neurips26 run {slug}`"


CASES = [pytest.param(p.slug, i, marks=[pytest.mark.slow] if "run_paper(" in b else [],
                      id=f"{p.slug}-{i}")
         for p in PAPERS if p.slug not in OWN_BLOCK_TEST for i, b in enumerate(_blocks(p.slug, "python"))]


@pytest.mark.parametrize("slug, i", CASES)
def test_readme_python_block_runs(slug, i, tmp_path, monkeypatch):
    _load(slug, "")
    monkeypatch.chdir(tmp_path)
    code = _blocks(slug, "python")[i]
    exec(compile(code, f"{slug}/README.md python block {i}", "exec"), {"__name__": "__readme__"})


@pytest.mark.parametrize("slug", [p.slug for p in PAPERS])
def test_readme_commands_name_this_paper_and_its_scales(slug):
    paper = registry.get(slug)
    cmds = [line.split("#")[0].strip() for b in _blocks(slug, "bash") for line in b.splitlines()]
    runs = [shlex.split(c) for c in cmds if c.startswith("neurips26 ")]
    configs = _load(slug).CONFIGS
    for argv in runs:
        if paper.command and argv[1] == paper.command:
            continue
        assert argv[1] in ("run", "bench", "report", "reproduce", "list"), argv
        if argv[1] in ("run", "bench"):
            assert argv[2] == slug, argv
        if "--scale" in argv:
            assert argv[argv.index("--scale") + 1] in configs, argv
