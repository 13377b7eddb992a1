"""The README's code blocks run (in a scratch folder), and its tables are the generated blocks."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "src" / "neurips26" / "nas" / "README.md"
TEXT = README.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)


def test_readme_has_code_and_generated_tables():
    assert BLOCKS, "the README shows how to use the API"
    for name in ("claims", "bench"):
        assert f"<!-- neurips26:{name} -->" in TEXT and f"<!-- /neurips26:{name} -->" in TEXT
    assert "python -m neurips26" not in TEXT     # commands are `neurips26 run nas ...`


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_block_runs(i, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(BLOCKS[i], f"{README.name} block {i}", "exec"), {"__name__": "__readme__"})
